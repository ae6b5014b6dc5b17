"""docs/side_by_side.md's table: this project's TD3 and DASE_TD3 beside the DASE paper's own code, LunarLanderContinuous-v3.

    python -m experiments.side_by_side_table

Per run (a seed; DASE_TD3: the mean of its 2 agents' curves) the mean of the 5 evaluations ending at each step, then
per code and method the mean over the seeds that reached the step, with a 95 % percentile bootstrap interval over
seeds; the differences of means with a two-sided permutation test over seeds (exact up to 20,000 relabellings,
else 20,000 random ones). Data: "Learning Curves/side_by_side/" (its README) and this project's CPU seeds 0-2.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from utils.plot.stats import bootstrap_ci, permutation_p

ROOT = Path(__file__).resolve().parent.parent

ENV = "LunarLanderContinuous-v3"
SIDE = ROOT / "Learning Curves" / "side_by_side"
OURS = [SIDE / "ours", ROOT / "Learning Curves" / "CPU 100k" / "Unlimited_Buffer" / "TD3" / ENV]
PAPER = [SIDE / "paper_code"]
STEPS, WINDOW, EVAL_FREQ = (40_000, 50_000, 100_000), 5, 1000


def runs(folders: list[Path], policy: str) -> dict[int, np.ndarray]:
    """Seed -> the run's curve (DASE_TD3: its agents' mean) from the first folder that has it."""
    out: dict[int, np.ndarray] = {}
    for folder in folders:
        pattern = f"{policy}_{ENV}_*_Agent_0.npy" if policy.startswith("DASE") else f"{policy}_{ENV}_*.npy"
        for path in sorted(folder.glob(pattern)):
            seed = path.name[len(f"{policy}_{ENV}_"):].split("_")[0].removesuffix(".npy")
            if not seed.isdigit() or int(seed) in out:
                continue
            paths = [folder / f"{policy}_{ENV}_{seed}_Agent_{i}.npy" for i in range(2)] if policy.startswith("DASE") \
                else [path]
            if all(p.is_file() for p in paths):
                out[int(seed)] = np.mean([np.load(p) for p in paths], axis=0)
    return out


def at(curves: dict[int, np.ndarray], step: int) -> dict[int, float]:
    """Seed -> the mean of the 5 evaluations ending at ``step``, for the runs that reached it."""
    i = step // EVAL_FREQ
    return {s: float(c[i - WINDOW + 1:i + 1].mean()) for s, c in curves.items() if len(c) > i}


def cell(values: dict[int, float]) -> str:
    if len(values) < 2:
        return "—"
    v = np.asarray(list(values.values()))
    lo, hi = bootstrap_ci(v, np.mean)
    return f"{v.mean():.1f} [{lo:.1f}, {hi:.1f}] ({len(v)})"


def diff(a: dict[int, float], b: dict[int, float]) -> str:
    if len(a) < 2 or len(b) < 2:
        return "—"
    x, y = np.asarray(list(a.values())), np.asarray(list(b.values()))
    return f"{x.mean() - y.mean():+.1f} (p {permutation_p(x, y):.2f})"


def table() -> list[str]:
    groups = {"paper's code DASE_TD3": runs(PAPER, "DASE_TD3"), "paper's code TD3": runs(PAPER, "TD3"),
              "our DASE_TD3": runs(OURS, "DASE_TD3"), "our TD3": runs(OURS, "TD3")}
    values = {name: {step: at(curves, step) for step in STEPS} for name, curves in groups.items()}
    head = "| mean of the 5 evaluations up to the step, 95 % CI (seeds) | " + " | ".join(f"{s // 1000}k" for s in STEPS)
    lines = [head + " |", "|---" * (len(STEPS) + 1) + "|"]
    for name in groups:
        lines.append(f"| {name} | " + " | ".join(cell(values[name][s]) for s in STEPS) + " |")
    for a, b in [("paper's code DASE_TD3", "our DASE_TD3"), ("paper's code DASE_TD3", "paper's code TD3"),
                 ("our DASE_TD3", "our TD3"), ("paper's code TD3", "our TD3")]:
        lines.append(f"| {a} − {b} | " + " | ".join(diff(values[a][s], values[b][s]) for s in STEPS) + " |")
    seeds = {name: sorted(set().union(*(v.keys() for v in values[name].values()))) for name in groups}
    lines.append("")
    lines.append("Seeds: " + "; ".join(f"{name} {', '.join(map(str, s))}" for name, s in seeds.items()) + ".")
    return lines + switches(values["our DASE_TD3"])


# differences between the two codes, switched in ours one at a time: (label, policy stem of its files)
SWITCHES = [("--kl_precision float32 (the paper's float32 weighting)", "DASE_TD3_float32")]


def switches(ours: dict[int, dict[int, float]]) -> list[str]:
    """Our DASE_TD3 with one difference switched to the paper's code's way, against ours on the same seeds."""
    lines = []
    for label, stem in SWITCHES:
        switched = {step: at(curves, step) for curves in [runs(OURS, stem)] for step in STEPS}
        if not any(switched.values()):
            continue
        if not lines:
            lines += ["", "| our DASE_TD3 with one switch, against ours on the same seeds | "
                      + " | ".join(f"{s // 1000}k" for s in STEPS) + " |", "|---" * (len(STEPS) + 1) + "|"]
        same = {step: {k: v for k, v in ours[step].items() if k in switched[step]} for step in STEPS}
        lines.append(f"| {label} | " + " | ".join(cell(switched[s]) for s in STEPS) + " |")
        lines.append("| ours, same seeds | " + " | ".join(cell(same[s]) for s in STEPS) + " |")
        lines.append("| switched − ours | " + " | ".join(diff(switched[s], same[s]) for s in STEPS) + " |")
    return lines


if __name__ == "__main__":
    print("\n".join(table()))
