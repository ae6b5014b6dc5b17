"""ACER's Atari replay keeps each frame once (algorithms/onpolicy/frame_store.py): every replayed rollout equals the one
stored, bit for bit, whatever the episodes do (ends, resets, a stack that follows no rule), across the ring's
overwrites and a checkpoint's round trip; a checkpoint written when every stack was stored whole loads into it;
and an ACER run on an Atari game learns exactly as it did with every stack stored whole."""
import numpy as np
import pytest
import torch

from algorithms.onpolicy import acer as acer_module
from algorithms.onpolicy import frame_store
from algorithms.onpolicy.acer import ACER
from algorithms.onpolicy.frame_store import FrameStore, is_frame_stack, pack, unpack, unpack_into
from utils.run.files import OWNER_KEY


class StackingGames:
    """K environments of N members handing over C-frame stacks as a frame-stacking wrapper does: each step adds a
    random frame; an episode ends now and then (its last stack is the next observation, the next episode's first
    stack is C copies of a new frame, or zeros and a frame); once in a while a stack follows no rule at all."""

    def __init__(self, n, k, c=4, hw=5, seed=0):
        self.g = torch.Generator().manual_seed(seed)
        self.n, self.k, self.c, self.hw = n, k, c, hw
        self.current = self.start((n, k))
        self.ends = 0
        self.broken: list[torch.Tensor] = []  # per rollout [N, T, K]: the next step's stack does not follow on

    def frame(self, shape):
        return torch.randint(0, 256, (*shape, self.hw, self.hw), generator=self.g, dtype=torch.uint8)

    def start(self, shape):
        f = self.frame(shape)
        if torch.rand((), generator=self.g) < 0.5:
            return f.unsqueeze(-3).expand(*shape, self.c, self.hw, self.hw).clone()
        zeros = torch.zeros((*shape, self.c - 1, self.hw, self.hw), dtype=torch.uint8)
        return torch.cat((zeros, f.unsqueeze(-3)), -3)

    def rollout(self, t):
        obs, nxt, ended, broken = [], [], [], []
        for _ in range(t):
            step = torch.cat((self.current[:, :, 1:], self.frame((self.n, self.k)).unsqueeze(2)), 2)
            end = torch.rand(self.n, self.k, generator=self.g) < 0.15
            odd = torch.rand(self.n, self.k, generator=self.g) < 0.05  # a stack that continues nothing
            obs.append(self.current)
            nxt.append(step)
            following = torch.where(end[..., None, None, None], self.start((self.n, self.k)), step)
            following = torch.where(odd[..., None, None, None],
                                    torch.randint(0, 256, step.shape, generator=self.g, dtype=torch.uint8), following)
            self.current = following
            ended.append(end)
            self.ends += int(end.sum())
            broken.append(end | odd)
        self.broken.append(torch.stack(broken, 1))
        return torch.stack(obs, 1), torch.stack(nxt, 1), torch.stack(ended, 1)


@pytest.mark.parametrize("n", [1, 3])
def test_every_replayed_rollout_equals_the_stored_one(n):
    t, k, slots = 6, 2, 4
    games, store = StackingGames(n, k), FrameStore(n, slots, t, k, (4, 5, 5), "cpu")
    kept = {}
    for i in range(11):  # the ring wraps around twice
        obs, nxt, _ = games.rollout(t)
        store.put(i % slots, obs, nxt)
        kept[i % slots] = (obs, nxt)
        for draw in range(4):  # members replay different slots at once
            chosen = torch.randint(0, min(i + 1, slots), (n,), generator=torch.Generator().manual_seed(10 * i + draw))
            got_obs, got_next = store.get(chosen)
            for m, slot in enumerate(chosen.tolist()):
                assert torch.equal(got_obs[m], kept[slot][0][m]) and torch.equal(got_next[m], kept[slot][1][m])
    assert games.ends >= 10
    # exactly what must be kept whole: where a step's next stack does not follow on inside a rollout, the episode's
    # last stack (its next observation) and the following one (the next observation of none); at a rollout's last
    # step the following stack is the next rollout's first, kept whole anyway
    for slot, i in ((i % slots, i) for i in range(7, 11)):
        must = games.broken[i][:, :-1].sum((1, 2))
        kept_whole = torch.tensor([0 if x is None else len(x[0]) for x in (per[slot] for per in store.extra)])
        assert torch.equal(kept_whole, 2 * must), (kept_whole, must)


def test_checkpoint_round_trip_and_members_split_across_seeds():
    n, t, k, slots = 4, 5, 3, 3
    games, store = StackingGames(n, k, seed=1), FrameStore(n, slots, t, k, (4, 5, 5), "cpu")
    for i in range(5):
        store.put(i % slots, *games.rollout(t)[:2])
    loaded = FrameStore(n, slots, t, k, (4, 5, 5), "cpu")
    loaded.load([store.state(slice(0, 1)), store.state(slice(1, 4))])  # a checkpoint per seed, loaded together
    for slot in range(slots):
        chosen = torch.full((n,), slot)
        for a, b in zip(store.get(chosen), loaded.get(chosen)):
            assert torch.equal(a, b)


