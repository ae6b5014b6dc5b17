"""A table of returns averaged over a window of evaluations, with bootstrap CIs, and the DASE sharing weight.

    python -m utils.plot.windows DIR|FILE [...] --at STEP [STEP ...] [--window 5] [--weights_after STEP]
                                 [--max_steps STEP] [--eval_freq N]

Per method (curves found and grouped as ``python -m utils.plot`` does; DASE agents pooled across seeds) one
row: the number of runs; for every ``--at`` step, per run the mean of the ``--window`` evaluations ending at that
step, then the mean over runs with its 95 % percentile bootstrap CI (2000 resamples, seed 0); and for methods with
weight files, per run the mean weight of shared samples over the evaluations after ``--weights_after`` (up to
``--max_steps``, NaN ignored), then the median over runs and its range. Printed as a Markdown table.
"""
from __future__ import annotations

import sys

import numpy as np

from ..cli import Parser
from .curves import (
    PlotError,
    attach_weights,
    curves_or_error,
    cut_curves,
    find_weights,
    group_curves,
    recorded_eval_freq,
)
from .stats import bootstrap_ci, nan_mean

PROG = "python -m utils.plot.windows"


def _steps(step: int) -> str:
    return f"{step // 1000}k" if step % 1000 == 0 else str(step)


def window_table(groups, eval_freq: int, at: list[int], window: int = 5, weights_after: int | None = None) -> list[str]:
    """The table's Markdown lines for ``groups`` (utils.plot Groups, one environment); a PlotError when a
    window does not fit in the runs."""
    head = ["method", "runs"] + [f"return, mean of the {window} evaluations ending at {_steps(s)} [95% CI]" for s in at]
    if weights_after is not None:
        head.append(f"sharing weight after {_steps(weights_after)}: median over runs [min, max]")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in groups:
        m = g.matrix()
        cells = [g.label, str(len(m))]
        for step in at:
            end = step // eval_freq  # the evaluation at ``step``
            if step % eval_freq or end >= m.shape[1] or end + 1 < window:
                raise PlotError(f"--at {step}: {g.label} has no {window} evaluations ending at that step "
                                f"(evaluations every {eval_freq} steps, {m.shape[1]} of them)")
            x = m[:, end + 1 - window: end + 1].mean(axis=1)
            lo, hi = bootstrap_ci(x, np.mean)
            cells.append(f"{x.mean():.1f} [{lo:.1f}, {hi:.1f}]")
        if weights_after is not None:
            w = g.weight_matrix()
            if w is None:
                cells.append("-")
            else:
                per_run = nan_mean(w[:, weights_after // eval_freq + 1:].T)  # each run's mean, NaN ignored
                cells.append(f"{np.median(per_run):.3g} [{per_run.min():.2g}, {per_run.max():.2g}]")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", help="folders (searched recursively) or .npy files")
    p.add_argument("--at", type=int, nargs="+", required=True, help="steps whose window of returns to tabulate")
    p.add_argument("--window", type=int, default=5, help="evaluations averaged per run, ending at the step (default: 5)")
    p.add_argument("--weights_after", type=int, default=None,
                   help="add the sharing weight over the evaluations after this step (DASE runs' weight files)")
    p.add_argument("--max_steps", type=int, default=None, help="use only the evaluations up to this step")
    p.add_argument("--eval_freq", type=int, default=None,
                   help="time steps between evaluations (default: what the runs' JSON records say, else 1000)")
    args = p.parse_args(argv)
    if args.window < 1 or any(s < 0 for s in args.at) or (args.eval_freq is not None and args.eval_freq < 1):
        p.error("--window and --eval_freq must be positive, --at steps non-negative")
    try:
        curves = curves_or_error(args.dirs)
        attach_weights(curves, find_weights(args.dirs))
        eval_freq = args.eval_freq or recorded_eval_freq(curves) or 1000
        if args.max_steps is not None:
            cut_curves(curves, args.max_steps // eval_freq + 1)
        groups = group_curves(curves)
        envs = sorted({g.env for g in groups})
        if len(envs) > 1:
            raise PlotError(f"curves of several environments ({', '.join(envs)}): give one environment's runs")
        print("\n".join(window_table(groups, eval_freq, args.at, args.window, args.weights_after)))
    except PlotError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
