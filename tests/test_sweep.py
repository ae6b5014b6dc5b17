"""python -m utils.sweep: grid expansion, validation, real tiny sweeps (skip, failure, rerun, interrupt), Ray."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from utils import sweep
from utils.sweep.runs import joined

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD = 900  # seconds; only against hangs, generous for slow machines


def write(folder: Path, spec: dict, name: str = "exp.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def call(argv: list[str]) -> tuple[int, str, str]:
    """Run the sweep's main in this process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = sweep.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def no_processes(monkeypatch):
    """Fail the test if the sweep tries to start any process."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


# ---- expansion ---------------------------------------------------------------------------------------
def test_grid_expands_to_one_process_per_setting_env_policy(tmp_path):
    path = write(tmp_path, {
        "envs": ["Pendulum-v1", "Hopper-v2"], "policies": ["TD3", "DASE_SAC", "DPD_DDPG"], "seeds": "0-2 5",
        "steps": 5000, "start_steps": 1000, "eval_freq": 500, "eval_episodes": 3, "threads_per_run": 2,
        "device": "cpu", "flags": {"batch_size": 64},
        "settings": {"a": {"results_dir": str(tmp_path / "a"), "flags": {"buffer_size": 5000, "batch_size": 32}},
                     "b": {"results_dir": "Learning Curves/b", "flags": {"similarity": "kl"}}}})
    exp = sweep.load_experiment(path)
    assert exp.envs == ["Pendulum-v1", "Hopper-v5"]  # -v2 mapped as the command lines do, with their notice
    assert any("Hopper-v5 instead" in n for n in exp.notices)
    runs = sweep.expand(exp, threads=2)
    assert [(r.setting, r.env, r.policy) for r in runs] == [
        (s, e, p) for s in "ab" for e in ("Pendulum-v1", "Hopper-v5") for p in ("TD3", "DASE_SAC", "DPD_DDPG")]
    by_key = {(r.setting, r.env, r.policy): r for r in runs}

    sac = by_key["a", "Hopper-v5", "DASE_SAC"]
    assert sac.argv == [
        "sac_main.py", "--policy", "DASE_SAC", "--env", "Hopper-v5", "--seeds", "0-2", "5",
        "--results_dir", f"{tmp_path}/a/SAC/Hopper-v5", "--num_steps", "5000", "--start_steps", "1000",
        "--eval_freq", "500", "--eval_episodes", "3", "--threads", "2", "--device", "cpu", "--quiet", "--resume",
        "--batch_size", "32", "--buffer_size", "5000"]  # the setting's batch_size overrides the file's
    td3 = by_key["b", "Pendulum-v1", "TD3"]
    assert td3.argv[:2] == ["DASE_main.py", "--policy"]
    assert td3.argv[td3.argv.index("--max_time_steps") + 1] == "5000"
    assert td3.argv[td3.argv.index("--start_time_steps") + 1] == "1000"
    assert "--num_steps" not in td3.argv and "--start_steps" not in td3.argv
    assert td3.results_dir == "Learning Curves/b/TD3/Pendulum-v1"
    assert td3.argv[td3.argv.index("--results_dir") + 1] == td3.results_dir
    assert td3.argv[-2:] == ["--similarity", "kl"]
    assert td3.log_path() == ROOT / "Learning Curves/b/TD3/Pendulum-v1/logs/TD3_Pendulum-v1_0-2_5.log"

    dpd = by_key["a", "Pendulum-v1", "DPD_DDPG"]
    assert dpd.script == "DASE_main.py" and dpd.results_dir.endswith("/a/DDPG/Pendulum-v1")
    names = [(Path(p).name, n) for p, n in dpd.expected_files()]
    assert names[:3] == [("DPD_DDPG_Pendulum-v1_0.json", None), ("DPD_DDPG_Pendulum-v1_0_Agent_0.npy", 11),
                         ("DPD_DDPG_Pendulum-v1_0_Agent_1.npy", 11)]
    assert len(names) == 4 * 3  # 4 seeds x (record + 2 curves)
    assert [Path(p).name for p, _ in td3.expected_files()][:2] == ["TD3_Pendulum-v1_0.json", "TD3_Pendulum-v1_0.npy"]


def test_a_long_list_of_seeds_gets_a_log_name_the_file_system_takes(tmp_path):
    """100 non-consecutive seeds spelled out would be a 500-byte log name (OSError when the sweep opens it)."""
    def run_of(seeds):
        path = write(tmp_path, {"envs": ["Pendulum-v1"], "policies": ["DASE_TD3"], "seeds": seeds, "steps": 1000,
                                "settings": {"a": {"results_dir": str(tmp_path / "r")}}})
        (run,) = sweep.expand(sweep.load_experiment(path), threads=1)
        return run.log_path()

    many = list(range(1000, 1300, 3))
    name = run_of(many).name
    assert len(name.encode()) <= 200 and name.startswith("DASE_TD3_Pendulum-v1_1000-1297_100seeds_")
    assert run_of(many[:-1] + [1298]).name != name  # another list with the same ends and count: another log
    assert run_of([0, 1, 2, 5]).name == "DASE_TD3_Pendulum-v1_0-2_5.log"  # short lists keep their spelling
    log = run_of(many)
    log.parent.mkdir(parents=True)
    log.write_text("opens\n")


def test_num_agents_flag_sets_the_expected_curves(tmp_path):
    path = write(tmp_path, {"envs": ["Pendulum-v1"], "policies": ["DASE_TD3"], "seeds": [3], "steps": 1000,
                            "settings": {"five": {"results_dir": str(tmp_path), "flags": {"num_agents": 5}}}})
    (run,) = sweep.expand(sweep.load_experiment(path), threads=None)
    assert "--threads" not in run.argv and run.argv[-2:] == ["--num_agents", "5"]
    assert [Path(p).name for p, _ in run.expected_files()][1:] == [
        f"DASE_TD3_Pendulum-v1_3_Agent_{i}.npy" for i in range(5)]


def test_a_setting_may_have_its_own_policies_and_steps(tmp_path):
    """A centralised learner beside diffusing ones: its own policy and the budget of the N agents together."""
    path = write(tmp_path, {
        "envs": ["RandomExtremeAcrobot-v1"], "policies": ["DIFF_A2C"], "seeds": "0-1", "steps": 2000,
        "start_steps": 0, "eval_freq": 1000,
        "settings": {"ring": {"results_dir": str(tmp_path / "ring"), "flags": {"num_agents": 4}},
                     "central": {"results_dir": str(tmp_path / "central"), "policies": ["A2C"], "steps": 8000,
                                 "flags": {"task_per_env": 4, "envs_per_agent": 4}}}})
    ring, central = sweep.expand(sweep.load_experiment(path), threads=1)
    assert (ring.policy, ring.steps) == ("DIFF_A2C", 2000)
    assert ring.argv[ring.argv.index("--max_time_steps") + 1] == "2000"
    assert (central.policy, central.steps, central.num_agents) == ("A2C", 8000, 1)
    assert central.argv[central.argv.index("--max_time_steps") + 1] == "8000"
    assert [(Path(p).name, n) for p, n in central.expected_files()][:2] == [
        ("A2C_tasks4_RandomExtremeAcrobot-v1_0.json", None), ("A2C_tasks4_RandomExtremeAcrobot-v1_0.npy", 9)]


def test_settings_share_a_folder_when_no_policy_runs_in_both(tmp_path):
    """Two settings may write to one folder when their policies differ (file names start with the policy: a suite's
    TD3 and DASE_TD3 read from one committed folder); each run keeps its own files."""
    path = write(tmp_path, {
        "envs": ["Pendulum-v1"], "policies": ["TD3"], "seeds": "0-1", "steps": 2000, "eval_freq": 1000,
        "settings": {"single": {"results_dir": str(tmp_path / "runs")},
                     "shared": {"results_dir": str(tmp_path / "runs"), "policies": ["DASE_TD3"]}}})
    single, shared = sweep.expand(sweep.load_experiment(path), threads=1)
    files = [set(p for p, _ in run.expected_files()) for run in (single, shared)]
    assert single.folder() == shared.folder() and not files[0] & files[1]
    assert single.log_path() != shared.log_path()


@pytest.mark.parametrize("value, seeds, tokens", [
    ("0-9", list(range(10)), ["0-9"]), ([0, 1], [0, 1], ["0", "1"]), (4, [4], ["4"]),
    ("0-4 7, 9", [0, 1, 2, 3, 4, 7, 9], ["0-4", "7", "9"]), (["8-10", 2], [2, 8, 9, 10], ["2", "8-10"])])
def test_seed_lists_and_ranges(value, seeds, tokens):
    assert sweep.parse_seeds(value) == seeds
    assert sweep.seed_tokens(seeds) == tokens


def test_finished_means_every_record_and_full_length_curve(tmp_path):
    path = write(tmp_path, {"envs": ["Pendulum-v1"], "policies": ["DASE_TD3"], "seeds": "0-1", "steps": 400,
                            "eval_freq": 200, "settings": {"s": {"results_dir": str(tmp_path / "r")}}})
    (run,) = sweep.expand(sweep.load_experiment(path), threads=1)
    assert sweep.run_state(run) == "would run"
    for file, length in run.expected_files():
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        np.save(file, np.zeros(length)) if length else Path(file).write_text("{}")
    assert sweep.run_state(run) == "finished"
    short = tmp_path / "r/TD3/Pendulum-v1/DASE_TD3_Pendulum-v1_1_Agent_1.npy"
    np.save(short, np.zeros(2))  # a run stopped early: 2 of 3 evaluations
    assert sweep.run_state(run) == "would run"
    (tmp_path / "r/TD3/Pendulum-v1/checkpoints").mkdir()
    (tmp_path / "r/TD3/Pendulum-v1/checkpoints/DASE_TD3_Pendulum-v1_1.pt").write_bytes(b"")
    assert sweep.run_state(run) == "would resume"
    np.save(short, np.zeros(3))
    (tmp_path / "r/TD3/Pendulum-v1/DASE_TD3_Pendulum-v1_0.json").unlink()
    assert sweep.run_state(run) != "finished"


def test_a_run_stopped_early_by_its_record_is_finished_at_that_step(tmp_path):
    """--solved_at / --max_episodes end a seed before its budget: its record says stopped and where, and its curves
    end there; the sweep counts it finished (not "exit 0 but its curves are incomplete"), and only at that length."""
    from utils.sweep.execute import files_complete

    record, curve = tmp_path / "TD3_x_0.json", tmp_path / "TD3_x_0.npy"
    expected = [(str(record), None), (str(curve), 1_000_000 // 5000 + 1)]
    record.write_text(json.dumps({"config": {"eval_freq": 5000}, "stopped": "max_episodes",
                                  "finished_at_step": 261_421}))
    np.save(curve, np.zeros(261_421 // 5000 + 1))
    assert files_complete(expected)
    np.save(curve, np.zeros(261_421 // 5000))  # one evaluation short of the stop
    assert not files_complete(expected)
    record.write_text(json.dumps({"config": {"eval_freq": 5000}}))  # not stopped: the whole budget is due
    np.save(curve, np.zeros(261_421 // 5000 + 1))
    assert not files_complete(expected)


def test_dry_run_prints_commands_and_starts_nothing(tmp_path):
    path = write(tmp_path, {"envs": ["Pendulum-v1"], "policies": ["TD3", "SAC"], "seeds": "0-1", "steps": 1000,
                            "settings": {"s": {"results_dir": str(tmp_path / "r")}}})
    out = subprocess.run([sys.executable, "-m", "utils.sweep", str(path), "--dry_run", "--workers", "2"], cwd=ROOT,
                         capture_output=True, text=True, timeout=HANG_GUARD)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("would run  python DASE_main.py --policy TD3 --env Pendulum-v1 --seeds 0 1 ")
    assert lines[1].startswith("would run  python sac_main.py --policy SAC ") and "--num_steps 1000" in lines[1]
    assert lines[2] == "2 runs: 2 to run, 0 finished"
    assert not (tmp_path / "r").exists()


def test_seeds_per_run_splits_each_run_into_processes_of_that_many_seeds(tmp_path):
    """seeds_per_run 2 over seeds 0-2 5 7: processes of seeds (0, 1), (2, 5), (7,), in order, each the unsplit run's
    command but for its --seeds; joined, they are the unsplit run exactly (a seed's files do not depend on the seeds
    trained beside it: tests/test_seeds.py)."""
    spec = {"envs": ["Pendulum-v1"], "policies": ["TD3", "DASE_SAC"], "seeds": "0-2 5 7", "steps": 5000,
            "start_steps": 1000, "settings": {"a": {"results_dir": str(tmp_path / "a")}}}
    whole = sweep.expand(sweep.load_experiment(write(tmp_path, spec)), threads=1)
    split = sweep.expand(sweep.load_experiment(write(tmp_path, {**spec, "seeds_per_run": 2})), threads=1)
    assert [(r.policy, r.seeds) for r in split] == [(p, s) for p in ("TD3", "DASE_SAC")
                                                    for s in ((0, 1), (2, 5), (7,))]
    for run in split:
        unsplit = next(w for w in whole if w.policy == run.policy)
        at = unsplit.args.index("--seeds") + 1
        assert unsplit.args[at:at + 3] == ("0-2", "5", "7")
        assert run.args == (*unsplit.args[:at], *map(str, run.seeds), *unsplit.args[at + 3:])
        assert run.stems() == [s for s in unsplit.stems() if int(s.rsplit("_", 1)[1]) in run.seeds]
    for policy in ("TD3", "DASE_SAC"):
        assert joined([r for r in split if r.policy == policy]) == next(w for w in whole if w.policy == policy)
    many = sweep.expand(sweep.load_experiment(write(tmp_path, {**spec, "seeds_per_run": 9})), threads=1)
    assert many == whole  # more per run than there are seeds: one process, as without the key


# ---- validation: one line, exit code 2, nothing started ------------------------------------------------
GOOD = {"envs": ["Pendulum-v1"], "policies": ["TD3", "DASE_TD3"], "seeds": "0-1", "steps": 1000, "start_steps": 200,
        "settings": {"s": {"results_dir": "RESULTS"}}}
BAD = [
    ({"sedes": [0]}, "unknown key(s) sedes"),
    ({"policies": ["TD3", "PPO"]}, "unknown policy 'PPO'"),
    ({"envs": ["Hoper-v5"]}, "Hopper-v5"),
    ({"steps": 0}, "steps: must be positive"),
    ({"steps": -5}, "steps: must be positive"),
    ({"steps": "many"}, "steps: expected an integer"),
    ({"eval_freq": 2000}, "eval_freq 2000 is larger than steps 1000"),
    ({"seeds": "3-1"}, "empty range"),
    ({"seeds": [0, 0]}, "0 named twice"),
    ({"threads_per_run": 0}, "threads_per_run: must be positive"),
    ({"seeds_per_run": 0}, "seeds_per_run: must be positive"),
    ({"seeds_per_run": "two"}, "seeds_per_run: expected an integer"),
    ({"gpus_per_run": -1}, "gpus_per_run"),
    ({"device": "tpu"}, "device"),
    ({"flags": {"max_time_steps": 5}}, "use the top-level 'steps'"),
    ({"flags": {"buffer_sise": 5}}, "unrecognized arguments: --buffer_sise"),
    ({"flags": {"similarity": "cosine"}}, "--similarity"),
    ({"flags": {"batch_size": 0}}, "--batch_size"),
    ({"flags": {"buffer_size": 100}, "start_steps": 200}, "smaller than one batch"),
    ({"flags": {"kl_precision": "float32"}}, "settings.s, TD3 on Pendulum-v1: --kl_precision float32"),
    ({"flags": {"num_agents": 3}}, "--num_agents 3 does not apply to TD3"),
    ({"settings": {"s": {"flags": {}}}}, "needs a results_dir"),
    ({"settings": {"s": {"results_dir": "RESULTS", "color": "red"}}}, "unknown key(s) color"),
    ({"settings": {"s": {"results_dir": "RESULTS"}, "t": {"results_dir": "RESULTS/"}}}, "its own folder"),
    ({"settings": {"s": {"results_dir": "RESULTS", "policies": ["TD3", "DDPG"]},
                   "t": {"results_dir": "RESULTS", "policies": ["DDPG"]}}}, "with DDPG in both"),
    ({"settings": {}}, "settings: expected a mapping"),
    ({"settings": {"s": {"results_dir": "RESULTS", "policies": ["PPO"]}}}, "settings.s.policies: unknown policy"),
    ({"settings": {"s": {"results_dir": "RESULTS", "steps": 500}}}, "settings.s.steps 500 is smaller than eval_freq"),
    # what only the environment's spaces tell: the Pendulum runs come first and are fine, yet none may start
    ({"envs": ["Pendulum-v1", "CartPole-v1"]},
     "settings.s, TD3 on CartPole-v1: --env CartPole-v1: action space is Discrete, TD3 needs a continuous (Box)"),
    ({"policies": ["ACER"], "flags": {"prob_eps": 1e-6}},
     "settings.s, ACER on Pendulum-v1: --prob_eps applies to discrete ACER"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_experiment_files_exit_2_with_one_line(change, message, tmp_path, no_processes):
    spec = yaml.safe_load(yaml.safe_dump({**GOOD, **change}).replace("RESULTS", str(tmp_path / "results")))
    path = write(tmp_path, spec)
    code, out, err = call([str(path)])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"{path}: ") and message in err, err
    assert not (tmp_path / "results").exists()


def test_a_file_with_one_run_its_environment_refuses_starts_nothing(tmp_path):
    """Item 5 of issue 62: a grid whose later runs cannot train (TD3 on a discrete environment) is refused whole
    by the command line itself, before any run starts: one line on stderr, exit code 2, no results or log folder."""
    spec = {**GOOD, "envs": ["Pendulum-v1", "CartPole-v1"], "eval_freq": 100,
            "settings": {"s": {"results_dir": str(tmp_path / "results")}}}
    done = subprocess.run([sys.executable, "-m", "utils.sweep", str(write(tmp_path, spec))], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "TD3 on CartPole-v1" in done.stderr and "action space is Discrete" in done.stderr
    assert not (tmp_path / "results").exists()


def test_each_environment_is_made_once_to_check_a_file(tmp_path, monkeypatch, no_processes):
    from utils.envs import registry

    made = []
    create = registry._create
    monkeypatch.setattr(registry, "_spaces", {})
    monkeypatch.setattr(registry, "_create", lambda env_id, *a, **k: made.append(env_id) or create(env_id, *a, **k))
    spec = {**GOOD, "envs": ["Pendulum-v1", "MountainCarContinuous-v0"], "policies": ["TD3", "DASE_TD3", "SAC"],
            "settings": {"s": {"results_dir": str(tmp_path / "s")}, "t": {"results_dir": str(tmp_path / "t")}}}
    code, out, err = call([str(write(tmp_path, spec)), "--dry_run"])
    assert code == 0, err
    assert len(out.splitlines()) == 2 * 2 * 3 + 1
    assert sorted(made) == ["MountainCarContinuous-v0", "Pendulum-v1"]


@pytest.mark.parametrize("text, message", [("envs: [a\n", "not valid YAML (line 2"),
                                           ("- 1\n- 2\n", "expected a mapping"),
                                           (None, "cannot read the experiment file")])
def test_unreadable_files_exit_2(text, message, tmp_path, no_processes):
    path = tmp_path / "exp.yaml"
    if text is not None:
        path.write_text(text)
    code, _, err = call([str(path)])
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_missing_ray_is_one_line_and_exit_2(tmp_path, monkeypatch, no_processes):
    spec = yaml.safe_load(yaml.safe_dump(GOOD).replace("RESULTS", str(tmp_path / "results")))
    monkeypatch.setitem(sys.modules, "ray", None)  # "import ray" now raises ImportError
    code, _, err = call([str(write(tmp_path, spec)), "--ray"])
    assert code == 2 and err == "pip install -r requirements-cluster.txt\n"
    assert not (tmp_path / "results").exists()


# ---- real tiny sweeps ------------------------------------------------------------------------------------
TINY = {"envs": ["Pendulum-v1"], "policies": ["TD3", "DASE_TD3"], "seeds": "0-1", "steps": 300, "start_steps": 100,
        "eval_freq": 100, "eval_episodes": 1, "threads_per_run": 1, "flags": {"batch_size": 32}}
CURVES = [f"TD3_Pendulum-v1_{s}.npy" for s in (0, 1)] + \
         [f"DASE_TD3_Pendulum-v1_{s}_Agent_{i}.npy" for s in (0, 1) for i in (0, 1)]


def logs_under(folder: Path) -> str:
    """Every run log under folder, for a failure's message."""
    return "\n".join(f"--- {p}\n{p.read_text()}" for p in sorted(folder.rglob("*.log")))


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def first_sweep(tmp_path_factory):
    """A good setting (two runs) and a broken one whose runs the command line rejects at start (exit 2): a model to
    load that is not there, which only the run itself finds (the sweep checks flags and settings, not models)."""
    tmp = tmp_path_factory.mktemp("sweep")
    spec = {**TINY, "settings": {"good": {"results_dir": str(tmp / "good")},
                                 "broken": {"results_dir": str(tmp / "broken"), "flags": {"load_model": "nothing_here"}}}}
    code, out, err = call([str(write(tmp, spec)), "--workers", "2"])
    folder = tmp / "good/TD3/Pendulum-v1"
    curves = {name: (folder / name).read_bytes() for name in CURVES if (folder / name).exists()}
    return dict(tmp=tmp, code=code, out=out, err=err, folder=folder, curves=curves)


