"""Action distributions of the on-policy learners, for N members at once, sampled from the members' own
counter-based streams (``AgentRNG``): no host sync, nothing a CUDA graph cannot capture, and a member's draws do
not depend on how many members are drawn with it.

``Categorical``: logits [N, B, A] over a discrete action space; ``DiagGaussian``: means [N, B, A] and a
log-std per member [N, 1, A] (state-independent, as SB3's and the A3C references' continuous heads).
Checked against ``torch.distributions`` in tests/test_a2c.py.
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from .nets import AgentRNG

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class Categorical:
    def __init__(self, logits: torch.Tensor):
        self.log_p = F.log_softmax(logits, dim=-1)

    @property
    def probs(self) -> torch.Tensor:
        return self.log_p.exp()

    def sample(self, rng: AgentRNG) -> torch.Tensor:
        """One action per [N, B] row by the inverse of the cumulative distribution at a uniform draw: int64 [N, B]."""
        n, b, a = self.log_p.shape
        u = rng.uniform(b).unsqueeze(-1)  # [N, B, 1]
        cdf = self.probs.cumsum(-1)
        return (cdf <= u).sum(-1).clamp_max(a - 1)

    def mode(self) -> torch.Tensor:
        return self.log_p.argmax(-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.probs * self.log_p).sum(-1)


class DiagGaussian:
    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean, self.log_std = mean, log_std.expand_as(mean)

    def sample(self, rng: AgentRNG) -> torch.Tensor:
        n, b, a = self.mean.shape
        return self.mean + self.log_std.exp() * rng.normal(b, a)

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z.pow(2) - self.log_std - LOG_SQRT_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 + LOG_SQRT_2PI).sum(-1)
