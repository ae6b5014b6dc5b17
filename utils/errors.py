"""Why a run stops early: the command lines print one line and exit with a code of their own."""


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

