"""The mathematical core of ACER for discrete actions (Wang et al. 2017, "Sample Efficient Actor-Critic with
Experience Replay"), as pure batched tensor functions; the agent, replay and training loop live elsewhere.

Conventions shared by every function here:

* ``...`` are arbitrary leading batch dims (e.g. [members, trajectories]); T is the trajectory length and A the
  number of actions. Per-step quantities are [..., T], per-action quantities [..., T, A]; actions are int64 [..., T].
* rho = pi(a|s) / mu(a|s): current policy over the behaviour policy that collected the data.
* Every target, coefficient and gradient returned here is detached; only ``log_pi`` in :func:`acer_policy_loss`,
  ``q_taken`` in :func:`acer_critic_loss` and ``pi`` in :func:`trust_region_policy_loss` carry gradient.
* The trust region acts on the gradient with respect to the policy's distribution statistics phi, chosen here to be
  the probability vector phi = pi(.|s) (not the logits). :func:`acer_policy_objective_gradient`,
  :func:`kl_gradient_wrt_probs` and :func:`trust_region` all work in that space; :func:`trust_region_policy_loss`
  turns the projected gradient z back into a loss whose parameter gradient is -(d pi / d theta)^T z.

One policy update therefore reads::

    log_pi, pi, values = policy_and_values(logits, q)
    q_ret = retrace_targets(rewards, not_terminated, ended, q_taken, values, rho_taken, boundary_values, gamma)
    g = acer_policy_objective_gradient(pi, q, values, q_ret, rho, actions, c)
    z = trust_region(g, kl_gradient_wrt_probs(avg_pi, pi), delta)
    loss = trust_region_policy_loss(pi, z) + acer_critic_loss(q_taken, q_ret)   # (+ entropy etc., per step)

Without the trust region (z = g) the parameter gradient of ``trust_region_policy_loss`` equals that of
:func:`acer_policy_loss`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "policy_and_values",
    "retrace_targets",
    "acer_policy_loss",
    "acer_policy_objective_gradient",
    "kl_gradient_wrt_probs",
    "entropy_gradient_wrt_probs",
    "trust_region",
    "trust_region_policy_loss",
    "acer_critic_loss",
]


def policy_and_values(logits: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From logits and Q-values [..., A]: (log pi, pi, V) with log pi, pi [..., A] and V(s) = sum_b pi(b|s) Q(s,b)
    [...]. Nothing is detached here (the loss functions detach what they treat as constants)."""
    log_pi = F.log_softmax(logits, dim=-1)
    pi = log_pi.exp()
    return log_pi, pi, (pi * q).sum(-1)


def retrace_targets(rewards: torch.Tensor, not_terminated: torch.Tensor, ended: torch.Tensor,
                    q_taken: torch.Tensor, values: torch.Tensor, rho_taken: torch.Tensor,
                    boundary_values: torch.Tensor, gamma: float) -> torch.Tensor:
    """Retrace targets Q_ret [..., T] (detached), computed backwards over t = T-1, ..., 0.

    All inputs are [..., T]: r_t = rewards, Q(s_t, a_t) = q_taken, V(s_t) = values, rho_t = rho_taken
    (pi(a_t|s_t) / mu(a_t|s_t)), and boundary_values[t] = V(s'_t), the value of the real next state of step t.
    ``ended[t]`` (episode ended by termination OR time-limit truncation) and ``not_terminated[t]`` are 0/1 floats
    or bools. The trajectory is cut at t where ended[t] (or not_terminated[t] == 0) and at t = T-1; there

        Q_ret <- boundary_values[t] * not_terminated[t]      (a truncation bootstraps, a termination does not)

    and at every step

        q_ret[t] = Q_ret <- r_t + gamma * Q_ret                              (the target of step t)
        Q_ret <- min(1, rho_t) * (Q_ret - Q(s_t, a_t)) + V(s_t)              (carried to step t-1)

    i.e. away from cuts q_ret[t] = r_t + gamma * (min(1, rho_{t+1}) (q_ret[t+1] - Q(s_{t+1}, a_{t+1})) + V(s_{t+1})).
    boundary_values is read only at cuts.
    """
    with torch.no_grad():
        r, q, v, rho, bv = (x.detach() for x in (rewards, q_taken, values, rho_taken, boundary_values))
        nt = not_terminated.detach().to(r.dtype)
        cut = ended.detach().bool() | (nt == 0)
        r, q, v, rho, bv, nt, cut = torch.broadcast_tensors(r, q, v, rho, bv, nt, cut)
        trace = rho.clamp(max=1.0)
        out = torch.empty_like(r)
        steps = r.shape[-1]
        q_ret = None
        for t in reversed(range(steps)):
            start = bv[..., t] * nt[..., t]
            q_ret = start if q_ret is None else torch.where(cut[..., t], start, q_ret)
            q_ret = r[..., t] + gamma * q_ret
            out[..., t] = q_ret
            q_ret = trace[..., t] * (q_ret - q[..., t]) + v[..., t]
    return out


