"""--action_noise MIN MAX (ASAC's action-noise range): agent k of a seed's N explores at its own level, replayed here
from the agents' exploration streams for every algorithm; levels, names, resume and refusals."""
import json

import numpy as np
import pytest
import torch
from runs import refused_in_one_line, resumes_exactly

import DASE_main
import sac_main
from algorithms import SAC, TD3
from algorithms.common.nets import AgentRNG
from algorithms.replay.discrete_sac import DiscreteSAC
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

OBS, ACT = 3, 2
LOW, HIGH = -np.full(ACT, 2.0), np.full(ACT, 2.0)
LEVELS = [0.0, 0.3, 1.5]


def replay_of(rng: AgentRNG) -> AgentRNG:
    copy = AgentRNG([0] * len(rng))
    copy.set_state(rng.get_state())
    return copy


def states(n: int = 3) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(0).normal(size=(n, OBS)), dtype=torch.float32)


def test_td3_explores_with_each_agent_s_own_std():
    agents = TD3(OBS, ACT, LOW, HIGH, [0, 1, 2], "cpu", hidden=(8, 8))
    agents.set_action_noise(LEVELS)
    obs, rng = states(), replay_of(agents.explore_rng)
    action, _ = agents.explore_device(obs)
    with torch.no_grad():
        mean = agents.actor(obs.unsqueeze(1)).squeeze(1)
    levels = torch.tensor(LEVELS).unsqueeze(-1)
    expected = torch.clamp(mean + rng.normal(ACT) * (levels * agents.scale), agents.low, agents.high)
    torch.testing.assert_close(action, expected, rtol=0, atol=1e-6)
    assert torch.equal(action[0], mean[0])  # level 0: the actor's action


def test_gaussian_sac_s_added_noise_is_one_wider_gaussian_and_its_behaviour_says_so():
    agents = SAC(OBS, ACT, LOW, HIGH, [0, 1, 2], "cpu", policy_type="Gaussian", hidden_size=8)
    agents.set_action_noise(LEVELS)
    obs, rng = states(), replay_of(agents.explore_rng)
    action, (mean, std) = agents.explore_device(obs)
    with torch.no_grad():
        m, s = agents.actor.gaussian(obs.unsqueeze(1))
    wide = torch.sqrt(s.squeeze(1) ** 2 + torch.tensor(LEVELS).unsqueeze(-1) ** 2)
    torch.testing.assert_close(std, wide, rtol=1e-6, atol=0)
    torch.testing.assert_close(mean, m.squeeze(1), rtol=0, atol=0)
    x = m.squeeze(1) + wide * rng.normal(1, ACT).squeeze(1)
    torch.testing.assert_close(action, torch.tanh(x) * agents.actor.scale + agents.actor.offset, rtol=0, atol=1e-5)
    # the sum of the two noises: over many draws, the pre-tanh spread of agent 2 is sqrt(s^2 + 1.5^2)
    draws = torch.stack([agents.explore_device(obs)[0] for _ in range(4000)])  # [draws, 3, ACT]
    pre = torch.atanh(((draws - agents.actor.offset) / agents.actor.scale).clamp(-1 + 1e-6, 1 - 1e-6))
    torch.testing.assert_close(pre[:, 2].std(0), wide[2], rtol=0.06, atol=0)


def test_deterministic_sac_adds_the_level_before_the_tanh():
    agents = SAC(OBS, ACT, LOW, HIGH, [0, 1, 2], "cpu", hidden_size=8)
    agents.set_action_noise(LEVELS)
    obs, rng = states(), replay_of(agents.explore_rng)
    action, behaviour = agents.explore_device(obs)
    assert behaviour is None
    first, _ = agents.sample(obs.unsqueeze(1), rng.normal(1, ACT))  # the policy's own clipped noise first
    y = ((first - agents.actor.offset) / agents.actor.scale).clamp(-1 + 1e-6, 1 - 1e-6)
    extra = rng.normal(1, ACT) * torch.tensor(LEVELS).view(-1, 1, 1)
    expected = torch.tanh(torch.atanh(y) + extra) * agents.actor.scale + agents.actor.offset
    torch.testing.assert_close(action, expected.squeeze(1), rtol=0, atol=1e-5)


