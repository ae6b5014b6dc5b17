"""utils/run/replay/priority.py: the prioritized replay sampler on the device.

Frequencies follow P(i) = p_i / sum p (chi-squared), the draws are stratified (draw k lies in the k-th
segment of the mass, recomputed in float64), importance weights match numpy, update writes exactly the
drawn rows and keeps block sums exact, members alone equal members together bit for bit, a checkpoint
restores exactly, and nothing a CUDA graph cannot hold runs.
"""
import io
import math

import numpy as np
import pytest
import torch

from algorithms.common.nets import AgentRNG
from utils.run.opcheck import CAPTURE_UNSAFE, OpRecorder
from utils.run.replay.priority import Priorities, _pairwise_sum

ALPHA, EPS = 0.6, 1e-6


@pytest.fixture(autouse=True)
def _one_thread():
    """Small element-wise ops: threads only add contention (and a busy machine makes that seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def spread(pri: Priorities, filled: int, seed: int) -> np.ndarray:
    """Add rows [0, filled) and give them priorities over about five decades, a few extreme; returns the
    |td| set [M, filled] (float64)."""
    rows = torch.arange(filled)
    pri.add(rows)
    gen = np.random.default_rng(seed)
    td = 10.0 ** gen.uniform(-2, 1, (pri.members, filled))
    td[:, 3] = 1e3       # a row ~60x the typical priority
    td[:, 5::41] = 0.0   # rows at the floor eps ** alpha (~2.5e-4)
    pri.update(rows.expand(pri.members, filled).contiguous(), torch.as_tensor(td, dtype=torch.float32))
    return td


def priorities64(pri: Priorities) -> np.ndarray:
    return pri.priorities.double().numpy()


def chi2_z(observed: np.ndarray, expected: np.ndarray) -> tuple[float, int]:
    """Wilson-Hilferty z score of Pearson's chi-squared statistic (cells with expected < 5 pooled)."""
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    stat = float(((obs - exp) ** 2 / exp).sum())
    k = len(exp) - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return z, k


def test_frequencies_follow_the_priorities_chi_squared():
    """~200k draws per member over 300 filled rows in 5 blocks of 64 (the last one partly filled, three
    more empty): counts fit P(i) = p_i / sum p; rows >= filled (priority 0) are never drawn; the same test
    rejects a slightly wrong distribution, so it can fail."""
    capacity, filled, batch, calls = 512, 300, 1024, 200
    pri = Priorities(2, capacity, "cpu", alpha=ALPHA, eps=EPS, block=64)
    spread(pri, filled, seed=1)
    p = priorities64(pri)
    assert (p[:, :filled] > 0).all() and (p[:, filled:] == 0).all()
    assert p[:, :filled].max() / p[:, :filled].min() > 1e5  # very different priorities
    rng = AgentRNG([5, 6])
    fill = torch.tensor(filled)
    counts = np.zeros((2, capacity), dtype=np.int64)
    for _ in range(calls):
        idx = pri.sample(rng, batch, fill).numpy()
        for m in range(2):
            counts[m] += np.bincount(idx[m], minlength=capacity)
    n = batch * calls
    assert (counts[:, filled:] == 0).all()
    for m in range(2):
        expected = n * p[m, :filled] / p[m, :filled].sum()
        z, dof = chi2_z(counts[m, :filled], expected)
        assert dof > 200
        assert z < 4.0, f"member {m}: chi-squared z = {z:.2f} on {dof} dof"
        # power: the counts reject priorities off by 15 % on one row in three
        wrong = p[m, :filled] * np.where(np.arange(filled) % 3 == 0, 1.15, 1.0)
        z_wrong, _ = chi2_z(counts[m, :filled], n * wrong / wrong.sum())
        assert z_wrong > 8.0, z_wrong


def expected_rows(p: np.ndarray, filled: int, u: np.ndarray):
    """float64 reference: row of each stratified target (k + u_k) / B * total, and the distance of the target
    to the nearest row boundary relative to the total."""
    cum = np.cumsum(p[:filled])
    total = cum[-1]
    b = u.shape[0]
    target = (np.arange(b) + u) / b * total
    rows = np.searchsorted(cum, target, side="right")
    edges = np.concatenate([[0.0], cum])
    gap = np.minimum(np.abs(target - edges[rows]), np.abs(edges[np.minimum(rows + 1, filled)] - target)) / total
    return rows, gap


@pytest.mark.parametrize("capacity, block, filled", [(1000, 128, 900), (5000, 1024, 3333), (300, 1024, 300),
                                                     (4096, 256, 4096)])
