"""DASE sharing weights: how much learner i trusts transitions written by other agents.

Batch-level rule (DDPG, TD3, deterministic SAC), per learner i:
  d_k = a_k - pi_i(s_k) over the external samples k (writer != i),
  fit N(mu, Sigma) to the d_k (biased covariance), compare it with R = N(0, v I) (the paper: v = 0.1;
  "matched": v = the variance of the exploration noise, per dimension, see ``reference_variance``),
  D = (KL(N||R) + KL(R||N)) / 2 ("js") or KL(N||R) ("kl"),
  every external sample gets w = exp(-D); own samples get 1.
A fit that is impossible (too few external samples, singular Sigma, non-finite values)
gives the external samples weight 0. The fit and the divergence are computed in float64; ``precision="float32"``
(``--kl_precision float32``) computes them as the paper's code does instead: in float32 with
``torch.distributions.MultivariateNormal``, weight 0 wherever that constructor would reject Sigma (not symmetric
within 1e-6, or the float32 Cholesky fails), which happens more often than in float64 near a singular Sigma.

Per-sample rule (Gaussian SAC): w_k = exp(-mean_dims (KL(b_k||p_k) + KL(p_k||b_k)) / 2)
between the stored behaviour Gaussian b_k and the learner's current Gaussian p_k.

Per-sample rule (discrete SAC): w_k = exp(-(KL(b_k||p_k) + KL(p_k||b_k)) / 2) between the stored behaviour
probabilities b_k (what the writer acted with; uniform for warm-up actions) and the learner's current categorical
policy p_k at s_k. "kl" uses KL(b_k||p_k) alone in both per-sample rules.

An algorithm asks its ``Weighting`` for the weights of a batch and knows nothing of peers: independent learners
weigh every sample 1; the sharing scheme (utils.run.sharing) hands DASE learners one of the rules above.
"""
from __future__ import annotations

import math

import torch

SIMILARITIES = ("js", "kl", "none")
PRECISIONS = ("float64", "float32")  # --kl_precision: float64 (ours, default) or float32 (the paper's code)
MATCHED = "matched"  # --kl_div_var matched: v = the variance of the agents' own exploration noise


def clipped_normal_variance(std: float, clip: float) -> float:
    """Var(clip(X, -clip, clip)) for X ~ N(0, std^2): the variance of clipped exploration noise."""
    if std == 0.0:
        return 0.0
    k = clip / std
    tail = 0.5 * math.erfc(k / math.sqrt(2.0))  # P(X > clip)
    density = math.exp(-0.5 * k * k) / math.sqrt(2.0 * math.pi)
    return std * std * (1.0 - 2.0 * tail - 2.0 * k * density) + 2.0 * clip * clip * tail


def reference_variance(kl_div_var, noise_variance: torch.Tensor):
    """The v of R = N(0, v I): the number given, or with ``matched`` the per-dimension variance of the
    exploration noise ``noise_variance`` [A] (in action units), as a float64 tensor: then the action gaps of
    a peer whose policy equals the learner's look like draws from R, and weigh about 1."""
    if kl_div_var == MATCHED:
        if not bool((noise_variance > 0).all()):
            raise ValueError("--kl_div_var matched needs exploration noise > 0 in every action dimension")
        return noise_variance.detach().to(torch.float64).clone()
    return float(kl_div_var)


