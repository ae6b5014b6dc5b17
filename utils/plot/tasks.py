"""How agents with tasks of their own do on their own task and on the others' (runs with ``--eval_tasks all``).

    python -m utils.plot.tasks DIR [DIR ...] [--last 3] [--out FOLDER]

Every ``{curve}_tasks.npy`` under the folders ([evaluations x agents]: the agent's score on the task of every agent
of its seed) is one run of its method (the curve's name: method, algorithm, variant). Per run, the mean over the
last ``--last`` evaluations of its score on its own task, on the other agents' tasks (their mean) and on all of
them; per environment and method, the mean over runs with a 95 % percentile bootstrap CI (2000 resamples, seed 0).
Printed as a Markdown table; with ``--out`` also written to ``tasks.md`` there.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..cli import EXIT_DISK_FULL, Parser, tool_disk_full_message
from ..errors import DiskFull
from ..io import atomic_write, input_problem
from ..naming import TASKS_SUFFIX
from ..run.names import CURVE_NAME
from .cli import check_out
from .curves import PlotError
from .stats import bootstrap_ci
from .tables import markdown

PROG = "python -m utils.plot.tasks"


def find_task_scores(dirs: list[str]) -> dict[tuple[str, str], list[tuple[int, np.ndarray]]]:
    """(environment, method label) -> [(agent index, scores [evaluations, agents])] of every task-score file."""
    found = defaultdict(list)
    for d in dirs:
        problem = input_problem(d)
        if problem:
            raise PlotError(f"{str(d)[:60]}: {problem}")
        for path in sorted(Path(d).rglob(f"*{TASKS_SUFFIX}.npy")):
            m = CURVE_NAME.match(path.stem[:-len(TASKS_SUFFIX)])
            if m is None or m.group("agent") is None:
                continue
            scores = np.load(path, allow_pickle=False)
            if scores.ndim != 2 or scores.shape[0] == 0 or not np.isfinite(scores).all():
                print(f"warning: skipping {path}: not a finite [evaluations x agents] array", file=sys.stderr)
                continue
            label = "_".join(x for x in (m.group("method"), m.group("alg"), m.group("variant")) if x)
            found[(m.group("env"), label)].append((int(m.group("agent")), scores))
    return found


def per_run(agent: int, scores: np.ndarray, last: int) -> tuple[float, float, float]:
    """(own task, the other tasks' mean, all tasks' mean) over the last ``last`` evaluations."""
    window = scores[-last:]
    others = np.delete(window, agent, axis=1)
    return float(window[:, agent].mean()), float(others.mean()) if others.size else float("nan"), float(window.mean())


def table(found: dict, last: int) -> str:
    head = ["environment", "method", "runs", f"own task, last {last} evals [95% CI]", "other agents' tasks",
            "all tasks"]
    rows = []
    for (env, label), runs in sorted(found.items()):
        values = np.array([per_run(agent, scores, min(last, len(scores))) for agent, scores in runs])  # [runs, 3]
        cells = [env, label, str(len(values))]
        for k in range(3):
            x = values[:, k]
            lo, hi = bootstrap_ci(x, np.mean) if len(x) > 1 else (x[0], x[0])
            cells.append(f"{x.mean():.1f} [{lo:.1f}, {hi:.1f}]")
        rows.append(cells)
    return markdown(head, rows)


def main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", help="folders searched (recursively) for {curve}_tasks.npy files")
    p.add_argument("--last", type=int, default=3, help="evaluations averaged at the end of each run (default: 3)")
    p.add_argument("--out", type=str, default=None, help="also write tasks.md into this folder")
    args = p.parse_args(argv)
    try:
        if args.last < 1:
            raise PlotError(f"--last {args.last}: average at least 1 evaluation")
        if args.out is not None:
            check_out(args.out)
        found = find_task_scores(args.dirs)
        if not found:
            raise PlotError(f"no task-score files ({{curve}}{TASKS_SUFFIX}.npy, written by --eval_tasks all) under "
                            f"{' '.join(args.dirs)}")
    except PlotError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    text = table(found, args.last)
    print(text, end="")
    if args.out:
        try:  # whole or as it was, the folders made for it gone again on a failure
            atomic_write(Path(args.out) / "tasks.md", lambda f: f.write(text), mode="w")
        except DiskFull as e:
            print(tool_disk_full_message(PROG, e), file=sys.stderr)
            return EXIT_DISK_FULL
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
