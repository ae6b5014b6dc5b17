"""What a run says while it trains: a line per evaluation (and TensorBoard), and the one-line reports of a stop."""
from __future__ import annotations

import signal
import time

import numpy as np

from ..formats import decimals


class Progress:
    """One line per evaluation on stdout (unless quiet) and, with --tensorboard, each seed's board.

    ``rows(k)`` gives the members of the k-th seed. ``start`` begins the clock and takes the boards (one writer
    per seed, or none); before it, only ``say`` is used."""

    def __init__(self, name: str, max_time_steps: int, seeds: list[int], rows, quiet: bool):
        self.name, self.max_time_steps, self.seeds, self.rows, self.quiet = name, max_time_steps, seeds, rows, quiet
        self.boards: list = []
        self.echo = lambda line: print(line, flush=True)  # where a line goes (a distributed learner keeps them)

    def start(self, t: int, boards=()) -> None:
        self.boards = list(boards)
        self.started = self.last = (time.time(), t)  # (wall time, step): of the start, of the last evaluation

    def rate(self, t: int) -> float:
        """Training steps per second since the last call (the evaluation before)."""
        now = time.time()
        rate = (t - self.last[1]) / max(now - self.last[0], 1e-9)
        self.last = (now, t)
        return rate

    def say(self, line: str) -> None:
        if not self.quiet:
            self.echo(line)

    def evaluation(self, t: int, scores: np.ndarray, period: dict, rate: float) -> None:
        """Step, throughput, returns (every agent's, or their spread over seeds), elapsed time; and the boards."""
        rate = rate if t > self.started[1] else 0.0
        elapsed = time.strftime("%H:%M:%S", time.gmtime(time.time() - self.started[0]))
        d = decimals(*np.asarray(scores, dtype=float).ravel())  # 3 for returns within +-2 (LBF's), else 1
        if len(self.seeds) == 1:
            returns = "return " + " ".join(f"{s:9.{d}f}" for s in scores)
        else:
            returns = f"return mean {np.mean(scores):9.{d}f} min {np.min(scores):9.{d}f} max {np.max(scores):9.{d}f}"
        self.say(f"{self.name} | step {t:>8d}/{self.max_time_steps} | {rate:7.1f} steps/s | {returns} | {elapsed}")
        for k, board in enumerate(self.boards):
            rows = self.rows(k)
            board.log(t, scores[rows], {name: v[rows] for name, v in period.items()}, rate)

    def close(self) -> None:
        for board in self.boards:
            board.close()
        self.boards = []


def non_finite_message(broken: list[tuple[int, str]], t: int, member: list[str], checkpoint: str,
                       last_checkpoint: int | None, hint: str | None = None) -> str | None:
    """The stop report when a loss or parameters went NaN/inf, or None if nothing did.

    broken[m] = (step, or -1 for "by now"; "loss", "parameters" or "" when intact), member[m] names member m;
    ``hint``: the algorithm's advice, in place of the general one."""
    bad = sorted((step if step >= 0 else t, m, what) for m, (step, what) in enumerate(broken) if what)
    if not bad:
        return None
    step, m, what = bad[0]  # the first to break; through the shared buffer it may have broken the others
    what = f"loss at step {step}" if what == "loss" else f"parameters by step {step}"
    others = "".join(f", then {member[j]} at step {s}" for s, j, _ in bad[1:])
    kept = (f"the last good checkpoint ({checkpoint}, step {last_checkpoint}) is kept"
            if last_checkpoint is not None else "no checkpoint was written")
    hint = hint or "Lower the learning rates or check the rewards"
    return f"{member[m]}: non-finite {what}{others}; stopped, {kept}. {hint}"


def interrupted_message(signum: int, name: str, t: int, checkpoint: str | None) -> str:
    """The stop report after SIGINT/SIGTERM; checkpoint None: checkpoints are off."""
    sig = signal.Signals(signum).name
    if checkpoint is None:
        return f"{sig}: stopped {name} at step {t}, no checkpoint (--checkpoint_freq 0)"
    return f"{sig}: stopped {name} at step {t}, checkpoint {checkpoint}; continue with --resume"


def paused_message(name: str, t: int, stop_at: int, checkpoint: str | None) -> str:
    """The report of a run paused by --stop_at (always checkpointed: the flag needs checkpoints)."""
    return f"{name} | paused at step {t} (--stop_at {stop_at}), checkpoint {checkpoint}; continue with --resume"


class StopSignals:
    """Within ``with``: SIGINT and SIGTERM only recorded (``signum``), for the loop to stop at the end of a step with
    a checkpoint. In the main thread only: elsewhere Python cannot install handlers, and nothing changes."""

    def __init__(self):
        self.signum: int | None = None
        self.previous: dict = {}

    def __enter__(self) -> StopSignals:
        import threading

        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._note) for s in (signal.SIGINT, signal.SIGTERM)}
            # a run started by a Ray task inherits its worker's mask, both blocked (utils/distributed/ray_local.py): unblocked,
            # they reach these handlers (one that came already is noted now)
            if hasattr(signal, "pthread_sigmask"):  # not on Windows
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        return self

    def _note(self, signum, frame) -> None:
        self.signum = signum

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        self.previous = {}