def test_stratified_one_draw_per_segment(capacity, block, filled):
    """Draw k's row covers part of the k-th of B equal segments of the cumulative mass (recomputed in float64);
    the draw is the row of the target (k + u_k) / B * total with the stream's one uniform call."""
    pri = Priorities(2, capacity, "cpu", block=block)
    spread(pri, filled, seed=capacity)
    p = priorities64(pri)
    rng = AgentRNG([7, 8])
    fill = torch.tensor(filled)
    for batch in (1, 7, 64, 256):
        twin = AgentRNG([7, 8])
        twin.set_state(rng.get_state())
        u = twin.uniform(batch).double().numpy()
        idx = pri.sample(rng, batch, fill)
        assert idx.shape == (2, batch) and idx.dtype == torch.int64
        assert torch.equal(rng.counter, twin.counter)  # exactly one uniform(batch) call
        idx = idx.numpy()
        for m in range(2):
            cum = np.concatenate([[0.0], np.cumsum(p[m, :filled])])
            total = cum[-1]
            lo, hi = cum[idx[m]] / total, cum[idx[m] + 1] / total  # the row's share of [0, 1)
            k = np.arange(batch)
            tol = 1e-6
            assert (lo <= (k + 1) / batch + tol).all() and (hi >= k / batch - tol).all(), (m, batch)
            assert (np.diff(idx[m]) >= 0).all()
            assert (idx[m] < filled).all() and (p[m, idx[m]] > 0).all()
            rows, gap = expected_rows(p[m], filled, u[m])
            differ = rows != idx[m]
            assert not (differ & (gap > 1e-6)).any(), (m, batch, idx[m][differ], rows[differ], gap[differ])


class FixedUniform:
    """A stand-in stream returning given uniforms (the segment ends, which float32 round-off must survive)."""

    def __init__(self, u: torch.Tensor):
        self.u = u

    def uniform(self, *shape):
        return self.u.expand(self.u.shape[0], *shape).clone()


@pytest.mark.parametrize("filled", [1, 2, 63, 64, 65, 199, 200])
def test_segment_ends_land_on_filled_rows(filled):
    """u = 0 and u = 1 - 2**-24 (the largest draw) at every segment, priorities over 7 decades rising or
    falling, a partly filled last block: every index is < filled with a positive priority and is the float64
    reference's row; the very first draw is row 0, the very last of rising priorities is the last filled row."""
    pri = Priorities(2, 200, "cpu", block=64)
    rows = torch.arange(filled)
    pri.add(rows)
    td = torch.logspace(-6, 6, filled).expand(2, filled).contiguous()
    td[1] = td[1].flip(0)
    pri.update(rows.expand(2, filled).contiguous(), td)
    p = priorities64(pri)
    fill = torch.tensor(filled)
    for batch in (1, 32):
        for u in (0.0, 1.0 - 2.0**-24):
            idx = pri.sample(FixedUniform(torch.full((2, 1), u)), batch, fill)
            assert (idx >= 0).all() and (idx < filled).all()
            assert (pri.priorities.gather(1, idx) > 0).all()
            for m in range(2):
                ref, gap = expected_rows(p[m], filled, np.full(batch, u))
                assert ((ref == idx[m].numpy()) | (gap < 1e-6)).all(), (m, u, idx[m], ref)
    top = pri.sample(FixedUniform(torch.full((2, 1), 1.0 - 2.0**-24)), 1, fill)
    assert top[0].item() == filled - 1
    bottom = pri.sample(FixedUniform(torch.zeros(2, 1)), 1, fill)
    assert bottom.tolist() == [[0], [0]]


def test_zero_priority_rows_are_never_drawn():
    """Rows whose priority is 0 below ``filled`` (a whole block, single rows, the last rows): never drawn, also
    by the largest draw, whose float32 local target rounds up to its block's whole mass."""
    pri = Priorities(2, 256, "cpu", block=32)
    spread(pri, 200, seed=2)
    state = pri.state_dict()
    holes = np.r_[32:64, 7, 100, 150, 195:200]
    state["priorities"][:, holes] = 0.0
    pri.load_state_dict(state)
    fill = torch.tensor(200)
    rng = AgentRNG([1, 2])
    draws = [pri.sample(FixedUniform(torch.full((2, 1), u)), b, fill)
             for u in (0.0, 1.0 - 2.0**-24) for b in (1, 5, 64)]
    draws += [pri.sample(rng, 256, fill) for _ in range(50)]
    drawn = torch.cat([d.reshape(-1) for d in draws]).numpy()
    assert not np.isin(drawn, holes).any()
    assert (pri.priorities.gather(1, torch.cat(draws, dim=1)) > 0).all()


