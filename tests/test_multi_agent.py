"""Multi-agent tasks (utils/envs/joint.py): agent k of a seed plays player k of one Level-Based Foraging (or RWARE)
environment. The per-member view against the package's environment stepped by hand, joint evaluation, exact resume of
a SEAC run, and the one-line refusals."""
import csv
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

import ac_main
import DASE_main
import sac_main
from utils.cli import main_guard
from utils.envs.joint import JointEnvs
from utils.envs.workers import episode_seeds

lbforaging = pytest.importorskip("lbforaging")
LBF = "Foraging-8x8-2p-2f-coop-v3"


def run(script, *args: str) -> int:
    try:
        return main_guard(script.run, list(args))
    except SystemExit as e:
        return e.code


def raw(seed: int):
    env = gym.make(LBF, disable_env_checker=True)
    obs, _ = env.reset(seed=seed)
    return env, obs


def fresh_reset(env):
    """LBF's reset, the players' cells of the last episode forgotten first (as in a new environment)."""
    for player in env.unwrapped.players:
        player.position = None
    return env.reset()[0]


def test_members_see_their_own_player_of_the_seed_s_environment():
    """2 seeds x 2 agents x K = 2: member (s, i)'s environment j is player i of joint environment (s, j), reset with
    agent 0's seed of environment j; rewards and ends per player as the package gives them."""
    k, seeds = 2, [11, 12, 13, 14, 21, 22, 23, 24]  # members (s0,a0), (s0,a1), (s1,a0), (s1,a1), K each
    envs = JointEnvs(LBF, seeds, [100, 100, 200, 200], 1, agents=2)
    rows = {(0, 0): 0, (0, 1): 1, (1, 0): 4, (1, 1): 5}  # (seed, j) -> row of its agent 0 (agent 1: + K)
    refs = {(s, j): raw(seeds[rows[s, j]]) for s, j in rows}
    for (s, j), (_, obs) in refs.items():
        r = rows[s, j]
        np.testing.assert_array_equal(envs.obs[[r, r + k]], np.stack(obs))
    g = np.random.default_rng(0)
    for _ in range(120):  # past an episode's 50 steps: the resets too
        actions = g.integers(0, 6, size=8)
        _, _, rewards, next_obs, terminated, ended = envs.step(actions)
        for (s, j), (env, _) in refs.items():
            r = rows[s, j]
            o, rew, term, trunc, _ = env.step((int(actions[r]), int(actions[r + k])))
            np.testing.assert_array_equal(next_obs[[r, r + k]], np.stack(o))
            np.testing.assert_array_equal(rewards[[r, r + k]], rew)
            assert terminated[r] == terminated[r + k] == term and ended[r] == term or trunc
            if term or trunc:
                np.testing.assert_array_equal(envs.obs[[r, r + k]], np.stack(fresh_reset(env)))
    assert envs.episode_count == [2] * 8
    envs.close()


def test_a_seed_s_agents_are_evaluated_together_each_on_its_own_player_s_return():
    envs = JointEnvs(LBF, [5, 6], [105, 105], 2, agents=2)
    obs = envs.eval_reset()
    refs = [raw(s) for s in episode_seeds(105, 2)]
    for e, (_, o) in enumerate(refs):
        np.testing.assert_array_equal(obs[:, e], np.stack(o))
    g = np.random.default_rng(1)
    returns, active = np.zeros((2, 2)), np.ones((2, 2), dtype=bool)
    mine = np.zeros((2, 2))
    while active.any():
        actions = g.integers(0, 6, size=(2, 2))
        obs, rewards, ended = envs.eval_step(actions, active)
        returns += np.where(active, rewards, 0.0)
        for e, (env, _) in enumerate(refs):
            if active[0, e]:
                o, rew, term, trunc, _ = env.step(tuple(int(a) for a in actions[:, e]))
                mine[:, e] += rew
                np.testing.assert_array_equal(obs[:, e], np.stack(o))
                assert ended[0, e] == ended[1, e] == (term or trunc)
        active &= ~ended
    np.testing.assert_array_equal(returns, mine)
    # the next evaluation plays the same episodes, whatever the last one left behind (a new environment's starts)
    np.testing.assert_array_equal(envs.eval_reset(), np.stack([np.stack(raw(s)[1]) for s in episode_seeds(105, 2)], 1))
    envs.close()


def test_a_reset_does_not_depend_on_where_the_last_episode_left_the_players():
    """lbforaging 2.0.0 keeps a finished episode's player cells out of the next start; JointEnvs forgets them, so a
    reset depends on the random generator alone (what a checkpoint's replay rebuilds)."""
    envs = JointEnvs(LBF, [3, 4], [9, 9], 1, agents=2)
    env = envs.envs[0]
    state = env.unwrapped.np_random.bit_generator.state
    first = env.reset()[0]
    start = env.unwrapped.players[0].position  # where player 0 starts from this generator state

    def again(reset):
        env.unwrapped.np_random.bit_generator.state = state
        env.unwrapped.players[1].position = start  # the last episode left player 1 on that cell
        return reset()[0]

    np.testing.assert_array_equal(again(env.reset), first)
    assert not np.array_equal(again(env.unwrapped.reset), first)  # the package's own reset avoids the old cell
    envs.close()


