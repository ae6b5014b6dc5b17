"""What a run records besides returns: the sharing weights per evaluation period, and TensorBoard logs."""
import math

import numpy as np
import pytest
import torch

import DASE_main
from utils.cli import main_guard
from utils.run import RunConfig, Trainer

STEPS, START, EVAL = 600, 200, 100


def config(tmp_path, policy="DASE_TD3", **kw) -> RunConfig:
    algo = {"hidden": (32, 32)} if "SAC" not in policy else {"hidden_size": 32, "policy_type": "Gaussian"}
    return RunConfig(**{**dict(policy=policy, env="Pendulum-v1", seed=4, num_agents=3 if policy.startswith("DASE")
                               else 1, max_time_steps=STEPS, start_time_steps=START, eval_freq=EVAL,
                               eval_episodes=1, batch_size=32, results_dir=str(tmp_path), quiet=True,
                               checkpoint_freq=0, algo=algo), **kw})


def recording(trainer: Trainer) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Wrap the batched update: every call's (step, weights, own mask) is kept."""
    log, update = [], trainer.learner.agents.update

    def spy(batch):
        info = update(batch)
        log.append((trainer.t, info["weights"].clone(), batch.own.clone()))
        return info

    trainer.learner.agents.update = spy
    return log


@pytest.mark.parametrize("policy", ["DASE_TD3", "DASE_SAC"])  # batch-level and per-sample (Gaussian) weights
def test_weight_files_hold_the_mean_weight_of_external_samples_per_period(policy, tmp_path):
    trainer = Trainer(config(tmp_path, policy))
    log = recording(trainer)
    trainer.run()
    n = trainer.cfg.num_agents
    evaluations = STEPS // EVAL + 1
    for i in range(n):
        saved = np.load(tmp_path / f"{policy}_Pendulum-v1_4_Agent_{i}_weights.npy")
        assert saved.shape == (evaluations,) == np.load(tmp_path / f"{policy}_Pendulum-v1_4_Agent_{i}.npy").shape
        expected = []
        for k in range(evaluations):  # the evaluation at step k * EVAL covers the updates of steps in [.., k * EVAL)
            ws, count = 0.0, 0
            for t, w, own in log:
                if (k - 1) * EVAL <= t < k * EVAL:
                    external = ~own[i].numpy()
                    ws += float(w[i, :, 0].double().numpy()[external].sum())
                    count += int(external.sum())
            expected.append(ws / count if count else math.nan)
        np.testing.assert_allclose(saved, expected, rtol=1e-6)  # per-update sums are float32
        assert np.isnan(saved[: START // EVAL + 1]).all(), "no update before training starts: no weight"
        trained = saved[START // EVAL + 1:]
        assert np.isfinite(trained).all() and (trained >= 0).all() and (trained <= 1).all()
        assert trained.min() < 1, "other agents' samples should be down-weighted at least once"


def test_baselines_and_dpd_write_no_weight_files(tmp_path):
    Trainer(config(tmp_path, "TD3")).run()
    Trainer(config(tmp_path, "DPD_TD3", num_agents=2)).run()
    assert sorted(p.name for p in tmp_path.glob("*.npy")) == [
        "DPD_TD3_Pendulum-v1_4_Agent_0.npy", "DPD_TD3_Pendulum-v1_4_Agent_1.npy", "TD3_Pendulum-v1_4.npy"]


def test_overwrite_removes_old_weight_files(tmp_path):
    Trainer(config(tmp_path)).run()
    weights = tmp_path / "DASE_TD3_Pendulum-v1_4_Agent_0_weights.npy"
    before = np.load(weights)
    Trainer(config(tmp_path, max_time_steps=300, overwrite=True)).run()
    assert len(np.load(weights)) == 300 // EVAL + 1 < len(before)


def scalars(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_logs_returns_losses_weights_and_speed(tmp_path):
    code = main_guard(DASE_main.run, ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--seed", "4", "--num_agents",
                                       "2", "--max_time_steps", "400", "--start_time_steps", "200", "--eval_freq",
                                       "100", "--eval_episodes", "1", "--batch_size", "32", "--results_dir",
                                       str(tmp_path), "--tensorboard", "--quiet"])
    assert code == 0
    logs = scalars(tmp_path / "tensorboard" / "DASE_TD3_Pendulum-v1_4")
    for i in range(2):
        curve = np.load(tmp_path / f"DASE_TD3_Pendulum-v1_4_Agent_{i}.npy")
        steps, values = zip(*logs[f"agent_{i}/return"])
        assert list(steps) == [0, 100, 200, 300, 400]
        np.testing.assert_allclose(values, curve, rtol=1e-6)  # TensorBoard stores float32
        weights = np.load(tmp_path / f"DASE_TD3_Pendulum-v1_4_Agent_{i}_weights.npy")
        assert [s for s, _ in logs[f"agent_{i}/weight"]] == [300, 400]  # periods without updates are left out
        np.testing.assert_allclose([v for _, v in logs[f"agent_{i}/weight"]], weights[3:], rtol=1e-6)
        for loss in ("critic_loss", "actor_loss"):
            assert [s for s, _ in logs[f"agent_{i}/{loss}"]] == [300, 400]
            assert all(np.isfinite(v) for _, v in logs[f"agent_{i}/{loss}"])
    assert [s for s, _ in logs["steps_per_s"]] == [100, 200, 300, 400]
    assert all(v > 0 for _, v in logs["steps_per_s"])


def test_tensorboard_after_resume_has_each_step_once(tmp_path):
    cfg = config(tmp_path, num_agents=2, tensorboard=True, checkpoint_freq=250)
    Trainer(cfg).run(stop_at=250)  # the evaluation at step 300 did not happen yet
    Trainer(config(tmp_path, num_agents=2, tensorboard=True, checkpoint_freq=250, resume=True)).run()
    logs = scalars(tmp_path / "tensorboard" / "DASE_TD3_Pendulum-v1_4")
    returns = logs["agent_0/return"]
    assert [s for s, _ in returns] == list(range(0, STEPS + 1, EVAL))
    np.testing.assert_allclose([v for _, v in returns], np.load(tmp_path / "DASE_TD3_Pendulum-v1_4_Agent_0.npy"),
                               rtol=1e-6)


def test_tensorboard_without_the_package_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError("No module named 'tensorboard'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    code = main_guard(DASE_main.run, ["--policy", "TD3", "--env", "Pendulum-v1", "--max_time_steps", "200",
                                       "--eval_freq", "100", "--results_dir", str(tmp_path), "--tensorboard"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install tensorboard" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir()), "nothing may be written"
