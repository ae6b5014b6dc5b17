"""The loop's seams as declared types: what the loop (loop.py) asks of a learner, whichever family it is
(``LearnerProtocol``, the type of ``Setup.learner``), and of the environments (``EnvsProtocol``); what the resume plan
and the per-seed files read of the trainer is state.py's ``RunState``. ``mypy`` checks them (pyproject.toml, .ci/run): a
learner that lacks a method the loop calls, or a seam that reads what the trainer does not declare, fails there.

Two learners speak it: ``Learner`` (replay/learner.py; off-policy: DDPG, TD3, SAC and their sharing methods, one
environment per member, updates from replay buffers) and ``RolloutLearner`` (onpolicy/rollout.py; on-policy: A2C and
DIFF_A2C, K environments per member, one update per n-step rollout). The loop is the same for both: it steps
the environments, feeds the learner, evaluates, checkpoints and resumes. (A3C is not lockstep: its
asynchronous workers run under their own trainer, utils.run.onpolicy.asynchronous.)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch


class EnvsProtocol(Protocol):
    """The environments the loop steps (LocalEnvs, EnvWorkers, EnvPoolEnvs, JointEnvs: setup.py types them so):
    every member's training environments in lockstep and its evaluation episodes beside them."""

    @property
    def max_episode_steps(self) -> int | None: ...

    @property
    def obs(self) -> np.ndarray: ...

    def step(self, actions: np.ndarray | None, eval_actions: np.ndarray | None = None,
             eval_active: np.ndarray | None = None) -> tuple[np.ndarray, ...]: ...

    def eval_reset(self) -> np.ndarray: ...

    def eval_step(self, actions: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def eval_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def state_dict(self, rows: slice = slice(None)) -> dict: ...

    def load_state_dicts(self, states: list[dict]) -> None: ...

    def close(self) -> None: ...


class AgentsProtocol(Protocol):
    """The batched agents, as the loop touches them: one member's state (--save_model, --load_model), compiled."""

    def agent_state(self, member: int) -> dict: ...

    def load_agent_state(self, member: int, state: dict) -> None: ...

    def compile(self) -> None: ...


class SchemeProtocol(Protocol):
    """The sharing scheme, as the loop reads it at an evaluation: the consensus and gossip series it writes."""

    @property
    def writes_consensus(self) -> bool: ...

    @property
    def writes_gossip(self) -> bool: ...

    def consensus(self) -> np.ndarray: ...

    def gossip_stats(self) -> np.ndarray: ...


class LearnerProtocol(Protocol):
    """What every learner the loop drives provides (Learner, RecurrentLearner, ImageLearner, RolloutLearner: setup.py's
    ``make_learner`` returns this type, so mypy checks each of them against it)."""

    steps_per_iteration: int  # environment steps per member in one loop step (K environments each)

    @property
    def agents(self) -> AgentsProtocol:
        """The batched agents."""

    @property
    def scheme(self) -> SchemeProtocol:
        """The sharing scheme."""

    def act(self, obs: np.ndarray, warmup: bool) -> tuple[np.ndarray | None, tuple | None]:
        """Actions for the environments' observations (None: random ones) and what the store needs of them."""

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None) -> None:
        """What the environments did in the step just taken (ended: terminated or truncated)."""

    def train(self, t: int) -> None:
        """Called after every step (not in the warm-up); the learner decides whether and how much to update."""

    def snapshot(self, t: int = 0) -> Callable[[np.ndarray], np.ndarray]:
        """The policies now, for an evaluation at step ``t`` that may run beside training (greedy, or for the
        actor-critic family with --eval_policy sample drawing from a stream of each member's seed and ``t``)."""

    def greedy_actions(self, obs: np.ndarray) -> torch.Tensor:
        """Every member's current policy without exploration, [M, E, ...] -> actions (the tutorial's evaluation
        episode after each training episode)."""

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
