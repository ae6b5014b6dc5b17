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

from ..common.nets import AgentRNG


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


class LazyGossip:
    """Diff-DAC's reference combine with bounded asynchrony (GALA's gossip buffer, ``--sync_freq K``), simulated in
    lockstep with message delays (``--message_delay``).

    After its local update at step t (t = 1, 2, ...) every learner j first publishes: if each out-neighbour has read
    its previous message, its message becomes its parameters now, and reaches each neighbour i after d_ij updates
    (d drawn per message and link, geometric on {0, 1, ...} with mean ``mean_delay``; d = 0: at this step). Then
    every learner i combines if a message it has not read has arrived from every in-neighbour: theta_i <-
    W_ii theta_i + sum_j W_ij m_j, and it marks them read. Otherwise it skips the combine, at most K times in a row;
    the next time it waits: a message still on its way is taken now, and an in-neighbour with no message for it (its
    last was read, the next not yet published) is waited for by taking that neighbour's parameters now. K = 0 is
    the synchronous combine (``Diffusion``; the scheme uses it instead). Capture-safe: element-wise ops, ``bmm`` and
    counter-based random streams, state updated in place; no host sync. Statistics per member since ``take_stats``: combines, skips and the
    summed age (updates since publication) of the messages combined."""

    def __init__(self, diffusion: Diffusion, sync_freq: int, mean_delay: float, rng: AgentRNG | None,
                 params: list[torch.Tensor]):
        if sync_freq < 1:
            raise ValueError("LazyGossip is for --sync_freq >= 1 (0 is the synchronous Diffusion)")
        if diffusion.rng is not None:
            raise ValueError("--sync_freq with --link_drop: drop messages or delay them, not both")
        if mean_delay > 0 and rng is None:
            raise ValueError("message delays need a random stream")
        self.d, self.k, self.mean_delay, self.rng = diffusion, int(sync_freq), float(mean_delay), rng
        s, n, dev = diffusion.seeds, diffusion.n, diffusion.w.device
        self.adj = diffusion.adj.bool()  # [S, n(receiver), n(sender)]
        self.messages = [p.detach().clone() for p in params]  # each learner's last published message
        self.msg_step = torch.zeros(s, n, dtype=torch.int64, device=dev)  # when it was published
        self.pending = torch.zeros(s, n, n, dtype=torch.bool, device=dev)  # [s, i, j]: j's message for i, unread
        self.arrive = torch.zeros(s, n, n, dtype=torch.int64, device=dev)  # when it reaches i
        self.read = self.adj.clone()  # [s, i, j]: i has read j's last message (nothing published yet: as if read)
        self.skips = torch.zeros(s, n, dtype=torch.int64, device=dev)  # combines skipped in a row
        self.t = torch.zeros((), dtype=torch.int64, device=dev)
        self.stats = torch.zeros(3, s, n, dtype=torch.float64, device=dev)  # combines, skips, summed message age
        self.eye = diffusion.eye.bool()
        self.log_keep = None if mean_delay <= 0 else float(np.log(mean_delay / (1.0 + mean_delay)))

    def delays(self) -> torch.Tensor:
        """This step's delay of a message on every link [S, n(receiver), n(sender)], in updates."""
        s, n = self.d.seeds, self.d.n
        if self.log_keep is None:
            return torch.zeros(s, n, n, dtype=torch.int64, device=self.t.device)
        u = 1.0 - self.rng.uniform(n).view(s, n, n)  # (0, 1]
        return torch.floor(torch.log(u) / self.log_keep).to(torch.int64)

    @torch.no_grad()
    def combine(self, params: list[torch.Tensor]) -> None:
        if not self.d.edges:
            return
        self.t += 1
        t, adj = self.t, self.adj
        # publish: learner j (a column) when every out-neighbour has read its last message
        publish = (self.read | ~adj).all(dim=1)  # [S, n] per sender
        for m, p in zip(self.messages, params):
            shaped = publish.view(-1, *([1] * (p.dim() - 1)))
            m.copy_(torch.where(shaped, p, m))
        self.msg_step.copy_(torch.where(publish, t, self.msg_step))
        sent = adj & publish.unsqueeze(1)  # [s, i, j]: a new message j -> i
        delays = self.delays()
        self.arrive.copy_(torch.where(sent, t + delays, self.arrive))
        self.pending |= sent
        self.read &= ~sent
        # combine: learner i (a row) when every in-neighbour's unread message has arrived, or when it must wait
        arrived = self.pending & (self.arrive <= t)
        ready = (arrived | ~adj).all(dim=2)  # [S, n] per receiver
        go = ready | (self.skips >= self.k)
        from_message = adj & go.unsqueeze(2) & self.pending  # in flight or arrived: taken now
        from_current = adj & go.unsqueeze(2) & ~self.pending  # nothing for i yet: the neighbour's parameters now
        w = self.d.w
        on_msg = w * from_message
        on_cur = w * from_current + torch.diag_embed(torch.diagonal(w, dim1=-2, dim2=-1))
        stay = ~go
        on_cur = torch.where(stay.unsqueeze(2), self.eye.to(w.dtype).expand_as(w), on_cur)
        on_msg = torch.where(stay.unsqueeze(2), torch.zeros_like(w), on_msg)
        seeds = self.d.seeds
        for m, p in zip(self.messages, params):
            mixed = torch.bmm(on_msg, m.view(seeds, self.d.n, -1)) + torch.bmm(on_cur, p.view(seeds, self.d.n, -1))
            p.copy_(mixed.view_as(p))
        # bookkeeping: read what was combined, count skips and ages
        combined = adj & go.unsqueeze(2)
        self.read |= combined
        self.pending &= ~combined
        self.skips.copy_(torch.where(go, torch.zeros_like(self.skips), self.skips + 1))
        age = ((t - self.msg_step).unsqueeze(1) * from_message).sum(2)  # [S, n] summed over in-neighbours
        links = combined.sum(2).clamp_min(1)
        self.stats[0] += go
        self.stats[1] += stay
        self.stats[2] += torch.where(go, age.double() / links, torch.zeros_like(age, dtype=torch.float64))

    def take_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per member [S * n] since the last call: the fraction of combines skipped, and the mean age (in updates)
        of the messages combined (NaN where there was no combine)."""
        combines, skips, age = self.stats.view(3, -1)
        total = combines + skips
        skipped = torch.where(total > 0, skips / total.clamp_min(1), torch.full_like(total, float("nan")))
        mean_age = torch.where(combines > 0, age / combines.clamp_min(1), torch.full_like(age, float("nan")))
        self.stats.zero_()
        return skipped, mean_age

    def state_dict(self, rows: slice) -> dict:
        """The gossip of some whole seeds' members (``rows`` a slice of members)."""
        n = self.d.n
        seeds = slice(rows.start // n, rows.stop // n)
        return {"messages": [m[rows].cpu() for m in self.messages], "msg_step": self.msg_step[seeds].cpu(),
                "pending": self.pending[seeds].cpu(), "arrive": self.arrive[seeds].cpu(), "read": self.read[seeds].cpu(),
                "skips": self.skips[seeds].cpu(), "t": int(self.t), "stats": self.stats[:, seeds].cpu()}

    def load_state_dicts(self, states: list[dict]) -> None:
        """One state per seed, in seed order."""
        for i, m in enumerate(self.messages):
            m.copy_(torch.cat([s["messages"][i] for s in states]))
        for key in ("msg_step", "pending", "arrive", "read", "skips"):
            getattr(self, key).copy_(torch.cat([s[key] for s in states]))
        self.stats.copy_(torch.cat([s["stats"] for s in states], dim=1))
        self.t.fill_(states[0]["t"])
