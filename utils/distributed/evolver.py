"""The evolver of Advanced-Soft-Actor-Critic: the cross-entropy method over whole learners.

Once every learner has been evaluated enough, the learners are ranked by their recent evaluations; the best
``elite`` fraction (30 %) define, parameter by parameter, a Gaussian (their mean, their standard deviation capped
at ``max_std``, 1); every learner is sent parameters drawn from it. ``cem_step`` is that step on stacked parameters.
"""
from __future__ import annotations

import math

import numpy as np
import torch

ELITE, MAX_STD = 0.3, 1.0


def elite_count(learners: int, elite: float = ELITE) -> int:
    """How many learners are kept: the top ``elite`` fraction, at least one."""
    return max(1, int(math.ceil(elite * learners - 1e-9)))


def cem_step(params: dict[str, torch.Tensor], scores, generator: torch.Generator, elite: float = ELITE,
             max_std: float = MAX_STD) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """New parameters for every learner: ``params`` name -> [M, ...] (learner m's in row m), ``scores`` [M] (higher
    is better); returns (name -> [M, ...] drawn from the elites' Gaussian, the elites' indices, best first). The
    standard deviation is the elites' population one (ddof 0), capped at ``max_std``; with one elite it is 0 (every
    learner gets its parameters)."""
    scores = np.asarray(scores, dtype=np.float64)
    m = len(scores)
    order = np.argsort(-scores, kind="stable")
    elites = order[:elite_count(m, elite)]
    index = torch.as_tensor(elites)
    out = {}
    for name, p in params.items():
        chosen = p[index].to(torch.float64)
        mean, std = chosen.mean(0), chosen.std(0, unbiased=False).clamp(max=max_std)
        noise = torch.randn((m, *p.shape[1:]), generator=generator, dtype=torch.float64)
        out[name] = (mean + std * noise).to(p.dtype)
    return out, elites
