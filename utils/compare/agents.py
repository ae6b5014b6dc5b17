"""``python -m utils.compare SUITE.yaml --agents``: how much the agents of one run share their fate. For each method of
N > 1 agents (DASE's agents sharing a buffer, SEAC's, Diff-DAC's neighbours), each agent's final score per seed and
the intraclass correlation of those scores: ICC(1), the share of their variance that lies between seeds (runs) rather
than between the agents of a run. Near 1: a run's agents succeed or fail together, so a seed gives one observation,
not N (why the report averages a seed's agents first); near 0 or below: they vary as independently run agents would.
Its p: one-sided, the agents' scores dealt into runs at random (every arrangement equally likely under no coupling),
the share of arrangements whose ICC reaches the observed one. Read only: nothing is run or written; seconds."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..sweep.experiment import ROOT, seed_tokens
from .entry import Entry
from .scores import Curves, agent_curves, cut_so_far, final_k, load_curves, load_reference, seed_files
from .suite import Reference, Suite, SuiteError

ARRANGEMENTS = 10_000  # rearrangements sampled for the p (generator seeded 0), plus the observed one


def icc1(x: np.ndarray) -> float:
    """One-way random-effects intraclass correlation ICC(1) of ``x`` [runs, agents]: (MSB - MSW) / (MSB + (k - 1)
    MSW), MSB the mean square between runs and MSW within them; NaN where all scores are equal or there are fewer than
    2 runs or 2 agents."""
    n, k = x.shape
    if n < 2 or k < 2:
        return float("nan")
    grand = x.mean()
    means = x.mean(axis=1)
    msb = k * float(((means - grand) ** 2).sum()) / (n - 1)
    msw = float(((x - means[:, None]) ** 2).sum()) / (n * (k - 1))
    denominator = msb + (k - 1) * msw
    return (msb - msw) / denominator if denominator > 0 else float("nan")


def icc_p(x: np.ndarray, samples: int = ARRANGEMENTS, seed: int = 0) -> float:
    """One-sided p of ``icc1(x)``: of ``samples`` random rearrangements of every score into runs of the same size
    (and the observed one), the share whose ICC is at least the observed one; NaN where the ICC is."""
    observed = icc1(x)
    if np.isnan(observed):
        return float("nan")
    rng = np.random.default_rng(seed)
    flat = x.ravel()
    shuffled = np.stack([rng.permutation(flat) for _ in range(samples)]).reshape(samples, *x.shape)
    n, k = x.shape
    grand = flat.mean()
    means = shuffled.mean(axis=2)
    msb = k * ((means - grand) ** 2).sum(axis=1) / (n - 1)
    msw = ((shuffled - means[:, :, None]) ** 2).sum(axis=(1, 2)) / (n * (k - 1))
    iccs = (msb - msw) / (msb + (k - 1) * msw)
    return float((1 + np.count_nonzero(iccs >= observed - 1e-12)) / (samples + 1))


def agent_finals(suite: Suite, entry: Entry, k: int) -> np.ndarray:
    """[seeds, agents]: each agent's final score (the mean of its last ``k`` evaluations made after training
    started, as the report's for the seed's agents averaged)."""
    per_seed = agent_curves(entry, suite.score)
    columns = []
    for agent in range(entry.agents):
        matrix = np.stack([agents[agent] for agents in per_seed])
        curves = Curves(matrix, np.arange(matrix.shape[1]), tuple(entry.run.seeds), 1, entry.steps_per_agent,
                        entry.run.eval_freq, entry, suite.start_steps)
        columns.append(curves.final(k))
    return np.stack(columns, axis=1)


def reference_agents(ref: Reference) -> dict[int, list[Path]]:
    """A published reference's files per seed when it holds several agents per seed, else an empty dict."""
    files = seed_files(ROOT / ref.folder, ref.prefix)
    return files if max((len(v) for v in files.values()), default=0) > 1 else {}


