"""Control tasks seen through their pictures, registered as Gymnasium ids: ``Pixel{Base}`` (PixelPendulum-v1,
PixelCartPole-v1) observes the base's ``rgb_array`` frame instead of its state, grey and area-averaged to 84x84 (as
the Atari frames, ``atari.GrayResize``), the last ``FRAMES`` of them stacked, uint8 of shape (3, 84, 84) oldest first
(one picture holds no velocity: the stack does). Dynamics, rewards, time limits, action spaces and seeds are the
base's, so seed s starts in the very state it starts in on the base; a frame is a function of the state alone, so an
episode is rebuilt from its reset and its actions, as checkpoints need (``utils.envs.replay``).

The networks of the on-policy family take these frames as they take Atari's (the Nature CNN); ``size=`` and
``frames=`` as keywords of ``gymnasium.make`` change the resolution and the stack.
"""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

from .atari import GrayResize

SIZE, FRAMES = 84, 3
PIXEL = {f"Pixel{base}": base for base in ("Pendulum-v1", "CartPole-v1")}


class RenderObservation(gym.ObservationWrapper):
    """The base's ``rgb_array`` frame [H, W, 3] uint8 as the observation (the base made with render_mode
    "rgb_array")."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise ValueError(f"{env} renders {env.render_mode!r}; RenderObservation needs 'rgb_array'")
        env.reset(seed=0)  # a frame's size is known once the renderer has drawn one
        shape = np.asarray(env.render()).shape
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)

    def observation(self, observation):
        return np.asarray(self.env.render(), dtype=np.uint8)


def make_pixels(base: str, size: int = SIZE, frames: int = FRAMES, **kwargs) -> gym.Env:
    # the renderers draw with pygame off screen: no display or sound device (SDL would complain without one)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    env = GrayResize(RenderObservation(gym.make(base, render_mode="rgb_array", **kwargs)), size)
    return gym.wrappers.FrameStackObservation(env, frames)


def _register() -> None:
    for env_id, base in PIXEL.items():
        if env_id in gym.registry:
            continue
        # the base's gym.make brings its own TimeLimit: none again here
        gym.register(env_id, entry_point=make_pixels, kwargs={"base": base})


_register()


def base_of(env_id: str) -> str | None:
    """The Gymnasium id a pixel task pictures (None for other ids)."""
    return PIXEL.get(env_id)
