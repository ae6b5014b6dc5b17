"""From a suite's curve files to the scores it compares: a seed's agents averaged first, the final score the mean of
its last K evaluations, normalised per task by its pair of reference scores. Published reference curves are read
the same way, on the suite's evaluation grid."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..naming import WEIGHTS_SUFFIX, curve_length, curve_names
from ..plot.tables import final_window
from ..sweep.experiment import ROOT, seed_tokens
from .entry import Entry
from .suite import Reference, Suite, SuiteError, Task

TASKS_SUFFIX = "_tasks"  # {curve}_tasks.npy: [evaluations, task variants], the agent's return on each (--eval_tasks all)


@dataclass
class Curves:
    """One method (or reference) on one task: per seed (rows, ascending) the mean over its agents of every evaluation,
    on the suite's evaluation grid (one every ``eval_freq`` steps per agent from step 0). No score the report reads
    includes an evaluation made before training started: step 0's, and the random warm-up's (steps per agent up to
    ``start_steps``); a window of K evaluations that would reach back to them is cut to those after."""

    matrix: np.ndarray  # [seeds, evaluations]
    budget_steps: np.ndarray  # [evaluations]: the step of each evaluation under the suite's budget rule
    seeds: tuple[int, ...]
    agents: int
    steps: int  # per agent: the run's budget (a reference: how far its curves go, cut to the suite's budget)
    eval_freq: int
    entry: Entry | None = None  # None for a reference
    start_steps: int = 0  # per agent: random actions and no update before it (the suite's start_steps)

    @property
    def trained(self) -> int:
        """The index of the first evaluation made after training started."""
        return self.start_steps // self.eval_freq + 1

    @property
    def last(self) -> int:
        """The index of the last evaluation."""
        return self.matrix.shape[1] - 1

    def window_size(self, end: int, k: int) -> int:
        """How many evaluations the window of ``k`` ending at index ``end`` averages: fewer than ``k`` where it
        would reach back before training started, 0 where ``end`` is before it or past the curves."""
        return max(0, end - max(end - k + 1, self.trained) + 1) if end <= self.last else 0

    def window(self, end: int, k: int) -> np.ndarray | None:
        """Per seed, the mean of the ``window_size(end, k)`` evaluations ending at index ``end``; None where there
        are none."""
        n = self.window_size(end, k)
        return self.matrix[:, end - n + 1:end + 1].mean(axis=1) if n else None

    def final(self, k: int) -> np.ndarray:
        """Each seed's final score: the mean of its last ``k`` evaluations made after training started."""
        values = self.window(self.last, k)
        if values is None:
            where = f"methods.{self.entry.method.name} on {self.entry.task.name}" if self.entry else "a reference"
            raise SuiteError(f"{where}: no evaluation after training started (start_steps {self.start_steps:,}, "
                             f"{self.steps:,} steps per agent): no final score")
        return values

    def end_at(self, fraction: float) -> int:
        """The index of the last evaluation at or before ``fraction`` of the budget."""
        return int(np.floor(fraction * self.steps / self.eval_freq + 1e-9))

    def at_fraction(self, fraction: float, k: int) -> np.ndarray | None:
        """Per seed, the mean of the ``k`` evaluations ending at the last one at or before ``fraction`` of the budget
        (fewer where they would reach back before training started; None where that evaluation is before it); at 1
        this is ``final(k)``."""
        return self.window(self.end_at(fraction), k)

    def at_fractions(self, fractions: np.ndarray, k: int) -> np.ndarray:
        """[seeds, points]: ``at_fraction`` at each fraction (NaN where it is None: ``trained_fractions`` keeps
        only fractions where no curve has None)."""
        nan = np.full(self.matrix.shape[0], np.nan)
        return np.stack([v if (v := self.at_fraction(f, k)) is not None else nan for f in fractions], axis=1)

    def window_at(self, step: int, k: int) -> np.ndarray | None:
        """Per seed, the mean of the ``k`` evaluations ending at agent step ``step`` (fewer where they would reach
        back before training started); None when the curves stop before it or it is before training started."""
        return self.window(step // self.eval_freq, k)


def load_curves(entry: Entry, rule: str, score: str = "own", start_steps: int = 0) -> Curves:
    """The run's curve files, every agent of every seed at its full length (``utils.sweep``'s finished run), or up
    to ``entry.read_steps`` (--so_far: a run under way, its curves at least that long, cut there); ``score``
    "tasks": the agents' all-variant files ({curve}_tasks.npy), averaged over the variants, in their place;
    ``start_steps``: the suite's, the random warm-up its windows leave out."""
    run = entry.run
    rows = [np.mean(agents, axis=0) for agents in agent_curves(entry, score)]
    scale = run.num_agents if rule == "total" else 1
    length = rows[0].shape[0]
    return Curves(np.stack(rows), np.arange(length) * run.eval_freq * scale, tuple(run.seeds), run.num_agents,
                  entry.steps_per_agent, run.eval_freq, entry, start_steps)


def agent_curves(entry: Entry, score: str = "own") -> list[list[np.ndarray]]:
    """Per seed of the run (ascending), each agent's curve as ``load_curves`` reads it, not yet averaged."""
    run = entry.run
    length = curve_length(entry.steps_per_agent, run.eval_freq)
    suffix = TASKS_SUFFIX if score == "tasks" else ""
    rows = []
    for stem in run.stems():
        agents = []
        for name in curve_names(stem, run.policy, run.num_agents):
            path = run.folder() / f"{name}{suffix}.npy"
            try:
                curve = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                hint = " (score: tasks reads the runs' --eval_tasks all files)" if suffix else ""
                raise SuiteError(f"{path}: cannot read the curve ({e}){hint}") from None
            if suffix and curve.ndim == 2:  # the mean over the task variants at each evaluation
                curve = curve.mean(axis=1)
            if entry.read_steps is not None and curve.ndim == 1 and curve.shape[0] >= length:
                curve = curve[:length]
            if curve.shape != (length,):
                raise SuiteError(f"{path}: {curve.shape[0] if curve.ndim == 1 else curve.shape} evaluations, "
                                 f"expected {length} ({run.steps} steps, one every {run.eval_freq}); a run that "
                                 "stopped early (--solved_at, --max_episodes) has no final score at the budget")
            agents.append(curve.astype(np.float64))
        rows.append(agents)
    return rows


def weight_traces(entry: Entry, length: int) -> np.ndarray | None:
    """[seeds, agents, evaluations]: each agent's DASE weight trace ({curve}_weights.npy: entry k the mean weight of
    the other agents' samples in its updates of evaluation period k, NaN before the first update), cut to ``length``
    evaluations; None where the method writes none, or a seed's trace is missing, unreadable or shorter."""
    run = entry.run
    rows = []
    for stem in run.stems():
        agents = []
        for name in curve_names(stem, run.policy, run.num_agents):
            try:
                trace = np.load(run.folder() / f"{name}{WEIGHTS_SUFFIX}.npy", allow_pickle=False)
            except (OSError, ValueError):
                return None
            if trace.ndim != 1 or trace.shape[0] < length:
                return None
            agents.append(trace[:length].astype(np.float64))
        rows.append(agents)
    return np.array(rows)


def curve_lengths(entry: Entry, score: str = "own") -> dict[int, int | None]:
    """Seed -> the evaluations its shortest curve file holds so far (written while it runs: one every eval_freq
    steps from step 0); None when one of its files is missing or unreadable."""
    run = entry.run
    suffix = TASKS_SUFFIX if score == "tasks" else ""
    out: dict[int, int | None] = {}
    for seed, stem in zip(run.seeds, run.stems()):
        lengths = []
        for name in curve_names(stem, run.policy, run.num_agents):
            try:
                lengths.append(np.load(run.folder() / f"{name}{suffix}.npy", mmap_mode="r", allow_pickle=False).shape[0])
            except (OSError, ValueError):
                break
        out[seed] = min(lengths) if lengths and len(lengths) == run.num_agents else None
    return out


def reached_steps(lengths: dict[int, int | None], eval_freq: int) -> int | None:
    """The steps per agent every agent of every seed of a run has evaluated at so far, from its ``curve_lengths``
    (its shortest curve file); None when a file is missing."""
    found = [n for n in lengths.values() if n is not None]
    if not found or len(found) < len(lengths):
        return None
    return (min(found) - 1) * eval_freq if min(found) > 0 else None


def cut_so_far(suite: Suite, entries: list[Entry]) -> tuple[Suite, list[Entry]]:
    """--so_far: the suite read as far as its runs have gone, nothing run. Each task's budget becomes the furthest
    step (in the budget's units, a multiple of eval_freq) that every seed of every method on it has evaluated at;
    at_steps past it are dropped. Raises SuiteError when a run has no curves yet, only its step-0 evaluation, or is
    read only up to a step within the random warm-up (no evaluation after training started)."""
    scale = [e.agents if suite.budget_rule == "total" else 1 for e in entries]
    reached = []
    for e, k in zip(entries, scale):
        lengths = curve_lengths(e, suite.score)
        steps = reached_steps(lengths, e.run.eval_freq)
        started = [seed for seed, n in lengths.items() if n is not None and n > 1]
        if steps is None and started:  # some seeds under way or finished, others not started
            waiting = [seed for seed, n in lengths.items() if n is None]
            raise SuiteError(f"--so_far: methods.{e.method.name} on {e.task.name}: seed(s) "
                             f"{' '.join(seed_tokens(waiting))} have no curves yet in {e.run.results_dir}; "
                             f"--seeds {','.join(seed_tokens(started))} reads those that have")
        if not steps:
            raise SuiteError(f"--so_far: methods.{e.method.name} on {e.task.name} has "
                             f"{'only its step-0 evaluation' if steps == 0 else 'no curves yet'} in "
                             f"{e.run.results_dir}")
        reached.append(min(steps, e.steps_per_agent) * k)
    tasks, so_far = [], {}
    for t in suite.tasks:
        step = min(r for e, r in zip(entries, reached) if e.task is t) // suite.eval_freq * suite.eval_freq
        tasks.append(replace(t, budget=step))
        so_far[t.name] = (step, t.budget)
    cut = {t.name: t for t in tasks}
    out = [replace(e, task=cut[e.task.name],
                   read_steps=cut[e.task.name].budget // k // suite.eval_freq * suite.eval_freq)
           for e, k in zip(entries, scale)]
    for e in out:
        if e.read_steps <= suite.start_steps:
            raise SuiteError(f"--so_far: {e.task.name} is read up to step {e.read_steps:,} per agent (the furthest "
                             "every seed of every method on it has reached), within the random warm-up (start_steps "
                             f"{suite.start_steps:,}): no evaluation after training started yet")
    shortest = min(t.budget for t in tasks)
    return replace(suite, tasks=tasks, at_steps=[x for x in suite.at_steps if x <= shortest], so_far=so_far), out


def seed_files(folder: Path, prefix: str, env: str | None = None) -> dict[int, list[Path]]:
    """Seed -> its curve files in ``folder``: ``{prefix}_{env}_{seed}.npy`` or its agents'
    ``{prefix}_{env}_{seed}_Agent_{i}.npy``, in name order, ``env`` the folder's name unless given; other files
    (another prefix, a trace beside a curve) are not read."""
    pattern = re.compile(rf"{re.escape(prefix)}_{re.escape(env or folder.name)}_(\d+)(?:_Agent_(\d+))?\.npy")
    found: dict[int, list[Path]] = {}
    for path in sorted(folder.glob("*.npy")) if folder.is_dir() else []:
        if (match := pattern.fullmatch(path.name)) is not None:
            found.setdefault(int(match[1]), []).append(path)
    return found


def seed_curves(folder: Path, prefix: str, finished_only: bool = False, env: str | None = None) -> dict[int, np.ndarray]:
    """Seed -> the run's curve: its single file, or the mean of its agents' files cut to their common length (a run
    under way writes its agents' evaluations one after another); ``finished_only``: only seeds whose record
    (``{prefix}_{env}_{seed}.json``) says the run finished. The tables beside the suites read runs this way."""
    out: dict[int, np.ndarray] = {}
    for seed, paths in seed_files(folder, prefix, env).items():
        if finished_only and not run_finished(folder / f"{prefix}_{env or folder.name}_{seed}.json"):
            continue
        curves = [np.load(p, allow_pickle=False).astype(np.float64) for p in paths]
        n = min(len(c) for c in curves)
        out[seed] = np.mean([c[:n] for c in curves], axis=0)
    return out


def run_finished(record: Path) -> bool:
    """Whether a run's record says it finished (a run under way, or stopped, has curves too)."""
    try:
        body = json.loads(record.read_text())
    except (OSError, ValueError):
        return False
    return bool(body.get("finished")) or body.get("finished_at_step") is not None


def window_mean(curve: np.ndarray, step: int, eval_freq: int, k: int) -> float | None:
    """The mean of the ``k`` evaluations of ``curve`` (one every ``eval_freq`` steps from step 0) ending at ``step``;
    None when the curve stops before it. (A table's plain window: ``Curves.window`` also leaves out the warm-up.)"""
    i = step // eval_freq
    return float(curve[i - k + 1:i + 1].mean()) if len(curve) > i else None


def load_reference(ref: Reference, task: Task, suite: Suite) -> Curves:
    """A reference's curves: every seed in its folder whose agents' files are all there, on the suite's evaluation
    grid (every eval_freq // ref.eval_freq-th evaluation), cut to the shortest seed and to the task's budget; its
    windows leave out the suite's warm-up, as the methods' do."""
    folder = ROOT / ref.folder
    files = seed_files(folder, ref.prefix)
    if not files:
        raise SuiteError(f"tasks ({task.name}).references.{ref.name}: no {ref.prefix}_{folder.name}_SEED[_Agent_I].npy "
                         f"curves in {ref.folder}")
    agents = max(len(v) for v in files.values())
    curves = seed_curves(folder, ref.prefix)
    seeds = tuple(s for s in sorted(files) if len(files[s]) == agents)
    every = suite.eval_freq // ref.eval_freq
    budget = task.budget // agents if suite.budget_rule == "total" else task.budget
    length = min(len(curves[s]) for s in seeds)
    length = min((length - 1) // every + 1, curve_length(budget, suite.eval_freq))
    matrix = np.stack([curves[s][::every][:length] for s in seeds])
    scale = agents if suite.budget_rule == "total" else 1
    return Curves(matrix, np.arange(length) * suite.eval_freq * scale, seeds, agents,
                  (length - 1) * suite.eval_freq, suite.eval_freq, start_steps=suite.start_steps)


def final_k(suite: Suite, curves: list[Curves]) -> int:
    """K, the evaluations a final score averages, the same for every method: the suite's ``final_evaluations``, else
    the project's final window (a tenth of the evaluations, 1 to 10) of the shortest curve."""
    shortest = min(c.matrix.shape[1] for c in curves)
    k = suite.final_evaluations or final_window(shortest)
    if k > shortest:
        raise SuiteError(f"final_evaluations: {k} is more than the {shortest} evaluations of the shortest run")
    return k


def trained_fractions(curves: list[Curves], fractions: np.ndarray) -> np.ndarray:
    """The fractions of the budget at which every curve has an evaluation made after training started: the points of
    IQM against steps (a point within any method's warm-up is left out)."""
    return np.array([f for f in fractions if all(c.end_at(f) >= c.trained for c in curves)])


def score_arrays(suite: Suite, curves: dict[tuple[str, str], Curves], k: int, fractions: np.ndarray):
    """Per method, over the tasks it runs (``suite.tasks_of``, columns in the suite's order): raw final scores
    [seeds x tasks], normalised ones [seeds x tasks] and normalised scores at each fraction of the budget
    [seeds x tasks x points]."""
    raw, normalised, efficiency = {}, {}, {}
    for m in suite.methods:
        tasks = suite.tasks_of(m)
        raw[m] = np.stack([curves[t.name, m].final(k) for t in tasks], axis=1)
        normalised[m] = np.stack([t.normalise(curves[t.name, m].final(k)) for t in tasks], axis=1)
        efficiency[m] = np.stack([t.normalise(curves[t.name, m].at_fractions(fractions, k)) for t in tasks], axis=1)
    return raw, normalised, efficiency