def test_sweep_writes_curves_and_reports_the_failed_runs(first_sweep):
    out, folder = first_sweep["out"], first_sweep["folder"]
    assert first_sweep["code"] == 1, out + first_sweep["err"]
    assert sorted(first_sweep["curves"]) == sorted(CURVES), out
    for name in CURVES:
        curve = np.load(folder / name)
        assert curve.dtype == np.float64 and curve.shape == (4,) and np.isfinite(curve).all()
    assert {f"TD3_Pendulum-v1_{s}.json" for s in (0, 1)} <= {p.name for p in folder.iterdir()}
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    for policy in ("TD3", "DASE_TD3"):
        assert rows[f"good {policy} Pendulum-v1 seeds 0 1"].endswith(" done"), out
    for policy in ("TD3", "DASE_TD3"):
        row = rows[f"broken {policy} Pendulum-v1 seeds 0 1"]
        log = first_sweep["tmp"] / f"broken/TD3/Pendulum-v1/logs/{policy}_Pendulum-v1_0_1.log"
        assert f"failed (exit 2, log: {log.resolve()})" in row, row
        assert "--load_model" in log.read_text()  # the command line's own one-line error is in the log
    assert out.splitlines()[-1] == "4 runs: 2 done, 0 skipped, 2 failed"


