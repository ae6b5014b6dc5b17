"""Ray started on this machine so that a signal to the whole process group reaches the driver alone.

A terminal's Ctrl-C, ``timeout`` and Slurm's ``scancel`` signal every process of the command's group, and the Ray
processes a driver starts (its GCS, raylet and workers) are in that group. Ray blocks SIGINT in them itself; a
SIGTERM killed them, so the driver, whose handler stops the runs with their checkpoints, found its cluster gone and
hung a minute, then failed. Started with SIGTERM blocked too (a mask their children inherit), they leave the stop
to the driver; Ray's shutdown ends them with SIGKILL after a second. A run a Ray task starts inherits the mask and
unblocks both signals as it installs its handlers (``utils.run.progress.StopSignals``).
"""
from __future__ import annotations

import signal


def init_local(ray, **kwargs) -> None:
    """``ray.init(**kwargs)`` of a new local instance, its processes started with SIGTERM blocked."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        ray.init(**kwargs)
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        ray.init(**kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
