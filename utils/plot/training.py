"""Training episodes against total environment steps, as Diff-DAC's reference analysis reports them.

``python -m utils.plot DIR --training`` reads every ``{curve}_episodes.csv`` (written by ``ac_main.py``'s lockstep
runs: environment index, the agent's step count at the episode's end, return, length, wall seconds) and, per
setting (policy, variant, environment) and seed, pools the episodes of all the seed's agents in the order they
ended. The x axis is the total number of environment steps of the seed, summed over its agents (in a lockstep
run every agent has taken the same number of steps, so N x the agent's count); the y axis the running mean of
the last ``--training_window`` episode returns (default 100; fewer at the start). Seeds are put on one grid of
steps (linear interpolation, up to the shortest seed) and drawn as their mean with a band (± std, or with
``--ci`` a 95 % bootstrap CI over seeds). Writes ``training_{env}.png`` per environment and ``training.md``:
per setting the running mean at the end of each seed, its mean over seeds and CI. With ``--solved_at R`` (A3C-ACER's
"solves Pong in about 600 episodes", Pong's rule: the mean of the last 100 training episodes at 18) ``training.md``
also tells per seed the first episode and step at which the mean of the last ``--training_window`` returns (a full
window) reached R, or how far the seed got: its best such mean and where, and its last one.
"""
from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..io import input_problem
from ..naming import EPISODES_SUFFIX
from ..run.names import CURVE_NAME
from .curves import PlotError, warn
from .stats import bootstrap_ci, mean_band

GRID = 200  # points of the common step grid a setting's seeds are interpolated onto