def test_second_invocation_starts_nothing(first_sweep, no_processes):
    tmp = first_sweep["tmp"]
    before = snapshot(tmp / "good")
    path = write(tmp, {**TINY, "settings": {"good": {"results_dir": str(tmp / "good")}}}, "good.yaml")
    code, out, _ = call([str(path), "--workers", "2"])
    assert code == 0, out
    assert "2 runs, 2 finished (skipped), 0 to run" in out
    assert [line.split()[-1] for line in out.splitlines() if line.startswith("good ")] == ["skipped", "skipped"]
    assert snapshot(tmp / "good") == before  # no file (curve, record or log) was touched


def test_incomplete_run_is_run_again_and_only_it(first_sweep):
    tmp, folder = first_sweep["tmp"], first_sweep["folder"]
    (folder / "DASE_TD3_Pendulum-v1_1_Agent_1.npy").unlink()
    untouched = {k: v for k, v in snapshot(tmp / "good").items() if k.startswith("TD3/Pendulum-v1/TD3_")}
    path = write(tmp, {**TINY, "settings": {"good": {"results_dir": str(tmp / "good")}}}, "good.yaml")
    code, out, _ = call([str(path), "--workers", "2"])
    assert code == 0, out
    assert "2 runs, 1 finished (skipped), 1 to run" in out
    assert out.splitlines()[-1] == "2 runs: 1 done, 1 skipped, 0 failed"
    for name in CURVES:  # deterministic on CPU: the rerun restores exactly the same curve
        assert (folder / name).read_bytes() == first_sweep["curves"][name], name
    assert {k: v for k, v in snapshot(tmp / "good").items() if k.startswith("TD3/Pendulum-v1/TD3_")} == untouched


