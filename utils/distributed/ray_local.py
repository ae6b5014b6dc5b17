"""Ray started on this machine so that a signal to the whole process group reaches the driver alone.

A terminal's Ctrl-C, ``timeout`` and Slurm's ``scancel`` signal every process of the command's group, and the Ray
processes a driver starts (its GCS, raylet and workers) are in that group. Ray blocks SIGINT in them itself; a
SIGTERM killed them, so the driver, whose handler stops the runs with their checkpoints, found its cluster gone and
hung a minute, then failed. Started with SIGTERM blocked too (a mask their children inherit), they leave the stop
to the driver; Ray's shutdown ends them with SIGKILL after a second. A run a Ray task starts inherits the mask and
unblocks both signals as it installs its handlers (``utils.run.progress.StopSignals``).

Nothing Ray starts here may outlive the command, even when Ctrl-C comes while Ray is still starting (issue 89):
``ray.init`` interrupted half-way leaves processes that ``ray.shutdown`` does not know of, and Ray's agents
(``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``), whose raylet is gone, lived on under init with SIGTERM blocked.
So the driver becomes a child subreaper while Ray runs (Linux: orphans of its descendants become its children, not
init's), and ``shutdown`` follows ``ray.shutdown`` with SIGKILL to every descendant that is still a Ray process.
"""
from __future__ import annotations

import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def init_local(ray, **kwargs) -> None:
    """``ray.init(**kwargs)`` of a new local instance, its processes started with SIGTERM blocked; end it with
    ``shutdown`` (in a ``finally`` around this call too: Ctrl-C may come while Ray starts)."""
    _subreaper(True)
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        ray.init(**kwargs)
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        ray.init(**kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def shutdown(ray, grace: float = 5.0) -> None:
    """``ray.shutdown()``, then SIGKILL to each process under this one that is still Ray's (its binaries, its Python
    modules, or a ``ray::`` worker), until none is left (at most ``grace`` seconds); those that were this process's
    children are reaped. Ctrl-C and SIGTERM wait until it is done. Ray running elsewhere (a cluster joined with
    ``--address``) is left alone: only this process's descendants are looked at."""
    package = os.path.dirname(ray.__file__)
    started = {pid for pid, _, argv in _descendants(os.getpid()) if _is_ray(argv, package)}
    try:
        ray.shutdown()
    finally:
        masked = hasattr(signal, "pthread_sigmask")
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}) if masked else None
        try:
            _kill_ray_descendants(package, grace, started)
        finally:
            _subreaper(False)
            if masked:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _subreaper(on: bool) -> None:
    """Linux's PR_SET_CHILD_SUBREAPER for this process (elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    except (OSError, AttributeError, TypeError):
        pass


def _kill_ray_descendants(package: str, grace: float, started: set[int]) -> None:
    """SIGKILL to Ray's processes under this one until none is left; then each of them, and each of ``started``
    (those there before ``ray.shutdown``), gone: reaped where it is this process's child (its own, or adopted when
    its parent died), so that none stays behind even as a zombie."""
    me, killed = os.getpid(), set(started)
    deadline = time.monotonic() + grace
    while True:
        left = [pid for pid, _, argv in _descendants(me) if _is_ray(argv, package)]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    deadline = time.monotonic() + 2.0
    while killed and time.monotonic() < deadline:
        for pid in list(killed):
            parent = _parent(pid)
            if parent == me:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except OSError:
                    pass
                parent = _parent(pid)
            if parent is None:
                killed.discard(pid)
        if killed:
            time.sleep(0.02)


def _parent(pid: int) -> int | None:
    """``pid``'s parent, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def _is_ray(argv: list[str], package: str) -> bool:
    return bool(argv) and (argv[0].startswith("ray::") or any(a.startswith(package + os.sep) for a in argv))


def _descendants(root: int) -> list[tuple[int, int, list[str]]]:
    """(pid, parent, argv) of every living process under ``root`` (Linux /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if fields[0] != b"Z":  # a zombie has ended already
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        parent = todo.pop()
        for pid in children.get(parent, []):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            out.append((pid, parent, argv))
            todo.append(pid)
    return out