@dataclass
class SeedEpisodes:
    """One seed of one setting: per agent its rows (step, return), in file order."""

    agents: dict[int, list[tuple[int, float]]] = field(default_factory=dict)

    def episodes(self) -> tuple[np.ndarray, np.ndarray]:
        """(total steps, return) of every episode of every agent, in the order they ended."""
        n = len(self.agents)
        rows = sorted((step, agent, k, ret) for agent, episodes in self.agents.items()
                      for k, (step, ret) in enumerate(episodes))
        return (np.array([r[0] for r in rows], dtype=np.float64) * n,
                np.array([r[3] for r in rows], dtype=np.float64))

    def pooled(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """(total steps, running mean of the last ``window`` returns) over every episode of every agent."""
        steps, returns = self.episodes()
        c = np.cumsum(np.insert(returns, 0, 0.0))
        idx = np.arange(1, len(returns) + 1)
        lo = np.maximum(idx - window, 0)
        return steps, (c[idx] - c[lo]) / (idx - lo)


def first_reaching(steps: np.ndarray, returns: np.ndarray, window: int, threshold: float) -> dict:
    """Where the mean of the last ``window`` returns (full windows only) first reached ``threshold``: {"episodes": the
    count of episodes then (1-based), "steps": the total steps then, or None for both when never; "best": the highest
    such mean, "best_episodes", "best_steps" where it was; "last": the last such mean, "episodes_run", "steps_run"}.
    Fewer than ``window`` episodes: no full window, every mean None."""
    out = {"episodes": None, "steps": None, "best": None, "best_episodes": None, "best_steps": None, "last": None,
           "episodes_run": int(len(returns)), "steps_run": int(steps[-1]) if len(steps) else 0}
    if len(returns) < window:
        return out
    c = np.cumsum(np.insert(np.asarray(returns, dtype=np.float64), 0, 0.0))
    means = (c[window:] - c[:-window]) / window  # means[i]: episodes i+1 .. i+window
    reached = np.flatnonzero(means >= threshold)
    if len(reached):
        k = int(reached[0]) + window
        out.update(episodes=k, steps=int(steps[k - 1]))
    b = int(np.argmax(means))
    out.update(best=float(means[b]), best_episodes=b + window, best_steps=int(steps[b + window - 1]),
               last=float(means[-1]))
    return out


def read_episodes(path: Path) -> list[tuple[int, float]] | None:
    """The (step, return) rows of one episode log; None (with a warning) when it is not one."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            return [(int(row["step"]), float(row["return"])) for row in reader]
    except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError, csv.Error) as e:
        warn(f"{path}: not an episode log ({type(e).__name__}); skipped")
        return None


def find_episode_logs(dirs: list[str]) -> dict[tuple[str, str], dict[int, SeedEpisodes]]:
    """{(env, setting): {seed: SeedEpisodes}} from every ``*_episodes.csv`` under ``dirs``. Where the same setting,
    seed and agent come from more than one folder (the same run on two machines, say), that setting is split by the
    folder each file sits in, named after it: ``ACER [acer_h100]``, rather than one file silently replacing another."""
    logs = []  # (env, setting, seed, agent, folder, rows)
    for d in dirs:
        problem = input_problem(d)
        if problem:
            raise PlotError(f"{str(d)[:60]}: {problem}")
        d = Path(d)
        paths = [d] if d.is_file() else sorted(d.rglob(f"*{EPISODES_SUFFIX}.csv"))
        for path in paths:
            m = CURVE_NAME.match(re.sub(f"{EPISODES_SUFFIX}$", "", path.stem))
            if m is None or not path.name.endswith(f"{EPISODES_SUFFIX}.csv"):
                continue
            rows = read_episodes(path)
            if rows is None:
                continue
            setting = "_".join(x for x in (m.group("method"), m.group("alg"), m.group("variant")) if x)
            inside = path.parent.relative_to(d).parts if d.is_dir() else ()
            folder = inside[0] if inside else (d.name if d.is_dir() else path.parent.name)
            logs.append((m.group("env"), setting, int(m.group("seed")), int(m.group("agent") or 0), folder, rows))
    where = defaultdict(set)  # (env, setting, seed, agent): the folders it came from
    for env, setting, seed, agent, folder, _ in logs:
        where[(env, setting, seed, agent)].add(folder)
    split = {(env, setting) for (env, setting, _, _), folders in where.items() if len(folders) > 1}
    found: dict[tuple[str, str], dict[int, SeedEpisodes]] = defaultdict(dict)
    for env, setting, seed, agent, folder, rows in logs:
        name = f"{setting} [{folder}]" if (env, setting) in split else setting
        found[(env, name)].setdefault(seed, SeedEpisodes()).agents[agent] = rows
    return dict(found)


def setting_curves(seeds: dict[int, SeedEpisodes], window: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """(grid of total steps [G], running means [seeds, G], each seed's final running mean) of one setting."""
    pooled = [seeds[s].pooled(window) for s in sorted(seeds)]
    pooled = [(x, y) for x, y in pooled if len(x)]
    if not pooled:
        return np.zeros(0), np.zeros((0, 0)), []
    end = min(x[-1] for x, _ in pooled)
    grid = np.linspace(0.0, end, GRID)
    return grid, np.stack([np.interp(grid, x, y) for x, y in pooled]), [float(y[-1]) for _, y in pooled]


def table(found: dict, window: int) -> str:
    lines = [f"| environment | setting | seeds | running mean of the last {window} training returns at the end, "
             "95 % CI over seeds | per seed |", "|---|---|---|---|---|"]
    for (env, setting), seeds in sorted(found.items()):
        _, _, finals = setting_curves(seeds, window)
        if not finals:
            continue
        x = np.array(finals)
        lo, hi = bootstrap_ci(x, np.mean) if len(x) > 1 else (x[0], x[0])
        per_seed = ", ".join(f"{v:.1f}" for v in finals)
        lines.append(f"| {env} | {setting} | {len(x)} | {x.mean():.1f} [{lo:.1f}, {hi:.1f}] | {per_seed} |")
    return "\n".join(lines) + "\n"


def solved_table(found: dict, window: int, threshold: float) -> str:
    """Per seed: when the mean of its last ``window`` training returns first reached ``threshold``, else how far."""
    lines = [f"| environment | setting | seed | mean of the last {window} first >= {threshold:g}: episodes, total steps "
             f"| best mean of {window} (episodes, steps) | last mean of {window} (episodes, steps) |",
             "|---|---|---|---|---|---|"]
    for (env, setting), seeds in sorted(found.items()):
        for seed in sorted(seeds):
            r = first_reaching(*seeds[seed].episodes(), window, threshold)
            run = f"({r['episodes_run']}, {r['steps_run']})"
            if r["best"] is None:
                lines.append(f"| {env} | {setting} | {seed} | not reached: fewer than {window} episodes | - "
                             f"| - {run} |")
                continue
            when = (f"{r['episodes']}, {r['steps']}" if r["episodes"] is not None else "not reached")
            lines.append(f"| {env} | {setting} | {seed} | {when} | {r['best']:.1f} ({r['best_episodes']}, "
                         f"{r['best_steps']}) | {r['last']:.1f} {run} |")
    return "\n".join(lines) + "\n"


def draw(found: dict, out: Path, window: int, ci: bool, ext: str, threshold: float | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_env: dict[str, list[str]] = defaultdict(list)
    for env, setting in found:
        by_env[env].append(setting)
    written = []
    for env, settings in sorted(by_env.items()):
        fig, ax = plt.subplots(figsize=(5.6, 3.9))
        for setting in sorted(settings):
            grid, m, _ = setting_curves(found[(env, setting)], window)
            if not len(grid):
                continue
            mean, lo, hi = mean_band(m, ci)
            (line,) = ax.plot(grid, mean, label=f"{setting} ({len(m)})", lw=1.4)
            ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
        if threshold is not None:
            ax.axhline(threshold, color="grey", ls="--", lw=0.8, label=f"{threshold:g}")
        ax.set_xlabel("environment steps, all agents together")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))  # 1e5 under the axis, not 6-digit labels that touch
        ax.set_ylabel(f"training return (running mean of {window})")
        ax.set_title(env)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"training_{env}.{ext}"
        fig.savefig(path, dpi=150)
        plt.close(fig)
        written.append(path)
    return written


def training(dirs: list[str], out: Path, window: int, ci: bool, ext: str, threshold: float | None = None) -> list[Path]:
    """The --training mode: figures and training.md (printed); raises PlotError when there is nothing to read."""
    found = find_episode_logs(dirs)
    if not found:
        raise PlotError(f"no training episode logs ({{curve}}{EPISODES_SUFFIX}.csv, written by ac_main.py) under "
                        f"{' '.join(dirs)}")
    out.mkdir(parents=True, exist_ok=True)
    written = draw(found, out, window, ci, ext, threshold)
    text = table(found, window)
    if threshold is not None:
        text += "\n" + solved_table(found, window, threshold)
    (out / "training.md").write_text(text)
    print(text, end="")
    return written + [out / "training.md"]
