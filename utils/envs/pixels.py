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

from algorithms.common.observations import Part, unpack  # noqa: F401  (unpack: the learners' side of the packing)

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


def keep_pendulum_arrow() -> None:
    """Gymnasium's Pendulum renderer reads its arrow picture (assets/clockwise.png) from disk at every frame: about
    40 % of a pixel step here. From the first call on, ``pygame.image.load`` gives that one file's first reading
    again (the renderer only scales and flips copies of it, so every frame is the same, bit for bit); any other
    file is read as before."""
    try:
        import pygame
    except ImportError:  # nothing to keep: a task that renders without pygame
        return
    if hasattr(pygame.image.load, "without_keeping"):  # installed already
        return
    from gymnasium.envs.classic_control import pendulum

    arrow, read, kept = os.path.join(os.path.dirname(pendulum.__file__), "assets/clockwise.png"), pygame.image.load, []

    def load(file, *args, **kwargs):
        if file != arrow or args or kwargs:
            return read(file, *args, **kwargs)
        if not kept:
            kept.append(read(file))
        return kept[0]

    load.without_keeping = read  # the loader underneath
    pygame.image.load = load


def rendering(base: str, **kwargs) -> gym.Env:
    """The base task drawing ``rgb_array`` frames with pygame off screen (no display or sound device: SDL would
    complain without one)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    keep_pendulum_arrow()
    return gym.make(base, render_mode="rgb_array", **kwargs)


def make_pixels(base: str, size: int = SIZE, frames: int = FRAMES, render_mode: str | None = None,
                **kwargs) -> gym.Env:
    # render_mode: the base always renders rgb_array (its frames are the observations), which is also what a film of
    # the task (utils.play asks for "rgb_array") shows
    env = GrayResize(RenderObservation(rendering(base, **kwargs)), size)
    return gym.wrappers.FrameStackObservation(env, frames)


# Dict observations (several sensors): id -> (base, camera sizes, the base observation's entries read as a vector)
SENSORS = {"SensorPendulum-v1": ("Pendulum-v1", {"camera": 84, "overview": 48}, (2,))}


class SensorObservations(gym.Wrapper):
    """A control task seen by several sensors at once, as a Dict observation: cameras (the base's ``rgb_array``
    frame, grey, area-averaged to each camera's size, its last ``frames`` stacked as ``make_pixels`` stacks them,
    a reset's frame repeated) and ``vector``, the chosen entries of the base's own observation (Pendulum: the
    angular velocity, entry 2 of [cos, sin, velocity]). ``metadata["frame_stacks"]`` names the cameras."""

    def __init__(self, env: gym.Env, cameras: dict[str, int], vector: tuple[int, ...], frames: int = FRAMES):
        super().__init__(env)
        picture = RenderObservation(env)  # its observation() alone: the rendered frame
        self.render_frame = picture.observation
        self.shrink = {name: GrayResize(picture, size).observation for name, size in cameras.items()}
        self.vector, self.frames = list(vector), int(frames)
        parts = {name: gym.spaces.Box(0, 255, (frames, size, size), np.uint8) for name, size in cameras.items()}
        low, high = env.observation_space.low[self.vector], env.observation_space.high[self.vector]
        parts["vector"] = gym.spaces.Box(low, high, (len(self.vector),), np.float32)
        self.observation_space = gym.spaces.Dict(parts)
        self.metadata = {**env.metadata, "frame_stacks": tuple(cameras)}
        self.stacks: dict[str, np.ndarray] = {}

    def observe(self, state: np.ndarray, reset: bool) -> dict:
        frame = np.asarray(self.render_frame(None), dtype=np.uint8)
        for name, shrink in self.shrink.items():
            small = shrink(frame)
            if reset:
                self.stacks[name] = np.repeat(small[None], self.frames, axis=0)
            else:
                self.stacks[name] = np.concatenate([self.stacks[name][1:], small[None]])
        return {**{k: v.copy() for k, v in self.stacks.items()},
                "vector": np.asarray(state, dtype=np.float32)[self.vector]}

    def reset(self, **kwargs):
        state, info = self.env.reset(**kwargs)
        return self.observe(state, True), info

    def step(self, action):
        state, reward, terminated, truncated, info = self.env.step(action)
        return self.observe(state, False), reward, terminated, truncated, info


def make_sensors(base: str, cameras: dict[str, int], vector: tuple[int, ...], render_mode: str | None = None,
                 **kwargs) -> gym.Env:
    return SensorObservations(rendering(base, **kwargs), cameras, vector)


def _register() -> None:
    for env_id, base in PIXEL.items():
        if env_id in gym.registry:
            continue
        # the base's gym.make brings its own TimeLimit: none again here
        gym.register(env_id, entry_point=make_pixels, kwargs={"base": base})
    for env_id, (base, cameras, vector) in SENSORS.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=make_sensors, kwargs={"base": base, "cameras": cameras, "vector": vector})


_register()


def base_of(env_id: str) -> str | None:
    """The Gymnasium id a pixel or sensor task pictures (None for other ids)."""
    return PIXEL.get(env_id) or SENSORS.get(env_id, (None,))[0]


def parts_of(space: gym.spaces.Dict, stacks=()) -> tuple[Part, ...]:
    """The parts of a Dict of Boxes, in its order, packed one after another: images (3-d uint8, channel first) and
    vectors (1-d); anything else is a ValueError."""
    parts, start = [], 0
    for key, sub in space.spaces.items():
        shape = tuple(int(x) for x in getattr(sub, "shape", None) or ())
        image = isinstance(sub, gym.spaces.Box) and len(shape) == 3 and sub.dtype == np.uint8
        if not image and not (isinstance(sub, gym.spaces.Box) and len(shape) == 1):
            raise ValueError(f"observation part {key!r} is {sub}; parts must be images (uint8, channel first) or "
                             "vectors")
        parts.append(Part(key, shape, image and key in stacks, start))
        start += int(np.prod(shape))
    return tuple(parts)


class PackedSensors(gym.ObservationWrapper):
    """A Dict observation of images and vectors as one float32 vector, the parts one after another in the Dict's
    order (the environment workers, evaluations and checkpoints move one array; pixel values stay exact in float32).
    ``parts`` says where each lies; the replay learners unpack it (``unpack``)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.parts = parts_of(env.observation_space, env.metadata.get("frame_stacks", ()))
        size = sum(p.size for p in self.parts)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def observation(self, observation):
        return np.concatenate([np.asarray(observation[p.key], dtype=np.float32).reshape(-1) for p in self.parts])


def layout_of(env_id: str, env) -> tuple[Part, ...] | None:
    """The parts of ``env_id``'s observations as a replay learner reads them (``env``: the environment ``make_env``
    gives): a pixel task's one frame stack, a Dict task's packed parts; None for vector tasks."""
    if env_id in PIXEL:
        return (Part("pixels", tuple(int(x) for x in env.observation_space.shape), True),)
    return getattr(env, "parts", None)
