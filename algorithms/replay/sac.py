"""SAC (Haarnoja et al., 2018) for N agents at once, Gaussian or deterministic policy; losses weighted per sample."""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from ..common.nets import (
    MLP,
    BatchedLinear,
    DeterministicActor,
    EnsembleQ,
    adam,
    ensemble_min,
    ensemble_subset,
    freeze,
    init_generators,
    minimise,
    noisy_layers,
    soft_update,
    squared_errors,
    weighted_mean,
)
from ..sharing.weights import BatchDivergence, clipped_normal_variance
from .base import Batch, StackedAgents

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


def soft_actor_critic(agent: StackedAgents, actor: nn.Module, critic: nn.Module, alpha: float, auto_alpha: bool,
                      lr: float) -> None:
    """SAC's networks and optimisers on ``agent`` (both action spaces): the actor and twin critic on its device, a
    frozen copy of the critic as its target, the temperature (learnt when ``auto_alpha``), an Adam for each learnt
    part, and ``networks``, what a checkpoint saves."""
    agent.actor = actor.to(agent.device)
    agent.critic = critic.to(agent.device)
    agent.critic_target = freeze(copy.deepcopy(agent.critic))
    agent.auto_alpha = bool(auto_alpha)
    agent.temperature = Temperature(agent.members, alpha, agent.auto_alpha).to(agent.device)
    agent.actor_opt = adam(agent.actor.parameters(), lr=lr)
    agent.critic_opt = adam(agent.critic.parameters(), lr=lr)
    agent.alpha_opt = adam(agent.temperature.parameters(), lr=lr) if agent.auto_alpha else None
    agent.networks = {"actor": agent.actor, "critic": agent.critic, "critic_target": agent.critic_target,
                      "temperature": agent.temperature}
    if noisy_layers(agent.actor):  # --noisy: the actor, and discrete SAC's critics, carry noise
        agent.acting_noisy = (agent.actor,)
        agent.update_noisy = (agent.actor, agent.critic, agent.critic_target) if noisy_layers(agent.critic) \
            else (agent.actor,)


class Temperature(nn.Module):
    """log(alpha) per agent; trained only with automatic entropy tuning."""

    def __init__(self, n: int, alpha: float, trainable: bool):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.full((n,), math.log(alpha)), requires_grad=trainable)

    def forward(self) -> torch.Tensor:
        return self.log_alpha.exp().view(-1, 1, 1)


