"""Compare methods on a suite of tasks: run what is missing, then write one report.

    python -m utils.compare SUITE.yaml [--dry_run] [--so_far] [--plan] [--agents] [--out DIR] [--results DIR]
                                       [--seeds SEEDS] [--write_docs] [--workers K] [--ray [ADDRESS]]

A suite (YAML; docs/compare.md) names tasks with a pair of reference scores each, methods (an entry script's policy
and flags), seeds, a budget and its rule, and the evaluation protocol. Every (task, method) is one run of the sweep
tool (``utils.sweep``: all seeds in one process, finished runs skipped, interrupted ones resumed, a local pool or
Ray). Then ``report.md``, ``report.json`` and the figures go to ``Figures/compare/<suite name>/`` (``--out``):
curves per task, rliable's IQM, mean, median, optimality gap, probability of improvement over the baseline,
performance profiles and IQM against steps, and paired differences by seed.

Exit code: 0 the report is written (or --dry_run), 1 a run failed or its curves cannot be read (no report), 2 a bad
suite or command line (one line on stderr, nothing run or written), 4 a full disk as the report was written (one
line; no file of it written or replaced), 128 + signal when interrupted.
"""
from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ..cli import EXIT_DISK_FULL, Parser, tool_disk_full_message
from ..errors import DiskFull
from ..io import folder_problem
from ..sweep.cli import RAY_HINT, dry_run, has_ray, run_missing
from ..sweep.experiment import ROOT, ExperimentError, parse_seeds, seed_tokens
from ..sweep.results import display_path
from ..sweep.runs import run_state
from .plan import plan_suite
from .suite import SuiteError, load_suite

PROG = "python -m utils.compare"
EXIT_FAILED, EXIT_USAGE = 1, 2


def parse_args(argv: Sequence[str] | None):
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0] + " See docs/compare.md.")
    p.add_argument("suite", help="the suite file (YAML)")
    p.add_argument("--dry_run", action="store_true", help="list each run's state and command; run and write nothing")
    p.add_argument("--plan", action="store_true",
                   help="run nothing: per claim, the power of the seeds run so far and the seeds 80 %% power needs "
                        "(from the curves as far as they go)")
    p.add_argument("--agents", action="store_true",
                   help="run nothing: for each method of several agents, each agent's final score per seed and how "
                        "far a run's agents share their fate (intraclass correlation and its permutation p)")
    p.add_argument("--so_far", action="store_true",
                   help="run nothing: report on the runs as far as they have gone (each task read up to the furthest "
                        "step every seed of every method on it has reached; the report says so)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="the report's folder (default: Figures/compare/<suite name> in the repository; with --seeds "
                        "or --so_far, <suite name>_seeds_<seeds> or <suite name>_so_far)")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="the runs' folder, in place of the suite's results_dir (methods with their own keep it)")
    p.add_argument("--seeds", default=None, metavar="SEEDS",
                   help="only these of every method's seeds (e.g. '0-4': a report on the seeds finished so far)")
    p.add_argument("--write_docs", action="store_true",
                   help="also put the report's table at each step into the docs page the suite names (its docs key)")
    p.add_argument("--workers", type=int, default=None,
                   help="runs at once (default: cores // threads_per_run); with --ray, a cap on tasks in flight")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run as Ray tasks: a new local Ray instance, or join ADDRESS ('auto', HOST:PORT)")
    args = p.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be a positive integer, got {args.workers}")
    return args


