"""benchmarks.throughput on the on-policy family: the loop's counts (members, environment steps, updates) and the
split of its wall time, for A2C (N agents = N seeds' members) and DIFF_A2C (its combine inside the update)."""
import json

import pytest

from benchmarks import throughput


def run(tmp_path, *args: str) -> dict:
    out = tmp_path / "out.json"
    assert throughput.main([*args, "--env", "CartPole-v1", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def check_row(row: dict, members: int, k: int, n_steps: int, updates: int) -> None:
    assert row["members"] == members and row["envs_per_agent"] == k and row["n_steps"] == n_steps
    assert row["updates"] == updates
    assert row["env_steps"] == members * k * n_steps * updates
    assert row["train_env_steps_per_s"] == pytest.approx(row["env_steps"] / row["seconds"])
    parts = [row[f"{p}_share"] for p in ("update", "act", "env", "store")]
    assert all(0 < x < 1 for x in parts)
    assert sum(parts) + row["other_share"] == pytest.approx(1.0)
    assert 0 <= row["other_share"] < 0.5
    assert row["ms_per_update"] == pytest.approx(1000 * row["update_share"] * row["seconds"] / updates)


def test_a2c_agents_are_members_and_the_time_splits(tmp_path):
    report = run(tmp_path, "--policy", "A2C", "--agents", "1", "3", "--seeds", "1", "2", "--envs_per_agent", "2",
                 "--n_steps", "3", "--updates", "4", "--warmup", "1")
    assert report["family"] == "rollout" and report["loop"]["evaluation"] == "none"
    rows = report["results"]
    assert [(r["seeds"], r["agents"]) for r in rows] == [(1, 1), (1, 3), (2, 1), (2, 3)]
    for r in rows:
        check_row(r, r["seeds"] * r["agents"], 2, 3, 4)
        assert r["ms_combine"] is None and r["combine_share_of_update"] is None


def test_diff_a2c_times_its_combine_inside_the_update(tmp_path):
    report = run(tmp_path, "--policy", "DIFF_A2C", "--agents", "4", "--updates", "3", "--warmup", "1")
    (row,) = report["results"]
    check_row(row, 4, 8, 5, 3)  # the defaults: 8 environments per agent, rollouts of 5 steps
    assert report["loop"]["topology"] is None  # DIFF_A2C's own graph: the ring
    assert row["ms_combine"] > 0 and 0 < row["combine_share_of_update"] < 1


def test_on_policy_flags_and_counts_are_checked():
    with pytest.raises(SystemExit) as e:
        throughput.main(["--policy", "TD3", "--env", "Pendulum-v1", "--n_steps", "5"])
    assert e.value.code == 2
    with pytest.raises(SystemExit, match="at least 2 agents"):
        throughput.main(["--policy", "DIFF_A2C", "--env", "CartPole-v1", "--agents", "1", "4"])
    with pytest.raises(SystemExit, match="not covered"):
        throughput.main(["--policy", "A3C", "--env", "CartPole-v1"])


def test_a_single_agent_policy_with_several_agents_is_a_usage_error(capsys):
    """TD3 is one agent: --agents 1 2 was a traceback from inside the timed loop; it is a usage error up front."""
    with pytest.raises(SystemExit) as e:
        throughput.main(["--policy", "TD3", "--env", "Pendulum-v1", "--agents", "1", "2"])
    assert e.value.code == 2
    assert "TD3 is a single agent" in capsys.readouterr().err
