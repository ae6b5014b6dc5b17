"""Prioritized experience replay (Schaul et al., 2016, proportional variant) on the device, per member.

Member m samples row i of its group's ring with probability P(i) = p_i / sum_j p_j, where
p_i = (|delta_i| + eps) ** alpha is set from the row's last TD error and a new row starts at the largest
priority the member has set so far (1.0 before any update). Every call runs on the device with a fixed
number of tensor operations of fixed shapes: no host read, no data-dependent size, no Python loop over
members or samples, so a CUDA graph can capture ``sample``, ``weights``, ``update`` (and ``add``).

Layout: two levels, per member.

- ``p`` [M, nb * block] float32: the priorities, ``capacity`` rows padded with zeros up to whole blocks
  (``block`` a power of two, at most the capacity rounded up to one). Rows never added (>= the buffer's
  ``filled``) and the padding hold 0, so they are never drawn.
- ``sums`` [M, nb] float32: each block's sum, always the same fixed pairwise tree of element-wise adds
  over the block (``_pairwise_levels``), recomputed from scratch for every block an ``add`` or ``update``
  touches (gather [M, K, block], sum, scatter back): no running total that drifts.

``sample(rng, B, filled)``: one ``rng.uniform(B)`` call gives u [M, B]; target k is
t_k = (k + u_k) / B * total (stratified: exactly one draw in each of the B equal segments of the mass).
Level one, in float64: an inclusive prefix of the block sums (a Hillis-Steele scan of element-wise adds)
and ``searchsorted`` pick the block. Level two, in float32: the chosen blocks are gathered [M, B, block],
their pairwise tree is rebuilt (its root is bitwise the stored block sum) and the target walks down it,
going right when it is past the left subtree's mass and the right subtree holds any. Indices come back
in segment order (idx[:, k] from segment k).

Round-off guards: (k + u) / B < 1 - 2**-32, so t < total in float64; a target that still lands past the
last block with mass is clamped to block (filled - 1) // block; the walk never enters a subtree of zero
mass, so it ends on a row of positive priority, i.e. below ``filled``; the row is clamped below
``filled`` anyway.

Precision. Priorities and block sums are float32 (a block sum's relative error is below
log2(block) * 2**-24, about 6e-7 for 1024 rows, and never accumulates: it is recomputed from the
priorities). The prefix over blocks and the targets are float64, so a block's share of the draws is
exact to ~1e-15; inside a block the boundaries between rows sit on float32 partial sums, each off by
at most about log2(block) * 2**-24 of the block's mass, so the sampled distribution is within a total
variation of ~1e-3 of P(i) in the worst case (a block of 1024 rows of wildly different priority) and
much closer typically (the chi-squared test in tests/test_priority_sampler.py sees no bias). A draw has 24
random bits inside a segment of total / B, so its resolution is total / (B * 2**24).

Reproducibility. Member m's numbers depend only on its own random stream and its own priorities: every
operation is element-wise along the member dimension, a gather, a searchsorted or an exact min/max, and
no sum or scan is left to a library kernel whose association could change with the shape (the
pairwise tree and the scan are written out as element-wise adds, which round the same on every device).
The two powers (``update``'s (|delta| + eps) ** alpha and ``weights``' ratio ** beta) run on rows padded
to a multiple of 64, so each member's row takes the same vectorised CPU code path whatever M is (a
vectorised and a scalar pow may round differently). So the same member sampled alone (M = 1) or with
others gives the same indices, weights and priorities, bit for bit; on a multi-threaded CPU this holds
while M * B stays below torch's 32768-element grain (larger element-wise ops are split across threads
at offsets that depend on M).
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

# element-wise transcendental ops run on rows padded to this many elements (a multiple of any CPU vector width)
_ROW_ALIGN = 64


def _pairwise_levels(x: torch.Tensor) -> list[torch.Tensor]:
    """The pairwise sum tree over the last dim (a power of two): [x, pair sums, ..., root [..., 1]]."""
    levels = [x]
    while levels[-1].shape[-1] > 1:
        v = levels[-1]
        levels.append(v[..., 0::2] + v[..., 1::2])
    return levels


def _pairwise_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dim (a power of two) in a fixed pairwise order: the same bits on any device, any shape."""
    return _pairwise_levels(x)[-1].squeeze(-1)


def _inclusive_scan(x: torch.Tensor) -> torch.Tensor:
    """Inclusive prefix sums over the last dim from element-wise adds (Hillis-Steele, log2 n steps): each row's
    result depends on that row alone and rounds the same way on every device (torch.cumsum's CUDA kernel picks
    another algorithm for a single row)."""
    n, s = x.shape[-1], 1
    while s < n:
        x = torch.cat((x[..., :s], x[..., s:] + x[..., :-s]), dim=-1)
        s *= 2
    return x


