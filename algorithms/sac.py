"""SAC (Haarnoja et al., 2018) for N agents at once, Gaussian or deterministic policy; losses weighted per sample."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from .base import Batch, StackedAgents
from .nets import adam, MLP, BatchedLinear, DeterministicActor, TwinQ, freeze, init_generators, minimise, soft_update, weighted_mean
from .sharing import clipped_normal_variance

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP = 0.1, 0.25


class GaussianActor(nn.Module):
    """tanh-squashed Gaussian policy; forward() gives the deterministic (mean) action."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int, gens, low, high):
        super().__init__()
        self.body = MLP([obs_dim, hidden, hidden], gens, init="xavier")
        self.mean_head = BatchedLinear(hidden, act_dim, gens, init="xavier")
        self.log_std_head = BatchedLinear(hidden, act_dim, gens, init="xavier")
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("offset", (high + low) / 2)

    def gaussian(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-tanh mean and standard deviation."""
        h = F.relu(self.body(obs), inplace=True)
        log_std = self.log_std_head(h).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return self.mean_head(h), log_std.exp()

    def squash(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * self.scale + self.offset

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.squash(self.gaussian(obs)[0])

    def sample(self, obs: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised action and its log-probability [N, B, 1] (tanh change of variables)."""
        mean, std = self.gaussian(obs)
        x = mean + std * eps
        y = torch.tanh(x)
        log_prob = -0.5 * eps.pow(2) - torch.log(std) - 0.5 * math.log(2 * math.pi)
        log_prob = log_prob - torch.log(self.scale * (1 - y.pow(2)) + 1e-6)
        return y * self.scale + self.offset, log_prob.sum(-1, keepdim=True)


class Temperature(nn.Module):
    """log(alpha) per agent; trained only with automatic entropy tuning."""

    def __init__(self, n: int, alpha: float, trainable: bool):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.full((n,), math.log(alpha)), requires_grad=trainable)

    def forward(self) -> torch.Tensor:
        return self.log_alpha.exp().view(-1, 1, 1)


class SAC(StackedAgents):
    """Twin soft Q critics; the policy is Gaussian or deterministic (``policy_type``)."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, policy_type="Deterministic",
                 gamma=0.99, tau=0.005, lr=3e-4, alpha=0.2, automatic_entropy_tuning=False, reward_scale=5.0,
                 hidden_size=256, target_update_interval=1):
        super().__init__(seeds, low, high, device, expl_noise=DETERMINISTIC_NOISE)
        gens = init_generators(self.seeds)
        self.gaussian = policy_type == "Gaussian"
        self.gaussian_behaviour = self.gaussian
        if self.gaussian:
            self.actor = GaussianActor(obs_dim, act_dim, hidden_size, gens, low, high)
        else:
            self.actor = DeterministicActor(obs_dim, act_dim, (hidden_size, hidden_size), gens, low, high, init="xavier")
        self.actor = self.actor.to(self.device)
        self.critic = TwinQ(obs_dim, act_dim, (hidden_size, hidden_size), gens, init="xavier").to(self.device)
        self.critic_target = freeze(copy.deepcopy(self.critic))
        # entropy tuning is meaningless without action probabilities
        self.auto_alpha = automatic_entropy_tuning and self.gaussian
        self.temperature = Temperature(self.members, alpha, self.auto_alpha).to(self.device)
        self.target_entropy = -float(act_dim)
        self.actor_opt = adam(self.actor.parameters(), lr=lr)
        self.critic_opt = adam(self.critic.parameters(), lr=lr)
        self.alpha_opt = adam(self.temperature.parameters(), lr=lr) if self.auto_alpha else None
        self.networks = {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target,
                         "temperature": self.temperature}
        self.gamma, self.tau, self.reward_scale = gamma, tau, reward_scale
        self.target_update_interval = target_update_interval

    def exploration_variance(self) -> torch.Tensor:
        """The deterministic policy's clipped Gaussian noise (``sample``), per action dimension, in action units."""
        return clipped_normal_variance(DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP) * self.scale.pow(2)

    def sample(self, obs: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training action and log-probability; the deterministic policy adds clipped noise, log pi = 0."""
        if self.gaussian:
            return self.actor.sample(obs, eps)
        noise = (eps * DETERMINISTIC_NOISE).clamp(-DETERMINISTIC_NOISE_CLIP, DETERMINISTIC_NOISE_CLIP) * self.scale
        action = torch.clamp(self.actor(obs) + noise, self.low, self.high)
        return action, torch.zeros_like(action[..., :1])

    @torch.no_grad()
    def explore_device(self, obs: torch.Tensor):
        """Training actions; for a Gaussian policy also the behaviour (pre-tanh mean, std)."""
        obs = obs.unsqueeze(1)
        eps = self.explore_rng.normal(1, int(self.low.shape[-1]))
        action, _ = self.sample(obs, eps)
        behaviour = None
        if self.gaussian:
            mean, std = self.actor.gaussian(obs)
            behaviour = (mean.squeeze(1), std.squeeze(1))
        return action.squeeze(1), behaviour

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """scale * r + gamma * not_done * (min_j Q'_j(s', a') - alpha * log pi(a'|s')), a' ~ pi(s')."""
        next_action, next_log_prob = self.sample(batch.next_obs, self.update_rng.normal(*batch.action.shape[1:]))
        q1, q2 = self.critic_target(batch.next_obs, next_action)
        soft_q = torch.min(q1, q2) - self.temperature() * next_log_prob
        return self.reward_scale * batch.reward + batch.not_done * batch.gamma(self.gamma) * soft_q

    def schedule(self) -> tuple:
        return ((self.updates + 1) % self.target_update_interval == 0,)  # the next update moves the targets

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all N agents; losses are means weighted by ``self.weights``."""
        w = self.weights(batch)
        target = self.target(batch)

        q1, q2 = self.critic(batch.obs, batch.action)
        critic_loss = weighted_mean((q1 - target).pow(2) + (q2 - target).pow(2), w)
        minimise(self.critic_opt, critic_loss.sum())

        action, log_prob = self.sample(batch.obs, self.update_rng.normal(*batch.action.shape[1:]))
        q1_pi, q2_pi = self.critic(batch.obs, action)
        alpha = self.temperature().detach()
        actor_loss = weighted_mean(alpha * log_prob - torch.min(q1_pi, q2_pi), w)
        minimise(self.actor_opt, actor_loss.sum())
        info = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "weights": w.detach()}

        if self.auto_alpha:
            log_alpha = self.temperature.log_alpha.view(-1, 1, 1)
            alpha_loss = weighted_mean(-log_alpha * (log_prob.detach() + self.target_entropy), w)
            minimise(self.alpha_opt, alpha_loss.sum())
            info["alpha"] = self.temperature.log_alpha.detach().exp()

        self.updates += 1
        if self.updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)
        return info
