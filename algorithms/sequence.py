"""Sequence encoders for the replay learners (``--seq_encoder``): a representation shared by actor and critics that
carries a recurrent state through an episode, every parameter stacked over the members (see ``nets.py``).

An encoder maps the observation o_t and the state before it, z_{t-1} (zeros at an episode's first step), to the
features x_t = [o_t, h_t] and the next state z_t:

    gru:  h_t = GRUCell(o_t, h_{t-1}),              z_t = h_t
    lstm: (h_t, c_t) = LSTMCell(o_t, (h_{t-1}, c_{t-1})),  z_t = [h_t, c_t]

The observation stays in the features (Advanced-Soft-Actor-Critic's representation does the same): the memory
only has to add what the observation lacks. A state is one tensor [N, B, S] (S = H for gru, 2H for lstm), so a
replay buffer can store it per row. ``BatchedGRUCell`` is N independent ``torch.nn.GRUCell`` (same gates, same
initialisation order and bounds), checked against torch's in tests/test_sequence.py.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from .recurrent import BatchedLSTMCell

ENCODERS = ("gru", "lstm")  # --seq_encoder


class BatchedGRUCell(nn.Module):
    """N GRU cells: x [N, B, in], h [N, B, H] -> h', with (torch's gate order r, z, n)

        r = s(x W_ir + b_ir + h W_hr + b_hr);  z = s(x W_iz + b_iz + h W_hz + b_hz)
        n = tanh(x W_in + b_in + r (h W_hn + b_hn));  h' = (1 - z) n + z h
    """

    def __init__(self, fan_in: int, hidden: int, gens: Sequence[torch.Generator]):
        super().__init__()
        n, bound = len(gens), 1.0 / math.sqrt(hidden)
        w_ih, w_hh = torch.empty(n, 3 * hidden, fan_in), torch.empty(n, 3 * hidden, hidden)
        b_ih, b_hh = torch.empty(n, 3 * hidden), torch.empty(n, 3 * hidden)
        with torch.no_grad():
            for i, g in enumerate(gens):
                for t in (w_ih, w_hh, b_ih, b_hh):
                    t[i].uniform_(-bound, bound, generator=g)
        self.w_ih = nn.Parameter(w_ih.transpose(1, 2).contiguous())  # [N, in, 3H], for x @ W
        self.w_hh = nn.Parameter(w_hh.transpose(1, 2).contiguous())
        self.b_ih = nn.Parameter(b_ih.unsqueeze(1))
        self.b_hh = nn.Parameter(b_hh.unsqueeze(1))

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xr, xz, xn = torch.baddbmm(self.b_ih, x, self.w_ih).chunk(3, dim=-1)
        hr, hz, hn = torch.baddbmm(self.b_hh, h, self.w_hh).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h


class SequenceEncoder(nn.Module):
    """The recurrent representation of N members (see the module's docstring)."""

    def __init__(self, kind: str, obs_dim: int, hidden: int, gens: Sequence[torch.Generator]):
        super().__init__()
        if kind not in ENCODERS:
            raise ValueError(f"unknown sequence encoder {kind!r}; one of {', '.join(ENCODERS)}")
        self.kind, self.hidden, self.obs_dim = kind, int(hidden), int(obs_dim)
        self.cell = BatchedGRUCell(obs_dim, hidden, gens) if kind == "gru" else BatchedLSTMCell(obs_dim, hidden, gens)
        self.state_size = hidden if kind == "gru" else 2 * hidden
        self.features = obs_dim + hidden

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros [N, batch, S] on the parameters' device."""
        w = self.cell.w_hh
        return torch.zeros(w.shape[0], batch, self.state_size, dtype=w.dtype, device=w.device)

    def _cell(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        if self.kind == "gru":
            return self.cell(obs, state)
        h, c = self.cell(obs, (state[..., :self.hidden], state[..., self.hidden:]))
        return torch.cat([h, c], dim=-1)

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: obs [N, B, obs_dim], the state before it [N, B, S] -> (features [N, B, F], the state after)."""
        state = self._cell(obs, state)
        return torch.cat([obs, state[..., :self.hidden]], dim=-1), state

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """T steps: obs [N, B, T, obs_dim] from ``state`` [N, B, S]; ``first`` [N, B, T] is 1 where an episode starts
        (the state is zeroed before that step, as acting zeroed it). Returns (features [N, B, T, F], the states after
        each step [N, B, T, S])."""
        keep = 1.0 - first.to(obs.dtype).unsqueeze(-1)
        after = []
        for t in range(obs.shape[2]):
            state = self._cell(obs[:, :, t], state * keep[:, :, t])
            after.append(state)
        states = torch.stack(after, dim=2)
        return torch.cat([obs, states[..., :self.hidden]], dim=-1), states

    def next_features(self, next_obs: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        """The features of each step's real next observation [N, B, T, obs_dim], from the state after that step
        (``unroll``'s second output): what the agent would have seen had the episode gone on (a terminal or a
        time-limit cut's last observation included, which the buffer never stores as anyone's observation)."""
        n, b, t = next_obs.shape[:3]
        flat = lambda x: x.reshape(n, b * t, -1)  # noqa: E731
        features, _ = self.step(flat(next_obs), flat(after))
        return features.view(n, b, t, -1)
