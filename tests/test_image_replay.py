"""Replay learners on images (utils/run/replay/images.py, algorithms/replay/image_agents.py): the buffer rebuilds
every stored observation from frames kept once, the augmentation and the siamese losses equal plain computations,
the encoder learns from the critic's and the auxiliary loss, runs resume exactly and bad input is one line."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import DASE_main
import sac_main
from algorithms.common.nets import AgentRNG, init_generators
from algorithms.replay.image_agents import PAD, ImageSAC, ImageTD3, atc_loss, byol_loss, random_shift
from tests.runs import refused_in_one_line, resumes_exactly, run
from utils.run.replay.images import ImageReplayBuffer


def play(buffer: ImageReplayBuffer, steps: int, rng: np.random.Generator, stacked: bool, lengths=(1, 2, 3, 7),
         state=None):
    """Episodes of random lengths for every member, their frames random, from ``state`` (the observations and
    steps left of the last call; None: new episodes); returns, per stored row (group, row), the observation and next
    observation added there (the reference a plain buffer would hold), and the state to go on from."""
    g, n = buffer.groups, buffer.writers
    m, (c, h, w) = g * n, buffer.obs_shape
    ref = {}

    def fresh():
        return rng.integers(0, 256, (h, w), dtype=np.uint8) if stacked else rng.integers(0, 256, (c, h, w),
                                                                                          dtype=np.uint8)
    def reset():
        f = fresh()
        return np.stack([f] * c) if stacked else f

    obs, left = state if state is not None else (np.stack([reset() for _ in range(m)]), rng.choice(lengths, m))
    for _ in range(steps):
        nxt = np.stack([np.concatenate([o[1:], fresh()[None]]) if stacked else fresh() for o in obs])
        ended = (left == 1)
        terminated = ended & (rng.random(m) < 0.5)
        rows = [(buffer.ptr + i) % buffer.capacity for i in range(n)]
        buffer.add(obs, rng.normal(size=(m, 1)), rng.normal(size=m), nxt,
                   terminated, None, ended)
        for k in range(m):
            ref[(k // n, rows[k % n])] = (obs[k].copy(), nxt[k].copy())
        left = np.where(ended, rng.choice(lengths, m), left - 1)
        obs = np.stack([reset() if e else x for e, x in zip(ended, nxt)])
    return ref, (obs, left)


def check_all(buffer: ImageReplayBuffer, ref) -> int:
    """Every sampleable row's rebuilt observations equal the added ones; the number of rows checked."""
    start, count = int(buffer.start), int(buffer.count)
    idx = (start + torch.arange(count)) % buffer.capacity
    for grp in range(buffer.groups):
        g = torch.full((1, 1), grp)
        obs, nxt = buffer.observations(g, idx.view(1, -1))
        for j, row in enumerate(idx.tolist()):
            np.testing.assert_array_equal(obs[0, j].numpy(), ref[(grp, row)][0])
            np.testing.assert_array_equal(nxt[0, j].numpy(), ref[(grp, row)][1])
    return count


