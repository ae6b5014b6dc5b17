"""EnvPool as the Atari engine (utils/envs/pool.py, --env_backend): the same game played by both engines with the
same scripted actions, a seed's games independent of the pool they are in, exact resume by replaying the actions,
and the refusals. The engine tests need EnvPool (requirements-atari.txt, which CI installs)."""
from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest

import ac_main
from tests.runs import refused_in_one_line, resumes_exactly, run
from utils.envs import atari, pool

envpool = pytest.importorskip("envpool")
pytestmark = pytest.mark.skipif(not atari.available(), reason="needs ale-py")


def ours(env_id: str) -> gym.Env:
    """atari.py's training preprocessing with exactly one no-op at a reset and no FIRE at a reset, so that both
    engines start from the same frame (EnvPool with noop_max 1 and use_fire_reset off)."""
    env = gym.make(replace(gym.spec(env_id), max_episode_steps=None), frameskip=1, repeat_action_probability=0.0)
    env = atari.EpisodicLife(atari.MaxAndSkip(atari.NoopReset(env, 1), atari.FRAME_SKIP))
    return gym.wrappers.FrameStackObservation(atari.ClipReward(atari.GrayResize(env)), atari.STACK)


def theirs(env_id: str):
    return envpool.make(pool.game_id(env_id), env_type="gymnasium", num_envs=1, env_seed=[0], episodic_life=True,
                        reward_clip=True, noop_max=1, use_fire_reset=False, repeat_action_probability=0.0)


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_both_engines_play_the_same_game_with_the_same_actions(env_id):
    """Pong to its game over (21 points, about 1000 steps of random play), Breakout to its first lost life: the same
    shapes and dtypes, frames oldest first, the same clipped rewards at every step, the episode ending at the same
    step, and frames equal but for a few pixels (grey conversion and resize round differently)."""
    a, b = ours(env_id), theirs(env_id)
    obs_a, obs_b = np.asarray(a.reset(seed=0)[0]), b.reset()[0][0]
    assert obs_a.shape == obs_b.shape == (4, 84, 84) and obs_a.dtype == obs_b.dtype == np.uint8
    rng = np.random.default_rng(1)
    off, rewards = [], []
    for t in range(5000):
        action = int(rng.integers(a.action_space.n))
        before_a, before_b = obs_a, obs_b
        obs_a, r_a, term_a, trunc_a, _ = a.step(action)
        obs_a = np.asarray(obs_a)
        out = b.step(np.array([action], dtype=np.int32))
        obs_b, r_b, term_b, trunc_b, info = out[0][0], out[1][0], out[2][0], out[3][0], out[4]
        for before, now in ((before_a, obs_a), (before_b, obs_b)):  # the stack shifts: the newest frame is last
            np.testing.assert_array_equal(now[:-1], before[1:])
        assert (r_a, term_a, trunc_a) == (r_b, term_b, trunc_b), f"step {t}"
        assert r_a in (-1.0, 0.0, 1.0)
        rewards.append(r_a)
        off.append(np.mean(np.abs(obs_a[-1].astype(int) - obs_b[-1].astype(int)) > 1))
        if term_a or trunc_a:
            break
    assert term_a, "no episode end within 5000 steps"
    assert atari._lives(a) == int(info["lives"][0])
    if env_id.startswith("Pong"):  # the game over: one side reached 21
        assert int(info["terminated"][0]) == 1 and max(rewards.count(1.0), rewards.count(-1.0)) == 21
    else:  # a lost life, not the game's end
        assert int(info["terminated"][0]) == 0 and atari._lives(a) == 4
    assert np.mean(off) < 1e-3 and max(off) < 0.02, (np.mean(off), max(off))


def test_a_seeds_games_do_not_depend_on_the_pool_they_are_in_and_resume_exactly():
    """Breakout (lives: learner episodes end inside a game) with random actions: environment seed 7 in a pool with
    another plays what it plays alone; a checkpoint taken mid-run restores, by replaying, a pool that goes on exactly
    as the uninterrupted one. An episode's end gives its last observation, and the pool is at the next one's first
    at once (EnvPool itself would reset at the next step)."""
    both = pool.EnvPoolEnvs("BreakoutNoFrameskip-v4", [3, 7], [100, 107], 1, threads=1)
    alone = pool.EnvPoolEnvs("BreakoutNoFrameskip-v4", [7], [107], 1, threads=1)
    rng = np.random.default_rng(0)
    actions = rng.integers(4, size=(300, 2))
    for t in range(150):
        out2, out1 = both.step(actions[t]), alone.step(actions[t, 1:])
        for x2, x1 in zip(out2, out1):
            np.testing.assert_array_equal(x2[1:], x1)
        for i in np.flatnonzero(out2[5]):  # an ended episode: its last observation returned, the next one's first kept
            assert not np.array_equal(out2[3][i], both.obs[i])
    assert both.episode_count[1] >= 1  # a life was lost: the replay crosses an episode end
    state = both.state_dict()
    restored = pool.EnvPoolEnvs("BreakoutNoFrameskip-v4", [3, 7], [100, 107], 1, threads=1)
    restored.load_state_dicts([both.state_dict(slice(0, 1)), both.state_dict(slice(1, 2))])
    np.testing.assert_array_equal(restored.obs, both.obs)
    assert restored.episode_count == state["episode_count"]
    for t in range(150, 300):
        for x, y in zip(both.step(actions[t]), restored.step(actions[t])):
            np.testing.assert_array_equal(x, y)
    for envs in (both, alone, restored):
        envs.close()


