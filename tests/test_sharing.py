"""The DASE sharing weights against independent computations (torch.distributions, numpy)."""
import math

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, MultivariateNormal, Normal, kl_divergence

from algorithms.sharing.weights import (
    batch_weights,
    categorical_policy_weights,
    gaussian_policy_weights,
    kl_to_isotropic,
)

torch.set_default_dtype(torch.float32)


def random_spd(a: int, gen: torch.Generator) -> torch.Tensor:
    m = torch.randn(a, a, generator=gen, dtype=torch.float64)
    return m @ m.T / a + 0.05 * torch.eye(a, dtype=torch.float64)


@pytest.mark.parametrize("a", [1, 2, 5])
def test_closed_form_kl_matches_torch_distributions(a):
    gen = torch.Generator().manual_seed(a)
    var = 0.1
    ref = MultivariateNormal(torch.zeros(a, dtype=torch.float64), var * torch.eye(a, dtype=torch.float64))
    for _ in range(5):
        mu = 0.3 * torch.randn(a, generator=gen, dtype=torch.float64)
        cov = random_spd(a, gen)
        fit = MultivariateNormal(mu, cov)
        forward, reverse, ok = kl_to_isotropic(mu, cov, var)
        assert bool(ok)
        torch.testing.assert_close(forward, kl_divergence(fit, ref), rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(reverse, kl_divergence(ref, fit), rtol=1e-9, atol=1e-9)


def expected_weights(actions, policy_actions, own, var, similarity):
    """Plain per-agent loop: numpy fit of the external differences, torch.distributions divergence."""
    n, b, a = actions.shape
    out = np.ones((n, b, 1))
    for i in range(n):
        ext = ~own[i].numpy()
        d = (actions[i] - policy_actions[i]).double().numpy()[ext]
        mu = d.mean(axis=0)
        cov = np.cov(d.T, bias=True).reshape(a, a)
        fit = MultivariateNormal(torch.tensor(mu), torch.tensor(cov))
        ref = MultivariateNormal(torch.zeros(a, dtype=torch.float64), var * torch.eye(a, dtype=torch.float64))
        div = kl_divergence(fit, ref) if similarity == "kl" else 0.5 * (kl_divergence(fit, ref) + kl_divergence(ref, fit))
        out[i, ext, 0] = math.exp(-float(div))
    return torch.tensor(out, dtype=torch.float32)


@pytest.mark.parametrize("similarity", ["js", "kl"])
@pytest.mark.parametrize("a", [1, 3])
def test_batch_weights_match_per_agent_reference(similarity, a):
    gen = torch.Generator().manual_seed(7)
    n, b, var = 3, 64, 0.1
    actions = torch.rand(n, b, a, generator=gen) * 2 - 1
    policy_actions = torch.tanh(actions + 0.3 * torch.randn(n, b, a, generator=gen))
    writer = torch.randint(0, n, (n, b), generator=gen)
    own = writer == torch.arange(n).view(-1, 1)
    w = batch_weights(actions, policy_actions, own, var, similarity)
    assert w.shape == (n, b, 1)
    # both sides compute in float64 and round once to float32 (weights <= 1): a few float32 ulps at most
    torch.testing.assert_close(w, expected_weights(actions, policy_actions, own, var, similarity), rtol=1e-6, atol=3e-7)
    assert torch.all(w[own] == 1.0)
    # every external sample of one learner shares one weight, strictly between 0 and 1 here
    for i in range(n):
        ext = w[i, ~own[i], 0]
        assert torch.all(ext == ext[0]) and 0.0 < float(ext[0]) < 1.0


def test_js_and_kl_differ():
    gen = torch.Generator().manual_seed(3)
    actions = torch.rand(2, 128, 2, generator=gen)
    policy = torch.zeros(2, 128, 2)
    own = torch.zeros(2, 128, dtype=torch.bool)
    assert not torch.allclose(batch_weights(actions, policy, own, 0.1, "js"), batch_weights(actions, policy, own, 0.1, "kl"))


@pytest.mark.parametrize("similarity", ["js", "kl"])
def test_weight_is_one_when_fit_equals_reference(similarity):
    var = 0.1
    r = math.sqrt(2 * var)  # points (+-r, 0), (0, +-r): mean 0, biased covariance var * I
    pts = torch.tensor([[r, 0.0], [-r, 0.0], [0.0, r], [0.0, -r]]).repeat(8, 1)
    actions = pts.unsqueeze(0)
    policy = torch.zeros_like(actions)
    own = torch.zeros(1, pts.shape[0], dtype=torch.bool)
    w = batch_weights(actions, policy, own, var, similarity)
    torch.testing.assert_close(w, torch.ones_like(w), rtol=0, atol=1e-6)


def test_weight_falls_as_external_actions_move_away():
    gen = torch.Generator().manual_seed(0)
    noise = 0.3 * torch.randn(1, 200, 2, generator=gen)
    own = torch.zeros(1, 200, dtype=torch.bool)
    ws = [float(batch_weights(noise + shift, torch.zeros_like(noise), own, 0.1, "js")[0, 0]) for shift in (0.0, 0.3, 1.0)]
    assert ws[0] > ws[1] > ws[2]


@pytest.mark.parametrize("similarity", ["js", "kl"])
def test_impossible_fits_give_zero_never_nan(similarity):
    n, b, a = 2, 32, 3
    own = torch.ones(n, b, dtype=torch.bool)
    own[0, :3] = False  # agent 0: only 3 external samples for 3 action dims -> singular covariance
    own[1, :16] = False
    actions = torch.rand(n, b, a)
    actions[1, :16] = 0.5  # agent 1: identical external actions -> zero covariance
    policy = torch.zeros(n, b, a)
    w = batch_weights(actions, policy, own, 0.1, similarity)
    assert torch.isfinite(w).all()
    assert torch.all(w[~own] == 0.0) and torch.all(w[own] == 1.0)
    # no external samples at all (a single agent): all own, all ones
    solo = batch_weights(actions[:1], policy[:1], torch.ones(1, b, dtype=torch.bool), 0.1, similarity)
    assert torch.all(solo == 1.0)
    # non-finite actions must not leak NaN either
    bad = actions.clone()
    bad[1, 0, 0] = float("nan")
    assert torch.isfinite(batch_weights(bad, policy, own, 0.1, similarity)).all()


def test_collinear_differences_are_singular():
    t = torch.linspace(-1, 1, 50)
    actions = torch.stack([t, 2 * t], dim=-1).unsqueeze(0)  # rank-1 covariance in 2-D
    own = torch.zeros(1, 50, dtype=torch.bool)
    w = batch_weights(actions, torch.zeros_like(actions), own, 0.1, "js")
    assert torch.all(w == 0.0)


def test_none_gives_all_ones():
    actions = torch.rand(3, 16, 2) * 10
    own = torch.rand(3, 16) > 0.5
    assert torch.all(batch_weights(actions, torch.zeros_like(actions), own, 0.1, "none") == 1.0)
    assert torch.all(gaussian_policy_weights(actions, torch.ones_like(actions), torch.zeros_like(actions),
                                             torch.ones_like(actions), own, "none") == 1.0)


@pytest.mark.parametrize("similarity", ["js", "kl"])
def test_gaussian_sac_weights_match_torch_distributions(similarity):
    gen = torch.Generator().manual_seed(11)
    n, b, a = 2, 40, 4
    # float64: the formula is checked, not float32 rounding (which differs with the CPU's vector width)
    f64 = dict(generator=gen, dtype=torch.float64)
    bm, pm = torch.randn(n, b, a, **f64), torch.randn(n, b, a, **f64)
    bs, ps = torch.rand(n, b, a, **f64) + 0.2, torch.rand(n, b, a, **f64) + 0.2
    own = torch.rand(n, b, generator=gen) > 0.5
    w = gaussian_policy_weights(bm, bs, pm, ps, own, similarity)
    fwd = kl_divergence(Normal(bm, bs), Normal(pm, ps))
    div = fwd if similarity == "kl" else 0.5 * (fwd + kl_divergence(Normal(pm, ps), Normal(bm, bs)))
    expected = torch.where(own.unsqueeze(-1), torch.ones(n, b, 1, dtype=torch.float64),
                           torch.exp(-div.mean(-1, keepdim=True)))
    torch.testing.assert_close(w, expected, rtol=1e-12, atol=1e-14)
    # identical Gaussians: weight exactly 1
    same = gaussian_policy_weights(bm, bs, bm, bs, own, similarity)
    torch.testing.assert_close(same, torch.ones_like(same))


@pytest.mark.parametrize("similarity", ["js", "kl"])
def test_categorical_sac_weights_match_torch_distributions(similarity):
    """Discrete SAC's per-sample rule: D = (KL(b||p) + KL(p||b)) / 2 ("js": both directions summed, halved as in
    the Gaussian rule) or KL(b||p) ("kl"), between the stored behaviour probabilities b and the learner's policy p."""
    gen = torch.Generator().manual_seed(12)
    n, b, a = 2, 40, 4
    f64 = dict(generator=gen, dtype=torch.float64)
    behaviour = torch.softmax(2.0 * torch.randn(n, b, a, **f64), -1)
    logits = 2.0 * torch.randn(n, b, a, **f64)
    behaviour[0, :5] = torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float64)  # actions the writer never takes
    behaviour[0, 5:8] = torch.softmax(logits[0, 5:8], -1)  # a writer that acted as the learner does now
    own = torch.rand(n, b, generator=gen) > 0.5
    own[0, :8] = False
    w = categorical_policy_weights(behaviour, torch.log_softmax(logits, -1), own, similarity)
    beh, pol = Categorical(probs=behaviour), Categorical(logits=logits)
    fwd = kl_divergence(beh, pol)
    div = fwd if similarity == "kl" else (fwd + kl_divergence(pol, beh)) / 2
    expected = torch.where(own, torch.ones(n, b, dtype=torch.float64), torch.exp(-div)).unsqueeze(-1)
    torch.testing.assert_close(w, expected, rtol=1e-12, atol=1e-14)
    assert torch.isfinite(w).all() and torch.all(w[own] == 1.0)
    # zero behaviour probabilities: the reverse divergence is infinite (weight 0), the forward one is not
    assert torch.all(w[0, :5] == 0.0) if similarity == "js" else torch.all(w[0, :5] > 0.0)
    torch.testing.assert_close(w[0, 5:8], torch.ones(3, 1, dtype=torch.float64))
    assert torch.all(categorical_policy_weights(behaviour, torch.log_softmax(logits, -1), own, "none") == 1.0)


