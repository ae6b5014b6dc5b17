"""docs/tutorial.md's table: training episodes until the TD3 tutorial's "solved", per seed, for TD3 and each DASE agent.

    python -m experiments.tutorial_table [RESULTS_DIR]

Reads the records (``{policy}_{env}_{seed}.json``) that ``experiments/td3_tutorial.yaml`` leaves under RESULTS_DIR
(default "Learning Curves/td3_tutorial/TD3/LunarLanderContinuous-v3"). A finished seed's agent counts the episode at
which it was solved (the mean of its last 100 evaluation episodes first above 200), or "not within E" (E: the run's
--max_episodes) when it never was; a seed still running is left out. Per column the median over seeds, an unsolved
seed counting as never (so the median reads "> E" when half or more never were), with a 95 % percentile bootstrap
interval of the median over seeds (resampled values taken as they are, no interpolation).

    python -m experiments.tutorial_table --interim [--at_step T] [RESULTS_DIR]

A second table for DASE_TD3 seeds that have not finished (with --at_step: every seed, its evaluation episodes cut
at agent step T): per agent its training episodes so far and the mean of its last 100 evaluation episodes, beside
finished TD3's mean of its last 100 at the same episode (the tutorial's unit) and at the same agent step (a DASE
agent reaches an episode later: it also learns from its peer's data); per seed the agents' mean minus TD3's, and
over seeds the mean difference with a 95 % percentile bootstrap interval and an exact two-sided sign-flip test
(the seed is the unit: every +/- labelling of the per-seed differences; with 5 seeds p cannot go below 0.0625).
Where TD3 was solved (and stopped) before the agent's episode or step there is no TD3 value to compare: that
seed is left out of that comparison.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from utils.compare.scores import run_finished
from utils.plot.stats import BOOTSTRAP, bootstrap_ci, median_ci, sign_flip_p  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent

FOLDER = ROOT / "Learning Curves" / "td3_tutorial" / "TD3" / "LunarLanderContinuous-v3"
ENV = "LunarLanderContinuous-v3"
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
        if not run_finished(path):
            continue  # still running (or stopped before its end): no verdict yet
        record = json.loads(path.read_text())
        limit = max(limit, int(record["config"].get("max_episodes") or 0))
        out[int(seed)] = [float("inf") if s is None else float(s["episode"]) for s in record.get("solved", [])]
    if out:
        out[-1] = [float(limit)]
    return out


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


def interim(folder: Path = FOLDER, at_step: int | None = None) -> list[str]:
    """DASE_TD3 seeds still running (no 'finished'; with ``at_step`` every seed, cut at that agent step), each agent
    beside finished TD3 of the same seed, at the agent's episode count and at its step; [] when there are none."""
    def rows(stem: str, cut: bool = False) -> np.ndarray | None:
        path = folder / f"{stem}_episode_eval.npy"
        if not path.exists():
            return None
        got = np.load(path)
        return got[got[:, 1] <= at_step] if cut and at_step is not None else got

    finished_td3 = outcomes(folder, "TD3")
    lines, left_out = [], []
    diffs: dict[str, dict[int, float]] = {"episode": {}, "step": {}}
    for path in sorted(folder.glob(f"DASE_TD3_{ENV}_*.json"), key=lambda p: (len(p.stem), p.stem)):
        seed = path.stem[len(f"DASE_TD3_{ENV}_"):]
        if not seed.isdigit() or int(seed) not in finished_td3 or (
                at_step is None and run_finished(path)):
            continue
        td3 = rows(f"TD3_{ENV}_{seed}")
        agents = [rows(f"DASE_TD3_{ENV}_{seed}_Agent_{i}", cut=True) for i in range(2)]
        if td3 is None or any(a is None or len(a) < WINDOW for a in agents):
            left_out.append(f"{seed} (under {WINDOW} evaluation episodes)")
            continue
        d: dict[str, list[float]] = {"episode": [], "step": []}
        for i, a in enumerate(agents):
            n, t = int(a[-1, 0]), int(a[-1, 1])
            ours = last_window(a, n)
            cells = []
            for unit, ok, upto in (("episode", td3[-1, 0] >= n, td3[:, 0] <= n), ("step", td3[-1, 1] >= t, td3[:, 1] <= t)):
                if not ok:  # TD3 stopped (solved) before: no TD3 return at that point
                    cells.append(f"— (TD3 solved at episode {int(td3[-1, 0])})")
                    continue
                theirs = float(td3[upto][-WINDOW:, 2].mean())
                cells.append(f"{theirs:.1f}")
                d[unit].append(ours - theirs)
            lines.append(f"| {seed} | {i} | {n} ({t:,}) | {ours:.1f} | " + " | ".join(cells) + " |")
        for unit in diffs:
            if len(d[unit]) == len(agents):
                diffs[unit][int(seed)] = float(np.mean(d[unit]))
    if not lines:
        return []
    head = ["| seed | agent | training episodes (agent steps) | its last 100 | TD3's last 100 at the same episode | "
            "TD3's last 100 at the same step |", "|---" * 6 + "|"]
    out = head + lines + [""]
    for unit, label in (("episode", "at the same episode"), ("step", "at the same step")):
        per_seed = diffs[unit]
        if not per_seed:
            continue
        x = np.array(list(per_seed.values()))
        lo, hi = bootstrap_ci(x, np.mean)
        out.append(f"- agents − TD3 {label}, per seed " + ", ".join(f"{k}: {v:+.1f}" for k, v in per_seed.items())
                   + f"; mean over {len(x)} seeds {x.mean():+.1f} [95 % CI {lo:+.1f}, {hi:+.1f}], above TD3 on "
                   f"{int(np.sum(x > 0))} of {len(x)}, sign-flip p {sign_flip_p(x):.2f}")
    if left_out:
        out.append("- left out: seed " + ", ".join(left_out))
    return out


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="docs/tutorial.md's tables from the td3_tutorial runs")
    parser.add_argument("results_dir", nargs="?", type=Path, default=FOLDER)
    parser.add_argument("--interim", action="store_true", help="DASE_TD3 seeds still running, beside TD3")
    parser.add_argument("--at_step", type=int, help="with --interim: every seed, cut at this agent step")
    args = parser.parse_args(argv)  # a bad value: one line of usage, exit 2
    folder = args.results_dir.resolve()
    print("\n".join(interim(folder, args.at_step) if args.interim or args.at_step else table(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
