"""Plot saved learning curves like the paper's figures, and summarise them in a table.

    python -m utils.plot DIR [DIR ...] --out OUTDIR [--reference DIR] [--at STEP ...] [--weights]
                         [--ci] [--smooth W] [--per_agent] [--pdf]

Every ``.npy`` file under the given folders whose name follows the curve naming
({ALG}_{env}_{seed}.npy, DASE_{ALG}_{env}_{seed}_Agent_{i}.npy, DPD_{ALG}_{env}_{seed}.npy) is
read; curves are grouped by environment and method (baseline, DASE, DPD). DASE agents are pooled
across seeds unless ``--per_agent``. Writes one figure per environment, a grid of all of them,
and summary.csv / summary.md.

Sharing weights (``--weights``): DASE runs also save, per agent, ``{curve}_weights.npy`` beside
the curve (same length and timing: entry k is the mean weight the agent gave to other agents'
samples in the updates of the evaluation period ending at step k * eval_freq; NaN where no update
happened). These files are recognised by name and never read as curves. With ``--weights`` every
figure gets a second, smaller axis under the returns (same time axis, same colours): per group the
mean over runs of the weight, ignoring NaN (steps where every run is NaN are not drawn; the weights
are not smoothed). Groups without weight files (baselines, DPD, reference trees) have no line
there; a weight file that is unreadable, not 1-D, not as long as its curve, or holds values
outside [0, 1] other than NaN is skipped with a warning.

Comparison with a reference (``--reference DIR``, steps from ``--at``): for every environment
(matched across versions, Hopper-v2 <-> Hopper-v5) and method (TD3, DASE_TD3, DPD_TD3, ...) found
both in ours and in the reference, and every ``--at`` step (default: the last step both have), one
row: our mean, its 95 % percentile bootstrap CI over runs (2000 resamples, seed 0) and number of
runs; the same for the reference; and a verdict: "above" if our mean lies above the reference's
CI, "below" if under it, else "inside" ("n/a" when one side does not reach the step). Runs are
curve files, pooled per method whatever ``--per_agent`` says: one per seed for baselines and the
paper's DPD, one per seed and agent for DASE and our DPD. Written as comparison.csv and
comparison.md (also printed).
"""
from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .naming import CURVE_NAME as NAME, WEIGHTS_SUFFIX as WEIGHTS
VERSION = re.compile(r"-v\d+$")
FINAL_EVALS = 10  # "final return" = mean of the last 10 evaluations of a run
BOOTSTRAP = 2000
COLORS = {"DASE": "tab:red", "DPD": "tab:green", "": "tab:blue", "DASE_matched": "tab:purple"}


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
    variant: str = ""  # naming.VARIANTS, e.g. "matched"

    @property
    def label(self) -> str:
        base = f"{self.method}_{self.alg}" if self.method else self.alg
        return f"{base}_{self.variant}" if self.variant else base

    @property
    def style(self) -> str:
        """The colour key: the method, and its variant if any."""
        return f"{self.method}_{self.variant}" if self.variant else self.method


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

    def lengths(self) -> tuple[int, int]:
        return min(len(r) for r in self.runs), max(len(r) for r in self.runs)


def env_key(env: str) -> str:
    """Environment name without version: Hopper-v2 and Hopper-v5 match."""
    return VERSION.sub("", env)


def load_1d(path: Path, what: str = "") -> np.ndarray | None:
    """A non-empty 1-D numeric array as float64, or None after a warning naming the file (``what`` file)."""
    name = f"{what} {path}" if what else str(path)
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:
        warn(f"skipping {name}: cannot read it as .npy ({type(e).__name__}: {e})")
        return None
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        warn(f"skipping {name}: dtype {arr.dtype} is not numeric")
        return None
    if arr.ndim != 1 or arr.size == 0:
        warn(f"skipping {name}: expected a non-empty 1-D array, got shape {arr.shape}")
        return None
    return arr.astype(np.float64)


