"""ac_main.py's per-agent log of training episodes ({curve}_episodes.csv), Diff-DAC's reference metric."""
import csv
import os
import signal
import threading
import time

import numpy as np
import pytest

from utils.envs import atari
from utils.errors import Interrupted
from utils.run import RunConfig, Trainer, train
from utils.run.onpolicy.episode_log import EpisodeLog

K = 2
KW = dict(policy="DIFF_A2C", env="CartPole-v1", seed=3, num_agents=2, max_time_steps=2400, start_time_steps=0,
          eval_freq=800, eval_episodes=1, quiet=True, checkpoint_freq=400, env_workers=0,
          algo=dict(lr=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, hidden_size=16,
                    n_steps=5, envs_per_agent=K, rms_alpha=0.99, rms_eps=1e-5))


def rows(path):
    with open(path) as f:
        return [r for r in csv.DictReader(f)]


def without_wall(table):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in table]


def test_rows_follow_each_environments_episodes(tmp_path):
    """CartPole pays 1 per step, so a return is its length; environment j's episodes tile its steps: the agent's step
    count at an episode's end is K times the summed lengths of j's episodes so far (each loop step is one step of
    each of the K environments)."""
    cfg = RunConfig(results_dir=str(tmp_path), **KW)
    train(cfg)
    for name in cfg.agent_names():
        table = rows(tmp_path / f"{name}_episodes.csv")
        assert len(table) > 10 and list(table[0]) == ["env", "step", "return", "length", "wall_s"]
        done = {j: 0 for j in range(K)}
        for r in table:
            j, length = int(r["env"]), int(r["length"])
            assert float(r["return"]) == length
            done[j] += length
            assert int(r["step"]) == K * done[j]
        assert all(0 < K * d <= KW["max_time_steps"] for d in done.values())
        walls = [float(r["wall_s"]) for r in table]
        assert walls == sorted(walls)


def test_a_killed_run_resumed_writes_the_uninterrupted_rows(tmp_path):
    full = RunConfig(results_dir=str(tmp_path / "full"), **KW)
    train(full)
    cut = RunConfig(results_dir=str(tmp_path / "cut"), **KW)
    Trainer(cut).run(stop_at=1200)  # the checkpoint at 1200
    # as if killed later: rows after the checkpoint were already written; the resumed run must not keep them twice
    for name in cut.agent_names():
        with open(tmp_path / "cut" / f"{name}_episodes.csv", "a") as f:
            f.write("0,1300,9.0,9,1.000\n")
    train(RunConfig(results_dir=str(tmp_path / "cut"), resume=True, **KW))
    for name in full.agent_names():
        a, b = rows(tmp_path / "full" / f"{name}_episodes.csv"), rows(tmp_path / "cut" / f"{name}_episodes.csv")
        assert without_wall(a) == without_wall(b) and len(a) > 10
    np.testing.assert_array_equal(np.load(tmp_path / "full" / f"{full.agent_names()[0]}.npy"),
                                  np.load(tmp_path / "cut" / f"{full.agent_names()[0]}.npy"))


def test_replay_learners_write_no_episode_log(tmp_path):
    cfg = RunConfig(policy="TD3", env="Pendulum-v1", max_time_steps=400, start_time_steps=200, eval_freq=200,
                    eval_episodes=1, quiet=True, results_dir=str(tmp_path), algo={"hidden": (8, 8)})
    train(cfg)
    assert not list(tmp_path.glob("*_episodes.csv"))


def test_a3c_logs_every_workers_episodes_and_keeps_them_across_a_resume(tmp_path):
    """A3C's workers report their episodes: env is the worker, step the global count T once the rollout that ended
    it was applied. CartPole pays 1 per step (return = length); a worker's episodes tile its steps, so their
    lengths sum to at most the run's steps. A resumed run keeps the rows of its checkpoint as they were."""
    from utils.run.onpolicy.asynchronous import AsyncTrainer

    def cfg(**kw):
        return RunConfig(policy="A3C", env="CartPole-v1", seed=0, max_time_steps=3000, start_time_steps=0,
                         eval_freq=1000, eval_episodes=1, results_dir=str(tmp_path), checkpoint_freq=1000, quiet=True,
                         algo={"num_processes": 2}, **kw)

    AsyncTrainer(cfg()).run(stop_at=2000)
    path = tmp_path / "A3C_CartPole-v1_0_episodes.csv"
    before = rows(path)
    # each row names its worker; on a loaded machine one worker may play all of the first 2000 steps (Hogwild)
    assert len(before) > 10 and {r["env"] for r in before} <= {"0", "1"}
    assert all(float(r["return"]) == int(r["length"]) for r in before)
    assert all(0 < int(r["step"]) <= 2000 for r in before)
    assert sum(int(r["length"]) for r in before) <= 2000
    AsyncTrainer(cfg(resume=True)).run()
    after = rows(path)
    assert after[:len(before)] == before and len(after) > len(before)
    assert all(2000 < int(r["step"]) <= 3000 for r in after[len(before):])
    assert sum(int(r["length"]) for r in after) <= 3000