@pytest.mark.parametrize("beta", [0.4, 1.0, "tensor"])
def test_weights_match_numpy(beta):
    capacity, filled, batch = 700, 650, 96
    pri = Priorities(3, capacity, "cpu", block=128)
    spread(pri, filled, seed=3)
    p = priorities64(pri)
    idx = pri.sample(AgentRNG([1, 2, 3]), batch, torch.tensor(filled))
    b = 0.7 if beta == "tensor" else beta
    w = pri.weights(idx, torch.tensor(filled), torch.tensor(b) if beta == "tensor" else b)
    assert w.shape == (3, batch, 1) and w.dtype == torch.float32
    for m in range(3):
        prob = p[m, idx[m].numpy()] / p[m, :filled].sum()
        ref = (filled * prob) ** -b
        ref /= ref.max()
        np.testing.assert_allclose(w[m, :, 0].double().numpy(), ref, rtol=2e-6, atol=0)
        assert w[m].max().item() == 1.0


def test_update_writes_exactly_the_drawn_rows():
    """After a draw with many repeated rows: each drawn row holds (|td| + eps) ** alpha of one of its draws,
    every other priority is unchanged bit for bit, block sums equal a recomputation, the max priority is the
    largest ever set (or 1), and rows added next start at it."""
    capacity, filled, batch = 2000, 1500, 128
    pri = Priorities(2, capacity, "cpu", block=256)
    spread(pri, filled, seed=4)
    pri.update(torch.tensor([[10], [20]]), torch.tensor([[3e4], [2e4]]))  # rows drawn over and over
    ever = [[1.0], [1.0]]
    for m in range(2):
        ever[m].append(float(priorities64(pri)[m].max()))
    rng = AgentRNG([3, 4])
    fill = torch.tensor(filled)
    gen = torch.Generator().manual_seed(0)
    for step in range(3):
        before = pri.priorities.clone()
        idx = pri.sample(rng, batch, fill)
        td = torch.randn(2, batch, 1, generator=gen) * 10.0 ** step
        assert len(np.unique(idx[0].numpy())) < batch  # repeats present
        pri.update(idx, td)
        after = pri.priorities
        new = (td.abs().double().squeeze(-1) + EPS) ** ALPHA
        for m in range(2):
            touched = np.zeros(capacity, dtype=bool)
            touched[idx[m].numpy()] = True
            assert torch.equal(after[m, ~torch.from_numpy(touched)], before[m, ~torch.from_numpy(touched)])
            for row in np.unique(idx[m].numpy()):
                candidates = new[m][idx[m] == int(row)].numpy()
                assert np.isclose(candidates, float(after[m, row]), rtol=1e-6, atol=0).any()
            ever[m].append(float(new[m].max()))
        sums = pri.block_sums.double().numpy()
        p = pri.p.double().numpy().reshape(2, pri.num_blocks, pri.block)
        np.testing.assert_allclose(sums, p.sum(-1), rtol=1e-6)
        assert torch.equal(pri.block_sums, _pairwise_sum(pri.p.view(2, pri.num_blocks, pri.block)))
        np.testing.assert_allclose(pri.max_priority.double().numpy(), [max(e) for e in ever], rtol=1e-6)
    new_rows = torch.tensor([filled, filled + 1, filled + 2])
    pri.add(new_rows)
    assert torch.equal(pri.priorities[:, new_rows], pri.max_priority.view(2, 1).expand(2, 3))
    assert torch.equal(pri.block_sums, _pairwise_sum(pri.p.view(2, pri.num_blocks, pri.block)))


def test_fresh_rows_get_one_then_the_max():
    pri = Priorities(2, 100, "cpu", block=32)
    pri.add(torch.arange(4))
    assert torch.equal(pri.priorities[:, :4], torch.ones(2, 4)) and (pri.priorities[:, 4:] == 0).all()
    pri.update(torch.tensor([[0, 1], [2, 2]]), torch.tensor([[0.5, 9.0], [0.1, 0.2]]))
    assert pri.max_priority[0].item() == pytest.approx((9.0 + EPS) ** ALPHA, rel=1e-6)
    assert pri.max_priority[1].item() == 1.0  # never above the initial 1
    pri.add(torch.tensor([4, 5]))
    assert pri.priorities[0, 4].item() == pri.max_priority[0].item() and pri.priorities[1, 5].item() == 1.0
    assert pri.priorities[1, 2].item() == pytest.approx((0.2 + EPS) ** ALPHA, rel=1e-6)  # the larger duplicate


def run_members(seeds, focus_td_seed, steps=120, batch=24, capacity=150, writers=2):
    """A ring of ``capacity`` rows, ``writers`` written per step, then sample/weights/update; member m's TD
    errors come from its own seed. Returns per step (idx, weights) and the sampler."""
    pri = Priorities(len(seeds), capacity, "cpu", block=32)
    rng = AgentRNG(seeds)
    gens = [np.random.default_rng(s + focus_td_seed) for s in seeds]
    ptr, size, out = 0, 0, []
    filled = torch.zeros((), dtype=torch.int64)
    for step in range(steps):
        pri.add((ptr + torch.arange(writers)) % capacity)
        ptr, size = (ptr + writers) % capacity, min(size + writers, capacity)
        filled.fill_(size)
        idx = pri.sample(rng, batch, filled)
        w = pri.weights(idx, filled, torch.tensor(0.4 + 0.6 * step / steps))
        td = np.stack([g.standard_normal(batch) * (1 + step % 7) for g in gens]).astype(np.float32)
        pri.update(idx, torch.from_numpy(td).unsqueeze(-1))
        out.append((idx.clone(), w.clone()))
    return out, pri


