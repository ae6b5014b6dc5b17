"""Discrete SAC (Christodoulou, 2019, "Soft Actor-Critic for Discrete Action Settings") for N agents at once.

The policy is categorical (logits [N, B, A]); the twin critics take the state only and give one value per action,
Q_j(s, .) [N, B, A]; the expectations over actions that continuous SAC estimates from one sampled action are
computed exactly. Per agent, with pi(.|s) the policy's probabilities, Q'_j the target critics (Polyak averages
of the critics, rate tau) and w_b the sample weights (1, or DASE's):

    V(s')   = sum_a pi(a|s') [min_j Q'_j(s', a) - alpha log pi(a|s')]
    y       = reward_scale * r + gamma * (1 - terminated) * V(s')
    L_Q     = sum_b w_b [(Q_1(s_b, a_b) - y_b)^2 + (Q_2(s_b, a_b) - y_b)^2] / sum_b w_b
    L_pi    = sum_b w_b sum_a pi(a|s_b) [alpha log pi(a|s_b) - min_j Q_j(s_b, a)] / sum_b w_b
    L_alpha = sum_b w_b [-log(alpha) (sum_a pi(a|s_b) log pi(a|s_b) + H_target)] / sum_b w_b,
              H_target = target_entropy_scale * log|A|

in that order: the critics step first, the policy then reads the stepped critics (as continuous SAC does here),
and the temperature reads the entropy of the policy before its step. L_alpha is continuous SAC's temperature loss
with the entropy in place of -log pi of a sampled action: alpha falls while the policy's entropy is above the
target and rises while it is below.

Exploration samples the categorical policy from each agent's own counter-based stream (``AgentRNG``, inverse CDF
at a uniform draw); the behaviour (the probabilities the agent acted with) goes into the buffer with each
transition for DASE's per-sample rule (``algorithms.sharing.weights.PerSampleCategorical``). Evaluation plays the greedy
action, the actor's ``forward``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..common.distributions import Categorical
from ..common.nets import MLP, init_generators, minimise, soft_update, weighted_mean
from .base import Batch, StackedAgents
from .sac import soft_actor_critic


class CategoricalActor(nn.Module):
    """Logits of a categorical policy over A actions; ``forward`` gives the greedy action (int64 [N, B])."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int, gens):
        super().__init__()
        self.net = MLP([obs_dim, hidden, hidden, n_actions], gens, init="xavier")

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def log_probs(self, obs: torch.Tensor) -> torch.Tensor:
        """log pi(.|s) [N, B, A]."""
        return F.log_softmax(self.net(obs), dim=-1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).argmax(-1)


