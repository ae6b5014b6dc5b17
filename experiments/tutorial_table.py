"""docs/tutorial.md's table: training episodes until the TD3 tutorial's "solved", per seed, for TD3 and each DASE agent.

    python experiments/tutorial_table.py [RESULTS_DIR]

Reads the records (``{policy}_{env}_{seed}.json``) that ``experiments/td3_tutorial.yaml`` leaves under RESULTS_DIR
(default "Learning Curves/td3_tutorial/TD3/LunarLanderContinuous-v3"). A finished seed's agent counts the episode at
which it was solved (the mean of its last 100 evaluation episodes first above 200), or "not within E" (E: the run's
--max_episodes) when it never was; a seed still running is left out. Per column the median over seeds, an unsolved
seed counting as never (so the median reads "> E" when half or more never were), with a 95 % percentile bootstrap
interval of the median over seeds (resampled values taken as they are, no interpolation).

    python experiments/tutorial_table.py --interim [RESULTS_DIR]

A second table for DASE_TD3 seeds that have not finished: per seed each agent's training episodes so far and the
mean of its last 100 evaluation episodes, beside finished TD3's mean of its last 100 at the same episode (the
tutorial's unit), and per seed the agents' mean minus TD3's; over seeds the mean difference with a 95 % percentile
bootstrap interval and an exact two-sided sign-flip test (the seed is the unit: every +/- labelling of the per-seed
differences).
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from utils.plot.stats import bootstrap_ci  # noqa: E402

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


WINDOW = 100


def last_window(rows: np.ndarray, episodes: int) -> float:
    """The mean of the evaluation returns of training episodes episodes-WINDOW+1 .. episodes (rows: episode, step,
    return, as {curve}_episode_eval.npy)."""
    upto = rows[rows[:, 0] <= episodes]
    return float(upto[-WINDOW:, 2].mean())


def sign_flip_p(d: np.ndarray) -> float:
    """Exact two-sided p of a mean paired difference: the share of the 2^n +/- labellings of d whose mean is at
    least as far from 0 as the observed one (the observed labelling among them, so p >= 2 / 2^n)."""
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))


def interim(folder: Path = FOLDER) -> list[str]:
    """DASE_TD3 seeds still running (no 'finished'), each agent beside finished TD3 of the same seed at the agent's
    episode count; [] when there are none."""
    def rows(stem: str) -> np.ndarray | None:
        path = folder / f"{stem}_episode_eval.npy"
        return np.load(path) if path.exists() else None

    finished_td3 = outcomes(folder, "TD3")
    lines, diffs = [], []
    for path in sorted(folder.glob(f"DASE_TD3_{ENV}_*.json")):
        seed = path.stem[len(f"DASE_TD3_{ENV}_"):]
        if not seed.isdigit() or "finished" in json.loads(path.read_text()) or int(seed) not in finished_td3:
            continue
        td3 = rows(f"TD3_{ENV}_{seed}")
        agents = [rows(f"DASE_TD3_{ENV}_{seed}_Agent_{i}") for i in range(2)]
        if td3 is None or any(a is None or len(a) < WINDOW for a in agents):
            continue
        cells, d = [], []
        for a in agents:
            n = int(a[-1, 0])
            ours, theirs = last_window(a, n), last_window(td3, n)
            cells.append(f"{n} (step {int(a[-1, 1]):,}) | {ours:.1f} | {theirs:.1f}")
            d.append(ours - theirs)
        diffs.append(float(np.mean(d)))
        lines.append(f"| {seed} | " + " | ".join(cells) + f" | {diffs[-1]:+.1f} |")
    if not lines:
        return []
    x = np.array(diffs)
    lo, hi = bootstrap_ci(x, np.mean)
    head = ["| seed | agent 0: episodes so far | its last 100 | TD3's last 100 at that episode | agent 1: episodes so far"
            " | its last 100 | TD3's last 100 at that episode | agents − TD3 |", "|---" * 8 + "|"]
    return head + lines + [f"| mean over {len(x)} seeds [95 % CI], sign-flip p | | | | | | | {x.mean():+.1f} "
                           f"[{lo:+.1f}, {hi:+.1f}], p {sign_flip_p(x):.2f} |"]


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--interim"]
    folder = Path(args[0]).resolve() if args else FOLDER
    print("\n".join(interim(folder) if "--interim" in argv else table(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
