"""What the resume plan and the per-seed files (resume.py, seed_files.py) read of and call on the trainer: its
explicit inputs, declared (``Trainer`` in loop.py is one; ``mypy`` checks both sides, pyproject.toml's [tool.mypy])."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from .config import RunConfig
    from .progress import Progress
    from .series import Outputs
    from .setup import Setup


class RunState(Protocol):
    """What resume.py and seed_files.py read of and call on the trainer (``Trainer`` is one): its explicit inputs."""

    cfg: RunConfig
    device: torch.device
    setup: Setup  # the seeds, their files and configs, the environments, the learner, the episode records
    outputs: Outputs  # the curves and the series beside them
    progress: Progress
    t: int  # the step every member has reached
    stopped: set[int]  # the seeds (indices) whose files are final
    newly_done: list[int]  # members done at the last step
    done_curves: dict[int, list[list[float]]]  # seeds that had already finished: their curves
    last_checkpoint: int | None
    clock: float  # perf_counter() when the loop started (or resumed)
    eval_seconds: float  # seconds spent in evaluations training waited for

    @property
    def curves(self) -> list[list[float]]: ...

    def rows(self, k: int) -> slice: ...

    def build(self, seeds: list[int]) -> None: ...

    def finish_evaluation(self) -> None: ...

    def close(self) -> None: ...
