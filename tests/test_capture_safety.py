"""Capture-safe by construction, checked on the CPU: no update runs an op a CUDA graph cannot hold.

A CUDA graph records kernels; an op that synchronises the stream (MAGMA's batched solves), reads a device
value on the host (.item()) or sizes its output by the data (nonzero, boolean masks) breaks the capture or
freezes one step's value into every replay. ``utils.run.opcheck.OpRecorder`` sees every aten call of
``Learner.update_once`` and of an exploration step, for every policy, with the optimizers a GPU run builds.
"""
import math

import numpy as np
import pytest
import torch

from algorithms.sharing.weights import kl_to_isotropic
from utils.naming import algorithm_of
from utils.run.opcheck import CAPTURE_UNSAFE, OpRecorder, count_ops, optimizers_as_on_cuda
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

OBS, ACT = 3, 2
LOW, HIGH = -np.full(ACT, 2.0), np.full(ACT, 2.0)

# name: (policy, algorithm keywords, sharing settings, agents per seed[, Learner keywords])
POLICIES = {
    "DASE_TD3": ("DASE_TD3", {"hidden": (16, 16)}, {}, 2),
    "DASE_TD3 matched": ("DASE_TD3", {"hidden": (16, 16)}, {"kl_div_var": "matched"}, 2),
    "DASE_DDPG": ("DASE_DDPG", {}, {}, 2),
    "DASE_SAC deterministic": ("DASE_SAC", {"hidden_size": 16}, {}, 2),
    "DASE_SAC gaussian": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16, "automatic_entropy_tuning": True},
                          {}, 2),
    "DASE_TD3 kl": ("DASE_TD3", {"hidden": (16, 16)}, {"similarity": "kl"}, 2),
    "DASE_TD3 float32 weights": ("DASE_TD3", {"hidden": (16, 16)}, {"kl_precision": "float32"}, 2),
    "DASE_TD3 float32 matched": ("DASE_TD3", {"hidden": (16, 16)}, {"kl_precision": "float32", "kl_div_var": "matched"},
                                 2),
    "DPD_TD3": ("DPD_TD3", {"hidden": (16, 16)}, {"dpd_batch_size": 16}, 2),
    "DPD_DDPG": ("DPD_DDPG", {}, {"dpd_batch_size": 16}, 2),
    "DPD_SAC": ("DPD_SAC", {"policy_type": "Gaussian", "hidden_size": 16}, {"dpd_batch_size": 16}, 2),
    "DPD_TD3 ring": ("DPD_TD3", {"hidden": (16, 16)}, {"dpd_batch_size": 16, "topology": "ring"}, 4),
    "DASE_TD3 star": ("DASE_TD3", {"hidden": (16, 16)}, {"topology": "star"}, 4),
    "DIFF_TD3 ring": ("DIFF_TD3", {"hidden": (16, 16)}, {"topology": "ring"}, 4),
    "DIFF_TD3 ring, lazy gossip": ("DIFF_TD3", {"hidden": (16, 16)}, {"topology": "ring", "sync_freq": 2,
                                                                      "message_delay": 1.5}, 4),
    "DIFF_DDPG metropolis, link drops": ("DIFF_DDPG", {}, {"topology": "star", "diffusion_weights": "metropolis",
                                                           "link_drop": 0.2}, 4),
    "DIFF_DASE_SAC gaussian, link drops": ("DIFF_DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16},
                                           {"topology": "ring", "link_drop": 0.3}, 4),
    "DASE_TD3 n_step 3": ("DASE_TD3", {"hidden": (16, 16)}, {}, 2, {"n_step": 3}),
    "DASE_SAC star n_step 5": ("DASE_SAC", {"hidden_size": 16}, {"topology": "star"}, 4, {"n_step": 5}),
    "DASE_TD3 prioritized, n_step 3": ("DASE_TD3", {"hidden": (16, 16)}, {}, 2,
                                       {"n_step": 3, "prioritized": dict(alpha=0.6, beta=0.4, beta_steps=100, eps=1e-6)}),
    "DPD_SAC gaussian prioritized": ("DPD_SAC", {"policy_type": "Gaussian", "hidden_size": 16}, {"dpd_batch_size": 16},
                                     2, {"prioritized": dict(alpha=0.6, beta=0.4, beta_steps=100, eps=1e-6)}),
    "DASE_SAC gaussian n_step 3 vtrace": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16,
                                                       "vtrace": [1.0, 1.0, 0.9]}, {}, 2, {"n_step": 3}),
    "DASE_TD3 normalised, n_step 3": ("DASE_TD3", {"hidden": (16, 16), "normalize_obs": True}, {}, 2, {"n_step": 3}),
    "DASE_SAC gaussian normalised, vtrace": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16,
                                                          "normalize_obs": True, "vtrace": [1.0, 1.0, 0.9]}, {}, 2,
                                             {"n_step": 3}),
    "DASE_TD3 curiosity and rnd": ("DASE_TD3", {"hidden": (16, 16), "curiosity": "forward", "rnd": True}, {}, 2),
    "DASE_TD3 noisy": ("DASE_TD3", {"hidden": (16, 16), "noisy": True}, {}, 2),
    "DASE_SAC gaussian noisy": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16, "noisy": True}, {}, 2),
    "DASE_TD3 REDQ 5 of 2": ("DASE_TD3", {"hidden": (16, 16), "ensemble_q": 5, "ensemble_q_sample": 2}, {}, 2),
    "SAC gaussian REDQ 4 of 2, vtrace": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16, "ensemble_q": 4,
                                                       "ensemble_q_sample": 2, "vtrace": [1.0, 1.0, 0.9]}, {}, 2,
                                         {"n_step": 3}),
}
# discrete SAC (a discrete action space of DISCRETE_ACTIONS actions): its sampling, categorical weights, distillation
DISCRETE_ACTIONS = 3
DISCRETE = {
    "DASE_SAC discrete": ("DASE_SAC", {"hidden_size": 16}, {}, 2),
    "DASE_SAC discrete curiosity inverse": ("DASE_SAC", {"hidden_size": 16, "curiosity": "inverse", "rnd": True},
                                            {}, 2),
    "DASE_SAC discrete noisy": ("DASE_SAC", {"hidden_size": 16, "noisy": True}, {}, 2),
    "DASE_SAC discrete kl, fixed alpha": ("DASE_SAC", {"hidden_size": 16, "automatic_entropy_tuning": False},
                                          {"similarity": "kl"}, 2),
    "DPD_SAC discrete": ("DPD_SAC", {"hidden_size": 16}, {"dpd_batch_size": 16}, 2),
    "DIFF_DASE_SAC discrete, link drops": ("DIFF_DASE_SAC", {"hidden_size": 16}, {"topology": "ring", "link_drop": 0.3},
                                           4),
}


