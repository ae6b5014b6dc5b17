"""Noisy networks (--noisy, Fortunato et al. 2018): the factorised-Gaussian layer against its formula, its noise
against the agents' streams, its mean at evaluation, and the command line."""
import json

import numpy as np
import pytest
import torch
from runs import refused_in_one_line, resumes_exactly
from test_batched_update import random_batch, update

import DASE_main
import sac_main
from algorithms import SAC, TD3
from algorithms.common.nets import (
    AgentRNG,
    BatchedLinear,
    NoisyBatchedLinear,
    draw_noise,
    init_generators,
    noisy_layers,
)
from algorithms.replay.discrete_sac import DiscreteSAC

OBS, ACT = 5, 2  # the sizes of test_batched_update's random batches
LOW, HIGH = -np.ones(ACT), np.ones(ACT)


def test_the_layer_is_its_formula_and_its_mean_without_noise():
    """y = x (mu_W + sigma_W * f(e_in) f(e_out)^T) + mu_b + sigma_b * f(e_out), f(e) = sign(e) sqrt(|e|), computed
    per member with a plain matrix product of the full noisy weight."""
    torch.manual_seed(0)
    plain = BatchedLinear(5, 4, init_generators([1, 2, 3]))
    layer = NoisyBatchedLinear(plain, 0.5)
    with torch.no_grad():
        layer.weight_sigma.uniform_(0.1, 0.9)
        layer.bias_sigma.uniform_(0.1, 0.9)
    x = torch.randn(3, 7, 5)
    torch.testing.assert_close(layer(x), plain(x), rtol=0, atol=0)  # no noise: the mean layer
    e_in, e_out = torch.randn(3, 5), torch.randn(3, 4)
    f = lambda e: e.sign() * e.abs().sqrt()  # noqa: E731
    layer.noise = (f(e_in).unsqueeze(1), f(e_out).unsqueeze(1))
    for m in range(3):
        w = layer.weight[m] + layer.weight_sigma[m] * torch.outer(f(e_in[m]), f(e_out[m]))
        b = layer.bias[m, 0] + layer.bias_sigma[m, 0] * f(e_out[m])
        torch.testing.assert_close(layer(x)[m], x[m] @ w + b, rtol=1e-6, atol=1e-6)


def test_sigma_starts_at_sigma0_over_root_fan_in_and_the_means_are_the_plain_actor_s():
    noisy = TD3(OBS, ACT, LOW, HIGH, [7], "cpu", hidden=(8, 8), noisy=True, noisy_sigma0=0.4)
    plain = TD3(OBS, ACT, LOW, HIGH, [7], "cpu", hidden=(8, 8))
    layers = noisy_layers(noisy.actor)
    assert len(layers) == 3 and not noisy_layers(noisy.critic)  # TD3: the actor only
    for layer, fan_in in zip(layers, (OBS, 8, 8)):
        for sigma in (layer.weight_sigma, layer.bias_sigma):
            torch.testing.assert_close(sigma.detach(), torch.full_like(sigma, 0.4 / fan_in ** 0.5))
    means = {k: p for k, p in noisy.actor.named_parameters() if "sigma" not in k}
    assert means.keys() == dict(plain.actor.named_parameters()).keys()
    for k, p in plain.actor.named_parameters():
        assert torch.equal(means[k], p), k
    for a, b in zip(plain.critic.parameters(), noisy.critic.parameters()):  # the rest of the model unchanged
        assert torch.equal(a, b)


def test_the_noise_is_the_stream_s_normals_in_layer_order():
    agents = SAC(OBS, ACT, LOW, HIGH, [3, 4], "cpu", policy_type="Gaussian", hidden_size=8, noisy=True)
    replay = AgentRNG([0, 0])
    replay.set_state(agents.explore_rng.get_state())
    draw_noise(agents.actor, agents.explore_rng)
    layers = noisy_layers(agents.actor)  # body (5->8, 8->8), mean head, log-std head
    sizes = [s for layer in layers for s in layer.weight.shape[1:]]
    e = replay.normal(sum(sizes))
    parts = e.split(sizes, dim=-1)
    for j, layer in enumerate(layers):
        f_in, f_out = layer.noise
        torch.testing.assert_close(f_in[:, 0], parts[2 * j].sign() * parts[2 * j].abs().sqrt(), rtol=0, atol=0)
        torch.testing.assert_close(f_out[:, 0], parts[2 * j + 1].sign() * parts[2 * j + 1].abs().sqrt(), rtol=0,
                                   atol=0)
    assert torch.equal(agents.explore_rng.counter, replay.counter)  # one call advanced the stream once