def test_evaluation_plays_seeded_whole_games_again_at_every_evaluation():
    """Evaluation games are made again from their episode seeds at every evaluation, so two evaluations of the
    same actions score the same; a finished game is not stepped again."""
    envs = pool.EnvPoolEnvs("PongNoFrameskip-v4", [1], [101], 2, threads=1)
    first = envs.eval_reset()
    for _ in range(20):
        envs.eval_step(np.zeros((1, 2), dtype=np.int64), np.array([[True, False]]))
    np.testing.assert_array_equal(envs.eval_obs[0, 1], first[0, 1])  # the inactive game did not move
    again = envs.eval_reset()
    np.testing.assert_array_equal(again, first)
    envs.close()


def test_an_atari_a2c_run_on_envpool_resumes_exactly_and_records_its_engine(tmp_path):
    args = ["--policy", "A2C", "--env", "PongNoFrameskip-v4", "--envs_per_agent", "4", "--max_time_steps", "1600",
            "--eval_freq", "800", "--eval_episodes", "1", "--seed", "2", "--threads", "1", "--quiet",
            "--env_backend", "envpool"]
    resumes_exactly(ac_main, args, tmp_path, "*.npy", stop_at=800, every=400)
    for folder in ("whole", "cut"):
        assert (tmp_path / folder / "A2C_PongNoFrameskip-v4_2_episodes.csv").read_text() == \
            (tmp_path / "whole" / "A2C_PongNoFrameskip-v4_2_episodes.csv").read_text()
    import json
    record = json.loads((tmp_path / "whole" / "A2C_PongNoFrameskip-v4_2.json").read_text())
    assert record["config"]["env_backend"] == "envpool" and record["versions"]["envpool"]


def test_an_atari_acer_run_resumes_exactly_through_its_packed_replay(tmp_path):
    """ACER's checkpoint holds its replay of frames (zlib-packed, algorithms/onpolicy/frame_store.py) and EnvPool's
    action log: stopped at 800 steps (the ring of 5 slots full and wrapping) and resumed, its curve and its saved
    model end bit for bit those of the run in one go, so every replayed batch after the resume was the stored one."""
    import torch

    args = ["--policy", "ACER", "--env", "PongNoFrameskip-v4", "--envs_per_agent", "4", "--n_steps", "20",
            "--buffer_size", "400", "--replay_start", "160", "--replay_ratio", "2", "--max_time_steps", "1600", "--eval_freq", "800",
            "--eval_episodes", "1", "--seed", "1", "--threads", "1", "--quiet", "--env_backend", "envpool",
            "--save_model"]
    for d in ("whole", "cut"):
        out = ["--results_dir", str(tmp_path / d), "--models_dir", str(tmp_path / d / "models")]
        if d == "whole":
            assert run(ac_main, *args, *out, "--checkpoint_freq", "0") == 0
        else:
            assert run(ac_main, *args, *out, "--checkpoint_freq", "400", "--stop_at", "800") == 0
            assert run(ac_main, *args, *out, "--checkpoint_freq", "400", "--resume") == 0
    curve = "ACER_PongNoFrameskip-v4_1.npy"
    np.testing.assert_array_equal(np.load(tmp_path / "cut" / curve), np.load(tmp_path / "whole" / curve))
    a, b = (torch.load(tmp_path / d / "models" / "ACER_PongNoFrameskip-v4_1.pt", weights_only=False)
            for d in ("whole", "cut"))
    params = [k for k, v in a["model"].items() if isinstance(v, torch.Tensor)]
    assert params and all(torch.equal(a["model"][k], b["model"][k]) for k in params)


