"""What a run records at each evaluation, as one registry: every series a name (its key in a checkpoint), one value
per member or per seed, the ``RunFiles`` method that writes a seed's part, when a run writes it, and how an
evaluation gives its values. Saving, checkpointing and resuming iterate over ``SERIES``; a new per-evaluation output
is one entry here (and its ``RunFiles`` writer).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Series:
    key: str  # its name in a checkpoint (older checkpoints without it resume with it empty)
    per_seed: bool  # one value per seed at each evaluation (else one per member)
    save: str  # the RunFiles method writing one seed's values
    written: Callable  # (run config, sharing scheme) -> whether this run writes the series' files
    values: Callable  # (evaluation, scores, run config) -> per member (or seed) the values, or None: nothing appended


def _per_seed(key: str) -> Callable:
    """The period's per-member ``key`` read once per seed (at its first member: the value is the seed's)."""
    return lambda ev, scores, cfg: ([float(x) for x in ev.period[key][::cfg.num_agents]] if key in ev.period
                                    else None)


def _rows(key: str) -> Callable:
    """The period's ``key``: per member a row of values."""
    return lambda ev, scores, cfg: ([[float(x) for x in row] for row in ev.period[key]] if key in ev.period else None)


SERIES = (
    # the scores: the learning curves
    Series("curves", False, "save_curves", lambda cfg, scheme: True,
           lambda ev, scores, cfg: [float(x) for x in scores]),
    # DASE: the mean weight given to other agents' samples over the evaluation period (kept for every run)
    Series("weight_curves", False, "save_weights", lambda cfg, scheme: scheme.writes_weights,
           lambda ev, scores, cfg: [float(x) for x in ev.period["weight"]]),
    # diffusion: the agents' parameter disagreement, one value per seed
    Series("consensus_curve", True, "save_consensus", lambda cfg, scheme: scheme.writes_consensus,
           _per_seed("consensus")),
    # --eval_tasks all: per member, its score on each of its seed's tasks
    Series("task_curves", False, "save_task_curves", lambda cfg, scheme: cfg.eval_tasks == "all",
           lambda ev, scores, cfg: ([[float(x) for x in row] for row in ev.task_scores()]
                                    if cfg.eval_tasks == "all" else None)),
    # --sync_freq: per member, [skipped combines, mean message age] since the last evaluation
    Series("gossip_curves", False, "save_gossip", lambda cfg, scheme: scheme.writes_gossip, _rows("gossip")),
    # --curiosity / --rnd: per member, [mean intrinsic bonus, mean model loss] since the last evaluation
    Series("intrinsic_curves", False, "save_intrinsic",
           lambda cfg, scheme: cfg.algo_settings().intrinsic, _rows("intrinsic")),
    # --siamese: per member, the mean auxiliary loss since the last evaluation
    Series("siamese_curves", False, "save_siamese", lambda cfg, scheme: bool(cfg.algo_settings().siamese),
           lambda ev, scores, cfg: ([float(x) for x in ev.period["siamese_loss"]] if "siamese_loss" in ev.period
                                    else None)),
)


def _own(value):
    """A fresh copy of a checkpoint's nested lists (what is appended to later is the trainer's own)."""
    return [_own(x) for x in value] if isinstance(value, (list, tuple, np.ndarray)) else value


class Outputs:
    """The series of S seeds x N members, as lists that grow by one value an evaluation."""

    def __init__(self, cfg, scheme, seeds: int):
        self.cfg, self.n, self.seeds = cfg, cfg.num_agents, seeds
        self.written = [s for s in SERIES if s.written(cfg, scheme)]
        self.values: dict[str, list[list[float]]] = {s.key: [[] for _ in range(seeds if s.per_seed else seeds * self.n)] for s in SERIES}

    def part(self, series: Series, k: int) -> list:
        """Seed k's part of a series: its members' lists, or (per seed) its one list."""
        values = self.values[series.key]
        return values[k] if series.per_seed else values[k * self.n:(k + 1) * self.n]

    def append(self, ev, scores) -> None:
        """One evaluation's values of every series."""
        for s in SERIES:
            new = s.values(ev, scores, self.cfg)
            if new is not None:
                for values, value in zip(self.values[s.key], new):
                    values.append(value)

    def save(self, files, k: int) -> None:
        """Seed k's files of the series this run writes, as they are now."""
        for s in self.written:
            getattr(files, s.save)(self.part(s, k))

    def state(self, k: int) -> dict:
        """Seed k's series, for its checkpoint."""
        return {s.key: self.part(s, k) for s in SERIES}

    def load(self, states: list[dict]) -> None:
        """The series of checkpoints (one per seed, in seed order); a series a checkpoint lacks starts empty."""
        for s in SERIES:
            if s.per_seed:
                self.values[s.key] = [_own(st.get(s.key, [])) for st in states]
            else:
                self.values[s.key] = [_own(c) for st in states for c in st.get(s.key, [[]] * len(st["curves"]))]