def test_a_paused_run_has_written_every_episode_up_to_the_pause(tmp_path):
    """The log used to be written only at evaluations (and at the finish): a run paused at 1200 (evaluations at 0
    and 800) left the episodes of 800-1200 in its checkpoint alone, and a run stopped without checkpoints lost them
    (Pong on a GPU, 2026-11-27: 4-6 episodes per seed)."""
    full = RunConfig(results_dir=str(tmp_path / "full"), **KW)
    train(full)
    cut = RunConfig(results_dir=str(tmp_path / "cut"), **KW)
    Trainer(cut).run(stop_at=1200)
    for name in full.agent_names():
        a, b = rows(tmp_path / "full" / f"{name}_episodes.csv"), rows(tmp_path / "cut" / f"{name}_episodes.csv")
        before = [r for r in without_wall(a) if int(r["step"]) <= 1200]
        assert without_wall(b) == before and max(int(r["step"]) for r in before) > 800


def test_sigterm_with_checkpoints_off_writes_every_episode_played(tmp_path):
    kw = dict(KW, max_time_steps=400_000, eval_freq=100_000, checkpoint_freq=0)
    trainer = Trainer(RunConfig(results_dir=str(tmp_path), **kw))

    def stop():
        deadline = time.time() + 120
        while (trainer.setup.episode_log is None or min(map(len, trainer.setup.episode_log.rows)) < 10) and time.time() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, lambda *a: None)
    try:
        threading.Thread(target=stop, daemon=True).start()
        with pytest.raises(Interrupted, match="no checkpoint"):
            trainer.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    for m, name in enumerate(trainer.cfg.agent_names()):
        table = rows(tmp_path / f"{name}_episodes.csv")
        assert len(table) == len(trainer.setup.episode_log.rows[m]) >= 10


def play_games(envs, actions):
    """Step ``envs`` with ``actions`` [T, n] and log what the loop logs (``envs.last_game``)."""
    log = EpisodeLog(1, actions.shape[1])
    for t, a in enumerate(actions):
        envs.step(a)
        log.observe(*envs.last_game, t + 1)
    return [(j, step, ret, length) for j, step, ret, length, _ in log.rows[0]]


def games_of(game_id, seeds, actions):
    """The whole games of a plain ale-py copy of each environment (no EpisodicLife, no clipping), replaying the
    actions the training environment was given: where it continued a game after a lost life, its reset took
    FIRE, then action 2 (FireReset), and a no-op before them (EpisodicLife); the game's end is the ALE's own."""
    import gymnasium as gym
    atari.register()
    rows = []
    for j, s in enumerate(seeds):
        env = gym.make(game_id, frameskip=1, repeat_action_probability=0.0, full_action_space=False)
        env = atari.MaxAndSkip(atari.NoopReset(env), atari.FRAME_SKIP)
        env.reset(seed=int(s))
        fire = env.unwrapped.get_action_meanings().index("FIRE")
        for a in (fire, 2):
            env.step(a)
        score, length, lives = 0.0, 0, env.unwrapped.ale.lives()
        for t, a in enumerate(actions[:, j]):
            _, r, terminated, truncated, _ = env.step(int(a))
            score, length = score + r, length + 1
            if env.unwrapped.ale.game_over() or truncated:
                rows.append((j, t + 1, score, length))
                score, length = 0.0, 0
                env.reset()
                for b in (fire, 2):
                    env.step(b)
                lives = env.unwrapped.ale.lives()
            elif env.unwrapped.ale.lives() < lives:  # a life lost: the learner's episode ends, the game goes on
                for b in (0, fire, 2):
                    env.step(b)
                lives = env.unwrapped.ale.lives()
    return sorted(rows, key=lambda r: (r[1], r[0]))


@pytest.mark.skipif(not atari.available(), reason="needs ale-py")
@pytest.mark.parametrize("workers", [0, 1])
def test_an_atari_row_is_a_whole_game_at_its_own_score(workers):
    """Space Invaders (3 lives, 5 to 30 points an invader; the learner sees one episode per life, rewards clipped
    to 1): the log writes one row per game, its unclipped score and all its steps, as a plain copy of each game
    replayed with the same actions scores them; the learner's episodes (lives) outnumber the rows."""
    from utils.envs.workers import make_envs
    seeds, game = [5, 6], "SpaceInvadersNoFrameskip-v4"
    envs = make_envs(game, seeds, [105], 1, workers, actions=("discrete",), who="A2C")
    actions = np.random.default_rng(0).integers(envs.act_dim, size=(1200, 2))
    try:
        rows = play_games(envs, actions)
        lives = sum(envs.episode_count) if workers == 0 else None
    finally:
        envs.close()
    expected = games_of(game, seeds, actions)
    assert len(rows) >= 2 and rows == expected
    assert any(r[2] > 30 for r in rows) and all(r[2] % 5 == 0 for r in rows)
    if lives is not None:
        assert lives >= 3 * len(rows)
