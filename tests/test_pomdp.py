"""Partially observed tasks (utils/envs/pomdp.py): what the agent sees is the base's observation, masked or
blanked, and nothing else changes; runs on them are reproducible and resume exactly."""
import gymnasium as gym
import numpy as np
import pytest

import DASE_main
from utils.envs import pomdp
from utils.envs.registry import make_env, resolve_env_id
from utils.run import Trainer


def twins(env_id: str, base: str, seed: int, steps: int, **kwargs):
    """The task and its base played side by side with the same seed and actions: (obs, base obs, rewards, ends)."""
    env, ref = gym.make(env_id, **kwargs), gym.make(base)
    out = [[env.reset(seed=seed)[0]], [ref.reset(seed=seed)[0]], [], []]
    env.action_space.seed(seed)
    for _ in range(steps):
        a = env.action_space.sample()
        o, r, t, tr, _ = env.step(a)
        o2, r2, t2, tr2, _ = ref.step(a)
        out[0].append(o)
        out[1].append(o2)
        out[2].append((r, r2))
        out[3].append((t, tr, t2, tr2))
        if t or tr:
            break
    return out


@pytest.mark.parametrize("env_id", sorted(pomdp.MASKED))
def test_velocity_masked_tasks_show_the_positions_of_the_base_state(env_id):
    base = pomdp.MASKED[env_id]
    if base == "Hopper-v5":
        pytest.importorskip("mujoco")
    seen, full, rewards, ends = twins(env_id, base, seed=7, steps=300)
    keep = list(pomdp.POSITIONS[base])
    assert len(seen) > 5 and gym.make(env_id).observation_space.shape == (len(keep),)
    for o, f in zip(seen, full):
        np.testing.assert_array_equal(o, f[keep])  # the base's state, its velocities dropped
    assert all(r == r2 for r, r2 in rewards) and all(e[:2] == e[2:] for e in ends)
    dropped = [i for i in range(len(full[0])) if i not in keep]
    assert np.ptp(np.asarray(full)[:, dropped]) > 0  # what was dropped did move (velocities are informative)


def test_the_kept_parts_are_the_positions():
    assert pomdp.POSITIONS["Pendulum-v1"] == (0, 1) and pomdp.POSITIONS["CartPole-v1"] == (0, 2)
    # LunarLander: x, y, angle and the leg contacts; vx, vy and the angular velocity are indices 2, 3, 5
    assert set(range(8)) - set(pomdp.POSITIONS["LunarLanderContinuous-v3"]) == {2, 3, 5}


def test_flickering_blanks_whole_observations_at_its_rate_and_changes_nothing_else():
    seen, full, rewards, ends = twins("FlickeringPendulum-v1", "Pendulum-v1", seed=3, steps=200)
    blank = [not o.any() for o in seen]
    for o, f, b in zip(seen, full, blank):
        assert b or np.array_equal(o, f)  # all zeros, or the base's observation as it is
    assert all(r == r2 for r, r2 in rewards) and all(e[:2] == e[2:] for e in ends)
    # 201 fair coins: the share of blanks is within 0.5 +- 0.15 with probability > 0.99999
    assert 0.35 < np.mean(blank) < 0.65
    rare = twins("FlickeringPendulum-v1", "Pendulum-v1", seed=3, steps=200, flicker=0.1)[0]
    assert 0.0 < np.mean([not o.any() for o in rare]) < 0.25
    never = twins("FlickeringCartPole-v1", "CartPole-v1", seed=3, steps=50, flicker=0.0)
    assert all(np.array_equal(o, f) for o, f in zip(never[0], never[1]))
    with pytest.raises(ValueError, match="flicker"):
        gym.make("FlickeringPendulum-v1", flicker=1.5)


def test_flickering_is_reproducible_from_the_reset():
    """The same seed gives the same blanks; a reset without a seed draws new ones from the base's generator, so a
    checkpoint's (generator state, actions) rebuild it."""
    a = twins("FlickeringPendulum-v1", "Pendulum-v1", seed=11, steps=100)[0]
    b = twins("FlickeringPendulum-v1", "Pendulum-v1", seed=11, steps=100)[0]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    env = gym.make("FlickeringPendulum-v1")
    env.reset(seed=11)
    state = env.unwrapped.np_random.bit_generator.state
    first = [env.reset()[0]] + [env.step(np.array([0.5]))[0] for _ in range(30)]
    env.unwrapped.np_random.bit_generator.state = state
    again = [env.reset()[0]] + [env.step(np.array([0.5]))[0] for _ in range(30)]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))


def test_the_ids_resolve_and_check_their_action_spaces():
    assert resolve_env_id("VelocityMaskedPendulum") == ("VelocityMaskedPendulum-v1", None)
    env = make_env("VelocityMaskedCartPole-v1", actions=("discrete",), who="A2C")
    assert env.observation_space.shape == (2,)
    from utils.errors import UsageError
    with pytest.raises(UsageError, match="Discrete"):
        make_env("VelocityMaskedCartPole-v1", actions=("box",), who="TD3")


def test_a_run_on_a_flickering_task_resumes_exactly(tmp_path):
    args = ["--policy", "DASE_TD3", "--env", "FlickeringPendulum-v1", "--max_time_steps", "900",
            "--start_time_steps", "300", "--eval_freq", "300", "--eval_episodes", "2", "--batch_size", "32",
            "--threads", "1", "--quiet", "--checkpoint_freq", "300", "--seed", "2"]
    run = lambda d, *more: Trainer(DASE_main.build_config(DASE_main.parse(  # noqa: E731
        args + ["--results_dir", str(tmp_path / d), *more])))
    full = run("full").run()
    run("cut").run(stop_at=450)  # mid-episode: the environment is rebuilt from its reset and actions
    cut = run("cut", "--resume").run()
    assert all(np.array_equal(a, b) for a, b in zip(full, cut)) and len(full[0]) == 4