def filled_learner(policy, algo, sharing, seeds=(0, 1), n=2, discrete=False, **kwargs):
    member_seeds = [s + 100 * i for s in seeds for i in range(n)]
    settings = SharingSettings.of(policy, n, sharing)
    settings.check()
    act, low, high = (DISCRETE_ACTIONS, None, None) if discrete else (ACT, LOW, HIGH)
    learner = Learner(algorithm_of(policy), algo, member_seeds, n, OBS, act, low, high, buffer_size=500,
                      batch_size=32, updates_per_step=1, device=torch.device("cpu"), sharing=settings, **kwargs)
    rng = np.random.default_rng(0)
    m = len(member_seeds)
    for step in range(60):
        behaviour = (rng.standard_normal((m, ACT)), rng.uniform(0.2, 1.0, (m, ACT))) \
            if learner.agents.gaussian_behaviour else None
        if discrete and step % 2:  # exploring steps (with their probabilities) between random ones
            behaviour = (rng.dirichlet(np.ones(act), m),)
        actions = rng.integers(0, act, m) if discrete else rng.uniform(-2, 2, (m, ACT))
        learner.store(rng.standard_normal((m, OBS)), actions, rng.standard_normal(m),
                      rng.standard_normal((m, OBS)), rng.random(m) < 0.05, behaviour)
    return learner


