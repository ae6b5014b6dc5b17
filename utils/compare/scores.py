"""From a suite's curve files to the scores it compares: a seed's agents averaged first, the final score the mean of
its last K evaluations, normalised per task by its pair of reference scores."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..naming import curve_length, curve_names
from ..plot.tables import final_window
from .plan import Entry
from .suite import Suite, SuiteError


@dataclass
class Curves:
    """One method on one task: per seed (rows, the suite's order) the mean over its agents of every evaluation."""

    entry: Entry
    matrix: np.ndarray  # [seeds, evaluations]
    budget_steps: np.ndarray  # [evaluations]: the step of each evaluation under the suite's budget rule

    def final(self, k: int) -> np.ndarray:
        """Each seed's final score: the mean of its last ``k`` evaluations."""
        return self.matrix[:, -k:].mean(axis=1)

    def at_fractions(self, fractions: np.ndarray, k: int) -> np.ndarray:
        """[seeds, points]: at each fraction of the budget, the mean of the ``k`` evaluations ending at the last one
        at or before it (fewer near the start); at 1 this is ``final(k)``."""
        run = self.entry.run
        ends = np.floor(fractions * run.steps / run.eval_freq + 1e-9).astype(int)
        return np.stack([self.matrix[:, max(0, e - k + 1): e + 1].mean(axis=1) for e in ends], axis=1)


def load_curves(entry: Entry, rule: str) -> Curves:
    """The run's curve files, every agent of every seed at its full length (``utils.sweep``'s finished run)."""
    run = entry.run
    length = curve_length(run.steps, run.eval_freq)
    rows = []
    for stem in run.stems():
        agents = []
        for name in curve_names(stem, run.policy, run.num_agents):
            path = run.folder() / f"{name}.npy"
            try:
                curve = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise SuiteError(f"{path}: cannot read the curve ({e})") from None
            if curve.shape != (length,):
                raise SuiteError(f"{path}: {curve.shape[0] if curve.ndim == 1 else curve.shape} evaluations, "
                                 f"expected {length} ({run.steps} steps, one every {run.eval_freq}); a run that "
                                 "stopped early (--solved_at, --max_episodes) has no final score at the budget")
            agents.append(curve.astype(np.float64))
        rows.append(np.mean(agents, axis=0))
    scale = run.num_agents if rule == "total" else 1
    return Curves(entry, np.stack(rows), np.arange(length) * run.eval_freq * scale)


def final_k(suite: Suite, curves: list[Curves]) -> int:
    """K, the evaluations a final score averages, the same for every method: the suite's ``final_evaluations``, else
    the project's final window (a tenth of the evaluations, 1 to 10) of the shortest curve."""
    shortest = min(c.matrix.shape[1] for c in curves)
    k = suite.final_evaluations or final_window(shortest)
    if k > shortest:
        raise SuiteError(f"final_evaluations: {k} is more than the {shortest} evaluations of the shortest run")
    return k


def score_arrays(suite: Suite, curves: dict[tuple[str, str], Curves], k: int, fractions: np.ndarray):
    """Per method: raw final scores [seeds x tasks], normalised ones [seeds x tasks] and normalised scores at each
    fraction of the budget [seeds x tasks x points]."""
    raw, normalised, efficiency = {}, {}, {}
    for m in suite.methods:
        raw[m] = np.stack([curves[t.name, m].final(k) for t in suite.tasks], axis=1)
        normalised[m] = np.stack([t.normalise(curves[t.name, m].final(k)) for t in suite.tasks], axis=1)
        efficiency[m] = np.stack([t.normalise(curves[t.name, m].at_fractions(fractions, k)) for t in suite.tasks],
                                 axis=1)
    return raw, normalised, efficiency