def kl_to_isotropic(mu: torch.Tensor, cov: torch.Tensor, var) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KL(N(mu, cov) || R) and KL(R || N(mu, cov)) in closed form, R = N(0, diag(var)).

    mu [..., A], cov [..., A, A]; ``var`` is a positive number (R = N(0, var I)) or a tensor [A] of
    per-dimension variances. Returns (forward, reverse, ok) where ok says the Cholesky factorisation of
    cov succeeded (cov positive definite).

    Sigma^-1 enters only through L^-1 (Sigma = L L^T), from a triangular solve: tr(D Sigma^-1) =
    |L^-1 D^1/2|_F^2 and mu^T Sigma^-1 mu = |L^-1 mu|^2. ``cholesky_inverse`` would do the same
    arithmetic, but its batched CUDA kernel (MAGMA) synchronises and so cannot be captured in a CUDA graph.
    """
    a = mu.shape[-1]
    chol, info = torch.linalg.cholesky_ex(cov)
    ok = info == 0
    # failed factorisations get an identity factor so nothing below raises; callers drop them via ok
    eye = torch.eye(a, dtype=cov.dtype, device=cov.device)
    chol = torch.where(ok.unsqueeze(-1).unsqueeze(-1), chol, eye.expand_as(cov))
    logdet = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    cov_diag = torch.diagonal(cov, dim1=-2, dim2=-1)
    sq = mu * mu
    inv_chol = torch.linalg.solve_triangular(chol, eye.expand_as(cov), upper=False)  # L^-1
    white_mu = (inv_chol @ mu.unsqueeze(-1)).squeeze(-1)  # L^-1 mu
    mahal = (white_mu * white_mu).sum(-1)
    if isinstance(var, torch.Tensor):  # diagonal reference: per-dimension variances [A]
        var = var.to(cov.dtype)
        log_det_ref = torch.log(var).sum()
        forward = 0.5 * ((cov_diag / var).sum(-1) + (sq / var).sum(-1) - a + log_det_ref - logdet)
        inv_trace = (inv_chol * inv_chol * var).sum((-2, -1))  # tr(Sigma^-1 D) = sum_ij (L^-1)_ij^2 D_j
        reverse = 0.5 * (inv_trace + mahal - a + logdet - log_det_ref)
        return forward, reverse, ok
    log_var = math.log(var)  # a Python number: no host-to-device copy inside the update
    forward = 0.5 * (cov_diag.sum(-1) / var + sq.sum(-1) / var - a + a * log_var - logdet)
    inv_trace = (inv_chol * inv_chol).sum((-2, -1))  # tr(Sigma^-1) = |L^-1|_F^2
    reverse = 0.5 * (var * inv_trace + mahal - a + logdet - a * log_var)
    return forward, reverse, ok


def batch_weights(
    actions: torch.Tensor,
    policy_actions: torch.Tensor,
    own: torch.Tensor,
    var,
    similarity: str = "js",
    precision: str = "float64",
) -> torch.Tensor:
    """Batch-level DASE weights against R = N(0, var I) (``var`` a number) or N(0, diag(var)) (a tensor [A]).

    actions, policy_actions: [N, B, A] (stored action, learner's current action in the
    same state); own: [N, B] bool, True where the sample was written by the learner.
    Returns [N, B, 1] float weights. ``precision``: "float64" (ours) or "float32" (the paper's code, see the
    module's docstring).
    """
    ones = torch.ones(own.shape + (1,), dtype=actions.dtype, device=actions.device)
    if similarity == "none":
        return ones
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}")
    if precision == "float32":
        w_ext = _float32_weights(actions, policy_actions, own, var, similarity)
        return torch.where(own.unsqueeze(-1), ones, w_ext.view(-1, 1, 1).expand_as(ones))
    if precision != "float64":
        raise ValueError(f"unknown precision {precision!r}")
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


def _float32_weights(actions, policy_actions, own, var, similarity: str) -> torch.Tensor:
    """The external weight per learner [N] as the paper's code computes it: float32 fit of the action gaps,
    ``MultivariateNormal`` and ``kl_divergence`` of ``torch.distributions``, 0 where its constructor would raise.
    Batched and free of host syncs: the validation the constructor does (a finite mean, Sigma symmetric within
    ``isclose(atol=1e-6)``, a successful Cholesky) is computed as a mask instead of raised."""
    from torch.distributions import MultivariateNormal, kl_divergence

    a_dim = actions.shape[-1]
    d = (actions - policy_actions).float()
    ext = (~own).unsqueeze(-1).float()  # [N, B, 1]
    n_ext = ext.sum(dim=1).clamp_min(1.0)  # [N, 1]
    mu = (d * ext).sum(dim=1) / n_ext  # [N, A]
    centred = (d - mu.unsqueeze(1)) * ext
    cov = centred.transpose(1, 2) @ centred / n_ext.unsqueeze(-1)  # [N, A, A]
    chol, info = torch.linalg.cholesky_ex(cov)
    symmetric = torch.isclose(cov, cov.transpose(1, 2), atol=1e-6).all(-1).all(-1)
    ok = (info == 0) & symmetric & torch.isfinite(mu).all(-1)
    eye = torch.eye(a_dim, dtype=d.dtype, device=d.device)
    chol = torch.where(ok.view(-1, 1, 1), chol, eye.expand_as(cov))  # rejected fits: a harmless stand-in
    ref_scale = (torch.sqrt(var.to(d.dtype)) if isinstance(var, torch.Tensor)
                 else torch.full((a_dim,), math.sqrt(var), dtype=d.dtype, device=d.device))
    fit = MultivariateNormal(mu, scale_tril=chol, validate_args=False)
    ref = MultivariateNormal(torch.zeros_like(mu), scale_tril=torch.diag_embed(ref_scale).expand_as(cov),
                             validate_args=False)
    div = kl_divergence(fit, ref)
    if similarity == "js":
        div = (div + kl_divergence(ref, fit)) / 2
    w = torch.exp(-div)
    return torch.where(ok & torch.isfinite(w), w, torch.zeros_like(w)).to(actions.dtype)


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


def categorical_kl(p: torch.Tensor, log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum_a p_a (log p_a - log q_a) over the last dimension, keepdim; a zero p_a adds nothing, a zero
    q_a where p_a > 0 gives inf. Element-wise only (no masks): capture-safe."""
    return torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1, keepdim=True)


