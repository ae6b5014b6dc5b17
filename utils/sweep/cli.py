"""Run a grid of training runs described by a YAML experiment file.

    python -m utils.sweep experiments/smoke.yaml [--dry_run] [--workers K] [--ray [ADDRESS]]

Every (setting, environment, policy) of the file is ONE run: one process of DASE_main.py or
sac_main.py that trains all of the file's seeds (``--seeds``) and writes to
``{setting's results_dir}/{TD3|DDPG|SAC}/{env}/``, the layout of the paper's published data.
Runs always get ``--resume``: finished runs are skipped without starting a process, interrupted
ones continue from their checkpoints. Runs execute in a local process pool (default) or as Ray
tasks (``--ray``). Exit code: 0 all runs done or skipped, 1 some run failed, 2 a bad experiment
file or command line (one line on stderr, nothing started), 128 + signal when interrupted.
experiments/README.md describes the file format.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..cli import Parser, available_cores, count
from .cluster import run_ray
from .experiment import ExperimentError, load_experiment
from .local import LocalPool
from .results import Result, format_wall, plural, summary
from .runs import Run, check_flags, expand, run_progress, run_state

EXIT_FAILED, EXIT_USAGE = 1, 2
RAY_HINT = "pip install -r requirements-cluster.txt"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The sweep's own flags."""
    p = Parser(prog="python -m utils.sweep", description="Run the grid of an experiment file (experiments/*.yaml): "
                "one process per (setting, environment, policy) training all seeds, finished runs skipped, "
                "interrupted ones resumed.")
    p.add_argument("experiment", nargs="?", help="the experiment file (YAML)")
    p.add_argument("--dry_run", action="store_true", help="print each run's command and state; start nothing")
    p.add_argument("--until", type=count, default=None, metavar="STEP",
                   help="train every run only to this step, then pause it with its checkpoint (--stop_at): e.g. "
                        "every setting to 100k first, then all of them on to the end with a later sweep "
                        "(default: every run to its budget)")
    p.add_argument("--workers", type=int, default=None,
                   help="runs at once (default: cores // threads_per_run); with --ray, a cap on tasks in flight")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run as Ray tasks: a new local Ray instance, or join ADDRESS ('auto', HOST:PORT, "
                        "ray://HOST:PORT)")
    args = p.parse_args(argv)
    # "--ray exp.yaml" takes the file as the address: accept it when it is plainly a file name
    if args.experiment is None and args.ray and args.ray.endswith((".yaml", ".yml")):
        args.experiment, args.ray = args.ray, "local"
    if args.experiment is None:
        p.error("the experiment file is required")
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be a positive integer, got {args.workers}")
    if args.until is not None and args.until < 1:
        p.error(f"--until must be a positive step, got {args.until}")
    return args


def has_ray() -> bool:
    """Whether Ray can be imported (optional: only --ray needs it)."""
    try:
        importlib.import_module("ray")
    except ImportError:
        return False
    return True


