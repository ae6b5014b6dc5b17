"""Running observation normalisation per member (Advanced-Soft-Actor-Critic's ``use_normalization``).

Each member keeps the count, mean and sum of squared deviations (M2) of the observations it has seen, merged batch by
batch with Chan et al.'s parallel rule (exact, in float64), and its networks read

    clip((o - mean) / sqrt(M2 / count + 1e-8), -5, 5)

(mean 0 and scale 1 before the first observation). The statistics are parameters without gradient stacked over the members,
so checkpoints slice them per seed and model files carry them like the networks' weights; the replay stores raw
observations, normalised with the statistics of the moment they are read (as ASAC's representation model does).
"""
from __future__ import annotations

import torch
from torch import nn

CLIP, EPS = 5.0, 1e-8


class ObsNormalizer(nn.Module):
    def __init__(self, members: int, obs_dim: int, device=None):
        super().__init__()
        f64 = dict(dtype=torch.float64, device=device)
        self.count = nn.Parameter(torch.zeros(members, **f64), requires_grad=False)
        self.mean = nn.Parameter(torch.zeros(members, obs_dim, **f64), requires_grad=False)
        self.m2 = nn.Parameter(torch.zeros(members, obs_dim, **f64), requires_grad=False)

    @torch.no_grad()
    def observe(self, obs: torch.Tensor) -> None:
        """Merge observations [M, D] (one per member) or [M, E, D] into the statistics."""
        x = obs.to(torch.float64)
        if x.dim() == 2:
            x = x.unsqueeze(1)
        n_b = x.shape[1]
        mean_b = x.mean(1)
        m2_b = (x - mean_b.unsqueeze(1)).pow(2).sum(1)
        n = self.count + n_b
        delta = mean_b - self.mean
        self.mean.add_(delta * (n_b / n).unsqueeze(-1))
        self.m2.add_(m2_b + delta.pow(2) * (self.count * n_b / n).unsqueeze(-1))
        self.count.copy_(n)

    def std(self) -> torch.Tensor:
        """sqrt(M2 / count + eps) [M, D]; 1 before the first observation."""
        var = self.m2 / self.count.clamp_min(1).unsqueeze(-1)
        return torch.where((self.count > 0).unsqueeze(-1), (var + EPS).sqrt(), torch.ones_like(var))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised observations [M, ..., D], in ``obs``'s dtype."""
        lead = (obs.shape[0],) + (1,) * (obs.dim() - 2) + (obs.shape[-1],)
        x = (obs.to(torch.float64) - self.mean.view(lead)) / self.std().view(lead)
        return x.clamp(-CLIP, CLIP).to(obs.dtype)
