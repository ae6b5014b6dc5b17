"""Q ensembles (--ensemble_q N --ensemble_q_sample M, TD3 and SAC): the target is the minimum over M of the N target
critics, one subset per update and agent drawn uniformly; N = M = 2 are the twin critics; the command line names and
refuses."""
import json

import numpy as np
import pytest
import torch

import DASE_main
import sac_main
from algorithms import SAC, TD3, Batch
from utils.cli import main_guard

OBS, ACT, B = 3, 2, 16


def batch(agents: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(agents, B, *s, generator=g)  # noqa: E731
    return Batch(r(OBS), r(ACT).clamp(-1, 1), r(1), r(OBS), torch.ones(agents, B, 1),
                 torch.ones(agents, B, dtype=torch.bool))


def target_values(agents, b: Batch) -> torch.Tensor:
    """Every target critic's value of the target policy's next action [n, N, B, 1] (TD3 without target noise)."""
    with torch.no_grad():
        return torch.stack(agents.critic_target(b.next_obs, agents.actor_target(b.next_obs)))


def test_td3_s_target_is_the_minimum_over_m_critics_drawn_per_update_and_agent():
    """Replayed from the agents' update stream (the target noise's draw, then one uniform per critic: the M
    smallest are the subset), the target is r + gamma * min over those critics; the subsets vary by update and
    agent, each critic drawn about M / N of the time."""
    agents = TD3(OBS, ACT, -np.ones(ACT), np.ones(ACT), [0, 1, 2], "cpu", policy_noise=0.0, ensemble_q=5,
                 ensemble_q_sample=2)
    b = batch(3)
    q = target_values(agents, b)  # [5, 3, B, 1]
    chosen, subsets = np.zeros((3, 5)), set()
    for _ in range(60):
        state = agents.update_rng.get_state()
        y = agents.target(b)
        agents.update_rng.set_state(state)
        agents.update_rng.normal(B, ACT)  # the target noise (zero here)
        u = agents.update_rng.uniform(5)  # [3, 5]
        for n in range(3):
            pick = sorted(torch.topk(-u[n], 2).indices.tolist())
            subsets.add((n, tuple(pick)))
            chosen[n, pick] += 1
            expected = b.reward[n] + 0.99 * torch.min(q[pick[0], n], q[pick[1], n])
            assert torch.equal(y[n], expected), (n, pick)
    # probability 2/5: 24 expected in 60 updates; 8 and 40 lie beyond 4 standard deviations
    assert (chosen > 8).all() and (chosen < 40).all(), chosen
    assert len({s for _, s in subsets}) >= 8  # of the 10 pairs


def test_all_critics_drawn_is_the_minimum_over_all_and_twin_critics_are_today_s():
    agents = TD3(OBS, ACT, -np.ones(ACT), np.ones(ACT), [4], "cpu", policy_noise=0.0, ensemble_q=3,
                 ensemble_q_sample=3)
    b = batch(1, seed=1)
    torch.testing.assert_close(agents.target(b), b.reward + 0.99 * target_values(agents, b).amin(0), rtol=0, atol=0)
    twin = TD3(OBS, ACT, -np.ones(ACT), np.ones(ACT), [4], "cpu")
    default = TD3(OBS, ACT, -np.ones(ACT), np.ones(ACT), [4], "cpu", ensemble_q=2, ensemble_q_sample=2)
    assert [n for n, _ in twin.critic.named_parameters()] == [n for n, _ in default.critic.named_parameters()]
    assert {n.split(".")[0] for n, _ in twin.critic.named_parameters()} == {"q1", "q2"}


def test_sac_trains_every_critic_on_the_ensemble_target():
    agents = SAC(OBS, ACT, -np.ones(ACT), np.ones(ACT), [0, 1], "cpu", policy_type="Gaussian", ensemble_q=4,
                 ensemble_q_sample=2)
    b = batch(2, seed=2)
    before = [p.detach().clone() for p in agents.critic.parameters()]
    info = agents.update(b)
    moved = [not torch.equal(x, p) for x, p in zip(before, agents.critic.parameters())]
    assert all(moved) and len(moved) == 4 * 6  # four critics of three layers (weight and bias) each
    assert info["critic_loss"].shape == (2,) and torch.isfinite(info["actor_loss"]).all()


def run(script, *args: str) -> int:
    try:
        return main_guard(script.run, list(args))
    except SystemExit as e:
        return e.code


def test_an_ensemble_run_is_named_recorded_and_resumes_exactly(tmp_path):
    args = ["--policy", "SAC", "--env", "Pendulum-v1", "--num_steps", "900", "--start_steps", "300", "--eval_freq",
            "300", "--eval_episodes", "1", "--threads", "1", "--quiet", "--ensemble_q", "5", "--ensemble_q_sample", "2",
            "--hidden_size", "32"]
    assert run(sac_main, *args, "--results_dir", str(tmp_path / "whole"), "--checkpoint_freq", "0") == 0
    cut = str(tmp_path / "cut")
    assert run(sac_main, *args, "--results_dir", cut, "--checkpoint_freq", "300", "--stop_at", "700") == 0
    assert run(sac_main, *args, "--results_dir", cut, "--checkpoint_freq", "300", "--resume") == 0
    stem = "SAC_q5m2_Pendulum-v1_0"
    np.testing.assert_array_equal(np.load(tmp_path / "cut" / f"{stem}.npy"), np.load(tmp_path / "whole" / f"{stem}.npy"))
    algo = json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]
    # recorded when not the default (a twin-critic run's record is what it always was)
    assert algo["ensemble_q"] == 5 and "ensemble_q_sample" not in algo


@pytest.mark.parametrize("script, args, words", [
    (sac_main, ["--ensemble_q", "3", "--ensemble_q_sample", "4"], "--ensemble_q_sample 4: at most --ensemble_q (3)"),
    (sac_main, ["--ensemble_q", "1"], "--ensemble_q 1 must be"),
    (sac_main, ["--env", "CartPole-v1", "--ensemble_q", "3"], "--ensemble_q applies to SAC (continuous actions), not"),
    (DASE_main, ["--policy", "DDPG", "--ensemble_q", "3"], "--ensemble_q applies to TD3, not DDPG"),
])
def test_bad_ensemble_input_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    policy = [] if "--policy" in args else ["--policy", "SAC" if script is sac_main else "TD3"]
    assert run(script, *policy, *args, "--results_dir", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
