"""Runs as Ray tasks (``--ray``), on a local Ray instance or a cluster."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..distributed.ray_local import init_local, shutdown
from . import execute as execute_module
from .execute import StopFlag, execute
from .experiment import ROOT
from .local import forward_signals
from .results import Result, classify, display_path
from .runs import Run


@contextlib.contextmanager
def ray_session(address: str | None):
    """Ray, started here (a new local instance, or joined at ``address``) unless already running; shut down on
    leaving only if started here."""
    import logging

    import ray

    started_here = not ray.is_initialized()
    try:  # Ctrl-C while Ray starts too: nothing Ray started here outlives the sweep (utils/distributed/ray_local.py)
        if started_here:
            # a local instance: a SIGTERM to the whole process group reaches the sweep alone, which stops its runs;
            # Ray's own notices (its start, token authentication) left out, as utils.distributed does: errors only
            quiet = {"logging_level": logging.ERROR}
            init_local(ray, include_dashboard=False, **quiet) if address is None else ray.init(address=address, **quiet)
        yield ray
    finally:
        if started_here:
            shutdown(ray)


class RayRuns:
    """Submits runs as tasks (at most ``max_in_flight`` at once) and collects them as they end.

    Signals are only recorded by the handler; the loop passes the first on through the ``StopFlag`` actor,
    which the tasks poll (they then SIGTERM their runs), and submits nothing more.
    """

    def __init__(self, ray, runs: Sequence[Run], cpus: int, gpus: float, max_in_flight: int | None, root: Path):
        # the runner goes by value: a cluster's workers need not have this repository on their path
        ray.cloudpickle.register_pickle_by_value(execute_module)
        self.ray, self.runs, self.root, self.max_in_flight = ray, runs, root, max_in_flight
        self.task = ray.remote(execute).options(num_cpus=cpus, num_gpus=gpus)
        self.flag = ray.remote(num_cpus=0)(StopFlag).remote()
        self.queue = list(enumerate(runs))
        self.pending: dict[Any, int] = {}
        self.results: dict[int, Result] = {}
        self.stop: list[int] = []  # the signals received
        self.flagged = False

    def submit(self) -> None:
        if self.stop and not self.flagged:
            self.ray.get(self.flag.set.remote(self.stop[0]))
            self.flagged = True
        while self.queue and not self.stop and (self.max_in_flight is None or len(self.pending) < self.max_in_flight):
            i, run = self.queue.pop(0)
            ref = self.task.remote(run.argv, str(self.root), str(run.log_path(self.root)),
                                   run.expected_files(self.root), None, self.flag)
            self.pending[ref] = i

    def collect(self, ref) -> Result:
        run = self.runs[self.pending.pop(ref)]
        try:
            code, wall, complete = self.ray.get(ref)
            return classify(run, code, wall, complete, bool(self.stop), self.root)
        except self.ray.exceptions.RayError as e:  # a lost node or worker, a task cancelled from outside
            first = (str(e).splitlines() or [""])[0]
            return Result(run, "failed", note=f"Ray: {type(e).__name__}: {first}; log: "
                                              f"{display_path(run.log_path(self.root))}")

    def run_all(self, report: Callable[[Result], None]) -> list[Result]:
        with forward_signals(self.stop.append):
            while self.queue or self.pending:
                self.submit()
                if not self.pending:
                    break
                done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)
                for ref in done:
                    i = self.pending[ref]
                    self.results[i] = self.collect(ref)
                    report(self.results[i])
        for i, run in self.queue:
            self.results[i] = Result(run, "not started", note="the sweep was interrupted")
        return [self.results[i] for i in range(len(self.runs))]


def run_ray(runs: Sequence[Run], address: str | None, cpus: int, gpus: float, max_in_flight: int | None,
            report: Callable[[Result], None], root: Path = ROOT) -> tuple[list[Result], int | None]:
    """Execute runs as Ray tasks (num_cpus=cpus, num_gpus=gpus each); returns results and the stop signal."""
    with ray_session(address) as ray:
        pool = RayRuns(ray, runs, cpus, gpus, max_in_flight, root)
        results = pool.run_all(report)
    return results, (pool.stop[0] if pool.stop else None)
