"""One method on one task of a suite, as the sweep runs it (``plan.plan_suite`` makes them; the scores and the
report read them)."""
from __future__ import annotations

from dataclasses import dataclass

from ..sweep.runs import Run
from .suite import Method, Task


@dataclass(frozen=True)
class Entry:
    """One method on one task: the sweep's run (all its seeds, as one process would train them: the curves the report
    reads), the processes that train them (that run, or one per seeds_per_run of its seeds) and its budget in both
    counts."""

    task: Task
    method: Method
    run: Run
    read_steps: int | None = None  # --so_far: the steps per agent its curves are read up to (else the run's budget)
    processes: tuple[Run, ...] = ()  # () : the run itself

    @property
    def commands(self) -> tuple[Run, ...]:
        """The runs to start: the processes, or the run."""
        return self.processes or (self.run,)

    @property
    def agents(self) -> int:
        return self.run.num_agents

    @property
    def steps_per_agent(self) -> int:
        return self.read_steps if self.read_steps is not None else self.run.steps

    @property
    def total_steps(self) -> int:
        return self.steps_per_agent * self.run.num_agents
