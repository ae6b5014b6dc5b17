"""Replay learners on image observations: each frame stored once, and the learner that encodes them.

An observation is made of parts (``algorithms.common.observations.Part``): a pixel task's one frame stack, or a
Dict task's sensors, images of their own resolutions and vectors. ``ImageReplayBuffer`` keeps the rows of
``SharedReplayBuffer`` (actions, rewards, flags, writers, behaviour, and the vector parts as its observations) and,
per image part, uint8 *units*: for a frame stack of D frames a unit is one frame [H, W] and an observation is D
units; any other image [C, H, W] is one unit of its own. Rows are whole steps (writer w of step k at row
k * writers + w), and per row it stores

- the newest unit of each image, and the observation's *age* (steps since its episode's reset);
- nothing of the next observation's images, which are the next row's of the same writer (row + writers), except
  where the episode ended (terminated or truncated): then their newest units are kept in a side store of *finals*.

An observation is rebuilt from its row and the D - 1 rows before it of the same writer, back to the episode's
reset (a stack starts as its reset frame repeated, as Gymnasium's ``FrameStackObservation`` pads), and the next one
is the observation's last D - 1 units and the next newest unit. An episode of T steps thus costs T + 1 units instead
of 2 x D x T. Adding a step also writes the next observation's newest unit into the next row, so the newest step can
be sampled; when the ring is full, that row is the oldest step, and the oldest D steps are never sampled (their
history may be overwritten): a member samples uniformly among the others.

The finals live in a ring per group (a slot for every image part) that grows (doubling) when a slot it would reuse
still belongs to a stored row, so no stored row ever loses its last frame, whatever the episodes' lengths.

*Starts* (``add(..., start=)``): a row whose observation continues an episode whose earlier steps are not the rows
before it (a distributed run's block: the rows before it are another actor's). Its observation's older units are
kept in a side ring of *heads* (one slot per start, D - 1 units), and every row keeps the steps *since* its start
(or its reset), so a unit further back than that comes from the head. The heads' ring is made at the first start
and grows as the finals' does; a buffer that never sees one (every single-machine run) holds and reads nothing more.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from algorithms.common.nets import AgentRNG
from algorithms.common.observations import Part, unpack
from algorithms.replay.base import Batch

from ...naming import ALGORITHM
from .buffer import SharedReplayBuffer
from .learner import STATS, Learner


class Frames:
    """One image part's store: per row its newest unit, and the finals' ring (see the module's docstring)."""

    def __init__(self, part: Part, groups: int, capacity: int, finals: int, device):
        self.part = part
        self.depth = part.shape[0] if part.stacked else 1  # units per observation
        self.unit_shape = part.shape[1:] if part.stacked else part.shape
        self.units = torch.zeros((groups, capacity, *self.unit_shape), dtype=torch.uint8, device=device)
        self.finals = torch.zeros((groups, finals, *self.unit_shape), dtype=torch.uint8, device=device)
        self.heads: torch.Tensor | None = None  # [groups, slots, depth - 1, *unit]: the starts' older units

    def newest(self, obs: np.ndarray) -> np.ndarray:
        """[M, *shape] -> the newest unit of each [M, *unit_shape]."""
        return obs[:, -1] if self.depth > 1 else obs


class ImageReplayBuffer(SharedReplayBuffer):
    """Replay of observations made of images and vectors, each image unit (frame) stored once (see the module's
    docstring); the vectors are stored as ``SharedReplayBuffer`` stores observations."""

    FIELDS = SharedReplayBuffer.FIELDS + ("age",)

    def __init__(self, parts: tuple[Part, ...], act_dim: int, capacity: int, writers: int, device, *,
                 groups: int = 1, gaussian_behaviour: bool = False, behaviour_width: int = 0, finals: int = 64,
                 heads: int = 64):
        if capacity % writers:
            raise ValueError(f"image replay needs whole steps: capacity {capacity} is not a multiple of {writers}")
        self.parts = tuple(parts)
        self.vectors = [p for p in self.parts if not p.image]
        images = [p for p in self.parts if p.image]
        self.depth = max(p.shape[0] if p.stacked else 1 for p in images)  # the steps an observation reaches back
        if capacity // writers <= self.depth + 1:
            raise ValueError(f"a buffer of {capacity // writers} steps cannot hold observations of {self.depth} "
                             "frames and their history")
        super().__init__(sum(p.size for p in self.vectors), act_dim, capacity, writers, device, gaussian_behaviour,
                         groups=groups, behaviour_width=behaviour_width)
        g, c = self.groups, self.capacity
        self.frames = {p.key: Frames(p, g, c, int(finals), self.device) for p in images}
        self.age = torch.zeros((g, c), dtype=torch.int32, device=self.device)
        # the finals: final_slot[g, row] is an ended row's slot in every image part's ring
        self.final_slot = torch.zeros((g, c), dtype=torch.int64, device=self.device)
        self.final_step = np.full((g, int(finals)), -1, dtype=np.int64)  # the step whose final a slot holds
        self.final_next = np.zeros(g, dtype=np.int64)  # the slot each group fills next
        self.steps = 0  # steps added so far
        self.next_age = np.zeros(g * writers, dtype=np.int64)  # each member's next observation's age
        # starts (see the module's docstring): made at the first one (``make_heads``); until then since == age
        self.heads_made = False  # ``make_heads`` sets the three below (empty until then)
        self.since = torch.zeros((0, 0), dtype=torch.int32, device=self.device)  # [g, c] steps since start or reset
        self.head_slot = torch.zeros((0, 0), dtype=torch.int64, device=self.device)  # [g, c] a start's slot
        self.head_step = np.zeros((0, 0), dtype=np.int64)  # [g, slots] the step whose start a slot holds
        self.head_next = np.zeros(g, dtype=np.int64)
        self.next_since = self.next_age
        self.first_heads = int(heads)  # the heads' ring's first size
        # the sampled range, on the device (no host value when sampling): ``start`` its first row, ``count`` rows
        self.start = torch.zeros((), dtype=torch.int64, device=self.device)
        self.count = torch.zeros((), dtype=torch.int64, device=self.device)

    # ---- writing --------------------------------------------------------------------------------------------
    def split(self, obs) -> tuple[dict, np.ndarray]:
        """Observations [M, ...] as they come from the environments: their image parts {key: [M, *shape]} and their
        vectors side by side [M, V] float32."""
        parts = unpack(np.asarray(obs), self.parts)
        m = len(obs)
        vectors = np.concatenate([np.asarray(parts[p.key], np.float32).reshape(m, -1) for p in self.vectors], 1) \
            if self.vectors else np.zeros((m, 0), np.float32)
        return {k: np.asarray(parts[k]) for k in self.frames}, vectors

    def add(self, obs, action, reward, next_obs, terminated, behaviour: tuple | None = None, ended=None,
            start=None) -> None:
        """``start`` [M] (optional): the members whose observation continues an episode whose earlier steps are not
        their rows before this one (see the module's docstring)."""
        g, n, c = self.groups, self.writers, self.capacity
        (images, vectors), (next_images, next_vectors) = self.split(obs), self.split(next_obs)
        ended_b = np.asarray(terminated if ended is None else ended, dtype=bool).reshape(g * n)
        start_b = np.zeros(g * n, dtype=bool) if start is None or self.depth == 1 else \
            np.asarray(start, dtype=bool).reshape(g * n)
        age = self.next_age.copy()
        for key, f in self.frames.items():
            if f.depth > 1:
                self.check_stacks(key, images[key], next_images[key], (age == 0) & ~start_b)
        if start_b.any() and not self.heads_made:
            self.make_heads()
        since = None
        if self.heads_made:  # a start's units back to depth - 1 are all known: its own and its head's
            age = np.where(start_b, np.maximum(age, self.depth - 1), age)
            since = np.where(start_b, 0, self.next_since)
        rows = (self.ptr + torch.arange(n, device=self.device)) % c
        nxt = (rows + n) % c
        going = torch.as_tensor(~ended_b, device=self.device).view(g, n)
        lasts = {}
        for key, f in self.frames.items():
            f.units[:, rows] = torch.as_tensor(f.newest(images[key]), device=self.device).view(g, n, *f.unit_shape)
            last = torch.as_tensor(f.newest(next_images[key]), device=self.device).view(g, n, *f.unit_shape)
            # the next row's newest unit, ahead of its step (the same unit the next add writes there)
            f.units[:, nxt] = torch.where(going.view(g, n, *([1] * len(f.unit_shape))), last, f.units[:, nxt])
            lasts[key] = last
        self.age[:, rows] = torch.as_tensor(age, dtype=torch.int32, device=self.device).view(g, n)
        if since is not None:
            self.since[:, rows] = torch.as_tensor(since, dtype=torch.int32, device=self.device).view(g, n)
            if start_b.any():
                self.keep_heads(start_b.reshape(g, n), rows, images)
        if ended_b.any():
            self.keep_finals(ended_b.reshape(g, n), rows, lasts)
        super().add(vectors, action, reward, next_vectors, terminated, behaviour, ended)
        self.steps += 1
        self.next_age = np.where(ended_b, 0, age + 1)
        self.next_since = self.next_age if since is None else np.where(ended_b, 0, since + 1)
        self.set_range()

    def set_range(self) -> None:
        """The rows members sample: all, or, once the ring is full, all but the oldest ``depth`` steps."""
        full = self.size == self.capacity
        self.start.fill_((self.ptr + self.depth * self.writers) % self.capacity if full else 0)
        self.count.fill_(self.size - self.depth * self.writers if full else self.size)

    @staticmethod
    def check_stacks(key: str, obs: np.ndarray, next_obs: np.ndarray, reset: np.ndarray) -> None:
        """What rebuilding needs of frame stacks: a next observation is the observation moved on by one frame, and a
        reset's stack is its first frame repeated (a ValueError otherwise, before anything is stored)."""
        if not np.array_equal(next_obs[:, :-1], obs[:, 1:]) or not (obs[reset] == obs[reset, -1:]).all():
            raise ValueError(f"image replay: observations {key!r} are not frame stacks (each the last moved on by one "
                             "frame, a reset's the first frame repeated); this buffer stores stacks frame by frame")

    def keep_finals(self, ended: np.ndarray, rows: torch.Tensor, lasts: dict) -> None:
        """The last units of the episodes that ended at this step ([G, N] flags) into the finals' rings."""
        kept = self.capacity // self.writers
        for grp, writer in zip(*np.nonzero(ended)):
            slot = int(self.final_next[grp])
            if self.final_step[grp, slot] >= 0 and self.steps - self.final_step[grp, slot] < kept:
                slot = self.grow_finals()  # its episode's row is still stored: more room
            for key, f in self.frames.items():
                f.finals[grp, slot] = lasts[key][grp, writer]
            self.final_slot[grp, rows[writer]] = slot
            self.final_step[grp, slot] = self.steps
            self.final_next[grp] = (slot + 1) % self.final_step.shape[1]

    def make_heads(self, slots: int | None = None) -> None:
        """The heads' ring and the rows' steps since their start, at the first start (until then since == age)."""
        g, c, slots = self.groups, self.capacity, self.first_heads if slots is None else slots
        self.heads_made = True
        self.since = self.age.clone()
        self.next_since = self.next_age.copy()
        self.head_slot = torch.zeros((g, c), dtype=torch.int64, device=self.device)
        self.head_step = np.full((g, int(slots)), -1, dtype=np.int64)
        self.head_next = np.zeros(g, dtype=np.int64)
        for f in self.frames.values():
            if f.depth > 1:
                f.heads = torch.zeros((g, int(slots), f.depth - 1, *f.unit_shape), dtype=torch.uint8,
                                      device=self.device)

    def keep_heads(self, start: np.ndarray, rows: torch.Tensor, images: dict) -> None:
        """The older units of the observations that start at this step ([G, N] flags) into the heads' ring."""
        kept = self.capacity // self.writers
        for grp, writer in zip(*np.nonzero(start)):
            slot = int(self.head_next[grp])
            if self.head_step[grp, slot] >= 0 and self.steps - self.head_step[grp, slot] < kept:
                slot = self.grow_heads()  # its start's row is still stored: more room
            for key, f in self.frames.items():
                if f.heads is not None:
                    f.heads[grp, slot] = torch.as_tensor(images[key][grp * self.writers + writer, :-1],
                                                         device=self.device)
            self.head_slot[grp, rows[writer]] = slot
            self.head_step[grp, slot] = self.steps
            self.head_next[grp] = (slot + 1) % self.head_step.shape[1]

    def grow_heads(self) -> int:
        """Twice the heads' slots in every group (the old ones kept where they are); the first new slot."""
        size = self.head_step.shape[1]
        for f in self.frames.values():
            if f.heads is not None:
                grown = torch.zeros((self.groups, 2 * size, *f.heads.shape[2:]), dtype=torch.uint8,
                                    device=self.device)
                grown[:, :size] = f.heads
                f.heads = grown
        self.head_step = np.concatenate([self.head_step, np.full_like(self.head_step, -1)], axis=1)
        return size

    def grow_finals(self) -> int:
        """Twice the finals' slots in every group (the old ones kept where they are); the first new slot."""
        size = self.final_step.shape[1]
        for f in self.frames.values():
            grown = torch.zeros((self.groups, 2 * size, *f.unit_shape), dtype=torch.uint8, device=self.device)
            grown[:, :size] = f.finals
            f.finals = grown
        self.final_step = np.concatenate([self.final_step, np.full_like(self.final_step, -1)], axis=1)
        return size

    # ---- reading --------------------------------------------------------------------------------------------
    def sample(self, batch_size: int, rng: AgentRNG, groups: torch.Tensor | None = None,
               step: torch.Tensor | None = None) -> Batch:
        if groups is not None or self.priorities is not None:
            raise ValueError("image replay samples a member's own group, uniformly")
        idx = (self.start + rng.randint(self.count, batch_size)) % self.capacity  # [M, B]
        g = self.member_group.view(-1, 1)
        return self._gather(g, idx, self.writer[g, idx] == self.member_id.view(-1, 1))

    def observations(self, g: torch.Tensor, idx: torch.Tensor) -> tuple[dict, dict]:
        """The observations and next observations of rows ``idx`` [M, B] of groups ``g`` [M, 1], by part: images
        uint8 [M, B, *shape], vectors float32 [M, B, size]."""
        n, c = self.writers, self.capacity
        age = self.age[g, idx].long()
        ended = self.ended[g, idx].squeeze(-1) > 0
        slot = self.final_slot[g, idx]
        obs, next_obs = {}, {}
        for key, f in self.frames.items():
            d = f.depth
            back = torch.arange(d - 1, -1, -1, device=self.device)  # oldest unit first
            kk = torch.minimum(back, age.unsqueeze(-1))  # [M, B, D] steps back, padded at a reset
            if f.heads is None:
                units = f.units[g.unsqueeze(-1), (idx.unsqueeze(-1) - kk * n) % c]  # [M, B, D, *unit]
            else:  # steps back past the row's start come from the start's head
                since = self.since[g, idx].long().unsqueeze(-1)  # [M, B, 1]
                units = f.units[g.unsqueeze(-1), (idx.unsqueeze(-1) - torch.minimum(kk, since) * n) % c]
                origin = self.head_slot[g, (idx - since.squeeze(-1) * n) % c]  # [M, B]
                at = (d - 1 - (kk - since)).clamp(0, d - 2)
                heads = f.heads[g.unsqueeze(-1), origin.unsqueeze(-1), at]
                units = torch.where((kk > since).view(*kk.shape, *([1] * len(f.unit_shape))), heads, units)
            newest = torch.where(ended.view(*ended.shape, *([1] * len(f.unit_shape))), f.finals[g, slot],
                                 f.units[g, (idx + n) % c])
            if d == 1:
                obs[key], next_obs[key] = units.squeeze(2), newest
            else:
                obs[key], next_obs[key] = units, torch.cat([units[:, :, 1:], newest.unsqueeze(2)], dim=2)
        col = 0
        for p in self.vectors:
            obs[p.key], next_obs[p.key] = self.obs[g, idx, col:col + p.size], self.next_obs[g, idx, col:col + p.size]
            col += p.size
        return obs, next_obs

    def _gather(self, g: torch.Tensor, idx: torch.Tensor, own: torch.Tensor) -> Batch:
        obs, next_obs = self.observations(g, idx)
        mean = self.behaviour_mean[g, idx] if self.behaviour_mean is not None else None  # Gaussian SAC: both
        std = self.behaviour_std[g, idx] if self.behaviour_std is not None else None
        probs = self.behaviour_probs[g, idx] if self.behaviour_probs is not None else None
        return Batch(obs, self.action[g, idx], self.reward[g, idx], next_obs, self.not_done[g, idx], own,
                     behaviour_mean=mean, behaviour_std=std, behaviour_probs=probs)

    # ---- checkpoints ----------------------------------------------------------------------------------------
    def state_dict(self, groups: slice = slice(None)) -> dict:
        state = super().state_dict(groups)
        rows = min(self.size + self.writers, self.capacity)  # the next row's units are written ahead
        state["images"] = {
            "units": {k: f.units[groups, :rows].cpu().clone() for k, f in self.frames.items()},
            "finals": {k: f.finals[groups].cpu().clone() for k, f in self.frames.items()},
            "final_slot": self.final_slot[groups, :rows].cpu().clone(),
            "final_step": torch.from_numpy(self.final_step[groups].copy()),
            "final_next": torch.from_numpy(self.final_next[groups].copy()), "steps": self.steps,
            "next_age": torch.from_numpy(self.next_age[self._members(groups)].copy())}
        if self.heads_made:  # starts were stored
            state["images"]["heads"] = {
                "units": {k: f.heads[groups].cpu().clone() for k, f in self.frames.items() if f.heads is not None},
                "since": self.since[groups, :rows].cpu().clone(), "slot": self.head_slot[groups, :rows].cpu().clone(),
                "step": torch.from_numpy(self.head_step[groups].copy()),
                "next": torch.from_numpy(self.head_next[groups].copy()),
                "next_since": torch.from_numpy(self.next_since[self._members(groups)].copy())}
        return state

    def load_state_dict(self, state: dict, groups: slice = slice(None)) -> None:
        super().load_state_dict(state, groups)
        im = state["images"]
        size = im["final_step"].shape[1]
        while self.final_step.shape[1] < size:
            self.grow_finals()
        for k, f in self.frames.items():
            f.units[groups, :im["units"][k].shape[1]] = im["units"][k].to(self.device)
            f.finals[groups, :size] = im["finals"][k].to(self.device)
        self.final_slot[groups, :im["final_slot"].shape[1]] = im["final_slot"].to(self.device)
        self.final_step[groups] = -1
        self.final_step[groups, :size] = im["final_step"].numpy()
        self.final_next[groups] = im["final_next"].numpy()
        self.steps = int(im["steps"])
        self.next_age[self._members(groups)] = im["next_age"].numpy()
        if self.heads_made and "heads" not in im:
            self.since[groups] = self.age[groups]
            self.next_since[self._members(groups)] = self.next_age[self._members(groups)]
        if "heads" in im:
            h = im["heads"]
            size = h["step"].shape[1]
            if not self.heads_made:
                self.make_heads(size)
            while self.head_step.shape[1] < size:
                self.grow_heads()
            for k, units in h["units"].items():
                heads = self.frames[k].heads
                if heads is not None:  # made by make_heads for every stacked image
                    heads[groups, :size] = units.to(self.device)
            self.since[groups, :h["since"].shape[1]] = h["since"].to(self.device)
            self.head_slot[groups, :h["slot"].shape[1]] = h["slot"].to(self.device)
            self.head_step[groups] = -1
            self.head_step[groups, :size] = h["step"].numpy()
            self.head_next[groups] = h["next"].numpy()
            self.next_since[self._members(groups)] = h["next_since"].numpy()
        self.set_range()

    @staticmethod
    def image_bytes_for(unit_bytes: int, vector_dim: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False,
                  behaviour_width: int = 0) -> int:
        """Memory one group holds: a unit of every image a row, its age and final slot, and the rows' other
        fields, vectors included (the finals' ring, a unit per stored episode, comes on top)."""
        return capacity * (unit_bytes + 12) + SharedReplayBuffer.bytes_for(vector_dim, act_dim, capacity,
                                                                           gaussian_behaviour, behaviour_width)

    def nbytes(self) -> int:
        heads = 0 if not self.heads_made else self.since.numel() * 4 + self.head_slot.numel() * 8 + sum(
            f.heads.numel() for f in self.frames.values() if f.heads is not None)
        return super().nbytes() + sum(f.units.numel() + f.finals.numel() for f in self.frames.values()) \
            + self.final_slot.numel() * 8 + heads


class ImageLearner(Learner):
    """``Learner`` for agents with image encoders: image replay (each frame once), actions from the encoders'
    features, evaluation with a copy of the encoders and actors. ``parts``: the observations' parts
    (``utils.envs.pixels.Part``; a pixel task's one frame stack, or a Dict task's images and vectors)."""

    buffer: ImageReplayBuffer

    def __init__(self, algorithm: str, algo: dict, member_seeds: list[int], num_agents: int, parts, *args, **kwargs):
        super().__init__(algorithm, algo, member_seeds, num_agents, tuple(parts), *args, **kwargs)
        self.eval_encoder = copy.deepcopy(self.agents.encoder).requires_grad_(False)
        # --siamese: the period's sum of the auxiliary loss per member (read at evaluations, NaN before updates)
        self.siamese_sum = torch.zeros(self.members, dtype=torch.float64, device=self.device) \
            if self.agents.siamese is not None else None

    def make_agents(self, algorithm: str, algo: dict, discrete: bool, *args):
        return ALGORITHM[algorithm].form("image", discrete)(*args, **algo)  # the registry (utils/naming.py)

    def make_buffer(self, parts, act_dim, buffer_size, n_step, gamma, sequences, prioritized):
        w = self.scheme.writers
        capacity = buffer_size - buffer_size % w
        unit = sum(p.size // (p.shape[0] if p.stacked else 1) for p in parts if p.image)
        vector = sum(p.size for p in parts if not p.image)
        self.check_memory(ImageReplayBuffer.image_bytes_for(unit, vector, act_dim, 1, self.agents.gaussian_behaviour,
                                                      self.agents.behaviour_width), capacity)
        return ImageReplayBuffer(parts, act_dim, capacity, w, self.device, groups=self.scheme.groups,
                                 gaussian_behaviour=self.agents.gaussian_behaviour,
                                 behaviour_width=self.agents.behaviour_width)

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None, start=None) -> None:
        """``Learner.store``; ``start``: members whose observation's earlier frames are not their rows before
        (``ImageReplayBuffer.add``)."""
        self.buffer.add(obs, actions, rewards, next_obs, terminated, behaviour, ended, start=start)

    def accumulate(self, own: torch.Tensor, info: dict) -> None:
        """The period's sums, and the siamese loss (``--siamese``)."""
        super().accumulate(own, info)
        if self.siamese_sum is not None:
            self.siamese_sum += info["siamese_loss"].double()

    def period_stats(self) -> dict[str, np.ndarray]:
        """``Learner.period_stats`` and, with --siamese, its mean loss over the period's updates."""
        updates = self.stats[STATS.index("updates")].cpu().numpy().copy()
        stats = super().period_stats()
        if self.siamese_sum is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                stats["siamese_loss"] = self.siamese_sum.cpu().numpy() / updates
            self.siamese_sum.zero_()
        return stats

    @torch.no_grad()
    def snapshot(self, t: int = 0):
        """The encoders and actors as they are now, as a policy for evaluation (observations [M, E, ...])."""
        torch._foreach_copy_(list(self.eval_actor.parameters()), list(self.agents.actor.parameters()))
        torch._foreach_copy_(list(self.eval_encoder.parameters()), list(self.agents.encoder.parameters()))
        actor, encoder, read = self.eval_actor, self.eval_encoder, self.agents._obs

        @torch.no_grad()
        def policy(obs: np.ndarray) -> np.ndarray:
            return actor(encoder(read(obs))).cpu().numpy()
        return policy
