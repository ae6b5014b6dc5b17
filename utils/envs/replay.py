"""Environments in a checkpoint: how each one's current episode began, and how to rebuild it exactly.

Environments cannot be pickled in general (Box2D worlds, MuJoCo warm-starts), so a checkpoint
stores, per environment, how the current episode began (the reset seed, or the state of the
environment's random generator just before the reset) and the actions taken since. Resuming
re-creates the environment, resets it the same way and replays those actions: MuJoCo and Box2D
are deterministic, so this reaches the very same state, including the time-limit counter.

An Atari game with lives is several learner episodes (``atari.EpisodicLife``: a lost life ends the episode, the
next ``reset()`` goes on with the game), so its log starts where the game began and holds a ``RESET`` marker where
a learner episode ended inside it; replaying the steps and those resets rebuilds the emulator, the frame skip's
buffer, the frame stack and the lives exactly (the games are deterministic without sticky actions). A game that
began after another one ended also keeps the emulator's state at that game over, random generator included
(ale-py's ``cloneState(include_rng=True)``, 14 KB): the new game's reset goes through the emulator's own generator,
which a fresh emulator has at another state (until 2026-11-27 a Pong run could not resume once its first game had
ended).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from ..errors import UsageError
from .atari import episodic_life
from .registry import make_env

RESET = -1  # in a log of discrete actions: the learner episode ended here and reset() went on with the same game


@dataclass
class EpisodeLog:
    """How one environment's current episode started, and the actions taken in it so far."""

    seed: int | None  # reset(seed=...) for the first episode
    rng_state: dict | None = None  # else: the env's np_random state just before reset()
    actions: list = field(default_factory=list)
    emulator: torch.Tensor | None = None  # Atari, after a game over: the emulator's state just before reset()

    @staticmethod
    def before_reset(env) -> EpisodeLog:
        ale = getattr(env.unwrapped, "ale", None)
        emulator = None if ale is None else \
            torch.frombuffer(bytearray(ale.cloneState(include_rng=True).serialize()), dtype=torch.uint8)
        return EpisodeLog(None, env.unwrapped.np_random.bit_generator.state, emulator=emulator)

    def to_dict(self) -> dict:
        actions = torch.as_tensor(np.asarray(self.actions, dtype=np.float32)) if self.actions else torch.zeros(0)
        return {"seed": self.seed, "rng_state": self.rng_state, "actions": actions,
                **({"emulator": self.emulator} if self.emulator is not None else {})}


def start_episode(env, log: dict, base_seed: int, env_id: str = "the environment"):
    """Begin ``env``'s episode the way the checkpoint's ``log`` says it began (a seeded reset, or a reset from the
    generator's saved state, and for Atari the emulator as it was); its first observation."""
    if log["seed"] is not None:
        return env.reset(seed=int(log["seed"]))[0]
    env.reset(seed=base_seed)  # creates the generator, whose state is then replaced
    env.unwrapped.np_random.bit_generator.state = log["rng_state"]
    if log.get("emulator") is not None:  # Atari: the emulator as it was at the game over, its generator too
        import ale_py
        try:
            env.unwrapped.ale.restoreState(ale_py.ALEState(log["emulator"].numpy().tobytes()))
        except Exception:  # noqa: BLE001  another ale-py's state, or a damaged one: nanobind raises SystemError
            raise UsageError(f"cannot restore {env_id}'s emulator from the checkpoint (written by another ale-py?); "
                             "start over with --overwrite") from None
    if (life := episodic_life(env)) is not None:  # the run's reset began a new game; the seeded reset above
        life.game_over = True  # left the wrapper "in a game", whose reset would take a no-op step instead
    return env.reset()[0]


def check_restored(env_id: str, obs, expected_obs: np.ndarray) -> None:
    """A UsageError unless replaying reached the observation the checkpoint holds."""
    if not np.array_equal(np.asarray(obs, dtype=expected_obs.dtype), expected_obs):
        raise UsageError(f"cannot restore {env_id} exactly from the checkpoint (is the environment deterministic, "
                         "and the same version?); start over with --overwrite")


def restore_env(env_id: str, log: dict, base_seed: int, action_space_state: dict, expected_obs: np.ndarray,
                task: dict | None = None, **kinds):
    """Re-create an environment (playing ``task``, see ``variants.task_for``; ``kinds``: ``make_env``'s) in the
    state a checkpoint describes; returns (env, obs, EpisodeLog)."""
    env = make_env(env_id, task, **kinds)
    obs = start_episode(env, log, base_seed, env_id)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)  # the log holds its actions as floats
    actions = [int(a) if discrete else a.numpy() for a in log["actions"]]
    for a in actions:
        if discrete and a == RESET:  # a lost life inside the game (Atari): the same reset() the run called
            obs, _ = env.reset()
        else:
            obs, *_ = env.step(a)
    env.action_space.np_random.bit_generator.state = action_space_state
    check_restored(env_id, obs, expected_obs)
    return env, obs, EpisodeLog(log["seed"], log["rng_state"], actions, log.get("emulator"))
