"""The docs' tables of returns at chosen steps that are not one suite's report: runs of several folders, settings that
share a file stem, a published run on another evaluation grid, a weight trace beside a curve.

    python -m experiments.step_tables side_by_side           # docs/side_by_side.md: ours beside the paper's own code
    python -m experiments.step_tables acer_mujoco [--write]  # docs/actor_critic.md: ACER, TD3, SAC on HalfCheetah
    python -m experiments.step_tables recurrent [--write] [--figure]  # docs/recurrent.md: recurrent against not
    python -m experiments.step_tables lunar_300k [--write]   # docs/experiments.md: what DASE_TD3 at 300k depends on

Runs are read by ``utils.compare.scores.seed_curves`` (a seed's agents averaged first) and a cell is the mean over
seeds of ``window_mean`` (the mean of the K evaluations ending at the step) with a 95 % percentile bootstrap interval
over seeds and the number of seeds that reached the step; differences carry a two-sided permutation test over seeds
(exact up to 20,000 relabellings, else 20,000 random ones) and, where the table pairs seeds, the exact sign-flip p.
This file only declares the tables and formats them. ``--write`` puts a table into its page between its markers.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from utils.compare.report import weight_text as weight
from utils.compare.scores import seed_curves, window_mean
from utils.plot.stats import bootstrap_ci, permutation_p, sign_flip_p
from utils.plot.tables import write_between_markers

ROOT = Path(__file__).resolve().parent.parent
CURVES = ROOT / "Learning Curves"
Runs = dict[int, np.ndarray]


def at(curves: Runs, step: int, eval_freq: int = 1000, k: int = 5) -> np.ndarray:
    """Per seed that reached ``step``: the mean of the ``k`` evaluations ending there."""
    values = (window_mean(c, step, eval_freq, k) for c in curves.values())
    return np.array([v for v in values if v is not None])


def cell(values, digits: int = 1, least: int = 1) -> str:
    """mean [95 % CI] (seeds); '—' under ``least`` seeds."""
    v = np.asarray(list(values.values()) if isinstance(values, dict) else values, dtype=float)
    if len(v) < least:
        return "—"
    lo, hi = bootstrap_ci(v, np.mean)
    return f"{v.mean():.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}] ({len(v)})"


def step_head(label: str, steps, extra: str = "") -> list[str]:
    return [f"| {label} | {extra}" + " | ".join(f"{s // 1000}k" for s in steps) + " |",
            "|" + "---|" * (len(steps) + 1 + bool(extra))]


# ---- docs/side_by_side.md: our TD3 and DASE_TD3 beside the DASE paper's own code, LunarLanderContinuous-v3 --------
# Per run (a seed; DASE_TD3: its 2 agents' mean) the mean of the 5 evaluations ending at each step; the differences of
# means with the permutation test. Data: "Learning Curves/side_by_side/" (its README) and our CPU seeds 0-2.

LUNAR = "LunarLanderContinuous-v3"
SIDE = CURVES / "side_by_side"
SIDE_OURS = [SIDE / "ours", CURVES / "CPU 100k" / "Unlimited_Buffer" / "TD3" / LUNAR]
SIDE_PAPER = [SIDE / "paper_code"]
SIDE_STEPS = (40_000, 50_000, 100_000)
# differences between the two codes, switched in ours one at a time: (label, policy stem of its files)
SWITCHES = [("--kl_precision float32 (the paper's float32 weighting)", "DASE_TD3_float32")]


def side_runs(folders: list[Path], policy: str) -> Runs:
    """Seed -> the run's curve from the first folder that has it."""
    out: Runs = {}
    for folder in folders:
        for seed, curve in seed_curves(folder, policy, env=LUNAR).items():
            out.setdefault(seed, curve)
    return out


def side_at(curves: Runs, step: int) -> dict[int, float]:
    return {s: v for s, c in curves.items() if (v := window_mean(c, step, 1000, 5)) is not None}


def side_diff(a: dict[int, float], b: dict[int, float]) -> str:
    if len(a) < 2 or len(b) < 2:
        return "—"
    x, y = np.asarray(list(a.values())), np.asarray(list(b.values()))
    return f"{x.mean() - y.mean():+.1f} (p {permutation_p(x, y):.2f})"


