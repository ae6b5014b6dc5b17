"""Statistics over runs: smoothing, interquartile mean, percentile bootstrap, NaN-ignoring means."""
from __future__ import annotations

import math

import numpy as np

BOOTSTRAP = 2000


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