def read_curve(path: Path) -> np.ndarray | None:
    """A 1-D float array of finite values, or None after a warning naming the file."""
    arr = load_1d(path)
    if arr is not None and not np.all(np.isfinite(arr)):
        warn(f"skipping {path}: it holds NaN or infinite values")
        return None
    return arr


def weight_file_stem(path: Path) -> str | None:
    """The curve stem of a weight file ({curve}_weights.npy), or None if ``path`` is not one."""
    stem = path.stem
    if stem.endswith(WEIGHTS) and NAME.match(stem[:-len(WEIGHTS)]):
        return stem[:-len(WEIGHTS)]
    return None


def _npy_files(dirs: list[str | Path]) -> list[Path]:
    paths = []
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise PlotError(f"{d}: no such folder")
        paths += [d] if d.is_file() else sorted(d.rglob("*.npy"))
    return paths


def find_curves(dirs: list[str | Path]) -> list[Curve]:
    """Every readable curve file under ``dirs`` (recursively), parsed from its name. Weight files
    ({curve}_weights.npy) are passed over silently: ``find_weights`` reads them."""
    curves = []
    for path in _npy_files(dirs):
        if weight_file_stem(path) is not None:
            continue
        m = NAME.match(path.stem)
        if m is None:
            warn(f"skipping {path}: name does not follow {{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy")
            continue
        values = read_curve(path)
        if values is None:
            continue
        agent = m.group("agent")
        curves.append(Curve(path, m.group("method") or "", m.group("alg"), m.group("env"), int(m.group("seed")),
                            None if agent is None else int(agent), values, variant=m.group("variant") or ""))
    return curves


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


def cut_curves(curves: list[Curve], keep: int) -> None:
    """Keep the first ``keep`` evaluations of every curve and its weights (--max_steps)."""
    for c in curves:
        c.values = c.values[:keep]
        if c.weights is not None:
            c.weights = c.weights[:keep]


