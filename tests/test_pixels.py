"""Control tasks seen through their pictures (utils/envs/pixels.py): PixelPendulum-v1 and PixelCartPole-v1 play the
base's dynamics on the base's seeds, observe its rendered frames grey, 84x84 and stacked oldest first, rebuild from
a checkpoint exactly (the replay learners on them: tests/test_image_replay.py)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import ac_main
from tests.runs import resumes_exactly
from utils.envs import pixels, registry  # noqa: F401  (registers the ids)
from utils.envs.atari import GrayResize


@pytest.mark.parametrize("env_id", ["PixelPendulum-v1", "PixelCartPole-v1"])
def test_pixel_tasks_play_the_base_and_see_its_frames(env_id):
    base_id = pixels.base_of(env_id)
    env, base = gym.make(env_id), gym.make(base_id, render_mode="rgb_array")
    shrink = GrayResize(pixels.RenderObservation(gym.make(base_id, render_mode="rgb_array")))  # its observation() alone
    obs, _ = env.reset(seed=5)
    base.reset(seed=5)
    assert env.observation_space.shape == obs.shape == (pixels.FRAMES, pixels.SIZE, pixels.SIZE)
    assert obs.dtype == np.uint8 and env.spec.max_episode_steps == base.spec.max_episode_steps
    assert all(np.array_equal(obs[0], obs[k]) for k in range(1, pixels.FRAMES))  # a reset repeats its frame
    rng = np.random.default_rng(0)
    for t in range(30):  # noqa: B007  (t read after the loop)
        action = rng.uniform(-2, 2, 1).astype(np.float32) if base_id.startswith("Pendulum") else int(rng.integers(2))
        before = obs
        obs, reward, terminated, truncated, _ = env.step(action)
        _, base_reward, base_terminated, base_truncated, _ = base.step(action)
        assert (reward, terminated, truncated) == (base_reward, base_terminated, base_truncated)
        np.testing.assert_array_equal(obs[:-1], before[1:])  # the newest frame last
        np.testing.assert_array_equal(obs[-1], shrink.observation(base.render()))  # the base's own picture
        if terminated or truncated:
            break
    assert not np.array_equal(obs[-1], before[0]) or t < 2  # the picture moves
    other, _ = gym.make(env_id).reset(seed=6)
    assert not np.array_equal(other, gym.make(env_id).reset(seed=5)[0])


def test_a2c_on_pixel_pendulum_resumes_exactly(tmp_path):
    args = ["--policy", "A2C", "--env", "PixelPendulum-v1", "--envs_per_agent", "2", "--max_time_steps", "400",
            "--eval_freq", "200", "--eval_episodes", "1", "--seed", "3", "--threads", "1", "--quiet"]
    resumes_exactly(ac_main, args, tmp_path, "*.npy", stop_at=200, every=100)


def test_pendulums_arrow_is_read_once_and_every_frame_is_the_same(monkeypatch):
    """Gymnasium's Pendulum reads its arrow picture at every frame; the pixel tasks and films keep the first reading
    (pixels.keep_pendulum_arrow). The frames equal, bit for bit, those of a Pendulum whose renderer reads it every
    time, and the file is read once."""
    import pygame

    reads = []

    def counting(file, *args, **kwargs):  # the real loader, counting what it reads (no cache on it)
        reads.append(str(file))
        return real(file, *args, **kwargs)

    real = pygame.image.load
    while hasattr(real, "without_keeping"):  # an earlier test's pixel task kept the arrow: the loader underneath
        real = real.without_keeping
    monkeypatch.setattr(pygame.image, "load", counting)

    def frames(env, n=40):
        env.reset(seed=3)
        rng = np.random.default_rng(3)
        out = []
        for _ in range(n):
            env.step(rng.uniform(-2, 2, (1,)).astype(np.float32))
            out.append(np.asarray(env.render()))
        env.close()
        return np.stack(out)

    plain = frames(gym.make("Pendulum-v1", render_mode="rgb_array"))
    assert sum(r.endswith("clockwise.png") for r in reads) == 40  # what Gymnasium does: a reading per frame
    reads.clear()
    kept = frames(pixels.rendering("Pendulum-v1"))
    assert sum(r.endswith("clockwise.png") for r in reads) == 1
    np.testing.assert_array_equal(kept, plain)
    assert plain.std() > 0