def reference_finals(ref: Reference, files: dict[int, list[Path]], mean: Curves, suite: Suite,
                     k: int) -> tuple[tuple[int, ...], np.ndarray]:
    """A published reference of several agents per seed (its ``files``, and ``mean``: its curves as the report reads
    them, ``load_reference``): its seeds and [seeds, agents] final scores on that grid and those seeds."""
    agents = max(len(v) for v in files.values())
    every, length = suite.eval_freq // ref.eval_freq, mean.matrix.shape[1]
    columns = [replace(mean, matrix=np.stack([np.load(files[s][a], allow_pickle=False).astype(np.float64)[::every]
                                              [:length] for s in mean.seeds])).final(k) for a in range(agents)]
    return mean.seeds, np.stack(columns, axis=1)


def lines_for(name: str, task: str, seeds: tuple[int, ...] | list[int], x: np.ndarray, what: str = "") -> list[str]:
    """One method's (or reference's: ``what`` "published, ") answer on a task: its ICC line, then every seed's
    agents."""
    head = f"- {name} ({what}{x.shape[1]} agents) on {task}, seeds {','.join(seed_tokens(list(seeds)))}: "
    rows = [f"    seed {seed}: " + ", ".join(f"{v:.1f}" for v in row) for seed, row in zip(seeds, x)]
    if x.shape[0] < 2 or np.isnan(icc1(x)):
        why = "one seed" if x.shape[0] < 2 else "a score is not a number" if np.isnan(x).any() else \
            "every agent scores the same"
        return [head + why + ": no ICC"] + rows
    within = float(np.sqrt(((x - x.mean(axis=1, keepdims=True)) ** 2).sum() / (x.size - x.shape[0])))
    return [head + f"ICC {icc1(x):.3f}, p {icc_p(x):.4f}; standard deviation within a run {within:.4g}, of all "
            f"agents {float(x.std(ddof=1)):.4g}"] + rows


def agents_text(suite: Suite, entries: list[Entry], finished: bool, where: str | None = None) -> str:
    """The answer, as printed: per method of several agents and task, then per published reference of several agents
    per seed, the ICC, its p and every seed's agents (``where``: how its curves were chosen, when not all of them).
    Runs with no curves yet leave the references to answer alone, and say so; with no reference either, SuiteError."""
    many = [e for e in entries if e.agents > 1]
    refs = [(ref, task, files) for task in suite.tasks for ref in task.references if (files := reference_agents(ref))]
    if not many and not refs:
        return f"{suite.name}: no method or published reference has more than one agent; nothing to read"
    where, waiting = where or "at the budget", None
    if many and not finished:
        try:
            suite, many = cut_so_far(suite, many)
            where = "so far (runs under way): " + ", ".join(f"{name} at step {step:,} of {budget:,}"
                                                            for name, (step, budget) in (suite.so_far or {}).items())
        except SuiteError as err:  # its words name --so_far, whose reading --agents shares
            if not refs:
                raise SuiteError("--agents: " + str(err).removeprefix("--so_far: ")) from None
            waiting, many = str(err).removeprefix("--so_far: "), []
    means = [load_reference(ref, task, suite) for ref, task, _ in refs]
    curves = [load_curves(e, suite.budget_rule, suite.score, suite.start_steps) for e in many] or means
    k = final_k(suite, curves)
    lines = [f"{suite.name}: the final score of each agent (mean of its last {k} evaluations), curves read {where}; "
             "ICC(1): the estimated share of the agents' variance that lies between runs (below 0: runs differ less "
             "than agents dealt at random would); p: one-sided, of "
             f"{ARRANGEMENTS:,} random deals of the scores into runs (generator seed 0) and the observed one, the "
             "share with an ICC at least as high (each line's p on its own, not adjusted for the others)"]
    if waiting:
        lines.append(f"- our runs: {waiting}: only the published references are read")
    for e in many:
        lines += lines_for(e.method.name, e.task.name, e.run.seeds, agent_finals(suite, e, k))
    for (ref, task, files), mean in zip(refs, means):
        lines += lines_for(ref.name, task.name, *reference_finals(ref, files, mean, suite, k), what="published, ")
    return "\n".join(lines)