class SAC(StackedAgents):
    """Twin soft Q critics; the policy is Gaussian or deterministic (``policy_type``). ``ensemble_q`` critics instead
    of two: the target's minimum over ``ensemble_q_sample`` of them drawn per update and agent; the actor maximises
    the minimum over all of them, or, when fewer are drawn (REDQ, Chen et al. 2021), their mean."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, policy_type="Deterministic",
                 gamma=0.99, tau=0.005, lr=3e-4, alpha=0.2, automatic_entropy_tuning=False, reward_scale=5.0,
                 hidden_size=256, target_update_interval=1, vtrace=None, ensemble_q=2, ensemble_q_sample=2,
                 noisy=False, noisy_sigma0=0.5, deterministic_noise="per_sample"):
        super().__init__(seeds, low, high, device, expl_noise=DETERMINISTIC_NOISE)
        gens = init_generators(self.seeds)
        self.gaussian = policy_type == "Gaussian"
        # --deterministic_noise paper_code: the DASE paper's SAC code's use of the Deterministic policy's noise
        self.paper_noise = deterministic_noise == "paper_code"
        if self.paper_noise and self.gaussian:
            raise ValueError("deterministic_noise paper_code: only the Deterministic policy adds this noise")
        self.gaussian_behaviour = self.gaussian
        if self.gaussian:
            self.actor = GaussianActor(obs_dim, act_dim, hidden_size, gens, low, high)
        else:
            self.actor = DeterministicActor(obs_dim, act_dim, (hidden_size, hidden_size), gens, low, high, init="xavier")
        self.actor = self.noisy(self.actor, noisy, noisy_sigma0)
        # entropy tuning is meaningless without action probabilities
        critic = EnsembleQ(obs_dim, act_dim, (hidden_size, hidden_size), gens, init="xavier", n=ensemble_q)
        soft_actor_critic(self, self.actor, critic, alpha, automatic_entropy_tuning and self.gaussian, lr)
        self.ensemble = (int(ensemble_q), int(ensemble_q_sample))
        self.target_entropy = -float(act_dim)
        self.gamma, self.tau, self.reward_scale = gamma, tau, reward_scale
        self.target_update_interval = target_update_interval
        # V-trace corrections of N-step targets: None, or (rho_bar, c_bar, lambda); needs the Gaussian policy
        self.vtrace = tuple(float(x) for x in vtrace) if vtrace else None
        if self.vtrace and not self.gaussian:
            raise ValueError("V-trace needs action probabilities: the Gaussian policy")

    def exploration_variance(self) -> torch.Tensor:
        """The deterministic policy's clipped Gaussian noise (``sample``), per action dimension, in action units."""
        var = clipped_normal_variance(DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP)
        return var * torch.ones_like(self.scale) if self.paper_noise else var * self.scale.pow(2)

    def sample(self, obs: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training action and log-probability; the deterministic policy adds clipped noise, log pi = 0."""
        if self.gaussian:
            return self.actor.sample(obs, eps)
        if self.paper_noise:  # each agent's first draw for every row of the call, as the paper's code draws one
            n, a = eps.shape[0], eps.shape[-1]
            eps = eps.reshape(n, -1, a)[:, :1].view(n, *(1,) * (eps.dim() - 2), a)
        noise = (eps * DETERMINISTIC_NOISE).clamp(-DETERMINISTIC_NOISE_CLIP, DETERMINISTIC_NOISE_CLIP)
        if self.paper_noise:  # the paper's code: in absolute units, and an action up to the clip outside the bounds
            action = self.actor(obs) + noise  # is sent to the environment, stored and learnt from
        else:
            action = torch.clamp(self.actor(obs) + noise * self.scale, self.low, self.high)
        return action, torch.zeros_like(action[..., :1])

    @torch.no_grad()
    def explore_device(self, obs: torch.Tensor):
        """Training actions; for a Gaussian policy also the behaviour (pre-tanh mean, std)."""
        obs = obs.unsqueeze(1)
        eps = self.explore_rng.normal(1, int(self.low.shape[-1]))
        level = None if self.action_noise is None else self.action_noise.view(-1, 1, 1)
        if self.gaussian and level is not None:
            # --action_noise: N(0, level^2) added before the tanh, tanh(x + level e'), is one Gaussian draw of
            # std sqrt(std^2 + level^2): the behaviour stored is that wider Gaussian
            mean, std = self.actor.gaussian(obs)
            std = torch.sqrt(std.pow(2) + level.pow(2))
            return self.actor.squash(mean + std * eps).squeeze(1), (mean.squeeze(1), std.squeeze(1))
        action, _ = self.sample(obs, eps)
        if level is not None:  # the deterministic policy: ASAC's tanh(atanh(a) + level e') in [-1, 1] units
            y = ((action - self.actor.offset) / self.actor.scale).clamp(-1 + 1e-6, 1 - 1e-6)
            extra = self.explore_rng.normal(1, int(self.low.shape[-1]))
            action = torch.tanh(torch.atanh(y) + level * extra) * self.actor.scale + self.actor.offset
        behaviour = None
        if self.gaussian:
            mean, std = self.actor.gaussian(obs)
            behaviour = (mean.squeeze(1), std.squeeze(1))
        return action.squeeze(1), behaviour

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """scale * r + gamma * not_done * (min_j Q'_j(s', a') - alpha * log pi(a'|s')), a' ~ pi(s')."""
        pick = ensemble_subset(self.update_rng, *self.ensemble)  # the critics of this update's target
        if self.vtrace is not None and batch.sequence is not None:
            return self.vtrace_target(batch, pick)
        next_action, next_log_prob = self.sample(batch.next_obs, self.update_rng.normal(*batch.action.shape[1:]))
        soft_q = ensemble_min(self.critic_target(batch.target_input, next_action), pick) \
            - self.temperature() * next_log_prob
        return self.reward_scale * batch.reward + batch.not_done * batch.gamma(self.gamma) * soft_q

    @torch.no_grad()
    def soft_values(self, states: torch.Tensor, pick: torch.Tensor | None = None) -> torch.Tensor:
        """V(s) = min_j Q'_j(s, a) - alpha log pi(a|s), one a ~ pi(s) each: states [N, B, n, obs] -> [N, B, n].
        The noise is drawn as n draws of a batch's shape (the random stream's blocks serve them all)."""
        m, b, n = states.shape[:3]
        eps = torch.stack([self.update_rng.normal(b, int(self.low.shape[-1])) for _ in range(n)], dim=2)
        states = states.reshape(m, b * n, -1)
        action, log_prob = self.sample(states, eps.view(m, b * n, -1))
        return (ensemble_min(self.critic_target(states, action), pick) - self.temperature() * log_prob).view(m, b, n)

    def log_prob_of(self, mean: torch.Tensor, std: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log density of a stored (squashed) action under the Gaussian (mean, std) before tanh, without the tanh
        Jacobian (the same for every policy, so it cancels in importance ratios): [..., A] -> [...]."""
        y = ((action - self.actor.offset) / self.actor.scale).clamp(-1 + 1e-6, 1 - 1e-6)
        z = (torch.atanh(y) - mean) / std
        return (-0.5 * z.pow(2) - torch.log(std)).sum(-1)

    @torch.no_grad()
    def vtrace_target(self, batch: Batch, pick: torch.Tensor | None = None) -> torch.Tensor:
        """The N-step target with V-trace corrections (Espeholt et al. 2018, as Advanced-Soft-Actor-Critic's
        n-step importance sampling), for the sample's first action a_0 (taken, so not corrected):

            y   = scale r_0 + gamma not_done_0 v_1,
            v_1 = V(s_1) + sum_{t=1}^{j} gamma^(t-1) lambda^(t-1) (prod_{1<=i<t} c_i) rho_t delta_t,
            delta_t = scale r_t + gamma not_done_t V(s_{t+1}) - V(s_t),

        rho_t = min(pi(a_t|s_t) / mu(a_t|s_t), rho_bar), c_i = min(pi / mu, c_bar), mu the stored behaviour
        Gaussian, V the soft value ``soft_values``, j the last step the N-step return uses. With pi = mu and
        rho_bar = c_bar = lambda = 1 it is the plain N-step target."""
        rho_bar, c_bar, lam = self.vtrace
        seq = batch.sequence
        m, b, n = seq["reward"].shape
        v_next = self.soft_values(seq["next_obs"], pick)  # V(s'_t) = V(s_{t+1}) [M, B, n]
        mean, std = self.actor.gaussian(seq["obs"][:, :, 1:].reshape(m, b * (n - 1), -1))
        act = seq["action"][:, :, 1:]
        log_pi = self.log_prob_of(mean.view(act.shape), std.view(act.shape), act)
        log_mu = self.log_prob_of(seq["behaviour_mean"][:, :, 1:], seq["behaviour_std"][:, :, 1:], act)
        ratio = torch.exp(log_pi - log_mu)  # [M, B, n-1]: steps 1..n-1
        rho, c = ratio.clamp(max=rho_bar), ratio.clamp(max=c_bar)
        scale, gamma = self.reward_scale, self.gamma
        delta = scale * seq["reward"][:, :, 1:] + gamma * seq["not_done"][:, :, 1:] * v_next[:, :, 1:] \
            - v_next[:, :, :-1]
        traces = torch.cumprod(torch.cat([torch.ones_like(c[..., :1]), c[..., :-1]], dim=-1), dim=-1)
        powers = (gamma * lam) ** torch.arange(n - 1, device=c.device, dtype=c.dtype)
        v1 = v_next[:, :, 0] + (seq["used"][:, :, 1:] * powers * traces * rho * delta).sum(-1)
        return (scale * seq["reward"][:, :, 0] + gamma * seq["not_done"][:, :, 0] * v1).unsqueeze(-1)

    def schedule(self) -> tuple:
        return ((self.updates + 1) % self.target_update_interval == 0,)  # the next update moves the targets

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all N agents; losses are means weighted by ``self.weights``."""
        if self.paper_noise and isinstance(self.weighting, BatchDivergence):  # the paper's DASE_SAC weighs against
            with torch.no_grad():  # the learner's noisy action (one draw for the batch)
                w = self.weights(batch, self.sample(batch.obs, self.update_rng.normal(*batch.action.shape[1:]))[0])
        else:
            w = self.weights(batch)
        lw = batch.loss_weights(w)
        target = self.target(batch)

        qs = self.critic(batch.critic_input, batch.action)
        critic_loss = weighted_mean(squared_errors(qs, target), lw)
        minimise(self.critic_opt, batch.critic_objective(critic_loss))

        action, log_prob = self.sample(batch.obs, self.update_rng.normal(*batch.action.shape[1:]))
        qs_pi = self.critic(batch.obs, action)
        q_pi = ensemble_min(qs_pi) if self.ensemble[1] >= self.ensemble[0] else torch.stack(qs_pi).mean(0)
        alpha = self.temperature().detach()
        actor_loss = weighted_mean(alpha * log_prob - q_pi, lw)
        minimise(self.actor_opt, actor_loss.sum())
        info = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "weights": w.detach(),
                "td_error": batch.td_error(*(q - target for q in qs))}

        if self.auto_alpha:
            log_alpha = self.temperature.log_alpha.view(-1, 1, 1)
            alpha_loss = weighted_mean(-log_alpha * (log_prob.detach() + self.target_entropy), lw)
            minimise(self.alpha_opt, alpha_loss.sum())
            info["alpha"] = self.temperature.log_alpha.detach().exp()

        self.updates += 1
        if self.updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)
        return info