def test_until_pauses_every_run_and_a_later_sweep_ends_them_as_one_uninterrupted(first_sweep):
    """--until 200: both runs stop at step 200 with their checkpoints ("paused", exit 0), a second --until 200 leaves
    them there, and a sweep without it finishes them with the same curves, byte for byte, as the first sweep's
    uninterrupted runs."""
    tmp = first_sweep["tmp"]
    path = write(tmp, {**TINY, "settings": {"good": {"results_dir": str(tmp / "paused")}}}, "paused.yaml")
    folder = tmp / "paused/TD3/Pendulum-v1"
    for _ in range(2):
        code, out, err = call([str(path), "--workers", "2", "--until", "200"])
        assert code == 0, out + err + logs_under(tmp / "paused")
        assert out.splitlines()[-1] == "2 runs: 0 done, 2 paused, 0 skipped, 0 failed", out
        assert "paused (at step 200 (--until); rerun the same command to continue)" in out
        assert {len(np.load(folder / name)) for name in CURVES} == {3}  # evaluations at 0, 100, 200
        assert len(list((folder / "checkpoints").glob("*.pt"))) == 4  # 2 runs x 2 seeds
    code, out, err = call([str(path), "--workers", "2", "--dry_run", "--until", "200"])
    assert out.count("--stop_at 200") == 2, out
    code, out, err = call([str(path), "--workers", "2", "--dry_run", "--until", "300"])  # the budget: no pause
    assert code == 0 and "--stop_at" not in out and out.count("would resume") == 2, out
    assert out.count("(evaluated to step 200 of 300; the least advanced seed)") == 2, out
    code, out, err = call([str(path), "--workers", "2", "--until", "300"])
    assert code == 0 and out.splitlines()[-1] == "2 runs: 2 done, 0 skipped, 0 failed", out + err
    for name in CURVES:
        assert (folder / name).read_bytes() == first_sweep["curves"][name], name