def explore(agents, obs):
    """An exploration step as ``explore`` takes it, noisy networks' draw included."""
    with agents.acting_noise():
        return agents.explore_device(obs)


@pytest.mark.parametrize("policy", list(POLICIES) + list(DISCRETE))
def test_update_and_exploration_hold_no_capture_unsafe_op(policy):
    discrete = policy in DISCRETE
    name, algo, sharing, n, *learner_kwargs = (DISCRETE if discrete else POLICIES)[policy]
    learner = filled_learner(name, algo, sharing, n=n, discrete=discrete, **(learner_kwargs[0] if learner_kwargs else {}))
    optimizers_as_on_cuda(learner.agents)
    for _ in range(3):  # optimizer state exists before a capture (UpdateGraphs waits for it too)
        learner.update_once()
    records = [count_ops(learner.update_once) for _ in range(2)]  # TD3: both branches of its schedule
    obs = np.zeros((learner.members, OBS), dtype=np.float32)
    records.append(count_ops(explore, learner.agents, torch.as_tensor(obs)))
    unsafe = [op for r in records for op in r.unsafe]
    assert not unsafe, f"{policy}: {unsafe}"
    assert all(r.total > 10 for r in records)  # the recorder saw the update's ops


def test_the_recorder_catches_what_it_must():
    """The check can fail: each kind of unsafe op is seen (and the old cholesky_inverse path was)."""
    cov = torch.eye(2, dtype=torch.float64).expand(3, 2, 2).contiguous()
    x = torch.arange(6.0)
    with OpRecorder() as rec:
        torch.cholesky_inverse(torch.linalg.cholesky(cov))
        float(x.sum())
        x[x > 2.0]
        torch.nonzero(x)
        x[x > 2.0] = 0.0
    names = {op.split(".")[1] for op, _ in rec.unsafe}
    assert {"cholesky_inverse", "_local_scalar_dense", "nonzero", "index", "index_put_"} <= names, names
    assert all(CAPTURE_UNSAFE.values())  # every listed op says why


def old_kl_to_isotropic(mu, cov, var):
    """The divergences as computed before (through cholesky_inverse), kept here as the reference."""
    a = mu.shape[-1]
    chol, info = torch.linalg.cholesky_ex(cov)
    ok = info == 0
    eye = torch.eye(a, dtype=cov.dtype).expand_as(cov)
    chol = torch.where(ok.unsqueeze(-1).unsqueeze(-1), chol, eye)
    logdet = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    trace = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)
    forward = 0.5 * (trace / var + (mu * mu).sum(-1) / var - a + a * math.log(var) - logdet)
    inv = torch.cholesky_inverse(chol)
    inv_trace = torch.diagonal(inv, dim1=-2, dim2=-1).sum(-1)
    mahal = (mu.unsqueeze(-2) @ inv @ mu.unsqueeze(-1)).squeeze(-1).squeeze(-1)
    reverse = 0.5 * (var * inv_trace + mahal - a + logdet - a * math.log(var))
    return forward, reverse, ok


@pytest.mark.parametrize("a", [1, 2, 3, 6, 17])
def test_triangular_solve_equals_the_cholesky_inverse_path(a):
    gen = torch.Generator().manual_seed(a)
    f64 = dict(dtype=torch.float64)
    m = torch.randn(64, a, a, generator=gen, **f64)
    random_cov = m @ m.transpose(1, 2) / a + 1e-3 * torch.eye(a, **f64)
    # near-singular: one direction squeezed to 1e-6 of the others (condition numbers ~1e6..1e8)
    u = torch.linalg.qr(torch.randn(64, a, a, generator=gen, **f64))[0]
    scales = torch.ones(64, a, **f64)
    scales[:, 0] = torch.logspace(-8, -6, 64, **f64)
    near_singular = u @ torch.diag_embed(scales) @ u.transpose(1, 2)
    for cov in (random_cov, near_singular):
        mu = 0.3 * torch.randn(64, a, generator=gen, **f64)
        for var in (0.1, 0.01):
            new, old = kl_to_isotropic(mu, cov, var), old_kl_to_isotropic(mu, cov, var)
            assert torch.equal(new[2], old[2])
            for n, o in zip(new[:2], old[:2]):
                # 1e-10 relative to the size of the divergence (near-singular ones reach ~1e8)
                torch.testing.assert_close(n, o, rtol=1e-10, atol=1e-10)


