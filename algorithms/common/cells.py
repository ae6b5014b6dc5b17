"""Recurrent cells whose every parameter carries a leading member dimension (see ``nets.py``), for both families'
recurrent networks (the on-policy LSTM actor-critic, the replay family's sequence encoders).

``BatchedLSTMCell`` is N independent ``torch.nn.LSTMCell``: the same gates (i, f, g, o), the same initialisation
(every weight and bias uniform in +-1/sqrt(hidden), drawn in torch's order weight_ih, weight_hh, bias_ih, bias_hh
from member i's generator only), checked against ``torch.nn.LSTMCell`` in tests/test_recurrent.py.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def gated_cell_parameters(cell: nn.Module, fan_in: int, gates: int, hidden: int,
                          gens: Sequence[torch.Generator]) -> None:
    """A recurrent cell's w_ih [N, in, gates], w_hh [N, H, gates], b_ih and b_hh [N, 1, gates] (the LSTM's 4H gates, the
    GRU's 3H) as torch initialises its cells: every weight and bias uniform in +-1/sqrt(H), member i drawn from
    gens[i] in torch's order weight_ih, weight_hh, bias_ih, bias_hh. Stored transposed for x @ W, as BatchedLinear
    stores its weights."""
    n, bound = len(gens), 1.0 / math.sqrt(hidden)
    w_ih, w_hh = torch.empty(n, gates, fan_in), torch.empty(n, gates, hidden)
    b_ih, b_hh = torch.empty(n, gates), torch.empty(n, gates)
    with torch.no_grad():
        for i, g in enumerate(gens):
            for t in (w_ih, w_hh, b_ih, b_hh):
                t[i].uniform_(-bound, bound, generator=g)
    cell.w_ih = nn.Parameter(w_ih.transpose(1, 2).contiguous())
    cell.w_hh = nn.Parameter(w_hh.transpose(1, 2).contiguous())
    cell.b_ih = nn.Parameter(b_ih.unsqueeze(1))
    cell.b_hh = nn.Parameter(b_hh.unsqueeze(1))


class BatchedLSTMCell(nn.Module):
    """N LSTM cells: x [N, B, in], (h, c) [N, B, H] -> (h', c'), with

        i, f, g, o = split(x W_ih + b_ih + h W_hh + b_hh);  c' = s(f) c + s(i) tanh(g);  h' = s(o) tanh(c')
    """

    def __init__(self, fan_in: int, hidden: int, gens: Sequence[torch.Generator]):
        super().__init__()
        gated_cell_parameters(self, fan_in, 4 * hidden, hidden, gens)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = state
        gates = torch.baddbmm(self.b_ih, x, self.w_ih) + torch.baddbmm(self.b_hh, h, self.w_hh)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
