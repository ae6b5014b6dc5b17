"""Evaluation: every agent plays the same seeded episodes without exploration noise.

An ``Evaluation`` plays the episodes of all members in lockstep, one policy call per step for all of
them, and can be advanced a step at a time: beside training (in a worker pool the episodes then step
while the update runs) or to the end at once (``run``). Either way it gives the same returns.

With task variants a member may be evaluated on several tasks (``envs.eval_tasks_per_member``, T): its
episodes are task-major, and the policy is called once per task on exactly the arrays a single-task
evaluation would give it, so that the own-task score does not depend on how many other tasks are played.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


class Evaluation:
    """One evaluation, at training step ``t``, of ``policy`` ([M, E, obs_dim] -> [M, E, act_dim]) on ``envs``.

    ``period`` and ``rate``: what training reports with these returns (the diagnostics of the evaluation period
    that ends at ``t``, and the steps per second), kept until the evaluation ends. ``own``: per member, which
    of its evaluation tasks is its own (the one ``scores`` reports; default: the first).
    """

    def __init__(self, envs, policy: Callable[..., np.ndarray], t: int, period: dict | None = None,
                 rate: float = 0.0, own: list[int] | None = None):
        self.envs, self.policy, self.t, self.period, self.rate = envs, policy, t, period or {}, rate
        self.tasks = getattr(envs, "eval_tasks_per_member", 1)
        self.obs = envs.eval_reset()
        self.own = list(own) if own is not None else [0] * self.obs.shape[0]
        self.returns = np.zeros(self.obs.shape[:2])
        self.active = np.ones(self.obs.shape[:2], dtype=bool)

    @property
    def done(self) -> bool:
        return not self.active.any()

    def next_actions(self) -> tuple[np.ndarray, np.ndarray]:
        """Actions for the next step and which episodes are still running."""
        if self.tasks == 1:
            return self.policy(self.obs), self.active.copy()
        e = self.obs.shape[1] // self.tasks
        # a recurrent policy keeps one state per task's block of episodes (``part``)
        call = (lambda o, j: self.policy(o, part=j)) if getattr(self.policy, "stateful", False) else \
            (lambda o, j: self.policy(o))
        return (np.concatenate([call(np.ascontiguousarray(self.obs[:, j * e:(j + 1) * e]), j)
                                for j in range(self.tasks)], axis=1), self.active.copy())

    def observe(self, obs: np.ndarray, rewards: np.ndarray, ended: np.ndarray) -> None:
        """The outcome of a step taken with ``next_actions``."""
        self.returns += np.where(self.active, rewards, 0.0)
        # an ended episode keeps its last observation, whatever its shape (vectors, Atari's frame stacks)
        running = self.active.reshape(self.active.shape + (1,) * (obs.ndim - self.active.ndim))
        self.obs = np.where(running, obs, self.obs)
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
        """Each member's mean return on its own task [M]."""
        if self.tasks == 1:
            return self.returns.mean(axis=1)
        e = self.returns.shape[1] // self.tasks
        own = np.stack([self.returns[m, j * e:(j + 1) * e] for m, j in enumerate(self.own)])
        return own.mean(axis=1)

    def task_scores(self) -> np.ndarray:
        """Each member's mean return on each of its evaluation tasks [M, T] (column ``own[m]``: ``scores``)."""
        m = self.returns.shape[0]
        e = self.returns.shape[1] // self.tasks
        return np.stack([np.stack([self.returns[i, j * e:(j + 1) * e] for j in range(self.tasks)]).mean(axis=1)
                         for i in range(m)])


def evaluate(envs, policy: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Mean return per member over its evaluation episodes (blocking)."""
    return Evaluation(envs, policy, 0).run()