def paper_float32_weights(actions, policy_actions, own, var, similarity):
    """The paper's code per learner, verbatim in spirit: float32 gaps, torch.distributions' MultivariateNormal
    (validating its arguments) and kl_divergence; any exception gives the external samples weight 0."""
    n, b, a = actions.shape
    out = torch.ones(n, b, 1)
    ref = MultivariateNormal(torch.zeros(a), torch.eye(a) * var)
    for i in range(n):
        ext = torch.where(~own[i])[0]
        try:
            d = actions[i, ext] - policy_actions[i, ext]
            mean = torch.mean(d, dim=0)
            cov = torch.mm(torch.transpose(d - mean, 0, 1), d - mean) / len(ext)
            fit = MultivariateNormal(mean, cov)
            div = kl_divergence(fit, ref) if similarity == "kl" else (kl_divergence(fit, ref) + kl_divergence(ref, fit)) / 2
            out[i, ext, 0] = torch.exp(-div)
        except Exception:  # the paper's bare except
            out[i, ext, 0] = 0.0
    return out


@pytest.mark.parametrize("similarity", ["js", "kl"])
@pytest.mark.parametrize("a", [1, 2, 3])
def test_float32_weights_match_the_papers_per_agent_code(similarity, a):
    gen = torch.Generator().manual_seed(11)
    n, b, var = 4, 256, 0.1
    actions = torch.rand(n, b, a, generator=gen) * 2 - 1
    policy_actions = torch.tanh(actions + 0.3 * torch.randn(n, b, a, generator=gen))
    own = torch.randint(0, 2, (n, b), generator=gen) == 0
    w = batch_weights(actions, policy_actions, own, var, similarity, precision="float32")
    expected = paper_float32_weights(actions, policy_actions, own, var, similarity)
    # both in float32, sums in another order: a few ulps of the divergence
    torch.testing.assert_close(w, expected, rtol=2e-5, atol=1e-7)
    assert torch.all(w[own] == 1.0) and bool((w[~own] > 0).all())
    # and within float32 rounding of our float64 weights
    torch.testing.assert_close(w, batch_weights(actions, policy_actions, own, var, similarity), rtol=1e-4, atol=1e-6)


