"""Reference checks of SAC's and discrete SAC's targets, SAC's temperature, prioritized replay at the buffer and the
buffer's V-trace sequences, each against an independent computation from the definition (not the same code)."""

import numpy as np
import pytest
import torch
from torch.distributions import Normal

from algorithms.common.nets import AgentRNG
from algorithms.replay.base import Batch
from algorithms.replay.discrete_sac import DiscreteSAC
from algorithms.replay.sac import SAC
from utils.run.replay.buffer import SharedReplayBuffer

M, B, OBS, ACT = 2, 6, 3, 2
GAMMA, ALPHA, SCALE = 0.9, 0.5, 2.0


@torch.no_grad()
def perturb(net, gen, size=0.3):
    for p in net.parameters():
        p.add_(size * torch.randn(p.shape, generator=gen))


def n_step_batch(gen, action_shape=(M, B, ACT)):
    """Per-sample discounts that differ from gamma: gamma^3 (full N-step), gamma^(j+1) after a cut, and one
    termination."""
    discount = torch.tensor([GAMMA ** 3, GAMMA ** 1, GAMMA ** 2, GAMMA ** 3, GAMMA ** 3, GAMMA ** 2])
    not_done = torch.ones(M, B, 1)
    not_done[0, 2] = 0.0
    not_done[1, 4] = 0.0
    return Batch(torch.randn(M, B, OBS, generator=gen), torch.randn(*action_shape, generator=gen).clamp(-1, 1),
                 torch.randn(M, B, 1, generator=gen), torch.randn(M, B, OBS, generator=gen), not_done,
                 torch.ones(M, B, dtype=torch.bool), discount=discount.view(1, B, 1).expand(M, B, 1).clone())


def gaussian_sac(**kw):
    return SAC(OBS, ACT, [-2.0] * ACT, [2.0] * ACT, [3, 4], "cpu", policy_type="Gaussian", hidden_size=16,
               gamma=GAMMA, alpha=ALPHA, reward_scale=SCALE, **kw)


@torch.no_grad()
def squashed_sample(sac, obs, eps):
    """a = tanh(x) * scale + offset with x = mean + std * eps, and log pi(a|s): the Gaussian log density of x minus
    the log |da/dx| (with the same 1e-6 guard as the policy), summed over action dimensions."""
    mean, std = sac.actor.gaussian(obs)
    x = mean + std * eps
    a = torch.tanh(x) * sac.actor.scale + sac.actor.offset
    log_pi = Normal(mean, std).log_prob(x) - torch.log(sac.actor.scale * (1 - torch.tanh(x) ** 2) + 1e-6)
    return a, log_pi.sum(-1, keepdim=True)


def test_sac_n_step_target_uses_the_batch_discount_the_target_critics_and_the_entropy(float64):
    gen = torch.Generator().manual_seed(0)
    sac = gaussian_sac()
    perturb(sac.critic_target, gen)  # the target critics differ from the online ones
    assert float(sac.temperature().mean()) == pytest.approx(ALPHA)
    batch = n_step_batch(gen)
    state = sac.update_rng.get_state()
    eps = sac.update_rng.normal(B, ACT)  # the noise the target draws for a' ~ pi(s')
    sac.update_rng.set_state(state)
    target = sac.target(batch)

    a, log_pi = squashed_sample(sac, batch.next_obs, eps)
    with torch.no_grad():
        q = torch.min(sac.critic_target.q1(batch.next_obs, a), sac.critic_target.q2(batch.next_obs, a))
        q_online = torch.min(sac.critic.q1(batch.next_obs, a), sac.critic.q2(batch.next_obs, a))
    assert (q - q_online).abs().max() > 1e-2  # the test tells the critics apart
    assert (ALPHA * log_pi).abs().max() > 1e-2  # ... and sees the entropy term
    expected = SCALE * batch.reward + batch.not_done * batch.discount * (q - ALPHA * log_pi)
    torch.testing.assert_close(target, expected)