def test_until_needs_checkpoints(tmp_path, no_processes):
    spec = {**TINY, "settings": {"s": {"results_dir": str(tmp_path / "r"), "flags": {"checkpoint_freq": 0}}}}
    code, out, err = call([str(write(tmp_path, spec)), "--until", "100"])
    assert code == 2 and "checkpoint_freq 0" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_interrupted_sweep_passes_the_signal_on_and_reports_it(tmp_path):
    spec = {**TINY, "policies": ["TD3"], "seeds": [0], "steps": 20_000, "start_steps": 100, "eval_freq": 10_000,
            "settings": {"s": {"results_dir": str(tmp_path / "r")}}}
    folder = tmp_path / "r/TD3/Pendulum-v1"
    proc = subprocess.Popen([sys.executable, "-m", "utils.sweep", str(write(tmp_path, spec))], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the step-0 curve is written after the run installed its signal handlers: interrupt from then on
        deadline = time.monotonic() + HANG_GUARD
        while not (folder / "TD3_Pendulum-v1_0.npy").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=HANG_GUARD)
    finally:
        proc.kill()
    assert proc.returncode == 130, out  # 128 + SIGINT; the run itself got SIGTERM (exit 143)
    assert "interrupted (exit 143" in out.splitlines()[-2] and "rerun the same command to continue" in out, out
    assert list((folder / "checkpoints").glob("*.pt")), "the run did not checkpoint; its log:\n" + logs_under(tmp_path)
    assert len(np.load(folder / "TD3_Pendulum-v1_0.npy")) < 3, out  # it stopped before the end


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance with 2 CPUs for the Ray tests; the sweep uses it rather than starting its own."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-cluster.txt)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_gives_the_same_curves_as_the_process_pool(first_sweep, local_ray):
    tmp = first_sweep["tmp"]
    path = write(tmp, {**TINY, "settings": {"good": {"results_dir": str(tmp / "ray")}}}, "ray.yaml")
    code, out, err = call([str(path), "--ray"])
    assert code == 0, out + err
    assert "on Ray (local)" in out and out.splitlines()[-1] == "2 runs: 2 done, 0 skipped, 0 failed"
    for name in CURVES:
        assert (tmp / "ray/TD3/Pendulum-v1" / name).read_bytes() == first_sweep["curves"][name], name