def test_float32_rejects_nearly_singular_fits_that_float64_accepts():
    """Gaps on a line up to a 1e-7 wobble: Sigma is positive definite, float64 factors it and gives every fit a
    small positive weight; in float32 the wobble's variance is below the rounding of Sigma, the Cholesky fails
    in some of the fits (which ones depends on rounding), and there the paper's code (its constructor raises)
    and --kl_precision float32 give weight 0."""
    b, fits = 256, 40
    gen = torch.Generator().manual_seed(5)
    t = torch.rand(fits, b, generator=gen) * 0.6 - 0.3
    wobble = 1e-7 * torch.randn(fits, b, generator=gen)
    actions = torch.stack([t, 0.5 * t + wobble], dim=-1)  # 40 learners, each with its own nearly singular fit
    policy = torch.zeros_like(actions)
    own = torch.zeros(fits, b, dtype=torch.bool)
    ours = batch_weights(actions, policy, own, 0.1, "kl")
    theirs = batch_weights(actions, policy, own, 0.1, "kl", precision="float32")
    paper = paper_float32_weights(actions, policy, own, 0.1, "kl")
    assert bool((ours > 0).all())
    rejected, paper_rejected = (theirs[:, 0, 0] == 0), (paper[:, 0, 0] == 0)
    assert int(rejected.sum()) >= 2 and int(paper_rejected.sum()) >= 2
    # where a float32 fit survives, it is the float64 weight up to float32's trouble with this Sigma
    assert bool((theirs[~rejected] > 0).all())


def test_float32_matched_reference_matches_torch_distributions():
    """A diagonal reference (--kl_div_var matched) in float32, against torch.distributions."""
    gen = torch.Generator().manual_seed(2)
    actions = torch.rand(2, 128, 2, generator=gen) * 2 - 1
    policy = torch.tanh(actions + 0.2 * torch.randn(2, 128, 2, generator=gen))
    own = torch.randint(0, 2, (2, 128), generator=gen) == 0
    var = torch.tensor([0.01, 0.04], dtype=torch.float64)
    w = batch_weights(actions, policy, own, var, "js", precision="float32")
    ref = MultivariateNormal(torch.zeros(2), torch.diag(var.float()))
    for i in range(2):
        ext = ~own[i]
        d = actions[i, ext] - policy[i, ext]
        fit = MultivariateNormal(d.mean(0), torch.cov(d.T, correction=0))
        expected = torch.exp(-(kl_divergence(fit, ref) + kl_divergence(ref, fit)) / 2)
        torch.testing.assert_close(w[i, ext, 0], expected.expand(int(ext.sum())), rtol=2e-5, atol=1e-7)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        batch_weights(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2), torch.zeros(1, 4, dtype=torch.bool), 0.1, "js",
                      precision="float16")
