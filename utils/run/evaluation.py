"""Evaluation: every agent plays the same seeded episodes without exploration noise.

An ``Evaluation`` plays the episodes of all members in lockstep, one policy call per step for all of
them, and can be advanced a step at a time: beside training (in a worker pool the episodes then step
while the update runs) or to the end at once (``run``). Either way it gives the same returns.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


class Evaluation:
    """One evaluation, at training step ``t``, of ``policy`` ([M, E, obs_dim] -> [M, E, act_dim]) on ``envs``.

    ``period`` and ``rate``: what training reports with these returns (the diagnostics of the evaluation period
    that ends at ``t``, and the steps per second), kept until the evaluation ends.
    """

    def __init__(self, envs, policy: Callable[[np.ndarray], np.ndarray], t: int, period: dict | None = None,
                 rate: float = 0.0):
        self.envs, self.policy, self.t, self.period, self.rate = envs, policy, t, period or {}, rate
        self.obs = envs.eval_reset()
        self.returns = np.zeros(self.obs.shape[:2])
        self.active = np.ones(self.obs.shape[:2], dtype=bool)

    @property
    def done(self) -> bool:
        return not self.active.any()

    def next_actions(self) -> tuple[np.ndarray, np.ndarray]:
        """Actions for the next step and which episodes are still running."""
        return self.policy(self.obs), self.active.copy()

    def observe(self, obs: np.ndarray, rewards: np.ndarray, ended: np.ndarray) -> None:
        """The outcome of a step taken with ``next_actions``."""
        self.returns += np.where(self.active, rewards, 0.0)
        self.obs = np.where(self.active[..., None], obs, self.obs)
        self.active &= ~ended

    def advance(self, steps: int) -> None:
        """Up to ``steps`` more steps, on their own (not beside a training step)."""
        for _ in range(steps):
            if self.done:
                return
            self.observe(*self.envs.eval_step(*self.next_actions()))

    def run(self) -> np.ndarray:
        """Play to the end; the mean return per member [M]."""
        while not self.done:
            self.advance(1)
        return self.scores()

    def scores(self) -> np.ndarray:
        return self.returns.mean(axis=1)


def evaluate(envs, policy: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Mean return per member over its evaluation episodes (blocking)."""
    return Evaluation(envs, policy, 0).run()