def test_an_atari_acer_run_of_two_seeds_cut_and_resumed_seed_by_seed_equals_each_seed_alone(tmp_path):
    """Seeds 0 and 1 of an ACER Pong run in one process, stopped at 800 steps and resumed as two processes of one
    seed each (how a long run can spread over the cores), end with the weights of the uninterrupted two-seed run
    and of each seed run alone, bit for bit (convolutions member by member: algorithms/common/cnn.py)."""
    import torch

    args = ["--policy", "ACER", "--env", "PongNoFrameskip-v4", "--envs_per_agent", "4", "--n_steps", "20",
            "--buffer_size", "400", "--replay_start", "160", "--replay_ratio", "2", "--max_time_steps", "1600",
            "--eval_freq", "800", "--eval_episodes", "1", "--threads", "1", "--quiet", "--env_backend", "envpool",
            "--save_model"]

    def out(d):
        return ["--results_dir", str(tmp_path / d), "--models_dir", str(tmp_path / d / "models")]

    assert run(ac_main, *args, *out("both"), "--seeds", "0", "1") == 0
    assert run(ac_main, *args, *out("alone"), "--seed", "1") == 0
    cut = [*args, *out("cut"), "--checkpoint_dir", str(tmp_path / "ck"), "--checkpoint_freq", "400"]
    assert run(ac_main, *cut, "--seeds", "0", "1", "--stop_at", "800") == 0
    for seed in ("0", "1"):
        assert run(ac_main, *cut, "--seed", seed, "--resume") == 0

    def weights(d, seed):
        model = torch.load(tmp_path / d / "models" / f"ACER_PongNoFrameskip-v4_{seed}.pt", weights_only=False)["model"]
        return {k: v for k, v in model.items() if isinstance(v, torch.Tensor)}

    for seed, others in ((0, ("cut",)), (1, ("cut", "alone"))):
        want = weights("both", seed)
        assert want
        for d in others:
            got = weights(d, seed)
            assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), (d, seed)
    assert not torch.equal(weights("both", 0)["pi.weight"], weights("both", 1)["pi.weight"])


def test_the_default_engine(monkeypatch):
    """envpool for Atari games where it is installed (A2C, ACER), gymnasium for A3C, for other tasks and without it."""
    assert pool.backend_for(None, "PongNoFrameskip-v4", "A2C") == "envpool"
    assert pool.backend_for(None, "ALE/Breakout-v5", "ACER") == "envpool"
    assert pool.backend_for(None, "PongNoFrameskip-v4", "A3C") == "gymnasium"
    assert pool.backend_for(None, "CartPole-v1", "A2C") == "gymnasium"
    assert pool.game_id("ALE/SpaceInvaders-v5") == "SpaceInvaders-v5"
    monkeypatch.setattr(pool, "installed", lambda: False)
    assert pool.backend_for(None, "PongNoFrameskip-v4", "A2C") == "gymnasium"


@pytest.mark.parametrize("args, words", [
    (["--env", "CartPole-v1", "--env_backend", "envpool"], "--env_backend envpool serves Atari games"),
    (["--policy", "A3C", "--env", "PongNoFrameskip-v4", "--env_backend", "envpool"], "A3C's workers each step"),
])
def test_what_envpool_cannot_serve_is_refused_in_one_line(tmp_path, capsys, args, words):
    refused_in_one_line(ac_main, args, tmp_path, capsys, words)


def test_envpool_missing_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pool, "installed", lambda: False)
    refused_in_one_line(ac_main, ["--env", "PongNoFrameskip-v4", "--env_backend", "envpool"], tmp_path, capsys,
                        "EnvPool is not installed")


def test_a_gymnasium_checkpoint_does_not_resume_on_envpool(tmp_path, capsys):
    args = ["--policy", "A2C", "--env", "PongNoFrameskip-v4", "--envs_per_agent", "2", "--max_time_steps", "800",
            "--eval_freq", "400", "--eval_episodes", "1", "--threads", "1", "--quiet", "--results_dir", str(tmp_path),
            "--checkpoint_freq", "200"]
    assert run(ac_main, *args, "--env_backend", "gymnasium", "--stop_at", "400") == 0
    capsys.readouterr()
    assert run(ac_main, *args, "--resume") == 2
    err = capsys.readouterr().err.strip()
    assert "env_backend='gymnasium', this run has 'envpool'" in err and len(err.splitlines()) == 1


def test_an_envpool_row_is_a_whole_game_at_its_own_score():
    """As tests/test_episode_log.py's check on Gymnasium (whose no-op counts EnvPool does not share): Space Invaders
    with random actions logs one row per game, not per life, at the game's unclipped score (invaders are worth 5 to
    30; the learner's rewards are clipped to 1), and environment j's rows tile its steps."""
    from tests.test_episode_log import play_games
    envs = pool.EnvPoolEnvs("SpaceInvadersNoFrameskip-v4", [5, 6], [105], 1, threads=1)
    actions = np.random.default_rng(0).integers(envs.act_dim, size=(1200, 2))
    try:
        rows = play_games(envs, actions)
    finally:
        envs.close()
    assert len(rows) >= 2 and sum(envs.episode_count) >= 3 * len(rows)
    assert all(r[2] % 5 == 0 for r in rows) and any(r[2] > 30 for r in rows)
    for j in (0, 1):
        mine = [r for r in rows if r[0] == j]
        assert [r[1] for r in mine] == list(np.cumsum([r[3] for r in mine]))
