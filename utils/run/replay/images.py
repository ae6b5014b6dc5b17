"""Replay learners on image observations: each frame stored once, and the learner that encodes them.

``ImageReplayBuffer`` keeps the rows of ``SharedReplayBuffer`` (actions, rewards, flags, writers, behaviour) and, in
place of float observations, uint8 *units*: for a frame stack of D frames (the pixel tasks, Atari) a unit is one
frame [H, W] and an observation is D units; any other image [C, H, W] is one unit of its own. Rows are whole steps
(writer w of step k at row k * writers + w), and per row it stores

- the newest unit of the observation, and the observation's *age* (steps since its episode's reset);
- nothing of the next observation, which is the next row's observation of the same writer (row + writers), except
  where the episode ended (terminated or truncated): then its newest unit is kept in a side store of *finals*.

An observation is rebuilt from its row and the D - 1 rows before it of the same writer, back to the episode's
reset (a stack starts as its reset frame repeated, as Gymnasium's ``FrameStackObservation`` pads), and the next one
is the observation's last D - 1 units and the next newest unit. An episode of T steps thus costs T + 1 units instead
of 2 x D x T. Adding a step also writes the next observation's newest unit into the next row, so the newest step can
be sampled; when the ring is full, that row is the oldest step, and the oldest D steps are never sampled (their
history may be overwritten): a member samples uniformly among the others.

The finals live in a ring per group that grows (doubling) when a slot it would reuse still belongs to a stored
row, so no stored row ever loses its last frame, whatever the episodes' lengths.
"""
from __future__ import annotations

import copy
from typing import Optional

import numpy as np
import torch

from algorithms.replay.base import Batch
from algorithms.common.nets import AgentRNG
from algorithms.replay.image_agents import ImageDDPG, ImageDiscreteSAC, ImageSAC, ImageTD3

from .buffer import SharedReplayBuffer
from .learner import STATS, Learner

IMAGE = {"SAC": ImageSAC, "TD3": ImageTD3, "DDPG": ImageDDPG}  # the algorithms' image forms
IMAGE_DISCRETE = {"SAC": ImageDiscreteSAC}


