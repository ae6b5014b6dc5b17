"""Statistics over runs, the project's one module of them: smoothing, the interquartile mean, the percentile bootstrap
(over runs, or stratified by task), NaN-ignoring means, the two tests the tables use over seeds (a permutation test of
two groups, a sign-flip test of paired differences), and the comparison's statistics across tasks.

Across tasks, rliable's (Agarwal et al. 2021): interval estimates by its stratified bootstrap (runs resampled within
each task, percentile intervals) of IQM, mean, median and optimality gap, of the probability of improvement over the
baseline, of performance profiles and of IQM against steps. Paired differences by seed: ``paired_difference``, the
bootstrap below stratified by task.

rliable 1.2 draws its resamples from NumPy's global generator: every call here seeds it with the suite's
``bootstrap_seed`` first and puts the generator's state back afterwards (``global_seed``), so each statistic is the
same whatever ran before it, and the caller's random numbers are left as they were."""
from __future__ import annotations

import contextlib
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


def iqm(x: np.ndarray, axis: int | tuple | None = -1) -> np.ndarray:
    """Interquartile mean: drop floor(n/4) runs at each end, average the rest. It is scipy's ``trim_mean(x, 0.25)``
    itself, the one rliable's ``aggregate_iqm`` computes (``axis=None``: over every value)."""
    from scipy import stats

    return stats.trim_mean(x, proportiontocut=0.25, axis=axis)


def bootstrap_ci(x: np.ndarray, stat, n: int = BOOTSTRAP, seed: int = 0, stratified: bool = False):
    """95 % percentile bootstrap interval of ``stat`` over runs, the first axis of ``x``, from
    ``numpy.random.default_rng(seed)``: floats for x [runs], arrays [evaluations] for x [runs, evaluations] (every
    evaluation resampled with the same runs). ``stratified``: x [runs, tasks] with runs resampled within each task
    (rliable's stratified bootstrap), ``stat`` over each resample's runs and tasks (``axis=(1, 2)``); floats. For one
    task the resamples are the unstratified ones."""
    rng = np.random.default_rng(seed)
    if stratified:
        runs, tasks = x.shape
        values = stat(x[rng.integers(0, runs, size=(n, runs, tasks)), np.arange(tasks)], axis=(1, 2))
        return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))
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


# ---- the comparison across tasks (utils.compare) ------------------------------------------------------------------
METRICS = ("IQM", "mean", "median", "optimality gap")


@contextlib.contextmanager
def global_seed(seed: int):
    """NumPy's global generator seeded with ``seed`` inside, restored to its previous state on leaving."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def aggregate_metrics(scores: np.ndarray) -> np.ndarray:
    """[IQM, mean, median, optimality gap] of normalised scores [runs x tasks] (rliable.metrics)."""
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores), metrics.aggregate_median(scores),
                     metrics.aggregate_optimality_gap(scores)])


def iqm_per_point(scores: np.ndarray) -> np.ndarray:
    """IQM over runs and tasks at each point of [runs x tasks x points] (``iqm``, rliable's ``aggregate_iqm`` of every
    point's runs and tasks), all points in one call."""
    return iqm(scores.reshape(-1, scores.shape[-1]), axis=0)


def score_profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """The fraction of runs and tasks whose score exceeds each tau: rliable's score distribution (its
    ``run_score_deviation`` at every tau), computed for all taus at once."""
    return (scores[..., None] > taus).mean(axis=tuple(range(scores.ndim)))


def profile_taus(scores: dict[str, np.ndarray], points: int = 101) -> np.ndarray:
    """Thresholds from the lowest score (or 0) to the highest (or 1, the target)."""
    values = np.concatenate([s.ravel() for s in scores.values()])
    return np.linspace(min(0.0, float(values.min())), max(1.0, float(values.max())), points)


def _interval(point, interval) -> dict:
    return {"estimate": float(point), "ci": [float(interval[0]), float(interval[1])]}


def statistics(scores: dict[str, np.ndarray], baseline: str, reps: int, seed: int,
               tasks: dict[str, list[str]] | None = None) -> dict:
    """Everything the report says of normalised final scores {method: [runs x tasks]} across tasks:
    ``aggregates`` {method: {metric: {estimate, ci}}} (one ``get_interval_estimates`` call over all methods with
    ``aggregate_metrics``), ``probability_of_improvement`` {method: {estimate, ci}} of each method over the baseline
    (one call on the pairs "method,baseline" with ``metrics.probability_of_improvement``), and
    ``performance_profile`` (``create_performance_profile`` at ``profile_taus``). Each call after
    ``np.random.seed(seed)``, with ``reps`` resamples and 95 % percentile intervals. ``tasks``: the task names of each
    method's columns, when methods run on different tasks: a method's aggregates and profile are over its own tasks,
    its probability of improvement over the tasks it shares with the baseline (none shared: left out)."""
    from rliable import library, metrics

    with global_seed(seed):
        points, intervals = library.get_interval_estimates(scores, aggregate_metrics, reps=reps)
    aggregates = {m: {name: _interval(points[m][j], intervals[m][:, j]) for j, name in enumerate(METRICS)}
                  for m in scores}
    pairs = {}
    for m in scores:
        if m == baseline:
            continue
        if tasks is None:
            pairs[f"{m},{baseline}"] = (scores[m], scores[baseline])
        elif shared := [t for t in tasks[m] if t in tasks[baseline]]:
            pairs[f"{m},{baseline}"] = (scores[m][:, [tasks[m].index(t) for t in shared]],
                                        scores[baseline][:, [tasks[baseline].index(t) for t in shared]])
    improvement = {}
    if pairs:
        with global_seed(seed):
            points, intervals = library.get_interval_estimates(pairs, metrics.probability_of_improvement, reps=reps)
        improvement = {key.split(",")[0]: _interval(points[key], intervals[key][:, 0]) for key in pairs}
    taus = profile_taus(scores)
    with global_seed(seed):
        profiles, cis = library.create_performance_profile(scores, taus, custom_profile_func=score_profile, reps=reps)
    profile = {"taus": taus.tolist(), "methods": {m: {"fraction": profiles[m].tolist(), "ci": cis[m].tolist()}
                                                  for m in scores}}
    return {"aggregates": aggregates, "probability_of_improvement": improvement, "performance_profile": profile}


def efficiency(scores: dict[str, np.ndarray], reps: int, seed: int) -> dict:
    """IQM against steps: {method: {iqm: [points], ci: [[lower], [upper]]}} of normalised scores
    [runs x tasks x points] (``get_interval_estimates`` with ``iqm_per_point``)."""
    from rliable import library

    with global_seed(seed):
        points, intervals = library.get_interval_estimates(scores, iqm_per_point, reps=reps)
    return {m: {"iqm": points[m].tolist(), "ci": intervals[m].tolist()} for m in scores}


def paired_difference(a: np.ndarray, b: np.ndarray, reps: int, seed: int) -> dict:
    """A minus B paired by seed: ``a`` and ``b`` are [seeds x tasks] (the same seed in the same row, the same task in
    the same column). The mean over all pairs and its 95 % percentile bootstrap interval, seeds resampled within each
    task (``bootstrap_ci``, stratified, as rliable's runs)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    lo, hi = bootstrap_ci(d, np.mean, reps, seed, stratified=True)
    return {"estimate": float(d.mean()), "ci": [lo, hi], "pairs": int(d.size),
            "better": int((d > 0).sum()), "worse": int((d < 0).sum())}
