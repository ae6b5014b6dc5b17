"""The CPU cores this process may use: below the command lines and the training loop, which both ask."""
from __future__ import annotations

import os


def available_cores() -> int:
    """CPU cores this process may use (its affinity mask, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _cpu_times(cores: set[int]) -> tuple[int, int] | None:
    """(busy, total) jiffies so far of ``cores``, from /proc/stat; None where there is no such file."""
    try:
        lines = open("/proc/stat").read().splitlines()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cores:
            continue
        values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(values)
        busy += sum(values) - values[3] - values[4]
    return busy, total


_IDLE: int | None = None


def idle_cores(window: float = 0.1) -> int:
    """The cores of this process that other processes leave idle now (measured once per process over ``window``
    seconds: the busy fraction of its cores, rounded to whole cores); all of them where it cannot be measured."""
    global _IDLE
    if _IDLE is None:
        import time

        try:
            cores = set(os.sched_getaffinity(0))
        except AttributeError:
            cores = set(range(os.cpu_count() or 1))
        before = _cpu_times(cores)
        time.sleep(window)
        after = _cpu_times(cores)
        if before is None or after is None or after[1] <= before[1]:
            _IDLE = len(cores)
        else:
            busy = len(cores) * (after[0] - before[0]) / (after[1] - before[1])
            _IDLE = max(0, len(cores) - round(busy))
    return _IDLE


def default_cpu_threads() -> int:
    """torch's CPU threads when --threads is not given: every core of this process that nothing else keeps busy
    when the run starts, at least one. (OpenMP's threads sleep while they wait, utils/__init__.py, so a core that
    becomes busy later costs little; one busy from the start is left to its process.)"""
    return max(1, idle_cores())