def test_sac_soft_values_are_min_target_q_minus_alpha_log_pi(float64):
    """V(s) of V-trace (``soft_values``): min_j Q'_j(s, a) - alpha log pi(a|s), a ~ pi(s), states [M, B, n, obs]."""
    gen = torch.Generator().manual_seed(1)
    sac = gaussian_sac(vtrace=(1.0, 1.0, 1.0))
    perturb(sac.critic_target, gen)
    n = 3
    states = torch.randn(M, B, n, OBS, generator=gen)
    state = sac.update_rng.get_state()
    eps = torch.stack([sac.update_rng.normal(B, ACT) for _ in range(n)], dim=2)  # n draws of a batch's shape
    sac.update_rng.set_state(state)
    v = sac.soft_values(states)
    assert v.shape == (M, B, n)
    flat = states.reshape(M, B * n, OBS)  # the networks take [M, rows, ...]
    a, log_pi = squashed_sample(sac, flat, eps.reshape(M, B * n, ACT))
    with torch.no_grad():
        q = torch.min(sac.critic_target.q1(flat, a), sac.critic_target.q2(flat, a))
    assert (ALPHA * log_pi).abs().max() > 1e-2
    torch.testing.assert_close(v, (q - ALPHA * log_pi).view(M, B, n))


@pytest.mark.parametrize("target_entropy, direction", [(50.0, 1.0), (-50.0, -1.0)])
def test_sac_temperature_rises_below_the_target_entropy_and_falls_above(target_entropy, direction):
    """L_alpha = -log_alpha (log pi + H_target): with the policy's entropy (-log pi, far from +-50 here) below the
    target, dL/dlog_alpha < 0 and Adam's first step raises log_alpha by lr; above it, log_alpha falls by lr."""
    gen = torch.Generator().manual_seed(2)
    lr = 1e-2
    sac = gaussian_sac(automatic_entropy_tuning=True, lr=lr)
    sac.target_entropy = target_entropy
    batch = n_step_batch(gen)
    before = sac.temperature.log_alpha.detach().clone()
    sac.update(batch)
    moved = sac.temperature.log_alpha.detach() - before
    torch.testing.assert_close(moved, torch.full((M,), direction * lr), rtol=0, atol=1e-4)


def test_discrete_sac_n_step_target_uses_the_batch_discount_and_the_target_critics(float64):
    gen = torch.Generator().manual_seed(3)
    n_actions = 4
    agent = DiscreteSAC(OBS, n_actions, None, None, [5, 6], "cpu", gamma=GAMMA, alpha=ALPHA, reward_scale=SCALE,
                        hidden_size=16)
    perturb(agent.critic_target, gen)
    batch = n_step_batch(gen, action_shape=(M, B, 1))
    target = agent.target(batch)
    with torch.no_grad():
        logits = agent.actor.net(batch.next_obs)
        pi = torch.softmax(logits, -1)
        log_pi = torch.log(pi)
        q = torch.min(agent.critic_target.q1(batch.next_obs), agent.critic_target.q2(batch.next_obs))
        q_online = torch.min(agent.critic.q1(batch.next_obs), agent.critic.q2(batch.next_obs))
    assert (q - q_online).abs().max() > 1e-2
    v = sum(pi[..., a:a + 1] * (q[..., a:a + 1] - ALPHA * log_pi[..., a:a + 1]) for a in range(n_actions))
    expected = SCALE * batch.reward + batch.not_done * batch.discount * v
    torch.testing.assert_close(target, expected)


