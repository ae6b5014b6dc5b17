"""The evolver of Advanced-Soft-Actor-Critic: the cross-entropy method over whole learners.

Once every learner has been evaluated enough, the learners are ranked by their recent evaluations; the best
``elite`` fraction (30 %) define, parameter by parameter, a Gaussian (their mean, their standard deviation capped
at ``max_std``, 1); every learner is sent parameters drawn from it. ``cem_step`` is that step on stacked parameters.

``Schedule`` decides when a selection happens and who takes part, as ASAC's evolver does: when every learner still
training has ``every`` new evaluations, or, after ``seconds`` since the last selection, among those with at least
2 new ones (if 2 or more have them). A learner left out of ``lag`` selections in a row is removed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

ELITE, MAX_STD = 0.3, 1.0


def elite_count(learners: int, elite: float = ELITE) -> int:
    """How many learners are kept: the top ``elite`` fraction, at least one."""
    return max(1, int(math.ceil(elite * learners - 1e-9)))


def cem_step(params: dict[str, torch.Tensor], scores, generator: torch.Generator, elite: float = ELITE,
             max_std: float = MAX_STD, draws: int | None = None) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """New parameters for every learner: ``params`` name -> [M, ...] (learner m's in row m), ``scores`` [M] (higher
    is better); returns (name -> [draws, ...] drawn from the elites' Gaussian (``draws``: M by default), the elites'
    indices, best first). The standard deviation is the elites' population one (ddof 0), capped at ``max_std``; with
    one elite it is 0 (every learner gets its parameters)."""
    scores = np.asarray(scores, dtype=np.float64)
    m = len(scores)
    order = np.argsort(-scores, kind="stable")
    elites = order[:elite_count(m, elite)]
    index = torch.as_tensor(elites)
    out = {}
    for name, p in params.items():
        chosen = p[index].to(torch.float64)
        mean, std = chosen.mean(0), chosen.std(0, unbiased=False).clamp(max=max_std)
        noise = torch.randn((draws or m, *p.shape[1:]), generator=generator, dtype=torch.float64)
        out[name] = (mean + std * noise).to(p.dtype)
    return out, elites


@dataclass
class Schedule:
    """When the evolver selects, who takes part, who is removed (see the module's docstring). ``counts`` are the
    learners' evaluations so far (the one at step 0 included); ``now`` a clock in seconds."""

    learners: int
    every: int
    seconds: float = 180.0
    lag: int = 4
    start: float = 0.0
    alive: list[int] = field(default_factory=list)
    since: list[int] = field(default_factory=list)  # each learner's evaluation count at its last selection
    missed: list[int] = field(default_factory=list)  # selections in a row it was left out of
    selections: int = 0

    def __post_init__(self):
        self.alive = list(range(self.learners))
        self.since, self.missed, self.last = [1] * self.learners, [0] * self.learners, self.start

    def ready(self, counts: list[int], now: float) -> list[int] | None:
        """The learners of a selection due now, or None (fewer than 2 learners left: none ever again)."""
        if len(self.alive) < 2:
            return None
        new = {m: counts[m] - self.since[m] for m in self.alive}
        if all(new[m] >= self.every for m in self.alive):
            return list(self.alive)
        if now - self.last >= self.seconds:
            some = [m for m in self.alive if new[m] >= 2]
            if len(some) >= 2:
                return some
        return None

    def select(self, taking_part: list[int], counts: list[int], now: float) -> list[int]:
        """Record a selection among ``taking_part``; returns the learners it removes (left out ``lag`` in a row)."""
        self.selections += 1
        self.last = now
        for m in self.alive:
            if m in taking_part:
                self.since[m], self.missed[m] = counts[m], 0
            else:
                self.missed[m] += 1
        removed = [m for m in self.alive if self.missed[m] >= self.lag]
        self.alive = [m for m in self.alive if m not in removed]
        return removed
