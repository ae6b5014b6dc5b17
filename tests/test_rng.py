"""The per-agent counter-based random streams: the right distributions, one stream per agent whatever N."""
import math

import numpy as np
import pytest
import torch

from algorithms.common.nets import AgentRNG


def lowbias32(x: int) -> int:
    """The hash written out in plain Python integers, as an independent reference."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def reference_bits(seed: int, call: int, k: int) -> int:
    key0, key1 = (int(v) for v in np.random.SeedSequence(seed).generate_state(2))
    h = lowbias32((k * 0x9E3779B9 + key0) & 0xFFFFFFFF)
    h = lowbias32(h ^ (call & 0xFFFFFFFF))
    h = lowbias32((h + key1) & 0xFFFFFFFF)
    return lowbias32(h ^ (call >> 32))


def test_bits_equal_a_plain_python_computation():
    rng = AgentRNG([0, 12345])
    for call in range(3):
        drawn = rng.bits(5)
        for m, seed in enumerate([0, 12345]):
            assert drawn[m].tolist() == [reference_bits(seed, call, k) for k in range(5)]
    rng.set_state([torch.tensor([*s[:2].tolist(), 2**32 + 7]) for s in rng.get_state()])  # a counter past 32 bits
    assert rng.bits(3)[1].tolist() == [reference_bits(12345, 2**32 + 7, k) for k in range(3)]


def test_an_agents_stream_does_not_depend_on_the_others():
    alone, together = AgentRNG([7]), AgentRNG([3, 7, 11, 19])
    for draw in (lambda r: r.normal(4, 3), lambda r: r.randint(1000, 17), lambda r: r.uniform(2),
                 lambda r: r.randint(torch.tensor(50), 8)):
        assert torch.equal(draw(alone)[0], draw(together)[1])
    a = AgentRNG([3, 7]).normal(1000)
    assert not torch.equal(a[0], a[1])
    assert abs(np.corrcoef(a[0].numpy(), a[1].numpy())[0, 1]) < 0.1


def test_uniform_and_integers_are_uniform():
    rng = AgentRNG([1, 2])
    u = rng.uniform(200_000)
    assert u.min() >= 0 and u.max() < 1
    for row in u:
        assert abs(row.mean().item() - 0.5) < 0.005 and abs(row.var().item() - 1 / 12) < 0.002
        counts = torch.histc(row, bins=20, min=0, max=1)
        chi2 = ((counts - 10_000) ** 2 / 10_000).sum().item()
        assert chi2 < 50  # chi-square, 19 degrees of freedom: 99.99 % quantile about 48
    ints = rng.randint(torch.tensor(7), 70_000)
    assert ints.min() == 0 and ints.max() == 6 and ints.dtype == torch.int64
    counts = torch.bincount(ints[0], minlength=7).double()
    assert ((counts - 10_000) ** 2 / 10_000).sum().item() < 30  # 6 degrees of freedom
    # successive calls are new numbers
    assert not torch.equal(rng.bits(10), rng.bits(10))


def test_normals_have_the_normal_quantiles():
    z = AgentRNG([5]).normal(400_000)[0].double()
    assert abs(z.mean().item()) < 0.006 and abs(z.std().item() - 1) < 0.006
    probs = torch.tensor([0.001, 0.02, 0.16, 0.5, 0.84, 0.98, 0.999], dtype=torch.float64)
    expected = torch.distributions.Normal(0.0, 1.0).icdf(probs)
    torch.testing.assert_close(torch.quantile(z, probs), expected, atol=0.03, rtol=0)
    assert torch.isfinite(z).all()


def test_state_round_trip_continues_the_streams():
    rng = AgentRNG([4, 8])
    rng.normal(3)
    saved = rng.get_state()
    first = (rng.normal(5), rng.randint(99, 4))
    other = AgentRNG([0, 0])
    other.set_state(saved)
    assert torch.equal(other.normal(5), first[0]) and torch.equal(other.randint(99, 4), first[1])
    with pytest.raises(ValueError):
        AgentRNG([1]).set_state(saved)


def test_normals_reach_the_tails_without_infinities():
    z = AgentRNG([9]).normal(2_000_000)[0]
    assert torch.isfinite(z).all() and z.abs().max() > 4.5 and z.abs().max() <= math.sqrt(2 * 24 * math.log(2)) + 1e-4


@pytest.mark.parametrize("shape", [(2,), (256, 6), (1, 17)])
def test_blocks_of_calls_give_the_numbers_of_single_calls(shape):
    """Hashing many calls at once (the default) returns, call by call, the numbers of hashing each call alone,
    bit for bit, across block refills, interleaved kinds and a state reload; the counters agree throughout."""
    blocked, single = AgentRNG([1, 2, 3]), AgentRNG([1, 2, 3])
    single.blocks = False
    blocked.BLOCK_NUMBERS = 3000  # small blocks: many refills
    for i in range(400):
        assert torch.equal(blocked.normal(*shape), single.normal(*shape)), i
        high = torch.tensor(1000 + i)
        assert torch.equal(blocked.randint(high, 7), single.randint(high, 7)), i
        assert torch.equal(blocked.uniform(3), single.uniform(3)), i
        if i % 97 == 0:
            assert torch.equal(blocked.bits(2), single.bits(2))  # an unblocked call in between
        if i == 250:
            state = single.get_state()
            blocked.set_state(state)
        assert torch.equal(blocked.counter, single.counter)


def test_interleaved_kinds_keep_their_blocks():
    """A stream that alternates kinds (ACER's replay draws a uniform, then integers) hashes a block per kind now and
    then, not one per call: calls of other kinds only skip the block's entries."""
    rng, hashed = AgentRNG([4, 5]), []
    original = rng._hash
    rng._hash = lambda shape, calls: hashed.append(calls) or original(shape, calls)
    for _ in range(1000):
        rng.uniform(16)
        rng.randint(50, 16)
        rng.normal(16)
    # 3000 calls; each kind's block covers 256 consecutive calls, a third of them its own
    assert len(hashed) <= 3 * (3000 // 256 + 1) and all(c == AgentRNG.MAX_BLOCK_CALLS for c in hashed)
    assert len(rng._blocks) <= 3
