"""The learner protocol: what the loop (loop.py) asks of a learner, whichever family it is.

Two learners speak it: ``Learner`` (replay/learner.py; off-policy: DDPG, TD3, SAC and their sharing methods, one
environment per member, updates from replay buffers) and ``RolloutLearner`` (onpolicy/rollout.py; on-policy: A2C and
DIFF_A2C, K environments per member, one update per n-step rollout). The loop is the same for both: it steps
the environments, feeds the learner, evaluates, checkpoints and resumes. (A3C is not lockstep: its
asynchronous workers run under their own trainer, utils.run.onpolicy.asynchronous.)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np


class LearnerProtocol(Protocol):
    steps_per_iteration: int  # environment steps per member in one loop step (K environments each)
    agents: object  # the batched agents: agent_state / load_agent_state (--save_model, --load_model), compile
    scheme: object  # the sharing scheme: writes_weights, writes_consensus, consensus()

    def act(self, obs: np.ndarray, warmup: bool) -> tuple[np.ndarray | None, tuple | None]:
        """Actions for the environments' observations (None: random ones) and what the store needs of them."""

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None) -> None:
        """What the environments did in the step just taken (ended: terminated or truncated)."""

    def train(self, t: int) -> None:
        """Called after every step (not in the warm-up); the learner decides whether and how much to update."""

    def snapshot(self, t: int = 0) -> Callable[[np.ndarray], np.ndarray]:
        """The policies now, for an evaluation at step ``t`` that may run beside training (greedy, or for the
        actor-critic family with --eval_policy sample drawing from a stream of each member's seed and ``t``)."""

    def period_stats(self) -> dict[str, np.ndarray]:
        """Per member, the statistics the algorithm declares, averaged since the last call ('weight' included)."""

    def broken(self) -> list[tuple[int, str]]:
        """Per member: (first step with a non-finite loss or -1, what broke)."""

    def state_dict(self, seed_index: int) -> dict:
        """One seed's part of the learner, as a process of that seed alone would hold it."""

    def load_state_dicts(self, states: list[dict]) -> None:
        """Restore from one ``state_dict`` per seed, in seed order."""


def members_broken(first_bad, parameters) -> list[tuple[int, str]]:
    """``Learner.broken`` of stacked members: per member (the first step with a non-finite loss, "loss"), else
    (-1, "parameters") when one of its parameters (the first dimension is the member) is not finite, else (-1, "").
    ``first_bad``: a tensor [members] of steps, -1 where the loss stayed finite. One host sync."""
    import torch

    bad_params = torch.zeros(first_bad.shape[0], dtype=torch.bool, device=first_bad.device)
    for p in parameters:
        bad_params |= ~torch.isfinite(p.detach()).reshape(p.shape[0], -1).all(dim=1)
    return [(step, "loss") if step >= 0 else (-1, "parameters" if bad else "") for step, bad in
            zip(first_bad.cpu().tolist(), bad_params.cpu().tolist())]
