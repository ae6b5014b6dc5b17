"""Continuous ACER (Wang et al. 2017, section 5): its loss against an independent computation from the paper's
definitions (torch.distributions for the Gaussian's log-densities and KL, plain backward loops for Q_ret and Q_opc,
the SDN written out sample by sample, the trust-region projection by hand), whole runs (seeds batched = alone = cut
and resumed), flags, and learning Pendulum (slow)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Normal, kl_divergence

import ac_main
from algorithms.onpolicy.acer_continuous import ContinuousACER
from utils.cli import main_guard


def run_cli(*args: str) -> int:
    return main_guard(ac_main.run, list(args))


def batch_and_agent(delta: float, seed: int = 0):
    t_len, k_len, obs_dim, d = 6, 2, 3, 2
    low, high = -2 * np.ones(d), 2 * np.ones(d)
    agent = ContinuousACER((obs_dim,), d, low, high, [7], "cpu", False, hidden_size=8, trust_region_threshold=delta,
                           rollout=(t_len, k_len), sdn_samples=3, action_std=0.4)
    with torch.no_grad():  # the average network somewhere else, so that the trust region has a direction
        for p in agent.average.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    g = torch.Generator().manual_seed(seed)
    term = torch.zeros(1, t_len, k_len)
    term[0, 2, 0] = 1.0
    ended = term.clone()
    ended[0, 3, 1] = 1.0  # a truncation
    obs = torch.randn(1, t_len, k_len, obs_dim, generator=g)
    next_obs = torch.randn(1, t_len, k_len, obs_dim, generator=g)
    next_obs[:, :-1] = torch.where(ended[:, :-1, :, None] == 0, obs[:, 1:], next_obs[:, :-1])
    batch = {"obs": obs, "next_obs": next_obs, "actions": 1.5 * torch.randn(1, t_len, k_len, d, generator=g),
             "mu": torch.randn(1, t_len, k_len, d, generator=g), "rewards": torch.randn(1, t_len, k_len, generator=g),
             "terminated": term, "ended": ended}
    eps = torch.randn(1, k_len, t_len, agent.sdn_samples + 1, d, generator=g)
    agent.sdn_rng.normal = lambda *shape: eps  # the SDN's draws, known to the reference below
    return agent, batch, eps


def reference_loss(agent: ContinuousACER, batch: dict, eps: torch.Tensor):
    """The member's loss from the paper's definitions, one environment and one step at a time; also returns the
    projected policy gradients z and the trust region's k, per (k, t)."""
    model, sigma, gamma, c, m = agent.model, agent.sigma, agent.gamma, agent.c, agent.sdn_samples
    t_len, k_len = batch["obs"].shape[1:3]
    d = sigma.shape[0]
    terms, zs, ks = [], [], []
    for k in range(k_len):
        obs = batch["obs"][0, :, k]
        phi, v = model.mean(obs[None])[0], model.value(obs[None])[0]  # [T, d], [T]
        with torch.no_grad():
            phi_avg = agent.average.mean(obs[None])[0]
            v_next = model.value(batch["next_obs"][0, :, k][None])[0]
        q_tilde, q_prime, rho, rho_prime, a_primes = [], [], [], [], []
        for t in range(t_len):
            u = [phi[t].detach() + sigma * eps[0, k, t, i] for i in range(m + 1)]
            adv = lambda a: model.advantage(obs[t][None, None], a[None, None])[0, 0]  # noqa: E731
            base = sum(adv(u[i]) for i in range(m)) / m
            a_t = batch["actions"][0, t, k]
            q_tilde.append(v[t] + adv(a_t) - base)
            q_prime.append(float((v[t] + adv(u[m]) - base).detach()))
            log_pi = lambda a: Normal(phi[t].detach(), sigma).log_prob(a).sum()  # noqa: E731
            log_mu = Normal(batch["mu"][0, t, k], sigma).log_prob
            rho.append(float(torch.exp(log_pi(a_t) - log_mu(a_t).sum())))
            rho_prime.append(float(torch.exp(log_pi(u[m]) - log_mu(u[m]).sum())))
            a_primes.append(u[m])
        q_ret, q_opc = [0.0] * t_len, [0.0] * t_len
        for t in reversed(range(t_len)):
            r, term, end = (float(batch[key][0, t, k]) for key in ("rewards", "terminated", "ended"))
            if end or t == t_len - 1:
                boot = 0.0 if term else float(v_next[t])
                q_ret[t] = q_opc[t] = r + gamma * boot
            else:
                nxt = float(q_tilde[t + 1].detach())
                trace = min(1.0, rho[t + 1] ** (1.0 / d))
                q_ret[t] = r + gamma * (trace * (q_ret[t + 1] - nxt) + float(v[t + 1].detach()))
                q_opc[t] = r + gamma * ((q_opc[t + 1] - nxt) + float(v[t + 1].detach()))
        for t in range(t_len):
            p = phi[t].detach().clone().requires_grad_(True)
            grad_log = lambda a: torch.autograd.grad(Normal(p, sigma).log_prob(a).sum(), p)[0]  # noqa: E731
            g = min(c, rho[t]) * (q_opc[t] - float(v[t].detach())) * grad_log(batch["actions"][0, t, k]) \
                + max(0.0, 1.0 - c / rho_prime[t]) * (q_prime[t] - float(v[t].detach())) * grad_log(a_primes[t])
            kgrad = torch.autograd.grad(kl_divergence(Normal(phi_avg[t], sigma), Normal(p, sigma)).sum(), p)[0]
            if agent.use_trust_region:
                excess = float(kgrad @ g) - agent.delta
                z = g - max(0.0, excess / float(kgrad @ kgrad)) * kgrad
            else:
                z = g
            zs.append(z)
            ks.append(kgrad)
            v_target = min(1.0, rho[t]) * (q_ret[t] - float(q_tilde[t].detach())) + float(v[t].detach())
            critic = 0.5 * (q_ret[t] - q_tilde[t]) ** 2 + 0.5 * (v_target - v[t]) ** 2
            terms.append(-(z * phi[t]).sum() + agent.q_coef * critic)
    return torch.stack(terms).mean(), zs, ks


