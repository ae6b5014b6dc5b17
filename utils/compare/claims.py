"""A claim's values: per seed, A's and B's score by the claim's metric (``suite.METRICS``), read from the curves the
report loaded, on the seeds both methods ran. One task: in its own unit (returns, or steps); several: each task's
value normalised ((score - random) / (target - random); steps as fractions of the task's budget), then averaged over
the claim's tasks."""
from __future__ import annotations

import numpy as np

from .scores import Curves
from .suite import Claim, Suite, SuiteError


def trailing_means(matrix: np.ndarray, k: int) -> np.ndarray:
    """[seeds, evaluations - k + 1]: the mean of every k consecutive evaluations, the j-th ending at evaluation
    j + k - 1."""
    c = np.cumsum(np.insert(matrix, 0, 0.0, axis=1), axis=1)
    return (c[:, k:] - c[:, :-k]) / k


def metric(claim: Claim, c: Curves, task, suite: Suite, k: int, normalise: bool) -> np.ndarray:
    """Per seed of ``c`` (one method on one task), the claim's metric."""
    score = task.normalise if normalise else (lambda x: x)
    if claim.metric == "final":
        return score(c.final(k))
    if claim.metric == "at_step":
        scale = c.agents if suite.budget_rule == "total" else 1
        values = c.window_at(claim.value // scale, k)
        if values is None:
            raise SuiteError(f"claims.{claim.name}: the curves of {task.name} stop before step {claim.value:,}")
        return score(values)
    if claim.metric == "auc":  # trapezoids over the evaluations from step 0 to the budget, divided by the budget
        m = score(c.matrix)
        return (m[:, 1:] + m[:, :-1]).mean(axis=1) / 2
    # steps_to: the first evaluation where the mean of the k ending there (all made after training started)
    # reaches the threshold; never reached: one evaluation past the budget (counted as no faster: censored)
    trained = c.matrix[:, c.trained:]
    k = min(k, trained.shape[1])
    means = score(trailing_means(trained, k))
    reached = means >= claim.value
    steps = c.budget_steps[c.trained + k - 1:]
    past = c.budget_steps[-1] + (c.budget_steps[1] - c.budget_steps[0] if len(c.budget_steps) > 1 else 0)
    out = np.where(reached.any(axis=1), steps[np.argmax(reached, axis=1)], past).astype(np.float64)
    return out / task.budget if normalise else out


def claim_values(claim: Claim, suite: Suite, curves: dict, k: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(seeds both methods ran, A's values, B's values): a seed's value is the claim's metric, averaged over the
    claim's tasks when there are several (normalised)."""
    tasks = [t for t in suite.tasks if t.name in claim.tasks]
    ca, cb = curves[tasks[0].name, claim.a], curves[tasks[0].name, claim.b]
    seeds = sorted(set(ca.seeds) & set(cb.seeds))
    if not seeds:
        raise SuiteError(f"claims.{claim.name}: {claim.a} and {claim.b} ran no seed in common; a claim pairs seeds")
    several = len(tasks) > 1
    out = []
    for m in (claim.a, claim.b):
        per_task = []
        for t in tasks:
            c = curves[t.name, m]
            v = metric(claim, c, t, suite, k, several)
            per_task.append(np.array([v[c.seeds.index(s)] for s in seeds]))
        out.append(np.mean(per_task, axis=0))
    return seeds, out[0], out[1]


def record(claim: Claim) -> dict:
    """The claim as declared, JSON-ready, with its metric and unit in words."""
    several = len(claim.tasks) > 1
    unit = ("fractions of the budget" if several else "steps") if claim.metric == "steps_to" else \
        ("normalised scores" if several else "returns")
    return {"name": claim.name, "statement": claim.statement, "source": claim.source, "a": claim.a, "b": claim.b,
            "tasks": list(claim.tasks), "metric": claim.metric, "value": claim.value,
            "metric_words": claim.metric_words(), "unit": unit, "direction": claim.direction,
            "published": claim.published, "kind": claim.kind, "margin": claim.margin, "note": claim.note}


def judged(suite: Suite, curves: dict, k: int) -> list[dict]:
    """Every claim of the suite as declared, with its values and the rule's verdict (``verdict.judge``)."""
    from .verdict import judge

    values = {c.name: claim_values(c, suite, curves, k) for c in suite.claims}
    rows = judge(suite.claims, values, suite.bootstrap_reps, suite.bootstrap_seed)
    return [{**record(c), **row} for c, row in zip(suite.claims, rows)]
