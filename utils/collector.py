"""The training environments: one per agent (member), stepped in lockstep, with episode records for resume."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .checkpoint import EpisodeRecord, restore_env
from .envs import seeded_envs


class Collector:
    """M environments seeded with the members' seeds; ``step`` acts in all of them at once."""

    def __init__(self, env_id: str, seeds: Sequence[int]):
        self.env_id, self.seeds = env_id, [int(s) for s in seeds]
        self.envs, self.obs = seeded_envs(env_id, self.seeds)
        self.episodes = [EpisodeRecord(s) for s in self.seeds]
        self.episode_count = [0] * len(self.seeds)
        space = self.envs[0].action_space
        self.obs_dim, self.act_dim = self.envs[0].observation_space.shape[0], space.shape[0]
        self.low, self.high = space.low, space.high

    def random_actions(self) -> np.ndarray:
        """Uniform actions from each environment's own seeded sampler (the warm-up phase)."""
        return np.stack([env.action_space.sample() for env in self.envs])

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Act in every environment; returns (obs, reward, next_obs, terminated) to store.

        Finished episodes are reset at once; the stored next_obs is the episode's real last state.
        """
        n = len(self.envs)
        obs, next_obs = self.obs, np.empty_like(self.obs)
        rewards, terminated, done = np.empty(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for i, env in enumerate(self.envs):
            next_obs[i], rewards[i], terminated[i], truncated, _ = env.step(actions[i])
            self.episodes[i].actions.append(actions[i])
            done[i] = terminated[i] or truncated
        self.obs = next_obs.copy()
        for i in np.nonzero(done)[0]:
            self.episodes[i] = EpisodeRecord.before_reset(self.envs[i])
            self.obs[i], _ = self.envs[i].reset()
            self.episode_count[i] += 1
        return obs, rewards, next_obs, terminated

    def state_dict(self, rows: slice) -> dict:
        """Members ``rows``: current observations, episode records and samplers, for a checkpoint."""
        return {"obs": torch.as_tensor(self.obs[rows]), "episode_count": self.episode_count[rows],
                "episodes": [e.to_dict() for e in self.episodes[rows]],
                "action_space_rng": [env.action_space.np_random.bit_generator.state for env in self.envs[rows]]}

    def load_state_dicts(self, states: list[dict]) -> None:
        """Re-create every environment in the state the checkpoints describe (slices in member order)."""
        expected = np.concatenate([s["obs"].numpy() for s in states])
        records = [r for s in states for r in s["episodes"]]
        samplers = [r for s in states for r in s["action_space_rng"]]
        self.close()
        restored = [restore_env(self.env_id, rec, seed, space, expected[i])
                    for i, (rec, seed, space) in enumerate(zip(records, self.seeds, samplers))]
        self.envs = [r[0] for r in restored]
        self.episodes = [r[2] for r in restored]
        self.obs = expected.copy()
        self.episode_count = [c for s in states for c in s["episode_count"]]

    def close(self) -> None:
        for env in self.envs:
            env.close()
