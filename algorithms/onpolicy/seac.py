"""SEAC, Shared Experience Actor-Critic (Christianos, Schäfer, Albrecht, NeurIPS 2020), batched over every agent of
every seed.

Each agent i is an A2C learner (separate actor and critic, plain n-step returns R, Adam) that also learns from the
rollouts of the agents it shares with (every other agent of its seed, or its graph neighbours). On agent k's data,
with the probability pi_k(a_k|o_k) that k drew its action with:

    w = pi_i(a_k|o_k) / (pi_k(a_k|o_k) + 1e-7)                       (no gradient, never clipped)
    shared policy loss = sum_k mean[-w log pi_i(a_k|o_k) (R_k - V_i(o_k))]   (the advantage without gradient)
    shared value loss  = sum_k mean[w (R_k - V_i(o_k))^2]
    loss_i = policy + vf_coef value - ent_coef entropy (own data) + lambda (shared policy + vf_coef shared value)

R_k is agent k's own n-step return, bootstrapped with k's critic. Each agent's gradient is clipped to its own norm.
With lambda 0 every agent is an independent A2C learner with SEAC's settings; with ``shared_network`` (and lambda 0)
the agents of a seed are one network trained on all of their rollouts, the paper's SNAC baseline.

Batched: member m's networks run once over all of its seed's rollouts, [M, N * T * K, ...]: its own slot gives the
A2C terms, the others the shared ones.
"""
from __future__ import annotations

import numpy as np
import torch

from .a2c import A2C, advantages


class SEAC(A2C):
    """S seeds x N SEAC agents; ``share(n, graph)`` says which agents of a seed learn from which."""

    STATS = ("policy_loss", "value_loss", "entropy", "shared_policy_loss", "shared_value_loss", "importance")
    behaviour_width = 1  # the rollout keeps each action's log-probability as its collector drew it

    def __init__(self, obs_shape, act_dim: int, low, high, seeds, device, discrete: bool, lr: float = 3e-4,
                 gamma: float = 0.99, ent_coef: float = 0.01, vf_coef: float = 0.5, max_grad_norm: float = 0.5,
                 hidden_size: int = 64, adam_eps: float = 1e-3, seac_lambda: float = 1.0,
                 shared_network: bool = False):
        super().__init__(obs_shape, act_dim, low, high, seeds, device, discrete, lr=lr, gamma=gamma, gae_lambda=1.0,
                         ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm, hidden_size=hidden_size,
                         optimizer="adam", activation="relu", init="orthogonal", adam_eps=adam_eps)
        self.seac_lambda = float(seac_lambda)
        self.shared_network = bool(shared_network)  # SNAC: a seed's agents one network (see ``share``)
        self.share(len(self.seeds), np.ones((len(self.seeds),) * 2, dtype=np.int64) - np.eye(len(self.seeds),
                                                                                              dtype=np.int64))

    def share(self, agents_per_seed: int, graph: np.ndarray) -> None:
        """Members are numbered seed by seed (m = s * N + i); agent i of a seed learns from agent j of the same seed
        where ``graph[i, j]`` (an [N, N] 0/1 adjacency with a zero diagonal)."""
        n, members = agents_per_seed, len(self.seeds)
        local = torch.arange(members) % n
        self.peers = ((torch.arange(members) // n * n).unsqueeze(1) + torch.arange(n)).to(self.device)  # [M, N]
        self.own = torch.nn.functional.one_hot(local, n).bool().to(self.device)  # [M, N]: the member's own slot
        self.shares = torch.as_tensor(np.asarray(graph)[local.numpy()], dtype=torch.float32,
                                      device=self.device) * (~self.own)  # [M, N]
        self.agents_per_seed = n
        if self.shared_network:  # SNAC: equal from the start, and every update the mean of the seed's gradients
            self.start_equal(n)

    def gradients(self, loss: torch.Tensor, params: list) -> list[torch.Tensor]:
        """Each member's gradient; with a shared network (SNAC) the mean over its seed's agents, so the agents stay
        one network trained on all of their rollouts."""
        grads = super().gradients(loss, params)
        if not self.shared_network:
            return grads
        n = self.agents_per_seed
        return [g.view(-1, n, *g.shape[1:]).mean(1, keepdim=True).expand(-1, n, *g.shape[1:]).reshape(g.shape)
                for g in grads]

    @torch.no_grad()
    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training actions for obs [M, K, ...] and their log-probabilities [M, K, 1] (what peers' weights divide
        by)."""
        dist = self.model.policy(obs)
        actions = dist.sample(self.explore_rng)
        return actions, dist.log_prob(actions).unsqueeze(-1)

    def losses(self, rollout: dict) -> dict[str, torch.Tensor]:
        """Per member, the SEAC loss of its seed's rollouts and its parts [M] (``loss`` with the graph)."""
        obs, next_obs = rollout["obs"], rollout["next_obs"]
        m, t, k = obs.shape[:3]
        n, tk = self.peers.shape[1], t * k
        flat = lambda x: x.reshape(m, tk, *x.shape[3:])  # noqa: E731
        with torch.no_grad():  # R: each member's own n-step returns, bootstrapped with its own critic
            values_own = self.model.value(flat(obs)).view(m, t, k)
            next_values = self.model.value(flat(next_obs)).view(m, t, k)
            returns = (advantages(rollout["rewards"], values_own, next_values, rollout["terminated"],
                                  rollout["ended"], self.gamma, 1.0) + values_own).view(m, tk)
        # member m's networks on its whole seed's data: [M, N * T * K, ...]
        seen = flat(obs)[self.peers].reshape(m, n * tk, *obs.shape[3:])
        actions = flat(rollout["actions"])[self.peers].reshape(m, n * tk, *rollout["actions"].shape[3:])
        dist, values = self.model(seen)
        log_prob = dist.log_prob(actions).view(m, n, tk)
        adv = returns[self.peers] - values.view(m, n, tk)  # R_k - V_m(o_k)
        own = self.own.unsqueeze(-1).float()
        policy_loss = -(own * log_prob * adv.detach()).sum(1).mean(1)
        value_loss = (own * adv.pow(2)).sum(1).mean(1)
        entropy = (own * dist.entropy().view(m, n, tk)).sum(1).mean(1)
        behaviour = rollout["mu"].reshape(m, tk)[self.peers]  # log pi_k(a_k|o_k) as k drew a_k
        weight = (log_prob.detach().exp() / (behaviour.exp() + 1e-7))
        shares = self.shares.unsqueeze(-1)
        shared_policy = (shares * -(weight * log_prob * adv.detach())).mean(2).sum(1)
        shared_value = (shares * weight * adv.pow(2)).mean(2).sum(1)
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy \
            + self.seac_lambda * (shared_policy + self.vf_coef * shared_value)
        peers = self.shares.sum(1).clamp(min=1.0)
        importance = (shares * weight).mean(2).sum(1) / peers  # the mean weight of the peers' samples
        return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy,
                "shared_policy_loss": shared_policy.detach(), "shared_value_loss": shared_value.detach(),
                "importance": importance, "loss": loss}
