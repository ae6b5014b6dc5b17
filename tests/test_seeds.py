"""Several seeds in one process (--seeds): each seed's curves, files and checkpoints are those of running it alone."""
import json
import shutil

import numpy as np
import pytest
import torch

import DASE_main
import sac_main
from utils.cli import main_guard, seed_list
from utils.errors import UsageError
from utils.run import RunConfig, Trainer, train

SMALL = dict(env="Pendulum-v1", max_time_steps=600, start_time_steps=200, eval_freq=200, eval_episodes=2,
             batch_size=32, quiet=True, checkpoint_freq=0)
POLICIES = {
    "DASE_TD3": dict(num_agents=2, algo={"hidden": (32, 32)}),
    "TD3": dict(num_agents=1, algo={"hidden": (32, 32)}),
    "DASE_SAC": dict(num_agents=2, algo={"policy_type": "Gaussian", "hidden_size": 32}),
    "DASE_DDPG": dict(num_agents=3, algo={}),
    "DPD_TD3": dict(num_agents=2, algo={"hidden": (32, 32)}, sharing={"dpd_batch_size": 24}),
    # graphs: sampling by neighbour, diffusion with link drops from the agents' own streams
    "DASE_TD3 star": dict(policy="DASE_TD3", num_agents=3, algo={"hidden": (32, 32)}, sharing={"topology": "star"}),
    "DIFF_TD3 ring, drops": dict(policy="DIFF_TD3", num_agents=4, algo={"hidden": (32, 32)},
                                 sharing={"topology": "ring", "link_drop": 0.25}),
    # discrete SAC: categorical exploration from the agents' own streams, behaviour probabilities in the buffer
    "DASE_SAC CartPole": dict(policy="DASE_SAC", env="CartPole-v1", num_agents=2, algo={"hidden_size": 32}),
}


def config(name, results, **kw) -> RunConfig:
    return RunConfig(results_dir=str(results), **{"policy": name, **SMALL, **POLICIES[name], **kw})


def assert_same(a, b, path="state"):
    """Recursive equality of checkpoint contents: tensors bit for bit, everything else =="""
    if isinstance(a, dict) and not path.endswith(".config"):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif path.endswith(".config"):  # the run's settings, but for where its files went
        assert {**a, "results_dir": None} == {**b, "results_dir": None}, path
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif torch.is_tensor(a):
        assert a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.nan_to_num(7.5), b.nan_to_num(7.5)) \
            and torch.equal(a.isnan(), b.isnan()), path
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    else:  # NaN: a weight-curve entry without updates
        assert a == b or (isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b)), path


@pytest.mark.parametrize("policy", list(POLICIES))
def test_seeds_in_one_process_equal_separate_runs(policy, tmp_path):
    together = train(config(policy, tmp_path / "together", seeds=[3, 8], seed=3))
    n = POLICIES[policy]["num_agents"]
    assert len(together) == 2 * n
    for k, seed in enumerate([3, 8]):
        alone = train(config(policy, tmp_path / f"alone{seed}", seed=seed))
        for a, b in zip(alone, together[k * n:(k + 1) * n]):
            assert a.shape == (4,)
            np.testing.assert_array_equal(a, b)  # bit for bit on CPU
        for name in sorted(p.name for p in (tmp_path / f"alone{seed}").iterdir()):
            if name.endswith(".npy"):  # the same file names, the same bytes
                assert (tmp_path / "together" / name).read_bytes() == (tmp_path / f"alone{seed}" / name).read_bytes()
        stem = config(policy, tmp_path, seed=seed).stem
        rec_alone = json.loads((tmp_path / f"alone{seed}" / f"{stem}.json").read_text())
        rec_together = json.loads((tmp_path / "together" / f"{stem}.json").read_text())
        for rec in (rec_alone, rec_together):
            rec["config"].pop("results_dir")
        assert rec_alone["config"] == rec_together["config"]  # each seed records the config of its own run
        assert rec_together["seeds_in_process"] == [3, 8]
    assert not np.array_equal(together[0], together[n])  # different seeds, different runs


