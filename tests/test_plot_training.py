"""python -m utils.plot --training: the running mean of training returns against the steps of all agents."""
import numpy as np
import pytest

from utils.plot.cli import main
from utils.plot.training import find_episode_logs, setting_curves


def write_log(path, rows):
    path.write_text("env,step,return,length,wall_s\n" + "".join(f"{j},{s},{r},{n},0.5\n" for j, s, r, n in rows))


def test_running_mean_pools_the_agents_of_a_seed_by_total_steps(tmp_path):
    # seed 0: two agents in lockstep; their episodes, by the agent's own step count at the end
    write_log(tmp_path / "DIFF_A2C_ring_CartPole-v1_0_Agent_0_episodes.csv", [(0, 10, 1.0, 10), (0, 30, 3.0, 20)])
    write_log(tmp_path / "DIFF_A2C_ring_CartPole-v1_0_Agent_1_episodes.csv", [(0, 20, 2.0, 20), (1, 40, 4.0, 40)])
    found = find_episode_logs([str(tmp_path)])
    assert list(found) == [("CartPole-v1", "DIFF_A2C_ring")]
    steps, means = found[("CartPole-v1", "DIFF_A2C_ring")][0].pooled(window=2)
    # ordered by step: returns 1, 2, 3, 4 at agent steps 10, 20, 30, 40 -> 20, 40, 60, 80 steps of both agents
    np.testing.assert_array_equal(steps, [20, 40, 60, 80])
    np.testing.assert_allclose(means, [1.0, 1.5, 2.5, 3.5])


def test_seeds_share_a_grid_up_to_the_shortest(tmp_path):
    write_log(tmp_path / "A2C_CartPole-v1_0_episodes.csv", [(0, 100, 10.0, 100), (0, 200, 30.0, 100)])
    write_log(tmp_path / "A2C_CartPole-v1_1_episodes.csv", [(0, 50, 0.0, 50), (0, 150, 20.0, 100)])
    grid, m, finals = setting_curves(find_episode_logs([str(tmp_path)])[("CartPole-v1", "A2C")], window=100)
    assert grid[0] == 0 and grid[-1] == 150 and m.shape == (2, len(grid))
    assert finals == [20.0, 10.0]  # running means at each seed's last episode
    np.testing.assert_allclose(m[0, -1], 10.0 + (150 - 100) / 100 * (20.0 - 10.0))  # linear between 100 and 200
    np.testing.assert_allclose(m[1, -1], 10.0)


def test_the_same_run_in_two_folders_is_two_settings_not_one_file_replacing_the_other(tmp_path):
    """Pong's ACER on the CPU (acer/) and on a GPU (acer_h100/) write the same file names; a ring of 25 and a ring
    of 4 (Diff-DAC) likewise. Before, the later folder's agent silently replaced the earlier one's inside one
    setting, mixing two runs. Folders without such a clash keep their plain setting name."""
    for folder, ret in (("acer", 1.0), ("acer_h100", 5.0)):
        (tmp_path / folder / "ACER").mkdir(parents=True)
        write_log(tmp_path / folder / "ACER" / "ACER_Pong-v5_0_episodes.csv", [(0, 10, ret, 10)])
    (tmp_path / "a3c").mkdir()
    write_log(tmp_path / "a3c" / "A3C_Pong-v5_0_episodes.csv", [(0, 10, 2.0, 10)])
    found = find_episode_logs([str(tmp_path)])
    assert sorted(found) == [("Pong-v5", "A3C"), ("Pong-v5", "ACER [acer]"), ("Pong-v5", "ACER [acer_h100]")]
    assert found[("Pong-v5", "ACER [acer_h100]")][0].agents[0] == [(10, 5.0)]
    assert found[("Pong-v5", "ACER [acer]")][0].agents[0] == [(10, 1.0)]
    # one folder given alone: no clash, the plain name
    assert list(find_episode_logs([str(tmp_path / "acer_h100")])) == [("Pong-v5", "ACER")]


