"""Dual Policy Distillation (Lai, Zha, Li, Hu, IJCAI 2020): the DASE paper's peer-learning baseline.

Every learner keeps its own buffer and takes its algorithm's usual update. Then, for each peer, one
distillation step on states s_i drawn from the peer's buffer: with the peer's noise-free action
a_i = pi_peer(s_i) and the first critics of both,

    w_i = clip(exp(alpha * (Q_peer(s_i, a_i) - Q_self(s_i, a_i))), 0.01, 100),  normalised over the batch,
    loss = sum_i w_i * mean_dims (pi_self(s_i) - a_i)^2,

minimised by an Adam of its own on the actor (lr 1e-4): learners imitate peers where the peers'
critics think the peers act better than the learner's critic does.

Discrete SAC (categorical policies, critics Q(s, .)): the peer's action becomes its action probabilities p_i =
pi_peer(.|s_i), each critic's value of it the expectation sum_a p_i(a) Q(s_i, a), and the squared action gap the
divergence of the learner's policy from the peer's, KL(p_i || pi_self(.|s_i)):

    w_i = clip(exp(alpha * (E_p_i Q_peer(s_i, .) - E_p_i Q_self(s_i, .))), 0.01, 100),  normalised over the batch,
    loss = sum_i w_i * KL(p_i || pi_self(.|s_i)).
"""
from __future__ import annotations

import torch

from ..common.nets import adam, minimise
from .weights import categorical_kl

WEIGHT_MIN, WEIGHT_MAX = 0.01, 100.0


def dpd_weights(q_peer: torch.Tensor, q_self: torch.Tensor, alpha: float) -> torch.Tensor:
    """Normalised distillation weights [M, B, 1] from the two critics' values of the peer's actions."""
    w = torch.exp(alpha * (q_peer - q_self)).clamp(WEIGHT_MIN, WEIGHT_MAX)
    return w / w.sum(dim=1, keepdim=True)


def distillation_loss(own_actions: torch.Tensor, peer_actions: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per learner: sum_i w_i * mean over action dims of (pi_self(s_i) - a_peer,i)^2 -> [M]."""
    return (w * (own_actions - peer_actions).pow(2).mean(-1, keepdim=True)).sum(dim=(1, 2))


def categorical_distillation_loss(own_log_probs: torch.Tensor, peer_probs: torch.Tensor,
                                  w: torch.Tensor) -> torch.Tensor:
    """Per learner: sum_i w_i * KL(p_peer,i || pi_self(.|s_i)) -> [M] (own_log_probs, peer_probs [M, B, A])."""
    return (w * categorical_kl(peer_probs, torch.log(peer_probs), own_log_probs)).sum(dim=(1, 2))


class Distillation:
    """The distillation steps of DPD for any StackedAgents algorithm (DDPG, TD3, SAC, discrete SAC); the algorithm's
    own update is untouched. Its Adam is added to the agents' optimizers, so checkpoints carry it."""

    def __init__(self, agents, alpha: float = 1.0, lr: float = 1e-4, batch_size: int = 256):
        self.agents, self.alpha, self.batch_size = agents, float(alpha), int(batch_size)
        agents.add_optimizer("distill_opt", adam(agents.actor.parameters(), lr=lr))

    def q1(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The first critic (TD3, SAC) or the only one (DDPG)."""
        critic = self.agents.critic
        return getattr(critic, "q1", critic)(obs, action)

    @torch.no_grad()
    def peer_targets(self, obs: torch.Tensor, peer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For learner m and states obs[m]: the peer's action and the weights (peer = peer[m], a permutation)."""
        inverse = torch.argsort(peer)
        # member j computes on the states of the learner whose peer it is, then rows go back to learners
        peer_obs = obs[inverse]
        if getattr(self.agents, "discrete", False):  # the peer's probabilities, values as expectations under them
            probs = self.agents.actor.log_probs(peer_obs).exp()
            q_peer = (probs * self.agents.critic.q1(peer_obs)).sum(-1, keepdim=True)[peer]
            probs = probs[peer]
            return probs, dpd_weights(q_peer, (probs * self.agents.critic.q1(obs)).sum(-1, keepdim=True), self.alpha)
        peer_action = self.agents.actor(peer_obs).clamp(self.agents.low, self.agents.high)
        q_peer = self.q1(peer_obs, peer_action)[peer]
        action = peer_action[peer]
        return action, dpd_weights(q_peer, self.q1(obs, action), self.alpha)

    def distill(self, obs: torch.Tensor, peer: torch.Tensor) -> torch.Tensor:
        """One distillation step of every learner towards its peer; returns the losses [M]."""
        action, w = self.peer_targets(obs, peer)
        if getattr(self.agents, "discrete", False):
            loss = categorical_distillation_loss(self.agents.actor.log_probs(obs), action, w)
        else:
            loss = distillation_loss(self.agents.actor(obs), action, w)
        minimise(self.agents.distill_opt, loss.sum())
        return loss.detach()
