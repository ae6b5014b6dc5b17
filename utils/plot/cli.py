"""Plot saved learning curves like the paper's figures, and summarise them in a table.

    python -m utils.plot DIR [DIR ...] --out OUTDIR [--reference DIR] [--at STEP ...] [--weights]
                         [--ci] [--smooth W] [--per_agent] [--pdf]
    python -m utils.plot DIR [DIR ...] --training [--training_window 100] [--solved_at R] [--ci] --out OUTDIR

Every ``.npy`` file under the given folders whose name follows the curve naming
({ALG}_{env}_{seed}.npy, DASE_{ALG}_{env}_{seed}_Agent_{i}.npy, DPD_{ALG}_{env}_{seed}.npy) is
read, except in folders below them that hold a ``.reference`` file (reference curves such as the paper's,
"Learning Curves/paper": left out with a note, read when named as DIR or --reference); curves are grouped by
environment and method (baseline, DASE, DPD). DASE agents are pooled across seeds unless ``--per_agent``. Writes one figure per environment, a grid of all of them,
and summary.csv / summary.md.

Sharing weights (``--weights``): DASE runs also save, per agent, ``{curve}_weights.npy`` beside
the curve (same length and timing: entry k is the mean weight the agent gave to other agents'
samples in the updates of the evaluation period ending at step k * eval_freq; NaN where no update
happened). These files are recognised by name and never read as curves. With ``--weights`` every
figure gets a second, smaller axis under the returns (same time axis, same colours): per group the
mean over runs of the weight, ignoring NaN (steps where every run is NaN are not drawn; the weights
are not smoothed; the axis is logarithmic when the weights span more than 2 decades or lie mostly
below 0.05, linear from 0 to 1 otherwise, and ``--weights_log`` makes it logarithmic always). Groups
without weight files (baselines, DPD, reference trees) have no line there; a weight file that is
unreadable, not 1-D, not as long as its curve, or holds values
outside [0, 1] other than NaN is skipped with a warning.

Comparison with a reference (``--reference DIR``, steps from ``--at``): for every environment
(matched across versions, Hopper-v2 <-> Hopper-v5) and method (TD3, DASE_TD3, DPD_TD3, ...) found
both in ours and in the reference, and every ``--at`` step (default: the last step both have), one
row: our mean, its 95 % percentile bootstrap CI over runs (2000 resamples, seed 0) and number of
runs; the same for the reference; and a verdict: "above" if our mean lies above the reference's
CI, "below" if under it, else "inside" ("n/a" when one side does not reach the step). Runs are
curve files, pooled per method whatever ``--per_agent`` says: one per seed for baselines and the
paper's DPD, one per seed and agent for DASE and our DPD. Written as comparison.csv and
comparison.md (also printed).
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

from ..cli import Parser, tool_guard
from ..io import bad_name, file_in_the_way, unwritable, written_together
from .curves import (
    REFERENCE_MARKER,
    Curve,
    Group,
    PlotError,
    attach_consensus,
    attach_weights,
    curves_or_error,
    cut_curves,
    env_key,
    find_consensus,
    find_curves,
    find_weights,
    group_curves,
    recorded_eval_freq,
    reference_folders,
)
from .figures import plot
from .tables import compare, summarise, write_comparison, write_tables
from .training import training

PROG = "python -m utils.plot"


def parse(argv=None) -> argparse.Namespace:
    summary, _, rest = __doc__.partition("\n\n")
    rest = rest.partition("\n\n")[2]  # argparse prints its own usage line
    p = Parser(prog=PROG, description=summary, epilog=rest.strip(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=str, help="folders (searched recursively) or .npy files")
    p.add_argument("--out", type=str, default="Figures", help="output folder (default: Figures)")
    p.add_argument("--reference", type=str, action="append", default=[],
                   help="another tree to overlay in dashed lines, e.g. the paper's curves (repeatable); "
                        "environments match across versions (Hopper-v2 <-> Hopper-v5); also writes "
                        "comparison.csv / comparison.md: per environment, method and --at step, our mean and "
                        "the reference's, each with a 95%% bootstrap CI over runs, and whether ours is above, "
                        "inside or below the reference's CI")
    p.add_argument("--per_agent", action="store_true", help="one line per DASE agent instead of pooling agents "
                   "(figures and summary; the comparison always pools a method's runs)")
    p.add_argument("--ci", action="store_true", help="shade a 95%% bootstrap CI of the mean instead of ± std")
    p.add_argument("--smooth", type=int, default=1, help="trailing moving-average window in evaluations (default: 1)")
    p.add_argument("--at", type=int, nargs="*", default=[],
                   help="also tabulate the return at these time steps (summary, and the comparison's steps; "
                        "the comparison's default is the last step both sides have)")
    p.add_argument("--weights", action="store_true",
                   help="plot the DASE weight of shared samples ({curve}_weights.npy files) on an axis under "
                        "the returns: per group the mean over runs, NaN ignored")
    p.add_argument("--consensus", action="store_true",
                   help="plot the agents' parameter disagreement of diffusing runs ({stem}_consensus.npy: Diff-DAC's "
                        "mean |std / mean| across agents) on a log axis under the returns")
    p.add_argument("--weights_log", action="store_true",
                   help="with --weights: always a log scale for the weight axis (without it the axis is logarithmic "
                        "when the weights span more than 2 decades or lie mostly below 0.05, else linear)")
    p.add_argument("--eval_freq", type=int, default=None,
                   help="time steps between evaluations (default: what our runs' JSON records say, else 1000)")
    p.add_argument("--max_steps", type=int, default=None,
                   help="use only the evaluations up to this step, ours and the reference's (figures and tables), "
                        "e.g. to compare 100k-step runs with the paper's 1M-step curves")
    p.add_argument("--training", action="store_true",
                   help="instead of the evaluation curves: the training episodes of ac_main.py runs "
                        "({curve}_episodes.csv), their running mean against the environment steps of all agents "
                        "together (Diff-DAC's metric; see utils/plot/training.py): training_{env}.png, training.md")
    p.add_argument("--training_window", type=int, default=100,
                   help="--training: episodes in the running mean (default: 100)")
    p.add_argument("--solved_at", type=float, default=None, metavar="R",
                   help="--training: also tell per seed the first episode and step at which the mean of the last "
                        "--training_window returns reached R (e.g. 18 on Pong), or its best and last such mean")
    p.add_argument("--pdf", action="store_true", help="write PDF instead of PNG")
    args = p.parse_args(argv)
    if args.solved_at is not None and not args.training:
        p.error("--solved_at: only with --training (it reads the training episode logs)")
    if args.solved_at is not None and not math.isfinite(args.solved_at):
        p.error(f"--solved_at {args.solved_at}: a finite return")
    if args.training_window < 1:
        p.error(f"--training_window {args.training_window}: a number of episodes, at least 1")
    if args.smooth < 1 or (args.eval_freq is not None and args.eval_freq < 1) or any(s < 0 for s in args.at) or (args.max_steps or 0) < 0:
        p.error("--smooth and --eval_freq must be positive, --at and --max_steps steps non-negative")
    return args


def load(args: argparse.Namespace) -> tuple[list[Curve], list[Curve], bool]:
    """Our curves (with their weight files under --weights, their consensus files under --consensus) and the
    reference's, cut to --max_steps; whether a weight axis is drawn (``args.consensus`` is turned off when no
    consensus file is usable). Settles args.eval_freq. Raises PlotError."""
    own = curves_or_error(args.dirs)
    named = [Path(r).resolve() for r in args.reference]
    for folder in reference_folders(args.dirs):
        if not any(r == folder.resolve() or folder.resolve() in r.parents for r in named):
            print(f"note: not reading {folder} (reference curves: its {REFERENCE_MARKER} file says so); name it to "
                  f"read it, e.g. --reference \"{folder}\"", file=sys.stderr)
    show_weights = False
    if args.weights:
        show_weights = attach_weights(own, find_weights(args.dirs)) > 0
        if not show_weights:
            print(f"note: --weights: no usable weight files ({{curve}}_weights.npy) under {' '.join(args.dirs)}; "
                  f"plotting without the weight axis", file=sys.stderr)
    if args.consensus and attach_consensus(own, find_consensus(args.dirs)) == 0:
        print(f"note: --consensus: no usable consensus files ({{stem}}_consensus.npy, written by DIFF_ runs) under "
              f"{' '.join(args.dirs)}; plotting without the consensus axis", file=sys.stderr)
        args.consensus = False
    ref = find_curves(args.reference, skip_marked=False) if args.reference else []
    args.eval_freq = args.eval_freq or recorded_eval_freq(own) or 1000
    if args.max_steps is not None:  # before any grouping: every table and figure sees the cut curves
        cut_curves(own + ref, args.max_steps // args.eval_freq + 1)
    return own, ref, show_weights


def by_environment(own: list[Group], ref: list[Group]) -> dict[str, list[Group]]:
    """Our groups per environment, sorted, each with the reference groups of the same environment (any version);
    notes on stderr for reference environments we do not have and for runs of different lengths."""
    by_env: dict[str, list[Group]] = defaultdict(list)
    for g in own:
        by_env[g.env].append(g)
    keys = {env_key(env): env for env in by_env}
    for g in ref:
        if env_key(g.env) in keys:
            by_env[keys[env_key(g.env)]].append(g)
        else:
            print(f"note: reference {g.env} {g.label} has no matching environment among the plotted curves",
                  file=sys.stderr)
    for groups in by_env.values():
        for g in groups:
            lo, hi = g.lengths()
            if lo != hi:
                print(f"note: {g.env} {g.label}{' (reference)' if g.reference else ''}: runs have {lo} to {hi} "
                      f"evaluations; using the common first {lo}", file=sys.stderr)
    return dict(sorted(by_env.items()))


def comparison(args: argparse.Namespace, own_curves: list[Curve], ref_curves: list[Curve], out: Path) -> list[Path]:
    """comparison.csv / .md against --reference (printed); methods pooled whatever --per_agent says, so that
    DPD per agent (ours) meets DPD per seed (the paper's)."""
    rows = compare(group_curves(own_curves), group_curves(ref_curves, reference=True), args.eval_freq, args.at)
    if not rows:
        print("note: no environment and method is both among ours and in the reference; the comparison is empty",
              file=sys.stderr)
    print()
    print(write_comparison(rows, out), end="")
    return [out / "comparison.csv", out / "comparison.md"]


def check_out(out: str) -> None:
    """--out is a folder (or can become one) that takes files; a PlotError otherwise, before anything is read."""
    if not out.strip():  # Path("") is the current folder
        raise PlotError(f"--out {out!r}: an empty path names no folder; give a folder's name")
    refused = bad_name(out)
    if refused:
        raise PlotError(f"--out: {refused}; pick a shorter path")
    blocked = file_in_the_way(out)
    if blocked is not None:
        raise PlotError(f"--out {out}: {blocked} is a file, not a folder; pick another path")
    reason = unwritable(out)
    if reason:
        raise PlotError(f"--out {out}: cannot write there ({reason}); pick another path")


def files_in(out: Path) -> set[Path]:
    """The files under ``out`` now (relative to it): those a plot of the same names replaces."""
    return {p.relative_to(out) for p in out.rglob("*") if p.is_file()} if out.is_dir() else set()


def replaced_words(names: list[Path], earlier: set[Path]) -> str:
    """What the plot replaced, said where it says what it wrote: a summary and figures are made again from the
    curves by the same command, so they are replaced (docs/usage.md, "Replacing outputs")."""
    replaced = [n for n in names if n in earlier]
    if not replaced:
        return ""
    which = "all of them" if len(replaced) == len(names) else ", ".join(str(n) for n in replaced)
    return f"; replaced {which} (written before, made again from the curves)"


def main(argv=None) -> int:
    """The command line; a full disk is one line and exit code 4, and no file of the plot's is written or replaced."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    args = parse(argv)
    if args.training:
        try:
            check_out(args.out)
            earlier = files_in(Path(args.out))
            with written_together(args.out) as stage:  # every file, or none of them
                written = training(args.dirs, stage, args.training_window, args.ci, "pdf" if args.pdf else "png",
                                   args.solved_at)
        except PlotError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        names = [p.relative_to(stage) for p in written]
        print(f"wrote {', '.join(str(Path(args.out) / n) for n in names)}{replaced_words(names, earlier)}")
        return 0
    try:
        check_out(args.out)
        own_curves, ref_curves, show_weights = load(args)
        by_env = by_environment(group_curves(own_curves, args.per_agent),
                                group_curves(ref_curves, args.per_agent, reference=True))
    except PlotError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    earlier = files_in(out)
    with written_together(out) as stage:  # every file, or none of them (check_out made sure --out can take them)
        written = plot(by_env, stage, args.eval_freq, args.ci, args.smooth, "pdf" if args.pdf else "png",
                       weights=("log" if args.weights_log else True) if show_weights else False,
                       consensus=args.consensus)
        rows = [summarise(g, args.eval_freq, args.at) for groups in by_env.values() for g in groups]
        print(write_tables(rows, args.at, stage), end="")
        written += [stage / "summary.csv", stage / "summary.md"]
        if args.reference:
            written += comparison(args, own_curves, ref_curves, stage)
    names = [p.relative_to(stage) for p in written]
    print(f"wrote {', '.join(str(out / n) for n in names)}{replaced_words(names, earlier)}")
    return 0
