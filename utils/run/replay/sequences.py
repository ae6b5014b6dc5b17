"""Sequence replay for recurrent learners (``--seq_encoder``): the rows of ``SharedReplayBuffer`` plus, per row,
whether an episode starts there and the writer's recurrent state before it acted there (R2D2's stored state).

Rows are whole steps (writer w of step k at row k * writers + w), so a writer's window of L consecutive steps is
the rows (k + j) * writers + w, j < L, across the ring's wrap-around. A member draws a window's first step
uniformly among the steps whose L steps are all stored (none past the newest step, none overwritten), then, in a
shared buffer (DASE), the writer uniformly among its group's writers: every stored step of every writer is equally
likely to start a window, as every row is equally likely in one-step replay. Windows may run across an episode's
end: the step after it is marked as a start, where the learner zeroes the state, as acting did; nothing of the
old episode reaches the new one.

Prioritized (``--prioritized``): a row's priority is that of the window starting there, R2D2's
eta * max + (1 - eta) * mean of the window's |TD errors| (eta = 0.9), raised to alpha as in one-step prioritized
replay. A row becomes drawable (at the largest priority so far) when the last step of its window is stored; the
newest L - 1 steps' rows hold priority 0. Each window's importance weight applies to all of its steps.
"""
from __future__ import annotations

import numpy as np
import torch

from algorithms.common.nets import AgentRNG
from algorithms.replay.base import Batch

from .buffer import SharedReplayBuffer

ETA = 0.9  # R2D2's mix of a window's largest and mean |TD error| in its priority


