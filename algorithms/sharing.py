"""DASE sharing weights: how much learner i trusts transitions written by other agents.

Batch-level rule (DDPG, TD3, deterministic SAC), per learner i:
  d_k = a_k - pi_i(s_k) over the external samples k (writer != i),
  fit N(mu, Sigma) to the d_k (biased covariance), compare it with R = N(0, v I),
  D = (KL(N||R) + KL(R||N)) / 2 ("js") or KL(N||R) ("kl"),
  every external sample gets w = exp(-D); own samples get 1.
A fit that is impossible (too few external samples, singular Sigma, non-finite values)
gives the external samples weight 0.

Per-sample rule (Gaussian SAC): w_k = exp(-mean_dims (KL(b_k||p_k) + KL(p_k||b_k)) / 2)
between the stored behaviour Gaussian b_k and the learner's current Gaussian p_k.
"""
from __future__ import annotations

import math

import torch

SIMILARITIES = ("js", "kl", "none")


def kl_to_isotropic(mu: torch.Tensor, cov: torch.Tensor, var: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KL(N(mu, cov) || N(0, var I)) and KL(N(0, var I) || N(mu, cov)) in closed form.

    mu [..., A], cov [..., A, A]. Returns (forward, reverse, ok) where ok says the
    Cholesky factorisation of cov succeeded (cov positive definite).
    """
    a = mu.shape[-1]
    chol, info = torch.linalg.cholesky_ex(cov)
    ok = info == 0
    # failed factorisations get an identity factor so nothing below raises; callers drop them via ok
    eye = torch.eye(a, dtype=cov.dtype, device=cov.device).expand_as(cov)
    chol = torch.where(ok.unsqueeze(-1).unsqueeze(-1), chol, eye)
    logdet = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    trace = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)
    sq = (mu * mu).sum(-1)
    log_var = math.log(var)  # a Python number: no host-to-device copy inside the update
    forward = 0.5 * (trace / var + sq / var - a + a * log_var - logdet)
    inv = torch.cholesky_inverse(chol)
    inv_trace = torch.diagonal(inv, dim1=-2, dim2=-1).sum(-1)
    mahal = (mu.unsqueeze(-2) @ inv @ mu.unsqueeze(-1)).squeeze(-1).squeeze(-1)
    reverse = 0.5 * (var * inv_trace + mahal - a + logdet - a * log_var)
    return forward, reverse, ok


def batch_weights(
    actions: torch.Tensor,
    policy_actions: torch.Tensor,
    own: torch.Tensor,
    var: float,
    similarity: str = "js",
) -> torch.Tensor:
    """Batch-level DASE weights.

    actions, policy_actions: [N, B, A] (stored action, learner's current action in the
    same state); own: [N, B] bool, True where the sample was written by the learner.
    Returns [N, B, 1] float weights.
    """
    ones = torch.ones(own.shape + (1,), dtype=actions.dtype, device=actions.device)
    if similarity == "none":
        return ones
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}")
    a_dim = actions.shape[-1]
    # float64: the A x A Cholesky of a nearly singular covariance is fragile in float32
    d = (actions - policy_actions).double()
    ext = (~own).unsqueeze(-1).double()  # [N, B, 1]
    n_ext = ext.sum(dim=1)  # [N, 1]
    mu = (d * ext).sum(dim=1) / n_ext.clamp_min(1.0)  # [N, A]
    centred = (d - mu.unsqueeze(1)) * ext
    cov = centred.transpose(1, 2) @ centred / n_ext.clamp_min(1.0).unsqueeze(-1)  # [N, A, A]
    forward, reverse, ok = kl_to_isotropic(mu, cov, var)
    div = forward if similarity == "kl" else 0.5 * (forward + reverse)
    # a biased covariance of m samples has rank <= m - 1: it needs more than A of them
    valid = ok & (n_ext.squeeze(-1) > a_dim) & torch.isfinite(div)
    w_ext = torch.where(valid, torch.exp(-div), torch.zeros_like(div)).to(actions.dtype)  # [N]
    return torch.where(own.unsqueeze(-1), ones, w_ext.view(-1, 1, 1).expand_as(ones))


def diag_gaussian_kl(mu0: torch.Tensor, std0: torch.Tensor, mu1: torch.Tensor, std1: torch.Tensor) -> torch.Tensor:
    """Element-wise KL(N(mu0, std0^2) || N(mu1, std1^2)) of independent dimensions."""
    return torch.log(std1 / std0) + (std0.pow(2) + (mu0 - mu1).pow(2)) / (2.0 * std1.pow(2)) - 0.5


def gaussian_policy_weights(
    behaviour_mean: torch.Tensor,
    behaviour_std: torch.Tensor,
    policy_mean: torch.Tensor,
    policy_std: torch.Tensor,
    own: torch.Tensor,
    similarity: str = "js",
) -> torch.Tensor:
    """Per-sample weights for Gaussian SAC; all inputs [N, B, A] (pre-tanh), own [N, B].

    "js" averages both KL directions, "kl" uses KL(behaviour || policy), "none" gives ones.
    """
    ones = torch.ones(own.shape + (1,), dtype=policy_mean.dtype, device=policy_mean.device)
    if similarity == "none":
        return ones
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}")
    fwd = diag_gaussian_kl(behaviour_mean, behaviour_std, policy_mean, policy_std)
    if similarity == "kl":
        div = fwd.mean(-1, keepdim=True)
    else:
        rev = diag_gaussian_kl(policy_mean, policy_std, behaviour_mean, behaviour_std)
        div = (0.5 * (fwd + rev)).mean(-1, keepdim=True)
    w = torch.exp(-div)
    w = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    return torch.where(own.unsqueeze(-1), ones, w)