def _policy_coefficients(q, values, q_ret, rho, actions, c, eps=0.0):
    """Detached pieces of the ACER policy objective: (min(c, rho_a) (Q_ret - V) [..., T],
    relu(1 - c / (rho_b + eps)) (Q(s,b) - V) [..., T, A], the index [..., T, 1] of a)."""
    q, values, q_ret, rho = (x.detach() for x in (q, values, q_ret, rho))
    idx = actions.long().unsqueeze(-1)
    rho_a = rho.gather(-1, idx).squeeze(-1)
    taken = rho_a.clamp(max=c) * (q_ret - values)
    correction = torch.relu(1.0 - c / (rho + eps if eps else rho)) * (q - values.unsqueeze(-1))
    return taken, correction, idx


def acer_policy_loss(log_pi: torch.Tensor, pi: torch.Tensor, q: torch.Tensor, values: torch.Tensor,
                     q_ret: torch.Tensor, rho: torch.Tensor, actions: torch.Tensor, c: float,
                     eps: float = 0.0) -> torch.Tensor:
    """The ACER policy loss per trajectory step [..., T] (the negated objective; minimise it):

        loss = - min(c, rho_a) * log pi(a|s) * (Q_ret - V(s))
               - sum_b relu(1 - c / rho_b) * pi(b|s) * log pi(b|s) * (Q(s,b) - V(s))

    log_pi, pi, q, rho [..., T, A]; values (V(s) = sum_b pi(b|s) Q(s,b)), q_ret [..., T]; actions int64 [..., T].
    Gradient flows through ``log_pi`` only: pi, q, values, q_ret and rho are detached. The first term is the
    truncated importance-sampling term on the replayed action a, the second the bias correction over all actions
    b, nonzero only where rho_b > c. With ``eps`` > 0 (OpenAI baselines' and A3C-ACER-PyTorch's 1e-6) the logs are
    log(pi + eps), taken of ``pi`` (the gradient then flows through it), and c / rho_b is c / (rho_b + eps).
    """
    taken, correction, idx = _policy_coefficients(q, values, q_ret, rho, actions, c, eps)
    if eps:
        log_pi = torch.log(pi + eps)
    log_pi_a = log_pi.gather(-1, idx).squeeze(-1)
    return -taken * log_pi_a - (correction * pi.detach() * log_pi).sum(-1)


