"""What a run needs to continue after a crash as if it had never stopped.

Environments cannot be pickled in general (Box2D worlds, MuJoCo warm-starts), so a checkpoint
stores, per environment, how the current episode began (the reset seed, or the state of the
environment's random generator just before the reset) and the actions taken since. Resuming
re-creates the environment, resets it the same way and replays those actions: MuJoCo and Box2D
are deterministic, so this reaches the very same state, including the time-limit counter.
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .envs import make_env
from .errors import UsageError

FORMAT = 3  # 2: buffers stored per group [G, size, ...] (several seeds, DPD); 3: counter-based random streams
# RunConfig fields that must agree between a checkpoint and the run that resumes it
COMPATIBLE = ("policy", "env", "seed", "num_agents", "start_time_steps", "eval_freq", "eval_episodes",
              "batch_size", "buffer_size", "updates_per_step", "algo")


@dataclass
class EpisodeRecord:
    """How one environment's current episode started, and the actions taken in it so far."""

    seed: int | None  # reset(seed=...) for the first episode
    rng_state: dict | None = None  # else: the env's np_random state just before reset()
    actions: list = field(default_factory=list)

    @staticmethod
    def before_reset(env) -> "EpisodeRecord":
        return EpisodeRecord(None, env.unwrapped.np_random.bit_generator.state)

    def to_dict(self) -> dict:
        actions = torch.as_tensor(np.asarray(self.actions, dtype=np.float32)) if self.actions else torch.zeros(0)
        return {"seed": self.seed, "rng_state": self.rng_state, "actions": actions}


def restore_env(env_id: str, record: dict, base_seed: int, action_space_state: dict, expected_obs: np.ndarray):
    """Re-create an environment in the state a checkpoint describes; returns (env, obs, EpisodeRecord)."""
    env = make_env(env_id)
    if record["seed"] is not None:
        obs, _ = env.reset(seed=int(record["seed"]))
    else:
        env.reset(seed=base_seed)  # creates the generator, whose state is then replaced
        env.unwrapped.np_random.bit_generator.state = record["rng_state"]
        obs, _ = env.reset()
    actions = [a.numpy() for a in record["actions"]]
    for a in actions:
        obs, *_ = env.step(a)
    env.action_space.np_random.bit_generator.state = action_space_state
    if not np.array_equal(np.asarray(obs, dtype=expected_obs.dtype), expected_obs):
        raise UsageError(f"cannot restore {env_id} exactly from the checkpoint (is the environment deterministic, "
                         "and the same version?); start over with --overwrite")
    return env, obs, EpisodeRecord(record["seed"], record["rng_state"], actions)


def read_checkpoint(path: Path) -> dict:
    """Load a checkpoint; a damaged or foreign file is a UsageError."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UsageError(f"cannot read checkpoint {path} ({type(e).__name__}); it is damaged: "
                         "delete it, or start over with --overwrite") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UsageError(f"{path} is not a checkpoint of this program (format {FORMAT})")
    return state


def check_compatible(saved: dict, current: dict, path: Path) -> None:
    """The resumed run must be the same experiment (the step budget may grow)."""
    plain = lambda x: json.loads(json.dumps(x, sort_keys=True, default=str))  # noqa: E731  (tuples as in JSON records)
    for key in COMPATIBLE:
        if plain(saved.get(key)) != plain(current.get(key)):
            raise UsageError(f"{path} was made with {key}={saved.get(key)!r}, this run has "
                             f"{current.get(key)!r}; use the same flags, or --overwrite to start over")


class RunLock:
    """An exclusive lock on one run's name in its results folder, released by the OS if the process dies."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"another process is running this run now (lock {self.path}); "
                             "wait for it, or pick another --seed or --results_dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            os.close(self.fd)
            self.fd = None
