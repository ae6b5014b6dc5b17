"""TD3 (Fujimoto et al., 2018) for N agents at once; losses weighted per sample."""
from __future__ import annotations

import torch

from ..common.nets import (
    DeterministicActor,
    EnsembleQ,
    ensemble_min,
    ensemble_subset,
    init_generators,
    minimise,
    soft_update,
    squared_errors,
    weighted_mean,
)
from .base import Batch, StackedAgents


class TD3(StackedAgents):
    """Twin critics, target policy smoothing, delayed actor and target updates. ``ensemble_q`` critics instead of
    two, the target the minimum over ``ensemble_q_sample`` of them drawn per update and agent (REDQ when fewer);
    the actor follows the first critic, as TD3's follows Q1."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, discount=0.99, tau=0.005,
                 policy_noise=0.2, noise_clip=0.5, policy_freq=2, expl_noise=0.1, lr=3e-4,
                 hidden=(256, 256), actor_lr=None, critic_lr=None, ensemble_q=2, ensemble_q_sample=2, noisy=False,
                 noisy_sigma0=0.5):
        super().__init__(seeds, low, high, device, expl_noise)
        gens = init_generators(self.seeds)
        # actor_lr/critic_lr: separate rates (the TD3 tutorial's 1e-3 each); None: both ``lr``, TD3's 3e-4
        actor = self.noisy(DeterministicActor(obs_dim, act_dim, tuple(hidden), gens, low, high), noisy, noisy_sigma0)
        self.deterministic_actor_critic(actor,
                                        EnsembleQ(obs_dim, act_dim, tuple(hidden), gens, n=ensemble_q),
                                        actor_lr=lr if actor_lr is None else actor_lr,
                                        critic_lr=lr if critic_lr is None else critic_lr)
        self.discount, self.tau, self.policy_freq = discount, tau, policy_freq
        self.policy_noise, self.noise_clip = policy_noise, noise_clip
        self.ensemble = (int(ensemble_q), int(ensemble_q_sample))

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """r + gamma * not_done * min_j Q'_j(s', clip(pi'(s') + clipped noise)), j over the critics drawn for this
        update (all of them by default)."""
        noise = self.update_rng.normal(*batch.action.shape[1:]) * (self.policy_noise * self.scale)
        noise = torch.maximum(torch.minimum(noise, self.noise_clip * self.scale), -self.noise_clip * self.scale)
        next_action = torch.clamp(self.actor_target(batch.target_input) + noise, self.low, self.high)
        pick = ensemble_subset(self.update_rng, *self.ensemble)
        q = ensemble_min(self.critic_target(batch.target_input, next_action), pick)
        return batch.reward + batch.not_done * batch.gamma(self.discount) * q

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

        qs = self.critic(batch.critic_input, batch.action)
        critic_loss = weighted_mean(squared_errors(qs, target), lw)
        minimise(self.critic_opt, batch.critic_objective(critic_loss))  # summed over agents: each its own gradient
        info = {"critic_loss": critic_loss.detach(), "weights": w.detach(),
                "td_error": batch.td_error(*(q - target for q in qs))}

        if actor_step:
            actor_loss = weighted_mean(-self.critic.q1(batch.obs, pi), lw)
            minimise(self.actor_opt, actor_loss.sum())
            soft_update(self.critic_target, self.critic, self.tau)
            soft_update(self.actor_target, self.actor, self.tau)
            info["actor_loss"] = actor_loss.detach()
        return info