def default_folder(name: str, seeds: list[int] | None, so_far: bool) -> str:
    """The report's folder under Figures/compare without --out: the suite's name, and for a report on some seeds
    or on runs under way a name of its own ("lunar_300k_seeds_0-4", "paper_sac_lunar_so_far"), so that it never
    replaces the suite's report at its budget."""
    return name + (f"_seeds_{'_'.join(seed_tokens(seeds))}" if seeds is not None else "") + \
        ("_so_far" if so_far else "")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        results = str(Path(args.results).resolve()) if args.results else None
        only = parse_seeds(args.seeds) if args.seeds is not None else None
        suite = load_suite(args.suite, results, only)
        docs = docs_page(suite) if args.write_docs else None
        entries, threads, workers = plan_suite(suite, args.ray, args.workers)
        out = Path(args.out).resolve() if args.out else ROOT / "Figures" / "compare" / default_folder(suite.name, only,
                                                                                               args.so_far)
        # a file in the way, a read-only disk, no permission (--plan and --agents write nothing: no folder to check)
        if not (args.plan or args.agents) and (problem := folder_problem(out)) is not None:
            raise SuiteError(f"--out {args.out or out}: {problem}")
    except ExperimentError as e:  # SuiteError included
        print(f"{args.suite}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.so_far and args.dry_run:
        print(f"{PROG}: --so_far and --dry_run: --so_far already runs nothing", file=sys.stderr)
        return EXIT_USAGE
    if args.plan and args.agents:
        print(f"{PROG}: --plan and --agents: one at a time", file=sys.stderr)
        return EXIT_USAGE
    read_only = "--plan" if args.plan else "--agents" if args.agents else None
    if read_only and (args.dry_run or args.so_far or args.write_docs or args.ray or args.out):
        print(f"{PROG}: {read_only} runs and writes nothing: leave out --dry_run, --so_far, --write_docs, --ray and "
              "--out", file=sys.stderr)
        return EXIT_USAGE
    if args.ray and not args.dry_run and not args.so_far and not has_ray():
        print(RAY_HINT, file=sys.stderr)
        return EXIT_USAGE
    for notice in suite.notices:
        print(notice, file=sys.stderr)
    runs = [run for e in entries for run in e.commands]
    states = [run_state(run) for run in runs]
    if read_only:
        from .planner import finished_seeds, plan_text

        finished, where = all(state == "finished" for state in states), None
        if not finished and only is None and len(done := finished_seeds(entries)) >= 2:
            # runs still going, some seeds finished by every method (one seed per process): read those
            suite = load_suite(args.suite, results, done)
            entries, _, _ = plan_suite(suite)
            finished, where = True, (f"at the budget on the seeds every run has finished ({','.join(seed_tokens(done))}"
                                     "); the others are under way or not started")
        if args.agents:
            from .agents import agents_text

            try:
                print(agents_text(suite, entries, finished, where))
            except SuiteError as e:
                print(f"{args.suite}: {e}", file=sys.stderr)
                return EXIT_USAGE
            return 0
        print(plan_text(suite, entries, finished, where))
        return 0
    if args.dry_run:
        dry_run(runs, states)
        print(f"the report would go to {display_path(out)}")
        return 0
    todo = [run for run, state in zip(runs, states) if state != "finished"]
    if args.so_far:
        from .scores import cut_so_far

        try:
            suite, entries = cut_so_far(suite, entries)
        except SuiteError as e:
            print(f"{args.suite}: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{args.suite}: {len(runs) - len(todo)} of {len(runs)} runs finished; read so far: "
              + ", ".join(f"{name} up to step {step:,} of {budget:,}" for name, (step, budget) in suite.so_far.items()),
              flush=True)
        todo = []
    else:
        split = f", {suite.seeds_per_run} seed(s) per run" if suite.seeds_per_run else ""
        print(f"{args.suite}: {len(runs)} runs ({len(suite.tasks)} tasks x {len(suite.methods)} methods{split}), "
              f"{len(runs) - len(todo)} finished, {len(todo)} to run", flush=True)
    if todo:
        code, _ = run_missing(runs, todo, args, threads, workers, suite.gpus_per_run)
        if code == EXIT_FAILED:
            print(f"{PROG}: a run failed (its log is named above); no report written", file=sys.stderr)
        elif code > 128:  # stopped with their checkpoints: this command continues them, then writes the report
            print(f"{PROG}: interrupted; no report written: run the same command again to continue the runs from "
                  "their checkpoints and write it", file=sys.stderr)
        if code:
            return code
    from .report import write  # numpy, matplotlib and rliable: only once there is a report to write

    earlier = (out / "report.md").exists()  # a report is made again from the curves: replaced, and said
    try:
        path = write(suite, entries, out, [shlex.join(["python", "-m", "utils.compare", *argv])], docs)
    except SuiteError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except DiskFull as e:  # no file of the report written or replaced (report.write: written_together)
        print(tool_disk_full_message(PROG, e), file=sys.stderr)
        return EXIT_DISK_FULL
    except OSError as e:  # a folder taken away
        print(f"{PROG}: cannot write the report in {display_path(out)}: {e.strerror or e}", file=sys.stderr)
        return EXIT_FAILED
    print(f"report: {display_path(path)}" + (" (replaced the report that was there, with its figures)" if earlier
                                              else "") + (f"; its table in {display_path(docs[0])}" if docs else ""))
    return 0


def docs_page(suite) -> tuple[Path, str]:
    """The page and marker --write_docs writes to, checked before anything runs."""
    from ..plot.tables import has_markers

    if suite.docs is None:
        raise SuiteError("--write_docs: the suite names no docs page (docs: {file: PATH, marker: NAME})")
    page, marker = ROOT / suite.docs[0], suite.docs[1]
    if not page.is_file() or not has_markers(page.read_text(), marker):
        raise SuiteError(f"docs: {suite.docs[0]} has no <!-- {marker} --> ... <!-- /{marker} --> block")
    return page, marker