def categorical_policy_weights(
    behaviour_probs: torch.Tensor,
    policy_log_probs: torch.Tensor,
    own: torch.Tensor,
    similarity: str = "js",
) -> torch.Tensor:
    """Per-sample weights for discrete SAC: behaviour_probs [N, B, A] (stored), policy_log_probs [N, B, A] (the
    learner's log pi(.|s) now), own [N, B]. "js" averages both KL directions, "kl" uses KL(behaviour || policy),
    "none" gives ones. A divergence that is not finite (the learner puts mass where the behaviour had none)
    gives weight 0."""
    ones = torch.ones(own.shape + (1,), dtype=policy_log_probs.dtype, device=policy_log_probs.device)
    if similarity == "none":
        return ones
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}")
    b = behaviour_probs.to(policy_log_probs.dtype)
    log_b = torch.log(b)
    div = categorical_kl(b, log_b, policy_log_probs)
    if similarity == "js":
        div = 0.5 * (div + categorical_kl(policy_log_probs.exp(), policy_log_probs, log_b))
    w = torch.exp(-div)
    w = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    return torch.where(own.unsqueeze(-1), ones, w)


class Weighting:
    """Independent learners: every sample of the batch counts fully (weight 1)."""

    def __call__(self, agents, batch, policy_actions=None) -> torch.Tensor:
        return torch.ones_like(batch.reward)


class BatchDivergence(Weighting):
    """The batch-level rule (DDPG, TD3, deterministic SAC) against R = N(0, var I) or N(0, diag(var))."""

    def __init__(self, similarity: str, var, precision: str = "float64"):
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}")
        self.similarity, self.var, self.precision = similarity, var, precision

    def __call__(self, agents, batch, policy_actions=None) -> torch.Tensor:
        if policy_actions is None:
            policy_actions = agents.actor(batch.obs)
        return batch_weights(batch.action, policy_actions.detach(), batch.own, self.var, self.similarity,
                             self.precision)


class PerSampleGaussian(Weighting):
    """The per-sample rule of Gaussian SAC between the stored behaviour Gaussians and the learner's."""

    def __init__(self, similarity: str):
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}")
        self.similarity = similarity

    def __call__(self, agents, batch, policy_actions=None) -> torch.Tensor:
        mean, std = agents.actor.gaussian(batch.obs)
        return gaussian_policy_weights(batch.behaviour_mean, batch.behaviour_std, mean, std, batch.own, self.similarity)


class PerSampleCategorical(Weighting):
    """The per-sample rule of discrete SAC between the stored behaviour probabilities and the learner's policy."""

    def __init__(self, similarity: str):
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}")
        self.similarity = similarity

    def __call__(self, agents, batch, policy_actions=None) -> torch.Tensor:
        return categorical_policy_weights(batch.behaviour_probs, agents.actor.log_probs(batch.obs), batch.own,
                                          self.similarity)


def dase_weighting(agents, similarity: str, kl_div_var, precision: str = "float64") -> Weighting:
    """The DASE rule for these agents: per sample for a Gaussian or a categorical policy, per batch otherwise
    (reference variance ``kl_div_var``, or the agents' exploration-noise variance with ``matched``; the fit in
    ``precision``)."""
    if similarity == "none":
        return Weighting()
    per_sample = getattr(agents, "discrete", False) or getattr(agents, "gaussian", False)
    if precision != "float64" and per_sample:
        raise ValueError(f"--kl_precision {precision}: only the batch-level rule (a deterministic actor) fits a "
                         "Gaussian to the action gaps; per-sample weights have no such fit")
    if getattr(agents, "discrete", False):
        if kl_div_var == MATCHED:
            raise ValueError("--kl_div_var matched has no meaning for discrete actions (their weights compare action "
                             "probabilities per sample, with no reference variance)")
        return PerSampleCategorical(similarity)
    if getattr(agents, "gaussian", False):
        if kl_div_var == MATCHED:
            raise ValueError("--kl_div_var matched has no meaning for a Gaussian policy (its weights compare "
                             "Gaussians per sample, with no reference variance)")
        return PerSampleGaussian(similarity)
    return BatchDivergence(similarity, reference_variance(kl_div_var, agents.exploration_variance()), precision)
