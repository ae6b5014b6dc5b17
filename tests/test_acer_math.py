"""ACER's mathematical core (algorithms/onpolicy/acer_math.py) against hand-computed numbers, autograd and per-item loops."""
import itertools
import math

import pytest
import torch

from algorithms.onpolicy.acer_math import (
    acer_critic_loss,
    acer_policy_loss,
    acer_policy_objective_gradient,
    kl_gradient_wrt_probs,
    policy_and_values,
    retrace_targets,
    trust_region,
    trust_region_policy_loss,
)

t = lambda *x: torch.tensor(x, dtype=torch.float32)
close = lambda a, b, **kw: torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, **kw)

# ---------------------------------------------------------------- Retrace: one 3-step trajectory, gamma = 0.9
GAMMA = 0.9
REWARDS = t(1.0, 0.0, 2.0)
Q_TAKEN = t(0.5, 1.0, 1.5)
VALUES = t(0.4, 0.8, 1.2)
RHO = t(2.0, 0.5, 1.5)  # rho_0 is never used (nothing before t = 0); rho_1 = 0.5 < 1, rho_2 = 1.5 > 1 (-> 1)
BOUNDARY = t(3.0, 2.0, 1.0)  # V(s'_t), read only at cuts


def retrace(ended, not_terminated):
    return retrace_targets(REWARDS, t(*not_terminated), t(*ended), Q_TAKEN, VALUES, RHO, BOUNDARY, GAMMA)


def test_retrace_no_cut_bootstraps_at_last_step():
    q2 = 2.0 + 0.9 * 1.0                       # r_2 + gamma * boundary[2]                      = 2.9
    carry1 = min(1.0, 1.5) * (q2 - 1.5) + 1.2  # min(1, rho_2) (q2 - Q_2) + V_2 = 1.4 + 1.2     = 2.6
    q1 = 0.0 + 0.9 * carry1                    #                                                = 2.34
    carry0 = min(1.0, 0.5) * (q1 - 1.0) + 0.8  # 0.5 * 1.34 + 0.8                               = 1.47
    q0 = 1.0 + 0.9 * carry0                    #                                                = 2.323
    assert (q2, q1, q0) == pytest.approx((2.9, 2.34, 2.323))
    close(retrace([0, 0, 0], [1, 1, 1]), t(q0, q1, q2))


def test_retrace_termination_inside_does_not_bootstrap():
    q2 = 2.0 + 0.9 * 1.0                       # t = 2 starts fresh from its own boundary value = 2.9
    q1 = 0.0 + 0.9 * 0.0                       # terminated at t = 1: no future value           = 0
    carry0 = 0.5 * (q1 - 1.0) + 0.8            #                                                = 0.3
    q0 = 1.0 + 0.9 * carry0                    #                                                = 1.27
    assert (q1, q0) == pytest.approx((0.0, 1.27))
    close(retrace([0, 1, 0], [1, 0, 1]), t(q0, q1, q2))


def test_retrace_truncation_inside_bootstraps_from_its_boundary_value():
    q2 = 2.9
    q1 = 0.0 + 0.9 * 2.0                       # truncated at t = 1: gamma * boundary[1]        = 1.8
    carry0 = 0.5 * (q1 - 1.0) + 0.8            #                                                = 1.2
    q0 = 1.0 + 0.9 * carry0                    #                                                = 2.08
    assert q0 == pytest.approx(2.08)
    close(retrace([0, 1, 0], [1, 1, 1]), t(q0, q1, q2))


def test_retrace_termination_at_last_step_and_bool_masks():
    # terminal last step: q2 = r_2 = 2; carry1 = 1 * (2 - 1.5) + 1.2 = 1.7; q1 = 0.9 * 1.7 = 1.53;
    # carry0 = 0.5 * (1.53 - 1) + 0.8 = 1.065; q0 = 1 + 0.9 * 1.065 = 1.9585
    expected = t(1.9585, 1.53, 2.0)
    close(retrace([0, 0, 1], [1, 1, 0]), expected)
    got = retrace_targets(REWARDS, torch.tensor([True, True, False]), torch.tensor([False, False, True]),
                          Q_TAKEN, VALUES, RHO, BOUNDARY, GAMMA)
    close(got, expected)


def test_retrace_limits_and_detached():
    """rho = 0 everywhere: one-step targets r_t + gamma V(s_{t+1}); rho >= 1 with Q(s,a) = V(s): n-step returns."""
    gen = torch.Generator().manual_seed(3)
    T = 6
    r, q, v, bv = (torch.randn(4, T, generator=gen) for _ in range(4))
    nt, ended = torch.ones(4, T), torch.zeros(4, T)
    q.requires_grad_(True)
    one_step = retrace_targets(r, nt, ended, q, v, torch.zeros(4, T), bv, GAMMA)
    close(one_step[:, :-1], r[:, :-1] + GAMMA * v[:, 1:])
    close(one_step[:, -1], r[:, -1] + GAMMA * bv[:, -1])
    assert not one_step.requires_grad
    mc = retrace_targets(r, nt, ended, v, v, 1.0 + torch.rand(4, T, generator=gen), bv, GAMMA)
    for s in range(T):
        ret = sum(GAMMA ** (j - s) * r[:, j] for j in range(s, T)) + GAMMA ** (T - s) * bv[:, -1]
        close(mc[:, s], ret)