def test_ray_interrupt_stops_the_runs_with_a_checkpoint(tmp_path, local_ray):
    spec = {**TINY, "policies": ["TD3"], "seeds": [0], "steps": 20_000, "eval_freq": 10_000,
            "settings": {"s": {"results_dir": str(tmp_path / "r")}}}
    folder = tmp_path / "r/TD3/Pendulum-v1"
    returned = threading.Event()

    def interrupt_once_running() -> None:
        # the step-0 curve is written after the run installed its signal handlers: interrupt from then on
        while not returned.is_set():
            if (folder / "TD3_Pendulum-v1_0.npy").exists():
                os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl-C would; main() handles it in this thread
                return
            returned.wait(0.05)

    watcher = threading.Thread(target=interrupt_once_running, daemon=True)
    watcher.start()
    try:
        code, out, err = call([str(write(tmp_path, spec)), "--ray"])
    finally:
        returned.set()
        watcher.join()
    assert code == 130, out + err
    assert "interrupted (exit 143" in out.splitlines()[-2], out
    assert list((folder / "checkpoints").glob("*.pt")), "the run did not checkpoint; its log:\n" + logs_under(tmp_path)
    assert len(np.load(folder / "TD3_Pendulum-v1_0.npy")) < 3  # it stopped before the end


