"""The table of docs/replay.md: TD3 and DASE_TD3 on LunarLanderContinuous-v3, plain vs --n_step 3 vs --prioritized.

    python experiments/replay_table.py            # after experiments/reproduce_cpu.yaml and experiments/replay_cpu.yaml

Per run (a seed; DASE_TD3: the mean of its 2 agents' curves) the mean of the 5 evaluations up to each step, then the
mean over seeds with a 95 % Student-t interval over seeds (half-width t_{0.975, n-1} * sd / sqrt(n)).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CURVES = ROOT / "Learning Curves" / "CPU 100k"
ENV = "LunarLanderContinuous-v3"
SETTINGS = {"": "Unlimited_Buffer", "`--n_step 3`": "n_step_3", "`--prioritized`": "prioritized"}
POLICIES = {"TD3": 1, "DASE_TD3": 2}
STEPS, WINDOW, EVAL_FREQ, SEEDS = (50_000, 100_000), 5, 1000, range(3)
# t_{0.975, df} for df = 1..10
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def run_curve(folder: Path, policy: str, seed: int) -> np.ndarray | None:
    """A seed's curve (DASE: its agents' mean), or None while the run has not written it."""
    agents = POLICIES[policy]
    stem = f"{policy}_{ENV}_{seed}"
    paths = [folder / f"{stem}.npy"] if agents == 1 else [folder / f"{stem}_Agent_{i}.npy" for i in range(agents)]
    if not all(p.is_file() for p in paths):
        return None
    return np.mean([np.load(p) for p in paths], axis=0)


def cell(values: list[float]) -> str:
    v = np.asarray(values)
    half = T975[len(v) - 1] * v.std(ddof=1) / np.sqrt(len(v))
    return f"{v.mean():.1f} +- {half:.1f}"


def main() -> int:
    lines = ["| run | " + " | ".join(f"at {s // 1000}k" for s in STEPS) + f" | seeds at {STEPS[-1] // 1000}k |",
             "|---|" + "---|" * (len(STEPS) + 1)]
    for policy in POLICIES:
        for flags, setting in SETTINGS.items():
            folder = CURVES / setting / "TD3" / ENV
            curves = [run_curve(folder, policy, s) for s in SEEDS]
            if any(c is None or len(c) <= STEPS[-1] // EVAL_FREQ for c in curves):
                print(f"{policy} {flags or '(plain)'}: not finished in {folder}", file=sys.stderr)
                continue
            at = {s: [float(c[s // EVAL_FREQ - WINDOW + 1: s // EVAL_FREQ + 1].mean()) for c in curves] for s in STEPS}
            name = f"{policy} {flags}".strip() + (" (mean of its 2 agents)" if POLICIES[policy] > 1 else "")
            lines.append(f"| {name} | " + " | ".join(cell(at[s]) for s in STEPS) + " | "
                         + ", ".join(f"{x:.1f}" for x in at[STEPS[-1]]) + " |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
