"""V-trace corrections of SAC's N-step targets (--vtrace): the target equals a plain per-sample loop of the formula
with importance ratios from torch.distributions, reduces to the N-step target when the behaviour is the policy,
and bad flag combinations are one line."""
import math

import pytest
import torch

import sac_main
from algorithms.replay.base import Batch
from algorithms.replay.sac import SAC
from utils.cli import main_guard

M, B, N, OBS, ACT = 2, 5, 3, 3, 2


def agent(vtrace):
    return SAC(OBS, ACT, [-2.0] * ACT, [2.0] * ACT, [1, 2], "cpu", policy_type="Gaussian", hidden_size=16,
               gamma=0.9, reward_scale=2.0, vtrace=vtrace)


def sequence(sac, same_behaviour: bool):
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(M, B, N, OBS, generator=g)
    next_obs = torch.randn(M, B, N, OBS, generator=g)
    action = (torch.rand(M, B, N, ACT, generator=g) * 3.6 - 1.8)
    used = torch.ones(M, B, N)
    used[0, 1, 2] = 0  # a cut after step 1
    used[1, 3, 1:] = 0  # a cut after step 0
    not_done = torch.ones(M, B, N)
    not_done[0, 1, 1] = 0  # ... a termination there
    if same_behaviour:
        mean, std = sac.actor.gaussian(obs.view(M, B * N, OBS))
        mean, std = mean.view(M, B, N, ACT), std.view(M, B, N, ACT)
    else:
        mean, std = torch.randn(M, B, N, ACT, generator=g), torch.rand(M, B, N, ACT, generator=g) + 0.3
    return {"obs": obs, "action": action, "reward": torch.randn(M, B, N, generator=g), "next_obs": next_obs,
            "not_done": not_done, "used": used, "behaviour_mean": mean.detach(), "behaviour_std": std.detach()}


def batch_of(seq):
    z = torch.zeros(M, B, 1)
    return Batch(seq["obs"][:, :, 0], seq["action"][:, :, 0], z, z, z, torch.ones(M, B, dtype=torch.bool),
                 sequence=seq)


def soft_values_with(sac, seq, state):
    sac.update_rng.set_state(state)
    return sac.soft_values(seq["next_obs"])


def test_vtrace_target_equals_a_per_sample_loop(float64):
    rho_bar, c_bar, lam = 1.2, 0.9, 0.8
    sac = agent((rho_bar, c_bar, lam))
    seq = sequence(sac, same_behaviour=False)
    state = sac.update_rng.get_state()
    target = sac.vtrace_target(batch_of(seq))
    v = soft_values_with(sac, seq, state)  # V(s'_t), the same draws
    with torch.no_grad():
        mean, std = sac.actor.gaussian(seq["obs"].view(M, B * N, OBS))
    mean, std = mean.view(M, B, N, ACT), std.view(M, B, N, ACT)
    x = torch.atanh((seq["action"] / 2.0).clamp(-1 + 1e-6, 1 - 1e-6))
    ratio = torch.exp(torch.distributions.Normal(mean, std).log_prob(x).sum(-1)
                      - torch.distributions.Normal(seq["behaviour_mean"], seq["behaviour_std"]).log_prob(x).sum(-1))
    gamma, scale = 0.9, 2.0
    for m in range(M):
        for b in range(B):
            v1, trace = float(v[m, b, 0]), 1.0
            for t in range(1, N):
                if not seq["used"][m, b, t]:
                    break
                r = float(ratio[m, b, t])
                delta = scale * float(seq["reward"][m, b, t]) + gamma * float(seq["not_done"][m, b, t]) * \
                    float(v[m, b, t]) - float(v[m, b, t - 1])
                v1 += (gamma * lam) ** (t - 1) * trace * min(r, rho_bar) * delta
                trace *= min(r, c_bar)
            y = scale * float(seq["reward"][m, b, 0]) + gamma * float(seq["not_done"][m, b, 0]) * v1
            assert math.isclose(float(target[m, b, 0]), y, rel_tol=1e-9, abs_tol=1e-9), (m, b)
    assert float(ratio.min()) < 0.9 < 1.2 < float(ratio.max())  # both clips are in play


def test_on_policy_behaviour_gives_the_n_step_target(float64):
    sac = agent((1.0, 1.0, 1.0))
    seq = sequence(sac, same_behaviour=True)
    state = sac.update_rng.get_state()
    target = sac.vtrace_target(batch_of(seq))
    v = soft_values_with(sac, seq, state)
    gamma, scale = 0.9, 2.0
    for m in range(M):
        for b in range(B):
            j = int(seq["used"][m, b].sum()) - 1
            y = sum(gamma ** t * scale * float(seq["reward"][m, b, t]) for t in range(j + 1))
            y += gamma ** (j + 1) * float(seq["not_done"][m, b, j]) * float(v[m, b, j])
            assert math.isclose(float(target[m, b, 0]), y, rel_tol=1e-7, abs_tol=1e-7), (m, b)


@pytest.mark.parametrize("args, words", [
    (["--vtrace", "--policy_type", "Gaussian"], "--vtrace corrects N-step targets"),
    (["--vtrace", "--n_step", "3"], "--vtrace needs action probabilities"),
    (["--vtrace_rho", "2"], "apply with --vtrace"),
    (["--vtrace", "--n_step", "3", "--policy_type", "Gaussian", "--vtrace_lambda", "1.5"], "--vtrace_lambda"),
])
def test_bad_vtrace_flags_are_one_line(tmp_path, capsys, args, words):
    assert main_guard(sac_main.run, [*args, "--env", "Pendulum-v1", "--results_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err