def plan(args: argparse.Namespace, exp) -> tuple[list[Run], int | None, int | None]:
    """The runs (each checked by its script's own parser), the threads per run (None: all cores) and the local
    workers."""
    if args.ray:
        # Ray tasks reserve num_cpus each, so a run's threads must be a whole number known up front
        threads: int | None = exp.threads_per_run or 1
        workers = args.workers
    else:
        workers = args.workers or max(1, available_cores() // (exp.threads_per_run or 1))
        threads = exp.threads_per_run or (1 if workers > 1 else None)
    runs = expand(exp, threads)
    if args.until is not None:
        for run in runs:
            if args.until < run.steps and "--checkpoint_freq" in run.args and \
                    int(float(run.args[run.args.index("--checkpoint_freq") + 1])) == 0:
                raise ExperimentError(f"--until {args.until}: the runs of setting {run.setting!r} keep no checkpoint "
                                      "(checkpoint_freq 0), so they could not continue; drop --until or the flag")
        runs = [run.paused_at(args.until) for run in runs]
    check_flags(runs)
    return runs, threads, workers


def dry_run(runs: list[Run], states: list[str]) -> int:
    """Each run's state and command; starts nothing."""
    width = max(len(s) for s in states)
    for run, state in zip(runs, states):
        print(f"{state:<{width}}  {run.command_line()}")
        if state == "would resume" and (step := run_progress(run)) is not None:
            print(f"{'':<{width}}  (evaluated to step {step:,} of {run.steps:,}; the least advanced seed)")
    todo = sum(s != "finished" for s in states)
    print(f"{plural(len(runs))}: {todo} to run, {len(runs) - todo} finished")
    return 0


def reporter(total: int):
    """One line per run as it ends: [k/total] status (note): label in wall time."""
    counter = iter(range(1, total + 1))

    def report(result: Result) -> None:
        extra = f" ({result.note})" if result.note else ""
        print(f"[{next(counter)}/{total}] {result.status}{extra}: {result.run.label} in {format_wall(result.wall)}",
              flush=True)

    return report


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = parse_args(argv)
    name = args.experiment
    try:
        exp = load_experiment(name)
        runs, threads, workers = plan(args, exp)
    except ExperimentError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.ray and not args.dry_run and not has_ray():
        print(RAY_HINT, file=sys.stderr)
        return EXIT_USAGE
    for notice in exp.notices:
        print(notice, file=sys.stderr)
    states = [run_state(run) for run in runs]
    if args.dry_run:
        return dry_run(runs, states)
    todo = [run for run, state in zip(runs, states) if state != "finished"]
    backend = f"Ray ({args.ray})" if args.ray else f"{workers} worker(s)"
    per_run = f"{threads} thread(s)" if threads else "all cores"
    print(f"{name}: {plural(len(runs))}, {len(runs) - len(todo)} finished (skipped), {len(todo)} to run on {backend}, "
          f"{per_run} each", flush=True)
    code, _ = run_missing(runs, todo, args, threads, workers, exp.gpus_per_run)
    return code


def run_missing(runs: list[Run], todo: list[Run], args: argparse.Namespace, threads: int | None,
                workers: int | None, gpus_per_run: float) -> tuple[int, list]:
    """Run ``todo`` (``execute_runs``) and print the summary: (the exit code, the outcome of each run). The code is
    EXIT_USAGE when the Ray cluster cannot be reached, 128 + signal when a signal stopped the runs, EXIT_FAILED when
    a run failed, else 0."""
    try:
        results, stop_signal = execute_runs(runs, todo, args, threads, workers, gpus_per_run)
    except ConnectionError as e:
        print(f"cannot reach the Ray cluster at {args.ray}: {e}", file=sys.stderr)
        return EXIT_USAGE, []
    except KeyboardInterrupt:  # Ctrl-C before the runs' signal handling (Ray starting) or after it (Ray stopping)
        print("interrupted while Ray was starting or stopping, no run cut short; rerun the same command to continue",
              file=sys.stderr)
        return 130, []
    print(summary(results), flush=True)
    if stop_signal is not None:
        return 128 + stop_signal, results
    return (EXIT_FAILED if any(r.status == "failed" for r in results) else 0), results


def execute_runs(runs: list[Run], todo: list[Run], args: argparse.Namespace, threads: int | None, workers: int | None,
                 gpus_per_run: float) -> tuple[list[Result], int | None]:
    """Run ``todo`` (some of ``runs``) on Ray (``args.ray``) or the local pool, one line per run as it ends; every
    run's Result (the others 'skipped') and the signal that stopped the sweep, if one did. A Ray cluster out of
    reach raises ConnectionError."""
    stop_signal: int | None = None
    executed: list[Result] = []
    if todo and args.ray:
        executed, stop_signal = run_ray(todo, None if args.ray == "local" else args.ray, threads or 1,
                                        gpus_per_run, args.workers, reporter(len(todo)))
    elif todo:
        pool = LocalPool(workers)
        executed = pool.run_all(todo, reporter(len(todo)))
        stop_signal = pool.stop_signal
    by_run = {id(r.run): r for r in executed}
    return [by_run.get(id(run)) or Result(run, "skipped") for run in runs], stop_signal
