"""--normalize_obs (ASAC's use_normalization): every member's running mean and variance against numpy over the same
stream, what the learner observes and what its networks read, the checkpoint round trip, exact resume, refusals."""
import json

import numpy as np
import pytest
import torch
from runs import refused_in_one_line, resumes_exactly

import DASE_main
import sac_main
from algorithms.common.normalizer import ObsNormalizer
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

OBS, ACT = 3, 2


def expected(seen: np.ndarray, x: np.ndarray) -> np.ndarray:
    """numpy's normalisation of x by the rows seen so far (population variance)."""
    return np.clip((x - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8), -5, 5)


def test_the_statistics_are_numpy_s_over_the_same_stream():
    rng = np.random.default_rng(0)
    members = 3
    scale = np.array([[1.0, 10.0, 0.1], [5.0, 0.5, 2.0], [100.0, 1.0, 1.0]])[:, None, :]
    norm = ObsNormalizer(members, OBS)
    seen = [np.zeros((0, OBS)) for _ in range(members)]
    for step in range(40):
        e = 1 if step % 3 else 4  # one observation per member, or several (a block of environments)
        x = rng.normal(3.0, 1.0, (members, e, OBS)) * scale
        norm.observe(torch.as_tensor(x if e > 1 else x[:, 0], dtype=torch.float32))
        x32 = x.astype(np.float32).astype(np.float64)  # what the float32 observations hold
        for m in range(members):
            seen[m] = np.concatenate([seen[m], x32[m]])
    probe = rng.normal(3.0, 30.0, (members, 5, OBS)).astype(np.float32)
    out = norm(torch.as_tensor(probe)).numpy()
    for m in range(members):
        assert norm.count[m].item() == len(seen[m])
        np.testing.assert_allclose(norm.mean[m].numpy(), seen[m].mean(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose((norm.m2[m] / norm.count[m]).numpy(), seen[m].var(0), rtol=1e-10)
        np.testing.assert_allclose(out[m], expected(seen[m], probe[m].astype(np.float64)), rtol=1e-6, atol=1e-6)
    assert out.dtype == np.float32 and np.abs(out).max() <= 5  # the probe's wide draws hit the clip


def learner(seeds=(0,), normalize=True):
    settings = SharingSettings.of("DASE_TD3", 2, {})
    settings.check()
    member_seeds = [s + 100 * i for s in seeds for i in range(2)]
    return Learner("TD3", {"hidden": (16, 16), "normalize_obs": normalize}, member_seeds, 2, OBS, ACT,
                   -np.ones(ACT), np.ones(ACT), buffer_size=200, batch_size=8, updates_per_step=1,
                   device=torch.device("cpu"), sharing=settings)


def test_the_learner_observes_every_step_and_its_networks_read_normalised_states():
    ours, plain = learner(), learner(normalize=False)
    rng = np.random.default_rng(1)
    stream = rng.normal(0.0, 1.0, (12, 2, OBS)) * np.array([1.0, 50.0, 0.01]) + 7
    for t, obs in enumerate(stream):
        warmup = t < 5
        actions, _ = ours.act(obs.astype(np.float32), warmup)
        seen = stream[: t + 1].astype(np.float32).astype(np.float64)
        if warmup:
            assert actions is None  # random actions, but the observation still counted
        else:  # the plain agents (same seeds, same stream) acting on numpy's normalised state
            normalised = np.stack([expected(seen[:, m], seen[t, m]) for m in range(2)]).astype(np.float32)
            theirs, _ = plain.agents.explore(normalised)
            np.testing.assert_allclose(actions, theirs, rtol=1e-5, atol=1e-6)
        ours.store(obs, rng.uniform(-1, 1, (2, ACT)), rng.normal(size=2), obs + 1, np.zeros(2), None)
    assert ours.normalizer.count.tolist() == [12, 12]
    assert float(ours.buffer.obs.abs().max()) > 40  # the buffer keeps raw observations (normalised ones are < 5)
    # evaluation plays the statistics frozen at the snapshot
    policy = ours.snapshot(12)
    before = policy(stream[-1][:, None].astype(np.float32))
    ours.act((stream[-1] * 3).astype(np.float32), True)
    np.testing.assert_array_equal(policy(stream[-1][:, None].astype(np.float32)), before)


def test_the_statistics_round_trip_through_a_checkpoint_of_each_seed():
    ours = learner(seeds=(0, 1))
    rng = np.random.default_rng(2)
    for _ in range(6):
        ours.act(rng.normal(2.0, 3.0, (4, OBS)).astype(np.float32), True)
    states = [ours.state_dict(0), ours.state_dict(1)]
    fresh = learner(seeds=(0, 1))
    fresh.load_state_dicts(states)
    for a, b in zip(ours.normalizer.parameters(), fresh.normalizer.parameters()):
        assert torch.equal(a, b)
    alone = learner(seeds=(1,))  # one seed's slice is what a run of that seed alone holds
    alone.load_state_dicts([states[1]])
    assert torch.equal(alone.normalizer.mean, ours.normalizer.mean[2:])


def test_a_normalised_run_is_named_recorded_and_resumes_exactly(tmp_path):
    args = ["--policy", "SAC", "--policy_type", "Gaussian", "--env", "Pendulum-v1", "--num_steps", "900",
            "--start_steps", "300", "--hidden_size", "32", "--eval_freq", "300", "--eval_episodes", "1", "--threads",
            "1", "--quiet", "--normalize_obs"]
    stem = "SAC_norm_Pendulum-v1_0"
    resumes_exactly(sac_main, args, tmp_path, f"{stem}*.npy")
    assert json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]["normalize_obs"] is True


@pytest.mark.parametrize("script, args, words", [
    (sac_main, ["--policy", "SAC", "--normalize_obs", "--seq_encoder", "gru"],
     "--seq_encoder: --normalize_obs is not implemented for sequence replay"),
    (DASE_main, ["--policy", "DPD_TD3", "--normalize_obs"], "--normalize_obs: DPD_TD3's agents read each other's"),
    (DASE_main, ["--policy", "DIFF_TD3", "--normalize_obs"], "--normalize_obs: DIFF_TD3's agents read each other's"),
])
def test_bad_normalisation_input_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    refused_in_one_line(script, args, tmp_path, capsys, words)
