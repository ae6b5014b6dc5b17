"""Intrinsic rewards (--curiosity forward|inverse, --rnd, --rnd_n_sample): the models' losses and bonuses against
a plain recomputation from their layers, the bonus in the update's target, the novelty-chosen action, the command
line (names, the per-evaluation file, exact resume, refusals)."""
import json

import numpy as np
import pytest
import torch
from runs import refused_in_one_line, resumes_exactly
from torch.nn import functional as F

import DASE_main
import sac_main
from algorithms import Batch
from algorithms.common.nets import init_generators
from algorithms.replay.intrinsic import RND, ActionCoding, Curiosity
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

OBS, ACT, B = 3, 2, 16
LOW, HIGH = -np.full(ACT, 2.0), np.full(ACT, 2.0)


def mlp(layers, x: torch.Tensor, m: int) -> torch.Tensor:
    """Member m's MLP by hand: x @ W + b with ReLU between layers."""
    for j, layer in enumerate(layers):
        x = x @ layer.weight[m] + layer.bias[m, 0]
        if j < len(layers) - 1:
            x = torch.relu(x)
    return x


def batch(m: int, discrete: bool = False, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    action = torch.randint(0, 3, (m, B, 1), generator=g).float() if discrete else \
        torch.rand(m, B, ACT, generator=g) * 4 - 2
    return Batch(torch.randn(m, B, OBS, generator=g), action, torch.randn(m, B, 1, generator=g),
                 torch.randn(m, B, OBS, generator=g), torch.ones(m, B, 1), torch.ones(m, B, dtype=torch.bool))


@pytest.mark.parametrize("mode", ["forward", "inverse"])
@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_curiosity_s_loss_and_bonus_are_icm_s(mode, discrete):
    coding = ActionCoding(None, None, 3) if discrete else ActionCoding(torch.tensor(LOW, dtype=torch.float32),
                                                                      torch.tensor(HIGH, dtype=torch.float32), None)
    width = 3 if discrete else ACT
    icm = Curiosity(OBS, width, init_generators([1, 2]), coding, mode, 0.7)
    b = batch(2, discrete)
    bonus, loss = icm.bonus_and_loss(b.obs, b.action, b.next_obs)
    for m in range(2):
        a = F.one_hot(b.action[m, :, 0].long(), 3).float() if discrete else b.action[m] / 2.0
        phi = mlp(icm.encoder.layers, b.obs[m], m)
        phi_next = mlp(icm.encoder.layers, b.next_obs[m], m)
        forward = 0.5 * ((mlp(icm.forward_model.layers, torch.cat([phi, a], -1), m) - phi_next) ** 2).sum(-1)
        guess = mlp(icm.inverse.layers, torch.cat([phi, phi_next], -1), m)
        inverse = F.cross_entropy(guess, b.action[m, :, 0].long(), reduction="none") if discrete \
            else 0.5 * ((guess - a) ** 2).sum(-1)
        torch.testing.assert_close(loss[m], 0.8 * inverse.mean() + 0.2 * forward.mean(), rtol=1e-5, atol=1e-6)
        expected = forward if mode == "forward" else inverse
        torch.testing.assert_close(bonus[m, :, 0], 0.7 * expected, rtol=1e-5, atol=1e-6)
    assert not bonus.requires_grad
    # the features learn from the inverse loss only: the encoder's gradient of the whole loss is 0.8 times that of
    # the inverse loss computed apart (the forward loss adds nothing to it), and the forward model gets one
    phi, phi_next = icm.encoder(b.obs), icm.encoder(b.next_obs)
    guess = icm.inverse(torch.cat([phi, phi_next], -1))
    inverse_loss = (-torch.log_softmax(guess, -1).gather(-1, b.action.long())).mean() if discrete \
        else (0.5 * (guess - coding(b.action)).pow(2).sum(-1)).mean()
    encoder = list(icm.encoder.parameters())
    whole = torch.autograd.grad(loss.sum() / 2, encoder + [icm.forward_model.layers[0].weight])
    apart = torch.autograd.grad(0.8 * inverse_loss, encoder)
    for w, a in zip(whole, apart):
        torch.testing.assert_close(w, a, rtol=1e-5, atol=1e-7)
    assert whole[-1].abs().sum() > 0


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
def test_rnd_s_bonus_is_the_predictor_s_error_on_the_fixed_target(discrete):
    coding = ActionCoding(None, None, 3) if discrete else ActionCoding(torch.tensor(LOW, dtype=torch.float32),
                                                                      torch.tensor(HIGH, dtype=torch.float32), None)
    width = 3 if discrete else ACT
    rnd = RND(OBS, width, init_generators([1, 2]), init_generators([11, 12]), coding, 2.5)
    b = batch(2, discrete)
    bonus, loss = rnd.bonus_and_loss(b.obs, b.action, b.next_obs)
    for m in range(2):
        a = F.one_hot(b.action[m, :, 0].long(), 3).float() if discrete else b.action[m] / 2.0
        x = torch.cat([b.obs[m], a], -1)
        error = ((mlp(rnd.predictor.layers, x, m) - mlp(rnd.target.layers, x, m)) ** 2).mean(-1)
        torch.testing.assert_close(bonus[m, :, 0], 2.5 * error, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(loss[m], error.mean(), rtol=1e-5, atol=1e-7)
    assert not any(p.requires_grad for p in rnd.target.parameters())


def learner(algo: dict, seeds=(0,)):
    settings = SharingSettings.of("TD3", 1, {})
    settings.check()
    return Learner("TD3", {"hidden": (16, 16), **algo}, list(seeds), 1, OBS, ACT, LOW, HIGH, buffer_size=200,
                   batch_size=B, updates_per_step=1, device=torch.device("cpu"), sharing=settings)


def test_the_update_adds_the_bonus_to_the_reward_and_trains_the_predictor():
    ours = learner({"rnd": True, "rnd_strength": 3.0})
    b = batch(1, seed=3)
    target_before = [p.clone() for p in ours.rnd.target.parameters()]
    predictor_before = [p.detach().clone() for p in ours.rnd.predictor.parameters()]
    with torch.no_grad():
        bonus = 3.0 * ours.rnd.novelty(b.obs, b.action)
    reward = b.reward.clone()
    ours.add_intrinsic(b)
    torch.testing.assert_close(b.reward, reward + bonus, rtol=0, atol=0)
    assert all(torch.equal(a, p) for a, p in zip(target_before, ours.rnd.target.parameters()))
    assert all(not torch.equal(a, p) for a, p in zip(predictor_before, ours.rnd.predictor.parameters()))
    with torch.no_grad():  # one step on the batch lowers its error
        assert float(ours.rnd.novelty(b.obs, b.action).mean()) < float(bonus.mean()) / 3.0


def test_rnd_n_sample_takes_the_most_novel_of_k_candidates():
    ours = learner({"rnd": True, "rnd_n_sample": 5}, seeds=(0, 1))
    obs = np.random.default_rng(0).normal(size=(2, OBS)).astype(np.float32)
    state = ours.agents.explore_rng.get_state()
    action, _ = ours.act(obs, False)
    ours.agents.explore_rng.set_state(state)
    candidates = np.stack([ours.agents.explore(obs)[0] for _ in range(5)], 1)  # [2, 5, A]: the same draws
    with torch.no_grad():
        novelty = ours.rnd.novelty(torch.as_tensor(obs).unsqueeze(1).expand(-1, 5, -1),
                                   torch.as_tensor(candidates)).squeeze(-1).numpy()
    np.testing.assert_array_equal(action, candidates[np.arange(2), novelty.argmax(1)])
    assert len({tuple(c) for c in candidates[0]}) == 5  # five different draws


@pytest.mark.parametrize("script, args, stem", [
    (sac_main, ["--policy", "SAC", "--policy_type", "Gaussian", "--env", "Pendulum-v1", "--num_steps", "900",
                "--start_steps", "300", "--hidden_size", "32", "--curiosity", "forward", "--rnd", "--rnd_n_sample",
                "3"], "SAC_icmforward_rndk3_Pendulum-v1_0"),
    (DASE_main, ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--max_time_steps", "900", "--start_time_steps",
                 "300", "--hidden_sizes", "32", "32", "--curiosity", "inverse", "--curiosity_strength", "0.5"],
     "DASE_TD3_icminverse0.5_Pendulum-v1_0"),
])
def test_an_intrinsic_run_writes_its_bonus_and_resumes_exactly(tmp_path, script, args, stem):
    common = ["--eval_freq", "300", "--eval_episodes", "1", "--threads", "1", "--quiet"]
    files = resumes_exactly(script, [*args, *common], tmp_path, f"{stem}*.npy")
    assert any(name.endswith("_intrinsic.npy") for name in files)
    intrinsic = np.load(tmp_path / "whole" / [n for n in files if n.endswith("_intrinsic.npy")][0])
    assert intrinsic.shape == (4, 2) and np.isnan(intrinsic[0]).all() and (intrinsic[2:] > 0).all()
    algo = json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]
    assert algo.get("curiosity") in ("forward", "inverse")