@pytest.mark.parametrize("stacked", [True, False])
def test_the_buffer_rebuilds_every_observation_from_frames_kept_once(stacked):
    rng = np.random.default_rng(0)
    buffer = ImageReplayBuffer((3, 5, 4), stacked, 1, 40, 2, "cpu", groups=2, finals=2)
    ref, state = play(buffer, 13, rng, stacked)
    assert check_all(buffer, ref) == 26  # not yet full: every row
    ref.update(play(buffer, 57, rng, stacked, state=state)[0])  # wraps around, short episodes: the finals' ring grows
    assert buffer.size == 40 and check_all(buffer, ref) == 40 - 2 * buffer.depth
    assert buffer.finals.shape[1] > 2
    unit = 5 * 4 if stacked else 3 * 5 * 4
    assert buffer.units.shape == (2, 40, *((5, 4) if stacked else (3, 5, 4))) and buffer.units[0, 0].numel() == unit
    # sampling draws only the rows rebuilt above
    batch = buffer.sample(64, AgentRNG([1, 2, 3, 4]))
    assert batch.obs.shape == (4, 64, 3, 5, 4) and batch.obs.dtype == torch.uint8
    stored = {(g, ref[k][0].tobytes()) for k in ref for g in [k[0]]}
    for mem in range(4):
        for b in range(64):
            assert (mem // 2, batch.obs[mem, b].numpy().tobytes()) in stored


def test_a_restored_buffer_goes_on_as_the_original():
    rng = np.random.default_rng(1)
    a = ImageReplayBuffer((3, 4, 4), True, 1, 30, 1, "cpu", groups=2, finals=1)
    ref, going = play(a, 25, rng, True)
    b = ImageReplayBuffer((3, 4, 4), True, 1, 30, 1, "cpu", groups=2, finals=1)
    for grp in range(2):  # one group at a time, as a checkpoint keeps each seed's own
        b.load_state_dict(a.state_dict(slice(grp, grp + 1)), slice(grp, grp + 1))
    state = rng.bit_generator.state
    ref.update(play(a, 20, rng, True, state=going)[0])
    rng.bit_generator.state = state
    play(b, 20, rng, True, state=going)
    check_all(b, ref)
    for k in ("units", "age", "action", "ended"):
        torch.testing.assert_close(getattr(a, k), getattr(b, k), rtol=0, atol=0)


def test_observations_that_are_not_frame_stacks_are_refused():
    buffer = ImageReplayBuffer((3, 4, 4), True, 1, 20, 1, "cpu")
    obs = np.zeros((1, 3, 4, 4), dtype=np.uint8)
    nxt = np.random.default_rng(0).integers(0, 255, (1, 3, 4, 4), dtype=np.uint8)  # not obs moved on by one
    with pytest.raises(ValueError, match="not frame stacks"):
        buffer.add(obs, np.zeros((1, 1)), np.zeros(1), nxt, np.zeros(1), None, np.zeros(1))
    assert buffer.size == 0


def test_random_shift_is_a_crop_of_the_edge_padded_image():
    x = torch.randint(0, 256, (2, 3, 2, 6, 5), dtype=torch.uint8)
    shifts = torch.randint(0, 2 * PAD + 1, (2, 3, 2))
    out = random_shift(x, shifts)
    for m in range(2):
        for b in range(3):
            padded = np.pad(x[m, b].numpy(), ((0, 0), (PAD, PAD), (PAD, PAD)), mode="edge")
            dy, dx = shifts[m, b].tolist()
            np.testing.assert_array_equal(out[m, b].numpy(), padded[:, dy:dy + 6, dx:dx + 5])


def test_the_siamese_losses_equal_their_plain_forms():
    torch.manual_seed(0)
    anchor, positive = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    w = torch.randn(2, 4, 4)
    for m in range(2):  # ATC: row i's cross-entropy against the batch, the positive at i
        logits = anchor[m] @ w[m] @ positive[m].T
        torch.testing.assert_close(atc_loss(anchor, positive, w)[m], F.cross_entropy(logits, torch.arange(5)))
    p, t = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    plain = [np.mean([2 - 2 * np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b)
                      for a, b in zip(p[m].numpy(), t[m].numpy())]) for m in range(2)]
    np.testing.assert_allclose(byol_loss(p, t).numpy(), plain, rtol=1e-5)


def batch_for(agents, rng, b=6):
    from algorithms.replay.base import Batch
    m = agents.members
    obs = torch.as_tensor(rng.integers(0, 256, (m, b, 3, 40, 40), dtype=np.uint8))
    nxt = torch.cat([obs[:, :, 1:], torch.as_tensor(rng.integers(0, 256, (m, b, 1, 40, 40), dtype=np.uint8))], 2)
    action = torch.as_tensor(rng.uniform(-2, 2, (m, b, 1)), dtype=torch.float32)
    return Batch(obs, action, torch.ones(m, b, 1), nxt, torch.ones(m, b, 1), torch.ones(m, b, dtype=torch.bool))


@pytest.mark.parametrize("cls, kw", [(ImageSAC, {}), (ImageSAC, {"siamese": "atc"}), (ImageSAC, {"siamese": "byol"}),
                                     (ImageTD3, {"siamese": "byol", "siamese_use_q": True})])
def test_members_train_alone_as_batched_and_the_critic_trains_the_encoder(cls, kw):
    """Two members batched take the same step as each alone (a plain loop over members), the encoder moves (the
    critic's loss, and the siamese loss, reach it) and the target encoder follows it."""
    rng = np.random.default_rng(0)
    low, high = np.array([-2.0]), np.array([2.0])
    both = cls((3, 40, 40), 1, low, high, [3, 4], image_features=8, hidden_size=16, **kw) if cls is ImageSAC else \
        cls((3, 40, 40), 1, low, high, [3, 4], image_features=8, hidden=(16, 16), **kw)
    alone = [cls((3, 40, 40), 1, low, high, [s], image_features=8,
                 **({"hidden_size": 16} if cls is ImageSAC else {"hidden": (16, 16)}), **kw) for s in (3, 4)]
    before = both.encoder.weights[0].detach().clone()
    batch = batch_for(both, rng)
    from algorithms.replay.base import Batch
    for _ in range(2):
        both.update(batch)
        for i, a in enumerate(alone):
            part = Batch(*(getattr(batch, k)[i:i + 1] for k in ("obs", "action", "reward", "next_obs", "not_done",
                                                                  "own")))
            a.update(part)
    for i, a in enumerate(alone):
        for name, net in both.networks.items():
            for (k, p), q in zip(net.state_dict().items(), a.networks[name].state_dict().values()):
                # ATC's heads: Adam turns float noise in the bilinear form's near-zero gradients (batched vs alone)
                # into steps of up to lr / 6 on a few of its 128 x 128 entries (measured: 5e-5 at most)
                atol = 1e-4 if name == "siamese" else 1e-5
                torch.testing.assert_close(p[i:i + 1] if p.dim() and p.shape[0] == 2 else p, q, atol=atol, rtol=1e-4,
                                           msg=f"{name}.{k}")
    assert not torch.equal(before, both.encoder.weights[0])
    assert not torch.equal(both.encoder_target.weights[0], before)  # it moved towards the encoder


