"""docs/recurrent.md's tables: recurrent against feed-forward SAC on the velocity-masked tasks (issue 38).

    python -m experiments.recurrent_table [--write] [--figure]

Per seed the mean of the last 3 evaluations up to a step (5 episodes each), then the mean over seeds with a 95 %
percentile bootstrap interval over seeds, and the first step at which a seed's last-3 mean reached the issue's bar
(-250 on the Pendulum, 450 on CartPole). Data: "Learning Curves/recurrent_pendulum/" and
"Learning Curves/recurrent_cartpole/" from experiments/recurrent_pendulum.yaml and recurrent_cartpole.yaml, the
finished runs only. ``--write`` puts the tables into docs/recurrent.md between their markers; ``--figure`` draws
each task's rows (the last-3 mean over seeds, a 95 % bootstrap band over seeds; runs of several settings share a
file stem, so ``utils.plot`` would pool them) into Figures/{task}/settings.png.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from utils.plot.stats import bootstrap_ci
from utils.plot.tables import write_between_markers

ROOT = Path(__file__).resolve().parent.parent

WINDOW, EVAL_FREQ = 3, 1000


class Task(NamedTuple):
    data: str                                  # folder under Learning Curves/
    env: str
    runs: dict[str, tuple[str, ...]]           # row name -> (setting folder, file stem[, another env id])
    steps: tuple[int, ...]
    bar: float
    mark: str                                  # docs/recurrent.md's marker


TASKS = (
    Task("recurrent_pendulum", "VelocityMaskedPendulum-v1",
         {"recurrent SAC (gru)": ("gru", "SAC_gru"),
          "recurrent SAC (gru) + prediction model": ("gru_pred", "SAC_gru_pred"),
          "feed-forward SAC": ("feed_forward_100k", "SAC")},
         (10_000, 15_000, 20_000, 25_000, 50_000, 100_000), -250.0, "recurrent_table"),
    Task("recurrent_cartpole", "VelocityMaskedCartPole-v1",
         {"recurrent discrete SAC (gru)": ("gru", "SAC_gru"),
          "recurrent discrete SAC (gru), target entropy 0.5 log 2": ("gru_entropy_0.5", "SAC_gru"),
          "recurrent discrete SAC (gru) reading the previous action": ("gru_prev", "SAC_gru_prev"),
          "recurrent discrete SAC (gru), windows of 24 with burn-in 8": ("burn_in_8", "SAC_gru"),
          "feed-forward discrete SAC": ("feed_forward", "SAC"),
          "control: recurrent discrete SAC (gru) on the unmasked CartPole-v1": ("unmasked_gru", "SAC_gru",
                                                                                "CartPole-v1")},
         (10_000, 20_000, 30_000, 50_000, 75_000, 100_000), 450.0, "recurrent_cartpole_table"),
)


def curves(task: Task, folder: str, stem: str, env: str | None = None) -> dict[int, np.ndarray]:
    """Seed -> curve, for the runs whose record says finished (a run still going is left out)."""
    out, env = {}, env or task.env
    where = ROOT / "Learning Curves" / task.data / folder / "SAC" / env
    for path in sorted(where.glob(f"{stem}_{env}_*.npy")):
        seed = path.stem.rsplit("_", 1)[-1]
        record = path.with_suffix(".json")
        if seed.isdigit() and record.exists() and json.loads(record.read_text()).get("finished"):
            out[int(seed)] = np.load(path)
    return out


def last3(curve: np.ndarray, step: int) -> float | None:
    i = step // EVAL_FREQ
    return float(curve[i - WINDOW + 1:i + 1].mean()) if len(curve) > i else None


def first_at_bar(curve: np.ndarray, bar: float) -> int | None:
    """The first step whose last-3 mean is at least the bar (None: never)."""
    for i in range(WINDOW - 1, len(curve)):
        if curve[i - WINDOW + 1:i + 1].mean() >= bar:
            return i * EVAL_FREQ
    return None


def table(task: Task) -> str:
    head = "| mean of the last 3 evaluations, 95 % CI (seeds) | " \
        + " | ".join(f"{s // 1000}k" for s in task.steps) + f" | first step at >= {task.bar:g} (per seed) |"
    lines = [head, "|" + "---|" * (len(task.steps) + 2)]
    for name, run in task.runs.items():
        runs = curves(task, *run)
        if not runs:
            continue
        cells = []
        for step in task.steps:
            values = np.array([v for v in (last3(c, step) for c in runs.values()) if v is not None])
            if len(values) == 0:
                cells.append("—")
                continue
            lo, hi = bootstrap_ci(values, np.mean)
            cells.append(f"{values.mean():.1f} [{lo:.1f}, {hi:.1f}] ({len(values)})")
        reached = [first_at_bar(c, task.bar) for c in runs.values()]
        shown = ", ".join("never" if r is None else f"{r // 1000}k" for r in reached)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)


def figure(task: Task) -> Path | None:
    """Figures/{task.data}/settings.png: one line per row of the table, with the bar dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    drawn = 0
    for name, run in task.runs.items():
        runs = curves(task, *run)
        if not runs:
            continue
        n = min(len(c) for c in runs.values())
        smooth = np.stack([[c[max(0, i - WINDOW + 1):i + 1].mean() for i in range(n)] for c in runs.values()])
        steps = np.arange(n) * EVAL_FREQ
        line, = ax.plot(steps, smooth.mean(axis=0), label=f"{name} ({len(runs)})")
        if len(runs) > 1:
            lo, hi = bootstrap_ci(smooth, np.mean)
            ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.2)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.axhline(task.bar, color="k", ls="--", lw=1)
    ax.set(xlabel="environment steps", ylabel="mean of the last 3 evaluations", title=task.env)
    ax.legend(fontsize=7)
    out = ROOT / "Figures" / task.data / "settings.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    for task in TASKS:
        if "--figure" in argv:
            print(f"wrote {figure(task)}")
        text = table(task)
        print(f"{task.env}\n{text}\n")
        if "--write" in argv:
            write_between_markers(ROOT / "docs" / "recurrent.md", task.mark, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
