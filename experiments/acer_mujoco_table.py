"""Continuous ACER beside TD3 and SAC on MuJoCo (issue 35, item 1): where each run stands and what it scores.

    python -m experiments.acer_mujoco_table [--write]

Runs: "Learning Curves/acer_mujoco/{ACER,TD3,SAC}/{env}/" (experiments/acer_mujoco.yaml, mujoco_baselines.yaml:
10 evaluation episodes every 10k steps, entry k of a curve the evaluation at step 10k x k). Per method, the mean
over seeds of the mean of the 5 evaluations ending at each step (a 50k window), with a 95 % percentile bootstrap
interval over seeds and the number of seeds that reached the step; then ACER against TD3 and against SAC with a
two-sided permutation test over seeds, where both have 2 seeds or more at the step. A run still in progress counts
up to its last evaluation; the "reached" column says how far each seed is. For scale, the DASE paper's own TD3 and
SAC runs on HalfCheetah-v2 ("Learning Curves/paper/", 10 seeds, an evaluation every 1000 steps) read at
the same 5 evaluation steps. ``--write`` puts the table into docs/actor_critic.md between its markers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from utils.plot.stats import bootstrap_ci, permutation_p
from utils.plot.tables import write_between_markers

ROOT = Path(__file__).resolve().parent.parent

RUNS = ROOT / "Learning Curves" / "acer_mujoco"
ENVS = ("HalfCheetah-v5",)
METHODS = ("ACER", "TD3", "SAC")
STEPS, WINDOW, EVAL_FREQ = (100_000, 250_000, 500_000, 1_000_000), 5, 10_000
MARK = "acer_mujoco_table"
PAPER = ROOT / "Learning Curves" / "paper" / "Unlimited_Buffer"
PAPER_EVAL_FREQ = 1000


def runs(root: Path, method: str, env: str) -> dict[int, np.ndarray]:
    """Seed -> curve of ``method`` on ``env`` (files {method}_{env}_{seed}.npy)."""
    out = {}
    for path in sorted((root / method / env).glob(f"{method}_{env}_*.npy")):
        seed = path.stem[len(f"{method}_{env}_"):]
        if seed.isdigit():
            out[int(seed)] = np.load(path)
    return out


def at(curves: dict[int, np.ndarray], step: int) -> np.ndarray:
    """Per seed that reached ``step``: the mean of the WINDOW evaluations ending there."""
    i = step // EVAL_FREQ
    return np.array([c[i - WINDOW + 1:i + 1].mean() for c in curves.values() if len(c) > i])


def paper_at(method: str, env: str, step: int, root: Path = PAPER) -> np.ndarray:
    """Per seed of the paper's own ``method`` run on the -v2 task: the mean of its evaluations at the same WINDOW
    steps as ``at`` reads (step, step - 10k, ...)."""
    v2 = env.replace("-v5", "-v2")
    picks = [(step - j * EVAL_FREQ) // PAPER_EVAL_FREQ for j in range(WINDOW)]
    return np.array([np.load(p)[picks].mean() for p in sorted((root / method / v2).glob(f"{method}_{v2}_*.npy"))
                     if p.stem[len(f"{method}_{v2}_"):].isdigit() and len(np.load(p)) > picks[0]])


def cell(values: np.ndarray) -> str:
    if len(values) == 0:
        return "—"
    lo, hi = bootstrap_ci(values, np.mean)
    return f"{values.mean():.0f} [{lo:.0f}, {hi:.0f}] ({len(values)})"


def reached(curves: dict[int, np.ndarray]) -> str:
    """How far the seeds' curves go: one step if they agree, else the lowest and the highest."""
    if not curves:
        return "not run"
    steps = sorted({(len(c) - 1) * EVAL_FREQ for c in curves.values()})
    span = f"{steps[0] // 1000}k" if len(steps) == 1 else f"{steps[0] // 1000}k-{steps[-1] // 1000}k"
    return f"{span}, seeds {','.join(map(str, sorted(curves)))}"


def table(root: Path = RUNS) -> str:
    head = "| mean of the 5 evaluations up to the step, 95 % CI (seeds) | reached | " + \
        " | ".join(f"{s // 1000}k" for s in STEPS) + " |"
    lines = [head, "|" + "---|" * (len(STEPS) + 2)]
    for env in ENVS:
        curves = {m: runs(root, m, env) for m in METHODS}
        for m in METHODS:
            lines.append(f"| {env} {m} | {reached(curves[m])} | "
                         + " | ".join(cell(at(curves[m], s)) for s in STEPS) + " |")
        for other in METHODS[1:]:
            cells = []
            for s in STEPS:
                a, b = at(curves["ACER"], s), at(curves[other], s)
                cells.append(f"{a.mean() - b.mean():+.0f} (p {permutation_p(a, b):.2f})"
                             if len(a) >= 2 and len(b) >= 2 else "—")
            lines.append(f"| {env} ACER − {other} | | " + " | ".join(cells) + " |")
        for m in METHODS[1:]:
            lines.append(f"| the DASE paper's {m} ({env.replace('-v5', '-v2')}) | its code | "
                         + " | ".join(cell(paper_at(m, env, s)) for s in STEPS) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = table()
    print(text)
    if "--write" in argv:
        write_between_markers(ROOT / "docs" / "actor_critic.md", MARK, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
