"""Prioritized replay in the training loop (--prioritized; the sampler itself: tests/test_priority_sampler.py): each
member samples by its own priorities, its importance weights reach the losses, the sampled rows' priorities follow
the TD errors, and runs stay exact across --seeds batching and --resume."""
import numpy as np
import pytest
import torch

import DASE_main
from utils.cli import main_guard
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

PER = dict(alpha=0.6, beta=0.4, beta_steps=1000, eps=1e-6)


def filled(policy="DASE_TD3", n=2, **kw):
    learner = Learner("TD3", {"hidden": (16, 16)}, [100 * i for i in range(n)], n, 3, 1, [-2.0], [2.0], 400, 32, 1,
                      torch.device("cpu"),
                      SharingSettings.of(policy, n, {}), prioritized=PER, **kw)
    rng = np.random.default_rng(0)
    for _ in range(150):
        learner.store(rng.standard_normal((n, 3)), rng.uniform(-2, 2, (n, 1)), rng.standard_normal(n),
                      rng.standard_normal((n, 3)), rng.random(n) < 0.02, None)
    return learner


def test_an_update_sets_the_priorities_of_exactly_the_sampled_rows_from_its_td_errors():
    learner = filled()
    learner.update_once()  # the optimizers' state exists
    before = learner.buffer.priorities.priorities.clone()
    seen = {}
    update = learner.agents.update

    def spy(batch):
        info = update(batch)
        seen.update(index=batch.index.clone(), td=info["td_error"].clone(), importance=batch.importance.clone())
        return info
    learner.agents.update = spy
    learner.update_once()
    after = learner.buffer.priorities.priorities
    changed = (after != before)
    for m in range(2):
        rows = set(seen["index"][m].tolist())
        assert set(torch.nonzero(changed[m]).flatten().tolist()) <= rows
        for b, row in enumerate(seen["index"][m].tolist()):
            expected = (float(seen["td"][m, b]) + PER["eps"]) ** PER["alpha"]
            dup = [bb for bb, r in enumerate(seen["index"][m].tolist()) if r == row]
            values = [(float(seen["td"][m, bb]) + PER["eps"]) ** PER["alpha"] for bb in dup]
            assert any(abs(float(after[m, row]) - v) <= 1e-5 * max(1.0, v) for v in values), (m, b, expected)
    assert float(seen["importance"].max()) == 1.0 and float(seen["importance"].min()) < 1.0


def test_importance_weights_multiply_the_sharing_weights_in_the_losses():
    learner = filled()
    batch = learner.scheme.sample(learner.buffer, 32, learner.sampler, learner.step_t)
    w = learner.agents.weights(batch)
    torch.testing.assert_close(batch.loss_weights(w), w * batch.importance)
    assert batch.td_error(torch.ones(2, 32, 1), -3 * torch.ones(2, 32, 1)).eq(2).all()


def test_beta_anneals_to_one():
    buf = filled().buffer
    assert float(buf.beta(torch.tensor(0))) == pytest.approx(0.4)
    assert float(buf.beta(torch.tensor(500))) == pytest.approx(0.7)
    assert float(buf.beta(torch.tensor(5000))) == 1.0


ARGS = ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--prioritized", "--n_step", "2", "--max_time_steps", "900",
        "--start_time_steps", "300", "--eval_freq", "300", "--eval_episodes", "2", "--batch_size", "32",
        "--threads", "1", "--env_workers", "0", "--quiet"]


def test_prioritized_runs_equal_across_seed_batching_and_resume(tmp_path, seed_one_three_ways):
    names = [f"DASE_TD3_Pendulum-v1_1_Agent_{i}.npy" for i in range(2)]
    for curve in seed_one_three_ways(DASE_main, ARGS, 450, tmp_path, names):
        assert curve.shape == (4,)