def test_prioritized_buffer_samples_by_priority_with_annealed_importance_weights():
    """P(i) = p_i / sum p with p_i = (|td_i| + eps)^alpha set through ``update_priorities``; the batch's importance
    weights are (N P(i))^-beta(step) over their batch maximum, beta(step) = 0.4 + 0.6 * step / 1000 (not beta0), and
    the losses' weights carry them."""
    per = dict(alpha=0.8, beta=0.4, beta_steps=1000, eps=1e-6)
    n = 16
    buf = SharedReplayBuffer(1, 1, capacity=n, writers=1, prioritized=per)
    for t in range(n):
        buf.add(np.array([[float(t)]]), np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)), np.zeros(1))
    rng = AgentRNG([7])
    batch = buf.sample(n, rng)
    batch.index = torch.arange(n).view(1, n)  # every row: the update API takes the rows a batch drew
    td = np.geomspace(0.05, 5.0, n)[np.random.default_rng(0).permutation(n)]
    buf.update_priorities(batch, torch.tensor(td, dtype=torch.float32).view(1, n, 1))
    p = (np.abs(td) + per["eps"]) ** per["alpha"]
    prob = p / p.sum()

    step = torch.tensor(500)
    beta = 0.4 + 0.6 * 500 / 1000
    counts = np.zeros(n)
    draws = 0
    for _ in range(100):
        batch = buf.sample(64, rng, step=step)
        rows = batch.index[0].numpy()
        assert (batch.obs[0, :, 0].numpy() == rows).all()  # the batch holds the rows drawn
        np.add.at(counts, rows, 1)
        draws += len(rows)
        nw = (n * prob[rows]) ** -beta
        np.testing.assert_allclose(batch.importance[0, :, 0].numpy(), nw / nw.max(), rtol=1e-4)
        w = torch.rand(1, 64, 1, generator=torch.Generator().manual_seed(draws)) + 0.5
        torch.testing.assert_close(batch.loss_weights(w), w * torch.tensor(nw / nw.max(), dtype=torch.float32).view(1, 64, 1),
                                   rtol=1e-4, atol=0)
    assert batch.importance.min() < 0.5  # the weights are far from uniform
    chi2 = ((counts - draws * prob) ** 2 / (draws * prob)).sum()
    assert chi2 < 40.0, (chi2, counts / draws, prob)  # 15 degrees of freedom: p ~ 1e-3 (stratified: far lower)


def test_vtrace_sequences_follow_the_stored_steps():
    """A buffer keeping sequences (n = 3): one writer's trajectory of 7 steps, a time-limit cut at step 2 and a
    termination at step 4, behaviour Gaussians different at every step. Every sampled sequence holds, step by step,
    the stored steps t..t+2: obs, action, reward, next obs, not_done = 1 - terminated (1 at the cut: it
    bootstraps), behaviour mean and std, and used = 1 up to the first step that ended."""
    n, steps = 3, 7
    buf = SharedReplayBuffer(1, ACT, capacity=16, writers=1, gaussian_behaviour=True, n_step=n, gamma=GAMMA,
                             sequences=True)
    terminated = [t == 4 for t in range(steps)]
    ended = [t in (2, 4) for t in range(steps)]
    gen = np.random.default_rng(0)
    mean = gen.standard_normal((steps, ACT))
    std = gen.uniform(0.2, 1.5, (steps, ACT))
    action = gen.uniform(-1, 1, (steps, ACT))
    for t in range(steps):
        buf.add(np.array([[float(t)]]), action[t:t + 1], np.array([10.0 + t]), np.array([[100.0 + t]]),
                np.array([terminated[t]]), behaviour=(mean[t:t + 1], std[t:t + 1]), ended=np.array([ended[t]]))
    batch = buf.sample(64, AgentRNG([11]))
    seq = batch.sequence
    seen = set()
    for b in range(64):
        t = int(seq["obs"][0, b, 0, 0])
        seen.add(t)
        alive = True
        for k in range(n):
            s = t + k
            stored = s < steps
            assert float(seq["used"][0, b, k]) == float(alive and stored), (t, k)
            if stored:
                assert float(seq["obs"][0, b, k, 0]) == s
                np.testing.assert_allclose(seq["action"][0, b, k].numpy(), action[s], rtol=1e-6)
                assert float(seq["reward"][0, b, k]) == 10.0 + s
                assert float(seq["next_obs"][0, b, k, 0]) == 100.0 + s
                assert float(seq["not_done"][0, b, k]) == (0.0 if terminated[s] else 1.0), (t, k)
                np.testing.assert_allclose(seq["behaviour_mean"][0, b, k].numpy(), mean[s], rtol=1e-6)
                np.testing.assert_allclose(seq["behaviour_std"][0, b, k].numpy(), std[s], rtol=1e-6)
                alive = alive and not ended[s]
    assert seen == set(range(steps))