@pytest.mark.parametrize("env_id, actions", [(LBF, 6), ("rware-tiny-2ag-v2", 5)])
def test_environments_rebuilt_from_a_checkpoint_go_on_exactly_as_the_originals(env_id, actions):
    """Past an episode's end (LBF 50 steps, RWARE 500), a copy rebuilt from the state of each seed steps exactly as
    the environments it was saved from."""
    pytest.importorskip("rware")
    seeds, evals = list(range(8)), [7, 7, 8, 8]  # 2 seeds x 2 agents x K = 2
    a, b = JointEnvs(env_id, seeds, evals, 1, agents=2), JointEnvs(env_id, seeds, evals, 1, agents=2)
    g = np.random.default_rng(3)
    for _ in range(530):
        a.step(g.integers(0, actions, size=8))
    b.load_state_dicts([a.state_dict(slice(0, 2)), a.state_dict(slice(2, 4))])
    np.testing.assert_array_equal(b.obs, a.obs)
    for _ in range(600):
        act = g.integers(0, actions, size=8)
        for x, y in zip(a.step(act), b.step(act)):
            np.testing.assert_array_equal(x, y)
    assert a.episode_count == b.episode_count and min(a.episode_count) >= 2
    a.close()
    b.close()


ARGS = ["--env", LBF, "--max_time_steps", "4000", "--eval_freq", "1000", "--eval_episodes", "2", "--threads", "1",
        "--quiet", "--seeds", "0-1", "--eval_policy", "sample"]


def test_a_multi_agent_seac_run_resumes_exactly(tmp_path):
    """Paused mid-episode and resumed (the joint environments rebuilt by replaying their episodes' joint actions):
    the same curves, training episodes and final networks as a run never paused."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for out, extra in ((whole, []), (cut, ["--stop_at", "2040"])):
        assert run(ac_main, "--policy", "SEAC", *ARGS, "--checkpoint_freq", "1000", "--save_model",
                   "--results_dir", str(out), "--models_dir", str(out / "models"), *extra) == 0
    assert run(ac_main, "--policy", "SEAC", *ARGS, "--checkpoint_freq", "1000", "--save_model", "--resume",
               "--results_dir", str(cut), "--models_dir", str(cut / "models")) == 0
    returns = 0.0
    for s, i in itertools.product((0, 1), (0, 1)):
        stem = f"SEAC_{LBF}_{s}_Agent_{i}"
        np.testing.assert_array_equal(np.load(cut / f"{stem}.npy"), np.load(whole / f"{stem}.npy"))
        rows = [[r[:4] for r in csv.reader(open(d / f"{stem}_episodes.csv"))] for d in (cut, whole)]
        assert rows[0] == rows[1] and len(rows[0]) == 1 + 4000 // 50  # K = 4 environments of 1000 steps each
        returns += sum(float(r[2]) for r in rows[0][1:])
        a, b = (list(tensors(torch.load(d / "models" / f"{stem}.pt", weights_only=True))) for d in (cut, whole))
        assert len(a) == len(b) > 0 and all(torch.equal(x, y) for x, y in zip(a, b))
    assert returns > 0  # some food was eaten: the rewards reached the curves' episodes


def test_a_multi_agent_run_on_many_cores_steps_in_process_without_being_asked(tmp_path, monkeypatch):
    """--env_workers defaults to the free cores; a multi-agent task takes none (it would otherwise refuse a flag the
    user never gave on any machine of more than 2 cores)."""
    import utils.run.setup as setup

    monkeypatch.setattr(setup, "available_cores", lambda: 16)
    assert setup.default_workers(torch.device("cpu"), 4) > 0  # what an environment of one player would get
    assert run(ac_main, "--policy", "SEAC", "--env", LBF, "--max_time_steps", "1000", "--eval_freq", "1000",
               "--eval_episodes", "1", "--threads", "1", "--quiet", "--results_dir", str(tmp_path)) == 0
    assert (tmp_path / f"SEAC_{LBF}_0_Agent_1.npy").exists()


def test_utils_play_says_in_one_line_that_it_does_not_play_a_multi_agent_task(tmp_path, capsys):
    from utils import play

    assert run(ac_main, "--policy", "SEAC", "--env", LBF, "--max_time_steps", "1000", "--eval_freq", "1000",
               "--eval_episodes", "1", "--threads", "1", "--quiet", "--save_model",
               "--results_dir", str(tmp_path), "--models_dir", str(tmp_path / "models")) == 0
    capsys.readouterr()
    assert play.main([str(tmp_path / f"SEAC_{LBF}_0.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a multi-agent task, whose agents act together" in err and len(err.splitlines()) == 1, err


def tensors(state):
    """Every tensor of a saved model, depth first."""
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from tensors(value)


@pytest.mark.parametrize("script, args, words", [
    (DASE_main, ["--policy", "DASE_TD3"], "a multi-agent task (2 players acting together); TD3 cannot play one"),
    (sac_main, ["--policy", "SAC"], "SAC cannot play one"),
    (ac_main, ["--policy", "A3C"], "A3C cannot play one"),
    (ac_main, ["--policy", "A2C"], f"--num_agents 1: {LBF} has 2 players and each agent plays one"),
    (ac_main, ["--policy", "SEAC", "--env_workers", "2"], "a multi-agent task steps in the trainer's process"),
])
def test_what_cannot_play_a_multi_agent_task_says_so_in_one_line(tmp_path, capsys, script, args, words):
    steps = "--num_steps" if script is sac_main else "--max_time_steps"
    argv = [*args, "--env", LBF, steps, "2000", "--eval_freq", "1000", "--quiet",
            "--results_dir", str(tmp_path / "out")]
    assert run(script, *argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
