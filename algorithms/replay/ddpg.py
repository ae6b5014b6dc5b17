"""DDPG (Lillicrap et al., 2016; the 400-300 variant of Fujimoto et al.) for N agents at once."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..common.nets import BatchedLinear, DeterministicActor, init_generators, minimise, soft_update, weighted_mean
from .base import Batch, StackedAgents


class DDPGCritic(nn.Module):
    """Q(s, a): state -> 400, then [features, action] -> 300 -> 1 (``hidden``: the two widths)."""

    def __init__(self, obs_dim: int, act_dim: int, gens, hidden: tuple[int, int] = (400, 300)):
        super().__init__()
        self.l1 = BatchedLinear(obs_dim, hidden[0], gens)
        self.l2 = BatchedLinear(hidden[0] + act_dim, hidden[1], gens)
        self.l3 = BatchedLinear(hidden[1], 1, gens)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.l1(obs))
        h = F.relu(self.l2(torch.cat([h, action], dim=-1)))
        return self.l3(h)


class DDPG(StackedAgents):
    """One critic, actor and targets updated every step, small tau."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, discount=0.99, tau=0.001,
                 expl_noise=0.1, actor_lr=1e-4, critic_lr=1e-3, critic_weight_decay=1e-2,
                 hidden=(400, 300), noisy=False, noisy_sigma0=0.5):
        super().__init__(seeds, low, high, device, expl_noise)
        gens = init_generators(self.seeds)
        actor = self.noisy(DeterministicActor(obs_dim, act_dim, hidden, gens, low, high), noisy, noisy_sigma0)
        self.deterministic_actor_critic(actor,
                                        DDPGCritic(obs_dim, act_dim, gens, hidden), actor_lr=actor_lr, critic_lr=critic_lr,
                                        critic_weight_decay=critic_weight_decay)
        self.discount, self.tau = discount, tau

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """r + gamma * not_done * Q'(s', pi'(s'))."""
        q = self.critic_target(batch.target_input, self.actor_target(batch.target_input))
        return batch.reward + batch.not_done * batch.gamma(self.discount) * q

    def stored_action_values(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        return (self.critic(batch.critic_input, batch.action),)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all N agents; losses are means weighted by ``self.weights``."""
        self.updates += 1
        pi = self.actor(batch.obs)  # the actor changes only below: reuse pi
        w = self.weights(batch, pi)
        lw = batch.loss_weights(w)
        target = self.target(batch)

        error = self.critic(batch.critic_input, batch.action) - target
        critic_loss = weighted_mean(error.pow(2), lw)
        minimise(self.critic_opt, batch.critic_objective(critic_loss))

        actor_loss = weighted_mean(-self.critic(batch.obs, pi), lw)
        minimise(self.actor_opt, actor_loss.sum())

        soft_update(self.critic_target, self.critic, self.tau)
        soft_update(self.actor_target, self.actor, self.tau)
        return {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "weights": w.detach(),
                "td_error": batch.td_error(error)}