@pytest.mark.parametrize("script, args, words", [
    (sac_main, ["--policy", "SAC", "--rnd_n_sample", "4"], "--rnd_strength/--rnd_n_sample apply with --rnd"),
    (sac_main, ["--policy", "SAC", "--curiosity_strength", "2"], "--curiosity_strength applies with --curiosity"),
    (sac_main, ["--policy", "SAC", "--curiosity", "sideways"], "--curiosity"),
    (DASE_main, ["--policy", "TD3", "--rnd", "--n_step", "3"], "--n_step 3: intrinsic rewards"),
    (sac_main, ["--policy", "SAC", "--rnd", "--seq_encoder", "gru"], "--seq_encoder: intrinsic rewards"),
])
def test_bad_intrinsic_input_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    refused_in_one_line(script, args, tmp_path, capsys, words)


@pytest.mark.parametrize("settings, variant", [
    ({"action_noise": [1e-5, 0.1]}, "noise1e-05-0.1"),
    ({"curiosity": "forward", "curiosity_strength": 1e-5}, "icmforward1e-05"),
    ({"normalize_obs": True, "rnd": True, "rnd_strength": 10.0, "rnd_n_sample": 4}, "norm_rnd10k4"),
    ({"noisy": True, "noisy_sigma0": 0.3, "ensemble_q": 5, "ensemble_q_sample": 2}, "q5m2_noisy0.3"),
])
def test_the_new_variant_tokens_name_files_that_parse_back(settings, variant):
    """A stem with these variants (numbers as f"{x:g}" writes them, exponents included) parses back into its
    algorithm, variant and environment, so the plotting and comparison tools find its curves."""
    from utils.run.names import CURVE_NAME, variant_of

    assert variant_of(settings, "DASE_TD3") == variant
    m = CURVE_NAME.match(f"DASE_TD3_{variant}_Hopper-v5_0_Agent_1")
    assert m and (m.group("alg"), m.group("variant"), m.group("env")) == ("TD3", variant, "Hopper-v5")
