"""Plot saved learning curves like the paper's figures, and summarise them in a table.

    python -m utils.plot DIR [DIR ...] --out OUTDIR [--reference DIR] [--ci] [--smooth W] [--pdf]

Every ``.npy`` file under the given folders whose name follows the curve naming
({ALG}_{env}_{seed}.npy, DASE_{ALG}_{env}_{seed}_Agent_{i}.npy, DPD_{ALG}_{env}_{seed}.npy) is
read; curves are grouped by environment and method (baseline, DASE, DPD). DASE agents are pooled
across seeds unless ``--per_agent``. Writes one figure per environment, a grid of all of them,
and summary.csv / summary.md.
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

NAME = re.compile(r"^(?:(?P<method>DASE|DPD)_)?(?P<alg>DDPG|TD3|SAC)_(?P<env>.+?)_(?P<seed>\d+)(?:_Agent_(?P<agent>\d+))?$")
VERSION = re.compile(r"-v\d+$")
FINAL_EVALS = 10  # "final return" = mean of the last 10 evaluations of a run
BOOTSTRAP = 2000
COLORS = {"DASE": "tab:red", "DPD": "tab:green", "": "tab:blue"}


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

    @property
    def label(self) -> str:
        return f"{self.method}_{self.alg}" if self.method else self.alg


@dataclass
class Group:
    """The runs of one method on one environment."""

    env: str
    label: str
    method: str
    runs: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    reference: bool = False

    def matrix(self) -> np.ndarray:
        """[runs, evaluations] over the common prefix of all runs."""
        n = min(len(r) for r in self.runs)
        return np.stack([r[:n] for r in self.runs])

    def lengths(self) -> tuple[int, int]:
        return min(len(r) for r in self.runs), max(len(r) for r in self.runs)


def env_key(env: str) -> str:
    """Environment name without version: Hopper-v2 and Hopper-v5 match."""
    return VERSION.sub("", env)


def read_curve(path: Path) -> np.ndarray | None:
    """A 1-D float array of finite values, or None after a warning naming the file."""
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:
        warn(f"skipping {path}: cannot read it as .npy ({type(e).__name__}: {e})")
        return None
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
        warn(f"skipping {path}: dtype {arr.dtype} is not numeric")
        return None
    if arr.ndim != 1 or arr.size == 0:
        warn(f"skipping {path}: expected a non-empty 1-D array, got shape {arr.shape}")
        return None
    if not np.all(np.isfinite(arr)):
        warn(f"skipping {path}: it holds NaN or infinite values")
        return None
    return arr.astype(np.float64)


def find_curves(dirs: list[str | Path]) -> list[Curve]:
    """Every readable curve file under ``dirs`` (recursively), parsed from its name."""
    curves = []
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise PlotError(f"{d}: no such folder")
        paths = [d] if d.is_file() else sorted(d.rglob("*.npy"))
        for path in paths:
            m = NAME.match(path.stem)
            if m is None:
                warn(f"skipping {path}: name does not follow {{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy")
                continue
            values = read_curve(path)
            if values is None:
                continue
            agent = m.group("agent")
            curves.append(Curve(path, m.group("method") or "", m.group("alg"), m.group("env"), int(m.group("seed")),
                                None if agent is None else int(agent), values))
    return curves


def group_curves(curves: list[Curve], per_agent: bool = False, reference: bool = False) -> list[Group]:
    """Group by (environment, method); DASE agents pooled across seeds unless per_agent."""
    groups: dict[tuple[str, str], Group] = {}
    for c in sorted(curves, key=lambda c: (c.env, c.label, c.seed, c.agent or 0)):
        label = c.label
        if per_agent and c.agent is not None:
            label = f"{label} agent {c.agent}"
        g = groups.setdefault((c.env, label), Group(c.env, label, c.method, reference=reference))
        g.runs.append(c.values)
        g.names.append(c.path.name)
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

def _draw(ax, groups: list[Group], eval_freq: int, ci: bool, window: int) -> None:
    for g in groups:
        m = smooth(g.matrix(), window)
        steps = np.arange(m.shape[1]) * eval_freq
        mean, lo, hi = mean_band(m, ci)
        color = COLORS.get(g.method, None)
        style = "--" if g.reference else "-"
        line, = ax.plot(steps, mean, style, color=color if "agent" not in g.label else None, lw=1.4,
                        label=legend_label(g))
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.10 if g.reference else 0.2, lw=0)
    ax.set_xlabel("Time steps")
    ax.set_ylabel("Average return")
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))


def legend_label(g: Group) -> str:
    name = g.label.replace("_", "-")
    if g.reference:
        return f"{name} (reference, {g.env})"
    return name


def plot(groups_by_env: dict[str, list[Group]], out: Path, eval_freq: int, ci: bool, window: int,
         ext: str) -> list[Path]:
    """One figure per environment and one grid of all environments; returns the written paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for env, groups in groups_by_env.items():
        fig, ax = plt.subplots(figsize=(5.2, 3.9))
        _draw(ax, groups, eval_freq, ci, window)
        ax.set_title(env)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = out / f"{env}.{ext}"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        written.append(path)
    n = len(groups_by_env)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, (env, groups) in zip(axes.flat, groups_by_env.items()):
        _draw(ax, groups, eval_freq, ci, window)
        ax.set_title(env)
        ax.legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
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


# ---- command line --------------------------------------------------------------------------------

def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m utils.plot", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=str, help="folders (searched recursively) or .npy files")
    p.add_argument("--out", type=str, default="Figures", help="output folder (default: Figures)")
    p.add_argument("--reference", type=str, action="append", default=[],
                   help="another tree to overlay in dashed lines, e.g. the paper's curves (repeatable); "
                        "environments match across versions (Hopper-v2 <-> Hopper-v5)")
    p.add_argument("--per_agent", action="store_true", help="one line per DASE agent instead of pooling agents")
    p.add_argument("--ci", action="store_true", help="shade a 95%% bootstrap CI of the mean instead of ± std")
    p.add_argument("--smooth", type=int, default=1, help="trailing moving-average window in evaluations (default: 1)")
    p.add_argument("--at", type=int, nargs="*", default=[], help="also tabulate the return at these time steps")
    p.add_argument("--eval_freq", type=int, default=1000, help="time steps between evaluations (default: 1000)")
    p.add_argument("--pdf", action="store_true", help="write PDF instead of PNG")
    args = p.parse_args(argv)
    if args.smooth < 1 or args.eval_freq < 1 or any(s < 0 for s in args.at):
        p.error("--smooth and --eval_freq must be positive, --at steps non-negative")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    try:
        own = group_curves(find_curves(args.dirs), args.per_agent)
        if not own:
            raise PlotError(f"no curve files ({{ALG}}_{{env}}_{{seed}}[_Agent_{{i}}].npy) under {' '.join(args.dirs)}")
        ref = group_curves(find_curves(args.reference), args.per_agent, reference=True) if args.reference else []
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
    written = plot(dict(sorted(by_env.items())), out, args.eval_freq, args.ci, args.smooth, "pdf" if args.pdf else "png")
    rows = [summarise(g, args.eval_freq, args.at) for env in sorted(by_env) for g in by_env[env]]
    print(write_tables(rows, args.at, out), end="")
    print(f"wrote {', '.join(str(p) for p in written)}, {out / 'summary.csv'}, {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