def _rowwise_pow(x: torch.Tensor, exponent) -> torch.Tensor:
    """x ** exponent for x [M, B], each row padded to a multiple of ``_ROW_ALIGN`` so every member's row runs
    the same (vectorised) code path whatever M is."""
    b = x.shape[-1]
    pad = (-b) % _ROW_ALIGN
    if pad:
        x = F.pad(x, (0, pad), value=1.0)
    return torch.pow(x, exponent)[..., :b]


class Priorities:
    """Per-member priorities over a group's ``capacity`` rows and the sampler that follows them.

    p[m, i] = (|delta| + eps) ** alpha for row i of the rows member m samples from (its group's
    ``capacity`` rows). All state lives on ``device`` and is only ever modified in place (a captured CUDA
    graph keeps pointing at it). Call order per learner step: ``sample`` -> ``weights`` (the priorities the
    draw used) -> loss -> ``update`` with the new TD errors of the same indices.
    """

    def __init__(self, members: int, capacity: int, device, alpha: float = 0.6, eps: float = 1e-6,
                 block: int = 1024):
        if members < 1 or capacity < 1:
            raise ValueError(f"need at least one member and one row, got members={members}, capacity={capacity}")
        if block < 1 or block & (block - 1):
            raise ValueError(f"block must be a power of two, got {block}")
        if alpha < 0 or eps <= 0:
            raise ValueError(f"need alpha >= 0 and eps > 0, got alpha={alpha}, eps={eps}")
        self.members, self.capacity = int(members), int(capacity)
        self.alpha, self.eps = float(alpha), float(eps)
        self.device = torch.device(device)
        self.block = min(int(block), 1 << (self.capacity - 1).bit_length())  # no block longer than the rows
        self.num_blocks = math.ceil(self.capacity / self.block)
        m, nb = self.members, self.num_blocks
        self.p = torch.zeros((m, nb * self.block), dtype=torch.float32, device=self.device)
        self.sums = torch.zeros((m, nb), dtype=torch.float32, device=self.device)
        self.max = torch.ones(m, dtype=torch.float32, device=self.device)
        self._member = torch.arange(m, device=self.device).view(m, 1)
        self._pair = torch.arange(2, device=self.device)
        self._strata: dict[int, torch.Tensor] = {}

    # views for callers and tests
    @property
    def priorities(self) -> torch.Tensor:
        """[M, capacity] view of the priorities (0 for rows never added)."""
        return self.p[:, : self.capacity]

    @property
    def block_sums(self) -> torch.Tensor:
        return self.sums

    @property
    def max_priority(self) -> torch.Tensor:
        """[M] the largest priority each member has set (1.0 before its first update)."""
        return self.max

    def _gather_blocks(self, blocks: torch.Tensor) -> torch.Tensor:
        """The priorities of blocks [M, K] (member m's block blocks[m, k]) as [M, K, block]: whole rows of a
        [M * nb, block] view copied by index_select (several times faster on the CPU than advanced indexing)."""
        m, k = blocks.shape
        flat = (self._member * self.num_blocks + blocks).view(-1)
        return self.p.view(m * self.num_blocks, self.block).index_select(0, flat).view(m, k, self.block)

    def _refresh(self, blocks: torch.Tensor) -> None:
        """Recompute the sums of blocks [M, K] from their priorities (duplicates write the same value)."""
        self.sums.scatter_(1, blocks, _pairwise_sum(self._gather_blocks(blocks)))

    @torch.no_grad()
    def add(self, rows: torch.Tensor) -> None:
        """Rows [R] (int64, on the device) were just written: each member gives them its max priority."""
        rows = rows.reshape(-1)
        r = rows.shape[0]
        self.p[:, rows] = self.max.view(-1, 1).expand(self.members, r)
        self._refresh((rows // self.block).view(1, r).expand(self.members, r))

    @torch.no_grad()
    def clear(self, rows: torch.Tensor) -> None:
        """Rows [R] may not be drawn (for now): priority 0 for every member (sequence replay: a window that would
        run past the newest stored step)."""
        rows = rows.reshape(-1)
        r = rows.shape[0]
        self.p[:, rows] = 0.0
        self._refresh((rows // self.block).view(1, r).expand(self.members, r))

    def _k(self, batch_size: int) -> torch.Tensor:
        k = self._strata.get(batch_size)
        if k is None:
            k = self._strata[batch_size] = torch.arange(batch_size, dtype=torch.float64, device=self.device)
        return k

    @torch.no_grad()
    def sample(self, rng, batch_size: int, filled: torch.Tensor) -> torch.Tensor:
        """idx [M, B] int64 among rows [0, filled) with P(i) = p_i / sum p, stratified: idx[:, k] from the k-th
        of B equal segments of each member's mass, one ``rng.uniform(batch_size)`` call. ``filled`` is a 0-dim
        int64 device tensor (>= 1); rows >= filled hold priority 0 (never added) and are never drawn."""
        m, b, nb = self.members, int(batch_size), self.num_blocks
        u = rng.uniform(b).to(torch.float64)  # [M, B] in [0, 1), 24 bits
        prefix = _inclusive_scan(self.sums.to(torch.float64))  # [M, nb]
        total = prefix[:, -1:]
        target = (self._k(b) + u) / b * total  # [M, B], < total
        last = ((filled - 1) // self.block).clamp(0, nb - 1)  # the last block holding filled rows
        blk = torch.minimum(torch.searchsorted(prefix, target, right=True), last)
        before = torch.where(blk > 0, prefix.gather(1, (blk - 1).clamp_min(0)), 0.0)
        local = (target - before).clamp_min(0.0).to(torch.float32)  # mass to walk past inside the block

        levels = _pairwise_levels(self._gather_blocks(blk))  # [M, B, block], [M, B, block / 2], ..., [M, B, 1]
        node = torch.zeros((m, b, 1), dtype=torch.int64, device=self.device)
        local = local.unsqueeze(-1)
        for level in reversed(levels[:-1]):  # children of the current node, from the root's down to the rows
            node = 2 * node
            children = level.gather(2, node + self._pair)  # [M, B, 2]: left and right subtree's mass
            left, right = children[..., :1], children[..., 1:]
            go_right = (local >= left) & (right > 0)
            local = torch.where(go_right, local - left, local)
            node = node + go_right
        idx = blk * self.block + node.squeeze(-1)
        return torch.minimum(idx, (filled - 1).clamp_min(0))

    @torch.no_grad()
    def weights(self, idx: torch.Tensor, filled: torch.Tensor, beta: torch.Tensor | float) -> torch.Tensor:
        """Importance weights [M, B, 1]: (N P(i)) ** -beta over their max in the member's batch (beta >= 0).

        N = filled and the total mass cancel in the ratio: w_i = (min_j p_j / p_i) ** beta over the batch, which
        is computed directly (exact ratio, no overflow for tiny P); ``filled`` is taken for the interface. Call it
        before ``update`` changes the priorities the draw used. ``beta`` may be a 0-dim device tensor (annealed
        without recapturing a graph)."""
        p = self.p.gather(1, idx)  # [M, B]
        ratio = p.amin(dim=1, keepdim=True) / p  # in (0, 1], exactly 1 at the batch's smallest priority
        return _rowwise_pow(ratio, beta).unsqueeze(-1)

    @torch.no_grad()
    def update(self, idx: torch.Tensor, td_errors: torch.Tensor) -> None:
        """p = (|td| + eps) ** alpha at rows idx [M, B]; td [M, B] or [M, B, 1]. A row drawn twice in a member's
        batch keeps the larger of its values (scatter with amax: the same result on every device)."""
        m, b = idx.shape
        new = _rowwise_pow(td_errors.detach().reshape(m, b).abs().to(torch.float32) + self.eps, self.alpha)
        self.p.scatter_reduce_(1, idx, new, reduce="amax", include_self=False)
        torch.maximum(self.max, new.amax(dim=1), out=self.max)
        self._refresh(idx // self.block)

    def state_dict(self, members: slice = slice(None)) -> dict:
        """Some members' priorities (rows up to the last one holding any, on the CPU) and max priorities."""
        p = self.p[members, : self.capacity]
        held = (p > 0).any(dim=0).nonzero()
        used = int(held.max()) + 1 if held.numel() else 0
        return {"priorities": p[:, :used].cpu().clone(), "max_priority": self.max[members].cpu().clone(),
                "capacity": self.capacity, "alpha": self.alpha, "eps": self.eps}

    @torch.no_grad()
    def load_state_dict(self, state: dict, members: slice = slice(None)) -> None:
        """Restore members from ``state_dict`` exactly (block sums recomputed: the same bits as before)."""
        for key in ("capacity", "alpha", "eps"):
            if state[key] != getattr(self, key):
                raise ValueError(f"priorities saved with {key}={state[key]}, this sampler has {getattr(self, key)}")
        p, mx = state["priorities"], state["max_priority"]
        target = self.p[members]
        if p.shape[0] != target.shape[0] or mx.shape[0] != target.shape[0]:
            raise ValueError(f"state holds {p.shape[0]} members, the slice selects {target.shape[0]}")
        target.zero_()
        target[:, : p.shape[1]] = p.to(self.device)
        self.max[members] = mx.to(self.device)
        self.sums[members] = _pairwise_sum(target.view(target.shape[0], self.num_blocks, self.block))
