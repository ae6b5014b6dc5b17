"""The local process pool: at most K runs at once, signals passed on to them."""
from __future__ import annotations

import concurrent.futures
import contextlib
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .execute import execute
from .experiment import ROOT
from .results import Result, classify
from .runs import Run


class LocalPool:
    """At most `workers` runs at once, each a subprocess; on SIGINT/SIGTERM the runs get SIGTERM."""

    def __init__(self, workers: int, root: Path = ROOT):
        self.workers, self.root = workers, root
        self._lock = threading.Lock()
        self._procs: set = set()
        self.stop_signal: int | None = None

    def _run(self, run: Run) -> Result:
        with self._lock:
            if self.stop_signal is not None:
                return Result(run, "not started", note="the sweep was interrupted")
        started: list = []

        def register(proc) -> None:
            with self._lock:
                self._procs.add(proc)
                started.append(proc)
                stop = self.stop_signal
            if stop is not None:  # stop() came between our check and Popen: pass the signal on now
                proc.send_signal(signal.SIGTERM)

        code, wall, complete = execute(run.argv, str(self.root), str(run.log_path(self.root)),
                                            run.expected_files(self.root), register)
        with self._lock:
            self._procs.difference_update(started)
        return classify(run, code, wall, complete, self.stop_signal is not None, self.root)

    def stop(self, signum: int) -> None:
        """Start no further run and send SIGTERM to the running ones (they checkpoint and exit).

        SIGTERM whatever arrived: the command lines treat SIGINT and SIGTERM alike, and SIGINT may be
        blocked in a mask the runs inherited (e.g. when the sweep itself runs inside a Ray task).
        """
        with self._lock:
            first = self.stop_signal is None
            self.stop_signal = self.stop_signal or signum
            procs = list(self._procs) if first else []
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    def run_all(self, runs: Sequence[Run], report: Callable[[Result], None]) -> list[Result]:
        """Execute runs in order of submission, reporting each as it ends; returns results in input order."""
        results: dict[int, Result] = {}
        with forward_signals(self.stop), concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            futures = {pool.submit(self._run, run): i for i, run in enumerate(runs)}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                report(results[futures[future]])
        return [results[i] for i in range(len(runs))]


@contextlib.contextmanager
def forward_signals(handler: Callable[[int], None]):
    """Route SIGINT and SIGTERM to handler(signum) while inside (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: handler(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
