"""Replay buffers: one per group of agents, each transition tagged with its writer.

A DASE run has one group (its N agents share one buffer); S seeds in one process are S groups
stored as one [S, capacity, ...] array, so seed s's buffer is exactly the buffer of running seed s
alone; DPD gives every learner a group of its own.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from algorithms.base import Batch
from algorithms.nets import AgentRNG


class SharedReplayBuffer:
    """Preallocated float32 ring buffers: ``groups`` of ``capacity`` transitions each, on ``device``.

    Members (agents) are numbered group by group, ``writers`` per group (the agents that write into that
    group: a seed's N agents for DASE, one learner for DPD). Every environment step
    appends one transition per member to its group's ring (``writers`` rows per group); every
    member samples its own B indices uniformly from everything its group stored, whoever wrote it.
    ``sample(..., groups=peer)`` lets a member read another group (DPD distils on a peer's states).
    """

    FIELDS = ("obs", "action", "reward", "next_obs", "not_done", "writer", "behaviour_mean", "behaviour_std",
              "behaviour_probs")

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, writers: int,
                 device: torch.device | str = "cpu", gaussian_behaviour: bool = False, groups: int = 1,
                 behaviour_width: int = 0):
        if capacity < writers:
            raise ValueError(f"capacity {capacity} is smaller than one step of {writers} agents")
        self.capacity, self.writers, self.groups = int(capacity), int(writers), int(groups)
        self.device = torch.device(device)
        g, c = self.groups, self.capacity
        f32 = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros((g, c, obs_dim), **f32)
        self.action = torch.zeros((g, c, act_dim), **f32)
        self.reward = torch.zeros((g, c, 1), **f32)
        self.next_obs = torch.zeros((g, c, obs_dim), **f32)
        self.not_done = torch.zeros((g, c, 1), **f32)
        self.writer = torch.zeros((g, c), dtype=torch.int16, device=self.device)
        self.behaviour_mean = torch.zeros((g, c, act_dim), **f32) if gaussian_behaviour else None
        self.behaviour_std = torch.ones((g, c, act_dim), **f32) if gaussian_behaviour else None
        # discrete actions (stored as their index in a width-1 action column): the probabilities the writer acted with
        self.behaviour_probs = torch.full((g, c, behaviour_width), 1.0 / behaviour_width, **f32) if behaviour_width \
            else None
        self.ptr = 0
        self.size = 0
        # the size on the device too: sampling reads it there, so it needs no host value (CUDA graphs)
        self.filled = torch.zeros((), dtype=torch.int64, device=self.device)
        self._pinned: torch.Tensor | None = None  # GPU: the host side of the per-step copy
        members = g * self.writers
        self.member_group = torch.arange(members, device=self.device) // self.writers  # [M]
        self.member_id = (torch.arange(members, device=self.device) % self.writers).to(torch.int16)  # [M]

    def __len__(self) -> int:
        return self.size

    def add(self, obs, action, reward, next_obs, terminated, behaviour: Optional[tuple] = None) -> None:
        """Append one transition per member; arrays [M, ...]. Only ``terminated`` stops bootstrapping."""
        rows = (self.ptr + torch.arange(self.writers, device=self.device)) % self.capacity
        g, n = self.groups, self.writers

        fields = [self.obs, self.action, self.reward, self.next_obs, self.not_done]
        values = [obs, action, reward, next_obs, 1.0 - np.asarray(terminated, dtype=np.float32)]
        if self.behaviour_mean is not None and behaviour is not None:
            fields += [self.behaviour_mean, self.behaviour_std]
            values += list(behaviour)
        if self.behaviour_probs is not None and behaviour is not None:
            fields.append(self.behaviour_probs)
            values += list(behaviour)
        columns = [np.asarray(v, dtype=np.float32).reshape(g * n, -1) for v in values]
        staged = self._to_device(columns)
        col = 0
        for dst, c in zip(fields, columns):
            dst[:, rows] = staged[:, col:col + c.shape[1]].reshape((g, n) + tuple(dst.shape[2:]))
            col += c.shape[1]
        self.writer[:, rows] = self.member_id.view(g, n)
        if self.behaviour_mean is not None and behaviour is None:
            # uniform random actions: stand in a broad N(0, 1) in pre-tanh space
            self.behaviour_mean[:, rows] = 0.0
            self.behaviour_std[:, rows] = 1.0
        if self.behaviour_probs is not None and behaviour is None:
            self.behaviour_probs[:, rows] = 1.0 / self.behaviour_probs.shape[-1]  # uniform random actions
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.filled.fill_(self.size)

    def _to_device(self, columns: list[np.ndarray]) -> torch.Tensor:
        """The step's fields side by side [M, F] on the device. On a GPU: one copy from pinned memory (a
        pageable copy would stall the host), after the previous step's copy has finished reading it."""
        width = sum(c.shape[1] for c in columns)
        if self.device.type != "cuda":
            return torch.from_numpy(np.concatenate(columns, axis=1))
        if self._pinned is None or self._pinned.shape[1] != width:
            self._pinned = torch.empty((columns[0].shape[0], width), dtype=torch.float32, pin_memory=True)
            self._staged = torch.empty(self._pinned.shape, dtype=torch.float32, device=self.device)
            self._copied = torch.cuda.Event()
        self._copied.synchronize()
        np.concatenate(columns, axis=1, out=self._pinned.numpy())
        self._staged.copy_(self._pinned, non_blocking=True)
        self._copied.record()
        return self._staged

    def sample(self, batch_size: int, rng: AgentRNG, groups: Optional[torch.Tensor] = None) -> Batch:
        """Each member draws its own ``batch_size`` indices from its group (or from ``groups[m]``).

        Fields come back [M, B, ...]; ``own`` marks rows the sampling member wrote itself.
        """
        idx = rng.randint(self.filled, batch_size)  # [M, B]
        reading_own_group = groups is None
        g = (self.member_group if reading_own_group else groups).view(-1, 1)
        own = self.writer[g, idx] == self.member_id.view(-1, 1)
        if not reading_own_group:
            own = own & (g == self.member_group.view(-1, 1))
        return self._gather(g, idx, own)

    def sample_writers(self, batch_size: int, rng: AgentRNG, choices: torch.Tensor,
                       counts: Optional[torch.Tensor]) -> Batch:
        """Each member draws ``batch_size`` rows of its group written by itself or by the writers it may read:
        a stored step uniformly, then a writer uniformly from ``choices[m, :counts[m]]`` (group-local ids; with
        ``counts`` None, ``choices`` [M, 1] is each member's one writer). Needs a capacity that is a multiple of
        ``writers``: writer w's rows are k * writers + w, so every allowed row is equally likely. One draw per call
        when a member reads one writer, as a lone agent's ``sample`` makes (a graph with no links samples exactly
        what independent agents would)."""
        steps = rng.randint(self.filled // self.writers, batch_size)  # [M, B]
        writer = choices if counts is None else choices.gather(1, rng.randint(counts, batch_size))
        idx = steps * self.writers + writer
        g = self.member_group.view(-1, 1)
        own = self.writer[g, idx] == self.member_id.view(-1, 1)
        return self._gather(g, idx, own)

    def _gather(self, g: torch.Tensor, idx: torch.Tensor, own: torch.Tensor) -> Batch:
        """The rows ``idx`` [M, B] of groups ``g`` [M, 1] as a batch."""
        beh = (self.behaviour_mean[g, idx], self.behaviour_std[g, idx]) if self.behaviour_mean is not None \
            else (None, None)
        probs = self.behaviour_probs[g, idx] if self.behaviour_probs is not None else None
        return Batch(self.obs[g, idx], self.action[g, idx], self.reward[g, idx], self.next_obs[g, idx],
                     self.not_done[g, idx], own, *beh, behaviour_probs=probs)

    def state_dict(self, groups: slice = slice(None)) -> dict:
        """Some groups' stored rows (only the filled part, [G, size, ...]) and the write pointer, on the CPU."""
        arrays = {k: getattr(self, k)[groups, : self.size].cpu().clone() for k in self.FIELDS
                  if getattr(self, k) is not None}
        return {"arrays": arrays, "ptr": self.ptr, "size": self.size, "capacity": self.capacity}

    def load_state_dict(self, state: dict, groups: slice = slice(None)) -> None:
        """Restore groups from ``state_dict``; all groups of a buffer share pointer and size."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity {state['capacity']} != {self.capacity}")
        for k, v in state["arrays"].items():
            getattr(self, k)[groups, : state["size"]] = v.to(self.device)
        self.ptr, self.size = int(state["ptr"]), int(state["size"])
        self.filled.fill_(self.size)

    @staticmethod
    def bytes_for(obs_dim: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False,
                  behaviour_width: int = 0) -> int:
        """Memory one group of this shape holds: float32 s, a, r, s', not_done (+ mean, std; + probabilities),
        int16 writer."""
        floats = 2 * obs_dim + act_dim + 2 + (2 * act_dim if gaussian_behaviour else 0) + behaviour_width
        return capacity * (4 * floats + 2)

    def nbytes(self) -> int:
        """Memory held by the buffer's arrays (all groups)."""
        arrays = [getattr(self, k) for k in self.FIELDS]
        return sum(a.numel() * a.element_size() for a in arrays if a is not None)

