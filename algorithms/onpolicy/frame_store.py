"""ACER's replay of Atari rollouts with each frame kept once.

A rollout of n steps x K environments hands over its observations and next observations as stacks of C frames
(uint8, channel first), 2 x C x 84 x 84 bytes a transition. Within an environment's rollout the stacks form a
chain s_0 = obs[0], s_1 = obs[1], ..., s_n = next_obs[n - 1]: s_i repeats the last C - 1 frames of s_{i-1} and adds
one, and next_obs[t] is s_{t+1}, except where an episode ended at step t (next_obs[t] is the episode's last
stack, s_{t+1} the next episode's first). A slot keeps s_0 whole, the newest frame of s_1..s_n, and whole every
stack that breaks the chain (an episode's first) and every next observation that is not the following observation
(an episode's last). Which stacks break the chain is found by comparing their frames, not assumed from the
episode flags, so a replayed rollout equals the stored one bit for bit whatever the wrappers do. With C = 4 and
n = 20 a transition takes about 8.5 KB instead of 56 KB.

A checkpoint keeps the frames zlib-compressed (level 1, lossless): Atari frames are mostly background, so Pong's
replay of 2 seeds x 1e5 transitions, 1.6 GB in memory, takes tens of MB on disk (random Pong frames compress about
60 to 1 at some 400 MB/s a core), and a run's checkpoints can travel between machines. Checkpoints written with the
frames as plain tensors still load.
"""
from __future__ import annotations

import zlib

import torch

BREAK, END = 0, 1  # an exception: a stack s_i (i = 1..n) stored whole; a next observation next_obs[t] (t < n - 1)
CHUNK = 1 << 26  # bytes handed to zlib, or taken from it, at a time: no second copy of the whole tensor
CODEC = "zlib"


def pack(t: torch.Tensor) -> dict:
    """A uint8 tensor as zlib-compressed bytes (level 1) with its shape; read back by ``unpack``."""
    t = t.detach().cpu().contiguous()  # a slice of the members of a CPU store is a view already: no copy
    raw = memoryview(t.numpy().reshape(-1))  # bytes, flat (a view)
    z = zlib.compressobj(1)
    data = b"".join([z.compress(raw[i:i + CHUNK]) for i in range(0, len(raw), CHUNK)] + [z.flush()])
    return {"codec": CODEC, "shape": list(t.shape), "data": data}