class ImageReplayBuffer(SharedReplayBuffer):
    """Replay of image observations, each unit (frame) stored once (see the module's docstring)."""

    FIELDS = tuple(f for f in SharedReplayBuffer.FIELDS if f not in ("obs", "next_obs")) + ("units", "age")

    def __init__(self, obs_shape: tuple[int, ...], stacked: bool, act_dim: int, capacity: int, writers: int,
                 device, *, groups: int = 1, gaussian_behaviour: bool = False, behaviour_width: int = 0,
                 finals: int = 64):
        if capacity % writers:
            raise ValueError(f"image replay needs whole steps: capacity {capacity} is not a multiple of {writers}")
        self.obs_shape = tuple(int(x) for x in obs_shape)
        self.depth = self.obs_shape[0] if stacked else 1  # units per observation
        self.unit_shape = self.obs_shape[1:] if stacked else self.obs_shape
        if capacity // writers <= self.depth + 1:
            raise ValueError(f"a buffer of {capacity // writers} steps cannot hold observations of {self.depth} "
                             "frames and their history")
        super().__init__(0, act_dim, capacity, writers, device, gaussian_behaviour, groups=groups,
                         behaviour_width=behaviour_width)
        g, c = self.groups, self.capacity
        self.units = torch.zeros((g, c, *self.unit_shape), dtype=torch.uint8, device=self.device)
        self.age = torch.zeros((g, c), dtype=torch.int32, device=self.device)
        # finals: per group a ring of the last units of ended episodes; final_slot[g, row] is the row's slot
        self.finals = torch.zeros((g, int(finals), *self.unit_shape), dtype=torch.uint8, device=self.device)
        self.final_slot = torch.zeros((g, c), dtype=torch.int64, device=self.device)
        self.final_step = np.full((g, int(finals)), -1, dtype=np.int64)  # the step whose final a slot holds
        self.final_next = np.zeros(g, dtype=np.int64)  # the slot each group fills next
        self.steps = 0  # steps added so far
        self.next_age = np.zeros(g * writers, dtype=np.int64)  # each member's next observation's age
        # the sampled range, on the device (no host value when sampling): ``start`` its first row, ``count`` rows
        self.start = torch.zeros((), dtype=torch.int64, device=self.device)
        self.count = torch.zeros((), dtype=torch.int64, device=self.device)

    # ---- writing --------------------------------------------------------------------------------------------
    def newest_unit(self, obs: np.ndarray) -> np.ndarray:
        """[M, *obs_shape] -> the newest unit of each [M, *unit_shape]."""
        return obs[:, -1] if self.depth > 1 else obs

    def add(self, obs, action, reward, next_obs, terminated, behaviour: Optional[tuple] = None, ended=None) -> None:
        g, n, c = self.groups, self.writers, self.capacity
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        ended_b = np.asarray(terminated if ended is None else ended, dtype=bool).reshape(g * n)
        age = self.next_age.copy()
        if self.depth > 1:
            self.check_stacks(obs, next_obs, age == 0)
        rows = (self.ptr + torch.arange(n, device=self.device)) % c
        nxt = (rows + n) % c
        self.units[:, rows] = torch.as_tensor(self.newest_unit(obs), device=self.device).view(
            g, n, *self.unit_shape)
        self.age[:, rows] = torch.as_tensor(age, dtype=torch.int32, device=self.device).view(g, n)
        last = torch.as_tensor(self.newest_unit(next_obs), device=self.device).view(g, n, *self.unit_shape)
        going = torch.as_tensor(~ended_b, device=self.device).view(g, n)
        # the next row's newest unit, ahead of its step (the same unit the next add writes there)
        self.units[:, nxt] = torch.where(going.view(g, n, *([1] * len(self.unit_shape))), last, self.units[:, nxt])
        if ended_b.any():
            self.keep_finals(ended_b.reshape(g, n), rows, last)
        empty = np.zeros((g * n, 0), dtype=np.float32)
        super().add(empty, action, reward, empty, terminated, behaviour, ended)
        self.steps += 1
        self.next_age = np.where(ended_b, 0, age + 1)
        full = self.size == self.capacity
        self.start.fill_((self.ptr + self.depth * n) % c if full else 0)
        self.count.fill_(self.size - self.depth * n if full else self.size)

    @staticmethod
    def check_stacks(obs: np.ndarray, next_obs: np.ndarray, reset: np.ndarray) -> None:
        """What rebuilding needs of frame stacks: a next observation is the observation moved on by one frame, and a
        reset's stack is its first frame repeated (a ValueError otherwise, before anything is stored)."""
        if not np.array_equal(next_obs[:, :-1], obs[:, 1:]) or not (obs[reset] == obs[reset, -1:]).all():
            raise ValueError("image replay: observations of several channels that are not frame stacks (each the "
                             "last moved on by one frame, a reset's the first frame repeated); this buffer stores "
                             "stacks frame by frame")

    def keep_finals(self, ended: np.ndarray, rows: torch.Tensor, last: torch.Tensor) -> None:
        """The last units of the episodes that ended at this step ([G, N] flags) into the finals' rings."""
        kept = self.capacity // self.writers
        for grp, writer in zip(*np.nonzero(ended)):
            slot = int(self.final_next[grp])
            if self.final_step[grp, slot] >= 0 and self.steps - self.final_step[grp, slot] < kept:
                slot = self.grow_finals()  # its episode's row is still stored: more room
            self.finals[grp, slot] = last[grp, writer]
            self.final_slot[grp, rows[writer]] = slot
            self.final_step[grp, slot] = self.steps
            self.final_next[grp] = (slot + 1) % self.finals.shape[1]

    def grow_finals(self) -> int:
        """Twice the finals' slots in every group (the old ones kept where they are); the first new slot."""
        size = self.finals.shape[1]
        grown = torch.zeros((self.groups, 2 * size, *self.unit_shape), dtype=torch.uint8, device=self.device)
        grown[:, :size] = self.finals
        self.finals = grown
        self.final_step = np.concatenate([self.final_step, np.full_like(self.final_step, -1)], axis=1)
        return size

    # ---- reading --------------------------------------------------------------------------------------------
    def sample(self, batch_size: int, rng: AgentRNG, groups: Optional[torch.Tensor] = None,
               step: Optional[torch.Tensor] = None) -> Batch:
        if groups is not None or self.priorities is not None:
            raise ValueError("image replay samples a member's own group, uniformly")
        idx = (self.start + rng.randint(self.count, batch_size)) % self.capacity  # [M, B]
        g = self.member_group.view(-1, 1)
        return self._gather(g, idx, self.writer[g, idx] == self.member_id.view(-1, 1))

    def observations(self, g: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The observations and next observations of rows ``idx`` [M, B] of groups ``g`` [M, 1], uint8
        [M, B, *obs_shape] each."""
        d, n, c = self.depth, self.writers, self.capacity
        age = self.age[g, idx].long()
        back = torch.arange(d - 1, -1, -1, device=self.device)  # oldest unit first
        rows = (idx.unsqueeze(-1) - torch.minimum(back, age.unsqueeze(-1)) * n) % c  # [M, B, D]
        units = self.units[g.unsqueeze(-1), rows]  # [M, B, D, *unit]
        ended = self.ended[g, idx].squeeze(-1) > 0
        newest = torch.where(ended.view(*ended.shape, *([1] * len(self.unit_shape))),
                             self.finals[g, self.final_slot[g, idx]], self.units[g, (idx + n) % c])
        if d == 1:
            return units.squeeze(2), newest
        return units, torch.cat([units[:, :, 1:], newest.unsqueeze(2)], dim=2)

    def _gather(self, g: torch.Tensor, idx: torch.Tensor, own: torch.Tensor) -> Batch:
        obs, next_obs = self.observations(g, idx)
        beh = (self.behaviour_mean[g, idx], self.behaviour_std[g, idx]) if self.behaviour_mean is not None \
            else (None, None)
        probs = self.behaviour_probs[g, idx] if self.behaviour_probs is not None else None
        return Batch(obs, self.action[g, idx], self.reward[g, idx], next_obs, self.not_done[g, idx], own, *beh,
                     behaviour_probs=probs)

    # ---- checkpoints ----------------------------------------------------------------------------------------
    def state_dict(self, groups: slice = slice(None)) -> dict:
        state = super().state_dict(groups)
        rows = min(self.size + self.writers, self.capacity)  # the next row's unit is written ahead
        state["arrays"]["units"] = self.units[groups, :rows].cpu().clone()
        members = self._members(groups)
        state["images"] = {"finals": self.finals[groups].cpu().clone(), "final_slot": self.final_slot[groups, :rows]
                           .cpu().clone(), "final_step": torch.from_numpy(self.final_step[groups].copy()),
                           "final_next": torch.from_numpy(self.final_next[groups].copy()), "steps": self.steps,
                           "next_age": torch.from_numpy(self.next_age[members].copy())}
        return state

    def load_state_dict(self, state: dict, groups: slice = slice(None)) -> None:
        arrays = dict(state["arrays"])
        units = arrays.pop("units")
        super().load_state_dict({**state, "arrays": arrays}, groups)
        self.units[groups, :units.shape[1]] = units.to(self.device)
        im = state["images"]
        while self.finals.shape[1] < im["finals"].shape[1]:
            self.grow_finals()
        size = im["finals"].shape[1]
        self.finals[groups, :size] = im["finals"].to(self.device)
        self.final_slot[groups, :im["final_slot"].shape[1]] = im["final_slot"].to(self.device)
        self.final_step[groups] = -1
        self.final_step[groups, :size] = im["final_step"].numpy()
        self.final_next[groups] = im["final_next"].numpy()
        self.steps = int(im["steps"])
        self.next_age[self._members(groups)] = im["next_age"].numpy()
        full = self.size == self.capacity
        self.start.fill_((self.ptr + self.depth * self.writers) % self.capacity if full else 0)
        self.count.fill_(self.size - self.depth * self.writers if full else self.size)

    @staticmethod
    def bytes_for(unit_bytes: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False,
                  behaviour_width: int = 0) -> int:
        """Memory one group holds: a unit a row, its age and final slot, and the rows' other fields (the finals'
        ring, a unit per stored episode, comes on top)."""
        return capacity * unit_bytes + capacity * 12 + SharedReplayBuffer.bytes_for(0, act_dim, capacity,
                                                                                    gaussian_behaviour,
                                                                                    behaviour_width)

    def nbytes(self) -> int:
        return super().nbytes() + self.finals.numel() + self.final_slot.numel() * 8


class ImageLearner(Learner):
    """``Learner`` for agents with an image encoder: image replay (each frame once), actions from the encoder's
    features, evaluation with a copy of the encoders and actors."""

    def __init__(self, algorithm: str, algo: dict, member_seeds: list[int], num_agents: int, obs_shape, *args,
                 stacked: bool = True, **kwargs):
        self.stacked = bool(stacked)
        super().__init__(algorithm, algo, member_seeds, num_agents, tuple(obs_shape), *args, **kwargs)
        self.eval_encoder = copy.deepcopy(self.agents.encoder).requires_grad_(False)
        # --siamese: the period's sum of the auxiliary loss per member (read at evaluations, NaN before updates)
        self.siamese_sum = torch.zeros(self.members, dtype=torch.float64, device=self.device) \
            if self.agents.siamese is not None else None

    def make_agents(self, algorithm: str, algo: dict, discrete: bool, *args):
        return (IMAGE_DISCRETE if discrete else IMAGE)[algorithm](*args, **algo)

    def make_buffer(self, obs_shape, act_dim, buffer_size, n_step, gamma, sequences, prioritized):
        w = self.scheme.writers
        capacity = buffer_size - buffer_size % w
        unit = int(np.prod(obs_shape[1:] if self.stacked else obs_shape))
        self.check_memory(ImageReplayBuffer.bytes_for(unit, act_dim, 1, self.agents.gaussian_behaviour,
                                                      self.agents.behaviour_width), capacity)
        return ImageReplayBuffer(obs_shape, self.stacked, act_dim, capacity, w, self.device, groups=self.scheme.groups,
                                 gaussian_behaviour=self.agents.gaussian_behaviour,
                                 behaviour_width=self.agents.behaviour_width)

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
        """The encoders and actors as they are now, as a policy for evaluation (images [M, E, C, H, W])."""
        torch._foreach_copy_(list(self.eval_actor.parameters()), list(self.agents.actor.parameters()))
        torch._foreach_copy_(list(self.eval_encoder.parameters()), list(self.agents.encoder.parameters()))
        actor, encoder, device = self.eval_actor, self.eval_encoder, self.device

        @torch.no_grad()
        def policy(obs: np.ndarray) -> np.ndarray:
            return actor(encoder(torch.as_tensor(obs, device=device))).cpu().numpy()
        return policy