def acer_policy_objective_gradient(pi: torch.Tensor, q: torch.Tensor, values: torch.Tensor, q_ret: torch.Tensor,
                                   rho: torch.Tensor, actions: torch.Tensor, c: float, eps: float = 0.0) -> torch.Tensor:
    """Closed-form gradient g [..., T, A] (detached) of the ACER policy objective (the quantity to ascend, i.e.
    -acer_policy_loss) with respect to phi = the probability vector pi(.|s), the pi-factors of the bias term
    being constants:

        g_b = min(c, rho_a) * (Q_ret - V(s)) * 1[b = a] / pi(a|s) + relu(1 - c / rho_b) * (Q(s,b) - V(s)).

    Shapes as in :func:`acer_policy_loss`. With ``eps`` > 0 the gradient of the objective written with log(phi +
    eps) (OpenAI baselines, A3C-ACER-PyTorch): 1 / pi(a|s) becomes 1 / (pi(a|s) + eps), the bias term is multiplied
    by pi_b / (pi_b + eps) and its c / rho_b is c / (rho_b + eps); a probability that underflowed to 0 then gives a
    finite g.
    """
    taken, correction, idx = _policy_coefficients(q, values, q_ret, rho, actions, c, eps)
    pi = pi.detach()
    if eps:
        correction = correction * pi / (pi + eps)
    pi_a = pi.gather(-1, idx).squeeze(-1)
    return correction.scatter_add(-1, idx, (taken / (pi_a + eps if eps else pi_a)).unsqueeze(-1))


def kl_gradient_wrt_probs(avg_pi: torch.Tensor, pi: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """k = grad_phi KL(pi_avg || pi_phi) for phi = the probabilities [..., A] (detached):
    KL = sum_b avg_b (log avg_b - log pi_b), so k_b = -avg_pi_b / pi_b (with ``eps``: log(pi_b + eps) in the KL,
    k_b = -avg_pi_b / (pi_b + eps), as OpenAI baselines and A3C-ACER-PyTorch)."""
    pi = pi.detach()
    return -avg_pi.detach() / (pi + eps if eps else pi)


def trust_region(g: torch.Tensor, k: torch.Tensor, delta: float, eps: float = 1e-12) -> torch.Tensor:
    """ACER's linearised trust-region projection, batched over leading dims, last dim = the statistics phi:

        z = g - max(0, (k^T g - delta) / (||k||^2 + eps)) * k

    the solution of min_z ||g - z||^2 / 2 s.t. k^T z <= delta. Where k^T g <= delta, z = g; otherwise the
    component of g along k is reduced until k^T z = delta (up to eps). Plain arithmetic, nothing detached.
    """
    kg = (k * g).sum(-1, keepdim=True)
    kk = (k * k).sum(-1, keepdim=True)
    scale = ((kg - delta) / (kk + eps)).clamp(min=0.0)
    return g - scale * k


def trust_region_policy_loss(pi: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Per-step surrogate loss [...] = -sum_b z_b * pi_b (z detached): backpropagating it through pi = pi_theta(.|s)
    gives the parameter gradient -(d pi / d theta)^T z, the ACER policy step with the trust-region-projected
    gradient z w.r.t. the probabilities."""
    return -(z.detach() * pi).sum(-1)


def acer_critic_loss(q_taken: torch.Tensor, q_ret: torch.Tensor) -> torch.Tensor:
    """Critic loss per step [..., T]: (Q_ret - Q(s_t, a_t))^2 / 2 with q_ret detached."""
    return 0.5 * (q_ret.detach() - q_taken).pow(2)


def entropy_gradient_wrt_probs(pi: torch.Tensor, log_pi: torch.Tensor) -> torch.Tensor:
    """Gradient [..., A] (detached) of the entropy H = -sum_b p_b log p_b of the normalised distribution p = phi /
    sum(phi) with respect to the probability vector phi, at phi = pi (which sums to 1):

        dH / dphi_b = -log pi_b - H

    (torch.distributions.Categorical(probs=phi).entropy() differentiated through its normalisation, as A3C-ACER-
    PyTorch does; OpenAI baselines' entropy of phi itself has -log pi_b - 1, the same up to a constant on every
    action, which the softmax's gradient ignores but the trust region's k^T g does not)."""
    log_pi = log_pi.detach()
    entropy = -(pi.detach() * log_pi).sum(-1, keepdim=True)
    return -log_pi - entropy