# ---------------------------------------------------------------- policy loss: c = 10, A = 3, two steps
C = 10.0
PI = t(0.2, 0.5, 0.3).repeat(2, 1)                  # [T=2, A=3], same state twice
Q = t(1.0, 2.0, 4.0).repeat(2, 1)
V = t(2.4, 2.4)                                     # 0.2 * 1 + 0.5 * 2 + 0.3 * 4
RHO_A = t(20.0, 4.0, 40.0).repeat(2, 1)             # rho_0 = 20 > c, rho_1 = 4 < c, rho_2 = 40 > c
ACTIONS = torch.tensor([0, 1])
Q_RET = t(3.0, 1.0)


def test_policy_loss_truncation_and_bias_correction_by_hand():
    L = math.log
    # bias correction (same at both steps): b = 0: relu(1 - 10/20) = 0.5, pi 0.2, Q - V = -1.4
    #                                      b = 1: relu(1 - 10/4) = 0 (rho_b < c: no correction)
    #                                      b = 2: relu(1 - 10/40) = 0.75, pi 0.3, Q - V = 1.6
    bias = -(0.5 * 0.2 * L(0.2) * -1.4) - 0.0 - (0.75 * 0.3 * L(0.3) * 1.6)
    step0 = -min(10.0, 20.0) * L(0.2) * (3.0 - 2.4) + bias  # a = 0, rho_a = 20 truncated to c = 10
    step1 = -min(10.0, 4.0) * L(0.5) * (1.0 - 2.4) + bias   # a = 1, rho_a = 4 kept
    assert step0 == pytest.approx(-5.86 * L(0.2) - 0.36 * L(0.3))
    loss = acer_policy_loss(PI.log(), PI, Q, V, Q_RET, RHO_A, ACTIONS, C)
    close(loss, t(step0, step1))
    # the closed-form objective gradient w.r.t. the probabilities, by hand
    g = acer_policy_objective_gradient(PI, Q, V, Q_RET, RHO_A, ACTIONS, C)
    close(g, torch.tensor([[10 * 0.6 / 0.2 + 0.5 * -1.4, 0.0, 0.75 * 1.6],
                           [0.5 * -1.4, 4 * -1.4 / 0.5, 0.75 * 1.6]]))


def test_policy_loss_gradient_flows_through_log_pi_only():
    leaves = [x.clone().requires_grad_(True) for x in (PI, Q, V, Q_RET, RHO_A)]
    log_pi = PI.log().requires_grad_(True)
    acer_policy_loss(log_pi, *leaves[:4], leaves[4], ACTIONS, C).sum().backward()
    assert log_pi.grad is not None and log_pi.grad.abs().sum() > 0
    assert all(x.grad is None for x in leaves)
    q_taken = Q_TAKEN.clone().requires_grad_(True)
    q_ret = t(2.0, 1.0, 0.0).requires_grad_(True)
    critic = acer_critic_loss(q_taken, q_ret)
    close(critic, 0.5 * t(1.5 ** 2, 0.0, 1.5 ** 2))
    critic.sum().backward()
    close(q_taken.grad, Q_TAKEN - t(2.0, 1.0, 0.0))  # d/dQ of (Q_ret - Q)^2 / 2
    assert q_ret.grad is None


