"""The default CPU thread count beside busy cores: wall time of one short training run with the default threads and
with ``--threads 1``, alone and beside processes that keep cores busy (issue: a default must not crawl when
something else runs).

    python -m benchmarks.threads [--busy 0 1] [--repeats 3] [--json out.json] [-- extra flags of the run]

Each measurement is a whole process (``DASE_main.py``, README's first run shortened to ``--steps``, a quarter of
them trained between each of 4 evaluations), so torch's thread pool and OpenMP's settings are those a user gets:
the default, ``--threads 1``, and the default as it was before (OpenMP threads spinning while they wait). A busy core is a Python process spinning in a loop
(what a second training run of one thread does to a core). Runs alternate between the settings, so drift of the
machine hits both; the table gives each setting's median and the ratio default / --threads 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ["DASE_main.py", "--policy", "DASE_TD3", "--env", "Pendulum-v1", "--checkpoint_freq", "0", "--quiet"]
# the settings compared: (extra flags, environment). "spinning" is the default before OpenMP's threads were made to
# sleep when they wait (utils/__init__.py): libgomp's own spin count, which the package leaves alone when it is set
SETTINGS = {"default": ([], {}), "--threads 1": (["--threads", "1"], {}),
            "spinning": ([], {"GOMP_SPINCOUNT": "300000"})}
SPIN = "import time\nend = time.time() + float(__import__('sys').argv[1])\nwhile time.time() < end: pass\n"


def one_run(flags: list[str], steps: int, start_steps: int, extra: list[str], env: dict) -> float:
    """Seconds of wall time of one whole training process."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, *RUN, "--max_time_steps", str(steps), "--start_time_steps", str(start_steps),
                        "--eval_freq", str(steps // 4), "--eval_episodes", "2", "--results_dir", tmp, *flags, *extra],
                       cwd=ROOT, check=True, env=env)
        return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.threads", description=__doc__.split("\n\n")[0])
    p.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="busy cores beside the run (default: 0 1)")
    p.add_argument("--steps", type=int, default=1600, help="--max_time_steps of the run (default: 1600)")
    p.add_argument("--start", type=int, default=400, help="--start_time_steps of the run (default: 400)")
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS),
                   help="the settings to time (default: all)")
    p.add_argument("--repeats", type=int, default=2, help="runs per setting (default: 2)")
    p.add_argument("--json", type=str, default=None, help="write the measurements here")
    p.add_argument("extra", nargs="*", help="more flags for every run (after --)")
    args = p.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    settings = {name: SETTINGS[name] for name in args.settings}
    results = {"cores": len(os.sched_getaffinity(0)), "steps": args.steps, "start_steps": args.start,
               "extra": args.extra, "busy": {}}
    for busy in args.busy:
        hogs = [subprocess.Popen([sys.executable, "-c", SPIN, "100000"]) for _ in range(busy)]
        try:
            times: dict[str, list[float]] = {name: [] for name in settings}
            for _ in range(args.repeats):
                for name, (flags, env) in settings.items():
                    times[name].append(one_run(flags, args.steps, args.start, args.extra, {**base, **env}))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        med = {name: statistics.median(t) for name, t in times.items()}
        one = med.get("--threads 1")
        results["busy"][str(busy)] = {"seconds": times, "median": med,
                                      "ratio_to_threads_1": {n: m / one for n, m in med.items()} if one else None}
        print(f"{busy} busy core(s): " + ", ".join(f"{n} {m:.1f} s" + (f" ({m / one:.2f}x)" if one else "")
                                                  for n, m in med.items())
              + " | runs: " + "; ".join(f"{n} " + " ".join(f"{x:.1f}" for x in t) for n, t in times.items()),
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
