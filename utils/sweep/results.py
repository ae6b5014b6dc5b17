"""What became of each run: its ``Result`` from an exit code and the files it left, and the table printed at the end."""
from __future__ import annotations

import contextlib
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .experiment import ROOT
from .runs import Run


@dataclass
class Result:
    """What became of one run."""

    run: Run
    status: str  # done | paused | skipped | failed | interrupted | not started
    code: int | None = None
    wall: float = 0.0
    note: str = ""


def classify(run: Run, code: int | None, wall: float, complete: bool, stopping: bool, root: Path = ROOT) -> Result:
    """Turn an exit code into a Result: done only when the process succeeded and left every file."""
    if code is None:
        return Result(run, "not started", note="interrupted before it started")
    log = display_path(run.log_path(root))
    if code == 0 and complete:
        return Result(run, "done", code, wall)
    if code == 0 and run.until is not None:  # --until: stopped at that step with a checkpoint, as asked
        return Result(run, "paused", code, wall, f"at step {run.until} (--until); rerun the same command to continue")
    if stopping and code in (130, 143, -signal.SIGINT, -signal.SIGTERM):  # stopped as asked, checkpointed
        return Result(run, "interrupted", code, wall, f"exit {code}, log: {log}; rerun the same command to continue")
    if code == 0:
        return Result(run, "failed", code, wall, f"exit 0 but its curves are incomplete, log: {log}")
    why = f"exit {code}"
    if code < 0:
        with contextlib.suppress(ValueError):
            why = f"killed by {signal.Signals(-code).name}"
    return Result(run, "failed", code, wall, f"{why}, log: {log}")


def display_path(path: Path) -> str:
    """A path relative to the current folder when it lies inside it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def plural(n: int, word: str = "run") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_wall(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def summary(results: Sequence[Result]) -> str:
    """The table printed at the end: run, wall time, status (with exit code and log for failures). The status comes
    last, so a long log path widens no column: the table is as wide as its runs' names and statuses' words."""
    rows = [("run", "wall", "status")]
    for r in results:
        status = f"{r.status} ({r.note})" if r.note else r.status
        rows.append((r.run.label, format_wall(r.wall) if r.status not in ("skipped", "not started") else "-", status))
    width = [max(len(row[k]) for row in rows) for k in range(2)]
    lines = [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    lines.insert(1, "-" * (width[0] + width[1] + 4 + max([len("status")] + [len(r.status) for r in results])))
    counts = {s: sum(r.status == s for r in results) for s in ("done", "paused", "skipped", "failed", "interrupted",
                                                                "not started")}
    lines.append(f"{plural(len(results))}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in
                                                      ("done", "skipped", "failed")))
    return "\n".join(lines)