def test_cli_writes_figure_and_table(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    for seed in range(3):
        for agent in range(2):
            write_log(runs / f"DIFF_A2C_CartPole-v1_{seed}_Agent_{agent}_episodes.csv",
                      [(0, 10 * k, float(seed + k), 10) for k in range(1, 30)])
    assert main([str(runs), "--training", "--training_window", "10", "--out", str(out)]) == 0
    assert (out / "training_CartPole-v1.png").stat().st_size > 0
    table = (out / "training.md").read_text()
    assert "| CartPole-v1 | DIFF_A2C | 3 |" in table
    # seed s: the last 10 pooled returns are s + 25..29, each twice (two agents): mean s + 27
    assert "27.0, 28.0, 29.0" in table


@pytest.mark.parametrize("argv,needle", [(["--training_window", "0"], "--training_window"),
                                         ([], "no training episode logs")])
def test_bad_training_input_is_one_line(tmp_path, capsys, argv, needle):
    try:
        code = main([str(tmp_path), "--training", "--out", str(tmp_path / "o"), *argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and needle in err[-1]


def test_solved_at_finds_the_first_full_window_at_the_threshold(tmp_path):
    """Pong's rule (A3C-ACER: the mean of the last 100 training episodes at 18), checked against a plain loop over
    every window: the first full window reaching R, its episode count and total steps; else the best and last."""
    from utils.plot.training import first_reaching
    rng = np.random.default_rng(3)
    returns = np.clip(np.cumsum(rng.normal(0.2, 2.0, 400)) / 10 - 21, -21, 21)
    steps = np.cumsum(rng.integers(800, 1200, 400)).astype(float)
    window, threshold = 50, float(np.sort(returns)[-60])
    means = [returns[i - window:i].mean() for i in range(window, len(returns) + 1)]  # means[j]: episodes up to j+window
    first = next(j for j, m in enumerate(means) if m >= threshold) + window
    r = first_reaching(steps, returns, window, threshold)
    assert (r["episodes"], r["steps"]) == (first, int(steps[first - 1]))
    best = int(np.argmax(means)) + window
    assert r["best_episodes"] == best and r["best"] == pytest.approx(max(means)) and r["last"] == pytest.approx(means[-1])
    never = first_reaching(steps, returns, window, max(means) + 1e-9)
    assert never["episodes"] is None and never["best"] == pytest.approx(max(means))
    # a partial window never counts: a single great first episode is not "solved"
    assert first_reaching(np.array([10.0, 20.0]), np.array([21.0, -21.0]), 2, 18.0)["episodes"] is None
    assert first_reaching(np.array([10.0]), np.array([21.0]), 2, 18.0)["best"] is None


def test_cli_solved_at_table(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    # seed 0 climbs 1 a episode from -21 (16 environments' episodes pooled, steps of the one agent); seed 1 stays at -20
    write_log(runs / "ACER_PongNoFrameskip-v4_0_episodes.csv", [(k % 16, 1000 * k, -21.0 + k, 1000) for k in range(1, 50)])
    write_log(runs / "ACER_PongNoFrameskip-v4_1_episodes.csv", [(0, 1000 * k, -20.0, 1000) for k in range(1, 50)])
    assert main([str(runs), "--training", "--training_window", "10", "--solved_at", "18", "--out", str(out)]) == 0
    table = (out / "training.md").read_text()
    # seed 0: episodes k-9..k average -21 + k - 4.5: 17.5 at k = 43, 18.5 at k = 44, so the 44th episode, step 44,000
    assert "| PongNoFrameskip-v4 | ACER | 0 | 44, 44000 |" in table
    assert "| PongNoFrameskip-v4 | ACER | 1 | not reached | -20.0 (10, 10000) | -20.0 (49, 49000) |" in table
    try:
        code = main([str(runs), "--solved_at", "18", "--out", str(out)])
    except SystemExit as e:
        code = e.code
    assert code == 2 and "--solved_at" in capsys.readouterr().err.strip().splitlines()[-1]
