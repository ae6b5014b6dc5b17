"""Executing one run: its process, its log, its files checked afterwards.

Nothing here imports the rest of the project: Ray ships this module by value to workers that may not have
the repository on their path (``cluster.run_ray``).
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..naming import curve_length


def files_complete(expected: Sequence[tuple[str, int | None]]) -> bool:
    """True when every JSON record exists and every curve exists with its full length (None: a record). A run that
    stopped before its budget (--solved_at, --max_episodes) is complete at the step its record says: the curves
    listed after a record are held to that record's length."""
    import json

    import numpy as np

    stopped_length = None  # the curves of the last record read, when that run stopped early
    for path, length in expected:
        if not os.path.isfile(path):
            return False
        if length is None:
            stopped_length = None
            try:
                record = json.loads(Path(path).read_text())
                end, freq = record.get("finished_at_step"), record["config"]["eval_freq"]
                if record.get("stopped") and isinstance(end, int) and isinstance(freq, int) and freq > 0:
                    stopped_length = curve_length(end, freq)
            except Exception:  # no record of an early stop: the full length is due
                pass
            continue
        length = stopped_length if stopped_length is not None and stopped_length <= length else length
        try:
            curve = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception:  # a damaged file is an unfinished run; the command lines rewrite it
            return False
        if curve.shape != (length,):
            return False
    return True


class StopFlag:
    """A Ray actor the sweep sets when it is told to stop; running tasks poll it (Ray's own cancellation
    reaches a task only between Python bytecodes, not while it waits for its process)."""

    def __init__(self):
        self.signum = 0

    def set(self, signum: int) -> None:
        self.signum = self.signum or signum

    def get(self) -> int:
        return self.signum


def execute(argv: list[str], root: str, log_path: str, expected: list, register=None,
            stop_flag=None) -> tuple[int | None, float, bool]:
    """Run `python argv` in root, output appended to log_path; (exit code, seconds, files complete).

    register(proc) is called with the process once started (the local pool forwards signals to it);
    stop_flag is a ``StopFlag`` actor polled while the run goes on: once it holds a signal number the run
    gets SIGTERM, and a run not started yet does not start (exit code None). SIGTERM, not SIGINT: the
    command lines treat both alike (checkpoint, stop), but a process inherits its parent thread's
    blocked signals, and Ray's task threads block SIGINT, so a run started there never sees one.
    """
    def stop_requested() -> int:
        if stop_flag is None:
            return 0
        import ray

        return ray.get(stop_flag.get.remote())

    if stop_requested():
        return None, 0.0, False
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "a") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} on {socket.gethostname()}: "
                  f"{shlex.join(['python', *argv])}\n")
        log.flush()
        start = time.monotonic()
        # its own session: a Ctrl-C in the terminal reaches the sweep only, which passes it on once
        proc = subprocess.Popen([sys.executable, *argv], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        if register is not None:
            register(proc)
        code = wait(proc, stop_requested if stop_flag is not None else None)
        wall = time.monotonic() - start
    return code, wall, files_complete(expected)


def wait(proc: subprocess.Popen, stop_requested=None) -> int:
    """The process's exit code; SIGTERM to it once ``stop_requested()`` (polled every 2 s) says so, or when
    this thread is interrupted (a Ray task cancelled from outside)."""
    try:
        passed_on = False
        while True:
            try:
                return proc.wait(timeout=2.0 if stop_requested is not None else None)
            except subprocess.TimeoutExpired:
                if not passed_on and stop_requested():
                    proc.send_signal(signal.SIGTERM)  # the run checkpoints and stops
                    passed_on = True
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
        return proc.wait()