def test_sigterm_to_the_process_group_of_a_ray_sweep_stops_its_runs_with_a_checkpoint(tmp_path):
    """timeout, Slurm and a terminal signal the whole group, the local Ray's processes included: the sweep still
    stops its runs with their checkpoints and reports it (exit 143; before, Ray's GCS died with the group, the sweep
    hung a minute, exited 1 and left its runs training)."""
    pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-cluster.txt)")
    spec = {**TINY, "policies": ["TD3"], "seeds": [0], "steps": 20_000, "start_steps": 100, "eval_freq": 10_000,
            "settings": {"s": {"results_dir": str(tmp_path / "r")}}}
    folder = tmp_path / "r/TD3/Pendulum-v1"
    proc = subprocess.Popen([sys.executable, "-m", "utils.sweep", str(write(tmp_path, spec)), "--ray"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not (folder / "TD3_Pendulum-v1_0.npy").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=HANG_GUARD)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out
    assert "interrupted (exit 143" in out.splitlines()[-2] and "rerun the same command to continue" in out, out
    assert "Started a local Ray instance" not in out and "WARNING" not in out, out  # Ray's notices left out
    assert list((folder / "checkpoints").glob("*.pt")), "the run did not checkpoint; its log:\n" + logs_under(tmp_path)
    assert len(np.load(folder / "TD3_Pendulum-v1_0.npy")) < 3  # it stopped before the end
    assert not running_with(str(tmp_path)), "a run is still going"


def running_with(text: str) -> list[str]:
    """The processes of this machine whose command line holds ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:  # it ended meanwhile
            continue
    return found


def is_suite(path: Path) -> bool:
    """A utils.compare suite (its methods by name) rather than a sweep's experiment file; tests/test_compare.py checks
    those."""
    return "methods" in (yaml.safe_load(path.read_text()) or {})


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "experiments").glob("*.yaml") if not is_suite(p)),
                         ids=lambda p: p.name)
def test_every_committed_experiment_file_builds_runs_its_scripts_accept(path):
    """Each experiments/*.yaml loads, expands into runs, and every run's flags pass its script's own parser and
    checks (what the sweep does before starting anything): a renamed or removed flag breaks this, not a user's
    sweep hours later. An Atari file run on EnvPool, where EnvPool is not installed (a user without
    requirements-atari.txt), is refused before anything starts, in one line naming the install."""
    from utils.envs.pool import installed
    from utils.sweep.experiment import ExperimentError

    runs = sweep.expand(sweep.load_experiment(path), threads=1)
    assert runs
    if not installed() and any("envpool" in run.args for run in runs):
        with pytest.raises(ExperimentError, match=r"--env_backend envpool: EnvPool is not installed \(pip install -r "
                                                  r"requirements-atari.txt\)"):
            sweep.check_flags(runs)
        return
    sweep.check_flags(runs)
