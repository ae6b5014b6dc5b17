"""What DASE_TD3's result on LunarLander at 300k depends on (issue 33, item 3): docs/experiments.md's second table.

    python -m experiments.lunar_300k_table [--write]

(The first table, ours beside the paper's published runs, is a utils.compare suite since 2026-11-28:
experiments/lunar_300k_suite.yaml.)

The table (experiments/lunar_300k_why.yaml) sets DASE_TD3 beside its variants on the seeds
they share (0-2): every weight 1, the matched reference variance, and the same two agents without sharing; and the
mean weight of an external sample per 100k (the runs' {curve}_weights.npy); between them, every variant on seeds
0-4 (plain sharing's and no sharing's seeds 3-4 from experiments/lunar_300k_why_more.yaml) with a paired
sign-flip test too; and every variant on seeds 0, 3 and 4, the seeds all of them run to 300k (the verdict). Past
100k the no-sharing control comes from pairs of TD3 runs (agent 0: the TD3 run of seed s; agent 1: TD3 of seed s +
100 on seed s's evaluation episodes, experiments/lunar_300k_no_sharing.yaml), which equal the --topology none runs
bit for bit: where both exist the script checks it and stops if they differ. ``--write`` puts the table into
docs/experiments.md between its markers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from utils.plot.stats import bootstrap_ci, permutation_p, sign_flip_p
from utils.plot.tables import write_between_markers

ROOT = Path(__file__).resolve().parent.parent

OURS = ROOT / "Learning Curves" / "LunarLander 300k" / "Unlimited_Buffer" / "TD3" / "LunarLanderContinuous-v3"
STEPS, WINDOW, EVAL_FREQ = (100_000, 200_000, 300_000), 5, 1000
# item 3: (label, folder under "LunarLander 300k", file prefix); the variants run on seeds 0-2
VARIANTS = (("DASE_TD3, as published", "Unlimited_Buffer", "DASE_TD3"),
            ("every weight 1 (`--similarity none`)", "No_Correction", "DASE_TD3"),
            ("matched variance (`--kl_div_var matched`)", "Matched_Variance", "DASE_TD3_matched"),
            ("2 agents, no sharing (`--topology none`)", "No_Sharing", "DASE_TD3_none"),
            ("TD3 (one agent)", "Unlimited_Buffer", "TD3"))
WHY_SEEDS, WHY_MARK = (0, 1, 2), "lunar_300k_why"
FIVE_SEEDS = (0, 1, 2, 3, 4)  # seeds 3-4 of plain sharing and no sharing: experiments/lunar_300k_why_more.yaml
VERDICT_SEEDS = (0, 3, 4)  # every variant to 300k (experiments/lunar_300k_why.yaml, lunar_300k_no_sharing.yaml)
WEIGHT_SPANS = ((25_000, 100_000), (100_000, 200_000), (200_000, 300_000))
PAIRS = "No_Sharing_TD3_pairs"  # agent 1 of the no-sharing control as TD3 of seed s + 100


def no_sharing_runs(folder: Path, prefix: str) -> dict[int, np.ndarray]:
    """Seed -> the no-sharing control's curve, the mean of its two agents: from the --topology none run in
    ``folder`` or from the pair of TD3 runs, whichever is longer; where both exist they must agree over their common
    length (they are the same runs: tests/test_graph.py)."""
    env = OURS.name
    seeds = set(runs(folder, prefix)) | {int(p.stem.rsplit("_", 1)[1]) - 100
                                         for p in variant_folder(PAIRS).glob(f"TD3_{env}_*.npy")}
    out = {}
    for seed in sorted(seeds):
        none = [folder / f"{prefix}_{env}_{seed}_Agent_{i}.npy" for i in (0, 1)]
        pair = [OURS / f"TD3_{env}_{seed}.npy", variant_folder(PAIRS) / f"TD3_{env}_{seed + 100}.npy"]
        found = [[np.load(p) for p in paths] for paths in (none, pair) if all(p.exists() for p in paths)]
        if not found:
            continue
        if len(found) == 2:
            for a, b in zip(*found):  # agent by agent
                n = min(len(a), len(b))
                if not np.array_equal(a[:n], b[:n]):
                    raise SystemExit(f"seed {seed}: the TD3 pair differs from the --topology none run within its "
                                     f"first {n} evaluations; they should be the same runs")
        agents = max(found, key=lambda curves: min(len(c) for c in curves))
        n = min(len(c) for c in agents)
        out[seed] = np.mean([c[:n] for c in agents], axis=0)
    return out


def runs(folder: Path, policy: str) -> dict[int, np.ndarray]:
    """Seed -> the run's curve: the single file, or the mean of its agents' files (cut to their common length)."""
    env = folder.name
    out = {}
    for path in sorted(folder.glob(f"{policy}_{env}_*.npy")):
        rest = path.stem[len(f"{policy}_{env}_"):]
        seed = rest.split("_")[0]
        if not seed.isdigit() or int(seed) in out or rest not in (seed, f"{seed}_Agent_0"):
            continue
        agents = sorted(folder.glob(f"{policy}_{env}_{seed}_Agent_[0-9].npy"))
        curves = [np.load(p) for p in (agents or [path])]
        n = min(len(c) for c in curves)
        out[int(seed)] = np.mean([c[:n] for c in curves], axis=0)
    return out


def at(curves: dict[int, np.ndarray], step: int) -> np.ndarray:
    i = step // EVAL_FREQ
    return np.array([c[i - WINDOW + 1:i + 1].mean() for c in curves.values() if len(c) > i])


def cell(values: np.ndarray) -> str:
    if len(values) == 0:
        return "—"
    lo, hi = bootstrap_ci(values, np.mean)
    return f"{values.mean():.1f} [{lo:.1f}, {hi:.1f}] ({len(values)})"


def variant_folder(folder: str) -> Path:
    return OURS.parents[2] / folder / "TD3" / OURS.name


def mean_weights(folder: Path, prefix: str, seeds: tuple[int, ...]) -> list[str]:
    """Per span: the mean over seeds (and their agents) of the external samples' mean weight in that span's
    evaluation periods, with the lowest and highest seed; '—' where no seed's trace covers the span."""
    cells = []
    for lo, hi in WEIGHT_SPANS:
        per_seed = []
        for seed in seeds:
            traces = [np.load(p) for p in sorted(folder.glob(f"{prefix}_{OURS.name}_{seed}_Agent_[0-9]_weights.npy"))]
            if traces and all(len(t) > hi // EVAL_FREQ for t in traces):
                per_seed.append(np.mean([np.nanmean(t[lo // EVAL_FREQ + 1:hi // EVAL_FREQ + 1]) for t in traces]))
        cells.append(f"{weight(np.mean(per_seed))} ({weight(min(per_seed))}-{weight(max(per_seed))})" if per_seed else "—")
    return cells


def weight(w: float) -> str:
    """0.025 as 0.025; a weight below 0.001 (matched variance's ~1e-10) in two significant digits, not as 0.000."""
    return f"{w:.3f}" if w >= 1e-3 else f"{w:.1e}"


def variant_rows(variants, seeds: tuple[int, ...]) -> tuple[list[str], dict[str, dict[int, np.ndarray]]]:
    """A table's head and one row per variant (its curves on ``seeds``), and those curves by label."""
    head = "| on seeds " + ", ".join(map(str, seeds)) + ": mean of the 5 evaluations up to the step, 95 % CI (seeds) | "
    lines = [head + " | ".join(f"{s // 1000}k" for s in STEPS) + " |", "|" + "---|" * (len(STEPS) + 1)]
    curves = {}
    for label, folder, prefix in variants:
        found = (no_sharing_runs if folder == "No_Sharing" else runs)(variant_folder(folder), prefix)
        curves[label] = {s: c for s, c in found.items() if s in seeds}
        lines.append(f"| {label} | " + " | ".join(cell(at(curves[label], s)) for s in STEPS) + " |")
    return lines, curves


def why_table() -> str:
    lines, curves = variant_rows(VARIANTS, WHY_SEEDS)
    base = VARIANTS[0][0]
    for label, _, _ in VARIANTS[1:]:
        cells = []
        for s in STEPS:
            a, b = at(curves[label], s), at(curves[base], s)
            cells.append(f"{a.mean() - b.mean():+.1f} (p {permutation_p(a, b):.2f})" if len(a) and len(b) else "—")
        lines.append(f"| {label} − as published | " + " | ".join(cells) + " |")
    lines += [""] + five_seed_lines() + [""] + verdict_seed_lines()
    lines += ["", "| mean weight of an external sample, over the seeds that reach the span (lowest-highest seed) | "
              + " | ".join(f"{lo // 1000}k-{hi // 1000}k" for lo, hi in WEIGHT_SPANS) + " |",
              "|" + "---|" * (len(WEIGHT_SPANS) + 1)]
    for label, folder, prefix in (VARIANTS[0], VARIANTS[2]):  # the variants whose weights vary
        cells = mean_weights(variant_folder(folder), prefix, FIVE_SEEDS)
        lines.append(f"| {label}, seeds 0-4 | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def five_seed_lines() -> list[str]:
    """Every variant on the 5 seeds that lunar_300k.yaml's DASE_TD3 and TD3 have (lunar_300k_why_more.yaml adds
    plain sharing's and no sharing's seeds 3-4, lunar_300k_why.yaml matched variance's): the five rows, plain
    sharing against each other, matched variance and no sharing against DASE_TD3 and DASE_TD3 against TD3
    (unpaired permutation test as above, and the paired per-seed differences' exact sign-flip p: the seed is the
    unit; 5 seeds: p >= 0.06)."""
    rows = (VARIANTS[1], VARIANTS[0], VARIANTS[2], VARIANTS[3], VARIANTS[4])
    plain, published, matched, none, td3 = (label for label, _, _ in rows)
    return paired_lines(rows, FIVE_SEEDS, [(plain, label) for label, _, _ in rows[1:]]
                        + [(matched, published), (none, published), (published, td3)])


def verdict_seed_lines() -> list[str]:
    """Every variant on the seeds that all of them run to 300k (lunar_300k_why.yaml: 0, 3, 4), each against DASE_TD3
    as published, unpaired and paired (3 seeds: the sign-flip p is at least 0.25); a cell waits for all 3 seeds."""
    base = VARIANTS[0][0]
    return paired_lines(VARIANTS, VERDICT_SEEDS, [(label, base) for label, _, _ in VARIANTS[1:]])


def paired_lines(rows, seeds: tuple[int, ...], pairs: list[tuple[str, str]]) -> list[str]:
    """The rows on ``seeds``, then per pair (a, b) the difference a - b of their means where every seed reached the
    step in both: the unpaired permutation p, the paired sign-flip p and how many seeds a is above b."""
    lines, curves = variant_rows(rows, seeds)
    for first, second in pairs:
        cells = []
        for s in STEPS:
            i = s // EVAL_FREQ
            both = [k for k in seeds if all(k in curves[x] and len(curves[x][k]) > i for x in (first, second))]
            a = np.array([curves[first][k][i - WINDOW + 1:i + 1].mean() for k in both])
            b = np.array([curves[second][k][i - WINDOW + 1:i + 1].mean() for k in both])
            cells.append(f"{a.mean() - b.mean():+.1f} (p {permutation_p(a, b):.2f}; paired p {sign_flip_p(a - b):.2f}; "
                         f"{int(np.sum(a > b))} of {len(both)} seeds above)" if len(both) == len(seeds) else "—")
        lines.append(f"| {first} − {second} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str]) -> int:
    why = why_table()
    print(why)
    if "--write" in argv:
        write_between_markers(ROOT / "docs" / "experiments.md", WHY_MARK, why)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