class DiscreteTwinQ(nn.Module):
    """Two independent critics Q_j(s, .) with one output per action: obs [N, B, obs] -> two [N, B, A]."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int, gens):
        super().__init__()
        self.q1 = MLP([obs_dim, hidden, hidden, n_actions], gens, init="xavier")
        self.q2 = MLP([obs_dim, hidden, hidden, n_actions], gens, init="xavier")

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q1(obs), self.q2(obs)


class DiscreteSAC(StackedAgents):
    """SAC on a discrete action space of ``act_dim`` actions (``low``/``high`` are None there); see the module."""

    discrete = True
    gaussian = False

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, gamma=0.99, tau=0.005, lr=3e-4,
                 alpha=0.2, automatic_entropy_tuning=True, reward_scale=1.0, hidden_size=256,
                 target_update_interval=1, target_entropy_scale=0.89, noisy=False, noisy_sigma0=0.5):
        if low is not None or high is not None:
            raise ValueError("discrete SAC takes a discrete action space (no bounds)")
        if not 0.0 < target_entropy_scale <= 1.0:
            raise ValueError(f"target_entropy_scale {target_entropy_scale} must be in (0, 1]")
        super().__init__(seeds, None, None, device, expl_noise=0.0)
        gens = init_generators(self.seeds)
        self.n_actions = int(act_dim)
        self.behaviour_width = self.n_actions  # transitions carry the probabilities the writer acted with
        # --noisy: noisy layers in the policy and in the critics' Q networks (Fortunato et al.'s NoisyNet-DQN)
        soft_actor_critic(self, self.noisy(CategoricalActor(obs_dim, self.n_actions, hidden_size, gens), noisy,
                                           noisy_sigma0),
                          self.noisy(DiscreteTwinQ(obs_dim, self.n_actions, hidden_size, gens), noisy, noisy_sigma0),
                          alpha, automatic_entropy_tuning, lr)
        self.target_entropy = float(target_entropy_scale) * math.log(self.n_actions)
        self.gamma, self.tau, self.reward_scale = gamma, tau, reward_scale
        self.target_update_interval = target_update_interval

    @torch.no_grad()
    def explore_device(self, obs: torch.Tensor):
        """Actions drawn from the policy (int64 [N]) and the behaviour: the probabilities they were drawn from
        ([N, A], as a one-element tuple)."""
        dist = Categorical(self.actor.logits(obs.unsqueeze(1)))
        if self.action_noise is not None:  # --action_noise: a uniform random action with probability level
            level = self.action_noise.view(-1, 1, 1)
            dist = Categorical(torch.log((1 - level) * dist.probs + level / self.n_actions))
        action = dist.sample(self.explore_rng)
        return action.squeeze(1), (dist.probs.squeeze(1),)

    @torch.no_grad()
    def target(self, batch: Batch) -> torch.Tensor:
        """scale * r + gamma * not_done * sum_a pi(a|s') (min_j Q'_j(s', a) - alpha log pi(a|s')), [N, B, 1]."""
        log_p = self.actor.log_probs(batch.next_obs)
        q1, q2 = self.critic_target(batch.target_input)
        soft_v = (log_p.exp() * (torch.min(q1, q2) - self.temperature() * log_p)).sum(-1, keepdim=True)
        return self.reward_scale * batch.reward + batch.not_done * batch.gamma(self.gamma) * soft_v

    def schedule(self) -> tuple:
        return ((self.updates + 1) % self.target_update_interval == 0,)  # the next update moves the targets

    def stored_action_values(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        taken = batch.action.long()  # [N, B, 1]: the stored action indices
        return tuple(q.gather(-1, taken) for q in self.critic(batch.critic_input))

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all N agents; losses are means weighted by ``self.weights``."""
        w = self.weights(batch)
        lw = batch.loss_weights(w)  # times prioritized replay's importance weights, if any
        target = self.target(batch)
        taken = batch.action.long()  # [N, B, 1]: the stored action indices

        q1, q2 = self.critic(batch.critic_input)
        e1, e2 = q1.gather(-1, taken) - target, q2.gather(-1, taken) - target
        critic_loss = weighted_mean(e1.pow(2) + e2.pow(2), lw)
        minimise(self.critic_opt, batch.critic_objective(critic_loss))

        log_p = self.actor.log_probs(batch.obs)
        p = log_p.exp()
        with torch.no_grad():
            q1_pi, q2_pi = self.critic(batch.obs)
        alpha = self.temperature().detach()
        actor_loss = weighted_mean((p * (alpha * log_p - torch.min(q1_pi, q2_pi))).sum(-1, keepdim=True), lw)
        minimise(self.actor_opt, actor_loss.sum())
        info = {"critic_loss": critic_loss.detach(), "actor_loss": actor_loss.detach(), "weights": w.detach(),
                "td_error": batch.td_error(e1, e2)}

        if self.auto_alpha:
            log_alpha = self.temperature.log_alpha.view(-1, 1, 1)
            neg_entropy = (p * log_p).sum(-1, keepdim=True).detach()
            alpha_loss = weighted_mean(-log_alpha * (neg_entropy + self.target_entropy), lw)
            minimise(self.alpha_opt, alpha_loss.sum())
            info["alpha_loss"], info["alpha"] = alpha_loss.detach(), self.temperature.log_alpha.detach().exp()

        self.updates += 1
        if self.updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)
        return info