def test_a_grown_budget_says_which_flag_keeps_betas_schedule(tmp_path, capsys):
    """--per_beta_steps defaults to the run's length, so resuming with a larger budget would move beta's schedule:
    refused in one line naming the real flag and the value that keeps the schedule, which then resumes."""
    args = ["--policy", "TD3", "--env", "Pendulum-v1", "--prioritized", "--start_time_steps", "100", "--eval_freq",
            "100", "--eval_episodes", "1", "--batch_size", "16", "--hidden_sizes", "16", "16", "--threads", "1",
            "--quiet", "--checkpoint_freq", "100", "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, [*args, "--max_time_steps", "300", "--stop_at", "200"]) == 0
    capsys.readouterr()
    assert main_guard(DASE_main.run, [*args, "--max_time_steps", "400", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "was made with --per_beta_steps 300 (its default" in err and "give --per_beta_steps 300" in err, err
    assert "\n" not in err
    loud = [a for a in args if a != "--quiet"]
    assert main_guard(DASE_main.run, [*loud, "--max_time_steps", "400", "--per_beta_steps", "300", "--resume"]) == 0
    assert "at step 200, its budget grown from 300 to 400 steps" in capsys.readouterr().out  # said, not silent
    assert np.load(tmp_path / "TD3_Pendulum-v1_0.npy").shape == (5,)


@pytest.mark.parametrize("args, words", [
    (["--per_alpha", "0.7"], "apply with --prioritized"),
    (["--prioritized", "--per_beta", "1.5"], "--per_beta 1.5 must be in [0, 1]"),
    (["--prioritized", "--policy", "DASE_TD3", "--num_agents", "4", "--topology", "ring"], "--prioritized: learners"),
])
def test_bad_prioritized_flags_are_one_line(tmp_path, capsys, args, words):
    assert main_guard(DASE_main.run, [*args, "--env", "Pendulum-v1", "--results_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err


@pytest.mark.parametrize("algorithm, algo", [("TD3", {"hidden": (16, 16)}), ("DDPG", {}),
                                             ("SAC", {"policy_type": "Gaussian", "hidden_size": 16}),
                                             ("DiscreteSAC", {"hidden_size": 16})])
def test_td_errors_without_learning_are_the_ones_an_update_reports(algorithm, algo):
    """``td_errors`` (the distributed actors' initial priorities) on a batch equals the |TD error| an update of the
    same agents reports for it before its gradient step (N-step discounts included; the same random draws)."""
    import copy

    from algorithms import DDPG, SAC, TD3, Batch
    from algorithms.replay.discrete_sac import DiscreteSAC

    cls = {"TD3": TD3, "DDPG": DDPG, "SAC": SAC, "DiscreteSAC": DiscreteSAC}[algorithm]
    discrete = algorithm == "DiscreteSAC"
    agents = cls(3, 4 if discrete else 2, None if discrete else np.full(2, -2.0), None if discrete else
                 np.full(2, 2.0), [0, 7], "cpu", **algo)
    gen = torch.Generator().manual_seed(1)
    n, b = 2, 16
    action = torch.randint(0, 4, (n, b, 1), generator=gen).float() if discrete else \
        torch.rand(n, b, 2, generator=gen) * 4 - 2
    batch = Batch(obs=torch.randn(n, b, 3, generator=gen), action=action, reward=torch.randn(n, b, 1, generator=gen),
                  next_obs=torch.randn(n, b, 3, generator=gen),
                  not_done=(torch.rand(n, b, 1, generator=gen) > 0.2).float(), own=torch.ones(n, b, dtype=torch.bool),
                  behaviour_probs=torch.full((n, b, 4), 0.25) if discrete else None,
                  discount=0.99 ** torch.randint(1, 4, (n, b, 1), generator=gen).float(),
                  index=torch.zeros((n, b), dtype=torch.long), importance=torch.ones(n, b, 1))
    other = copy.deepcopy(agents)
    ours = agents.td_errors(batch)
    reported = other.update(batch)["td_error"].squeeze(-1)
    assert ours.shape == (n, b) and (ours > 0).all()
    torch.testing.assert_close(ours, reported, rtol=1e-6, atol=1e-7)
