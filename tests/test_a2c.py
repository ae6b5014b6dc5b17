"""A2C and DIFF_A2C: the distributions, the advantages, the batched update against a per-member loop, seeds in
one process equal to seeds alone, exact resume after SIGKILL, Diff-A2C's combine, bad inputs, and learning."""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ac_main
from algorithms.common.distributions import Categorical, DiagGaussian
from algorithms.common.nets import AgentRNG
from algorithms.onpolicy.a2c import A2C, advantages, clip_per_member
from utils.cli import main_guard
from utils.run import train

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str) -> int:
    return main_guard(ac_main.run, list(args))


# ---- distributions ----------------------------------------------------------------------------------------
def test_categorical_matches_torch_and_samples_its_probabilities():
    logits = torch.randn(3, 5, 4)
    ours, ref = Categorical(logits), torch.distributions.Categorical(logits=logits)
    actions = torch.randint(0, 4, (3, 5))
    torch.testing.assert_close(ours.log_prob(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    # sampling: frequencies over many draws follow the probabilities of each row
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4]]).log().expand(2, 40000, 4)
    draws = Categorical(probs).sample(AgentRNG([1, 2]))  # [2, 40000]
    freq = torch.stack([(draws == a).double().mean() for a in range(4)])
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64), atol=0.01, rtol=0)


def test_gaussian_matches_torch():
    mean, log_std = torch.randn(2, 6, 3), torch.randn(2, 1, 3) * 0.3
    ours = DiagGaussian(mean, log_std)
    ref = torch.distributions.Independent(torch.distributions.Normal(mean, log_std.exp().expand_as(mean)), 1)
    a = torch.randn(2, 6, 3)
    torch.testing.assert_close(ours.log_prob(a), ref.log_prob(a))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    draws = torch.stack([ours.sample(AgentRNG([0, 1])) for _ in range(1)])
    assert draws.shape == (1, 2, 6, 3)


# ---- advantages -------------------------------------------------------------------------------------------
def test_advantages_by_hand_with_a_termination_and_a_truncation():
    """gamma 0.5, four steps of one environment: a termination at t = 1 (no bootstrap), a truncation at t = 2
    (bootstraps with V of its real last state), the rollout cut at t = 3 (bootstraps)."""
    r = torch.tensor([[[1.0], [2.0], [3.0], [4.0]]])
    v = torch.tensor([[[0.5], [1.0], [1.5], [2.0]]])
    next_v = torch.tensor([[[1.0], [9.0], [6.0], [8.0]]])  # V(s'_t); 9 is never used (terminated)
    term = torch.tensor([[[0.0], [1.0], [0.0], [0.0]]])
    ended = torch.tensor([[[0.0], [1.0], [1.0], [0.0]]])
    adv = advantages(r, v, next_v, term, ended, gamma=0.5, lam=1.0)
    # returns: R3 = 4 + .5*8 = 8; R2 = 3 + .5*6 = 6 (truncation: its own bootstrap, not R3); R1 = 2 (terminal);
    # R0 = 1 + .5*R1 = 2
    expected_returns = torch.tensor([2.0, 2.0, 6.0, 8.0])
    torch.testing.assert_close((adv + v).flatten(), expected_returns)
    # lambda 0: one-step TD errors
    td = advantages(r, v, next_v, term, ended, gamma=0.5, lam=0.0).flatten()
    torch.testing.assert_close(td, torch.tensor([1 + 0.5 * 1.0 - 0.5, 2 - 1.0, 3 + 0.5 * 6 - 1.5, 4 + 0.5 * 8 - 2.0]))


def test_gae_matches_a_plain_loop():
    g = torch.Generator().manual_seed(0)
    n, t, k = 2, 7, 3
    r, v, nv = (torch.randn(n, t, k, generator=g) for _ in range(3))
    term = (torch.rand(n, t, k, generator=g) < 0.2).float()
    ended = torch.maximum(term, (torch.rand(n, t, k, generator=g) < 0.2).float())
    adv = advantages(r, v, nv, term, ended, 0.9, 0.95)
    for i in range(n):
        for j in range(k):
            a = 0.0
            for s in reversed(range(t)):
                delta = r[i, s, j] + 0.9 * (1 - term[i, s, j]) * nv[i, s, j] - v[i, s, j]
                a = delta + 0.9 * 0.95 * (1 - ended[i, s, j]) * a
                assert abs(float(adv[i, s, j]) - float(a)) < 1e-5


