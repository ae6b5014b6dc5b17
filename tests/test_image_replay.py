"""Replay learners on images (utils/run/replay/images.py, algorithms/replay/image_agents.py): the buffer rebuilds
every stored observation from frames kept once, the augmentation and the siamese losses equal plain computations,
the encoder learns from the critic's and the auxiliary loss, runs resume exactly and bad input is one line."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import ac_main
import DASE_main
import sac_main
from algorithms.common.nets import AgentRNG
from algorithms.common.observations import Part
from algorithms.replay.image_agents import PAD, ImageSAC, ImageTD3, atc_loss, byol_loss, random_shift
from tests.runs import refused_in_one_line, resumes_exactly, run
from utils.run.replay.images import ImageReplayBuffer


def layout(kind: str) -> tuple:
    """The parts of the buffers tested: one frame stack, one RGB-like image (not a stack), or several sensors
    packed in one vector (a stack, an image of another resolution, a vector)."""
    if kind == "stack":
        return (Part("pixels", (3, 5, 4), True),)
    if kind == "image":
        return (Part("pixels", (3, 5, 4), False),)
    return (Part("camera", (3, 5, 4), True, 0), Part("vector", (2,), False, 60), Part("overview", (2, 3, 3), False, 62))


def episodes(parts, rng: np.random.Generator):
    """Random episodes' makers for observations of ``parts``: a reset's observation {part: array} (a stack its first
    frame repeated), the next observation (a stack moved on by one random frame), and observations as the
    environments pack them."""
    def fresh(p):
        if not p.image:
            return rng.normal(size=p.shape).astype(np.float32)
        return rng.integers(0, 256, p.shape[1:] if p.stacked else p.shape, dtype=np.uint8)

    def reset():
        return {p.key: np.stack([fresh(p)] * p.shape[0]) if p.stacked else fresh(p) for p in parts}

    def moved(o):
        return {p.key: np.concatenate([o[p.key][1:], fresh(p)[None]]) if p.stacked else fresh(p) for p in parts}

    def packed(obs):
        if parts[0].start is None:
            return np.stack([o[parts[0].key] for o in obs])
        return np.stack([np.concatenate([o[p.key].astype(np.float32).ravel() for p in parts]) for o in obs])
    return reset, moved, packed


def play(buffer: ImageReplayBuffer, steps: int, rng: np.random.Generator, lengths=(1, 2, 3, 7), state=None):
    """Episodes of random lengths for every member, their frames and vectors random, from ``state`` (the
    observations and steps left of the last call; None: new episodes); returns, per stored row (group, row), the
    observation and next observation added there as {part: array} (what a plain buffer would hold), and the state
    to go on from."""
    g, n = buffer.groups, buffer.writers
    m, parts = g * n, buffer.parts

    reset, moved, packed = episodes(parts, rng)

    obs, left = state if state is not None else ([reset() for _ in range(m)], rng.choice(lengths, m))
    ref = {}
    for _ in range(steps):
        nxt = [moved(o) for o in obs]
        ended = (left == 1)
        terminated = ended & (rng.random(m) < 0.5)
        rows = [(buffer.ptr + i) % buffer.capacity for i in range(n)]
        buffer.add(packed(obs), rng.normal(size=(m, 1)), rng.normal(size=m), packed(nxt), terminated, None, ended)
        for k in range(m):
            ref[(k // n, rows[k % n])] = (obs[k], nxt[k])
        left = np.where(ended, rng.choice(lengths, m), left - 1)
        obs = [reset() if e else x for e, x in zip(ended, nxt)]
    return ref, (obs, left)


def check_all(buffer: ImageReplayBuffer, ref) -> int:
    """Every sampleable row's rebuilt observations equal the added ones; the number of rows checked."""
    start, count = int(buffer.start), int(buffer.count)
    idx = (start + torch.arange(count)) % buffer.capacity
    for grp in range(buffer.groups):
        obs, nxt = buffer.observations(torch.full((1, 1), grp), idx.view(1, -1))
        for j, row in enumerate(idx.tolist()):
            for p in buffer.parts:
                np.testing.assert_array_equal(obs[p.key][0, j].numpy(), ref[(grp, row)][0][p.key])
                np.testing.assert_array_equal(nxt[p.key][0, j].numpy(), ref[(grp, row)][1][p.key])
    return count