@pytest.mark.parametrize("policy", ["DASE_TD3", "DPD_TD3", "DIFF_TD3 ring, drops", "DASE_SAC CartPole"])
def test_checkpoints_of_seeds_together_are_those_of_seeds_alone_and_resume_either_way(policy, tmp_path):
    full = {s: train(config(policy, tmp_path / f"full{s}", seed=s)) for s in (1, 2)}
    ckpt = dict(checkpoint_freq=100, max_time_steps=600)
    Trainer(config(policy, tmp_path / "together", seeds=[1, 2], seed=1, **ckpt)).run(stop_at=300)
    for s in (1, 2):
        Trainer(config(policy, tmp_path / f"alone{s}", seed=s, **ckpt)).run(stop_at=300)
        name = f"checkpoints/{config(policy, tmp_path, seed=s).stem}.pt"
        assert_same(torch.load(tmp_path / f"alone{s}" / name, weights_only=True),
                    torch.load(tmp_path / "together" / name, weights_only=True))
    # the seeds' checkpoints continue as one process; the one-process checkpoints continue seed by seed
    shutil.copytree(tmp_path / "alone2", tmp_path / "alone1", dirs_exist_ok=True)
    resumed = train(config(policy, tmp_path / "alone1", seeds=[1, 2], seed=1, resume=True, **ckpt))
    for a, b in zip(resumed, full[1] + full[2]):
        np.testing.assert_array_equal(a, b)
    for s in (1, 2):
        resumed = train(config(policy, tmp_path / "together", seed=s, resume=True, **ckpt))
        for a, b in zip(resumed, full[s]):
            np.testing.assert_array_equal(a, b)


def test_finished_seeds_are_skipped_and_unequal_steps_refused(tmp_path, capsys):
    train(config("TD3", tmp_path, seed=0))
    curves = train(config("TD3", tmp_path, seeds=[0, 1], seed=0, resume=True, quiet=False))
    assert "TD3_Pendulum-v1_0 | already complete" in capsys.readouterr().out
    np.testing.assert_array_equal(curves[1], train(config("TD3", tmp_path / "one", seed=1))[0])
    # seed 2 stopped at step 400, seed 3 never ran: one process cannot continue both
    Trainer(config("TD3", tmp_path, seed=2, checkpoint_freq=100)).run(stop_at=400)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(UsageError, match="different steps"):
        Trainer(config("TD3", tmp_path, seeds=[2, 3], seed=2, resume=True, checkpoint_freq=100)).run()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, nothing deleted


def test_seed_lists_and_ranges():
    assert seed_list(["0-3", "7"]) == [0, 1, 2, 3, 7]
    assert seed_list(["5"]) == [5]
    for bad in (["3-1"], ["a"], ["-1"], ["0-2", "2"]):
        with pytest.raises(UsageError):
            seed_list(bad)


@pytest.mark.parametrize("module,args,needle", [
    (DASE_main, ["--seeds", "0-2", "1"], "twice"),
    (DASE_main, ["--seeds", "x"], "--seeds"),
    (sac_main, ["--seeds", "4-2"], "--seeds"),
])
def test_bad_seeds_are_one_line_exit_2(module, args, needle, tmp_path, capsys):
    code = main_guard(module.run, ["--env", "Pendulum-v1", *args, "--results_dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "r").exists()


def test_cli_seeds_write_every_seeds_files(tmp_path):
    args = ["--policy", "TD3", "--env", "Pendulum-v1", "--seeds", "0-2", "--max_time_steps", "2e2",
            "--start_time_steps", "1e2", "--eval_freq", "100", "--eval_episodes", "1", "--batch_size", "16",
            "--results_dir", str(tmp_path), "--quiet"]
    assert main_guard(DASE_main.run, args) == 0
    assert sorted(p.name for p in tmp_path.glob("*.npy")) == [f"TD3_Pendulum-v1_{s}.npy" for s in range(3)]


@pytest.mark.parametrize("out", [2, 6, 16])
def test_a_lone_members_narrow_head_on_one_row_equals_it_batched(out):
    """The exploration step feeds one row per member: the action head of a lone member (a single-agent run of one
    seed) must give the bits that member gets beside others (its seed batched with other seeds). Fails when torch's
    batch-of-one matrix-vector product is used as it is."""
    from algorithms.common.nets import BatchedLinear, init_generators

    batched, alone = BatchedLinear(256, out, init_generators([0, 1, 2])), BatchedLinear(256, out, init_generators([1]))
    x = torch.randn(3, 1, 256)
    assert torch.equal(batched(x)[1], alone(x[1:2])[0])


def test_an_interrupted_run_names_the_seeds_it_was_training(tmp_path):
    """--seeds 0 1 --resume after seed 0 finished alone: SIGTERM stops seed 1, and the report names seed 1 (its
    stem), not the finished seed 0 too."""
    import os
    import signal
    import threading
    import time

    from utils.errors import Interrupted

    kw = dict(SMALL, max_time_steps=4000, checkpoint_freq=500, policy="TD3", num_agents=1, algo={"hidden": (32, 32)})
    Trainer(RunConfig(results_dir=str(tmp_path), seed=0, **kw)).run()
    trainer = Trainer(RunConfig(results_dir=str(tmp_path), seeds=[0, 1], resume=True, **kw))

    def stop():
        deadline = time.time() + 120
        while trainer.t < 300 and time.time() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, lambda *a: None)
    try:
        threading.Thread(target=stop, daemon=True).start()
        with pytest.raises(Interrupted) as stopped:
            trainer.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    message = str(stopped.value)
    assert "SIGTERM: stopped TD3_Pendulum-v1_1 at step" in message and "{" not in message, message
