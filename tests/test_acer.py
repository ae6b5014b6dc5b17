"""ACER as an agent and as a run: members batched with different replay counts equal members alone, a skipped
replay update leaves a member exactly as it was, the average policy's Polyak step, the trust region in the update,
seeds batching, exact resume after SIGKILL, bad inputs, and learning CartPole (slow). The formulas themselves
(Retrace, truncation, bias correction, projection) are tested by hand in tests/test_acer_math.py."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ac_main
from algorithms.onpolicy.acer import ACER
from utils.cli import main_guard
from utils.run import train

ROOT = Path(__file__).resolve().parent.parent


def rollout(n, t=4, k=2, obs_dim=3, act=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    term = (torch.rand(n, t, k, generator=g) < 0.2).to(torch.get_default_dtype())
    mu = torch.softmax(torch.randn(n, t, k, act, generator=g), -1)
    return {"obs": torch.randn(n, t, k, obs_dim, generator=g), "next_obs": torch.randn(n, t, k, obs_dim, generator=g),
            "actions": torch.randint(0, act, (n, t, k), generator=g), "rewards": torch.randn(n, t, k, generator=g),
            "terminated": term, "ended": torch.maximum(term, (torch.rand(n, t, k, generator=g) < 0.1).to(term.dtype)),
            "mu": mu}


def make(seeds, **kw):
    kw = {"replay_start": 1, "buffer_size": 8 * 4, "rollout": (4, 2), "hidden_size": 16, **kw}
    return ACER((3,), 3, None, None, seeds, "cpu", True, **kw)


def params(agent):
    return {f"{name}.{k}": p.detach() for name, net in agent.networks.items() for k, p in net.named_parameters()}


@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_members_with_different_replay_counts_equal_members_alone(float64, optimizer):
    """Three members batched, each drawing its own Poisson number of replay updates and its own replayed slots,
    end where three one-member models do: the members that draw fewer updates wait masked, untouched (with Adam,
    their step counts too)."""
    seeds = [5, 105, 205]
    together, alone = make(seeds, optimizer=optimizer), [make([s], optimizer=optimizer) for s in seeds]
    counts = []
    for step in range(5):
        batch = rollout(3, seed=step)
        info = together.update(batch)
        counts.append(info["replay_updates"].tolist())
        for i, agent in enumerate(alone):
            agent.update({key: v[i:i + 1] for key, v in batch.items()})
    assert any(len(set(c)) > 1 for c in counts), f"the members' replay counts never differed: {counts}"
    assert sum(map(sum, counts)) > 0
    for i, agent in enumerate(alone):
        for k, p in params(agent).items():
            torch.testing.assert_close(params(together)[k][i:i + 1], p, rtol=1e-9, atol=1e-9, msg=k)
        for p, q in zip(together.opt.param_groups[0]["params"], agent.opt.param_groups[0]["params"]):
            for key in ("square_avg",) if optimizer == "rmsprop" else ("exp_avg", "exp_avg_sq", "beta1_power"):
                torch.testing.assert_close(together.opt.state[p][key][i:i + 1], agent.opt.state[q][key],
                                           rtol=1e-9, atol=1e-12, msg=key)


@pytest.mark.parametrize("optimizer, first_update", [("rmsprop", True), ("adam", True), ("rmsprop_tf", True),
                                                     ("rmsprop", False), ("rmsprop_tf", False)])
def test_a_masked_member_is_left_exactly_as_it_was(optimizer, first_update):
    """Also before the optimizer's first step (no state yet: the masked member's RMSprop square average must stay at
    its initial value, 0 for torch's, 1 for TensorFlow's)."""
    agent = make([1, 2], optimizer=optimizer)
    if first_update:
        agent.update(rollout(2, seed=0))  # creates the optimizer state
    before = {k: v.clone() for k, v in params(agent).items()}
    state = [{k: v.clone() for k, v in agent.opt.state[p].items()} for p in agent.opt.param_groups[0]["params"]]
    agent.step(rollout(2, seed=1), mask=torch.tensor([False, True]))
    after = params(agent)
    for k in before:
        assert torch.equal(after[k][0], before[k][0]), k  # member 0: untouched
    assert any(not torch.equal(after[k][1], before[k][1]) for k in before if k.startswith("model"))
    for p, s in zip(agent.opt.param_groups[0]["params"], state):
        for key, value in s.items():
            if value.dim():  # per member (RMSprop's shared step count is a scalar)
                assert torch.equal(agent.opt.state[p][key][0], value[0]), key
        if not s and optimizer != "adam":
            first = 1.0 if optimizer == "rmsprop_tf" else 0.0
            assert torch.equal(agent.opt.state[p]["square_avg"][0], torch.full_like(p[0], first))
    if optimizer == "adam":  # member 1 has taken one step more: its own bias correction moved on, member 0's not
        b1 = agent.opt.state[agent.opt.param_groups[0]["params"][0]]["beta1_power"]
        torch.testing.assert_close(b1, state[0]["beta1_power"] * torch.tensor([1.0, 0.9]))


def test_replay_only_learns_from_the_replay_alone(float64):
    """--replay_only (Wang et al.'s continuous ACER is "entirely off-policy"): a fresh rollout is only stored; nothing
    moves before the replay holds replay_start transitions; then a member's update is exactly its replay updates,
    the same steps a plain agent takes on the same replayed rollouts after its on-policy step is taken away."""
    seeds = [5, 105]
    only = make(seeds, replay_only=True, replay_start=16)  # two rollouts of 4 x 2
    first = {k: v.clone() for k, v in params(only).items()}
    info = only.update(rollout(2, seed=0))
    assert info["replay_updates"].tolist() == [0.0, 0.0] and float(info["loss"].abs().sum()) == 0.0
    assert all(torch.equal(params(only)[k], first[k]) for k in first)  # stored, not learned from
    # the twin: the same members and streams, stepped by hand on what replay_only draws
    twin = make(seeds, replay_only=True, replay_start=16)
    twin.remember(rollout(2, seed=0))
    twin.stored, twin.updates = 1, 1
    counts = []
    for step in (1, 2, 3):
        batch = rollout(2, seed=step)
        info = only.update(batch)
        counts.append(info["replay_updates"].tolist())
        twin.remember(batch)
        n = twin.replay_counts()
        slots = twin.replay_rng.randint(min(twin.stored, twin.slots), 32)
        for j in range(int(n.max())):
            twin.step(twin.replayed(slots[:, j]), mask=n > j)
        assert n.tolist() == info["replay_updates"].tolist()
    assert sum(map(sum, counts)) > 0 and any(len(set(c)) > 1 for c in counts), counts
    for k, p in params(twin).items():
        torch.testing.assert_close(params(only)[k], p, rtol=0, atol=0, msg=k)


def test_average_policy_follows_by_polyak(float64):
    agent = make([3], trust_region_decay=0.9, replay_ratio=0.0)
    avg_before = {k: v.clone() for k, v in agent.average.state_dict().items()}
    agent.update(rollout(1, seed=2))
    for k, p in agent.model.state_dict().items():
        torch.testing.assert_close(agent.average.state_dict()[k], 0.9 * avg_before[k] + 0.1 * p)


def test_the_trust_region_changes_the_step_only_when_the_policy_moved_away():
    """Fresh agent: the average policy is the policy, k^T g is small, and the trust-region step equals the plain
    one; once the average lags behind a policy that moved (a tiny delta), the projected step differs."""
    def step(tr, delta=1.0, warm=0):
        agent = make([7], trust_region=tr, trust_region_threshold=delta, replay_ratio=0.0, lr=1e-2)
        for s in range(warm):
            agent.update(rollout(1, seed=100 + s))
        agent.update(rollout(1, seed=0))
        return torch.cat([p.detach().flatten() for p in agent.model.parameters()])

    torch.testing.assert_close(step(True), step(False), rtol=1e-4, atol=1e-6)
    assert not torch.allclose(step(True, delta=1e-4, warm=5), step(False, delta=1e-4, warm=5), atol=1e-6)


SHORT = ["--policy", "ACER", "--env", "CartPole-v1", "--max_time_steps", "3200", "--eval_freq", "800",
         "--eval_episodes", "2", "--envs_per_agent", "4", "--n_steps", "10", "--replay_start", "200",
         "--hidden_size", "32", "--threads", "1", "--env_workers", "0", "--quiet"]


def test_seeds_in_one_process_equal_seeds_alone(tmp_path):
    assert main_guard(ac_main.run, [*SHORT, "--seeds", "0", "1", "--results_dir", str(tmp_path / "both")]) == 0
    assert main_guard(ac_main.run, [*SHORT, "--seed", "1", "--results_dir", str(tmp_path / "one")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "both" / "ACER_CartPole-v1_1.npy"),
                                  np.load(tmp_path / "one" / "ACER_CartPole-v1_1.npy"))


def test_reference_flags_seeds_batched_equal_seeds_alone_and_are_recorded(tmp_path):
    """--optimizer adam, --trust_region_entropy and --prob_eps (A3C-ACER-PyTorch's ACER) keep a member's run
    independent of the members beside it, and the run's JSON records them; without them it records every setting at
    its default (an older record without them reads them so: utils/run/checkpoint.py)."""
    ref = [*SHORT, "--optimizer", "adam", "--trust_region_entropy", "--ent_coef", "0.001", "--prob_eps", "1e-6"]
    assert main_guard(ac_main.run, [*ref, "--seeds", "0", "1", "--results_dir", str(tmp_path / "both")]) == 0
    assert main_guard(ac_main.run, [*ref, "--seed", "1", "--results_dir", str(tmp_path / "one")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "both" / "ACER_CartPole-v1_1.npy"),
                                  np.load(tmp_path / "one" / "ACER_CartPole-v1_1.npy"))
    algo = json.loads((tmp_path / "one" / "ACER_CartPole-v1_1.json").read_text())["config"]["algo"]
    assert algo["optimizer"] == "adam" and algo["trust_region_entropy"] is True
    assert algo["prob_eps"] == 1e-6
    assert main_guard(ac_main.run, [*SHORT, "--seed", "1", "--max_time_steps", "800", "--results_dir",
                                    str(tmp_path / "plain")]) == 0
    plain = json.loads((tmp_path / "plain" / "ACER_CartPole-v1_1.json").read_text())["config"]["algo"]
    assert plain["optimizer"] == "rmsprop" and plain["trust_region_entropy"] is False and plain["rms_eps"] == 1e-5
    assert plain["prob_eps"] == 0.0 and "action_std" not in plain  # continuous ACER's: recorded when given


@pytest.mark.parametrize("policy", ["A2C", "ACER"])
def test_rmsprop_tf_is_recorded_and_steps_tensorflows_rmsprop(tmp_path, policy):
    """--optimizer rmsprop_tf (OpenAI baselines' RMSprop) for A2C and ACER: recorded in the run's JSON with the
    RMSprop settings, the agent's optimizer is RMSpropTF, and its curve differs from torch's RMSprop's."""
    from algorithms.common.optim import ForeachRMSprop, RMSpropTF
    base = ["--policy", policy, "--env", "CartPole-v1", "--max_time_steps", "1600", "--eval_freq", "800",
            "--eval_episodes", "2", "--envs_per_agent", "4", "--n_steps", "10", "--hidden_size", "32", "--threads", "1",
            "--env_workers", "0", "--quiet", *(["--replay_start", "200"] if policy == "ACER" else [])]
    for name, extra in (("tf", ["--optimizer", "rmsprop_tf"]), ("torch", [])):
        assert main_guard(ac_main.run, [*base, *extra, "--results_dir", str(tmp_path / name)]) == 0
    algo = json.loads((tmp_path / "tf" / f"{policy}_CartPole-v1_0.json").read_text())["config"]["algo"]
    assert algo["optimizer"] == "rmsprop_tf" and algo["rms_eps"] == 1e-5 and algo["rms_alpha"] == 0.99
    curves = [np.load(tmp_path / d / f"{policy}_CartPole-v1_0.npy") for d in ("tf", "torch")]
    assert curves[0].shape == curves[1].shape == (3,) and not np.array_equal(*curves)
    from utils.run import Trainer
    for extra, kind in ((["--optimizer", "rmsprop_tf"], RMSpropTF), ([], ForeachRMSprop)):
        trainer = Trainer(ac_main.build_config(ac_main.parse([*base, *extra, "--max_time_steps", "800",
                                                              "--results_dir", str(tmp_path / f"t{len(extra)}")])))
        trainer.run()
        assert type(trainer.agents.opt) is kind  # the flag reaches the agent the run trains


@pytest.mark.parametrize("extra", [[], ["--optimizer", "adam", "--trust_region_entropy"]], ids=["rmsprop", "adam"])
def test_sigkill_then_resume_gives_identical_curves(tmp_path, full_and_killed_runs, extra):
    """Killed mid-run and resumed, the curve equals an uninterrupted run's (with Adam: its per-member moments and bias
    corrections travel in the checkpoint)."""
    args = [sys.executable, str(ROOT / "ac_main.py"), *SHORT[:-5], "--max_time_steps", "9600", "--eval_freq",
            "1600", "--checkpoint_freq", "2400", "--threads", "1", "--env_workers", "0", "--quiet", *extra]
    full_and_killed_runs(args, "ACER_CartPole-v1_0", tmp_path / "full", tmp_path / "cut", 0.3)
    a, b = (np.load(tmp_path / d / "ACER_CartPole-v1_0.npy") for d in ("full", "cut"))
    assert a.shape == (7,)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("args, words", [
    (["--policy", "ACER", "--env", "CartPole-v1", "--sdn_samples", "3"], "--sdn_samples applies to ACER on a Box"),
    (["--policy", "ACER", "--gae_lambda", "0.95"], "--gae_lambda applies to A2C and A3C, not ACER"),
    (["--policy", "A2C", "--replay_ratio", "2"], "--replay_ratio applies to ACER"),
    (["--policy", "ACER", "--buffer_size", "10"], "cannot hold one rollout"),
    (["--policy", "ACER", "--trust_region_decay", "1"], "--trust_region_decay"),
    (["--policy", "A2C", "--replay_only"], "--replay_only applies to ACER"),
    (["--policy", "ACER", "--replay_only", "--replay_ratio", "0"], "--replay_only with --replay_ratio 0"),
    (["--policy", "A2C", "--optimizer", "adam"], "--optimizer 'adam': one of rmsprop, rmsprop_tf"),
    (["--policy", "A3C", "--optimizer", "rmsprop_tf"], "--optimizer applies to A2C and ACER"),
    (["--policy", "ACER", "--optimizer", "adam", "--rms_eps", "1e-5"], "drop them with --optimizer adam"),
    (["--policy", "ACER", "--trust_region_entropy", "--no_trust_region"], "drop it or --no_trust_region"),
    (["--policy", "A3C", "--trust_region_entropy"], "--trust_region_entropy applies to ACER"),
    (["--policy", "ACER", "--env", "Pendulum-v1", "--trust_region_entropy"], "applies to discrete ACER"),
    (["--policy", "ACER", "--prob_eps=-1e-6"], "--prob_eps -1e-06 must be in [0, 0.1]"),
    (["--policy", "ACER", "--prob_eps", "0.5"], "--prob_eps 0.5 must be in [0, 0.1]"),
    (["--policy", "A2C", "--prob_eps", "1e-6"], "--prob_eps applies to ACER"),
    (["--policy", "ACER", "--env", "Pendulum-v1", "--prob_eps", "1e-6"], "--prob_eps applies to discrete ACER"),
])
def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys, args, words):
    assert main_guard(ac_main.run, [*args, "--max_time_steps", "8000", "--results_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err
    assert not any(p.suffix == ".npy" for p in tmp_path.rglob("*"))


@pytest.mark.slow
def test_acer_learns_cartpole(tmp_path):
    """The issue's bar: a mean of 10 evaluation episodes >= 475 on CartPole-v1."""
    args = ["--policy", "ACER", "--env", "CartPole-v1", "--max_time_steps", "200000", "--eval_freq", "8000",
            "--eval_episodes", "10", "--threads", "1", "--env_workers", "0", "--quiet", "--results_dir", str(tmp_path)]
    # ends at the first evaluation >= 475, else at 200k
    curve = train(ac_main.build_config(ac_main.parse(args)), stop_when=lambda curves: curves[0][-1] >= 475)[0]
    assert np.array_equal(curve, np.load(tmp_path / "ACER_CartPole-v1_0.npy"))
    assert curve.max() >= 475, curve