@pytest.mark.parametrize("kind", ["stack", "image", "sensors"])
def test_the_buffer_rebuilds_every_observation_from_frames_kept_once(kind):
    rng = np.random.default_rng(0)
    buffer = ImageReplayBuffer(layout(kind), 1, 40, 2, "cpu", groups=2, finals=2)
    ref, state = play(buffer, 13, rng)
    assert check_all(buffer, ref) == 26  # not yet full: every row
    ref.update(play(buffer, 57, rng, state=state)[0])  # wraps around, short episodes: the finals' ring grows
    assert buffer.size == 40 and check_all(buffer, ref) == 40 - 2 * buffer.depth
    assert buffer.final_step.shape[1] > 2
    first = buffer.frames[buffer.parts[0].key].units
    assert first.shape == ((2, 40, 5, 4) if kind != "image" else (2, 40, 3, 5, 4)) and first.dtype == torch.uint8
    # sampling draws only the rows rebuilt above
    batch = buffer.sample(64, AgentRNG([1, 2, 3, 4]))
    key = buffer.parts[0].key
    assert batch.obs[key].shape == (4, 64, 3, 5, 4) and batch.obs[key].dtype == torch.uint8
    stored = {(k[0], ref[k][0][key].tobytes()) for k in ref}
    for mem in range(4):
        for b in range(64):
            assert (mem // 2, batch.obs[key][mem, b].numpy().tobytes()) in stored


def test_a_restored_buffer_goes_on_as_the_original():
    rng = np.random.default_rng(1)
    a = ImageReplayBuffer(layout("sensors"), 1, 30, 1, "cpu", groups=2, finals=1)
    ref, going = play(a, 25, rng)
    b = ImageReplayBuffer(layout("sensors"), 1, 30, 1, "cpu", groups=2, finals=1)
    for grp in range(2):  # one group at a time, as a checkpoint keeps each seed's own
        b.load_state_dict(a.state_dict(slice(grp, grp + 1)), slice(grp, grp + 1))
    state = rng.bit_generator.state
    ref.update(play(a, 20, rng, state=going)[0])
    rng.bit_generator.state = state
    play(b, 20, rng, state=going)
    check_all(b, ref)
    for k in ("age", "action", "ended", "obs"):
        torch.testing.assert_close(getattr(a, k), getattr(b, k), rtol=0, atol=0)
    for key in a.frames:
        torch.testing.assert_close(a.frames[key].units, b.frames[key].units, rtol=0, atol=0)


def play_blocks(buffer: ImageReplayBuffer, blocks: int, rng: np.random.Generator, actors: int = 3, state=None):
    """A distributed learner's replay: ``actors`` actors, each with its own episodes (of 1-9 steps) for every member,
    send blocks of 1-5 steps in turn at random; a block's last step is stored as an episode cut and its first as a
    start (the rows before it are another actor's). Returns the observations added per (group, row), as ``play``,
    and the actors' state."""
    g, n = buffer.groups, buffer.writers
    m, parts = g * n, buffer.parts

    reset, moved, packed = episodes(parts, rng)

    if state is None:
        state = [([reset() for _ in range(m)], rng.integers(1, 10, m)) for _ in range(actors)]
    ref = {}
    for _ in range(blocks):
        a = int(rng.integers(len(state)))
        obs, left = state[a]
        length = int(rng.integers(1, 6))
        for s in range(length):
            nxt = [moved(o) for o in obs]
            ended = left == 1
            terminated = ended & (rng.random(m) < 0.5)
            cut = ended | (s == length - 1)
            rows = [(buffer.ptr + i) % buffer.capacity for i in range(n)]
            buffer.add(packed(obs), rng.normal(size=(m, 1)), rng.normal(size=m), packed(nxt), terminated, None, cut,
                       start=np.full(m, s == 0))
            for k in range(m):
                ref[(k // n, rows[k % n])] = (obs[k], nxt[k])
            left = np.where(ended, rng.integers(1, 10, m), left - 1)
            obs = [reset() if e else x for e, x in zip(ended, nxt)]
        state[a] = (obs, left)
    return ref, state


@pytest.mark.parametrize("kind", ["stack", "image", "sensors"])
def test_blocks_of_several_actors_rebuild_every_observation_from_their_starts(kind):
    """A distributed run's replay (utils.distributed): a block starts mid-episode after another actor's rows, so its
    stacks' older frames come from the start's head, not from the rows before it."""
    rng = np.random.default_rng(3)
    buffer = ImageReplayBuffer(layout(kind), 1, 60, 2, "cpu", groups=2, finals=2, heads=2)
    ref, state = play_blocks(buffer, 3, rng)  # at most 15 steps: not yet full
    assert check_all(buffer, ref) == buffer.size
    ref.update(play_blocks(buffer, 40, rng, state=state)[0])  # wraps around: the rings grow
    assert buffer.size == 60 and check_all(buffer, ref) == 60 - 2 * buffer.depth
    if kind != "image":  # frame stacks: starts kept heads, more than the first ring held
        assert buffer.head_step.shape[1] > 2 and (buffer.head_step >= 0).sum() > 2
    else:  # single images have no history: nothing kept for a start
        assert not buffer.heads_made
    # restored group by group, the buffer goes on as the original
    twin = ImageReplayBuffer(layout(kind), 1, 60, 2, "cpu", groups=2, finals=2, heads=2)
    for grp in range(2):
        twin.load_state_dict(buffer.state_dict(slice(grp, grp + 1)), slice(grp, grp + 1))
    keep = rng.bit_generator.state
    ref.update(play_blocks(buffer, 15, rng, state=list(state))[0])
    rng.bit_generator.state = keep
    play_blocks(twin, 15, rng, state=list(state))
    check_all(twin, ref)


def test_without_starts_the_buffer_keeps_no_heads_and_reads_as_before():
    """Single-machine runs never store a start: nothing more is allocated or read (their bytes stay the old ones)."""
    rng = np.random.default_rng(4)
    buffer = ImageReplayBuffer(layout("stack"), 1, 40, 2, "cpu", groups=1)
    ref, _ = play(buffer, 30, rng)
    assert not buffer.heads_made and buffer.frames["pixels"].heads is None
    assert "heads" not in buffer.state_dict()["images"]
    check_all(buffer, ref)


def test_observations_that_are_not_frame_stacks_are_refused():
    buffer = ImageReplayBuffer(layout("stack"), 1, 20, 1, "cpu")
    obs = np.zeros((1, 3, 5, 4), dtype=np.uint8)
    nxt = np.random.default_rng(0).integers(0, 255, (1, 3, 5, 4), dtype=np.uint8)  # not obs moved on by one
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
    return Batch({"pixels": obs}, action, torch.ones(m, b, 1), {"pixels": nxt}, torch.ones(m, b, 1),
                 torch.ones(m, b, dtype=torch.bool))


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
    before = both.encoder.cnns["pixels"].weights[0].detach().clone()
    batch = batch_for(both, rng)
    from algorithms.replay.base import Batch
    for _ in range(2):
        both.update(batch)
        for i, a in enumerate(alone):
            take = lambda x: {k: v[i:i + 1] for k, v in x.items()} if isinstance(x, dict) else x[i:i + 1]  # noqa
            part = Batch(*(take(getattr(batch, k)) for k in ("obs", "action", "reward", "next_obs", "not_done", "own")))
            a.update(part)
    for i, a in enumerate(alone):
        for name, net in both.networks.items():
            for (k, p), q in zip(net.state_dict().items(), a.networks[name].state_dict().values()):
                # ATC's heads: Adam turns float noise in the bilinear form's near-zero gradients (batched vs alone)
                # into steps of up to lr / 6 on a few of its 128 x 128 entries (measured: 5e-5 at most)
                atol = 1e-4 if name == "siamese" else 1e-5
                torch.testing.assert_close(p[i:i + 1] if p.dim() and p.shape[0] == 2 else p, q, atol=atol, rtol=1e-4,
                                           msg=f"{name}.{k}")
    assert not torch.equal(before, both.encoder.cnns["pixels"].weights[0])
    features = both.encoder(batch.obs).detach()  # SAC-AE's head: LayerNorm, then tanh
    assert features.abs().max() < 1 and features.std() > 0.1
    assert not torch.equal(both.encoder_target.cnns["pixels"].weights[0], before)  # it moved towards the encoder


def test_the_siamese_loss_shapes_the_encoder():
    rng = np.random.default_rng(0)
    args = ((3, 40, 40), 1, np.array([-2.0]), np.array([2.0]), [3])
    plain, atc = ImageSAC(*args, image_features=8, hidden_size=16), ImageSAC(*args, image_features=8, hidden_size=16,
                                                                            siamese="atc")
    first = lambda agents: agents.encoder.cnns["pixels"].weights[0]  # noqa: E731
    torch.testing.assert_close(first(plain), first(atc))  # the same start
    batch = batch_for(plain, rng)
    info = atc.update(batch)
    plain.update(batch)
    assert info["siamese_loss"].shape == (1,) and torch.isfinite(info["siamese_loss"]).all()
    assert not torch.allclose(first(plain), first(atc))


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


def test_a_task_of_several_sensors_gives_dict_observations_the_learners_unpack():
    """SensorPendulum-v1: two cameras at their own resolutions (grey, 3 stacked frames) and the angular velocity, as
    a Dict; the environment the project makes packs it into one float32 vector, which ``unpack`` takes apart."""
    import gymnasium as gym

    from algorithms.common.observations import unpack
    from utils.envs.registry import make_env, sensor_layout

    raw, base = gym.make("SensorPendulum-v1"), gym.make("Pendulum-v1")
    obs, _ = raw.reset(seed=3)
    state, _ = base.reset(seed=3)
    assert obs["camera"].shape == (3, 84, 84) and obs["overview"].shape == (3, 48, 48)
    assert (obs["camera"] == obs["camera"][:1]).all()  # a reset repeats its frame
    for _ in range(3):
        before = obs
        obs, *_ = raw.step(np.array([1.0], np.float32))
        state, *_ = base.step(np.array([1.0], np.float32))
        np.testing.assert_array_equal(obs["overview"][:-1], before["overview"][1:])
        np.testing.assert_array_equal(obs["vector"], state[2:3].astype(np.float32))
    packed = make_env("SensorPendulum-v1")
    flat, _ = packed.reset(seed=3)
    again, _ = gym.make("SensorPendulum-v1").reset(seed=3)
    parts = sensor_layout("SensorPendulum-v1")
    assert [p.key for p in parts] == ["camera", "overview", "vector"] and flat.shape == (3 * 84 * 84 + 3 * 48 * 48 + 1,)
    for key, value in unpack(flat[None], parts).items():
        np.testing.assert_array_equal(value[0], again[key])
        assert value.dtype == again[key].dtype


def test_a_run_on_several_sensors_resumes_exactly(tmp_path):
    args = ["--policy", "DASE_SAC", "--env", "SensorPendulum-v1", "--num_steps", "120", "--start_steps", "40",
            "--hidden_size", "16", "--siamese", "byol", *COMMON[2:]]
    files = resumes_exactly(sac_main, args, tmp_path, "DASE_SAC_byol_SensorPendulum-v1_0*.npy", stop_at=80, every=40)
    assert len(files) == 6  # 2 agents: curves, weights, siamese losses


@pytest.mark.parametrize("script, args, words", [
    (ac_main, ["--policy", "A2C", "--env", "SensorPendulum-v1"], "are read by the replay learners"),
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
