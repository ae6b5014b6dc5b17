"""Why a run stops early: the command lines print one line and exit with a code of their own."""
import contextlib
import errno
import signal
import sys


class UsageError(Exception):
    """Bad input from the user (flag, environment, file): one line saying what to change."""


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; the run stopped at a step boundary (after checkpointing)."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum


class NonFinite(Exception):
    """A loss or parameter became NaN or infinite: the run stops, keeping its last good checkpoint."""


class WorkerDied(RuntimeError):
    """An environment worker process ended without a word (killed, out of memory): exit code 1, one line."""




DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}  # no space left, disk quota exceeded


class DiskFull(OSError):
    """A file of the run could not be written for want of space (ENOSPC) or quota (EDQUOT); the write left the file as
    it was (``utils.io.atomic_write``). ``filename``: the file; ``errno``/``strerror``: the operating system's."""


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The OSError of a full disk or an exceeded quota in ``exc`` or what it was raised from or while handling
    (``__cause__``, ``__context__``: torch.save wraps the OSError of its writes into a RuntimeError), or None."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            return exc
        todo += [exc.__context__, exc.__cause__]  # the cause first
    return None


@contextlib.contextmanager
def interrupt_while_starting(script: str, main: bool):
    """Around an entry script's imports (torch takes a second or more to load): Ctrl-C there is one line and exit
    130, as it is later. ``main``: the script runs as ``__main__``; imported (by a tool, a test), the interrupt goes
    on to the importer, whose own handling says it. While the imports run, SIGINT is only noted and acted on once
    they end: raised inside a C extension's import, a KeyboardInterrupt can come out as that module's ImportError
    (numpy: "PyCapsule_Import could not import module datetime") and a traceback."""
    if not main:
        yield
        return

    def stop() -> None:
        sys.stderr.write(f"{script}: interrupted while starting: nothing written\n")
        raise SystemExit(130) from None

    caught: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except KeyboardInterrupt:
        stop()
    try:
        yield
    except KeyboardInterrupt:
        stop()
    except Exception:
        if caught:  # what the interrupt broke on its way
            stop()
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        stop()
