"""--eval_policy sample (ac_main.py): evaluation actions drawn from the policy instead of its mode. The draws follow
the policy's distribution (against torch.distributions), come from a stream of the member's seed and the step (the same
alone or batched, run again or resumed), and the default stays greedy."""
import numpy as np
import pytest
import torch

import ac_main
from algorithms.common.nets import AgentRNG
from algorithms.onpolicy.a2c import A2C
from utils.cli import main_guard
from utils.run.onpolicy.rollout import eval_stream


def run(*args: str) -> int:
    try:
        return main_guard(ac_main.run, list(args))
    except SystemExit as e:
        return e.code


def test_sampled_evaluation_actions_follow_the_policy_and_greedy_ones_are_its_mode():
    agents = A2C((3,), 4, None, None, [0, 1], torch.device("cpu"), True)
    obs = torch.randn(2, 1, 3).expand(2, 40_000, 3)  # one observation per member, drawn many times
    # a sharper policy than the initial one, so the mode and a draw differ visibly
    with torch.no_grad():
        for p in agents.model.parameters():
            p.mul_(4)
    probs = torch.distributions.Categorical(logits=agents.model.policy(obs[:, :1]).log_p.squeeze(1)).probs
    rng = AgentRNG([eval_stream(s, 1000) for s in (0, 1)])
    drawn = agents.eval_actions(agents.model, obs, rng=rng)
    for m in range(2):
        freq = torch.bincount(drawn[m], minlength=4).double() / drawn.shape[1]
        assert torch.allclose(freq, probs[m].double(), atol=0.01), (freq, probs[m])
    greedy = agents.eval_actions(agents.model, obs)
    assert torch.equal(greedy, probs.argmax(-1, keepdim=True).expand_as(greedy))


def test_sampled_continuous_actions_have_the_policy_s_mean_and_spread():
    agents = A2C((3,), 2, np.full(2, -100.0), np.full(2, 100.0), [5], torch.device("cpu"), False)
    with torch.no_grad():
        agents.model.log_std.fill_(np.log(0.5))
    obs = torch.randn(1, 1, 3).expand(1, 50_000, 3)
    drawn = agents.eval_actions(agents.model, obs, rng=AgentRNG([eval_stream(5, 0)]))
    mean = agents.model.policy(obs[:, :1]).mean
    assert torch.allclose(drawn.mean(1), mean.squeeze(1), atol=0.01)
    assert torch.allclose(drawn.std(1), torch.full((1, 2), 0.5), atol=0.01)
    assert torch.equal(agents.eval_actions(agents.model, obs[:, :1]), mean)


CARTPOLE = ["--policy", "A2C", "--env", "CartPole-v1", "--max_time_steps", "4000", "--eval_freq", "2000",
            "--eval_episodes", "3", "--threads", "1", "--quiet", "--checkpoint_freq", "0"]


def test_a_sampled_evaluation_repeats_alone_or_batched_and_differs_from_the_greedy_one(tmp_path):
    def curve(out, *extra, seed=1):
        assert run(*CARTPOLE, "--results_dir", str(tmp_path / out), *extra) == 0
        return np.load(tmp_path / out / f"A2C_CartPole-v1_{seed}.npy")

    batched = curve("batched", "--eval_policy", "sample", "--seeds", "0-1")
    np.testing.assert_array_equal(curve("alone", "--eval_policy", "sample", "--seed", "1"), batched)
    np.testing.assert_array_equal(curve("again", "--eval_policy", "sample", "--seed", "1"), batched)
    assert not np.array_equal(curve("greedy", "--seed", "1"), batched)  # the same training, other actions


def test_a_run_cannot_resume_with_another_evaluation_policy_and_a3c_refuses_sampling(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert run(*CARTPOLE, "--results_dir", out, "--checkpoint_freq", "2000", "--stop_at", "2000") == 0
    assert run(*CARTPOLE, "--results_dir", out, "--checkpoint_freq", "2000", "--resume",
               "--eval_policy", "sample") == 2
    assert "was made with eval_policy='greedy', this run has 'sample'" in capsys.readouterr().err
    assert run("--policy", "A3C", "--eval_policy", "sample", "--max_time_steps", "2000", "--results_dir",
               str(tmp_path / "a3c")) == 2
    err = capsys.readouterr().err.strip()
    assert "--eval_policy sample: A3C evaluates greedily" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "a3c").exists()


@pytest.mark.parametrize("flag", ["--eval_policy"])
def test_the_replay_scripts_have_no_evaluation_policy_flag(flag, capsys):
    import DASE_main

    with pytest.raises(SystemExit) as e:
        main_guard(DASE_main.run, ["--policy", "TD3", flag, "sample"])
    assert e.value.code == 2