def test_the_siamese_loss_shapes_the_encoder():
    rng = np.random.default_rng(0)
    args = ((3, 40, 40), 1, np.array([-2.0]), np.array([2.0]), [3])
    plain, atc = ImageSAC(*args, image_features=8, hidden_size=16), ImageSAC(*args, image_features=8, hidden_size=16,
                                                                            siamese="atc")
    torch.testing.assert_close(plain.encoder.weights[0], atc.encoder.weights[0])  # the same start
    batch = batch_for(plain, rng)
    info = atc.update(batch)
    plain.update(batch)
    assert info["siamese_loss"].shape == (1,) and torch.isfinite(info["siamese_loss"]).all()
    assert not torch.allclose(plain.encoder.weights[0], atc.encoder.weights[0])


COMMON = ["--env", "PixelPendulum-v1", "--eval_freq", "40", "--eval_episodes", "1", "--batch_size", "8",
          "--buffer_size", "500", "--image_features", "8", "--threads", "1", "--quiet"]


@pytest.mark.parametrize("script, args, stem", [
    (sac_main, ["--policy", "SAC", "--num_steps", "120", "--start_steps", "40", "--hidden_size", "16", "--siamese",
                "atc"], "SAC_atc_PixelPendulum-v1_0"),
    (DASE_main, ["--policy", "DASE_TD3", "--max_time_steps", "120", "--start_time_steps", "40", "--hidden_sizes",
                 "16", "16"], "DASE_TD3_PixelPendulum-v1_0"),
])
def test_a_pixel_run_is_recorded_and_resumes_exactly(tmp_path, script, args, stem):
    files = resumes_exactly(script, [*args, *COMMON], tmp_path, f"{stem}*.npy", stop_at=80, every=40)
    algo = json.loads((tmp_path / "whole" / f"{stem}.json").read_text())["config"]["algo"]
    assert algo["image_features"] == 8
    if "atc" in stem:
        assert algo["siamese"] == "atc" and any(f.endswith("_siamese.npy") for f in files)
        loss = np.load(tmp_path / "whole" / f"{stem}_siamese.npy")
        assert loss.shape == (4,) and np.isnan(loss[0]) and np.isfinite(loss[2:]).all()


def test_seeds_batched_learn_as_seeds_alone(tmp_path):
    args = ["--policy", "SAC", "--num_steps", "80", "--start_steps", "40", "--hidden_size", "16", "--siamese", "byol",
            *COMMON]
    assert run(sac_main, *args, "--seeds", "0", "1", "--results_dir", str(tmp_path / "both")) == 0
    for s in (0, 1):
        assert run(sac_main, *args, "--seed", str(s), "--results_dir", str(tmp_path / "alone")) == 0
        for suffix in ("", "_siamese"):
            name = f"SAC_byol_PixelPendulum-v1_{s}{suffix}.npy"
            np.testing.assert_array_equal(np.load(tmp_path / "both" / name), np.load(tmp_path / "alone" / name))


@pytest.mark.parametrize("script, args, words", [
    (sac_main, ["--policy", "SAC", "--env", "Pendulum-v1", "--siamese", "atc"], "--siamese: --env Pendulum-v1 has no "
     "image observations"),
    (sac_main, ["--policy", "SAC", "--env", "PixelPendulum-v1", "--siamese_use_q"], "--siamese_use_q applies with "
     "--siamese"),
    (sac_main, ["--policy", "SAC", "--env", "PixelPendulum-v1", "--n_step", "3"], "image replay samples single steps"),
    (DASE_main, ["--policy", "DPD_TD3", "--env", "PixelPendulum-v1"], "DPD_TD3 is not implemented on images"),
    (sac_main, ["--policy", "SAC", "--env", "PixelPendulum-v1", "--seq_encoder", "gru"], "--seq_encoder is not "
     "implemented on images"),
    (sac_main, ["--policy", "SAC", "--env", "PongNoFrameskip-v4"], "Atari games are played by A2C"),
])
def test_bad_image_input_is_one_line_exit_2(tmp_path, capsys, script, args, words):
    refused_in_one_line(script, args, tmp_path, capsys, words)
