"""Replay buffers: one per group of agents, each transition tagged with its writer.

A DASE run has one group (its N agents share one buffer); S seeds in one process are S groups
stored as one [S, capacity, ...] array, so seed s's buffer is exactly the buffer of running seed s
alone; DPD gives every learner a group of its own.

N-step returns (``n_step`` > 1): a group's rows are whole steps (writer w of step k at row k * writers + w, the
capacity a multiple of ``writers``), so the next transition of the same writer is ``writers`` rows on, across the
ring's wrap-around. A sampled row i then gives

    reward = sum_{k <= j} gamma^k r_{i+k}, next_obs = s'_{i+j}, not_done = 1 - terminated_{i+j}, discount = gamma^(j+1)

where j < n_step stops at the first step that ended its episode (terminated: no bootstrap; truncated by a time
limit: bootstraps from its real last state) or at the newest stored step.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from algorithms.common.nets import AgentRNG
from algorithms.replay.base import Batch


class SharedReplayBuffer:
    """Preallocated float32 ring buffers: ``groups`` of ``capacity`` transitions each, on ``device``.

    Members (agents) are numbered group by group, ``writers`` per group (the agents that write into that
    group: a seed's N agents for DASE, one learner for DPD). Every environment step
    appends one transition per member to its group's ring (``writers`` rows per group); every
    member samples its own B indices uniformly from everything its group stored, whoever wrote it.
    ``sample(..., groups=peer)`` lets a member read another group (DPD distils on a peer's states).
    """

    FIELDS: tuple[str, ...] = ("obs", "action", "reward", "next_obs", "not_done", "ended", "writer", "behaviour_mean", "behaviour_std",
              "behaviour_probs")

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, writers: int,
                 device: torch.device | str = "cpu", gaussian_behaviour: bool = False, groups: int = 1,
                 behaviour_width: int = 0, n_step: int = 1, gamma: float = 0.99, sequences: bool = False,
                 prioritized: dict | None = None):
        if capacity < writers:
            raise ValueError(f"capacity {capacity} is smaller than one step of {writers} agents")
        if n_step > 1 and capacity % writers:
            raise ValueError(f"N-step sampling needs whole steps: capacity {capacity} is not a multiple of {writers}")
        self.capacity, self.writers, self.groups = int(capacity), int(writers), int(groups)
        self.device = torch.device(device)
        g, c = self.groups, self.capacity
        f32: dict[str, Any] = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros((g, c, obs_dim), **f32)
        self.action = torch.zeros((g, c, act_dim), **f32)
        self.reward = torch.zeros((g, c, 1), **f32)
        self.next_obs = torch.zeros((g, c, obs_dim), **f32)
        self.not_done = torch.zeros((g, c, 1), **f32)
        self.ended = torch.zeros((g, c, 1), **f32)  # 1: the episode ended here (terminated or truncated)
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
        self.n_step = int(n_step)
        self.sequences = bool(sequences)  # V-trace: batches carry their N steps too (Batch.sequence)
        # the first row of the newest step, on the device (N-step sampling reads it; no host value)
        self.newest = torch.zeros((), dtype=torch.int64, device=self.device)
        self.powers = torch.tensor([float(gamma) ** k for k in range(self.n_step + 1)], **f32)  # gamma^k
        self.stager = Stager(self.device)  # the per-step copy to the device
        members = g * self.writers
        self.member_group = torch.arange(members, device=self.device) // self.writers  # [M]
        self.member_id = (torch.arange(members, device=self.device) % self.writers).to(torch.int16)  # [M]
        # prioritized replay: each member's priorities over its group's rows (utils/run/replay/priority.py), beta annealed
        # from ``beta`` to 1 over ``beta_steps`` environment steps
        self.priorities = self.per = None
        if prioritized:
            from .priority import Priorities

            self.per = dict(prioritized)
            # blocks of 256 rows: for 1e6 rows about half the cost of 1024 (measured: 3.5 vs 7.3 ms per sample,
            # weights and update of 2 agents, B = 256, one CPU thread); for 2e4 rows the same (2.5 vs 2.7 ms)
            self.priorities = Priorities(members, self.capacity, self.device, alpha=self.per["alpha"],
                                         eps=self.per["eps"], block=256)

    def __len__(self) -> int:
        return self.size

    def add(self, obs, action, reward, next_obs, terminated, behaviour: tuple | None = None,
            ended=None) -> None:
        """Append one transition per member; arrays [M, ...]. Only ``terminated`` stops bootstrapping; ``ended``
        (terminated or truncated; default: terminated) cuts N-step returns."""
        rows = (self.ptr + torch.arange(self.writers, device=self.device)) % self.capacity
        g, n = self.groups, self.writers

        fields: list[torch.Tensor] = [self.obs, self.action, self.reward, self.next_obs, self.not_done, self.ended]
        values = [obs, action, reward, next_obs, 1.0 - np.asarray(terminated, dtype=np.float32),
                  np.asarray(terminated if ended is None else ended, dtype=np.float32)]
        if self.behaviour_mean is not None and self.behaviour_std is not None and behaviour is not None:
            fields += [self.behaviour_mean, self.behaviour_std]
            values += list(behaviour)
        if self.behaviour_probs is not None and behaviour is not None:
            fields.append(self.behaviour_probs)
            values += list(behaviour)
        columns = [np.asarray(v, dtype=np.float32).reshape(g * n, -1) for v in values]
        staged = self.stager(columns)
        col = 0
        for dst, c in zip(fields, columns):
            dst[:, rows] = staged[:, col:col + c.shape[1]].reshape((g, n) + tuple(dst.shape[2:]))
            col += c.shape[1]
        self.writer[:, rows] = self.member_id.view(g, n)
        if self.behaviour_mean is not None and self.behaviour_std is not None and behaviour is None:
            # uniform random actions: stand in a broad N(0, 1) in pre-tanh space
            self.behaviour_mean[:, rows] = 0.0
            self.behaviour_std[:, rows] = 1.0
        if self.behaviour_probs is not None and behaviour is None:
            self.behaviour_probs[:, rows] = 1.0 / self.behaviour_probs.shape[-1]  # uniform random actions
        if self.priorities is not None:
            self.priorities.add(rows)  # new rows at each member's highest priority so far
        self.newest.fill_(self.ptr)
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.filled.fill_(self.size)

    def sample(self, batch_size: int, rng: AgentRNG, groups: torch.Tensor | None = None,
               step: torch.Tensor | None = None) -> Batch:
        """Each member draws its own ``batch_size`` indices from its group (or from ``groups[m]``): uniformly, or
        by its priorities (prioritized replay, own group only; ``step``: the environment step, for beta).

        Fields come back [M, B, ...]; ``own`` marks rows the sampling member wrote itself.
        """
        if self.priorities is not None and groups is None:
            idx = self.priorities.sample(rng, batch_size, self.filled)
            g = self.member_group.view(-1, 1)
            batch = self._gather(g, idx, self.writer[g, idx] == self.member_id.view(-1, 1))
            batch.index, batch.importance = idx, self.priorities.weights(idx, self.filled, self.beta(step))
            return batch
        idx = rng.randint(self.filled, batch_size)  # [M, B]
        reading_own_group = groups is None
        g = (self.member_group if groups is None else groups).view(-1, 1)
        own = self.writer[g, idx] == self.member_id.view(-1, 1)
        if not reading_own_group:
            own = own & (g == self.member_group.view(-1, 1))
        return self._gather(g, idx, own)

    def beta(self, step: torch.Tensor | None) -> torch.Tensor:
        """Prioritized replay's importance exponent at ``step`` (a device tensor): beta0 -> 1 linearly."""
        if self.per is None:
            raise RuntimeError("beta: the buffer has no prioritized replay")
        b0, steps = float(self.per["beta"]), max(1, int(self.per["beta_steps"]))
        if step is None:
            return torch.tensor(b0, device=self.device)
        return (b0 + (1.0 - b0) * step.to(torch.float32) / steps).clamp(max=1.0)

    def update_priorities(self, batch: Batch, td_error: torch.Tensor) -> None:
        """Prioritized replay: the sampled rows' priorities from their |TD errors|."""
        if self.priorities is None or batch.index is None:
            raise RuntimeError("update_priorities: the buffer has no prioritized replay, or the batch no rows")
        self.priorities.update(batch.index, td_error.squeeze(-1))

    def sample_writers(self, batch_size: int, rng: AgentRNG, choices: torch.Tensor,
                       counts: torch.Tensor | None) -> Batch:
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
        mean = self.behaviour_mean[g, idx] if self.behaviour_mean is not None else None  # Gaussian SAC: both
        std = self.behaviour_std[g, idx] if self.behaviour_std is not None else None
        probs = self.behaviour_probs[g, idx] if self.behaviour_probs is not None else None
        if self.n_step > 1:
            reward, next_obs, not_done, discount, sequence = n_step_returns(self, g, idx)
            return Batch(self.obs[g, idx], self.action[g, idx], reward, next_obs, not_done, own, behaviour_mean=mean,
                         behaviour_std=std, behaviour_probs=probs, discount=discount, sequence=sequence)
        return Batch(self.obs[g, idx], self.action[g, idx], self.reward[g, idx], self.next_obs[g, idx],
                     self.not_done[g, idx], own, behaviour_mean=mean, behaviour_std=std, behaviour_probs=probs)

    def state_dict(self, groups: slice = slice(None)) -> dict:
        """Some groups' stored rows (only the filled part, [G, size, ...]) and the write pointer, on the CPU."""
        arrays = {k: getattr(self, k)[groups, : self.size].cpu().clone() for k in self.FIELDS
                  if getattr(self, k) is not None}
        state = {"arrays": arrays, "ptr": self.ptr, "size": self.size, "capacity": self.capacity}
        if self.priorities is not None:
            state["priorities"] = self.priorities.state_dict(self._members(groups))
        return state

    def _members(self, groups: slice) -> slice:
        """The members of the groups ``groups``."""
        start = 0 if groups.start is None else groups.start * self.writers
        stop = None if groups.stop is None else groups.stop * self.writers
        return slice(start, stop)

    def load_state_dict(self, state: dict, groups: slice = slice(None)) -> None:
        """Restore groups from ``state_dict``; all groups of a buffer share pointer and size."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity {state['capacity']} != {self.capacity}")
        for k, v in state["arrays"].items():
            getattr(self, k)[groups, : state["size"]] = v.to(self.device)
        self.ptr, self.size = int(state["ptr"]), int(state["size"])
        self.filled.fill_(self.size)
        self.newest.fill_((self.ptr - self.writers) % self.capacity)
        if self.priorities is not None:
            self.priorities.load_state_dict(state["priorities"], self._members(groups))

    @staticmethod
    def bytes_for(obs_dim: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False,
                  behaviour_width: int = 0) -> int:
        """Memory one group of this shape holds: float32 s, a, r, s', not_done, ended (+ mean, std; + probabilities),
        int16 writer."""
        floats = 2 * obs_dim + act_dim + 3 + (2 * act_dim if gaussian_behaviour else 0) + behaviour_width
        return capacity * (4 * floats + 2)

    def nbytes(self) -> int:
        """Memory held by the buffer's arrays (all groups)."""
        arrays = [getattr(self, k) for k in self.FIELDS]
        return sum(a.numel() * a.element_size() for a in arrays if a is not None)


class Stager:
    """A step's fields side by side [M, F] on the device. On a GPU: one copy from pinned memory (a pageable copy
    would stall the host), after the previous step's copy has finished reading it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pinned: torch.Tensor | None = None  # the host side of the copy

    def __call__(self, columns: list[np.ndarray]) -> torch.Tensor:
        width = sum(c.shape[1] for c in columns)
        if self.device.type != "cuda":
            return torch.from_numpy(np.concatenate(columns, axis=1))
        if self.pinned is None or self.pinned.shape[1] != width:
            self.pinned = torch.empty((columns[0].shape[0], width), dtype=torch.float32, pin_memory=True)
            self.staged = torch.empty(self.pinned.shape, dtype=torch.float32, device=self.device)
            self.copied = torch.cuda.Event()
        self.copied.synchronize()
        np.concatenate(columns, axis=1, out=self.pinned.numpy())
        self.staged.copy_(self.pinned, non_blocking=True)
        self.copied.record()
        return self.staged


def n_step_returns(buffer: SharedReplayBuffer, g: torch.Tensor, idx: torch.Tensor) -> tuple:
    """The N-step reward, next state, not_done and discount of rows ``idx`` [M, B] of ``buffer`` (see the module's
    docstring), and the steps themselves when the buffer keeps sequences (else None); element-wise ops and
    gathers of fixed shapes only (no host value: CUDA graphs)."""
    n, w, c = buffer.n_step, buffer.writers, buffer.capacity
    k = torch.arange(n, device=buffer.device)
    rows = (idx.unsqueeze(-1) + k * w) % c  # [M, B, n]: the writer's next n rows
    g3 = g.unsqueeze(-1)
    # steps stored after the sampled one: the sequence may not run past the newest step
    after = torch.remainder(buffer.newest - (idx - idx % w), c) // w  # [M, B]
    stored = (k <= after.unsqueeze(-1)).to(torch.float32)
    ended = buffer.ended[g3, rows].squeeze(-1)  # [M, B, n]
    alive = torch.cumprod(torch.cat([torch.ones_like(ended[..., :1]), 1.0 - ended[..., :-1]], dim=-1), dim=-1)
    used = alive * torch.cumprod(stored, dim=-1)  # 1 for the steps the return sums
    reward = (used * buffer.powers[:n] * buffer.reward[g3, rows].squeeze(-1)).sum(-1, keepdim=True)
    last = used.sum(-1).long() - 1  # j: the step whose next state bootstraps
    end = rows.gather(-1, last.unsqueeze(-1)).squeeze(-1)
    sequence = None
    if buffer.sequences:
        sequence = {"obs": buffer.obs[g3, rows], "action": buffer.action[g3, rows],
                    "reward": buffer.reward[g3, rows].squeeze(-1), "next_obs": buffer.next_obs[g3, rows],
                    "not_done": buffer.not_done[g3, rows].squeeze(-1), "used": used}
        if buffer.behaviour_mean is not None and buffer.behaviour_std is not None:
            sequence.update(behaviour_mean=buffer.behaviour_mean[g3, rows], behaviour_std=buffer.behaviour_std[g3, rows])
    return reward, buffer.next_obs[g, end], buffer.not_done[g, end], buffer.powers[last + 1].unsqueeze(-1), sequence
