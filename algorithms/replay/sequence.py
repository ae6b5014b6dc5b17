"""Sequence encoders for the replay learners (``--seq_encoder``): a representation shared by actor and critics that
carries a recurrent state through an episode, every parameter stacked over the members (see ``nets.py``).

An encoder maps the observation o_t and the state before it, z_{t-1} (zeros at an episode's first step), to the
features x_t = [o_t, h_t] and the next state z_t:

    gru:  h_t = GRUCell(o_t, h_{t-1}),              z_t = h_t
    lstm: (h_t, c_t) = LSTMCell(o_t, (h_{t-1}, c_{t-1})),  z_t = [h_t, c_t]
    attn: z_t = the episode's last K observations (K = --seq_len) and which exist, h_t = causal attention of the
          newest over them (``CausalAttention``, Advanced-Soft-Actor-Critic's ATTN)

The observation stays in the features (Advanced-Soft-Actor-Critic's representation does the same): the memory
only has to add what the observation lacks. A state is one tensor [N, B, S] (S = H for gru, 2H for lstm, K (obs_dim + 1) for attn), so a
replay buffer can store it per row. ``BatchedGRUCell`` is N independent ``torch.nn.GRUCell`` (same gates, same
initialisation order and bounds), checked against torch's in tests/test_sequence.py.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..common.cells import BatchedLSTMCell, gated_cell_parameters
from ..common.nets import BatchedLinear

ENCODERS = ("gru", "lstm", "attn")  # --seq_encoder


class BatchedGRUCell(nn.Module):
    """N GRU cells: x [N, B, in], h [N, B, H] -> h', with (torch's gate order r, z, n)

        r = s(x W_ir + b_ir + h W_hr + b_hr);  z = s(x W_iz + b_iz + h W_hz + b_hz)
        n = tanh(x W_in + b_in + r (h W_hn + b_hn));  h' = (1 - z) n + z h
    """

    def __init__(self, fan_in: int, hidden: int, gens: Sequence[torch.Generator]):
        super().__init__()
        gated_cell_parameters(self, fan_in, 3 * hidden, hidden, gens)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xr, xz, xn = torch.baddbmm(self.b_ih, x, self.w_ih).chunk(3, dim=-1)
        hr, hz, hn = torch.baddbmm(self.b_hh, h, self.w_hh).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h


class CausalAttention(nn.Module):
    """ASAC's ATTN as a recurrence: the state is the episode's last K observations (oldest first) and which of them
    exist, [N, B, K * obs_dim + K]; a step shifts the new observation in, and the output is single-head scaled
    dot-product attention of the newest position over the existing ones, each embedded with a learnt position:

        e_i = o_i W_e + b_e + P_i,  q = e_K W_q,  k_i = e_i W_k,  v_i = e_i W_v,
        h_t = sum_i softmax_i(q k_i / sqrt(D) over existing i) v_i

    which is causal self-attention's output at the last position of a window of K steps (tested against
    ``torch.nn.functional.scaled_dot_product_attention``). Zeroing the state (an episode's start) leaves no
    observation: the history never crosses an episode."""

    def __init__(self, obs_dim: int, width: int, context: int, gens: Sequence[torch.Generator]):
        super().__init__()
        self.obs_dim, self.width, self.context = int(obs_dim), int(width), int(context)
        self.embed = BatchedLinear(obs_dim, width, gens)
        self.query = BatchedLinear(width, width, gens)
        self.key = BatchedLinear(width, width, gens)
        self.value = BatchedLinear(width, width, gens)
        position = torch.empty(len(gens), context, width)
        with torch.no_grad():
            for i, g in enumerate(gens):
                position[i].normal_(0.0, 0.02, generator=g)
        self.position = nn.Parameter(position)
        self.state_size = context * (obs_dim + 1)

    def shift(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The state after seeing ``obs`` [N, B, obs_dim]: the oldest observation drops out."""
        k, d = self.context, self.obs_dim
        seen, exists = state[..., :k * d], state[..., k * d:]
        ones = torch.ones_like(exists[..., :1])
        return torch.cat([seen[..., d:], obs, exists[..., 1:], ones], dim=-1)

    def output(self, state: torch.Tensor) -> torch.Tensor:
        """h [N, B, width] of the newest position."""
        n, b = state.shape[:2]
        k, d = self.context, self.obs_dim
        seen = state[..., :k * d].reshape(n, b * k, d)
        exists = state[..., k * d:]
        e = (self.embed(seen).view(n, b, k, -1) + self.position.unsqueeze(1)).view(n, b * k, -1)
        keys, values = self.key(e).view(n, b, k, -1), self.value(e).view(n, b, k, -1)
        q = self.query(e.view(n, b, k, -1)[:, :, -1])  # [N, B, D]
        scores = (keys * q.unsqueeze(2)).sum(-1) / math.sqrt(self.width)  # [N, B, K]
        scores = scores.masked_fill(exists == 0, float("-inf"))
        return (torch.softmax(scores, dim=-1).unsqueeze(-1) * values).sum(2)


class SequenceEncoder(nn.Module):
    """The recurrent representation of N members (see the module's docstring)."""

    def __init__(self, kind: str, obs_dim: int, hidden: int, gens: Sequence[torch.Generator], context: int = 16):
        super().__init__()
        if kind not in ENCODERS:
            raise ValueError(f"unknown sequence encoder {kind!r}; one of {', '.join(ENCODERS)}")
        self.kind, self.hidden, self.obs_dim = kind, int(hidden), int(obs_dim)
        if kind == "attn":
            self.cell = CausalAttention(obs_dim, hidden, context, gens)
            self.state_size = self.cell.state_size
        else:
            self.cell = BatchedGRUCell(obs_dim, hidden, gens) if kind == "gru" else \
                BatchedLSTMCell(obs_dim, hidden, gens)
            self.state_size = hidden if kind == "gru" else 2 * hidden
        self.features = obs_dim + hidden

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros [N, batch, S] on the parameters' device."""
        w = next(self.cell.parameters())
        return torch.zeros(w.shape[0], batch, self.state_size, dtype=w.dtype, device=w.device)

    def _cell(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        if self.kind == "attn":
            return self.cell.shift(obs, state)
        if self.kind == "gru":
            return self.cell(obs, state)
        h, c = self.cell(obs, (state[..., :self.hidden], state[..., self.hidden:]))
        return torch.cat([h, c], dim=-1)

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: obs [N, B, obs_dim], the state before it [N, B, S] -> (features [N, B, F], the state after)."""
        state = self._cell(obs, state)
        return torch.cat([obs, self._hidden(state)], dim=-1), state

    def _hidden(self, state: torch.Tensor) -> torch.Tensor:
        """The memory's part of the features, from a state [..., S]."""
        if self.kind != "attn":
            return state[..., :self.hidden]
        lead = state.shape[:-1]
        flat = state.reshape(lead[0], -1, state.shape[-1])
        return self.cell.output(flat).view(*lead, -1)

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor,
               restart: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """T steps: obs [N, B, T, obs_dim] from ``state`` [N, B, S]; ``first`` [N, B, T] is 1 where an episode starts
        (the state is zeroed before that step, as acting zeroed it). ``restart`` [N, B, T, S]: where ``first`` is 1
        the state is set to it instead (the stored state of a step that starts a stretch of rows mid-episode: the
        distributed learner's block starts). Returns (features [N, B, T, F], the states after each step
        [N, B, T, S])."""
        keep = 1.0 - first.to(obs.dtype).unsqueeze(-1)
        after = []
        for t in range(obs.shape[2]):
            before = state * keep[:, :, t]
            if restart is not None:
                before = before + restart[:, :, t] * (1.0 - keep[:, :, t])
            state = self._cell(obs[:, :, t], before)
            after.append(state)
        states = torch.stack(after, dim=2)
        return torch.cat([obs, self._hidden(states)], dim=-1), states

    def next_features(self, next_obs: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        """The features of each step's real next observation [N, B, T, obs_dim], from the state after that step
        (``unroll``'s second output): what the agent would have seen had the episode gone on (a terminal or a
        time-limit cut's last observation included, which the buffer never stores as anyone's observation)."""
        n, b, t = next_obs.shape[:3]
        flat = lambda x: x.reshape(n, b * t, -1)  # noqa: E731
        features, _ = self.step(flat(next_obs), flat(after))
        return features.view(n, b, t, -1)


class PredictionModel(nn.Module):
    """Advanced-Soft-Actor-Critic's prediction model (``--use_prediction``), per member: from the features x_t and
    the action a_t, a Gaussian over the next step's memory h_{t+1} and the reward,

        (mu, log sigma) = MLP_T([x_t, a_t]),  r^ = MLP_R([x_t, a_t]),
        L = mean_t [ -log N(h_{t+1}; mu, sigma) + kl * KL(N(mu, sigma) || N(0, I)) + (r^ - r_t)^2 ]

    (constants dropped; h_{t+1} is the online encoder's memory of the next observation, without gradient). Its
    gradient reaches the encoder through x_t: the memory is shaped to predict what comes next, as ASAC's
    representation is. ``kl`` is ASAC's ``transition_kl`` (0.8)."""

    def __init__(self, features: int, act_dim: int, memory: int, hidden: int, gens: Sequence[torch.Generator],
                 kl: float = 0.8):
        super().__init__()
        from ..common.nets import MLP

        self.transition = MLP([features + act_dim, hidden, 2 * memory], gens)
        self.reward = MLP([features + act_dim, hidden, 1], gens)
        self.kl, self.memory = float(kl), int(memory)

    def loss(self, features: torch.Tensor, action: torch.Tensor, next_memory: torch.Tensor,
             reward: torch.Tensor) -> torch.Tensor:
        """Per member [M]: features [M, K, F] (with gradient), action [M, K, A], next_memory [M, K, H], reward
        [M, K, 1]."""
        x = torch.cat([features, action], dim=-1)
        mean, log_std = self.transition(x).split(self.memory, dim=-1)
        log_std = log_std.clamp(-10.0, 2.0)
        nll = (0.5 * ((next_memory - mean) * torch.exp(-log_std)).pow(2) + log_std).sum(-1)
        kl = (0.5 * (torch.exp(2 * log_std) + mean.pow(2) - 1.0) - log_std).sum(-1)
        mse = (self.reward(x) - reward).pow(2).squeeze(-1)
        return (nll + self.kl * kl + mse).mean(-1)