def unpack(x, device) -> torch.Tensor:
    """A tensor packed by ``pack``, or (a checkpoint written before frames were compressed) the tensor itself."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    out = torch.empty(packed_shape(_checked(x)), dtype=torch.uint8)  # writable: the store writes into it
    return unpack_into(x, out).to(device)


def unpack_into(x, out: torch.Tensor) -> torch.Tensor:
    """Unpack ``x`` (as ``unpack`` reads it) into the uint8 tensor ``out`` of its shape, in pieces of ``CHUNK``
    bytes: resuming a full replay takes no memory beyond the store and the packed bytes (unpacking whole, then
    copying into the store, took three times the store: an 800,000-transition Pong replay, 6.8 GB, did not resume on
    a 23 GB machine beside a second seed)."""
    if isinstance(x, torch.Tensor):
        if tuple(x.shape) != tuple(out.shape):
            raise ValueError(f"stored frames are {list(x.shape)}, not the {list(out.shape)} of this replay")
        return out.copy_(x)
    if list(_checked(x)["shape"]) != list(out.shape):
        raise ValueError(f"packed frames are {x['shape']}, not the {list(out.shape)} of this replay")
    direct = out.device.type == "cpu" and out.is_contiguous()
    host = out if direct else torch.empty(out.shape, dtype=torch.uint8)
    dst = memoryview(host.numpy().reshape(-1))
    z, pos, size, data = zlib.decompressobj(), 0, dst.nbytes, memoryview(x["data"])
    for i in range(0, len(data), 1 << 20):  # the input in pieces of 1 MB, the output at most CHUNK at a time
        piece = data[i:i + (1 << 20)]
        while piece:
            chunk = z.decompress(piece, CHUNK)
            if pos + len(chunk) > size:
                raise ValueError(f"packed frames hold more than the {size} bytes of their shape {x['shape']}")
            dst[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
            piece = z.unconsumed_tail
    if pos != size or not z.eof:
        raise ValueError(f"packed frames hold {pos} bytes, not the {size} of their shape {x['shape']}")
    return out if direct else out.copy_(host)


def _checked(x) -> dict:
    if not isinstance(x, dict) or x.get("codec") != CODEC:
        raise ValueError(f"frames packed as {x.get('codec') if isinstance(x, dict) else type(x).__name__}, "
                         f"not {CODEC}")
    return x


def packed_shape(x) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, torch.Tensor) else tuple(x["shape"])


def is_frame_stack(x: torch.Tensor) -> bool:
    """Rollout observations [N, n, K, C, H, W] of uint8 frame stacks (C >= 2): what this store keeps compactly."""
    return x.dtype == torch.uint8 and x.dim() == 6 and x.shape[3] >= 2


class FrameStore:
    """Per member, ``slots`` rollouts' observations and next observations (the ring of algorithms.onpolicy.acer's replay)."""

    def __init__(self, members: int, slots: int, n_steps: int, k: int, stack: tuple[int, int, int], device):
        c, h, w = stack
        self.members, self.n_steps = members, n_steps
        self.first = torch.zeros((members, slots, k, c, h, w), dtype=torch.uint8, device=device)
        self.newest = torch.zeros((members, slots, n_steps, k, h, w), dtype=torch.uint8, device=device)
        # per member and slot: None, or (index [E, 3] int64: kind, step, environment; stacks [E, C, H, W])
        self.extra: list[list[tuple[torch.Tensor, torch.Tensor] | None]] = [[None] * slots for _ in range(members)]

    def put(self, slot: int, obs: torch.Tensor, next_obs: torch.Tensor) -> None:
        """Store one rollout ([N, n, K, C, H, W] each) in ``slot`` of every member."""
        chain = torch.cat((obs, next_obs[:, -1:]), 1)  # s_0..s_n
        self.first[:, slot].copy_(chain[:, 0])
        self.newest[:, slot].copy_(chain[:, 1:, :, -1])
        breaks = (chain[:, 1:, :, :-1] != chain[:, :-1, :, 1:]).flatten(3).any(-1)  # [N, n, K]: s_{i+1} starts over
        ends = (next_obs[:, :-1] != chain[:, 1:-1]).flatten(3).any(-1)  # [N, n - 1, K]
        found = torch.cat((breaks, ends), 1).any(-1).any(-1).tolist()  # one transfer: which members have any
        for m in range(self.members):
            if not found[m]:
                self.extra[m][slot] = None
                continue
            b, e = breaks[m].nonzero(), ends[m].nonzero()  # [E, 2]: (step, environment)
            index = torch.cat((torch.nn.functional.pad(b + torch.tensor([1, 0], device=b.device), (1, 0), value=BREAK),
                               torch.nn.functional.pad(e, (1, 0), value=END)))
            stacks = torch.cat((chain[m, b[:, 0] + 1, b[:, 1]], next_obs[m, e[:, 0], e[:, 1]]))
            self.extra[m][slot] = (index, stacks)  # advanced indexing copied them

    def get(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Member m's observations and next observations of its slot ``slots[m]`` ([N, n, K, C, H, W] each)."""
        rows = torch.arange(self.members, device=slots.device)
        s = self.first[rows, slots]  # [N, K, C, H, W]
        newest = self.newest[rows, slots]  # [N, n, K, H, W]
        patches: dict[tuple[int, int], list[tuple[int, int, torch.Tensor]]] = {}
        for m, slot in enumerate(slots.tolist()):
            if (extra := self.extra[m][slot]) is not None:
                for (kind, step, env), stack in zip(extra[0].tolist(), extra[1]):
                    patches.setdefault((kind, step), []).append((m, env, stack))
        chain = [s]
        for i in range(1, self.n_steps + 1):
            s = torch.cat((s[:, :, 1:], newest[:, i - 1, :, None]), 2)
            for m, env, stack in patches.get((BREAK, i), ()):
                s[m, env] = stack
            chain.append(s)
        chain = torch.stack(chain, 1)  # [N, n + 1, K, C, H, W]
        # copies, not views: with one member both slices are contiguous already, and patching one would write into
        # the other
        obs, next_obs = chain[:, :-1].clone(), chain[:, 1:].clone()
        for (kind, step), found in patches.items():
            if kind == END:
                for m, env, stack in found:
                    next_obs[m, step, env] = stack
        return obs, next_obs

    # ---- checkpoints ----------------------------------------------------------------------------------------
    def state(self, rows: slice) -> dict:
        """These members' frames, packed (``pack``); the exceptions flattened per member: index [E, 4] (slot, kind,
        step, env), their stacks packed."""
        extra = []
        for per_slot in self.extra[rows]:
            index = [torch.nn.functional.pad(x[0], (1, 0), value=slot) for slot, x in enumerate(per_slot) if x]
            stacks = [x[1] for x in per_slot if x]
            c, h, w = self.first.shape[-3:]
            extra.append({"index": torch.cat(index).cpu() if index else torch.zeros((0, 4), dtype=torch.long),
                          "stacks": pack(torch.cat(stacks) if stacks else torch.zeros((0, c, h, w), dtype=torch.uint8))})
        return {"first": pack(self.first[rows]), "newest": pack(self.newest[rows]), "extra": extra}

    def load(self, states: list[dict]) -> None:
        """The frames of ``states`` (one per group of members, in order) written into this store's own tensors."""
        device = self.first.device
        row = 0
        for s in states:
            m = packed_shape(s["first"])[0]
            if row + m > self.members:
                raise ValueError(f"the checkpoint's frames hold more than this replay's {self.members} members")
            unpack_into(s["first"], self.first[row:row + m])
            unpack_into(s["newest"], self.newest[row:row + m])
            row += m
        if row != self.members:
            raise ValueError(f"the checkpoint's frames hold {row} members, not this replay's {self.members}")
        slots = self.first.shape[1]
        self.extra = []
        for member in (x for s in states for x in s["extra"]):
            per_slot: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * slots
            index, stacks = member["index"].to(device), unpack(member["stacks"], device)
            for slot in index[:, 0].unique().tolist():
                rows = (index[:, 0] == slot).nonzero().squeeze(1)
                per_slot[slot] = (index[rows, 1:], stacks[rows])
            self.extra.append(per_slot)