class SequenceReplayBuffer(SharedReplayBuffer):
    """``SharedReplayBuffer`` with stored states and episode starts, sampled in windows of ``seq_len`` steps."""

    FIELDS = SharedReplayBuffer.FIELDS + ("first", "state")
    # the distributed learner's rows start mid-episode at every block (marked as starts, with the actor's state):
    # True makes a window restart from the stored state where it crosses a start (zero at a real episode's start)
    restart_from_stored = False

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, writers: int, device, *, seq_len: int,
                 state_size: int, groups: int = 1, gaussian_behaviour: bool = False, behaviour_width: int = 0,
                 prioritized: dict | None = None, eta: float = ETA):
        if capacity % writers:
            raise ValueError(f"sequence replay needs whole steps: capacity {capacity} is not a multiple of {writers}")
        if capacity // writers < seq_len:
            raise ValueError(f"a buffer of {capacity // writers} steps cannot hold a window of {seq_len}")
        super().__init__(obs_dim, act_dim, capacity, writers, device, gaussian_behaviour, groups=groups,
                         behaviour_width=behaviour_width, prioritized=prioritized)
        self.seq_len, self.eta = int(seq_len), float(eta)
        self.first = torch.zeros((self.groups, self.capacity, 1), dtype=torch.float32, device=self.device)
        self.state = torch.zeros((self.groups, self.capacity, state_size), dtype=torch.float32, device=self.device)

    def add(self, obs, action, reward, next_obs, terminated, behaviour: tuple | None = None, ended=None, *,
            state: torch.Tensor | None = None, first=None) -> None:
        """One step per member (see ``SharedReplayBuffer.add``), with each member's state before it acted [M, S]
        and whether its episode started at this step [M] (both required)."""
        if state is None or first is None:
            raise TypeError("SequenceReplayBuffer.add needs each member's state and episode starts (state=, first=)")
        g, n = self.groups, self.writers
        rows = (self.ptr + torch.arange(n, device=self.device)) % self.capacity
        self.state[:, rows] = state.to(self.device, torch.float32).reshape(g, n, -1)
        self.first[:, rows] = torch.as_tensor(np.asarray(first, dtype=np.float32), device=self.device).view(g, n, 1)
        super().add(obs, action, reward, next_obs, terminated, behaviour, ended)
        if self.priorities is not None:
            # a row is a window's first step: drawable once the window's L steps are all stored. The new step's rows
            # are not (yet), the rows of the step L - 1 before it just became so (at the largest priority so far)
            self.priorities.clear(rows)
            if self.size >= self.seq_len * n:
                ready = (rows - (self.seq_len - 1) * n) % self.capacity
                self.priorities.add(ready)

    def window_rows(self, batch_size: int, rng: AgentRNG) -> torch.Tensor:
        """Each member's ``batch_size`` windows as rows of its group [M, B, L] (see the module's docstring)."""
        w, steps, length = self.writers, self.capacity // self.writers, self.seq_len
        stored = self.filled // w
        offset = rng.randint(stored - (length - 1), batch_size)  # the window's first step, oldest = 0
        oldest = torch.where(self.filled == self.capacity, self.newest // w + 1, 0)
        start = (oldest + offset) % steps  # [M, B]
        writer = rng.randint(w, batch_size) if w > 1 else torch.zeros_like(start)
        k = torch.arange(length, device=self.device)
        return ((start.unsqueeze(-1) + k) % steps) * w + writer.unsqueeze(-1)

    def sample(self, batch_size: int, rng: AgentRNG, groups: torch.Tensor | None = None,
               step: torch.Tensor | None = None) -> Batch:
        """Windows [M, B, L, ...] of each member's own group; ``own`` [M, B, L] marks its own steps, ``sequence``
        holds ``first`` [M, B, L] and the stored ``state`` [M, B, S] before each window's first step."""
        if groups is not None:
            raise ValueError("sequence replay samples a member's own group only")
        index = importance = None
        if self.priorities is None:
            rows = self.window_rows(batch_size, rng)
        else:  # a window's first row by its priority; the window's rows follow it, one step apart
            index = self.priorities.sample(rng, batch_size, self.filled)  # [M, B]
            importance = self.priorities.weights(index, self.filled, self.beta(step))
            w, k = self.writers, torch.arange(self.seq_len, device=self.device)
            rows = ((index // w).unsqueeze(-1) + k) % (self.capacity // w) * w + (index % w).unsqueeze(-1)
        g = self.member_group.view(-1, 1, 1)
        own = self.writer[g, rows] == self.member_id.view(-1, 1, 1)
        mean = self.behaviour_mean[g, rows] if self.behaviour_mean is not None else None  # Gaussian SAC: both
        std = self.behaviour_std[g, rows] if self.behaviour_std is not None else None
        probs = self.behaviour_probs[g, rows] if self.behaviour_probs is not None else None
        sequence = {"first": self.first[g, rows].squeeze(-1), "state": self.state[g.squeeze(-1), rows[..., 0]],
                    "ended": self.ended[g, rows].squeeze(-1)}
        if self.restart_from_stored:
            sequence["restart"] = self.state[g, rows]
        return Batch(self.obs[g, rows], self.action[g, rows], self.reward[g, rows], self.next_obs[g, rows],
                     self.not_done[g, rows], own, behaviour_mean=mean, behaviour_std=std, behaviour_probs=probs,
                     sequence=sequence, index=index, importance=importance)

    def update_priorities(self, batch: Batch, td_error: torch.Tensor) -> None:
        """R2D2's priority of a window from the |TD errors| of its trained steps (td_error [M, B * T, 1], window by
        window): eta * max + (1 - eta) * mean."""
        if self.priorities is None or batch.index is None:
            raise RuntimeError("update_priorities: the buffer has no prioritized replay, or the batch no rows")
        m, b = batch.index.shape
        td = td_error.reshape(m, b, -1)
        self.priorities.update(batch.index, self.eta * td.amax(-1) + (1.0 - self.eta) * td.mean(-1))

    @staticmethod
    def bytes_for(obs_dim: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False,
                  behaviour_width: int = 0, state_size: int = 0) -> int:
        """Memory of one group: the one-step rows plus a start flag and a state per row."""
        return SharedReplayBuffer.bytes_for(obs_dim, act_dim, capacity, gaussian_behaviour, behaviour_width) \
            + capacity * 4 * (1 + state_size)
