"""The CPU cores this process may use: below the command lines and the training loop, which both ask."""
from __future__ import annotations

import os


def available_cores() -> int:
    """CPU cores this process may use (its affinity mask, where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
