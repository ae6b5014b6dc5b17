"""docs/tutorial.md's table: training episodes until the TD3 tutorial's "solved", per seed, for TD3 and each DASE agent.

    python experiments/tutorial_table.py [RESULTS_DIR]

Reads the records (``{policy}_{env}_{seed}.json``) that ``experiments/td3_tutorial.yaml`` leaves under RESULTS_DIR
(default "Learning Curves/td3_tutorial/TD3/LunarLanderContinuous-v3"). A finished seed's agent counts the episode at
which it was solved (the mean of its last 100 evaluation episodes first above 200), or "not within E" (E: the run's
--max_episodes) when it never was; a seed still running is left out. Per column the median over seeds, an unsolved
seed counting as never (so the median reads "> E" when half or more never were), with a 95 % percentile bootstrap
interval of the median over seeds (resampled values taken as they are, no interpolation).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "Learning Curves" / "td3_tutorial" / "TD3" / "LunarLanderContinuous-v3"
ENV = "LunarLanderContinuous-v3"
BOOTSTRAP = 2000
COLUMNS = [("TD3", "TD3", 0), ("DASE_TD3 agent 0", "DASE_TD3", 0), ("DASE_TD3 agent 1", "DASE_TD3", 1)]


def outcomes(folder: Path, policy: str) -> dict[int, list[float | None]]:
    """Seed -> per agent the episode it was solved at, inf when never (within --max_episodes); finished runs only.
    The run's --max_episodes goes under key -1 (the largest of the runs read)."""
    out: dict[int, list[float | None]] = {}
    limit = 0
    for path in sorted(folder.glob(f"{policy}_{ENV}_*.json")):
        seed = path.stem[len(f"{policy}_{ENV}_"):]
        if not seed.isdigit():
            continue
        record = json.loads(path.read_text())
        if "finished" not in record:
            continue  # still running (or stopped before its end): no verdict yet
        limit = max(limit, int(record["config"].get("max_episodes") or 0))
        out[int(seed)] = [float("inf") if s is None else float(s["episode"]) for s in record.get("solved", [])]
    if out:
        out[-1] = [float(limit)]
    return out


def median_ci(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """The median over seeds and its 95 % percentile bootstrap interval (order statistics, inf for never)."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.sort(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    # the median of each resample: the middle value, or the mean of the two (inf when either is inf)
    n = len(x)
    mid = medians[:, (n - 1) // 2] if n % 2 else (medians[:, n // 2 - 1] + medians[:, n // 2]) / 2
    lo, hi = np.percentile(mid, [2.5, 97.5], method="inverted_cdf")
    return float(np.median(x)), float(lo), float(hi)


def episodes(value: float, limit: int) -> str:
    return f"> {limit}" if not np.isfinite(value) else f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def table(folder: Path = FOLDER) -> list[str]:
    runs = {policy: outcomes(folder, policy) for policy in {p for _, p, _ in COLUMNS}}
    limits = [int(r.pop(-1)[0]) for r in runs.values() if -1 in r]
    limit = max(limits, default=1000)
    seeds = sorted({s for r in runs.values() for s in r})
    if not seeds:
        return [f"No finished run under {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder} yet."]
    lines = ["| seed | " + " | ".join(label for label, _, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for s in seeds:
        cells = []
        for _, policy, agent in COLUMNS:
            got = runs[policy].get(s)
            cells.append("—" if got is None or agent >= len(got) else
                         f"not within {limit}" if not np.isfinite(got[agent]) else f"{got[agent]:.0f}")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    medians, solved = [], []
    for _, policy, agent in COLUMNS:
        values = [v[agent] for v in runs[policy].values() if agent < len(v)]
        if not values:
            medians.append("—")
            solved.append("—")
            continue
        m, lo, hi = median_ci(values)
        medians.append(f"{episodes(m, limit)} [{episodes(lo, limit)}, {episodes(hi, limit)}] ({len(values)})")
        solved.append(f"{sum(np.isfinite(values))} of {len(values)}")
    lines.append("| median [95 % CI] (seeds) | " + " | ".join(medians) + " |")
    lines.append("| solved within the limit | " + " | ".join(solved) + " |")
    return lines


if __name__ == "__main__":
    print("\n".join(table(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else FOLDER)))
