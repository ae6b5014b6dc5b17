"""Atari 2600 games through the Arcade Learning Environment (ale-py), with the DeepMind preprocessing.

``make_atari(env_id, training)`` returns an environment whose observations are the last four frames, each
84x84 grayscale, channel first, uint8 of shape (4, 84, 84); one step repeats the action for four emulator frames.
A training environment also ends the learner's episode at every lost life (the game itself goes on) and clips
rewards to their sign; an evaluation environment plays whole games and returns the game's own score.

The wrappers, innermost first (``wrap_atari`` applies them to a raw environment):

1. ``NoopReset``: a reset plays 1 to 30 NOOP frames, the number drawn from the environment's own seeded
   ``np_random``, so the start states differ from game to game and a seeded reset is reproducible;
2. ``MaxAndSkip``: an action is repeated for 4 frames, the rewards summed, and the observation is the
   pixel-wise maximum of the last two frames (some games draw objects on alternate frames only);
3. ``TimeLimit`` when a limit is set (see ``make_atari``), counting the learner's steps of a whole game;
4. ``EpisodicLife`` (training only): a lost life returns terminated=True, and the next ``reset`` continues the
   same game with a NOOP step instead of restarting it; a real game over restarts the game;
5. ``FireReset``, for games whose actions include FIRE: a reset (a real one or the continuing one of 4) presses
   FIRE, then action 2, which the games that wait for a button need to start or to serve again after a lost life;
6. ``GrayResize``: RGB to luminance, then area-averaged down to 84x84 (the integer result of averaging the
   covered pixels with their overlap as weights, the rule of OpenCV's INTER_AREA; no OpenCV needed);
7. ``ClipReward`` (training only): the reward becomes its sign, -1, 0 or 1 (the game's reward stays in
   ``info["raw_reward"]``);
8. gymnasium's ``FrameStackObservation`` with 4 frames (the first observation of an episode repeated at a reset).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

NOOP_MAX = 30
FRAME_SKIP = 4
SCREEN = 84
STACK = 4

_state: dict[str, bool] = {}


def register() -> None:
    """Registers the ALE environments (the ``ALE/...`` ids and the ``...NoFrameskip-v4`` style ones) with
    Gymnasium. Cheap and idempotent; without ale-py installed it does nothing and ``available()`` is False."""
    if "available" in _state:
        return
    try:
        import ale_py
    except ImportError:
        _state["available"] = False
        return
    gym.register_envs(ale_py)
    _state["available"] = True


def available() -> bool:
    """Whether ale-py is installed (and so its environments registered)."""
    register()
    return _state["available"]


def is_atari(env_id: str) -> bool:
    """True for ``ALE/...`` ids and for registered ids created by ale-py (e.g. ``PongNoFrameskip-v4``)."""
    if env_id.startswith("ALE/"):
        return True
    register()
    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return False
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "") or ""
    return module == "ale_py" or module.startswith("ale_py.")


def make_atari(env_id: str, training: bool, **kwargs: Any) -> gym.Env:
    """The game ``env_id`` with the DeepMind preprocessing (see this module's docstring): observations uint8
    of shape (4, 84, 84), 4 frames a step, no-op starts, FIRE at a reset where the game has it; with
    ``training`` also one learner episode per life and rewards clipped to their sign.

    The raw game is created without a frame skip of its own (``frameskip=1``, the wrappers skip) and without
    sticky actions (``repeat_action_probability=0.0``): ``ALE/X-v5`` would otherwise repeat the previous action
    with probability 0.25 at every frame (and skip 4 frames itself); both are turned off to match the
    ``XNoFrameskip-v4`` games of the reference, which have neither. ``repeat_action_probability`` may still be
    given to bring sticky actions back (the protocol of Machado et al., 2018); a ``frameskip`` other than 1 is
    refused. The other keyword arguments go to ``gymnasium.make`` (``full_action_space``, ``mode``, ...).

    Time limit: ``max_episode_steps`` (a keyword argument, else the registered spec's, which the ALE ids leave
    unset) counts the learner's steps of 4 frames over a whole game, lives included (and the steps a reset
    takes: the continuing reset's no-op, FIRE and action 2), and truncates the game;
    ``env.spec.max_episode_steps`` tells it (None without one). The emulator's own limit,
    ``max_num_frames_per_episode`` (108000 frames, 30 minutes, for the registered ids), truncates too.
    """
    if not available():
        raise gym.error.DependencyNotInstalled(f"{env_id} needs ale-py: pip install 'ale-py>=0.9'")
    kwargs = dict(kwargs)
    if kwargs.setdefault("frameskip", 1) != 1:
        raise ValueError(f"frameskip={kwargs['frameskip']!r}: the preprocessing skips frames itself, the game must not")
    kwargs.setdefault("repeat_action_probability", 0.0)
    spec = gym.spec(env_id)
    limit = kwargs.pop("max_episode_steps", spec.max_episode_steps)
    # the raw game without a TimeLimit: the limit is applied above the frame skip, in the learner's steps
    env = gym.make(replace(spec, max_episode_steps=None), **kwargs)
    return wrap_atari(env, training, max_episode_steps=limit)


def wrap_atari(env: gym.Env, training: bool, max_episode_steps: int | None = None) -> gym.Env:
    """The preprocessing of ``make_atari`` applied to a raw ALE game (RGB observations, one frame a step)."""
    env = NoopReset(env, NOOP_MAX)
    env = MaxAndSkip(env, FRAME_SKIP)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    if training:
        env = EpisodicLife(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireReset(env)
    env = GrayResize(env, SCREEN)
    if training:
        env = ClipReward(env)
    return gym.wrappers.FrameStackObservation(env, STACK)


def _lives(env: gym.Env) -> int:
    return int(env.unwrapped.ale.lives())


class NoopReset(gym.Wrapper):
    """A reset is followed by 1 to ``noop_max`` NOOP frames, drawn from the game's ``np_random``; ``noops``
    holds the last number drawn."""

    def __init__(self, env: gym.Env, noop_max: int = NOOP_MAX):
        super().__init__(env)
        if env.unwrapped.get_action_meanings()[0] != "NOOP":
            raise ValueError(f"action 0 of {env} is not NOOP")
        self.noop_max = noop_max
        self.noops = 0

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.noops = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1))
        for _ in range(self.noops):
            obs, _, terminated, truncated, step_info = self.env.step(0)
            info = {**info, **step_info}  # the frame counters of now, the reset's other keys ("seeds") kept
            if terminated or truncated:  # a game over within the no-ops: restart, and go on with the rest of them
                obs, info = self.env.reset()
        return obs, info


class MaxAndSkip(gym.Wrapper):
    """One step repeats the action for ``skip`` frames: the rewards are summed, and the observation is the
    pixel-wise maximum of the step's last two frames (the last frame alone after a game ended at the first)."""

    def __init__(self, env: gym.Env, skip: int = FRAME_SKIP):
        super().__init__(env)
        self.skip = skip

    def step(self, action):
        total, frames = 0.0, []
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            frames = [frames[-1], obs] if frames else [obs]
            if terminated or truncated:
                break
        obs = frames[-1] if len(frames) == 1 else np.maximum(frames[0], frames[1])
        return obs, total, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life ends the learner's episode (terminated=True) but not the game: the next ``reset`` takes a
    NOOP step and goes on from there. A real game over (terminated or truncated by the game), or a reset with a
    seed or options, restarts the game."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = _lives(self.env)
        # lives > 0: some games (Q*bert) show 0 lives for a few frames before their game over
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.game_over or seed is not None or options is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the game ended on the no-op step itself
                obs, info = self.env.reset()
        self.game_over = False
        self.lives = _lives(self.env)
        return obs, info


def episodic_life(env: gym.Env) -> EpisodicLife | None:
    """The ``EpisodicLife`` wrapper inside ``env``, or None (every environment that is not an Atari game in
    training)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, EpisodicLife):
            return env
        env = env.env
    return None


def continues_game(env: gym.Env) -> bool:
    """Whether the next ``reset()`` of ``env`` goes on with the game it is playing (a life was lost under
    ``EpisodicLife``) rather than starting a new one; False for every other environment."""
    life = episodic_life(env)
    return life is not None and not life.game_over


class FireReset(gym.Wrapper):
    """After a reset, FIRE, then action 2 (for games that wait for the button to start or serve); a step that
    ends the episode meanwhile resets again."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 3:
            raise ValueError(f"FireReset needs at least 3 actions, the game has {meanings}")
        self.fire = meanings.index("FIRE")

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for action in (self.fire, 2):
            obs, _, terminated, truncated, step_info = self.env.step(action)
            info = {**info, **step_info}
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


def area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of area averaging: output pixel o covers [o s, (o + 1) s) of the input (s =
    n_in / n_out), each input pixel weighted by its overlap with that interval, divided by s."""
    s = n_in / n_out
    lo = np.arange(n_out)[:, None] * s
    i = np.arange(n_in)[None, :]
    overlap = np.clip(np.minimum(lo + s, i + 1) - np.maximum(lo, i), 0.0, None)
    return (overlap / s).astype(np.float32)


def area_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """``area_matrix`` as taps: the input indices [K, n_out] and weights [K, n_out] of each output's K (at most)
    nonzero entries, padded with weight 0 (K = 3 for 210 or 160 -> 84)."""
    m = area_matrix(n_in, n_out)
    k = int((m > 0).sum(1).max())
    index, weight = np.zeros((k, n_out), dtype=np.intp), np.zeros((k, n_out), dtype=np.float32)
    for o in range(n_out):
        nonzero = np.flatnonzero(m[o])
        index[:len(nonzero), o], weight[:len(nonzero), o] = nonzero, m[o, nonzero]
    return index, weight


class GrayResize(gym.ObservationWrapper):
    """RGB frames [H, W, 3] to luminance (0.299 R + 0.587 G + 0.114 B), area-averaged to [size, size] uint8.

    Elementwise products over the few taps of each output pixel (``area_taps``), not matrix products: numpy hands
    those to its BLAS, whose own thread pool (as many threads as cores, whatever --threads says) stalls when the
    cores are busy (measured on 2 cores beside other jobs: 63 ms a frame instead of 0.3 ms)."""

    LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)

    def __init__(self, env: gym.Env, size: int = SCREEN):
        super().__init__(env)
        h, w, c = env.observation_space.shape
        if c != 3:
            raise ValueError(f"GrayResize needs RGB frames, got shape {env.observation_space.shape}")
        self.rows, self.cols = area_matrix(h, size), area_matrix(w, size).T
        (self.row_index, row_weight), (self.col_index, self.col_weight) = area_taps(h, size), area_taps(w, size)
        self.row_weight = row_weight[..., None]  # [K, size, 1]: one weight per output row
        self.observation_space = spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        rgb = obs.astype(np.float32)
        gray = rgb[..., 0] * self.LUMA[0] + rgb[..., 1] * self.LUMA[1] + rgb[..., 2] * self.LUMA[2]  # [H, W]
        tall = gray[self.row_index[0]] * self.row_weight[0]  # [size, W]: the rows averaged, tap by tap
        for index, weight in zip(self.row_index[1:], self.row_weight[1:]):
            tall += gray[index] * weight
        small = tall[:, self.col_index[0]] * self.col_weight[0]  # [size, size]: then the columns
        for index, weight in zip(self.col_index[1:], self.col_weight[1:]):
            small += tall[:, index] * weight
        return np.clip(np.rint(small), 0, 255).astype(np.uint8)


class ClipReward(gym.Wrapper):
    """The reward becomes its sign, -1.0, 0.0 or 1.0; the game's own reward is kept in ``info["raw_reward"]``."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info["raw_reward"] = reward
        return obs, float(np.sign(reward)), terminated, truncated, info