def side_by_side() -> list[str]:
    groups = {"paper's code DASE_TD3": side_runs(SIDE_PAPER, "DASE_TD3"), "paper's code TD3": side_runs(SIDE_PAPER, "TD3"),
              "our DASE_TD3": side_runs(SIDE_OURS, "DASE_TD3"), "our TD3": side_runs(SIDE_OURS, "TD3")}
    values = {name: {step: side_at(curves, step) for step in SIDE_STEPS} for name, curves in groups.items()}
    lines = step_head("mean of the 5 evaluations up to the step, 95 % CI (seeds)", SIDE_STEPS)
    for name in groups:
        lines.append(f"| {name} | " + " | ".join(cell(values[name][s], least=2) for s in SIDE_STEPS) + " |")
    for a, b in [("paper's code DASE_TD3", "our DASE_TD3"), ("paper's code DASE_TD3", "paper's code TD3"),
                 ("our DASE_TD3", "our TD3"), ("paper's code TD3", "our TD3")]:
        lines.append(f"| {a} − {b} | " + " | ".join(side_diff(values[a][s], values[b][s]) for s in SIDE_STEPS) + " |")
    seeds = {name: sorted(set().union(*(v.keys() for v in values[name].values()))) for name in groups}
    lines.append("")
    lines.append("Seeds: " + "; ".join(f"{name} {', '.join(map(str, s))}" for name, s in seeds.items()) + ".")
    return lines + switches(values["our DASE_TD3"])


def switches(ours: dict[int, dict[int, float]]) -> list[str]:
    """Our DASE_TD3 with one difference switched to the paper's code's way, against ours on the same seeds."""
    lines: list[str] = []
    for label, stem in SWITCHES:
        switched = {step: side_at(side_runs(SIDE_OURS, stem), step) for step in SIDE_STEPS}
        if not any(switched.values()):
            continue
        if not lines:
            lines += [""] + step_head("our DASE_TD3 with one switch, against ours on the same seeds", SIDE_STEPS)
        same = {step: {k: v for k, v in ours[step].items() if k in switched[step]} for step in SIDE_STEPS}
        lines.append(f"| {label} | " + " | ".join(cell(switched[s], least=2) for s in SIDE_STEPS) + " |")
        lines.append("| ours, same seeds | " + " | ".join(cell(same[s], least=2) for s in SIDE_STEPS) + " |")
        lines.append("| switched − ours | " + " | ".join(side_diff(switched[s], same[s]) for s in SIDE_STEPS) + " |")
    return lines


# ---- docs/actor_critic.md: continuous ACER beside TD3 and SAC on MuJoCo (issue 35, item 1) --------------------------
# Runs: "Learning Curves/acer_mujoco/{ACER,TD3,SAC}/{env}/" (experiments/acer_mujoco.yaml, mujoco_baselines.yaml: 10
# evaluation episodes every 10k steps). The mean of the 5 evaluations ending at each step (a 50k window); a run in
# progress counts up to its last evaluation and "reached" says how far each seed is. For scale, the DASE paper's own
# TD3 and SAC on HalfCheetah-v2 ("Learning Curves/paper/", an evaluation every 1000 steps) at the same 5 steps.

ACER_RUNS = CURVES / "acer_mujoco"
ACER_ENVS = ("HalfCheetah-v5",)
ACER_METHODS = ("ACER", "TD3", "SAC")
ACER_STEPS, ACER_FREQ = (100_000, 250_000, 500_000, 1_000_000), 10_000
PAPER = CURVES / "paper" / "Unlimited_Buffer"
PAPER_FREQ = 1000


def acer_runs(root: Path, method: str, env: str) -> Runs:
    """Seed -> curve of ``method`` on ``env`` (files {method}_{env}_{seed}.npy under root/method/env)."""
    return seed_curves(root / method / env, method)


