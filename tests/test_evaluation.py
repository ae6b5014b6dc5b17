"""Vectorised evaluation (all agents x all episodes in lockstep) == one episode at a time."""
import numpy as np
import pytest

from algorithms import TD3
from utils.envs.registry import make_env
from utils.envs.workers import LocalEnvs, episode_seeds
from utils.run.evaluation import evaluate


def one_at_a_time(agents, env_id, seed, episodes):
    """The plain protocol: for each agent, for each episode, step one environment with one state."""
    scores = np.zeros(agents.members)
    for i in range(agents.members):
        for s in episode_seeds(seed, episodes):
            env = make_env(env_id)
            obs, _ = env.reset(seed=s)
            done, total = False, 0.0
            while not done:
                x = np.zeros((agents.members, 1, obs.shape[0]), dtype=np.float32)
                x[i, 0] = obs
                action = agents.act(x)[i, 0].numpy()
                obs, r, terminated, truncated, _ = env.step(action)
                total += r
                done = terminated or truncated
            scores[i] += total / episodes
    return scores


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Hopper-v5"])
def test_vectorised_evaluation_matches_sequential(env_id):
    env = make_env(env_id)
    agents = TD3(env.observation_space.shape[0], env.action_space.shape[0], env.action_space.low,
                 env.action_space.high, [7, 107, 207], "cpu", hidden=(64, 64))
    envs = LocalEnvs(env_id, [0, 1, 2], [107] * 3, episodes=4)
    batched = evaluate(envs, lambda o: agents.act(o).numpy())
    sequential = one_at_a_time(agents, env_id, 107, 4)
    assert batched.shape == (3,)
    np.testing.assert_allclose(batched, sequential, rtol=1e-5, atol=1e-4)
    assert len(set(np.round(batched, 3))) == 3  # three different agents, three different scores
    # evaluation is repeatable: the same seeded episodes every time
    np.testing.assert_array_equal(batched, evaluate(envs, lambda o: agents.act(o).numpy()))


def test_episodes_differ_and_depend_on_the_seed():
    assert len(set(episode_seeds(100, 10))) == 10
    assert episode_seeds(100, 10) != episode_seeds(101, 10)
    assert episode_seeds(100, 3) == episode_seeds(100, 10)[:3]


class _FrameStackEnvs:
    """Members x episodes of fake games with [4, 6, 6] frame-stack observations: episode (m, e) lasts 2 + m + e
    steps and earns m + 1 per step; each observation holds the step count, so a finished episode must keep its own."""

    def __init__(self, members, episodes):
        self.shape = (members, episodes)
        self.length = np.add.outer(np.arange(members), np.arange(episodes)) + 2
        self.steps = np.zeros(self.shape, dtype=int)

    def frames(self):
        return np.broadcast_to(self.steps[..., None, None, None], self.shape + (4, 6, 6)).astype(np.uint8)

    def eval_reset(self):
        self.steps[:] = 0
        return self.frames()

    def eval_step(self, actions, active):
        assert actions.shape == self.shape + (1,)
        self.steps += active
        rewards = np.broadcast_to(np.arange(self.shape[0])[:, None] + 1.0, self.shape)
        return self.frames(), rewards, self.steps >= self.length


def test_image_observations_with_several_episodes_per_member():
    """Atari's [M, E, 4, 84, 84] frame stacks: episodes of different lengths end apart (this once crashed on
    broadcasting a [M, E, 1] mask against the frames), returns are each episode's own."""
    envs = _FrameStackEnvs(members=2, episodes=3)
    seen = []

    def policy(obs):
        seen.append(obs.copy())
        return np.zeros(obs.shape[:2] + (1,))

    scores = evaluate(envs, policy)
    expected = (envs.length * (np.arange(2)[:, None] + 1.0)).mean(axis=1)
    np.testing.assert_array_equal(scores, expected)
    # after its end an episode's observation stays its last one (step count = its length)
    np.testing.assert_array_equal(seen[-1][..., 0, 0, 0], np.minimum(len(seen) - 1, envs.length))
