"""One replay buffer shared by all agents of a run, each transition tagged with its writer."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from algorithms.base import Batch
from algorithms.nets import AgentRNG


class SharedReplayBuffer:
    """Preallocated float32 ring buffer of ``capacity`` transitions on ``device``.

    Every environment step appends one transition per agent (N rows); every agent samples
    its own B indices uniformly from everything stored, whoever wrote it.
    """

    def __init__(self, obs_dim: int, act_dim: int, capacity: int, num_agents: int,
                 device: torch.device | str = "cpu", gaussian_behaviour: bool = False):
        if capacity < num_agents:
            raise ValueError(f"capacity {capacity} is smaller than one step of {num_agents} agents")
        self.capacity, self.num_agents = int(capacity), int(num_agents)
        self.device = torch.device(device)
        f32 = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros((capacity, obs_dim), **f32)
        self.action = torch.zeros((capacity, act_dim), **f32)
        self.reward = torch.zeros((capacity, 1), **f32)
        self.next_obs = torch.zeros((capacity, obs_dim), **f32)
        self.not_done = torch.zeros((capacity, 1), **f32)
        self.writer = torch.zeros((capacity,), dtype=torch.int16, device=self.device)
        self.behaviour_mean = torch.zeros((capacity, act_dim), **f32) if gaussian_behaviour else None
        self.behaviour_std = torch.ones((capacity, act_dim), **f32) if gaussian_behaviour else None
        self.ptr = 0
        self.size = 0
        self._agent_ids = torch.arange(num_agents, device=self.device)

    def __len__(self) -> int:
        return self.size

    def add(self, obs, action, reward, next_obs, terminated, behaviour: Optional[tuple] = None) -> None:
        """Append one transition per agent; arrays [N, ...]. Only ``terminated`` stops bootstrapping."""
        rows = (self.ptr + torch.arange(self.num_agents, device=self.device)) % self.capacity

        def put(dst: torch.Tensor, src) -> None:
            dst[rows] = torch.as_tensor(np.asarray(src), dtype=dst.dtype).reshape(dst[rows].shape).to(self.device)

        put(self.obs, obs)
        put(self.action, action)
        put(self.reward, reward)
        put(self.next_obs, next_obs)
        put(self.not_done, 1.0 - np.asarray(terminated, dtype=np.float32))
        self.writer[rows] = self._agent_ids.to(torch.int16)
        if self.behaviour_mean is not None:
            if behaviour is None:  # uniform random actions: stand in a broad N(0, 1) in pre-tanh space
                self.behaviour_mean[rows] = 0.0
                self.behaviour_std[rows] = 1.0
            else:
                put(self.behaviour_mean, behaviour[0])
                put(self.behaviour_std, behaviour[1])
        self.ptr = (self.ptr + self.num_agents) % self.capacity
        self.size = min(self.size + self.num_agents, self.capacity)

    def sample(self, batch_size: int, rng: AgentRNG) -> Batch:
        """Each agent draws its own ``batch_size`` indices: fields come back [N, B, ...]."""
        idx = rng.randint(self.size, batch_size)  # [N, B]
        own = self.writer[idx] == self._agent_ids.view(-1, 1).to(torch.int16)
        beh = (self.behaviour_mean[idx], self.behaviour_std[idx]) if self.behaviour_mean is not None else (None, None)
        return Batch(self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx],
                     self.not_done[idx], own, *beh)

    FIELDS = ("obs", "action", "reward", "next_obs", "not_done", "writer", "behaviour_mean", "behaviour_std")

    def state_dict(self) -> dict:
        """The stored rows (only the filled part) and the write pointer, as CPU tensors."""
        arrays = {k: getattr(self, k)[: self.size].cpu().clone() for k in self.FIELDS if getattr(self, k) is not None}
        return {"arrays": arrays, "ptr": self.ptr, "size": self.size, "capacity": self.capacity}

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"buffer capacity {state['capacity']} != {self.capacity}")
        for k, v in state["arrays"].items():
            getattr(self, k)[: state["size"]] = v.to(self.device)
        self.ptr, self.size = int(state["ptr"]), int(state["size"])

    @staticmethod
    def bytes_for(obs_dim: int, act_dim: int, capacity: int, gaussian_behaviour: bool = False) -> int:
        """Memory a buffer of this shape holds: float32 s, a, r, s', not_done (+ mean, std), int16 writer."""
        floats = 2 * obs_dim + act_dim + 2 + (2 * act_dim if gaussian_behaviour else 0)
        return capacity * (4 * floats + 2)

    def nbytes(self) -> int:
        """Memory held by the buffer's arrays."""
        arrays = [self.obs, self.action, self.reward, self.next_obs, self.not_done, self.writer,
                  self.behaviour_mean, self.behaviour_std]
        return sum(a.numel() * a.element_size() for a in arrays if a is not None)