def test_checkpoint_frames_are_compressed_and_old_plain_ones_still_load():
    """Atari frames are mostly background: a checkpoint keeps them zlib-packed (Pong's replay of 2 seeds went from
    1.6 GB to tens of MB), bit for bit; a state written with plain tensors (before packing) loads the same."""
    n, t, k, slots = 2, 5, 3, 4
    games = StackingGames(n, k, hw=84, seed=2)
    store = FrameStore(n, slots, t, k, (4, 84, 84), "cpu")
    for i in range(slots):
        obs, nxt, _ = games.rollout(t)
        # a game's picture: a flat background with a few moving pixels, not noise
        obs, nxt = obs // 64 * 0 + 87, nxt // 64 * 0 + 87
        obs[..., 10 + i, 20:24], nxt[..., 11 + i, 20:24] = 236, 236
        store.put(i, obs, nxt)
    state = store.state(slice(0, n))
    assert isinstance(state["newest"]["data"], bytes)
    raw = store.newest.numel() + store.first.numel()
    assert len(state["newest"]["data"]) + len(state["first"]["data"]) < raw / 50
    plain = {"first": store.first.clone(), "newest": store.newest.clone(),
             "extra": [{**e, "stacks": unpack(e["stacks"], "cpu")} for e in state["extra"]]}
    for loaded_from in (state, plain):
        loaded = FrameStore(n, slots, t, k, (4, 84, 84), "cpu")
        loaded.load([loaded_from])
        assert torch.equal(loaded.first, store.first) and torch.equal(loaded.newest, store.newest)
        for slot in range(slots):
            chosen = torch.full((n,), slot)
            assert all(torch.equal(a, b) for a, b in zip(store.get(chosen), loaded.get(chosen)))
    # unpacked frames are the store's own memory: writing a new rollout into them works
    loaded.put(0, *games.rollout(t)[:2])
    noise = torch.randint(0, 256, (3, 7, 84, 84), dtype=torch.uint8)
    assert torch.equal(unpack(pack(noise), "cpu"), noise) and torch.equal(unpack(pack(noise[:0]), "cpu"), noise[:0])
    with pytest.raises(ValueError, match="bytes"):
        unpack({**pack(noise), "shape": [3, 7, 84, 85]}, "cpu")



def test_a_checkpoint_unpacks_into_the_store_itself_in_pieces(monkeypatch):
    """Resuming a full replay takes no second copy of it: the packed frames are written, a piece at a time, into the
    store's own tensors (an 800,000-transition Pong replay, 6.8 GB, unpacked whole and then copied, took 17 GB and
    was killed on a 23 GB machine). With pieces far smaller than the frames, every byte still comes back; packed
    bytes of another shape, or a checkpoint of another number of members, are an error that names them."""
    monkeypatch.setattr(frame_store, "CHUNK", 1000)  # many pieces of output per MB of input: the loop's edges
    n, t, k, slots = 3, 4, 2, 3
    games = StackingGames(n, k, hw=84, seed=5)
    store = FrameStore(n, slots, t, k, (4, 84, 84), "cpu")
    for i in range(slots):
        store.put(i, *games.rollout(t)[:2])
    # one state per group of members (as one seed per process writes them), loaded into one store of all three
    states = [store.state(slice(0, 1)), store.state(slice(1, 3))]
    loaded = FrameStore(n, slots, t, k, (4, 84, 84), "cpu")
    first, newest = loaded.first.data_ptr(), loaded.newest.data_ptr()
    loaded.load(states)
    assert loaded.first.data_ptr() == first and loaded.newest.data_ptr() == newest  # the store's own memory
    assert torch.equal(loaded.first, store.first) and torch.equal(loaded.newest, store.newest)
    for slot in range(slots):
        chosen = torch.full((n,), slot)
        assert all(torch.equal(a, b) for a, b in zip(store.get(chosen), loaded.get(chosen)))
    noise = torch.randint(0, 256, (2, 5, 84, 84), dtype=torch.uint8)
    out = torch.zeros_like(noise)
    assert unpack_into(pack(noise), out) is out and torch.equal(out, noise)
    packed = pack(noise)
    with pytest.raises(ValueError, match="not the"):
        unpack_into(packed, torch.zeros((2, 5, 84, 83), dtype=torch.uint8))
    with pytest.raises(ValueError, match="more than"):  # bytes beyond the shape they name
        unpack_into({**pack(torch.cat((noise, noise))), "shape": list(noise.shape)}, out)
    with pytest.raises(ValueError, match="bytes, not"):  # fewer
        unpack_into({**pack(noise[:1]), "shape": list(noise.shape)}, out)
    with pytest.raises(ValueError, match="members"):
        FrameStore(2, slots, t, k, (4, 84, 84), "cpu").load(states)