def test_discrete_sac_takes_a_random_action_with_its_level_and_stores_the_mixture():
    n_actions = 4
    agents = DiscreteSAC(OBS, n_actions, None, None, [0, 1, 2], "cpu", hidden_size=8)
    with torch.no_grad():  # a near-greedy policy: action 0 almost surely
        agents.actor.net.layers[-1].bias[:, 0, 0] = 30.0
    levels = [0.0, 0.4, 1.0]
    agents.set_action_noise(levels)
    obs = states()
    actions, (probs,) = agents.explore_device(obs)
    with torch.no_grad():
        p = torch.softmax(agents.actor.logits(obs.unsqueeze(1)).squeeze(1), -1)
    lv = torch.tensor(levels).unsqueeze(-1)
    torch.testing.assert_close(probs, (1 - lv) * p + lv / n_actions, rtol=1e-6, atol=1e-7)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny strided ops wait for a second thread that a busy machine may not have
    try:
        draws = torch.stack([agents.explore_device(obs)[0] for _ in range(4000)])  # [draws, 3]
    finally:
        torch.set_num_threads(threads)
    other = (draws != 0).float().mean(0)  # a random action is not 0 with probability 3/4
    assert other[0] == 0
    assert abs(float(other[1]) - 0.4 * 0.75) < 0.03 and abs(float(other[2]) - 0.75) < 0.03


def test_the_learner_spreads_the_levels_over_each_seed_s_agents():
    settings = SharingSettings.of("DASE_TD3", 4, {})
    settings.check()
    learner = Learner("TD3", {"hidden": (8, 8), "action_noise": (0.1, 0.4)}, [0, 100, 200, 300, 1, 101, 201, 301], 4,
                      OBS, ACT, LOW, HIGH, buffer_size=100, batch_size=8, updates_per_step=1,
                      device=torch.device("cpu"), sharing=settings)
    np.testing.assert_allclose(learner.agents.action_noise.numpy(), [0.1, 0.2, 0.3, 0.4] * 2, rtol=1e-6)


def test_an_action_noise_run_is_named_recorded_and_resumes_exactly(tmp_path):
    args = ["--policy", "DASE_SAC", "--policy_type", "Gaussian", "--env", "Pendulum-v1", "--num_steps", "900",
            "--start_steps", "300", "--hidden_size", "32", "--eval_freq", "300", "--eval_episodes", "1", "--threads",
            "1", "--quiet", "--action_noise", "0", "0.5"]
    stem = "DASE_SAC_noise0-0.5_Pendulum-v1_0"
    names = resumes_exactly(sac_main, args, tmp_path, f"{stem}*.npy")
    assert f"{stem}_Agent_1.npy" in names
    algo = json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]
    assert algo["action_noise"] == [0.0, 0.5]


@pytest.mark.parametrize("script, args, words", [
    (DASE_main, ["--policy", "TD3", "--action_noise", "0.5", "0.1"], "--action_noise 0.5 0.1: MIN must not exceed MAX"),
    (DASE_main, ["--policy", "DASE_TD3", "--action_noise", "0.1", "0.5", "--kl_div_var", "matched"],
     "--kl_div_var matched: --action_noise gives every agent its own"),
    (sac_main, ["--policy", "SAC", "--env", "CartPole-v1", "--action_noise", "0.1", "1.5"],
     "on discrete actions the levels are probabilities of a random action, at most 1"),
    (sac_main, ["--policy", "SAC", "--action_noise", "-0.1", "0.5"], "--action_noise -0.1 must be >= 0"),
    (DASE_main, ["--policy", "DDPG", "--action_noise", "0.1", "0.5", "--expl_noise", "0.2"],
     "--expl_noise and --action_noise both set the exploration noise's std"),
])
def test_bad_action_noise_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    refused_in_one_line(script, args, tmp_path, capsys, words)
