"""Reading curve trees: curve and weight files found by name, checked, cut and grouped per environment and method."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import input_problem
from ..naming import CONSENSUS_SUFFIX as CONSENSUS
from ..naming import EPISODE_EVAL_SUFFIX, GOSSIP_SUFFIX, INTRINSIC_SUFFIX, SIAMESE_SUFFIX, TASKS_SUFFIX
from ..naming import WEIGHTS_SUFFIX as WEIGHTS
from ..run.names import CURVE_NAME as NAME

VERSION = re.compile(r"-v\d+$")
# a folder holding this file holds reference curves (the paper's), not runs: a walk from a folder above skips it
REFERENCE_MARKER = ".reference"


def warn(message: str) -> None:
    """A problem with one file: say so on stderr and go on with the rest."""
    print(f"warning: {message}", file=sys.stderr)


class PlotError(Exception):
    """Nothing to plot or unusable options: one line, exit code 2."""


@dataclass
class Curve:
    path: Path
    method: str  # "DASE", "DPD" or "" (baseline)
    alg: str
    env: str
    seed: int
    agent: int | None
    values: np.ndarray
    weights: np.ndarray | None = None  # the sharing weights of this run (--weights), same length as values
    consensus: np.ndarray | None = None  # its run's parameter disagreement (--consensus), same length
    variant: str = ""  # naming.VARIANTS, e.g. "matched"
    replay: str = ""  # the run's replay flags when not the default (its JSON record), e.g. "--n_step 3"

    @property
    def label(self) -> str:
        base = f"{self.method}_{self.alg}" if self.method else self.alg
        base = f"{base}_{self.variant}" if self.variant else base
        return f"{base} {self.replay}" if self.replay else base

    @property
    def style(self) -> str:
        """The colour key: the method, its variant if any, and its replay flags if any."""
        key = f"{self.method}_{self.variant}" if self.variant else self.method
        return f"{key} {self.replay}" if self.replay else key


@dataclass
class Group:
    """The runs of one method on one environment."""

    env: str
    label: str
    method: str
    runs: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    reference: bool = False
    weights: list[np.ndarray] = field(default_factory=list)  # of the runs that have a weight file
    consensus: dict[str, np.ndarray] = field(default_factory=dict)  # per run (seed): its agents' disagreement
    run_ids: list[str] = field(default_factory=list)  # per curve, its run (folder / stem without _Agent_i)

    def matrix(self) -> np.ndarray:
        """[runs, evaluations] over the common prefix of all runs."""
        n = min(len(r) for r in self.runs)
        return np.stack([r[:n] for r in self.runs])

    def weight_matrix(self) -> np.ndarray | None:
        """[runs with weights, evaluations] over the same common prefix as ``matrix``; None without weights."""
        if not self.weights:
            return None
        n = min(len(r) for r in self.runs)
        return np.stack([w[:n] for w in self.weights])

    def consensus_matrix(self) -> np.ndarray | None:
        """[runs with a consensus file, evaluations] over the common prefix of ``matrix``; None without them."""
        if not self.consensus:
            return None
        n = min(len(r) for r in self.runs)
        return np.stack([c[:n] for c in self.consensus.values()])

    def lengths(self) -> tuple[int, int]:
        return min(len(r) for r in self.runs), max(len(r) for r in self.runs)

    def seeds(self) -> int:
        """How many runs (seeds) the curves come from: a DASE run of 2 agents is one run of two curves."""
        return len(set(self.run_ids)) if self.run_ids else len(self.runs)


def env_key(env: str) -> str:
    """Environment name without version: Hopper-v2 and Hopper-v5 match."""
    return VERSION.sub("", env)


def load_1d(path: Path, what: str = "", report=warn) -> np.ndarray | None:
    """A non-empty 1-D numeric array as float64, or None after a warning naming the file (``what`` file), given to
    ``report`` (default: printed)."""
    name = f"{what} {path}" if what else str(path)
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:
        report(f"skipping {name}: cannot read it as .npy ({type(e).__name__}: {e})")
        return None
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        report(f"skipping {name}: dtype {arr.dtype} is not numeric")
        return None
    if arr.ndim != 1 or arr.size == 0:
        report(f"skipping {name}: expected a non-empty 1-D array, got shape {arr.shape}")
        return None
    return arr.astype(np.float64)


def read_curve(path: Path, report=warn) -> np.ndarray | None:
    """A 1-D float array of finite values, or None after a warning naming the file (given to ``report``)."""
    arr = load_1d(path, report=report)
    if arr is not None and not np.all(np.isfinite(arr)):
        report(f"skipping {path}: it holds NaN or infinite values")
        return None
    return arr


def weight_file_stem(path: Path) -> str | None:
    """The curve stem of a weight file ({curve}_weights.npy), or None if ``path`` is not one."""
    stem = path.stem
    if stem.endswith(WEIGHTS) and NAME.match(stem[:-len(WEIGHTS)]):
        return stem[:-len(WEIGHTS)]
    return None


def consensus_file_stem(path: Path) -> str | None:
    """The run stem of a consensus file ({stem}_consensus.npy), or None if ``path`` is not one."""
    stem = path.stem
    if stem.endswith(CONSENSUS) and NAME.match(stem[:-len(CONSENSUS)]):
        return stem[:-len(CONSENSUS)]
    return None


def run_stem_of(curve: Path) -> str:
    """The run a curve file belongs to: its stem without ``_Agent_i``."""
    return re.sub(r"_Agent_\d+$", "", curve.stem)


def _walked(d: Path, skip_marked: bool) -> list[Path]:
    """The .npy files under folder ``d`` (recursively); with ``skip_marked``, none from a folder below ``d`` that
    holds a REFERENCE_MARKER file (its files are read when that folder itself is named)."""
    paths = sorted(d.rglob("*.npy"))
    if not skip_marked:
        return paths
    skipped = reference_folders([d])
    return [p for p in paths if not any(f in p.parents for f in skipped)]


def reference_folders(dirs: list[str | Path]) -> list[Path]:
    """The folders strictly below the named folders that hold a REFERENCE_MARKER file (reference curves such as the
    paper's, ``Learning Curves/paper``): walking a folder above them does not read them as our runs."""
    found = []
    for d in map(Path, dirs):
        if d.is_dir():
            found += sorted(m.parent for m in d.rglob(REFERENCE_MARKER) if m.is_file() and m.parent != d)
    return found


def _npy_files(dirs: list[str | Path], skip_marked: bool = True) -> list[Path]:
    paths = []
    for d in dirs:
        problem = input_problem(d)
        if problem:
            raise PlotError(f"{str(d)[:60]}: {problem}")
        d = Path(d)
        paths += [d] if d.is_file() else _walked(d, skip_marked)
    return paths


def find_curves(dirs: list[str | Path], report=warn, skip_marked: bool = True) -> list[Curve]:
    """Every readable curve file under ``dirs`` (recursively; with ``skip_marked`` not from the reference folders
    below them, ``reference_folders``), parsed from its name. Weight files ({curve}_weights.npy) and consensus files
    ({stem}_consensus.npy) are passed over silently: ``find_weights`` and ``find_consensus`` read them. Every file
    skipped (its name, or its contents) is a warning given to ``report`` (default: printed)."""
    curves = []
    for path in _npy_files(dirs, skip_marked):
        if weight_file_stem(path) is not None or consensus_file_stem(path) is not None \
                or path.stem.endswith((TASKS_SUFFIX, EPISODE_EVAL_SUFFIX, GOSSIP_SUFFIX, INTRINSIC_SUFFIX,
                                       SIAMESE_SUFFIX)):  # other files
            continue
        m = NAME.match(path.stem)
        if m is None:
            report(f"skipping {path}: name does not follow {{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy")
            continue
        values = read_curve(path, report)
        if values is None:
            continue
        agent = m.group("agent")
        curves.append(Curve(path, m.group("method") or "", m.group("alg"), m.group("env"), int(m.group("seed")),
                            None if agent is None else int(agent), values, variant=m.group("variant") or "",
                            replay=replay_flags(path)))
    return curves


def curves_or_error(dirs: list[str | Path]) -> list[Curve]:
    """``find_curves``, its warnings printed only when some curve is found: with none, a PlotError of one line says
    how many .npy files were skipped and why the first was (a folder of unrelated arrays gave a warning per file,
    then the error)."""
    skipped: list[str] = []
    curves = find_curves(dirs, report=skipped.append)
    if not curves:
        why = f" ({len(skipped)} .npy file{'s' if len(skipped) != 1 else ''} skipped; the first: " \
              f"{skipped[0].removeprefix('skipping ')})" if skipped else ""
        raise PlotError(f"no curve files ({{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy) under "
                        f"{' '.join(map(str, dirs))}{why}")
    for message in skipped:
        warn(message)
    return curves


def run_record(path: Path) -> dict | None:
    """The JSON record our runs write beside their curves (``{stem}.json``), or None (the paper's curves)."""
    import json

    record = path.with_name(re.sub(r"_Agent_\d+$", "", path.stem) + ".json")
    try:
        return json.loads(record.read_text())
    except (OSError, ValueError):
        return None


def replay_flags(path: Path) -> str:
    """How the run's replay differs from plain uniform 1-step replay, and its sharing weights from the paper's JS
    divergence, as its flags ("--n_step 3 --prioritized", "--similarity none"): the curve file names do not say it,
    and runs that differ in it are different methods."""
    config = (run_record(path) or {}).get("config")
    if not isinstance(config, dict):
        return ""
    flags = []
    if isinstance(config.get("n_step"), int) and config["n_step"] > 1:
        flags.append(f"--n_step {config['n_step']}")
    if config.get("per"):
        flags.append("--prioritized")
    if (config.get("algo") or {}).get("vtrace"):
        flags.append("--vtrace")
    similarity = (config.get("sharing") or {}).get("similarity")
    if similarity not in (None, "js"):
        flags.append(f"--similarity {similarity}")
    return " ".join(flags)


def read_weights(path: Path) -> np.ndarray | None:
    """A 1-D float array of weights in [0, 1] or NaN, or None after a warning naming the file."""
    arr = load_1d(path, "weight file")
    if arr is None:
        return None
    known = arr[~np.isnan(arr)]
    if np.any((known < 0.0) | (known > 1.0)):  # also catches +-inf
        warn(f"skipping weight file {path}: values outside [0, 1] (other than NaN)")
        return None
    return arr


def find_weights(dirs: list[str | Path]) -> dict[Path, np.ndarray]:
    """Every readable weight file under ``dirs``, keyed by the path of the curve it belongs to."""
    weights = {}
    for path in _npy_files(dirs):
        stem = weight_file_stem(path)
        if stem is None:
            continue
        values = read_weights(path)
        if values is not None:
            weights[path.with_name(stem + ".npy")] = values
    return weights


def attach_weights(curves: list[Curve], weights: dict[Path, np.ndarray]) -> int:
    """Give each curve the weights saved beside it; a weight file without a readable curve of its
    length is skipped with a warning. Returns how many were attached."""
    by_path = {c.path: c for c in curves}
    attached = 0
    for curve_path, w in weights.items():
        wpath = curve_path.with_name(curve_path.stem + WEIGHTS + ".npy")
        c = by_path.get(curve_path)
        if c is None:
            warn(f"skipping weight file {wpath}: no readable curve {curve_path.name} beside it")
        elif len(w) != len(c.values):
            warn(f"skipping weight file {wpath}: {len(w)} entries but its curve has {len(c.values)} evaluations")
        else:
            c.weights = w
            attached += 1
    return attached


def find_consensus(dirs: list[str | Path]) -> dict[Path, np.ndarray]:
    """Every readable consensus file under ``dirs`` (non-negative values), keyed by its run: folder / run stem."""
    found = {}
    for path in _npy_files(dirs):
        stem = consensus_file_stem(path)
        if stem is None:
            continue
        values = load_1d(path, "consensus file")
        if values is None:
            continue
        if np.any(values[~np.isnan(values)] < 0):
            warn(f"skipping consensus file {path}: negative values")
            continue
        found[path.with_name(stem)] = values
    return found


def attach_consensus(curves: list[Curve], consensus: dict[Path, np.ndarray]) -> int:
    """Give each curve its run's consensus curve (one file per run, shared by its agents); one of another length
    than its curves is skipped with a warning. Returns how many curves got one."""
    attached, warned = 0, set()
    for c in curves:
        run = c.path.with_name(run_stem_of(c.path))
        values = consensus.get(run)
        if values is None:
            continue
        if len(values) != len(c.values):
            if run not in warned:
                warn(f"skipping consensus file {run}{CONSENSUS}.npy: {len(values)} entries but its curves have "
                     f"{len(c.values)} evaluations")
                warned.add(run)
            continue
        c.consensus = values
        attached += 1
    return attached


def cut_curves(curves: list[Curve], keep: int) -> None:
    """Keep the first ``keep`` evaluations of every curve, its weights and consensus (--max_steps)."""
    for c in curves:
        c.values = c.values[:keep]
        if c.weights is not None:
            c.weights = c.weights[:keep]
        if c.consensus is not None:
            c.consensus = c.consensus[:keep]


def recorded_eval_freq(curves: list[Curve]) -> int | None:
    """The evaluation period our runs' JSON records name (``{stem}.json`` beside each curve), or None where no
    curve has one (the paper's published curves); a PlotError if the runs disagree (their x axes would)."""
    found: dict[int, Path] = {}
    for c in curves:
        try:
            freq = int(run_record(c.path)["config"]["eval_freq"])
        except (ValueError, KeyError, TypeError):
            continue
        found.setdefault(freq, c.path.with_name(re.sub(r"_Agent_\d+$", "", c.path.stem) + ".json"))
    if len(found) > 1:
        (a, pa), (b, pb) = list(found.items())[:2]
        raise PlotError(f"runs evaluated every {a} steps ({pa}) and every {b} ({pb}) share one time axis; "
                        "plot them separately")
    return next(iter(found), None)


def group_curves(curves: list[Curve], per_agent: bool = False, reference: bool = False) -> list[Group]:
    """Group by (environment, method); DASE agents pooled across seeds unless per_agent."""
    groups: dict[tuple[str, str], Group] = {}
    for c in sorted(curves, key=lambda c: (c.env, c.label, c.seed, c.agent or 0)):
        label = c.label
        if per_agent and c.agent is not None:
            label = f"{label} agent {c.agent}"
        g = groups.setdefault((c.env, label), Group(c.env, label, c.style, reference=reference))
        g.runs.append(c.values)
        g.names.append(c.path.name)
        g.run_ids.append(str(c.path.with_name(run_stem_of(c.path))))
        if c.weights is not None:
            g.weights.append(c.weights)
        if c.consensus is not None:
            g.consensus[str(c.path.with_name(run_stem_of(c.path)))] = c.consensus
    return list(groups.values())
