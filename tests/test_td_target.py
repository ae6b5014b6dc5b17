"""TD targets bootstrap through time-limit truncation but not through termination."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from algorithms import DDPG, SAC, TD3, Batch
from utils.run import RunConfig, Trainer

OBS, ACT, B = 3, 2, 8


def twin_rows_batch(gaussian=False) -> Batch:
    """Rows 2k and 2k+1 are the same transition except that row 2k+1 terminated."""
    gen = torch.Generator().manual_seed(1)
    half = lambda *s: torch.randn(1, B // 2, *s, generator=gen).repeat_interleave(2, dim=1)
    not_done = torch.tensor([1.0, 0.0] * (B // 2)).view(1, B, 1)
    return Batch(half(OBS), half(ACT).clamp(-1, 1), half(1), half(OBS), not_done, torch.ones(1, B, dtype=torch.bool),
                 half(ACT) if gaussian else None, half(ACT).abs() + 0.1 if gaussian else None)


@pytest.mark.parametrize("cls,kw,scale", [
    (TD3, {"policy_noise": 0.0}, 1.0),
    (DDPG, {}, 1.0),
    (SAC, {"policy_type": "Gaussian", "reward_scale": 5.0}, 5.0),
    (SAC, {"policy_type": "Deterministic", "reward_scale": 5.0}, 5.0),
])
def test_termination_stops_bootstrapping(cls, kw, scale):
    agents = cls(OBS, ACT, -np.ones(ACT), np.ones(ACT), [0], "cpu", **kw)
    batch = twin_rows_batch(kw.get("policy_type") == "Gaussian")
    y = agents.target(batch)
    terminal, bootstrapped = y[0, 1::2], y[0, 0::2]
    torch.testing.assert_close(terminal, scale * batch.reward[0, 1::2])  # no future value at all
    assert torch.all((bootstrapped - scale * batch.reward[0, 0::2]).abs() > 1e-6)
    if cls is TD3:  # and the future value is gamma * min of the twin target critics
        with torch.no_grad():
            a2 = agents.actor_target(batch.next_obs)
            q = torch.min(*agents.critic_target(batch.next_obs, a2))
        torch.testing.assert_close(bootstrapped, (batch.reward + 0.99 * q)[0, 0::2])


class CountingEnv(gym.Env):
    """obs = [steps taken]; terminates at step ``end`` unless a time limit cuts it first."""

    def __init__(self, end=10**9):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.end = end

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.k += 1
        return np.array([self.k], np.float32), 1.0, self.k >= self.end, False, {}


gym.register("TestTerminates-v0", entry_point=lambda: CountingEnv(end=3))
gym.register("TestTruncated-v0", entry_point=lambda: CountingEnv(), max_episode_steps=3)


@pytest.mark.parametrize("env_id,expected", [("TestTerminates-v0", [1, 1, 0]), ("TestTruncated-v0", [1, 1, 1])])
def test_buffer_stores_terminated_not_truncated(env_id, expected, tmp_path):
    cfg = RunConfig(policy="DASE_TD3", env=env_id, num_agents=2, max_time_steps=12, start_time_steps=100,
                    eval_freq=12, eval_episodes=1, buffer_size=100, batch_size=32, results_dir=str(tmp_path), quiet=True)
    trainer = Trainer(cfg)
    trainer.run()
    buf = trainer.learner.buffer
    assert len(buf) == 24
    np.testing.assert_array_equal(buf.not_done[0, :24, 0].numpy(), np.repeat(expected * 4, 2))
    # the stored next state is the episode's real last state, never the state after the reset
    np.testing.assert_array_equal(buf.next_obs[0, :24, 0].numpy(), np.repeat([1, 2, 3] * 4, 2))
    np.testing.assert_array_equal(buf.obs[0, :24, 0].numpy(), np.repeat([0, 1, 2] * 4, 2))
    np.testing.assert_array_equal(buf.writer[0, :24].numpy(), [0, 1] * 12)


def test_updates_per_step_takes_that_many_batched_updates(tmp_path):
    """--updates_per_step 3 (sac_main.py): three gradient steps per environment step after the warm-up, each on
    its own batch; the run stays deterministic."""
    def run(folder):
        cfg = RunConfig(policy="DASE_SAC", env="Pendulum-v1", num_agents=2, max_time_steps=150, start_time_steps=100,
                        eval_freq=150, eval_episodes=1, batch_size=16, updates_per_step=3, results_dir=str(folder),
                        quiet=True, checkpoint_freq=0, algo={"hidden_size": 16})
        trainer = Trainer(cfg)
        trainer.run()
        return trainer
    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    assert a.agents.updates == 3 * (150 - 100)
    assert torch.equal(a.learner.sampler.counter, torch.full((2,), 3 * 50, dtype=torch.int64))
    for name, net in a.agents.networks.items():
        for p, q in zip(net.parameters(), b.agents.networks[name].parameters()):
            assert torch.equal(p, q)
