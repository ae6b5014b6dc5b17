"""Recurrent networks whose every parameter carries a leading member dimension (see ``common/nets.py``), for the
on-policy family's ``--recurrent`` (the A3C references' LSTM actor-critic).

``RecurrentActorCritic``: an encoder, then one LSTM cell, then linear policy and value heads on its output.
Flat observations: one linear layer of ``hidden`` units with tanh, then an LSTM of ``hidden``. Stacked image
frames: the Nature CNN (512 features), then an LSTM of 256 (the A3C references put the LSTM of 256 after smaller
convolutions: docs/actor_critic.md). A state is a pair
(h, c) of [N, B, H] tensors; zeros start an episode.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..common.cells import BatchedLSTMCell
from ..common.distributions import Categorical, DiagGaussian
from ..common.nets import BatchedLinear

ATARI_LSTM = 256  # the LSTM's width after the Nature CNN


def masked(state: tuple[torch.Tensor, torch.Tensor], start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The state with the rows where ``start`` [N, B] is 1 (a new episode begins) set to zero."""
    keep = (1.0 - start.to(state[0].dtype)).unsqueeze(-1)
    return state[0] * keep, state[1] * keep


class RecurrentActorCritic(nn.Module):
    """N recurrent actor-critics (see the module's docstring). ``step`` plays one step of B environments;
    ``unroll`` replays a rollout of T steps from the state it started with, zeroing the state where an episode
    began, exactly as ``step`` did while acting."""

    def __init__(self, obs_shape: Sequence[int], act_dim: int, hidden: int, gens, discrete: bool):
        super().__init__()
        if len(obs_shape) == 1:
            self.cnn = None
            self.fc = BatchedLinear(obs_shape[0], hidden, gens)
            width, size = hidden, hidden
        else:
            from ..common.cnn import BatchedNatureCNN

            self.cnn, self.fc = BatchedNatureCNN(obs_shape[0], gens), None
            width, size = self.cnn.features, ATARI_LSTM
        self.lstm = BatchedLSTMCell(width, size, gens)
        self.size = size
        self.pi = BatchedLinear(size, act_dim, gens)
        self.v = BatchedLinear(size, 1, gens)
        self.log_std = None if discrete else nn.Parameter(torch.zeros(len(gens), 1, act_dim))

    def initial_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeros [N, batch, H] (h and c), on the parameters' device."""
        w = self.lstm.w_hh
        z = torch.zeros(w.shape[0], batch, self.size, dtype=w.dtype, device=w.device)
        return z, z.clone()

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(obs)) if self.cnn is None else self.cnn(obs)

    def distribution(self, head: torch.Tensor):
        return Categorical(head) if self.log_std is None else DiagGaussian(head, self.log_std)

    def step(self, obs: torch.Tensor, state):
        """obs [N, B, ...], state (h, c) [N, B, H] -> (the action distribution, V [N, B], the next state)."""
        state = self.lstm(self.features(obs), state)
        return self.distribution(self.pi(state[0])), self.v(state[0]).squeeze(-1), state

    def unroll(self, obs: torch.Tensor, state, starts: torch.Tensor):
        """obs [N, T, K, ...] from ``state`` [N, K, H] (the state before step 0); ``starts`` [N, T, K]: 1 where the
        state is zeroed before step t (an episode began there). Returns (the distribution over [N, T*K], values
        [N, T*K], the states after each step (h, c) [N, T, K, H], before any zeroing)."""
        n, t, k = obs.shape[:3]
        x = self.features(obs.reshape(n, t * k, *obs.shape[3:])).view(n, t, k, -1)
        hs, cs = [], []
        for i in range(t):
            state = self.lstm(x[:, i], masked(state, starts[:, i]))
            hs.append(state[0])
            cs.append(state[1])
        h = torch.stack(hs, dim=1)  # [N, T, K, H]
        flat = h.reshape(n, t * k, -1)
        return self.distribution(self.pi(flat)), self.v(flat).squeeze(-1), (h, torch.stack(cs, dim=1))

    def next_values(self, next_obs: torch.Tensor, after) -> torch.Tensor:
        """V of each step's real next observation [N, T*K], from the state after that step (``unroll``'s third
        output): the value the agent would give it had the episode gone on."""
        n, t, k = next_obs.shape[:3]
        flat = lambda s: s.reshape(n, t * k, -1)  # noqa: E731
        h, _ = self.lstm(self.features(next_obs.reshape(n, t * k, *next_obs.shape[3:])), (flat(after[0]),
                                                                                          flat(after[1])))
        return self.v(h).squeeze(-1)