# ---- the batched update ----------------------------------------------------------------------------------
def rollout(n, t=5, k=3, obs_dim=4, act=2, discrete=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    actions = torch.randint(0, act, (n, t, k), generator=g) if discrete else torch.randn(n, t, k, act, generator=g)
    term = (torch.rand(n, t, k, generator=g) < 0.2).float()
    return {"obs": torch.randn(n, t, k, obs_dim, generator=g), "next_obs": torch.randn(n, t, k, obs_dim, generator=g),
            "actions": actions, "rewards": torch.randn(n, t, k, generator=g), "terminated": term,
            "ended": torch.maximum(term, (torch.rand(n, t, k, generator=g) < 0.1).float())}


@pytest.mark.parametrize("discrete", [True, False])
def test_batched_update_equals_each_member_alone(discrete, float64):
    """Three members in one model, updated three times, equal three one-member models (same seeds): stacked
    parameters, RMSprop and the per-member clipping keep members independent. In float64, so that only the order
    of summation (batched vs single matrix products) can differ: 1e-9 is far below what a wrong formula moves."""
    seeds = [3, 17, 40]
    low, high = (None, None) if discrete else (-np.ones(2), np.ones(2))
    kw = dict(max_grad_norm=0.05)  # small enough that clipping acts
    together = A2C((4,), 2, low, high, seeds, "cpu", discrete, **kw)
    alone = [A2C((4,), 2, low, high, [s], "cpu", discrete, **kw) for s in seeds]
    for step in range(3):
        batch = rollout(3, discrete=discrete, seed=step)
        together.update(batch)
        for i, agent in enumerate(alone):
            agent.update({key: v[i:i + 1] for key, v in batch.items()})
    for i, agent in enumerate(alone):
        for (name, p), q in zip(together.model.named_parameters(), agent.model.parameters()):
            torch.testing.assert_close(p[i:i + 1], q, rtol=1e-9, atol=1e-9, msg=name)
    fresh = A2C((4,), 2, low, high, seeds, "cpu", discrete, **kw)
    assert not torch.allclose(fresh.model.pi.layers[0].weight, together.model.pi.layers[0].weight)  # it learned


def test_image_rollouts_bootstrap_from_the_forward_pass_as_from_every_next_observation(float64):
    """On frame stacks V(s'_t) is taken from the loss's own forward pass where s'_t = s_{t+1}, and computed only
    for the last step and at episode ends: the losses equal those of the full pass over every next observation
    (a termination, a truncation and different ends per member included)."""
    n, t, k = 2, 4, 3
    g = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (n, t + 1, k, 4, 84, 84), dtype=torch.uint8, generator=g)
    ended = torch.zeros(n, t, k)
    terminated = torch.zeros(n, t, k)
    ended[0, 1, 2] = terminated[0, 1, 2] = 1.0  # member 0: a termination at t = 1 in environment 2
    ended[1, 2, 0] = 1.0  # member 1: a truncation at t = 2 in environment 0 (bootstraps from its last frame)
    next_obs = frames[:, 1:].clone()
    last = torch.randint(0, 256, (n, t, k, 4, 84, 84), dtype=torch.uint8, generator=g)
    next_obs[ended > 0] = last[ended > 0]  # an ended episode's own last observation, not the next one's first
    batch = {"obs": frames[:, :-1], "next_obs": next_obs, "actions": torch.randint(0, 6, (n, t, k), generator=g),
             "rewards": torch.randn(n, t, k, generator=g), "terminated": terminated, "ended": ended}
    agent = A2C((4, 84, 84), 6, None, None, [1, 2], "cpu", True)
    out = agent.losses(batch)
    full = dict(batch)
    with torch.no_grad():
        want = agent.model.value(next_obs.reshape(n, t * k, 4, 84, 84)).view(n, t, k)
        got = agent.next_values(agent.model.value(frames[:, :-1].reshape(n, t * k, 4, 84, 84)).view(n, t, k),
                                next_obs, ended)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    agent.next_values = lambda values, nxt, e: agent.model.value(nxt.reshape(n, t * k, 4, 84, 84)).view(n, t, k)
    for key, value in agent.losses(full).items():
        torch.testing.assert_close(out[key], value, rtol=1e-9, atol=1e-9, msg=key)


def test_clipping_per_member_equals_torch_clip_grad_norm():
    params = [torch.nn.Parameter(torch.zeros(3, 4, 5)), torch.nn.Parameter(torch.zeros(3, 1, 5))]
    for p in params:
        p.grad = torch.randn_like(p) * torch.tensor([0.01, 1.0, 10.0]).view(3, 1, 1)
    expected = []
    for i in range(3):
        single = [torch.nn.Parameter(p.detach()[i].clone()) for p in params]
        for s, p in zip(single, params):
            s.grad = p.grad[i].clone()
        torch.nn.utils.clip_grad_norm_(single, 0.5)
        expected.append([s.grad for s in single])
    clip_per_member(params, 0.5)
    for i in range(3):
        for p, e in zip(params, expected[i]):
            torch.testing.assert_close(p.grad[i], e)