def recorded_eval_freq(curves: list[Curve]) -> int | None:
    """The evaluation period our runs' JSON records name (``{stem}.json`` beside each curve), or None where no
    curve has one (the paper's published curves); a PlotError if the runs disagree (their x axes would)."""
    import json

    found: dict[int, Path] = {}
    for c in curves:
        stem = re.sub(r"_Agent_\d+$", "", c.path.stem)
        record = c.path.with_name(stem + ".json")
        try:
            freq = int(json.loads(record.read_text())["config"]["eval_freq"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.setdefault(freq, record)
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
        if c.weights is not None:
            g.weights.append(c.weights)
    return list(groups.values())


# ---- statistics ----------------------------------------------------------------------------------

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


def bootstrap_ci(x: np.ndarray, stat, n: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of stat over runs (x: [runs])."""
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, len(x), size=(n, len(x)))]
    values = stat(samples, axis=1)
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def mean_band(m: np.ndarray, ci: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and its band: ± std across runs, or a 95 % bootstrap CI of the mean."""
    mean = m.mean(axis=0)
    if not ci or len(m) < 2:
        std = m.std(axis=0)
        return mean, mean - std, mean + std
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(m), size=(BOOTSTRAP, len(m)))
    boot = m[idx].mean(axis=1)  # [BOOTSTRAP, evals]
    return mean, np.percentile(boot, 2.5, axis=0), np.percentile(boot, 97.5, axis=0)


def nan_mean(m: np.ndarray) -> np.ndarray:
    """Mean over runs (axis 0) ignoring NaN; NaN where every run is NaN (np.nanmean without its warning)."""
    known = ~np.isnan(m)
    count = known.sum(axis=0)
    total = np.where(known, m, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def summarise(g: Group, eval_freq: int, at: list[int]) -> dict:
    """One row of the summary table."""
    m = g.matrix()
    steps = np.arange(m.shape[1]) * eval_freq
    final = m[:, -FINAL_EVALS:].mean(axis=1)
    span = steps[-1] - steps[0]
    auc = np.trapezoid(m, steps, axis=1) / span if span > 0 else m[:, 0]
    lo, hi = bootstrap_ci(final, iqm)
    row = {"environment": g.env, "method": g.label + (" (reference)" if g.reference else ""), "runs": len(m),
           "evaluations": m.shape[1], "final_mean": final.mean(), "final_std": final.std(),
           "auc_mean": auc.mean(), "auc_std": auc.std(), "iqm_final": float(iqm(final)), "iqm_ci_low": lo,
           "iqm_ci_high": hi}
    for step in at:
        i = step // eval_freq
        ok = step % eval_freq == 0 and i < m.shape[1]
        row[f"at_{step}_mean"] = m[:, i].mean() if ok else float("nan")
        row[f"at_{step}_std"] = m[:, i].std() if ok else float("nan")
    return row


# ---- figures -------------------------------------------------------------------------------------

def _draw(ax, groups: list[Group], eval_freq: int, ci: bool, window: int, xlabel: bool = True) -> dict[int, str]:
    """Returns and their bands; returns the colour of each group's line, keyed by id(group)."""
    colors = {}
    for g in groups:
        m = smooth(g.matrix(), window)
        steps = np.arange(m.shape[1]) * eval_freq
        mean, lo, hi = mean_band(m, ci)
        color = COLORS.get(g.method, None)
        style = "--" if g.reference else "-"
        line, = ax.plot(steps, mean, style, color=color if "agent" not in g.label else None, lw=1.4,
                        label=legend_label(g))
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.10 if g.reference else 0.2, lw=0)
        colors[id(g)] = line.get_color()
    if xlabel:
        ax.set_xlabel("Time steps")
    ax.set_ylabel("Average return")
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return colors


def draw_weights(ax, groups: list[Group], eval_freq: int, colors: dict[int, str] | None = None,
                 log: bool = False) -> list:
    """The weight of shared samples: per group with weight files, the NaN-ignoring mean over runs
    (NaN steps leave gaps). Returns the lines drawn."""
    lines = []
    for g in groups:
        w = g.weight_matrix()
        if w is None or g.reference:
            continue
        steps = np.arange(w.shape[1]) * eval_freq
        color = (colors or {}).get(id(g), COLORS.get(g.method))
        line, = ax.plot(steps, nan_mean(w), "-", color=color, lw=1.2, label=legend_label(g))
        lines.append(line)
    if not lines:
        ax.text(0.5, 0.5, "no weight files", transform=ax.transAxes, ha="center", va="center", fontsize=7,
                color="0.5")
    if log:  # weights spanning many decades (--kl_div_var matched: 1e-18 and less)
        ax.set_yscale("log")
        ax.set_ylim(1e-20, 2.0)
    else:
        ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("Time steps")
    ax.set_ylabel("Weight of shared samples", fontsize=7)
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return lines


def legend_label(g: Group) -> str:
    name = g.label.replace("_", "-")
    if g.reference:
        return f"{name} (reference, {g.env})"
    return name


def _panel(fig, cell, groups: list[Group], eval_freq: int, ci: bool, window: int, weights: bool | str,
           fontsize: int):
    """One environment in the gridspec cell ``cell``: returns, and with ``weights`` the weight axis under
    them (x shared). Returns (returns axis, weight axis or None)."""
    if not weights:
        ax = fig.add_subplot(cell)
        _draw(ax, groups, eval_freq, ci, window)
        ax.legend(fontsize=fontsize, loc="best")
        return ax, None
    inner = cell.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
    ax = fig.add_subplot(inner[0])
    wax = fig.add_subplot(inner[1], sharex=ax)
    colors = _draw(ax, groups, eval_freq, ci, window, xlabel=False)
    ax.tick_params(labelbottom=False)
    ax.xaxis.get_offset_text().set_visible(False)
    ax.legend(fontsize=fontsize, loc="best")
    draw_weights(wax, groups, eval_freq, colors, log=weights == "log")
    return ax, wax


def plot(groups_by_env: dict[str, list[Group]], out: Path, eval_freq: int, ci: bool, window: int,
         ext: str, weights: bool | str = False) -> list[Path]:
    """One figure per environment and one grid of all environments; returns the written paths.
    With ``weights`` each environment gets the weight-of-shared-samples axis under its returns."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for env, groups in groups_by_env.items():
        fig = plt.figure(figsize=(5.2, 5.0 if weights else 3.9))
        ax, _ = _panel(fig, fig.add_gridspec(1, 1)[0], groups, eval_freq, ci, window, weights, 7)
        ax.set_title(env)
        fig.tight_layout()
        path = out / f"{env}.{ext}"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        written.append(path)
    n = len(groups_by_env)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = plt.figure(figsize=(4.6 * cols, (4.6 if weights else 3.6) * rows))
    grid = fig.add_gridspec(rows, cols)
    for k, (env, groups) in enumerate(groups_by_env.items()):
        ax, _ = _panel(fig, grid[k // cols, k % cols], groups, eval_freq, ci, window, weights, 6)
        ax.set_title(env)
    fig.tight_layout()
    path = out / f"all_environments.{ext}"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    written.append(path)
    return written


# ---- tables --------------------------------------------------------------------------------------

def columns(at: list[int]) -> list[str]:
    cols = ["environment", "method", "runs", "evaluations", "final_mean", "final_std"]
    for step in at:
        cols += [f"at_{step}_mean", f"at_{step}_std"]
    return cols + ["auc_mean", "auc_std", "iqm_final", "iqm_ci_low", "iqm_ci_high"]


def write_tables(rows: list[dict], at: list[int], out: Path) -> str:
    """summary.csv (full precision) and summary.md; returns the Markdown."""
    cols = columns(at)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(float(v)) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()})
    head = ["environment", "method", "runs", "final return"] + [f"return at {s:,}" for s in at] + \
           ["AUC", "IQM final [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["environment"], r["method"], str(r["runs"]), f"{r['final_mean']:.1f} ± {r['final_std']:.1f}"]
        for s in at:
            mean = r[f"at_{s}_mean"]
            cells.append("n/a" if math.isnan(mean) else f"{mean:.1f} ± {r[f'at_{s}_std']:.1f}")
        cells += [f"{r['auc_mean']:.1f} ± {r['auc_std']:.1f}",
                  f"{r['iqm_final']:.1f} [{r['iqm_ci_low']:.1f}, {r['iqm_ci_high']:.1f}]"]
        lines.append("| " + " | ".join(cells) + " |")
    md = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(md)
    return md


COMPARISON_COLUMNS = ["environment", "reference_environment", "method", "step", "ours_mean", "ours_ci_low",
                      "ours_ci_high", "ours_runs", "reference_mean", "reference_ci_low", "reference_ci_high",
                      "reference_runs", "verdict"]
RUNS_NOTE = ("Note: runs = curve files, pooled per method: one per seed for baselines and the paper's DPD, one per "
             "seed and agent for DASE and our DPD (each side's runs cut to their common length). 95% CI = "
             f"percentile bootstrap of the mean over runs ({BOOTSTRAP} resamples, seed 0). Verdict: our mean above, "
             "inside or below the reference's CI; n/a where a side has no evaluation at that step.")


def _at_step(m: np.ndarray, step: int, eval_freq: int) -> tuple[float, float, float, int]:
    """(mean, CI low, CI high, runs) of the evaluation at ``step`` over runs; NaNs and 0 runs if not reached."""
    i = step // eval_freq
    if step % eval_freq != 0 or i >= m.shape[1]:
        return math.nan, math.nan, math.nan, 0
    x = m[:, i]
    lo, hi = bootstrap_ci(x, np.mean)
    return float(x.mean()), lo, hi, len(x)


def verdict(mean: float, ref_lo: float, ref_hi: float) -> str:
    """Where our mean lies against the reference's CI: above, below, inside; n/a if either is missing."""
    if math.isnan(mean) or math.isnan(ref_lo) or math.isnan(ref_hi):
        return "n/a"
    if mean > ref_hi:
        return "above"
    if mean < ref_lo:
        return "below"
    return "inside"


def compare(own: list[Group], ref: list[Group], eval_freq: int, at: list[int]) -> list[dict]:
    """One row per (our environment, method, step) that the reference also has (environments matched by
    env_key, methods by label); steps ``at``, or the last step both have when ``at`` is empty."""
    refs: dict[tuple[str, str], list[Group]] = defaultdict(list)
    for r in ref:
        refs[(env_key(r.env), r.label)].append(r)
    rows = []
    for g in sorted(own, key=lambda g: (g.env, g.label)):
        for r in sorted(refs.get((env_key(g.env), g.label), []), key=lambda r: r.env):
            m, rm = g.matrix(), r.matrix()
            steps = at or [(min(m.shape[1], rm.shape[1]) - 1) * eval_freq]
            for step in steps:
                ours, theirs = _at_step(m, step, eval_freq), _at_step(rm, step, eval_freq)
                rows.append({"environment": g.env, "reference_environment": r.env, "method": g.label, "step": step,
                             "ours_mean": ours[0], "ours_ci_low": ours[1], "ours_ci_high": ours[2],
                             "ours_runs": ours[3], "reference_mean": theirs[0], "reference_ci_low": theirs[1],
                             "reference_ci_high": theirs[2], "reference_runs": theirs[3],
                             "verdict": verdict(ours[0], theirs[1], theirs[2])})
    return rows


def write_comparison(rows: list[dict], out: Path) -> str:
    """comparison.csv (full precision) and comparison.md; returns the Markdown."""
    with open(out / "comparison.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COMPARISON_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(float(v)) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()})

    def side(mean: float, lo: float, hi: float, runs: int) -> list[str]:
        if math.isnan(mean):
            return ["n/a", "n/a", "n/a"]
        return [f"{mean:.1f}", f"[{lo:.1f}, {hi:.1f}]", str(runs)]

    head = ["environment", "method", "step", "ours: mean", "ours: 95% CI", "ours: runs", "reference: mean",
            "reference: 95% CI", "reference: runs", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        env = r["environment"] if r["environment"] == r["reference_environment"] else \
            f"{r['environment']} vs {r['reference_environment']}"
        cells = [env, r["method"], f"{r['step']:,}",
                 *side(r["ours_mean"], r["ours_ci_low"], r["ours_ci_high"], r["ours_runs"]),
                 *side(r["reference_mean"], r["reference_ci_low"], r["reference_ci_high"], r["reference_runs"]),
                 r["verdict"]]
        lines.append("| " + " | ".join(cells) + " |")
    md = "\n".join(lines) + "\n\n" + RUNS_NOTE + "\n"
    (out / "comparison.md").write_text(md)
    return md


# ---- command line --------------------------------------------------------------------------------

def parse(argv=None) -> argparse.Namespace:
    summary, _, rest = __doc__.partition("\n\n")
    rest = rest.partition("\n\n")[2]  # argparse prints its own usage line
    p = argparse.ArgumentParser(prog="python -m utils.plot", description=summary, epilog=rest.strip(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=str, help="folders (searched recursively) or .npy files")
    p.add_argument("--out", type=str, default="Figures", help="output folder (default: Figures)")
    p.add_argument("--reference", type=str, action="append", default=[],
                   help="another tree to overlay in dashed lines, e.g. the paper's curves (repeatable); "
                        "environments match across versions (Hopper-v2 <-> Hopper-v5); also writes "
                        "comparison.csv / comparison.md: per environment, method and --at step, our mean and "
                        "the reference's, each with a 95%% bootstrap CI over runs, and whether ours is above, "
                        "inside or below the reference's CI")
    p.add_argument("--per_agent", action="store_true", help="one line per DASE agent instead of pooling agents "
                   "(figures and summary; the comparison always pools a method's runs)")
    p.add_argument("--ci", action="store_true", help="shade a 95%% bootstrap CI of the mean instead of ± std")
    p.add_argument("--smooth", type=int, default=1, help="trailing moving-average window in evaluations (default: 1)")
    p.add_argument("--at", type=int, nargs="*", default=[],
                   help="also tabulate the return at these time steps (summary, and the comparison's steps; "
                        "the comparison's default is the last step both sides have)")
    p.add_argument("--weights", action="store_true",
                   help="plot the DASE weight of shared samples ({curve}_weights.npy files) on an axis under "
                        "the returns: per group the mean over runs, NaN ignored")
    p.add_argument("--weights_log", action="store_true",
                   help="with --weights: a log scale for the weight axis (weights of many decades)")
    p.add_argument("--eval_freq", type=int, default=None,
                   help="time steps between evaluations (default: what our runs' JSON records say, else 1000)")
    p.add_argument("--max_steps", type=int, default=None,
                   help="use only the evaluations up to this step, ours and the reference's (figures and tables), "
                        "e.g. to compare 100k-step runs with the paper's 1M-step curves")
    p.add_argument("--pdf", action="store_true", help="write PDF instead of PNG")
    args = p.parse_args(argv)
    if args.smooth < 1 or (args.eval_freq is not None and args.eval_freq < 1) or any(s < 0 for s in args.at) or (args.max_steps or 0) < 0:
        p.error("--smooth and --eval_freq must be positive, --at and --max_steps steps non-negative")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    try:
        own_curves = find_curves(args.dirs)
        if not own_curves:
            raise PlotError(f"no curve files ({{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy) under {' '.join(args.dirs)}")
        show_weights = False
        if args.weights:
            weights = find_weights(args.dirs)
            show_weights = attach_weights(own_curves, weights) > 0
            if not show_weights:
                print(f"note: --weights: no usable weight files ({{curve}}_weights.npy) under {' '.join(args.dirs)}; "
                      f"plotting without the weight axis", file=sys.stderr)
        ref_curves = find_curves(args.reference) if args.reference else []
        args.eval_freq = args.eval_freq or recorded_eval_freq(own_curves) or 1000
        if args.max_steps is not None:  # before any grouping: every table and figure sees the cut curves
            cut_curves(own_curves + ref_curves, args.max_steps // args.eval_freq + 1)
        own = group_curves(own_curves, args.per_agent)
        ref = group_curves(ref_curves, args.per_agent, reference=True)
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    by_env: dict[str, list[Group]] = defaultdict(list)
    for g in own:
        by_env[g.env].append(g)
    keys = {env_key(env): env for env in by_env}
    for g in ref:
        if env_key(g.env) in keys:
            by_env[keys[env_key(g.env)]].append(g)
        else:
            print(f"note: reference {g.env} {g.label} has no matching environment among the plotted curves",
                  file=sys.stderr)
    for groups in by_env.values():
        for g in groups:
            lo, hi = g.lengths()
            if lo != hi:
                print(f"note: {g.env} {g.label}{' (reference)' if g.reference else ''}: runs have {lo} to {hi} "
                      f"evaluations; using the common first {lo}", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = plot(dict(sorted(by_env.items())), out, args.eval_freq, args.ci, args.smooth, "pdf" if args.pdf else "png",
                   weights=("log" if args.weights_log else True) if show_weights else False)
    rows = [summarise(g, args.eval_freq, args.at) for env in sorted(by_env) for g in by_env[env]]
    print(write_tables(rows, args.at, out), end="")
    tables = [out / "summary.csv", out / "summary.md"]
    if args.reference:
        # methods pooled (every file one run) whatever --per_agent says, so that DPD per agent (ours) meets
        # DPD per seed (the paper's)
        pooled = group_curves(own_curves) if args.per_agent else own
        pooled_ref = group_curves(ref_curves, reference=True) if args.per_agent else ref
        comparison = compare(pooled, pooled_ref, args.eval_freq, args.at)
        if not comparison:
            print("note: no environment and method is both among ours and in the reference; the comparison is empty",
                  file=sys.stderr)
        print()
        print(write_comparison(comparison, out), end="")
        tables += [out / "comparison.csv", out / "comparison.md"]
    print(f"wrote {', '.join(str(p) for p in written + tables)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
