"""ACER against independent computations from Wang et al. 2017's definitions.

* Discrete ACER (algorithms/onpolicy/acer.py): the loss and its parameter gradient recomputed one member, environment and
  step at a time (torch.distributions.Categorical for the policy and its entropy, plain Python backward loops for
  Retrace's Q_ret, the bias correction summed action by action, the trust region's k by autograd and the
  projection by hand), with the trust region idle, binding, and switched off.
* Continuous ACER's acting: the rollout keeps the unclipped Gaussian draw and the behaviour mean, so that the
  importance weights computed from the stored data are pi(a)/mu(a) of the action that was drawn, although the
  environment got it clipped to its bounds.

The continuous ACER's loss has its own reference test in tests/test_acer_continuous.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal, kl_divergence

import ac_main
from algorithms.common.nets import BatchedLinear
from algorithms.onpolicy.acer import ACER
from algorithms.onpolicy.acer_continuous import gaussian_log_ratio

# ---- discrete ACER: the loss ----------------------------------------------------------------------------------
N, T_LEN, K_LEN, OBS_DIM, ACTIONS = 2, 6, 2, 3, 3
GAMMA, C, ENT_COEF, Q_COEF = 0.9, 3.0, 0.05, 0.7


def discrete_batch_and_agent(delta: float, trust_region: bool = True, seed: int = 0, entropy_inside: bool = False,
                             eps: float = 0.0):
    """Two members, 6 steps of 2 environments each, with terminations (one at the rollout's last step),
    time-limit truncations and rollout ends, and behaviour probabilities mu drawn so that the importance weights
    rho = pi / mu fall below 1, between 1 and c, and above c (where the bias correction is active)."""
    agent = ACER((OBS_DIM,), ACTIONS, None, None, [11, 12], "cpu", True, hidden_size=8, gamma=GAMMA,
                 trace_max=C, ent_coef=ENT_COEF, q_coef=Q_COEF, trust_region=trust_region,
                 trust_region_threshold=delta, rollout=(T_LEN, K_LEN), trust_region_entropy=entropy_inside,
                 prob_eps=eps)
    with torch.no_grad():  # the average policy somewhere else, so that the trust region has a direction
        for p in agent.average.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    g = torch.Generator().manual_seed(seed)
    term = torch.zeros(N, T_LEN, K_LEN)
    term[0, 2, 0] = term[1, 1, 1] = term[1, T_LEN - 1, 0] = 1.0  # the last: a termination at the rollout's end
    ended = term.clone()
    ended[0, 3, 1] = ended[1, 2, 0] = 1.0  # time-limit truncations
    obs = torch.randn(N, T_LEN, K_LEN, OBS_DIM, generator=g)
    next_obs = torch.randn(N, T_LEN, K_LEN, OBS_DIM, generator=g)
    # within an episode the next state is the next step's state; where it ended, the next step is a reset state
    next_obs[:, :-1] = torch.where(ended[:, :-1, :, None] == 0, obs[:, 1:], next_obs[:, :-1])
    with torch.no_grad():
        pi = torch.softmax(agent.model.pi(obs.reshape(N, T_LEN * K_LEN, OBS_DIM)), -1).view(N, T_LEN, K_LEN, -1)
    w = torch.exp(3.0 * (2 * torch.rand(N, T_LEN, K_LEN, ACTIONS, generator=g) - 1))
    mu = pi * w / (pi * w).sum(-1, keepdim=True)  # rho_b = sum_j pi_j w_j / w_b: from about e^-3 to e^3
    batch = {"obs": obs, "next_obs": next_obs, "actions": torch.randint(0, ACTIONS, (N, T_LEN, K_LEN), generator=g),
             "mu": mu, "rewards": torch.randn(N, T_LEN, K_LEN, generator=g), "terminated": term, "ended": ended}
    return agent, batch


def discrete_reference(agent: ACER, batch: dict):
    """Per member, the mean over its steps of

        -z . pi(.|s)  - ent_coef H(pi(.|s))  + q_coef (Q_ret - Q(s, a))^2 / 2

    from the paper's definitions (Wang et al. 2017, sections 3 and 3.3), with phi = the probability vector
    (f(b|phi) = phi_b): g = min(c, rho_a)(Q_ret - V) grad_phi log f(a|phi)
                            + sum_b [1 - c/rho_b]_+ f(b|phi) (Q(s, b) - V) grad_phi log f(b|phi),
    k = grad_phi KL(f(.|phi_avg) || f(.|phi)), z = g - max(0, (k.g - delta) / |k|^2) k (z = g without the trust
    region); -z . pi back-propagates -(d pi / d theta)^T z. With the entropy inside the trust region (OpenAI
    baselines, A3C-ACER-PyTorch) g also holds ent_coef grad_phi H(Categorical(probs=phi)) and the loss no separate
    entropy term. With eps (OpenAI baselines' and A3C-ACER-PyTorch's guard, here larger to be seen):
    rho = pi / (mu + eps), log(f(b|phi) + eps) for log f, [1 - c/(rho_b + eps)]_+, log(phi + eps) in the KL, and
    |k|^2 + eps in the projection. Returns the losses [N], the losses without the policy
    term [N], and per sample (member, env, step): z, k, rho(a) and rho(.) as floats."""
    model, c, eps = agent.model, agent.c, agent.eps
    losses, rest, samples = [], [], []
    for i in range(N):
        terms, others = [], []
        for k in range(K_LEN):
            obs, next_obs = batch["obs"][:, :, k], batch["next_obs"][:, :, k]  # [N, T, obs]: every member's input
            logits, q = model.pi(obs)[i], model.v(obs)[i]  # [T, A]
            with torch.no_grad():
                avg_logits = agent.average.pi(obs)[i]
                next_pi = Categorical(logits=model.pi(next_obs)[i]).probs
                v_next = (next_pi * model.v(next_obs)[i]).sum(-1)  # V(s'_t) under the current policy and Q
            dist = [Categorical(logits=logits[t]) for t in range(T_LEN)]
            probs = [d.probs.detach() for d in dist]
            qd = q.detach()
            v = [float(probs[t] @ qd[t]) for t in range(T_LEN)]
            a = [int(batch["actions"][i, t, k]) for t in range(T_LEN)]
            rho = [[float(probs[t][b] / (batch["mu"][i, t, k, b] + eps)) for b in range(ACTIONS)]
                   for t in range(T_LEN)]
            # Retrace, backwards: restarted from V(s') at truncations and the rollout's end, from 0 after a
            # termination; elsewhere Q_ret(t) = r_t + gamma (min(1, rho_{t+1}) (Q_ret(t+1) - Q(t+1)) + V(t+1))
            q_ret = [0.0] * T_LEN
            for t in reversed(range(T_LEN)):
                r, terminated, ended = (float(batch[key][i, t, k]) for key in ("rewards", "terminated", "ended"))
                if ended or t == T_LEN - 1:
                    nxt = 0.0 if terminated else float(v_next[t])
                else:
                    nxt = min(1.0, rho[t + 1][a[t + 1]]) * (q_ret[t + 1] - float(qd[t + 1, a[t + 1]])) + v[t + 1]
                q_ret[t] = r + agent.gamma * nxt
            for t in range(T_LEN):
                phi = probs[t].clone().requires_grad_(True)
                grad_log = lambda b: torch.autograd.grad(torch.log(phi[b] + eps), phi)[0]  # noqa: E731  f(b|phi) = phi_b
                g = min(c, rho[t][a[t]]) * (q_ret[t] - v[t]) * grad_log(a[t])
                for b in range(ACTIONS):
                    g = g + max(0.0, 1.0 - c / (rho[t][b] + eps)) * float(probs[t][b]) * (float(qd[t, b]) - v[t]) \
                        * grad_log(b)
                if agent.entropy_in_trust_region:
                    g = g + agent.ent_coef * torch.autograd.grad(Categorical(probs=phi).entropy(), phi)[0]
                avg = Categorical(logits=avg_logits[t]).probs
                kl = (avg * (avg.log() - (phi + eps).log())).sum()  # KL(pi_avg || f(.|phi)), written out in phi
                if not eps:
                    torch.testing.assert_close(kl, kl_divergence(Categorical(probs=avg), Categorical(probs=probs[t])))
                kgrad = torch.autograd.grad(kl, phi)[0]
                if agent.use_trust_region:
                    z = g - max(0.0, (float(kgrad @ g) - agent.delta) / (float(kgrad @ kgrad) + eps)) * kgrad
                else:
                    z = g
                other = agent.q_coef * 0.5 * (q_ret[t] - q[t, a[t]]) ** 2
                if not agent.entropy_in_trust_region:
                    other = other - agent.ent_coef * dist[t].entropy()
                terms.append(-(z * dist[t].probs).sum() + other)
                others.append(other)
                samples.append({"z": z, "k": kgrad, "rho_a": rho[t][a[t]], "rho": rho[t]})
        losses.append(torch.stack(terms).mean())
        rest.append(torch.stack(others).mean())
    return torch.stack(losses), torch.stack(rest), samples


@pytest.mark.parametrize("delta, trust_region, entropy_inside, eps",
                         [(1e9, True, False, 0.0), (0.05, True, False, 0.0), (0.05, False, False, 0.0),
                          (1e9, True, True, 0.0), (0.05, True, True, 0.0), (0.05, True, True, 0.02),
                          (0.05, False, False, 0.02)],
                         ids=["trust-region-idle", "trust-region-binding", "no-trust-region",
                              "entropy-inside-idle", "entropy-inside-binding", "eps-binding", "eps-no-trust-region"])
def test_discrete_acer_loss_and_gradient_equal_the_papers_definitions(float64, delta, trust_region, entropy_inside,
                                                                      eps):
    agent, batch = discrete_batch_and_agent(delta, trust_region, entropy_inside=entropy_inside, eps=eps)
    expected, rest, samples = discrete_reference(agent, batch)
    # the batch exercises every case of the importance weights
    rho_a = [s["rho_a"] for s in samples]
    assert any(x < 1 for x in rho_a) and any(1 < x < C for x in rho_a) and sum(x > C for x in rho_a) >= 2, rho_a
    assert sum(any(r > C for r in s["rho"]) for s in samples) >= 6  # bias correction active
    out = agent.losses(batch)
    params = list(agent.model.parameters())
    names = [n for n, _ in agent.model.named_parameters()]
    if trust_region:
        torch.testing.assert_close(out["loss"], expected, rtol=1e-9, atol=1e-10)
    else:  # acer_policy_loss's surrogate has another value, the same gradient
        torch.testing.assert_close(out["loss"] - out["policy_loss"], rest, rtol=1e-9, atol=1e-10)
    for a, b, name in zip(torch.autograd.grad(out["loss"].sum(), params), torch.autograd.grad(expected.sum(), params),
                          names):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=name)
    kz = [float(s["k"] @ s["z"]) for s in samples]
    if trust_region and delta < 1 and not eps:  # with eps the step stops short: k.z = delta + (k.g - delta) eps / (|k|^2 + eps)
        assert max(kz) <= delta + 1e-9 and sum(abs(x - delta) < 1e-9 for x in kz) >= 4, kz  # it binds, and holds
        assert sum(x < delta - 1e-6 for x in kz) >= 4, kz  # and leaves others alone
    assert all(p.grad is None for p in params)  # losses() computes, it does not step


# ---- continuous ACER: what acting stores ------------------------------------------------------------------------
def test_continuous_acer_stores_the_unclipped_draw_and_the_behaviour_mean(tmp_path):
    """Pendulum (actions in [-2, 2]) with --action_std 3 (sigma = 6): most draws leave the bounds and reach the
    environment clipped. The rollout handed to the update (and kept in the replay) must hold the draw itself and
    the mean it was drawn around, so that rho from the stored data is pi(a)/mu(a) of the drawn a; the clipped
    action would give another rho (checked too, so that the test can tell them apart)."""
    from utils.run import Trainer

    m, k, d, low, high, std = 2, 2, 1, -2.0, 2.0, 3.0
    args = ["--policy", "ACER", "--env", "Pendulum-v1", "--max_time_steps", "400", "--eval_freq", "400",
            "--eval_episodes", "1", "--envs_per_agent", str(k), "--n_steps", "5", "--replay_start", "1000",
            "--action_std", str(std), "--hidden_size", "16", "--seeds", "0", "1", "--threads", "1",
            "--env_workers", "0", "--quiet", "--results_dir", str(tmp_path)]
    trainer = Trainer(ac_main.build_config(ac_main.parse(args)))
    learner = trainer.learner
    agent = learner.agents
    sigma = std * (high - low) / 2
    gen = torch.Generator().manual_seed(5)
    draws, env_got, stored, handed = [], [], [], []
    eps_box = []

    def normal(*shape):  # the exploration noise, known here
        eps = torch.randn((m, *shape), generator=gen)
        eps_box.append(eps)
        return eps

    agent.explore_rng.normal = normal
    act, store, update = learner.act, learner.store, agent.update

    def act_spy(obs, warmup):
        with torch.no_grad():
            mean = agent.model.mean(torch.as_tensor(obs, dtype=torch.float32).view(m, k, -1))
        actions, extra = act(obs, warmup)
        draws.append((mean, mean + sigma * eps_box[-1]))
        env_got.append(torch.as_tensor(actions).view(m, k, d))
        return actions, extra

    def store_spy(*a, **kw):
        i = learner.position
        store(*a, **kw)
        stored.append((learner.rollout["actions"][:, i].clone(), learner.rollout["mu"][:, i].clone()))

    def update_spy(rollout):
        handed.append({key: rollout[key].clone() for key in ("actions", "mu", "obs")})
        return update(rollout)

    learner.act, learner.store, agent.update = act_spy, store_spy, update_spy
    trainer.run(stop_at=20)  # 10 steps of 2 environments: two rollouts of 5 steps, two updates
    assert len(draws) == len(stored) == 10 and len(handed) == 2

    mean = torch.stack([x[0] for x in draws], 1)  # [M, T, K, d]
    drawn = torch.stack([x[1] for x in draws], 1)
    got = torch.stack(env_got, 1)
    torch.testing.assert_close(got, drawn.clamp(low, high))  # the environment got the draw clipped to its bounds
    clipped = (drawn < low) | (drawn > high)
    assert clipped.float().mean() > 0.4, clipped.float().mean()
    torch.testing.assert_close(torch.stack([s[0] for s in stored], 1), drawn)  # the draw, unclipped
    torch.testing.assert_close(torch.stack([s[1] for s in stored], 1), mean)  # the behaviour mean
    batch = {key: torch.cat([h[key] for h in handed], 1) for key in handed[0]}
    torch.testing.assert_close(batch["actions"], drawn)
    torch.testing.assert_close(batch["mu"], mean)
    slot = (agent.stored - 1) % agent.slots  # the replay keeps the second rollout as it was handed over
    torch.testing.assert_close(agent.memory["actions"][:, slot], handed[-1]["actions"])
    torch.testing.assert_close(agent.memory["mu"][:, slot], handed[-1]["mu"])

    # rho from the stored data, for a policy pi other than the behaviour (the average network, moved)
    with torch.no_grad():
        phi = agent.average.mean(batch["obs"].reshape(m, -1, batch["obs"].shape[-1])).view_as(mean) + 0.5
    sig = torch.full((d,), sigma)
    rho_stored = gaussian_log_ratio(batch["actions"], phi, batch["mu"], sig).exp()
    rho_true = (Normal(phi, sigma).log_prob(drawn).sum(-1) - Normal(mean, sigma).log_prob(drawn).sum(-1)).exp()
    torch.testing.assert_close(rho_stored, rho_true, rtol=1e-4, atol=1e-6)
    rho_of_clipped = gaussian_log_ratio(got, phi, mean, sig).exp()
    far = ~torch.isclose(rho_of_clipped, rho_true, rtol=1e-2)
    assert far[clipped.squeeze(-1)].float().mean() > 0.9  # storing the clipped action would fail the check above
    assert np.isfinite(rho_true.numpy()).all()


def test_prob_eps_keeps_a_collapsed_policy_finite():
    """A policy whose probabilities underflowed to 0 (it happens within ~150 steps of ACER's defaults on Space
    Invaders): the trust region's exact g and k divide by those zeros and the loss is nan; with --prob_eps (the
    references' 1e-6) loss and gradient stay finite. (Without the trust region the exact loss takes log_softmax and
    stays finite.)"""
    def loss_and_grads(eps):
        agent, batch = discrete_batch_and_agent(0.05, True, eps=eps)
        with torch.no_grad():
            last = [m for m in agent.model.pi.modules() if isinstance(m, BatchedLinear)][-1]
            last.bias.copy_(torch.tensor([0.0, 300.0, -300.0]))  # pi(0) and pi(2) are exactly 0 (float32)
        out = agent.losses(batch)
        params = list(agent.model.parameters())
        return out["loss"], torch.autograd.grad(out["loss"].sum(), params)

    loss, grads = loss_and_grads(1e-6)
    assert torch.isfinite(loss).all() and all(torch.isfinite(g).all() for g in grads)
    loss, grads = loss_and_grads(0.0)
    assert not (torch.isfinite(loss).all() and all(torch.isfinite(g).all() for g in grads))


def test_a_collapsed_acer_run_stops_naming_the_collapse_and_the_flags_that_avoid_it(tmp_path, capsys):
    """ACER at too large a step with torch's RMSprop (square average from 0: first steps of about 10 lr a weight)
    collapses its policy onto one action and its exact formulas go nan (on Pong, at the default lr 7e-4, seed 4 in its
    sixth update). The one-line stop names the collapse and what avoids it, and each flag it names does: the same
    run with --optimizer rmsprop_tf, or with --prob_eps 1e-6, ends finite."""
    from utils.cli import main_guard

    base = ["--policy", "ACER", "--env", "CartPole-v1", "--seed", "0", "--max_time_steps", "4000", "--eval_freq",
            "4000", "--eval_episodes", "1", "--threads", "1", "--quiet", "--lr", "0.5"]
    assert main_guard(ac_main.run, base + ["--results_dir", str(tmp_path / "torch")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "non-finite loss" in err, err
    assert "collapsed" in err and "--optimizer rmsprop_tf" in err and "--prob_eps 1e-6" in err, err
    for i, fix in enumerate((["--optimizer", "rmsprop_tf"], ["--prob_eps", "1e-6"])):
        assert main_guard(ac_main.run, base + fix + ["--results_dir", str(tmp_path / f"fixed{i}")]) == 0, \
            capsys.readouterr().err