def test_the_noise_averages_to_the_mean_layer():
    """Over many draws the noisy layer's output averages to the mean layer's, with the variance the formula gives
    on one input (E[f(e)] = 0, E[f(e)^2] = E|e| = sqrt(2/pi), the draws independent):
    Var[y_j] = (2/pi) sum_i x_i^2 sigma_ij^2 + sqrt(2/pi) sigma_bj^2 (the cross term has the factor E[f(e_i)] = 0)."""
    layer = NoisyBatchedLinear(BatchedLinear(4, 3, init_generators([5])), 0.5)
    x = torch.tensor([[[1.0, -2.0, 0.5, 3.0]]])
    rng = AgentRNG([11])
    outs = []
    for _ in range(20000):
        draw_noise(layer, rng)
        outs.append(layer(x).detach())
    outs = torch.cat(outs, 1)[0]  # [draws, 3]
    with torch.no_grad():
        layer.noise = None
        mean = layer(x)[0, 0]
        s_w, s_b = layer.weight_sigma[0], layer.bias_sigma[0, 0]
        var = (x[0, 0, :, None] ** 2 * s_w ** 2).sum(0) * (2 / np.pi) + s_b ** 2 * np.sqrt(2 / np.pi)
    torch.testing.assert_close(outs.mean(0), mean, rtol=0, atol=float(4 * (var / 20000).sqrt().max()))
    torch.testing.assert_close(outs.var(0), var, rtol=0.05, atol=0)


def test_acting_is_noisy_evaluation_is_the_mean_and_updates_train_sigma():
    agents = TD3(OBS, ACT, LOW, HIGH, [0, 1], "cpu", hidden=(16, 16), noisy=True, expl_noise=0.0)
    obs = np.random.default_rng(0).normal(size=(2, OBS)).astype(np.float32)
    first, _ = agents.explore(obs)
    second, _ = agents.explore(obs)
    assert not np.allclose(first, second)  # new noise each step, no Gaussian action noise here
    mean = agents.act(torch.as_tensor(obs).unsqueeze(1))
    assert torch.equal(agents.act(torch.as_tensor(obs).unsqueeze(1)), mean)  # evaluation: no noise left behind
    assert all(layer.noise is None for layer in noisy_layers(agents.actor))
    g = torch.Generator().manual_seed(1)
    sigma = [layer.weight_sigma.detach().clone() for layer in noisy_layers(agents.actor)]
    for _ in range(2):  # the second trains the actor (TD3's delay)
        update(agents, random_batch(2, g, False))
    assert all(not torch.equal(s, layer.weight_sigma) for s, layer in zip(sigma, noisy_layers(agents.actor)))
    assert all(layer.noise is None for layer in noisy_layers(agents.actor_target))


def test_discrete_sac_s_critics_are_noisy_too():
    agents = DiscreteSAC(OBS, 3, None, None, [0], "cpu", hidden_size=8, noisy=True)
    assert noisy_layers(agents.actor) and noisy_layers(agents.critic) and noisy_layers(agents.critic_target)
    assert agents.update_noisy == (agents.actor, agents.critic, agents.critic_target)


@pytest.mark.parametrize("script, args, stem", [
    (sac_main, ["--policy", "SAC", "--policy_type", "Gaussian", "--env", "Pendulum-v1", "--num_steps", "900",
                "--start_steps", "300", "--hidden_size", "32"], "SAC_noisy_Pendulum-v1_0"),
    (sac_main, ["--policy", "SAC", "--env", "CartPole-v1", "--num_steps", "900", "--start_steps", "300",
                "--hidden_size", "32"], "SAC_noisy_CartPole-v1_0"),
    (DASE_main, ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--max_time_steps", "900", "--start_time_steps",
                 "300", "--hidden_sizes", "32", "32"], "DASE_TD3_noisy_Pendulum-v1_0"),
])
def test_a_noisy_run_is_named_recorded_and_resumes_exactly(tmp_path, script, args, stem):
    common = ["--eval_freq", "300", "--eval_episodes", "1", "--threads", "1", "--quiet", "--noisy"]
    resumes_exactly(script, [*args, *common], tmp_path, f"{stem}*.npy")
    algo = json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]
    assert algo["noisy"] is True and "noisy_sigma0" not in algo


@pytest.mark.parametrize("script, args, words", [
    (sac_main, ["--noisy_sigma0", "0.3"], "--noisy_sigma0 applies with --noisy"),
    (sac_main, ["--noisy", "--noisy_sigma0", "0"], "--noisy_sigma0 0"),
    (DASE_main, ["--noisy_sigma0", "0.3"], "--noisy_sigma0 applies with --noisy"),
])
def test_bad_noisy_input_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    refused_in_one_line(script, ["--policy", "SAC" if script is sac_main else "TD3", *args], tmp_path, capsys, words)
