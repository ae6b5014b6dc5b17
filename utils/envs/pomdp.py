"""Partially observed tasks, registered as Gymnasium ids: the standard POMDP benchmarks of recurrent off-policy RL.

- ``VelocityMasked{Base}``: the observation keeps only the position parts of the state (angles, coordinates,
  contacts) and drops every velocity, so a memoryless policy cannot tell where the system is going:
  Pendulum-v1 keeps (cos θ, sin θ); CartPole-v1 (x, θ); LunarLander-v3 and LunarLanderContinuous-v3
  (x, y, angle, the two leg contacts); Hopper-v5 its 5 joint positions (height, angles).
- ``Flickering{Base}``: the whole observation is replaced by zeros with probability p = 0.5 at every step and at
  the reset (``flicker=p`` as a keyword of ``gymnasium.make`` changes it), on the same bases.

The dynamics, rewards, time limits and action spaces are the base's: only what the agent sees changes, so a seed
starts in the very same state as on the base. The flicker's coin flips come from a generator drawn from the base's
own ``np_random`` after each reset, so an episode is reproducible from its reset (seed or generator state) and its
actions, as the checkpoints need (``utils.envs.replay``).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

FLICKER = 0.5  # the probability that an observation is blanked, by default

# base id -> the indices of the observation that are positions (what a velocity mask keeps)
POSITIONS: dict[str, tuple[int, ...]] = {
    "Pendulum-v1": (0, 1),  # cos(theta), sin(theta) | theta dot
    "CartPole-v1": (0, 2),  # x, theta | x dot, theta dot
    "LunarLander-v3": (0, 1, 4, 6, 7),  # x, y, angle, leg contacts | vx, vy, angular velocity
    "LunarLanderContinuous-v3": (0, 1, 4, 6, 7),
    "Hopper-v5": (0, 1, 2, 3, 4),  # z, torso, thigh, leg and foot angles | 6 velocities
}
MASKED = {f"VelocityMasked{base}": base for base in POSITIONS}
FLICKERING = {f"Flickering{base}": base for base in POSITIONS}


class VelocityMask(gym.ObservationWrapper):
    """Keep the observation's entries ``keep`` (its position parts)."""

    def __init__(self, env: gym.Env, keep: tuple[int, ...]):
        super().__init__(env)
        self.keep = np.asarray(keep)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[self.keep], space.high[self.keep], dtype=space.dtype)

    def observation(self, observation):
        return observation[self.keep]


class Flicker(gym.Wrapper):
    """Replace the observation by zeros with probability ``p`` at every step and reset."""

    def __init__(self, env: gym.Env, p: float = FLICKER):
        super().__init__(env)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"flicker={p!r}: a probability in [0, 1]")
        self.p = float(p)
        self.coins: np.random.Generator | None = None

    def _seen(self, obs):
        blank = self.coins.random() < self.p
        return np.zeros_like(obs) if blank else obs

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        # after the base's reset, which drew the initial state: the episode starts as on the base
        self.coins = np.random.default_rng(int(self.env.unwrapped.np_random.integers(2**63)))
        return self._seen(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._seen(obs), reward, terminated, truncated, info


def make_masked(base: str, **kwargs) -> gym.Env:
    return VelocityMask(gym.make(base, **kwargs), POSITIONS[base])


def make_flickering(base: str, flicker: float = FLICKER, **kwargs) -> gym.Env:
    return Flicker(gym.make(base, **kwargs), flicker)


def _register() -> None:
    for ids, entry in ((MASKED, make_masked), (FLICKERING, make_flickering)):
        for env_id, base in ids.items():
            if env_id in gym.registry:
                continue
            try:
                gym.spec(base)
            except gym.error.Error:  # a base this Gymnasium lacks
                continue
            # the base's gym.make brings its own TimeLimit: none again here
            gym.register(env_id, entry_point=entry, kwargs={"base": base})


_register()


def base_of(env_id: str) -> str | None:
    """The Gymnasium id a partially observed task hides part of (None for other ids)."""
    return MASKED.get(env_id) or FLICKERING.get(env_id)
