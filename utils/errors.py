"""Why a run stops early: the command lines print one line and exit with a code of their own."""
import _signal
import errno
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


class interrupt_while_starting:  # noqa: N801  (a context manager named as the statement reads: with interrupt_while_starting)
    """Around an entry script's imports (torch takes a second or more to load): Ctrl-C there is one line and exit
    130, as it is later. ``main``: the script runs as ``__main__``; imported (by a tool, a test), the interrupt goes
    on to the importer, whose own handling says it. While the imports run, SIGINT is only noted and acted on once
    they end: raised inside a C extension's import, a KeyboardInterrupt can come out as that module's ImportError
    (numpy: "PyCapsule_Import could not import module datetime") and a traceback.

    This module is the first the scripts import, so it imports only what the interpreter has loaded before any script
    runs (``_signal``, the C half of ``signal``, instead of ``signal``, ``enum`` and ``contextlib``, which took
    ~25 ms to load and, under load, far longer: a Ctrl-C in that window came out as a traceback)."""

    def __init__(self, script: str, main: bool):
        self.script, self.main, self.caught, self.previous = script, main, [], None

    def stop(self):
        sys.stderr.write(f"{self.script}: interrupted while starting: nothing written\n")
        raise SystemExit(130) from None

    def __enter__(self):
        if self.main:
            try:
                self.previous = _signal.signal(_signal.SIGINT, lambda signum, frame: self.caught.append(signum))
            except KeyboardInterrupt:
                self.stop()
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if not self.main:
            return False
        _signal.signal(_signal.SIGINT, self.previous)
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.stop()
        if self.caught and (kind is None or issubclass(kind, Exception)):  # what the interrupt broke on its way
            self.stop()
        return False
