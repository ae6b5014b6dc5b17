"""TD3 (Fujimoto et al., 2018) for N agents at once; losses weighted per sample."""
from __future__ import annotations

import torch

from .base import Batch, StackedAgents
from ..common.nets import DeterministicActor, TwinQ, init_generators, minimise, soft_update, weighted_mean


class TD3(StackedAgents):
    """Twin critics, target policy smoothing, delayed actor and target updates."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, discount=0.99, tau=0.005,
                 policy_noise=0.2, noise_clip=0.5, policy_freq=2, expl_noise=0.1, lr=3e-4,
                 hidden=(256, 256), actor_lr=None, critic_lr=None):
        super().__init__(seeds, low, high, device, expl_noise)
        gens = init_generators(self.seeds)
        # actor_lr/critic_lr: separate rates (the TD3 tutorial's 1e-3 each); None: both ``lr``, TD3's 3e-4
        self.deterministic_actor_critic(DeterministicActor(obs_dim, act_dim, tuple(hidden), gens, low, high),
                                        TwinQ(obs_dim, act_dim, tuple(hidden), gens),
                                        actor_lr=lr if actor_lr is None else actor_lr,
                                        critic_lr=lr if critic_lr is None else critic_lr)
        self.discount, self.tau, self.policy_freq = discount, tau, policy_freq
        self.policy_noise, self.noise_clip = policy_noise, noise_clip

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """r + gamma * not_done * min_j Q'_j(s', clip(pi'(s') + clipped noise))."""
        noise = self.update_rng.normal(*batch.action.shape[1:]) * (self.policy_noise * self.scale)
        noise = torch.maximum(torch.minimum(noise, self.noise_clip * self.scale), -self.noise_clip * self.scale)
        next_action = torch.clamp(self.actor_target(batch.target_input) + noise, self.low, self.high)
        q1, q2 = self.critic_target(batch.target_input, next_action)
        return batch.reward + batch.not_done * batch.gamma(self.discount) * torch.min(q1, q2)

    def schedule(self) -> tuple:
        return ((self.updates + 1) % self.policy_freq == 0,)  # the next update trains the actor too

    @property
    def target_period(self) -> int:
        """Updates between moves of the target networks (with the delayed actor's)."""
        return self.policy_freq

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all N agents; losses are means weighted by ``self.weights``."""
        self.updates += 1
        actor_step = self.updates % self.policy_freq == 0
        pi = self.actor(batch.obs) if actor_step else None  # the actor changes only below: reuse pi
        w = self.weights(batch, pi)
        lw = batch.loss_weights(w)
        target = self.target(batch)

        q1, q2 = self.critic(batch.critic_input, batch.action)
        critic_loss = weighted_mean((q1 - target).pow(2) + (q2 - target).pow(2), lw)
        minimise(self.critic_opt, batch.critic_objective(critic_loss))  # summed over agents: each its own gradient
        info = {"critic_loss": critic_loss.detach(), "weights": w.detach(), "td_error": batch.td_error(q1 - target,
                                                                                                      q2 - target)}

        if actor_step:
            actor_loss = weighted_mean(-self.critic.q1(batch.obs, pi), lw)
            minimise(self.actor_opt, actor_loss.sum())
            soft_update(self.critic_target, self.critic, self.tau)
            soft_update(self.actor_target, self.actor, self.tau)
            info["actor_loss"] = actor_loss.detach()
        return info
