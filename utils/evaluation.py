"""Evaluation: every agent plays the same seeded episodes without exploration noise."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .envs import make_env


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """Reset seeds of the evaluation episodes, derived from ``seed`` (the run's seed + 100)."""
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(episodes)]


class Evaluator:
    """Plays ``episodes`` episodes for each of M agents in lockstep: one policy call per step for all.

    ``seed`` is one evaluation seed for all agents, or one per agent (several run seeds in one
    process: agent m plays the episodes of its own run's seed).
    """

    def __init__(self, env_id: str, num_agents: int, seed: int | Sequence[int], episodes: int = 10):
        self.envs = [[make_env(env_id) for _ in range(episodes)] for _ in range(num_agents)]
        row_seeds = [seed] * num_agents if isinstance(seed, int) else list(seed)
        if len(row_seeds) != num_agents:
            raise ValueError(f"{len(row_seeds)} evaluation seeds for {num_agents} agents")
        self.seeds = [episode_seeds(s, episodes) for s in row_seeds]

    def __call__(self, policy: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """policy maps observations [M, E, obs_dim] to actions [M, E, act_dim]; returns mean returns [M]."""
        n, e = len(self.envs), len(self.seeds[0])
        obs = np.stack([np.stack([env.reset(seed=s)[0] for env, s in zip(row, seeds)])
                        for row, seeds in zip(self.envs, self.seeds)])
        returns = np.zeros((n, e))
        active = np.ones((n, e), dtype=bool)
        while active.any():
            actions = policy(obs)
            for i, j in zip(*np.nonzero(active)):
                o, r, terminated, truncated, _ = self.envs[i][j].step(actions[i, j])
                returns[i, j] += r
                obs[i, j] = o
                if terminated or truncated:
                    active[i, j] = False
        return returns.mean(axis=1)

    def close(self) -> None:
        for row in self.envs:
            for env in row:
                env.close()