def paper_at(method: str, env: str, step: int, root: Path = PAPER) -> np.ndarray:
    """Per seed of the paper's own ``method`` run on the -v2 task: the mean of its evaluations at the same 5 steps as
    ``at`` reads (step, step - 10k, ...)."""
    v2 = env.replace("-v5", "-v2")
    picks = [(step - j * ACER_FREQ) // PAPER_FREQ for j in range(5)]
    curves = seed_curves(root / method / v2, method)
    return np.array([c[picks].mean() for c in curves.values() if len(c) > picks[0]])


def reached(curves: Runs, eval_freq: int = ACER_FREQ) -> str:
    """How far the seeds' curves go: one step if they agree, else the lowest and the highest."""
    if not curves:
        return "not run"
    steps = sorted({(len(c) - 1) * eval_freq for c in curves.values()})
    span = f"{steps[0] // 1000}k" if len(steps) == 1 else f"{steps[0] // 1000}k-{steps[-1] // 1000}k"
    return f"{span}, seeds {','.join(map(str, sorted(curves)))}"


def acer_mujoco(root: Path = ACER_RUNS) -> str:
    lines = step_head("mean of the 5 evaluations up to the step, 95 % CI (seeds)", ACER_STEPS, "reached | ")
    for env in ACER_ENVS:
        curves = {m: acer_runs(root, m, env) for m in ACER_METHODS}
        for m in ACER_METHODS:
            lines.append(f"| {env} {m} | {reached(curves[m])} | "
                         + " | ".join(cell(at(curves[m], s, ACER_FREQ), 0) for s in ACER_STEPS) + " |")
        for other in ACER_METHODS[1:]:
            cells = []
            for s in ACER_STEPS:
                a, b = at(curves["ACER"], s, ACER_FREQ), at(curves[other], s, ACER_FREQ)
                cells.append(f"{a.mean() - b.mean():+.0f} (p {permutation_p(a, b):.2f})"
                             if len(a) >= 2 and len(b) >= 2 else "—")
            lines.append(f"| {env} ACER − {other} | | " + " | ".join(cells) + " |")
        for m in ACER_METHODS[1:]:
            lines.append(f"| the DASE paper's {m} ({env.replace('-v5', '-v2')}) | its code | "
                         + " | ".join(cell(paper_at(m, env, s), 0) for s in ACER_STEPS) + " |")
    return "\n".join(lines)


# ---- docs/recurrent.md: recurrent against feed-forward SAC on the velocity-masked tasks (issue 38) -----------------
# Per seed the mean of the last 3 evaluations up to a step (5 episodes each), and the first step at which a seed's
# last-3 mean reached the bar. Data: experiments/recurrent_pendulum.yaml and recurrent_cartpole.yaml, finished
# runs only. ``--figure`` draws each task's rows into Figures/{task}/settings.png (runs of several settings share a
# file stem, so utils.plot would pool them).

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


def recurrent_runs(task: Task, folder: str, stem: str, env: str | None = None) -> Runs:
    """Seed -> curve, for the runs whose record says finished."""
    return seed_curves(CURVES / task.data / folder / "SAC" / (env or task.env), stem, finished_only=True)


def first_at_bar(curve: np.ndarray, bar: float, k: int = 3) -> int | None:
    """The first step whose last-k mean is at least the bar (None: never)."""
    for i in range(k - 1, len(curve)):
        if curve[i - k + 1:i + 1].mean() >= bar:
            return i * 1000
    return None


def recurrent(task: Task) -> str:
    lines = step_head("mean of the last 3 evaluations, 95 % CI (seeds)", task.steps)
    lines = [lines[0][:-2] + f" | first step at >= {task.bar:g} (per seed) |", lines[1] + "---|"]
    for name, run in task.runs.items():
        runs = recurrent_runs(task, *run)
        if not runs:
            continue
        cells = [cell(at(runs, step, 1000, 3)) for step in task.steps]
        shown = ", ".join("never" if r is None else f"{r // 1000}k" for r in (first_at_bar(c, task.bar)
                                                                               for c in runs.values()))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)


