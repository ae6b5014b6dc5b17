"""The TD3 tutorial's protocol on DASE_main.py: --episode_eval, --solved_at/--solved_window, --max_episodes,
--timelimit_as_terminal, --warmup_actions policy, and the tutorial's network flags."""
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import DASE_main
from algorithms import TD3
from utils.cli import main_guard
from utils.run import Trainer

ROOT = Path(__file__).resolve().parent.parent
LANDER = ["--env", "LunarLanderContinuous-v3", "--eval_freq", "100", "--eval_episodes", "1", "--batch_size", "32",
          "--threads", "1", "--quiet"]


def record(folder: Path, stem: str) -> dict:
    return json.loads((folder / f"{stem}.json").read_text())


def test_help_shows_the_protocol_flags():
    out = subprocess.run([sys.executable, str(ROOT / "DASE_main.py"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for flag in ("--episode_eval", "--solved_at", "--solved_window", "--max_episodes", "--timelimit_as_terminal",
                 "--warmup_actions", "--hidden_sizes", "--actor_lr", "--critic_lr"):
        assert flag in out.stdout


def test_episode_rows_are_the_current_actor_played_on_the_documented_seeds(tmp_path):
    """No update happens (warm-up longer than the run), so each agent's actor is its initial one: an independent
    replay, with a TD3 built from the agent's seed and a plain Gymnasium environment reset with
    SeedSequence([seed + 100, episode]), gives every row's return exactly; rows come one per training episode."""
    seed, steps = 3, 1000
    args = ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--seed", str(seed), "--max_time_steps", str(steps),
            "--start_time_steps", "5000", "--eval_freq", "500", "--eval_episodes", "1", "--episode_eval",
            "--threads", "1", "--quiet", "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, args) == 0
    env = gym.make("Pendulum-v1")
    for i in range(2):
        rows = np.load(tmp_path / f"DASE_TD3_Pendulum-v1_{seed}_Agent_{i}_episode_eval.npy")
        assert rows.dtype == np.float64 and rows.shape == (steps // 200, 3)  # Pendulum: 200 steps an episode
        np.testing.assert_array_equal(rows[:, 0], np.arange(1, 6))
        np.testing.assert_array_equal(rows[:, 1], 200 * np.arange(1, 6))
        agent = TD3(3, 1, env.action_space.low, env.action_space.high, [seed + 100 * i])
        for episode, _, ret in rows:
            obs, _ = env.reset(seed=int(np.random.SeedSequence([seed + 100, int(episode)]).generate_state(1)[0]))
            total, done = 0.0, False
            while not done:
                action = agent.act(obs[None, None])[0, 0].numpy()
                obs, r, terminated, truncated, _ = env.step(action)
                total += float(r)
                done = terminated or truncated
            assert total == ret


def test_solved_at_stops_when_the_window_fills_and_records_it(tmp_path):
    args = ["--policy", "TD3", "--env", "Pendulum-v1", "--max_time_steps", "5000", "--start_time_steps", "300",
            "--eval_freq", "200", "--eval_episodes", "1", "--batch_size", "32", "--episode_eval",
            "--solved_at", "-100000", "--solved_window", "3", "--threads", "1", "--quiet",
            "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, args) == 0
    rec = record(tmp_path, "TD3_Pendulum-v1_0")
    assert rec["finished_at_step"] == 600 and rec["stopped"] == "solved"
    assert rec["solved"] == [{"episode": 3, "step": 600}] and rec["episodes"] == [3]
    assert np.load(tmp_path / "TD3_Pendulum-v1_0_episode_eval.npy").shape == (3, 3)
    assert np.load(tmp_path / "TD3_Pendulum-v1_0.npy").shape == (4,)  # evaluations at 0, 200, 400, 600
    assert not (tmp_path / "checkpoints" / "TD3_Pendulum-v1_0.pt").exists()
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")}
    assert main_guard(DASE_main.run, [*args, "--resume"]) == 0  # a stopped run is a finished one
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")} == before


def test_a_solved_dase_agent_trains_on_until_its_peer_is_solved(tmp_path):
    """The choice for several agents: a solved agent stops being evaluated but keeps acting and learning; the seed
    stops when its last agent is solved. LunarLander's episodes differ in length, so the agents' first episodes
    (solved at once with a window of 1) end at different steps."""
    args = ["--policy", "DASE_TD3", *LANDER, "--max_time_steps", "5000", "--start_time_steps", "50", "--episode_eval",
            "--solved_at", "-100000", "--solved_window", "1", "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, args) == 0
    stem = "DASE_TD3_LunarLanderContinuous-v3_0"
    rec = record(tmp_path, stem)
    steps = [s["step"] for s in rec["solved"]]
    assert [s["episode"] for s in rec["solved"]] == [1, 1] and steps[0] != steps[1]
    assert rec["stopped"] == "solved" and rec["finished_at_step"] == max(steps)
    for i in range(2):
        rows = np.load(tmp_path / f"{stem}_Agent_{i}_episode_eval.npy")
        assert rows.shape == (1, 3) and rows[0, 1] == steps[i]


def test_a_resume_keeps_the_record_of_an_agent_solved_before_it(tmp_path):
    """Agent solved, run paused, resumed and paused again before its peer is solved: the resumed run's record (written
    anew at the resume) still says which agent was solved, where and when; the finished record equals an
    uninterrupted run's in what it says of the agents."""
    args = ["--policy", "DASE_TD3", *LANDER, "--max_time_steps", "5000", "--start_time_steps", "50", "--episode_eval",
            "--solved_at", "-100000", "--solved_window", "1"]
    stem = "DASE_TD3_LunarLanderContinuous-v3_0"
    assert main_guard(DASE_main.run, [*args, "--results_dir", str(tmp_path / "whole")]) == 0
    whole = record(tmp_path / "whole", stem)
    first, last = sorted(s["step"] for s in whole["solved"])
    assert last - first >= 3  # LunarLander's first episodes differ in length: room for two pauses in between
    cut = tmp_path / "cut"
    for at in (first + 1, first + 2):
        assert main_guard(DASE_main.run, [*args, "--results_dir", str(cut), "--resume", "--stop_at", str(at)]) == 0
        rec = record(cut, stem)
        assert rec["resumed_at_step"] == (None if at == first + 1 else first + 1)
        assert [s and s["step"] for s in rec["solved"]] == [s["step"] if s["step"] == first else None
                                                           for s in whole["solved"]]
    assert main_guard(DASE_main.run, [*args, "--results_dir", str(cut), "--resume"]) == 0
    rec = record(cut, stem)
    assert (rec["solved"], rec["episodes"], rec["stopped"]) == (whole["solved"], whole["episodes"], whole["stopped"])


def test_seeds_stopping_at_different_steps_batched_alone_and_resumed_agree(tmp_path, seed_one_three_ways):
    """--max_episodes: seed 0 and seed 1 run out of episodes at different steps; seed 1 batched with seed 0, alone,
    and checkpointed at step 150 then resumed writes the same curves, episode rows and stop."""
    args = ["--policy", "TD3", *LANDER, "--max_time_steps", "5000", "--start_time_steps", "100", "--episode_eval",
            "--max_episodes", "3"]
    names = ["TD3_LunarLanderContinuous-v3_1.npy", "TD3_LunarLanderContinuous-v3_1_episode_eval.npy"]
    curve, rows = seed_one_three_ways(DASE_main, args, 150, tmp_path, names)
    assert rows.shape == (3, 3) and rows[-1, 1] > 150
    stops = {k: record(tmp_path / k, "TD3_LunarLanderContinuous-v3_1")["finished_at_step"] for k in ("both", "one", "cut")}
    assert set(stops.values()) == {int(rows[-1, 1])}
    assert curve.shape == (int(rows[-1, 1]) // 100 + 1,)
    other = record(tmp_path / "both", "TD3_LunarLanderContinuous-v3_0")
    assert other["stopped"] == "max_episodes" and other["finished_at_step"] != stops["one"]


def _trainer(tmp_path, *extra) -> Trainer:
    args = ["--policy", "TD3", "--env", "Pendulum-v1", "--max_time_steps", "300", "--start_time_steps", "1000",
            "--eval_freq", "300", "--eval_episodes", "1", "--threads", "1", "--quiet", "--checkpoint_freq", "0",
            "--results_dir", str(tmp_path), *extra]
    trainer = Trainer(DASE_main.build_config(DASE_main.parse(args)))
    trainer.run()
    return trainer


def test_timelimit_as_terminal_stores_the_cut_as_a_termination(tmp_path):
    """Pendulum's episodes end only by the time limit, after 200 steps: row 199 bootstraps unless the flag is set."""
    plain = _trainer(tmp_path / "plain").learner.buffer.not_done[0, :300, 0]
    old = _trainer(tmp_path / "old", "--timelimit_as_terminal").learner.buffer.not_done[0, :300, 0]
    assert plain.sum() == 300 and old[199] == 0 and old.sum() == 299


def test_warmup_with_the_policy_acts_with_the_untrained_actor(tmp_path):
    """--warmup_actions policy: without noise, the stored warm-up actions are the actor's (no update has happened);
    the default stores uniform random actions, which the actor does not give."""
    trainer = _trainer(tmp_path / "policy", "--warmup_actions", "policy", "--expl_noise", "0")
    obs, action = trainer.learner.buffer.obs[:, :300], trainer.learner.buffer.action[:, :300]
    torch.testing.assert_close(action, trainer.agents.act(obs), rtol=0, atol=1e-6)  # one row at a time vs 300
    random = _trainer(tmp_path / "random")
    assert not torch.allclose(random.learner.buffer.action[:, :300], random.agents.act(random.learner.buffer.obs[:, :300]))


def test_network_flags_set_widths_and_learning_rates_and_default_to_td3s():
    cfg = DASE_main.build_config(DASE_main.parse(["--policy", "TD3", "--env", "Pendulum-v1", "--hidden_sizes", "400",
                                                  "300", "--actor_lr", "1e-3", "--critic_lr", "2e-3"]))
    agents = TD3(3, 1, [-2.0], [2.0], [0], **cfg.algo)
    assert [tuple(layer.weight.shape) for layer in agents.actor.net.layers] == [(1, 3, 400), (1, 400, 300), (1, 300, 1)]
    assert [tuple(layer.weight.shape) for layer in agents.critic.q1.net.layers] == [(1, 4, 400), (1, 400, 300),
                                                                                   (1, 300, 1)]
    assert agents.actor_opt.param_groups[0]["lr"] == 1e-3 and agents.critic_opt.param_groups[0]["lr"] == 2e-3
    default = DASE_main.build_config(DASE_main.parse(["--policy", "TD3", "--env", "Pendulum-v1"]))
    # recorded at TD3's own values; a record from before they were recorded reads them so (tests/test_settings.py)
    assert (default.algo["hidden"], default.algo["actor_lr"], default.algo["critic_lr"]) == ((256, 256), 3e-4, 3e-4)
    plain = TD3(3, 1, [-2.0], [2.0], [0], **default.algo)
    assert plain.actor_opt.param_groups[0]["lr"] == plain.critic_opt.param_groups[0]["lr"] == 3e-4
