"""Intrinsic rewards for the replay learners (Advanced-Soft-Actor-Critic's ``curiosity`` and ``use_rnd``), every
parameter stacked over the members. Both read a batch's (s, a, s') and give a bonus per sample, added to the reward
of the update's target, and a loss per member that trains them on the same batch (before their step, so the bonus
is the novelty the sample had when it was drawn).

Curiosity (Pathak et al. 2017, the Intrinsic Curiosity Module): an encoder phi, an inverse model g(phi(s), phi(s'))
-> a and a forward model f(phi(s), a) -> phi(s'); the features are trained by the inverse loss only (phi(s') is a
fixed target of the forward loss), and the loss is (1 - 0.2) L_I + 0.2 L_F (the paper's beta 0.2). The bonus is
strength times

    forward:  0.5 |f(phi(s), a) - phi(s')|^2     (the ICM reward: the forward model's error in the inverse model's
                                                  feature space)
    inverse:  the inverse model's error, 0.5 |g - a|^2 (a scaled to [-1, 1]) or the cross-entropy of the taken
              action (discrete), as ASAC's INVERSE mode rewards.

Random network distillation (Burda et al. 2019, on state-action pairs as ASAC's ``ModelRND``): a predictor p(s, a)
learns to match a fixed, randomly initialised target t(s, a); the bonus is strength * mean_j (p_j - t_j)^2, large for
pairs seldom trained on. ASAC also picks actions with it (``rnd_n_sample``): of K candidate exploration actions the
most novel is taken (``novelty``).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..common.nets import MLP, freeze

WIDTH = 64  # hidden and feature widths of both models (ASAC's dense_n 64, two layers)
ICM_BETA = 0.2


class ActionCoding:
    """Actions as the models read them: continuous ones scaled to [-1, 1], discrete indices one-hot."""

    def __init__(self, low, high, n_actions: int | None):
        self.discrete = low is None
        self.n = int(n_actions) if self.discrete else None
        if not self.discrete:
            self.mid, self.half = (high + low) / 2, (high - low) / 2

    def __call__(self, action: torch.Tensor) -> torch.Tensor:
        if self.discrete:  # one-hot by comparison (F.one_hot checks the indices on the host: not capture-safe)
            return (action.long() == torch.arange(self.n, device=action.device)).to(torch.float32)
        return (action - self.mid) / self.half


class Curiosity(nn.Module):
    def __init__(self, obs_dim: int, act_width: int, gens, coding: ActionCoding, mode: str, strength: float):
        super().__init__()
        if mode not in ("forward", "inverse"):
            raise ValueError(f"unknown curiosity {mode!r}")
        self.encoder = MLP([obs_dim, WIDTH, WIDTH], gens)
        self.inverse = MLP([2 * WIDTH, WIDTH, act_width], gens)
        self.forward_model = MLP([WIDTH + act_width, WIDTH, WIDTH], gens)
        self.coding, self.mode, self.strength = coding, mode, float(strength)

    def bonus_and_loss(self, obs, action, next_obs) -> tuple[torch.Tensor, torch.Tensor]:
        """(bonus [M, B, 1] without gradient, loss [M])."""
        a = self.coding(action)
        phi, phi_next = self.encoder(obs), self.encoder(next_obs)
        predicted = self.forward_model(torch.cat([phi.detach(), a], dim=-1))
        forward_error = 0.5 * (predicted - phi_next.detach()).pow(2).sum(-1, keepdim=True)
        guess = self.inverse(torch.cat([phi, phi_next], dim=-1))
        if self.coding.discrete:  # the cross-entropy of the taken action, -log softmax(g)[a]
            inverse_error = -F.log_softmax(guess, dim=-1).gather(-1, action.long())
        else:
            inverse_error = 0.5 * (guess - a).pow(2).sum(-1, keepdim=True)
        loss = (1 - ICM_BETA) * inverse_error.mean((1, 2)) + ICM_BETA * forward_error.mean((1, 2))
        bonus = forward_error if self.mode == "forward" else inverse_error
        return self.strength * bonus.detach(), loss


class RND(nn.Module):
    def __init__(self, obs_dim: int, act_width: int, gens, target_gens, coding: ActionCoding, strength: float):
        super().__init__()
        self.predictor = MLP([obs_dim + act_width, WIDTH, WIDTH, WIDTH], gens)
        self.target = freeze(MLP([obs_dim + act_width, WIDTH, WIDTH, WIDTH], target_gens))
        self.coding, self.strength = coding, float(strength)

    def novelty(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """mean_j (p_j(s, a) - t_j(s, a))^2, [M, B, 1] (with the predictor's gradient)."""
        x = torch.cat([obs, self.coding(action)], dim=-1)
        return (self.predictor(x) - self.target(x)).pow(2).mean(-1, keepdim=True)

    def bonus_and_loss(self, obs, action, next_obs) -> tuple[torch.Tensor, torch.Tensor]:
        error = self.novelty(obs, action)
        return self.strength * error.detach(), error.mean((1, 2))
