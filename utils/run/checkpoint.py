"""What a run needs to continue after a crash as if it had never stopped: the checkpoint file's format and
checks, and the lock that keeps two processes off one run. (The environments' part: ``utils.envs.replay``.)
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import fields
from pathlib import Path

import torch

from ..errors import DISK_FULL, DiskFull, UsageError
from ..io import missing_folders, remove_if_empty
from ..settings import filled
from .config import RunConfig

FORMAT = 3  # 2: buffers stored per group [G, size, ...] (several seeds, DPD); 3: counter-based random streams
# RunConfig fields that must agree between a checkpoint and the run that resumes it (declared on the fields: agreed())
COMPATIBLE = tuple(f.name for f in fields(RunConfig) if f.metadata.get("agree"))
# fields newer than some checkpoints and records: what those meant (declared on the fields: agreed(older=...))
DEFAULTS = {f.name: f.metadata["older"] for f in fields(RunConfig) if "older" in f.metadata}


def read_checkpoint(path: Path, hint: str = "delete it, or start over with --overwrite") -> dict:
    """Load a checkpoint; a damaged or foreign file is a UsageError (``hint``: what to do about a damaged one)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UsageError(f"cannot read checkpoint {path} ({type(e).__name__}); it is damaged: {hint}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UsageError(f"{path} is not a checkpoint of this program (format {FORMAT})")
    return state


def filled_algo(policy, algo):
    """A run's algorithm settings with those its record does not name at their defaults (the settings classes of
    utils/run/onpolicy/settings.py and utils/run/replay/settings.py); a policy this program does not know as
    recorded. SAC's class is the one ``RunConfig.algo_settings()`` reads the record with (the discrete-action form
    where only it takes the record's keys), so two equal records stay equal. Resume compares these as JSON (a
    record's lists are a run's tuples)."""
    from ..naming import ALGORITHM, algorithm_of

    spec = ALGORITHM.get(algorithm_of(policy)) if isinstance(policy, str) else None
    if spec is None or not spec.settings or not isinstance(algo, dict):
        return algo
    cls = spec.form("settings")
    if spec.settings_discrete:
        from .config import AlgoSettings

        try:
            cls = type(AlgoSettings.of(algorithm_of(policy), algo).own)
        except (TypeError, ValueError):  # a record these settings cannot read: compared as recorded
            return algo
    return filled(cls, algo)


def check_compatible(saved: dict, current: dict, path: Path) -> None:
    """The resumed run must be the same experiment (the step budget may grow)."""
    plain = lambda x: json.loads(json.dumps(x, sort_keys=True, default=str))  # noqa: E731  (tuples as in JSON records)
    for key in COMPATIBLE:
        before, now = saved.get(key, DEFAULTS.get(key)), current.get(key, DEFAULTS.get(key))
        if key == "algo":  # typed settings: what a record does not name is the setting's default
            before, now = filled_algo(saved.get("policy"), before), filled_algo(current.get("policy"), now)
        if key == "sharing" and isinstance(before, dict) and isinstance(now, dict):  # likewise
            from .sharing import SharingSettings

            before, now = filled(SharingSettings, before), filled(SharingSettings, now)
        if plain(before) != plain(now):
            if isinstance(before, dict) and isinstance(now, dict):  # name the setting that differs, not the dict
                b, n = plain(before), plain(now)
                sub = sorted(k for k in set(b) | set(n) if b.get(k) != n.get(k))[0]
                flag = f"per_{sub}" if key == "per" else sub  # --prioritized's settings are --per_*
                hint = ""
                if key == "per" and sub == "beta_steps" and saved.get("max_time_steps") == b.get(sub):
                    # --per_beta_steps defaults to the run's length: a grown budget would move beta's schedule
                    hint = (f" (its default, the run's --max_time_steps; to grow the budget on the schedule the run "
                            f"had, give --per_beta_steps {b.get(sub)})")
                raise UsageError(f"{path} was made with --{flag} {b.get(sub)!r}{hint}, this run has {n.get(sub)!r}; "
                                 "use the same flags, or --overwrite to start over")
            raise UsageError(f"{path} was made with {key}={before!r}, this run has "
                             f"{now!r}; use the same flags, or --overwrite to start over")


class RunLock:
    """An exclusive lock on one run's name in its results folder, released by the OS if the process dies. The folders
    it had to create for the lock file are removed on release when the run left nothing in them (a run refused or
    stopped before its first file, by a full disk say, leaves no empty folder)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None
        self.created: list[Path] = []

    def acquire(self) -> None:
        self.created = missing_folders(self.path.parent)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"another process is running this run now (lock {self.path}); "
                             "wait for it, or pick another --seed or --results_dir") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as e:  # a full disk: the lock file, and the folders made for it, go again
            self.fd = fd
            self.release()
            if e.errno in DISK_FULL:
                raise DiskFull(e.errno, e.strerror, str(self.path)) from e
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            os.close(self.fd)
            self.fd = None
            remove_if_empty(self.created)