@pytest.mark.parametrize("delta", [1e9, 0.05])  # trust region never binding; binding
def test_loss_and_gradient_equal_the_papers_definitions(delta):
    agent, batch, eps = batch_and_agent(delta)
    expected, zs, ks = reference_loss(agent, batch, eps)
    got = agent.losses(batch)["loss"]
    torch.testing.assert_close(got[0], expected, rtol=1e-5, atol=1e-5)
    params = list(agent.model.parameters())
    for a, b, name in zip(torch.autograd.grad(got.sum(), params), torch.autograd.grad(expected, params),
                          [n for n, _ in agent.model.named_parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    kz = [float(k @ z) for k, z in zip(ks, zs)]
    if delta < 1:
        assert max(kz) <= delta + 1e-4 and sum(abs(x - delta) < 1e-4 for x in kz) >= 3  # it binds, and holds
    assert all(p.grad is None for p in params)  # losses() computes, it does not step


def test_masked_members_keep_their_sdn_stream():
    """A member whose replay update is masked out draws nothing: its SDN stream's counter stays where it was."""
    agent = ContinuousACER((3,), 1, -np.ones(1), np.ones(1), [1, 2], "cpu", False, hidden_size=8,
                           rollout=(4, 2), sdn_samples=2)
    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(2, 4, 2, 3, generator=g), "next_obs": torch.randn(2, 4, 2, 3, generator=g),
             "actions": torch.randn(2, 4, 2, 1, generator=g), "mu": torch.randn(2, 4, 2, 1, generator=g),
             "rewards": torch.randn(2, 4, 2, generator=g), "terminated": torch.zeros(2, 4, 2),
             "ended": torch.zeros(2, 4, 2)}
    agent.step(batch)  # the on-policy update comes first in a run (the optimizer then has its state)
    before = agent.sdn_rng.counter.clone()
    agent.step(batch, mask=torch.tensor([True, False]))
    assert agent.sdn_rng.counter[0] == before[0] + 1 and agent.sdn_rng.counter[1] == before[1]


# ---- whole runs -----------------------------------------------------------------------------------------------
SHORT = ["--policy", "ACER", "--env", "Pendulum-v1", "--max_time_steps", "1600", "--eval_freq", "400",
         "--eval_episodes", "2", "--envs_per_agent", "2", "--n_steps", "10", "--replay_start", "100",
         "--hidden_size", "32", "--threads", "1", "--env_workers", "0", "--quiet"]


def test_a_cut_resume_is_exact_and_seeds_batched_equal_alone(tmp_path):
    """Stopped at 1004 steps (between two rollouts' updates) and resumed: the same curve, bit for bit. Batched with
    seed 0, seed 1's Poisson replay counts differ from its neighbour's, so masked replay updates happen; its curve is
    the seed alone's, bit for bit (Gaussian actions carry any last-bit difference on)."""
    from utils.run import Trainer

    assert run_cli(*SHORT, "--seeds", "0", "1", "--results_dir", str(tmp_path / "both")) == 0
    assert run_cli(*SHORT, "--seed", "1", "--results_dir", str(tmp_path / "one")) == 0
    cut = [*SHORT, "--seed", "1", "--checkpoint_freq", "1004", "--results_dir", str(tmp_path / "cut")]
    Trainer(ac_main.build_config(ac_main.parse(cut))).run(stop_at=1004)
    assert run_cli(*cut, "--resume") == 0
    one, both, resumed = (np.load(tmp_path / d / "ACER_Pendulum-v1_1.npy") for d in ("one", "both", "cut"))
    assert one.shape == (5,) and len(set(one.tolist())) == 5
    np.testing.assert_array_equal(one, resumed)
    np.testing.assert_array_equal(one, both)


def test_replay_only_runs_resume_exactly_and_are_recorded(tmp_path):
    """Wang et al.'s continuous ACER is entirely off-policy: --replay_only is recorded in the run's settings, learns
    something other than the default schedule, and a cut run resumes bit for bit (the optimizer's state is created
    by a masked replay update there)."""
    import json

    from utils.run import Trainer

    only = [*SHORT, "--replay_only", "--seed", "1"]
    assert run_cli(*only, "--results_dir", str(tmp_path / "only")) == 0
    assert run_cli(*SHORT, "--seed", "1", "--results_dir", str(tmp_path / "default")) == 0
    cut = [*only, "--checkpoint_freq", "1004", "--results_dir", str(tmp_path / "cut")]
    Trainer(ac_main.build_config(ac_main.parse(cut))).run(stop_at=1004)
    assert run_cli(*cut, "--resume") == 0
    a, default, resumed = (np.load(tmp_path / d / "ACER_Pendulum-v1_1.npy") for d in ("only", "default", "cut"))
    np.testing.assert_array_equal(a, resumed)
    assert a[0] == default[0] and not np.array_equal(a, default)  # the same start, another schedule
    record = json.loads((tmp_path / "only" / "ACER_Pendulum-v1_1.json").read_text())
    assert record["config"]["algo"]["replay_only"] is True


def test_continuous_flags_are_checked(tmp_path, capsys):
    cases = [(["--action_std", "0"], "--action_std 0 must be in (0, 10]"),
             (["--sdn_samples", "0"], "--sdn_samples"),
             (["--env", "CartPole-v1", "--action_std", "0.5"], "--action_std applies to ACER on a Box action space"),
             (["--policy", "A2C", "--action_std", "0.5"], "--action_std applies to ACER")]
    for extra, needle in cases:
        args = SHORT if extra[0] != "--policy" else ["--env", "Pendulum-v1", "--quiet"]
        assert run_cli(*args, *extra, "--results_dir", str(tmp_path / "r")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (extra, err)
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").glob("*.npy"))


def test_reward_scale_scales_what_the_agents_learn_from_not_the_curves(tmp_path):
    from utils.run import Trainer

    cfg = ac_main.build_config(ac_main.parse([*SHORT, "--reward_scale", "0.1", "--results_dir", str(tmp_path)]))
    trainer = Trainer(cfg)
    learner, seen = trainer.learner, []
    store = learner.store

    def spy(obs, actions, rewards, *args, **kwargs):
        i = learner.position
        store(obs, actions, rewards, *args, **kwargs)
        seen.append((np.asarray(rewards, dtype=np.float32), learner.rollout["rewards"][:, i].reshape(-1).numpy().copy()))
    learner.store = spy
    trainer.run(stop_at=200)
    assert len(seen) == 100  # 200 steps of 2 environments
    for raw, stored in seen:
        np.testing.assert_allclose(stored, raw * np.float32(0.1), rtol=1e-6)
    curve = np.load(tmp_path / "ACER_Pendulum-v1_0.npy")
    assert curve[0] < -100  # evaluations report the environment's returns, not scaled ones


@pytest.mark.slow
def test_continuous_acer_learns_pendulum(tmp_path):
    """Seed 0 with --reward_scale 0.1 --action_std 0.5 (measured: -1121 at step 0, -103 at 100k and -368 at 120k;
    seed 2 learns too, seed 1 not by 160k: docs/actor_critic.md). Random play scores about -1200; the bar, -500 on
    average over the evaluations at 100k and 120k, fails a policy that never swings the pendulum up."""
    args = ["--policy", "ACER", "--env", "Pendulum-v1", "--max_time_steps", "120000", "--eval_freq", "20000",
            "--eval_episodes", "5", "--reward_scale", "0.1", "--action_std", "0.5", "--threads", "1",
            "--env_workers", "0", "--quiet", "--results_dir", str(tmp_path)]
    assert run_cli(*args) == 0
    curve = np.load(tmp_path / "ACER_Pendulum-v1_0.npy")
    assert curve[0] < -900 and curve[-2:].mean() > -500, curve