def image_rollout(games, t, seed):
    obs, nxt, ended = games.rollout(t)
    g = torch.Generator().manual_seed(seed)
    n, k = obs.shape[0], obs.shape[2]
    return {"obs": obs, "next_obs": nxt, "actions": torch.randint(0, 3, (n, t, k), generator=g),
            "rewards": torch.randn(n, t, k, generator=g), "terminated": ended.float(), "ended": ended.float(),
            "mu": torch.softmax(torch.randn(n, t, k, 3, generator=g), -1)}


def test_acer_replays_frames_and_loads_a_checkpoint_of_whole_stacks(monkeypatch):
    """ACER keeps Atari observations in a FrameStore and its replayed batches equal what was handed over; a replay
    state written with every stack whole (before the store existed) loads into the same batches."""
    games = StackingGames(2, 2, c=4, hw=84, seed=3)
    agent = ACER((4, 84, 84), 3, None, None, [0, 1], "cpu", True, replay_start=1, buffer_size=3 * 5 * 2,
                 rollout=(5, 2), hidden_size=16, replay_ratio=0.0)
    handed = [image_rollout(games, 5, seed) for seed in range(4)]
    for r in handed:
        agent.remember(r)
    assert agent.frames is not None and set(agent.memory) == {"actions", "rewards", "terminated", "ended", "mu"}
    for slot, r in ((1, handed[1]), (2, handed[2]), (0, handed[3])):
        got = agent.replayed(torch.tensor([slot, slot]))
        assert got.keys() == r.keys() and all(torch.equal(got[key], r[key]) for key in r)
    # the checkpoint of the code before: obs and next_obs whole in the memory
    whole = {key: torch.stack([handed[3][key], handed[1][key], handed[2][key]], 1) for key in handed[0]}
    old = [{"memory": {key: v[i:i + 1] for key, v in whole.items()}, "stored": 4,
            "rng": agent.replay_rng.get_state()[i:i + 1]} for i in range(2)]
    fresh = ACER((4, 84, 84), 3, None, None, [0, 1], "cpu", True, replay_start=1, buffer_size=3 * 5 * 2,
                 rollout=(5, 2), hidden_size=16, replay_ratio=0.0)
    fresh.load_replay_state(old)
    assert fresh.frames is not None and "obs" not in fresh.memory and fresh.stored == 4
    again = ACER((4, 84, 84), 3, None, None, [0, 1], "cpu", True, replay_start=1, buffer_size=3 * 5 * 2,
                 rollout=(5, 2), hidden_size=16, replay_ratio=0.0)
    again.load_replay_state([agent.replay_state(slice(0, 1)), agent.replay_state(slice(1, 2))])
    for slot in range(3):
        chosen = torch.tensor([slot, (slot + 1) % 3])
        a, b, c = agent.replayed(chosen), fresh.replayed(chosen), again.replayed(chosen)
        assert all(torch.equal(a[key], b[key]) and torch.equal(a[key], c[key]) for key in a)


def test_flat_observations_stay_whole():
    assert not is_frame_stack(torch.zeros(2, 5, 3, 8))  # LunarLander's vectors
    assert not is_frame_stack(torch.zeros(2, 5, 3, 4, 84, 84))  # float images
    assert is_frame_stack(torch.zeros(2, 5, 3, 4, 84, 84, dtype=torch.uint8))


@pytest.mark.slow
def test_acer_on_an_atari_game_learns_as_with_whole_stacks(tmp_path, monkeypatch):
    """A short ACER run on Space Invaders (lives: learner episodes end inside rollouts) with its replay keeping each
    frame once ends with the curves and the model of the same run whose replay keeps every stack whole."""
    pytest.importorskip("ale_py")
    import ac_main
    from utils.run import Trainer

    def run(name):
        argv = ["--policy", "ACER", "--env", "ALE/SpaceInvaders-v5", "--envs_per_agent", "2", "--n_steps", "5",
                "--replay_start", "20", "--lr", "1e-4", "--max_time_steps", "600", "--eval_freq", "300", "--eval_episodes", "1",
                "--threads", "1", "--quiet", "--save_model", "--results_dir", str(tmp_path / name),
                "--models_dir", str(tmp_path / name / "m")]
        return Trainer(ac_main.build_config(ac_main.parse(argv))).run()

    compact = run("frames")
    monkeypatch.setattr(acer_module, "is_frame_stack", lambda x: False)
    whole = run("stacks")
    np.testing.assert_array_equal(compact[0], whole[0])
    a = torch.load(tmp_path / "frames" / "m" / "ACER_ALE-SpaceInvaders-v5_0.pt", weights_only=True)
    b = torch.load(tmp_path / "stacks" / "m" / "ACER_ALE-SpaceInvaders-v5_0.pt", weights_only=True)

    def flat(state, prefix=""):  # the networks (the file's run name differs between the two runs)
        for key, v in state.items():
            if not prefix and key == OWNER_KEY:
                continue
            yield from flat(v, f"{prefix}{key}.") if isinstance(v, dict) else [(prefix + key, v)]

    a, b = dict(flat(a)), dict(flat(b))
    assert len(a) >= 8 and a.keys() == b.keys()
    assert all(torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key] for key in a)
