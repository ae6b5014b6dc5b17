"""Diff-DAC's own measures beside utils.compare's scores (docs/actor_critic.md): the parameter disagreement and the
reference's training-episode metric, RandomExtremeAcrobot-v1 (experiments/diff_dac.yaml, diff_dac_15.yaml).

    python -m experiments.diff_dac_table          # after: python -m utils.sweep experiments/diff_dac.yaml --workers 2

The final returns on each agent's own task and over all 4 tasks, with their paired differences, are utils.compare's
(experiments/diff_dac_suite.yaml, diff_dac_tasks_suite.yaml). Here, per seed (the unit; its agents averaged within
it first): the final parameter disagreement (the consensus file's last value) and the reference's own metric, the mean
return of each agent's last 100 training episodes. Then the mean over the seeds whose runs finished (0-4 for every
setting, 0-14 for the ring of 4, the isolated learners and the centralised learner) with a 95 % percentile bootstrap
interval over seeds (2000 resamples, utils.plot.stats.bootstrap_ci); pairs over the seeds both settings have. Every
setting spends 1M environment steps in total.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from utils.compare.scores import run_finished
from utils.plot.stats import bootstrap_ci

ROOT = Path(__file__).resolve().parent.parent

CURVES = ROOT / "Learning Curves" / "diff_dac"
ENV = "RandomExtremeAcrobot-v1"
# setting -> (what it is, file stem before the seed, agents per seed)
SETTINGS = {
    "ring4": ("ring of 4, common init (the reference's default init)", "DIFF_A2C_ring", 4),
    "ring4_separate": ("ring of 4, separate init", "DIFF_A2C_ring_separateinit", 4),
    "ring4_sync5": ("ring of 4, lazy gossip `--sync_freq 5`", "DIFF_A2C_ring_sync5", 4),
    "ring25": ("ring of 25 (the reference's default size)", "DIFF_A2C_ring", 25),
    "isolated4": ("4 isolated learners (no links)", "DIFF_A2C_none", 4),
    "central4": ("one centralised learner of the 4 tasks", "A2C_tasks4", 1),
}
# seeds 0-4 for every setting (experiments/diff_dac.yaml); 0-14 for ring4, isolated4 and central4 (diff_dac_15.yaml)
SEEDS, LAST_EPISODES = range(15), 100
# paired by seed (a seed's 4 tasks are the same in every setting): the difference a - b per seed
PAIRS = (("ring4", "isolated4"), ("ring4", "central4"), ("ring4", "ring4_separate"), ("ring4_sync5", "ring4"))


def agent_stems(stem: str, seed: int, agents: int) -> list[str]:
    return [f"{stem}_{ENV}_{seed}"] if agents == 1 else [f"{stem}_{ENV}_{seed}_Agent_{i}" for i in range(agents)]


def training_mean(path: Path) -> float:
    """The mean return of the last LAST_EPISODES training episodes of one agent's log."""
    with path.open() as f:
        returns = [float(row["return"]) for row in csv.DictReader(f)]
    return float(np.mean(returns[-LAST_EPISODES:]))


def seed_values(folder: Path, stem: str, seed: int, agents: int) -> dict[str, float] | None:
    names = agent_stems(stem, seed, agents)
    if not run_finished(folder / f"{stem}_{ENV}_{seed}.json") or not all((folder / f"{n}.npy").is_file() for n in names):
        return None
    consensus = folder / f"{stem}_{ENV}_{seed}_consensus.npy"
    disagreement = float(np.load(consensus)[-1]) if consensus.is_file() else np.nan
    training = np.mean([training_mean(folder / f"{n}_episodes.csv") for n in names])
    return {"disagreement": disagreement, "training": float(training)}


def cell(values: list[float], digits: int = 1) -> str:
    v = np.asarray(values, dtype=float)
    if np.isnan(v).any():
        return "—"
    lo, hi = bootstrap_ci(v, np.mean)
    return f"{v.mean():.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main() -> int:
    lines = ["| setting | seeds | disagreement | last 100 training episodes |", "|---|---|---|---|"]
    found = {}
    for setting, (what, stem, agents) in SETTINGS.items():
        folder = CURVES / setting / "A2C" / ENV
        by_seed = {s: seed_values(folder, stem, s, agents) for s in SEEDS}
        if any(by_seed[s] is None for s in range(5)):
            print(f"{setting}: not finished in {folder}", file=sys.stderr)
            continue
        found[setting] = {s: r for s, r in by_seed.items() if r is not None}
        rows = list(found[setting].values())
        col = lambda key: [r[key] for r in rows]  # noqa: E731
        lines.append(f"| {what} | {len(rows)} | {cell(col('disagreement'), 4)} | {cell(col('training'))} |")
    lines += ["", "| paired by seed | seeds | last 100 training episodes |", "|---|---|---|"]
    for a, b in PAIRS:
        if a in found and b in found:
            both = sorted(set(found[a]) & set(found[b]))
            diff = lambda key: [found[a][s][key] - found[b][s][key] for s in both]  # noqa: E731
            lines.append(f"| {a} − {b} | {len(both)} | {cell(diff('training'))} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
