"""Agents on a communication graph (Diff-DAC, Valcarcel Macua et al. 2021): graphs, mixing weights, the combine
step of adapt-then-combine diffusion, and the consensus measure.

A graph is a 0/1 symmetric adjacency matrix with a zero diagonal over the N agents of one seed. After every local
update, agent i sets theta_i <- sum_j W_ij theta_j over its neighbours and itself:
  uniform (Diff-DAC):   W_ij = 1 / (|N(i)| + 1) for j in N(i) and j = i  (row-stochastic);
  metropolis:           W_ij = 1 / (1 + max(|N(i)|, |N(j)|)) for j in N(i), W_ii = 1 - sum_j W_ij  (doubly stochastic).
A message j -> i dropped (``link_drop``) leaves it out: uniform weights average over what arrived, metropolis gives
its weight to the agent itself. Several seeds are several independent graphs (one block each).
"""
from __future__ import annotations

import numpy as np
import torch

from .nets import AgentRNG


def adjacency(topology: str, n: int) -> np.ndarray:
    """The adjacency matrix [n, n] (int64, 0/1) of a named topology; star: agent 0 is the hub."""
    a = np.zeros((n, n), dtype=np.int64)
    if topology == "complete":
        a[:] = 1
    elif topology == "ring":
        for i in range(n):
            a[i, (i + 1) % n] = a[(i + 1) % n, i] = 1
    elif topology == "star":
        a[0, 1:] = a[1:, 0] = 1
    elif topology != "none":
        raise ValueError(f"unknown topology {topology!r}; use complete, ring, star or none")
    np.fill_diagonal(a, 0)
    return a


def check_adjacency(matrix, n: int) -> np.ndarray:
    """``matrix`` as an int64 array if it is a graph over n agents; else a ValueError saying what is wrong."""
    try:
        a = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("it is not a matrix of numbers") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"it must be a square matrix, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"it is {a.shape[0]} x {a.shape[0]}, the run has {n} agents (--num_agents)")
    if not np.isin(a, (0.0, 1.0)).all():
        raise ValueError("its entries must be 0 or 1")
    if not (a == a.T).all():
        raise ValueError("it must be symmetric (links go both ways)")
    if np.diagonal(a).any():
        raise ValueError("its diagonal must be 0 (no self-loops)")
    return a.astype(np.int64)


def neighbours(adj: np.ndarray) -> list[list[int]]:
    """Each agent's neighbours, in the order i+1, i+2, ... (mod n): on a complete graph the DPD peer offsets."""
    n = adj.shape[0]
    return [sorted((j for j in range(n) if adj[i, j]), key=lambda j: (j - i) % n) for i in range(n)]


def mixing_matrix(adj: np.ndarray, rule: str = "uniform") -> np.ndarray:
    """W [n, n] (float64) of a graph: ``uniform`` (Diff-DAC's) or ``metropolis`` (Metropolis-Hastings)."""
    a = adj.astype(np.float64)
    deg = a.sum(1)
    if rule == "uniform":
        return (a + np.eye(len(a))) / (deg + 1.0)[:, None]
    if rule == "metropolis":
        w = a / (1.0 + np.maximum(deg[:, None], deg[None, :]))
        return w + np.diag(1.0 - w.sum(1))
    raise ValueError(f"unknown diffusion weights {rule!r}; use uniform or metropolis")


def second_eigenvalue_modulus(w: np.ndarray) -> float:
    """The second-largest eigenvalue modulus of W: the rate at which pure diffusion shrinks disagreement."""
    return float(np.sort(np.abs(np.linalg.eigvals(w)))[-2])


class Diffusion:
    """The combine step for stacked parameters [S * n, ...]: one batched product per tensor, block-diagonal over
    the S seeds. Capture-safe: element-wise ops and ``bmm`` only, link drops from counter-based streams."""

    def __init__(self, adj: np.ndarray, rule: str, seeds: int, device: torch.device, link_drop: float = 0.0,
                 rng: AgentRNG | None = None):
        self.n, self.seeds, self.rule, self.link_drop = adj.shape[0], int(seeds), rule, float(link_drop)
        self.edges = bool(adj.any())
        f32 = dict(dtype=torch.float32, device=device)
        self.adj = torch.as_tensor(adj, **f32).expand(self.seeds, -1, -1)  # [S, n, n]
        self.w = torch.as_tensor(mixing_matrix(adj, rule), **f32).expand(self.seeds, -1, -1).contiguous()
        self.eye = torch.eye(self.n, **f32)
        # metropolis: the weight of each link when it carries a message
        self.pair = torch.as_tensor(mixing_matrix(adj, "metropolis") * adj, **f32)
        self.rng = rng if self.link_drop > 0 else None
        if self.link_drop > 0 and rng is None:
            raise ValueError("link drops need a random stream")

    def weights(self) -> torch.Tensor:
        """This combine's W [S, n, n]: the fixed one, or with link drops one drawn now (row i = receiver)."""
        if self.rng is None:
            return self.w
        arrived = (self.rng.uniform(self.n) >= self.link_drop).to(torch.float32)  # [S * n, n]
        links = self.adj * arrived.view(self.seeds, self.n, self.n)
        if self.rule == "uniform":
            w = links + self.eye
            return w / w.sum(-1, keepdim=True)
        off = links * self.pair
        return off + torch.diag_embed(1.0 - off.sum(-1))

    @torch.no_grad()
    def combine(self, params: list[torch.Tensor]) -> None:
        """theta_i <- sum_j W_ij theta_j for every tensor, in place."""
        if not self.edges:
            return
        w = self.weights()
        for p in params:
            p.copy_(torch.bmm(w, p.view(self.seeds, self.n, -1)).view_as(p))


@torch.no_grad()
def disagreement(params: list[torch.Tensor], seeds: int) -> torch.Tensor:
    """Diff-DAC's consensus measure per seed [S] (float64): the mean over parameters of |std / mean| across the
    seed's agents (population std); parameters whose mean is exactly 0 are left out. 0 means identical agents."""
    total = count = 0
    for p in params:
        v = p.detach().double().reshape(seeds, -1, p[0].numel())  # [S, n, P]
        mean = v.mean(1)
        nonzero = mean != 0
        ratio = torch.where(nonzero, v.std(1, unbiased=False) / mean.abs(), torch.zeros_like(mean))
        total = total + ratio.sum(-1)
        count = count + nonzero.sum(-1)
    return total / count.clamp_min(1)