def recurrent_figure(task: Task) -> Path | None:
    """Figures/{task.data}/settings.png: one line per row of the table (the last-3 mean over seeds, a 95 % bootstrap
    band over seeds), with the bar dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    drawn = 0
    for name, run in task.runs.items():
        runs = recurrent_runs(task, *run)
        if not runs:
            continue
        n = min(len(c) for c in runs.values())
        smooth = np.stack([[c[max(0, i - 2):i + 1].mean() for i in range(n)] for c in runs.values()])
        steps = np.arange(n) * 1000
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


# ---- docs/experiments.md: what DASE_TD3's result on LunarLander at 300k depends on (issue 33, item 3) -------------
# (The first table there, ours beside the paper's published runs, is the suite experiments/lunar_300k_suite.yaml.)
# DASE_TD3 beside its variants on the seeds they share (0-2): every weight 1, the matched reference variance, the same
# two agents without sharing, TD3; the mean weight of an external sample per 100k (the runs' {curve}_weights.npy);
# every variant on seeds 0-4 with a paired sign-flip test too; every variant on seeds 0, 3, 4, those all of them run to
# 300k (the verdict). Past 100k the no-sharing control comes from pairs of TD3 runs (agent 0: TD3 of seed s; agent 1:
# TD3 of seed s + 100 on seed s's evaluation episodes, experiments/lunar_300k_no_sharing.yaml), which equal the
# --topology none runs bit for bit: where both exist this checks it and stops if they differ.

OURS = CURVES / "LunarLander 300k" / "Unlimited_Buffer" / "TD3" / LUNAR
STEPS = (100_000, 200_000, 300_000)
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


def variant_folder(folder: str) -> Path:
    return OURS.parents[2] / folder / "TD3" / OURS.name


def no_sharing_runs(folder: Path, prefix: str) -> Runs:
    """Seed -> the no-sharing control's curve, the mean of its two agents: from the --topology none run in ``folder``
    or from the pair of TD3 runs, whichever is longer; where both exist they must agree over their common length."""
    env = OURS.name
    pairs = variant_folder(PAIRS)
    seeds = set(seed_curves(folder, prefix)) | {s - 100 for s in seed_curves(pairs, "TD3")}
    out = {}
    for seed in sorted(seeds):
        none = [folder / f"{prefix}_{env}_{seed}_Agent_{i}.npy" for i in (0, 1)]
        pair = [OURS / f"TD3_{env}_{seed}.npy", pairs / f"TD3_{env}_{seed + 100}.npy"]
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


def mean_weights(folder: Path, prefix: str, seeds: tuple[int, ...]) -> list[str]:
    """Per span: the mean over seeds (and their agents) of the external samples' mean weight in that span's
    evaluation periods (entry k of a trace: the updates of steps (1000 (k-1), 1000 k]), with the lowest and highest
    seed; '—' where no seed's trace covers the span."""
    cells = []
    for lo, hi in WEIGHT_SPANS:
        per_seed = []
        for seed in seeds:
            traces = [np.load(p) for p in sorted(folder.glob(f"{prefix}_{folder.name}_{seed}_Agent_[0-9]_weights.npy"))]
            if traces and all(len(t) > hi // 1000 for t in traces):
                per_seed.append(np.mean([np.nanmean(t[lo // 1000 + 1:hi // 1000 + 1]) for t in traces]))
        cells.append(f"{weight(np.mean(per_seed))} ({weight(min(per_seed))}-{weight(max(per_seed))})" if per_seed else "—")
    return cells


def variant_rows(variants, seeds: tuple[int, ...]) -> tuple[list[str], dict[str, Runs]]:
    """A table's head and one row per variant (its curves on ``seeds``), and those curves by label."""
    lines = step_head("on seeds " + ", ".join(map(str, seeds)) + ": mean of the 5 evaluations up to the step, "
                      "95 % CI (seeds)", STEPS)
    curves = {}
    for label, folder, prefix in variants:
        found = (no_sharing_runs if folder == "No_Sharing" else seed_curves)(variant_folder(folder), prefix)
        curves[label] = {s: c for s, c in found.items() if s in seeds}
        lines.append(f"| {label} | " + " | ".join(cell(at(curves[label], s)) for s in STEPS) + " |")
    return lines, curves


def paired_lines(rows, seeds: tuple[int, ...], pairs: list[tuple[str, str]]) -> list[str]:
    """The rows on ``seeds``, then per pair (a, b) the difference a - b of their means where every seed reached the
    step in both: the unpaired permutation p, the paired sign-flip p and how many seeds a is above b."""
    lines, curves = variant_rows(rows, seeds)
    for first, second in pairs:
        cells = []
        for s in STEPS:
            both = [k for k in seeds if all(k in curves[x] and len(curves[x][k]) > s // 1000 for x in (first, second))]
            a = np.array([window_mean(curves[first][k], s, 1000, 5) for k in both])
            b = np.array([window_mean(curves[second][k], s, 1000, 5) for k in both])
            cells.append(f"{a.mean() - b.mean():+.1f} (p {permutation_p(a, b):.2f}; paired p {sign_flip_p(a - b):.2f}; "
                         f"{int(np.sum(a > b))} of {len(both)} seeds above)" if len(both) == len(seeds) else "—")
        lines.append(f"| {first} − {second} | " + " | ".join(cells) + " |")
    return lines


def lunar_300k() -> str:
    lines, curves = variant_rows(VARIANTS, WHY_SEEDS)
    base = VARIANTS[0][0]
    for label, _, _ in VARIANTS[1:]:
        cells = []
        for s in STEPS:
            a, b = at(curves[label], s), at(curves[base], s)
            cells.append(f"{a.mean() - b.mean():+.1f} (p {permutation_p(a, b):.2f})" if len(a) and len(b) else "—")
        lines.append(f"| {label} − as published | " + " | ".join(cells) + " |")
    # every variant on the 5 seeds lunar_300k.yaml's DASE_TD3 and TD3 have (5 seeds: the sign-flip p >= 0.06)
    rows = (VARIANTS[1], VARIANTS[0], VARIANTS[2], VARIANTS[3], VARIANTS[4])
    plain, published, matched, none, td3 = (label for label, _, _ in rows)
    lines += [""] + paired_lines(rows, FIVE_SEEDS, [(plain, label) for label, _, _ in rows[1:]]
                                 + [(matched, published), (none, published), (published, td3)])
    # every variant on the seeds all of them run to 300k, each against DASE_TD3 as published (3 seeds: p >= 0.25)
    lines += [""] + paired_lines(VARIANTS, VERDICT_SEEDS, [(label, base) for label, _, _ in VARIANTS[1:]])
    lines += ["", "| mean weight of an external sample, over the seeds that reach the span (lowest-highest seed) | "
              + " | ".join(f"{lo // 1000}k-{hi // 1000}k" for lo, hi in WEIGHT_SPANS) + " |",
              "|" + "---|" * (len(WEIGHT_SPANS) + 1)]
    for label, folder, prefix in (VARIANTS[0], VARIANTS[2]):  # the variants whose weights vary
        lines.append(f"| {label}, seeds 0-4 | " + " | ".join(mean_weights(variant_folder(folder), prefix, FIVE_SEEDS))
                     + " |")
    return "\n".join(lines)


# ---- the command line ---------------------------------------------------------------------------------------------

TABLES = {"side_by_side": "docs/side_by_side.md", "acer_mujoco": "docs/actor_critic.md",
          "recurrent": "docs/recurrent.md", "lunar_300k": "docs/experiments.md"}


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m experiments.step_tables",
                                     description="the docs' tables of returns at chosen steps")
    parser.add_argument("table", choices=list(TABLES), help="which table (its page: " +
                        ", ".join(f"{k} {v}" for k, v in TABLES.items()) + ")")
    parser.add_argument("--write", action="store_true", help="put the table into its page between its markers")
    parser.add_argument("--figure", action="store_true", help="recurrent: draw Figures/{task}/settings.png too")
    args = parser.parse_args(argv)  # a bad value: one line of usage, exit 2
    page = ROOT / TABLES[args.table]
    if args.table == "side_by_side":
        text = "\n".join(side_by_side())
        print(text)
        if args.write:
            write_between_markers(page, "side_by_side_table", text)
    elif args.table == "recurrent":
        for task in TASKS:
            if args.figure:
                print(f"wrote {recurrent_figure(task)}")
            text = recurrent(task)
            print(f"{task.env}\n{text}\n")
            if args.write:
                write_between_markers(page, task.mark, text)
    else:
        text, mark = (acer_mujoco(), "acer_mujoco_table") if args.table == "acer_mujoco" else (lunar_300k(), WHY_MARK)
        print(text)
        if args.write:
            write_between_markers(page, mark, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
