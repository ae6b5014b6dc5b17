"""The statistics of a comparison. Across tasks, rliable's (Agarwal et al. 2021): interval estimates by its
stratified bootstrap (runs resampled within each task, percentile intervals) of IQM, mean, median and optimality
gap, of the probability of improvement over the baseline, of performance profiles and of IQM against steps. Paired
differences by seed are the project's own small bootstrap (``paired_difference``).

rliable 1.2 draws its resamples from NumPy's global generator: every call here seeds it with the suite's
``bootstrap_seed`` first and puts the generator's state back afterwards (``global_seed``), so each statistic is the
same whatever ran before it, and the caller's random numbers are left as they were.
"""
from __future__ import annotations

import contextlib

import numpy as np

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
    """IQM over runs and tasks at each point of [runs x tasks x points]: rliable's ``aggregate_iqm`` (scipy's
    ``trim_mean`` of a quarter at each end) of every point's runs and tasks, all points in one call."""
    from scipy import stats

    return stats.trim_mean(scores.reshape(-1, scores.shape[-1]), proportiontocut=0.25, axis=0)


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
    task (stratified, as rliable's runs), from ``numpy.random.default_rng(seed)``; for one task the resamples are
    ``utils.plot.stats.bootstrap_ci``'s."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    n, tasks = d.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=(reps, n, tasks))
    means = d[rows, np.arange(tasks)].mean(axis=(1, 2))
    lo, hi = np.percentile(means, 2.5), np.percentile(means, 97.5)
    return {"estimate": float(d.mean()), "ci": [float(lo), float(hi)], "pairs": int(d.size),
            "better": int((d > 0).sum()), "worse": int((d < 0).sum())}