# ---- whole runs ---------------------------------------------------------------------------------------------
SHORT = ["--env", "CartPole-v1", "--max_time_steps", "2400", "--eval_freq", "800", "--eval_episodes", "2",
         "--envs_per_agent", "4", "--threads", "1", "--env_workers", "0", "--quiet"]


def test_seeds_in_one_process_equal_seeds_alone(tmp_path):
    assert run_cli(*SHORT, "--seeds", "0", "1", "--results_dir", str(tmp_path / "both")) == 0
    assert run_cli(*SHORT, "--seed", "1", "--results_dir", str(tmp_path / "one")) == 0
    a = np.load(tmp_path / "both" / "A2C_CartPole-v1_1.npy")
    b = np.load(tmp_path / "one" / "A2C_CartPole-v1_1.npy")
    assert a.shape == (4,)
    np.testing.assert_array_equal(a, b)


def test_gaussian_seeds_batched_in_any_group_equal_seeds_alone(tmp_path):
    """On Pendulum (Gaussian actions carry any last-bit difference on), with gradient clipping active: seed 1
    alone, beside seed 0, and beside seeds 2 and 3 writes the same curve, bit for bit (the per-member gradient norm
    does not depend on how many members share the model)."""
    args = [*SHORT, "--env", "Pendulum-v1"]
    for name, seeds in (("one", ["--seed", "1"]), ("two", ["--seeds", "0", "1"]), ("three", ["--seeds", "1", "2", "3"])):
        assert run_cli(*args, *seeds, "--results_dir", str(tmp_path / name)) == 0
    one = np.load(tmp_path / "one" / "A2C_Pendulum-v1_1.npy")
    assert len(set(one.tolist())) == len(one)
    for name in ("two", "three"):
        np.testing.assert_array_equal(one, np.load(tmp_path / name / "A2C_Pendulum-v1_1.npy"))


def test_env_workers_give_the_same_curves(tmp_path):
    args = [*SHORT[:-5], "--policy", "DIFF_A2C", "--num_agents", "2", "--threads", "1", "--quiet"]
    assert run_cli(*args, "--env_workers", "0", "--results_dir", str(tmp_path / "local")) == 0
    assert run_cli(*args, "--env_workers", "2", "--results_dir", str(tmp_path / "pool")) == 0
    for i in range(2):
        name = f"DIFF_A2C_ring_CartPole-v1_0_Agent_{i}.npy"
        np.testing.assert_array_equal(np.load(tmp_path / "local" / name), np.load(tmp_path / "pool" / name))


def test_sigkill_then_resume_gives_identical_curves(tmp_path, full_and_killed_runs):
    args = [sys.executable, str(ROOT / "ac_main.py"), "--env", "CartPole-v1", "--max_time_steps", "24000",
            "--eval_freq", "2000", "--eval_episodes", "2", "--envs_per_agent", "4", "--checkpoint_freq", "4000",
            "--threads", "1", "--env_workers", "0", "--quiet"]
    full_and_killed_runs(args, "A2C_CartPole-v1_0", tmp_path / "full", tmp_path / "cut", 0.2)  # mid-rollout
    a, b = (np.load(tmp_path / d / "A2C_CartPole-v1_0.npy") for d in ("full", "cut"))
    assert a.shape == (13,)
    np.testing.assert_array_equal(a, b)


def test_diffusion_on_a_complete_graph_makes_the_agents_equal(tmp_path):
    """Two A2C agents on a complete graph with uniform weights average to the same parameters after every update:
    started apart, the consensus file reads 0 after step 0, while the agents still learn on their own environments."""
    assert run_cli(*SHORT, "--policy", "DIFF_A2C", "--num_agents", "2", "--topology", "complete", "--init", "separate",
                   "--results_dir", str(tmp_path)) == 0
    consensus = np.load(tmp_path / "DIFF_A2C_separateinit_CartPole-v1_0_consensus.npy")
    assert consensus[0] > 0 and np.all(consensus[1:] == 0), consensus


