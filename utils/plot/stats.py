"""Statistics over runs: smoothing, interquartile mean, percentile bootstrap, NaN-ignoring means, and the two tests
the experiments' tables use over seeds (a permutation test of two groups, a sign-flip test of paired differences).
The project's one home for them: table scripts import them from here, never from each other."""
from __future__ import annotations

import itertools
import math

import numpy as np

BOOTSTRAP = 2000
PERMUTATIONS = 20_000  # relabellings beyond which both tests sample at random


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


def sign_flip_p(d: np.ndarray, seed: int = 0) -> float:
    """Two-sided p of a mean paired difference (one value per seed): the share of the 2^n +/- labellings of ``d``
    whose mean is at least as far from 0 as the observed one, the observed labelling among them (p >= 2 / 2^n; 5
    seeds: 0.0625). Exact while 2^n <= PERMUTATIONS, else PERMUTATIONS random labellings plus the observed one."""
    d = np.asarray(d, dtype=np.float64).ravel()
    if 2 ** len(d) <= PERMUTATIONS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
        return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(PERMUTATIONS, len(d)))
    extreme = int(np.sum(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))
    return (extreme + 1) / (PERMUTATIONS + 1)