def random_inputs(*lead, T=5, A=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(*lead, T, A, generator=gen)
    q = torch.randn(*lead, T, A, generator=gen)
    rho = torch.exp(3 * torch.randn(*lead, T, A, generator=gen))  # spans both sides of c
    actions = torch.randint(A, (*lead, T), generator=gen)
    q_ret = torch.randn(*lead, T, generator=gen)
    return logits, q, rho, actions, q_ret


def test_closed_form_gradient_matches_autograd():
    logits, q, rho, actions, q_ret = random_inputs(3, 2)
    pi = torch.softmax(logits, -1).requires_grad_(True)
    values = (pi.detach() * q).sum(-1)
    objective = -acer_policy_loss(torch.log(pi), pi, q, values, q_ret, rho, actions, C)
    (auto,) = torch.autograd.grad(objective.sum(), pi)
    g = acer_policy_objective_gradient(pi, q, values, q_ret, rho, actions, C)
    assert not g.requires_grad
    close(g, auto)
    # and the surrogate on the probabilities reproduces the policy loss's gradient w.r.t. the network's logits
    logits.requires_grad_(True)
    log_pi, pi, values = policy_and_values(logits, q)
    (direct,) = torch.autograd.grad(acer_policy_loss(log_pi, pi, q, values, q_ret, rho, actions, C).sum(), logits,
                                retain_graph=True)
    g = acer_policy_objective_gradient(pi, q, values, q_ret, rho, actions, C)
    (via_probs,) = torch.autograd.grad(trust_region_policy_loss(pi, g).sum(), logits)
    close(via_probs, direct)


def test_policy_and_values():
    logits, q, *_ = random_inputs(2)
    log_pi, pi, values = policy_and_values(logits, q)
    close(pi, torch.softmax(logits, -1))
    close(log_pi, torch.log_softmax(logits, -1))
    close(values, (torch.softmax(logits, -1) * q).sum(-1))
    close(pi.sum(-1), torch.ones(2, 5))


# ---------------------------------------------------------------- trust region
def test_trust_region_by_hand_sign():
    # k = (1, 0), g = (3, 1), delta = 1: k^T g = 3 > 1, remove (3 - 1) / 1 = 2 along k -> z = (1, 1), k^T z = 1.
    # (The sign error z = g + 2k = (5, 1) would move the step further out of the trust region.)
    close(trust_region(t(3.0, 1.0), t(1.0, 0.0), 1.0), t(1.0, 1.0))
    close(trust_region(t(0.5, 7.0), t(1.0, 0.0), 1.0), t(0.5, 7.0))  # inside: untouched
    # k = -avg/pi from the KL gradient: avg = (0.5, 0.5), pi = (0.25, 0.75) -> k = (-2, -2/3)
    close(kl_gradient_wrt_probs(t(0.5, 0.5), t(0.25, 0.75)), t(-2.0, -2.0 / 3.0))


def test_trust_region_projection_properties():
    gen = torch.Generator().manual_seed(7)
    g = torch.randn(4, 64, 6, generator=gen)
    avg_pi = torch.softmax(torch.randn(4, 64, 6, generator=gen), -1)
    pi = torch.softmax(torch.randn(4, 64, 6, generator=gen), -1)
    k = kl_gradient_wrt_probs(avg_pi, pi)
    kg = (k * g).sum(-1)
    delta = float(kg.median())  # about half the samples on each side
    outside = kg > delta
    assert 50 < int(outside.sum()) < 200
    z = trust_region(g, k, delta)
    kz = (k * z).sum(-1)
    assert torch.all(kz <= delta + 1e-5)  # the constraint holds everywhere
    close(kz[outside], torch.full_like(kz[outside], delta))             # and is active where it was violated
    assert torch.equal(z[~outside], g[~outside])                         # inside: z = g exactly
    # z - g = alpha k with alpha < 0 where outside: only the component along k is removed, with the right sign
    diff = (z - g)[outside]
    kk = k[outside]
    alpha = (diff * kk).sum(-1) / (kk * kk).sum(-1)
    assert torch.all(alpha < 0)
    close(diff, alpha.unsqueeze(-1) * kk)
    assert torch.all(kz[outside] < kg[outside])
    # the part of g orthogonal to k is untouched
    ortho = lambda x: x - ((x * kk).sum(-1, keepdim=True) / (kk * kk).sum(-1, keepdim=True)) * kk
    close(ortho(z[outside]), ortho(g[outside]))


# ---------------------------------------------------------------- batched leading dims == per-item loop
def test_batched_leading_dims_match_per_item_loop():
    M, N, T, A = 3, 4, 5, 4
    logits, q, rho, actions, _ = random_inputs(M, N, T=T, A=A, seed=11)
    gen = torch.Generator().manual_seed(12)
    rewards, bv = torch.randn(M, N, T, generator=gen), torch.randn(M, N, T, generator=gen)
    ended = torch.rand(M, N, T, generator=gen) < 0.3
    not_terminated = ~(ended & (torch.rand(M, N, T, generator=gen) < 0.5))
    avg_pi = torch.softmax(torch.randn(M, N, T, A, generator=gen), -1)
    log_pi, pi, values = policy_and_values(logits, q)
    rho_taken = rho.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    q_taken = q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def everything(i):
        x = lambda v: v if i is None else v[i]
        q_ret = retrace_targets(x(rewards), x(not_terminated), x(ended), x(q_taken), x(values), x(rho_taken),
                                x(bv), 0.97)
        loss = acer_policy_loss(x(log_pi), x(pi), x(q), x(values), q_ret, x(rho), x(actions), C)
        g = acer_policy_objective_gradient(x(pi), x(q), x(values), q_ret, x(rho), x(actions), C)
        z = trust_region(g, kl_gradient_wrt_probs(x(avg_pi), x(pi)), 1.0)
        return q_ret, loss, g, z, acer_critic_loss(x(q_taken), q_ret), trust_region_policy_loss(x(pi), z)

    batched = everything(None)
    for i in itertools.product(range(M), range(N)):
        for b, single in zip(batched, everything(i)):
            close(b[i], single)