@pytest.mark.parametrize("args, words", [
    (["--envs_per_agent", "0"], "--envs_per_agent 0 must be >= 1"),
    (["--eval_freq", "1001"], "multiple of 8"),
    (["--num_processes", "2"], "--num_processes applies to A3C"),
    (["--policy", "DASE_A2C"], "unknown policy"),
    (["--env", "Pendulum-v1", "--policy", "A2C", "--gae_lambda", "2"], "--gae_lambda"),
    # sizes that pass the range checks but cannot exist: one line before anything is allocated or written
    (["--policy", "A2C", "--n_steps", "1000000000"], "the rollouts of 1 learner(s) would fill 480.0 GB"),
    (["--policy", "ACER", "--buffer_size", "1e15"], "the rollouts and replay of 1 learner(s) would fill"),
    (["--policy", "A3C", "--num_processes", "1000000"], "1000000 actor-learner processes would fill"),
])
def test_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys, args, words):
    assert run_cli(*args, "--max_time_steps", "8000", "--results_dir", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err
    assert not any(tmp_path.iterdir())  # nothing written


def test_discrete_env_for_td3_is_one_line(tmp_path, capsys):
    import DASE_main

    assert main_guard(DASE_main.run, ["--policy", "TD3", "--env", "CartPole-v1", "--results_dir", str(tmp_path),
                                      "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Discrete" in err and "ac_main.py" in err and "\n" not in err, err


@pytest.mark.slow
def test_a2c_solves_cartpole_within_200k_steps(tmp_path):
    """The issue's bar: a mean of 10 evaluation episodes >= 475 within 200k steps (8 environments, n = 5)."""
    args = ["--env", "CartPole-v1", "--max_time_steps", "200000", "--eval_freq", "5000", "--eval_episodes", "10",
            "--threads", "1", "--env_workers", "0", "--quiet", "--results_dir", str(tmp_path)]
    # ends at the first evaluation >= 475, else at 200k
    curve = train(ac_main.build_config(ac_main.parse(args)), stop_when=lambda curves: curves[0][-1] >= 475)[0]
    assert np.array_equal(curve, np.load(tmp_path / "A2C_CartPole-v1_0.npy"))
    assert curve.max() >= 475, curve


@pytest.mark.parametrize("policy", ["A2C", "A3C"])
def test_stop_at_pauses_the_on_policy_runs_and_resume_ends_them(policy, tmp_path, capsys):
    """--stop_at on ac_main.py: A2C steps 4 environments at a time, so it pauses at the first step past 1502 (1504);
    resumed, it ends with the uninterrupted run's curve, bit for bit. A3C (one worker) pauses exactly at 2000,
    a second --stop_at 2000 trains nothing, and --resume finishes it."""
    base = ["--policy", policy, "--env", "CartPole-v1", "--max_time_steps", "3000", "--eval_freq", "1000",
            "--eval_episodes", "2", "--threads", "1", "--checkpoint_freq", "1000", "--env_workers", "0"]
    base += ["--envs_per_agent", "4"] if policy == "A2C" else ["--num_processes", "1"]
    stop, at = ("1502", 1504) if policy == "A2C" else ("2000", 2000)
    cut = ["--results_dir", str(tmp_path / "cut")]
    for again in ([], ["--resume"]):
        assert run_cli(*base, *cut, "--stop_at", stop, *again) == 0
        assert f"paused at step {at} (--stop_at {stop})" in capsys.readouterr().out
        assert torch.load(tmp_path / "cut" / "checkpoints" / f"{policy}_CartPole-v1_0.pt", weights_only=True)["t"] == at
    assert run_cli(*base, *cut, "--resume", "--quiet") == 0
    curve = np.load(tmp_path / "cut" / f"{policy}_CartPole-v1_0.npy")
    assert curve.shape == (4,) and not (tmp_path / "cut" / "checkpoints" / f"{policy}_CartPole-v1_0.pt").exists()
    if policy == "A2C":  # A3C's workers race: bit for bit only where one process steps everything
        assert run_cli(*base, "--results_dir", str(tmp_path / "whole"), "--quiet") == 0
        np.testing.assert_array_equal(curve, np.load(tmp_path / "whole" / "A2C_CartPole-v1_0.npy"))


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_greedy_actions_are_the_modes_the_evaluation_plays(env, tmp_path):
    """The learner protocol's greedy_actions on the on-policy learner: every member's current policy at its mode,
    the actions a snapshot evaluates with (no --eval_policy sample), for a discrete and a Gaussian policy."""
    from utils.run.loop import Trainer

    cfg = ac_main.build_config(ac_main.parse(["--policy", "A2C", "--env", env, "--seeds", "0-1",
                                              "--results_dir", str(tmp_path), "--max_time_steps", "800", "--eval_freq", "400"]))
    trainer = Trainer(cfg)
    try:
        obs = np.random.default_rng(0).normal(size=(2, 3, *trainer.envs.obs.shape[1:])).astype(np.float32)
        greedy = trainer.learner.greedy_actions(obs).cpu().numpy()
        assert np.array_equal(greedy, trainer.learner.snapshot(0)(obs))
        assert greedy.shape[:2] == (2, 3)
    finally:
        trainer.close()
