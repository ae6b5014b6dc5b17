"""Statistics over runs: smoothing, interquartile mean, percentile bootstrap, NaN-ignoring means, and the two tests
the experiments' tables use over seeds (a permutation test of two groups, a sign-flip test of paired differences).
The project's one home for them: table scripts import them from here, never from each other."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 2000
PERMUTATIONS = 20_000  # relabellings beyond which the permutation test samples (the sign-flip test: EXACT_SEEDS)


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` evaluations (shorter windows at the start)."""
    if window <= 1:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0, axis=-1), axis=-1)
    idx = np.arange(1, y.shape[-1] + 1)
    lo = np.maximum(idx - window, 0)
    return (c[..., idx] - c[..., lo]) / (idx - lo)


def iqm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: drop floor(n/4) runs at each end, average the rest (scipy's trim_mean(x, 0.25))."""
    x = np.sort(x, axis=axis)
    n = x.shape[axis]
    k = int(math.floor(0.25 * n))
    return np.take(x, np.arange(k, n - k), axis=axis).mean(axis=axis)


def bootstrap_ci(x: np.ndarray, stat, n: int = BOOTSTRAP, seed: int = 0):
    """95 % percentile bootstrap interval of ``stat`` over runs, the first axis of ``x``: floats for x [runs],
    arrays [evaluations] for x [runs, evaluations] (every evaluation resampled with the same runs)."""
    rng = np.random.default_rng(seed)
    values = stat(x[rng.integers(0, len(x), size=(n, len(x)))], axis=1)
    lo, hi = np.percentile(values, 2.5, axis=0), np.percentile(values, 97.5, axis=0)
    return (float(lo), float(hi)) if x.ndim == 1 else (lo, hi)


def median_ci(values, seed: int = 0, n: int = BOOTSTRAP) -> tuple[float, float, float]:
    """The median over runs and its 95 % percentile bootstrap interval, where values may be inf (e.g. episodes to
    solve of a run never solved): order statistics of each resample (the middle value, or the mean of the two, inf
    when either is), percentiles by the inverted CDF (so an interval end is a resample's median, inf included)."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.sort(x[rng.integers(0, len(x), size=(n, len(x)))], axis=1)
    k = len(x)
    mid = medians[:, (k - 1) // 2] if k % 2 else (medians[:, k // 2 - 1] + medians[:, k // 2]) / 2
    lo, hi = np.percentile(mid, [2.5, 97.5], method="inverted_cdf")
    return float(np.median(x)), float(lo), float(hi)


def mean_band(m: np.ndarray, ci: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and its band: ± std across runs, or a 95 % bootstrap CI of the mean."""
    mean = m.mean(axis=0)
    if not ci or len(m) < 2:
        std = m.std(axis=0)
        return mean, mean - std, mean + std
    return (mean, *bootstrap_ci(m, np.mean))


def nan_mean(m: np.ndarray) -> np.ndarray:
    """Mean over runs (axis 0) ignoring NaN; NaN where every run is NaN (np.nanmean without its warning)."""
    known = ~np.isnan(m)
    count = known.sum(axis=0)
    total = np.where(known, m, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def permutation_p(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    """Two-sided p of the difference of means of two independent groups of seeds, under relabelling of the pooled
    seeds: every relabelling (the observed one among them) up to PERMUTATIONS of them, else PERMUTATIONS random ones
    plus the observed one, so p is never 0 (the smallest possible p: 2 / C(a + b, a) exact, e.g. 0.10 for 3 seeds
    against 3)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    pooled, n = np.concatenate([a, b]), len(a)
    observed = abs(a.mean() - b.mean())
    if math.comb(len(pooled), n) <= PERMUTATIONS:
        splits = [np.array(c) for c in itertools.combinations(range(len(pooled)), n)]
    else:
        rng = np.random.default_rng(seed)
        splits = [rng.permutation(len(pooled))[:n] for _ in range(PERMUTATIONS)]
    total = pooled.sum()
    diffs = [abs(pooled[s].mean() - (total - pooled[s].sum()) / (len(pooled) - n)) for s in splits]
    extreme = int(np.sum(np.asarray(diffs) >= observed - 1e-9))
    if len(splits) < math.comb(len(pooled), n):  # sampled: count the observed labelling too
        return (extreme + 1) / (len(splits) + 1)
    return extreme / len(splits)


EXACT_SEEDS = 40  # sign-flip tests enumerate every labelling up to this many seeds (2^20 sums per half)
ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class SignFlip:
    """A sign-flip test's answer: ``p``, whether every labelling was counted (``exact``) and how many labellings
    ``p`` counts over (2^n exact; else the random ones plus the observed one)."""

    p: float
    exact: bool
    patterns: int

    def words(self) -> str:
        """How ``p`` was found, as the reports print it: "exact" or "sampled (N patterns)"."""
        return "exact" if self.exact else f"sampled ({self.patterns:,} patterns)"


def _signed_sums(x: np.ndarray) -> np.ndarray:
    """The sums of ``x`` under all 2^len(x) sign labellings."""
    sums = np.zeros(1)
    for v in x:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def sign_flip_test(d, alternative: str = "two-sided", shift: float = 0.0, seed: int = 0) -> SignFlip:
    """The sign-flip (randomisation) test of paired differences ``d`` (one per seed) against a mean of ``shift``: the
    share of the 2^n +/- labellings of ``d - shift`` whose sum is at least as extreme as the observed one (the observed
    labelling among them, so p >= 1 / 2^n one-sided, 2 / 2^n two-sided: 5 seeds 0.0625). "greater": sums at or above
    the observed sum; "less": at or below; "two-sided": |sum| at or above |observed|. Exact up to EXACT_SEEDS seeds:
    the sums of the two halves' labellings, one half sorted, each sum of the other half counted by binary search
    (2^(n/2) sums each, not 2^n); past that, PERMUTATIONS random labellings plus the observed one."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative: expected one of {', '.join(ALTERNATIVES)}, got {alternative!r}")
    x = np.asarray(d, dtype=np.float64).ravel() - shift
    n, observed = len(x), float(x.sum())
    tol = 1e-9 * max(1.0, float(np.abs(x).sum()))  # sums of the same values in another order
    if n <= EXACT_SEEDS:
        left, right = _signed_sums(x[: n // 2]), np.sort(_signed_sums(x[n // 2:]))
        total = len(left) * len(right)

        def at_least(a):  # labellings whose sum >= a
            return int((len(right) - np.searchsorted(right, a - tol - left, side="left")).sum())

        def at_most(a):  # labellings whose sum <= a
            return int(np.searchsorted(right, a + tol - left, side="right").sum())
        if alternative == "greater":
            count = at_least(observed)
        elif alternative == "less":
            count = at_most(observed)
        else:
            a = abs(observed)
            count = total if a <= tol else at_least(a) + at_most(-a)
        return SignFlip(count / total, True, total)
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(PERMUTATIONS, n))
    sums = signs @ x
    hits = {"greater": sums >= observed - tol, "less": sums <= observed + tol,
            "two-sided": np.abs(sums) >= abs(observed) - tol}[alternative]
    return SignFlip((int(hits.sum()) + 1) / (PERMUTATIONS + 1), False, PERMUTATIONS + 1)


def sign_flip_p(d: np.ndarray, seed: int = 0) -> float:
    """Two-sided p of a mean paired difference (one value per seed): ``sign_flip_test``'s, exact up to EXACT_SEEDS
    seeds."""
    return sign_flip_test(d, seed=seed).p