def test_a_member_alone_equals_the_member_among_others():
    """B = 24 (not a multiple of the vector width) and a ring that wraps: member 22 alone and as the middle of
    three gives the same indices and weights at every step, and the same priorities, sums and max, bit for bit."""
    together, pri3 = run_members([11, 22, 33], 0)
    alone, pri1 = run_members([22], 0)
    for (i3, w3), (i1, w1) in zip(together, alone):
        assert torch.equal(i3[1:2], i1) and torch.equal(w3[1:2], w1)
    assert torch.equal(pri3.p[1:2], pri1.p) and torch.equal(pri3.sums[1:2], pri1.sums)
    assert torch.equal(pri3.max[1:2], pri1.max)
    assert not torch.equal(together[-1][0][0], together[-1][0][1])  # members do differ


def test_state_dict_round_trip_gives_the_same_draws():
    pri = Priorities(3, 400, "cpu", block=64)
    spread(pri, 350, seed=9)
    rng = AgentRNG([1, 2, 3])
    fill = torch.tensor(350)
    for _ in range(5):
        idx = pri.sample(rng, 32, fill)
        pri.update(idx, torch.randn(3, 32))
    buf = io.BytesIO()
    torch.save({"pri": pri.state_dict(slice(1, 3)), "rng": rng.get_state()[1:]}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    restored = Priorities(2, 400, "cpu", block=64)
    restored.load_state_dict(saved["pri"])  # all members of a 2-member sampler
    rng2 = AgentRNG([2, 3])
    rng2.set_state(saved["rng"])
    into = Priorities(3, 400, "cpu", block=64)
    spread(into, 100, seed=0)  # stale content must be replaced entirely
    into.load_state_dict(saved["pri"], slice(1, 3))
    for target in (restored.p, into.p[1:]):
        assert torch.equal(target, pri.p[1:])
    assert torch.equal(restored.sums, pri.sums[1:]) and torch.equal(into.sums[1:], pri.sums[1:])
    assert torch.equal(restored.max, pri.max[1:])
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        idx, idx2 = pri.sample(rng, 32, fill), restored.sample(rng2, 32, fill)
        assert torch.equal(idx[1:], idx2)
        assert torch.equal(pri.weights(idx, fill, 0.5)[1:], restored.weights(idx2, fill, 0.5))
        td = torch.randn(3, 32, generator=gen)
        pri.update(idx, td)
        restored.update(idx2, td[1:])
    assert torch.equal(pri.p[1:], restored.p)
    with pytest.raises(ValueError, match="capacity"):
        Priorities(2, 500, "cpu", block=64).load_state_dict(saved["pri"])
    with pytest.raises(ValueError, match="members"):
        Priorities(3, 400, "cpu", block=64).load_state_dict(saved["pri"])


def test_sample_weights_update_are_capture_safe():
    """Under the op recorder: no op a CUDA graph cannot hold, no host read (.item(), _local_scalar_dense), no
    boolean-mask indexing; the same ops run whatever the data and ``filled`` (no data-dependent branch)."""
    records = []
    for filled, seed in ((300, 0), (1000, 1)):
        pri = Priorities(2, 1000, "cpu", block=128)
        spread(pri, filled, seed)
        rng, fill, beta = AgentRNG([seed, 5]), torch.tensor(filled), torch.tensor(0.5)
        td = torch.rand(2, 64, 1)
        with OpRecorder() as rec:
            idx = pri.sample(rng, 64, fill)
            pri.weights(idx, fill, beta)
            pri.update(idx, td)
            pri.add(torch.tensor([5, 6]))
        assert not rec.unsafe, rec.unsafe
        assert "_local_scalar_dense" not in rec.ops and "item" not in rec.ops
        assert rec.ops["searchsorted"] == 1 and rec.ops["scatter_reduce_"] == 1 and rec.total > 50
        records.append(rec.ops)
    assert records[0] == records[1]
    assert "_local_scalar_dense" in CAPTURE_UNSAFE and "nonzero" in CAPTURE_UNSAFE


def test_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        Priorities(1, 100, "cpu", block=100)
    with pytest.raises(ValueError):
        Priorities(0, 100, "cpu")
    assert Priorities(1, 300, "cpu").block == 512  # never a block longer than the rows