def test_diagonal_reference_equals_torch_distributions():
    """The matched rule's per-dimension reference N(0, diag(v)) against torch.distributions."""
    from torch.distributions import MultivariateNormal, kl_divergence

    gen = torch.Generator().manual_seed(0)
    f64 = dict(dtype=torch.float64)
    for a in (1, 3, 6):
        m = torch.randn(a, a, generator=gen, **f64)
        cov = m @ m.T / a + 0.05 * torch.eye(a, **f64)
        mu = 0.2 * torch.randn(a, generator=gen, **f64)
        var = torch.rand(a, generator=gen, **f64) * 0.05 + 0.005
        fit, ref = MultivariateNormal(mu, cov), MultivariateNormal(torch.zeros(a, **f64), torch.diag(var))
        forward, reverse, ok = kl_to_isotropic(mu, cov, var)
        assert bool(ok)
        torch.testing.assert_close(forward, kl_divergence(fit, ref), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(reverse, kl_divergence(ref, fit), rtol=1e-10, atol=1e-10)


RECURRENT = {
    "DASE_SAC gaussian gru": ("DASE_SAC", {"policy_type": "Gaussian", "hidden_size": 16, "seq_encoder": "gru"}, {}),
    "DASE_TD3 lstm prioritized": ("DASE_TD3", {"hidden": (16, 16), "seq_encoder": "lstm", "burn_in": 2},
                                  {"prioritized": dict(alpha=0.6, beta=0.4, beta_steps=100, eps=1e-6)}),
    "SAC attn, prediction": ("SAC", {"hidden_size": 16, "seq_encoder": "attn", "use_prediction": True}, {}),
}


@pytest.mark.parametrize("policy", list(RECURRENT))
def test_recurrent_update_and_acting_hold_no_capture_unsafe_op(policy):
    """--seq_encoder: window sampling (uniform or prioritized), burn-in, unrolls, the algorithm's update, and an
    acting step (encoder, then exploration) run no op a CUDA graph cannot hold."""
    from utils.run.replay.recurrent import RecurrentLearner

    name, algo, kwargs = RECURRENT[policy]
    n = 2 if name.startswith("DASE") else 1
    algo = {"seq_len": 6, "seq_hidden": 32, **algo}
    learner = RecurrentLearner(algorithm_of(name), algo, [s + 100 * i for s in (0, 1) for i in range(n)], n, OBS, ACT,
                               LOW, HIGH, buffer_size=500, batch_size=8, updates_per_step=1,
                               device=torch.device("cpu"), sharing=SharingSettings.of(name, n, {}), **kwargs)
    rng = np.random.default_rng(0)
    m = learner.members
    for step in range(60):
        actions, behaviour = learner.act(rng.standard_normal((m, OBS)), warmup=step % 2 == 0)
        actions = rng.uniform(-2, 2, (m, ACT)) if actions is None else actions
        ended = rng.random(m) < 0.05
        learner.store(rng.standard_normal((m, OBS)), actions, rng.standard_normal(m), rng.standard_normal((m, OBS)),
                      ended, behaviour, ended=ended)
    optimizers_as_on_cuda(learner.agents)
    for _ in range(3):
        learner.update_once()
    records = [count_ops(learner.update_once) for _ in range(2)]
    obs = torch.zeros((m, OBS))
    records.append(count_ops(lambda: learner.agents.explore_device(learner.agents.observe(obs))))
    unsafe = [op for r in records for op in r.unsafe]
    assert not unsafe, f"{policy}: {unsafe}"
    assert all(r.total > 10 for r in records)
