"""python -m utils.compare: the smoke suite end to end (runs, resumes, dry run), the statistics against rliable called
directly, the paired differences against a plain computation, the report's numbers from curves made by hand, and
bad suites (one line, exit code 2, nothing run or written)."""
from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from utils import compare
from utils.plot.stats import efficiency, global_seed

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "experiments" / "compare_smoke.yaml"
HANG_GUARD = 900
FIGURES = ["curves_Pendulum-v1.png", "curves_RandomExtremePendulum-v1.png", "aggregates.png",
           "probability_of_improvement.png", "performance_profile.png", "iqm_against_steps.png"]


def call(argv: list[str]) -> tuple[int, str, str]:
    """utils.compare's main in this process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = compare.main(argv)
    return code, out.getvalue(), err.getvalue()


def compare_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "utils.compare", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD)


def files_under(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- the smoke suite, for real ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    done = compare_command(str(SMOKE), "--results", str(tmp / "results"), "--out", str(tmp / "out"))
    return tmp, done


def test_the_smoke_suite_runs_and_writes_its_report(smoke):
    tmp, done = smoke
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(FIGURES + ["report.json", "report.md"])
    report = json.loads((out / "report.json").read_text())
    assert report["suite"]["final_evaluations"] == 2 and report["suite"]["budget_rule"] == "per_agent"
    assert set(report["aggregates"]) == {"TD3", "DASE_TD3"}
    assert set(report["aggregates"]["TD3"]) == set(compare.METRICS)
    assert list(report["probability_of_improvement"]) == ["DASE_TD3"]
    dase = report["tasks"]["Pendulum-v1"]["methods"]["DASE_TD3"]
    assert (dase["agents"], dase["steps_per_agent"], dase["total_steps"]) == (2, 300, 600)
    assert len(dase["final"]) == 2 and len(dase["curve"]["mean"]) == 4
    assert report["paired_differences"][0]["a"] == "DASE_TD3" and report["paired_differences"][0]["b"] == "TD3"
    assert set(report["versions"]) >= {"python", "numpy", "torch", "rliable"}
    text = (out / "report.md").read_text()
    for name in FIGURES:
        assert f"]({name})" in text
    for heading in ("## Budget", "## Final scores per task", "## Across tasks (rliable)", "## Paired differences",
                    "## The suite", "## Commands", "## Versions"):
        assert heading in text
    assert "python -m utils.compare " + str(SMOKE) in text and "python DASE_main.py --policy DASE_TD3" in text


def test_a_second_call_runs_nothing_and_writes_the_same_numbers(smoke, no_processes):
    tmp, _ = smoke
    before = (tmp / "out" / "report.json").read_bytes()
    results = files_under(tmp / "results")
    code, out, err = call([str(SMOKE), "--results", str(tmp / "results"), "--out", str(tmp / "out")])
    assert code == 0, out + err
    assert "4 finished, 0 to run" in out
    assert files_under(tmp / "results") == results  # no curve, record or log touched
    assert (tmp / "out" / "report.json").read_bytes() == before  # the bootstrap seeded: the same numbers
    assert "(replaced the report that was there, with its figures)" in out.splitlines()[-1]  # said, never silent
    assert "replaced" not in smoke[1].stdout  # the first call's report replaced none


def test_dry_run_lists_the_runs_and_writes_nothing(smoke, tmp_path, no_processes):
    tmp, _ = smoke
    code, out, err = call([str(SMOKE), "--dry_run", "--results", str(tmp_path / "results"),
                           "--out", str(tmp_path / "out")])
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 6 and all(line.startswith("would run  python DASE_main.py") for line in lines[:4])
    assert lines[4] == "4 runs: 4 to run, 0 finished"
    assert list(tmp_path.iterdir()) == []
    code, out, err = call([str(SMOKE), "--dry_run", "--results", str(tmp / "results"), "--out", str(tmp_path / "o")])
    assert [line.split()[0] for line in out.splitlines()[:4]] == ["finished"] * 4
    assert list(tmp_path.iterdir()) == []


# ---- the statistics against rliable called directly ------------------------------------------------------
def known_scores() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"A": rng.normal(0.5, 0.3, (6, 3)), "B": rng.normal(0.6, 0.3, (6, 3)), "C": rng.normal(0.3, 0.4, (6, 3))}


def test_statistics_are_rliables_on_the_same_arrays_and_seed():
    from rliable import library, metrics

    scores, reps, seed = known_scores(), 300, 3
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    got = compare.statistics(scores, "A", reps, seed)
    assert np.random.random() == expected_next  # the global generator is left as it was

    def four(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x),
                         metrics.aggregate_optimality_gap(x)])

    np.random.seed(seed)
    points, intervals = library.get_interval_estimates(scores, four, reps=reps)
    for m in scores:
        for j, name in enumerate(compare.METRICS):
            assert got["aggregates"][m][name]["estimate"] == points[m][j]
            assert got["aggregates"][m][name]["ci"] == list(intervals[m][:, j])
    import scipy.stats

    assert got["aggregates"]["B"]["IQM"]["estimate"] == scipy.stats.trim_mean(scores["B"], 0.25, axis=None)
    assert got["aggregates"]["C"]["optimality gap"]["estimate"] == 1 - np.minimum(scores["C"], 1).mean()
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates({"B,A": (scores["B"], scores["A"]),
                                                        "C,A": (scores["C"], scores["A"])},
                                                       metrics.probability_of_improvement, reps=reps)
    assert list(got["probability_of_improvement"]) == ["B", "C"]
    for m in ("B", "C"):
        assert got["probability_of_improvement"][m]["estimate"] == points[f"{m},A"]
        assert got["probability_of_improvement"][m]["ci"] == list(intervals[f"{m},A"][:, 0])
        assert got["probability_of_improvement"][m]["estimate"] == metrics.probability_of_improvement(scores[m],
                                                                                                      scores["A"])
    taus = np.array(got["performance_profile"]["taus"])
    np.random.seed(seed)
    profiles, cis = library.create_performance_profile(scores, taus, reps=reps)  # rliable's own profile function
    for m in scores:
        assert got["performance_profile"]["methods"][m]["fraction"] == profiles[m].tolist()
        assert got["performance_profile"]["methods"][m]["ci"] == cis[m].tolist()


def test_iqm_against_steps_is_rliables_per_point():
    from rliable import library, metrics

    rng = np.random.default_rng(11)
    scores = {"A": rng.normal(size=(5, 2, 4)), "B": rng.normal(size=(5, 2, 4))}
    got = efficiency(scores, 200, 5)
    np.random.seed(5)
    points, intervals = library.get_interval_estimates(
        scores, lambda x: np.array([metrics.aggregate_iqm(x[:, :, j]) for j in range(4)]), reps=200)
    for m in scores:
        assert got[m]["iqm"] == points[m].tolist() and got[m]["ci"] == intervals[m].tolist()


def test_global_seed_restores_the_generator_even_on_error():
    np.random.seed(9)
    state = np.random.get_state()
    with pytest.raises(RuntimeError), global_seed(0):
        np.random.random()
        raise RuntimeError
    after = np.random.get_state()
    assert all(np.array_equal(a, b) for a, b in zip(state, after))


# ---- paired differences against a plain computation ----------------------------------------------------
def test_paired_difference_against_a_plain_computation():
    from utils.plot.stats import bootstrap_ci

    rng = np.random.default_rng(2)
    a, b = rng.normal(1.0, 1.0, (7, 3)), rng.normal(0.5, 1.0, (7, 3))
    reps, seed = 500, 4
    got = compare.paired_difference(a, b, reps, seed)
    d = a - b
    assert got["estimate"] == pytest.approx(sum(d[i, t] for i in range(7) for t in range(3)) / 21, abs=1e-12)
    assert (got["pairs"], got["better"], got["worse"]) == (21, int((d > 0).sum()), int((d < 0).sum()))
    rows = np.random.default_rng(seed).integers(0, 7, size=(reps, 7, 3))  # the same draws, used plainly
    means = [np.mean([d[rows[r, i, t], t] for i in range(7) for t in range(3)]) for r in range(reps)]
    assert got["ci"] == pytest.approx([np.percentile(means, 2.5), np.percentile(means, 97.5)], abs=1e-12)
    one = compare.paired_difference(a[:, 0], b[:, 0], reps, seed)  # one task: the project's bootstrap_ci
    assert one["ci"] == pytest.approx(list(bootstrap_ci(d[:, 0], np.mean, reps, seed)), abs=1e-12)
    shifted = compare.paired_difference(b + 2.5, b, reps, seed)  # the same seeds: no noise left
    assert shifted["estimate"] == pytest.approx(2.5) and shifted["ci"] == pytest.approx([2.5, 2.5])


# ---- the report's numbers from curves written by hand --------------------------------------------------
def hand_suite(tmp_path: Path, **change) -> Path:
    spec = {"name": "hand", "tasks": [{"env": "Pendulum-v1", "random": -1000, "target": 0},
                                      {"env": "MountainCarContinuous-v0", "random": 0, "target": 100}],
            "methods": {"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3", "flags": {"num_agents": 3}}},
            "baseline": "solo", "seeds": "0-2", "budget": 600, "start_steps": 100, "eval_freq": 100,
            "final_evaluations": 2, "efficiency_points": 2, "bootstrap_reps": 100, **change}
    path = tmp_path / "hand.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def fake_runs(folder: Path, policy: str, env: str, agents: int, length: int, value, seeds=range(3),
              suffix: str = "") -> None:
    """A finished run's files: a record per seed and a curve per agent, value(seed, agent, evaluation) (``suffix``
    "_tasks": the all-variant files [evaluations, 2 variants]: value - 1 and value + 1, beside curves of zeros)."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        stem = f"{policy}_{env}_{seed}"
        (folder / f"{stem}.json").write_text("{}")
        names = [f"{stem}_Agent_{i}" for i in range(agents)] if agents > 1 else [stem]
        for i, name in enumerate(names):
            curve = np.array([value(seed, i, e) for e in range(length)], dtype=np.float64)
            if suffix:
                np.save(folder / f"{name}{suffix}.npy", np.stack([curve - 1, curve + 1], axis=1))
                np.save(folder / f"{name}.npy", np.zeros(length))
            else:
                np.save(folder / f"{name}.npy", curve)


def test_report_numbers_from_curves_written_by_hand(tmp_path, no_processes):
    """Final score: the last 2 evaluations, a seed's agents averaged first; normalised by the task's pair; under
    the total rule a 3-agent method trains 600 // 3 = 200 steps per agent and its x axis counts all agents."""
    results = tmp_path / "r"
    suite = hand_suite(tmp_path, budget_rule="total", start_steps=0)  # only step 0's evaluation is untrained
    for env, scale in (("Pendulum-v1", -10.0), ("MountainCarContinuous-v0", 1.0)):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: scale * (10 * e + s))
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 3, lambda s, i, e: scale * (20 * e + s + i))
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    pend = r["tasks"]["Pendulum-v1"]["methods"]
    assert pend["solo"]["final"] == [-10.0 * (55 + s) for s in range(3)]  # evaluations 5 and 6: 50 and 60
    assert pend["shared"]["final"] == [-10.0 * (30 + s + 1) for s in range(3)]  # evaluations 1, 2; agents 0-2
    assert pend["shared"]["normalised"] == pytest.approx([(-10.0 * (31 + s) + 1000) / 1000 for s in range(3)])
    assert (pend["shared"]["steps_per_agent"], pend["shared"]["total_steps"]) == (200, 600)
    assert pend["shared"]["curve"]["steps"] == [0, 300, 600] and pend["solo"]["curve"]["steps"][-1] == 600
    car = r["tasks"]["MountainCarContinuous-v0"]["methods"]
    assert car["solo"]["normalised"] == [(55 + s) / 100 for s in range(3)]
    pair = r["paired_differences"][0]
    assert pair["tasks"]["MountainCarContinuous-v0"]["final"]["estimate"] == pytest.approx(31 - 55)
    assert r["sample_efficiency"]["steps"] == [300.0, 600.0]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "**Equal total budget**" in text and "| shared | DASE_TD3 | `--num_agents 3` | 3 | 200 | 600 |" in text


def test_seeds_per_run_starts_a_process_per_batch_and_the_report_reads_every_seed(tmp_path, no_processes):
    """seeds_per_run 2 over seeds 0-2: two processes per method and task ("--seeds 0 1", "--seeds 2"), listed by
    --dry_run and in the report's commands; the report reads the three seeds as one run, the numbers of the same
    curves read without the key."""
    results = tmp_path / "r"
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 20.0 * e + s + i)
    code, out, _ = call([str(hand_suite(tmp_path, seeds_per_run=2)), "--results", str(results), "--dry_run"])
    assert code == 0 and out.count("finished ") == 8 and "8 runs: 0 to run, 8 finished" in out
    assert [line.split("--seeds ")[1].split(" --")[0] for line in out.splitlines()[:2]] == ["0 1", "2"]
    reports = {}
    for key, change in (("split", {"seeds_per_run": 2}), ("whole", {})):
        code, out, err = call([str(hand_suite(tmp_path, **change)), "--results", str(results),
                               "--out", str(tmp_path / key)])
        assert code == 0, out + err
        reports[key] = json.loads((tmp_path / key / "report.json").read_text())
    split, whole = reports["split"], reports["whole"]
    assert len(split["commands"]["runs"]) == 8 and len(whole["commands"]["runs"]) == 4
    for name in ("Pendulum-v1", "MountainCarContinuous-v0"):
        for m in ("solo", "shared"):
            assert split["tasks"][name]["methods"][m]["seeds"] == [0, 1, 2]
            assert split["tasks"][name]["methods"][m]["final"] == whole["tasks"][name]["methods"][m]["final"]
    assert split["paired_differences"] == whole["paired_differences"]


def test_seed_flags_give_some_seeds_of_a_method_their_own_arithmetic_flag(tmp_path, no_processes):
    """seed_flags {"1": {flush_denormals: true}} on solo over seeds 0-2: the runs started are solo's seeds 0 and 2
    without the flag, seed 1 with it (seeds_per_run or not), shared's as before; the report reads solo's three seeds as
    one run (the numbers of the same curves read without the key) and its methods entry says which seeds had the
    flag; --seeds 0 leaves the flagged seed out of the runs."""
    results = tmp_path / "r"
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 20.0 * e + s + i)
    flagged = {"solo": {"policy": "TD3", "seed_flags": {"1": {"flush_denormals": True}}},
               "shared": {"policy": "DASE_TD3", "flags": {"num_agents": 3}}}

    def commands(out: str) -> list[tuple[str, str, bool]]:
        rows = [line.split("python ", 1)[1] for line in out.splitlines() if line.startswith("finished ")]
        return [(r.split("--policy ")[1].split()[0], r.split("--seeds ")[1].split(" --")[0], "--flush_denormals" in r)
                for r in rows]

    for change in ({}, {"seeds_per_run": 1}):
        code, out, err = call([str(hand_suite(tmp_path, methods=flagged, **change)), "--results", str(results),
                               "--dry_run"])
        assert code == 0, out + err
        solo = [(seeds, flag) for policy, seeds, flag in commands(out) if policy == "TD3"]
        shared = [(seeds, flag) for policy, seeds, flag in commands(out) if policy == "DASE_TD3"]
        if change:
            assert solo == [("0", False), ("1", True), ("2", False)] * 2 and not any(f for _, f in shared)
        else:
            assert solo == [("0 2", False), ("1", True)] * 2 and shared == [("0-2", False)] * 2
    code, out, err = call([str(hand_suite(tmp_path, methods=flagged)), "--results", str(results), "--dry_run",
                           "--seeds", "0"])
    assert code == 0 and [c for c in commands(out) if c[0] == "TD3"] == [("TD3", "0", False)] * 2, out + err
    reports = {}
    for key, methods in (("flagged", flagged), ("plain", None)):
        change = {"methods": methods} if methods else {}
        code, out, err = call([str(hand_suite(tmp_path, **change)), "--results", str(results),
                               "--out", str(tmp_path / key)])
        assert code == 0, out + err
        reports[key] = json.loads((tmp_path / key / "report.json").read_text())
    flagged_r, plain = reports["flagged"], reports["plain"]
    assert flagged_r["methods"]["solo"]["seed_flags"] == {"1": {"flush_denormals": True}}
    assert "seed_flags" not in plain["methods"]["solo"]
    assert "| solo | TD3 | seeds 1: `--flush_denormals` | 1 |" in (tmp_path / "flagged" / "report.md").read_text()
    assert sum("--flush_denormals" in c for c in flagged_r["commands"]["runs"]) == 2
    for name in ("Pendulum-v1", "MountainCarContinuous-v0"):
        assert flagged_r["tasks"][name]["methods"]["solo"]["seeds"] == [0, 1, 2]
        assert flagged_r["tasks"][name]["methods"]["solo"]["final"] == plain["tasks"][name]["methods"]["solo"]["final"]
    assert flagged_r["paired_differences"] == plain["paired_differences"]


def test_steps_table_with_seeds_of_its_own_references_and_paired_differences(tmp_path, no_processes):
    """at_steps: per seed the mean of the K evaluations ending at the step; a method with seeds of its own (solo
    0-4) is paired with another (shared 0-2) on the seeds both ran, with the exact sign-flip p; a published
    reference (evaluated every 50 steps, 2 agents) read on the suite's grid; rliable's statistics take 5 runs
    against 3; --write_docs puts the table at each step between the page's markers, nothing else of the page."""
    from utils.plot.stats import bootstrap_ci

    results, paper = tmp_path / "r", tmp_path / "paper" / "Pendulum-v1"
    paper.mkdir(parents=True)
    for seed in range(4):
        for agent in range(2):  # 25 evaluations every 50 steps: 0..1200; value = its step / 10 + seed + agent
            np.save(paper / f"DASE_TD3_Pendulum-v1_{seed}_Agent_{agent}.npy", np.arange(25) * 5.0 + seed + agent)
    page = tmp_path / "page.md"
    page.write_text("# a page\n\n<!-- hand_table -->\nold\n<!-- /hand_table -->\n\nafter\n")
    spec = {"at_steps": [300], "methods": {"solo": {"policy": "TD3", "seeds": "0-4"},
                                           "shared": {"policy": "DASE_TD3", "flags": {"num_agents": 3}}},
            "tasks": [{"env": "Pendulum-v1", "random": -1000, "target": 0,
                       "references": {"paper": {"folder": str(paper), "prefix": "DASE_TD3", "eval_freq": 50}}},
                      {"env": "MountainCarContinuous-v0", "random": 0, "target": 100}],
            "docs": {"file": str(page), "marker": "hand_table"}, "bootstrap_reps": 200}
    suite = hand_suite(tmp_path, **spec)
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s, seeds=range(5))
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 20.0 * e + s + i)
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out"), "--write_docs"])
    assert code == 0, out + err
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["suite"]["columns"] == ["300", "600"]
    task = r["tasks"]["Pendulum-v1"]
    solo = task["methods"]["solo"]["at_steps"]["300"]
    values = np.array([10.0 * 2.5 + s for s in range(5)])  # evaluations 2 and 3 (steps 200, 300)
    assert solo["values"] == values.tolist() and solo["seeds"] == [0, 1, 2, 3, 4]
    assert solo["ci"] == pytest.approx(list(bootstrap_ci(values, np.mean, 200, 0)))
    ref = task["references"]["paper"]["at_steps"]
    # the suite's evaluations at steps 200 and 300 are the reference's 5th and 7th: 20 + s + 0.5 and 30 + s + 0.5
    assert ref["300"]["values"] == [25.5 + s for s in range(4)] and ref["300"]["seeds"] == [0, 1, 2, 3]
    assert ref["600"]["values"] == [55.5 + s for s in range(4)]  # cut at the suite's budget
    pair = r["paired_differences"][0]
    assert (pair["a"], pair["b"]) == ("shared", "solo")
    d300 = pair["tasks"]["Pendulum-v1"]["300"]  # shared: 20 x 2.5 + s + 1; solo: 10 x 2.5 + s; seeds 0-2
    assert d300["seeds"] == [0, 1, 2] and d300["estimate"] == pytest.approx(26.0)
    assert d300["sign_flip_p"] == pytest.approx(2 / 8) and (d300["better"], d300["pairs"]) == (3, 3)
    assert pair["tasks"]["Pendulum-v1"]["final"]["estimate"] == pytest.approx(56.0)  # evaluations 5, 6
    assert len(r["tasks"]["Pendulum-v1"]["methods"]["solo"]["final"]) == 5
    text = page.read_text()
    assert text.startswith("# a page\n\n<!-- hand_table -->\n| mean of the 2 evaluations up to the step")
    assert text.endswith("<!-- /hand_table -->\n\nafter\n") and "old" not in text
    assert "| Pendulum-v1 paper | 27.0 [" in text and "(4) |" in text  # 25.5 + 1.5 on average over seeds 0-3
    assert "| Pendulum-v1 shared − solo, paired by seed | +26.0 [+26.0, +26.0] (p 0.25; 3 of 3 above) |" in text
    # the report's opening names the seeds of a method that has its own (the suite's 0-2, solo's 0-4)
    assert "2 task(s), 2 methods, seeds 0-2; solo: 0-4. " in (tmp_path / "out" / "report.md").read_text()
    # --seeds: a report on some seeds only
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out2"), "--seeds", "1-4"])
    assert code == 0, err
    r = json.loads((tmp_path / "out2" / "report.json").read_text())
    assert r["tasks"]["Pendulum-v1"]["methods"]["solo"]["seeds"] == [1, 2, 3, 4]
    assert r["tasks"]["Pendulum-v1"]["methods"]["shared"]["seeds"] == [1, 2]


def test_methods_on_some_tasks_only(tmp_path, no_processes):
    """A task may name the methods that run on it (e.g. discrete actions for one family): each method's runs,
    aggregates and profile cover its own tasks; its probability of improvement over the baseline and its paired
    differences cover the tasks both run (rliable called directly on those columns gives the same numbers); a pair
    that shares no task is left out."""
    from rliable import library, metrics

    results = tmp_path / "r"
    spec = {"tasks": [{"env": "Pendulum-v1", "random": -1000, "target": 0},
                      {"env": "MountainCarContinuous-v0", "random": 0, "target": 100, "methods": ["solo", "other"]}],
            "methods": {"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3", "flags": {"num_agents": 3}},
                        "other": {"policy": "DDPG"}},
            "pairs": [["shared", "other"]], "bootstrap_reps": 100}
    suite = hand_suite(tmp_path, **spec)
    code, out, err = call([str(suite), "--dry_run", "--results", str(results), "--out", str(tmp_path / "o")])
    assert code == 0 and out.splitlines()[-2] == "5 runs: 5 to run, 0 finished", out + err
    assert "DASE_TD3 --env MountainCarContinuous-v0" not in out
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(results / "other/DDPG" / env, "DDPG", env, 1, 7, lambda s, i, e: 5.0 * e - s)
    fake_runs(results / "shared/TD3/Pendulum-v1", "DASE_TD3", "Pendulum-v1", 3, 7, lambda s, i, e: 20.0 * e + s + i)
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert list(r["tasks"]["MountainCarContinuous-v0"]["methods"]) == ["solo", "other"]
    solo = np.array([r["tasks"][t]["methods"]["solo"]["normalised"] for t in r["tasks"]]).T  # [seeds, 2 tasks]
    shared = np.array([r["tasks"]["Pendulum-v1"]["methods"]["shared"]["normalised"]]).T  # Pendulum only
    with global_seed(0):
        points, intervals = library.get_interval_estimates({"shared,solo": (shared, solo[:, :1])},
                                                           metrics.probability_of_improvement, reps=100)
    assert r["probability_of_improvement"]["shared"]["estimate"] == points["shared,solo"]
    assert r["probability_of_improvement"]["shared"]["ci"] == list(intervals["shared,solo"][:, 0])
    assert r["aggregates"]["shared"]["mean"]["estimate"] == pytest.approx(shared.mean())
    assert r["aggregates"]["solo"]["mean"]["estimate"] == pytest.approx(solo.mean())
    pairs = {(p["a"], p["b"]): p for p in r["paired_differences"]}
    assert pairs["shared", "solo"]["shared_tasks"] == ["Pendulum-v1"]
    assert pairs["other", "solo"]["shared_tasks"] == ["Pendulum-v1", "MountainCarContinuous-v0"]
    assert pairs["shared", "other"]["tasks"]["Pendulum-v1"]["final"]["estimate"] == pytest.approx(
        np.mean([(20 * 5.5 + s + 1) - (5 * 5.5 - s) for s in range(3)]))
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| shared | DASE_TD3 | `--num_agents 3` | 3 | 600 | 1,800 | Pendulum-v1 |" in text


def test_score_tasks_reads_every_agents_all_variant_curves(tmp_path, no_processes):
    """score: tasks: a run's scores come from its agents' {curve}_tasks.npy (--eval_tasks all), averaged over the
    variants, not its own-task curves; a suite whose runs lack them is refused in one line (no report)."""
    results = tmp_path / "r"
    suite = hand_suite(tmp_path, score="tasks")
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s, suffix="_tasks")
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 20.0 * e + s + i,
                  suffix="_tasks")
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["tasks"]["Pendulum-v1"]["methods"]["solo"]["final"] == [55.0 + s for s in range(3)]
    (results / "solo/TD3/Pendulum-v1/TD3_Pendulum-v1_1_tasks.npy").unlink()
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out3")])
    assert code == 1 and "TD3_Pendulum-v1_1_tasks.npy: cannot read the curve" in err
    assert "--eval_tasks all" in err and not (tmp_path / "out3").exists()


def test_write_docs_puts_every_seed_and_the_mean_weights_in_the_pages_seeds_block(tmp_path, no_processes):
    """A page with a <!-- marker_seeds --> block gets each seed's final score per method (a seed's agents averaged),
    each pair's difference by seed ('—' where one method lacks the seed) and, for a method with DASE weight traces,
    the mean weight of an external sample in each column's span: per seed the mean over its agents of their traces'
    means over the span's periods (the first after the warm-up), then mean (lowest-highest) over seeds; numbers
    against plain loops over the files; report.json carries the same weights."""
    results, page = tmp_path / "r", tmp_path / "page.md"
    page.write_text("# a page\n\n<!-- t -->\nold\n<!-- /t -->\n\ntext\n\n<!-- t_seeds -->\nold\n<!-- /t_seeds -->\n")
    suite = hand_suite(tmp_path, at_steps=[300], tasks=[{"env": "Pendulum-v1", "random": -1000, "target": 0}],
                       methods={"solo": {"policy": "TD3", "seeds": "0-4"},
                                "shared": {"policy": "DASE_TD3", "flags": {"num_agents": 3}}},
                       docs={"file": str(page), "marker": "t"})
    folder = results / "shared/TD3/Pendulum-v1"
    fake_runs(results / "solo/TD3/Pendulum-v1", "TD3", "Pendulum-v1", 1, 7, lambda s, i, e: 10.0 * e + s, range(5))
    fake_runs(folder, "DASE_TD3", "Pendulum-v1", 3, 7, lambda s, i, e: 20.0 * e + s + i)
    rng, traces = np.random.default_rng(3), {}
    for seed in range(3):
        for agent in range(3):
            w = np.concatenate([[np.nan, np.nan], rng.uniform(0, 0.2, 5)])  # periods 0-1: the warm-up, no update
            w[4 + agent % 2] = np.nan if agent == 2 else w[4 + agent % 2]  # a period without a shared sample
            traces[seed, agent] = w
            np.save(folder / f"DASE_TD3_Pendulum-v1_{seed}_Agent_{agent}_weights.npy", w)
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out"), "--write_docs"])
    assert code == 0, out + err
    expected = {}
    for label, (lo, hi) in (("300", (2, 3)), ("600", (4, 6))):  # evaluation periods 2-3 and 4-6
        per_seed = []
        for seed in range(3):
            agents = []
            for agent in range(3):
                known = [x for x in traces[seed, agent][lo:hi + 1] if not np.isnan(x)]
                agents.append(sum(known) / len(known))
            per_seed.append(sum(agents) / 3)
        expected[label] = per_seed
    w = json.loads((tmp_path / "out" / "report.json").read_text())["tasks"]["Pendulum-v1"]["methods"]["shared"]
    for label, per_seed in expected.items():
        assert w["external_weights"][label]["values"] == pytest.approx(per_seed)
        assert w["external_weights"][label]["mean"] == pytest.approx(np.mean(per_seed))
    block = page.read_text().split("<!-- t_seeds -->\n")[1].split("<!-- /t_seeds -->")[0].splitlines()
    assert block[0] == "| final score by seed (the mean of its 2 evaluations ending at 600) | 0 | 1 | 2 | 3 | 4 |"
    assert block[2] == "| solo | 55.0 | 56.0 | 57.0 | 58.0 | 59.0 |"  # evaluations 5 and 6: 10 x 5.5 + s
    assert block[3] == "| shared (its 3 agents averaged) | 111.0 | 112.0 | 113.0 | — | — |"
    assert block[4] == "| shared − solo | +56.0 | +56.0 | +56.0 | — | — |"  # 20 x 5.5 + s + 1 (agents 0-2)
    cells = [f"{np.mean(v):.3f} ({min(v):.3f}-{max(v):.3f})" for v in expected.values()]
    assert block[-3].endswith("lowest-highest seed | 100-300 | 300-600 |")  # start_steps 100, then the columns
    assert block[-1] == f"| shared | {cells[0]} | {cells[1]} |" and "solo |" not in block[-1]
    assert "<!-- t -->\n| mean of the 2 evaluations up to the step" in page.read_text()  # the steps table too
    (folder / "DASE_TD3_Pendulum-v1_1_Agent_2_weights.npy").unlink()  # one trace missing: no weights, no row
    code, out, err = call([str(suite), "--results", str(results), "--out", str(tmp_path / "out2"), "--write_docs"])
    assert code == 0 and "mean weight" not in page.read_text(), out + err


def test_the_docs_tables_of_the_committed_suites_are_their_curves():
    """Every committed suite that names a docs page: the page's table between its markers, and its seeds table where
    the page has that block, are what utils.compare computes from the committed curves (``--write_docs``; with
    ``--so_far`` where runs are under way), line for line."""
    from utils.compare.plan import plan_suite
    from utils.compare.report import per_task, seeds_table, steps_table
    from utils.compare.scores import cut_so_far
    from utils.plot.tables import between_markers, has_markers
    from utils.sweep.runs import run_state

    found = seeded = 0
    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        if not (isinstance(spec, dict) and "methods" in spec and "docs" in spec):
            continue
        suite = compare.load_suite(path)
        entries, _, _ = plan_suite(suite)
        if any(run_state(e.run) != "finished" for e in entries):
            suite, entries = cut_so_far(suite, entries)
        report = per_task(suite, entries)[0]
        page = (ROOT / suite.docs[0]).read_text()
        assert between_markers(page, suite.docs[1]).splitlines() == steps_table(suite, report).splitlines(), path.name
        found += 1
        if has_markers(page, suite.docs[1] + "_seeds"):
            assert between_markers(page, suite.docs[1] + "_seeds").splitlines() == \
                seeds_table(suite, report).splitlines(), path.name
            seeded += 1
    assert found >= 2 and seeded >= 2


def test_so_far_reads_runs_under_way_up_to_the_step_every_seed_reached(tmp_path, no_processes):
    """--so_far runs nothing; each task is read up to the furthest step all its runs' seeds have evaluated at (the
    shortest curve file): the final score is the mean of the evaluations ending there, every method cut alike."""
    results = tmp_path / "r"
    suite = hand_suite(tmp_path)
    for env, reached in (("Pendulum-v1", {0: 5, 1: 6, 2: 7}), ("MountainCarContinuous-v0", {0: 7, 1: 4, 2: 5})):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        for seed, length in reached.items():  # shared: seeds under way, each at its own evaluation
            fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, length, lambda s, i, e: 20.0 * e + s + i,
                      seeds=[seed])
    code, out, err = call([str(suite), "--so_far", "--results", str(results), "--out", str(tmp_path / "out")])
    assert code == 0, out + err
    assert "2 of 4 runs finished" in out and "Pendulum-v1 up to step 400 of 600" in out
    assert "MountainCarContinuous-v0 up to step 300 of 600" in out
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["suite"]["so_far"] == {"Pendulum-v1": {"step": 400, "budget": 600},
                                    "MountainCarContinuous-v0": {"step": 300, "budget": 600}}
    pend = r["tasks"]["Pendulum-v1"]["methods"]
    assert pend["solo"]["final"] == [10.0 * 3.5 + s for s in range(3)]  # evaluations 3 and 4 (steps 300, 400)
    assert pend["shared"]["final"] == [20.0 * 3.5 + s + 1 for s in range(3)]
    assert pend["solo"]["curve"]["steps"] == [0, 100, 200, 300, 400] and pend["shared"]["steps_per_agent"] == 400
    car = r["tasks"]["MountainCarContinuous-v0"]["methods"]
    assert car["shared"]["final"] == [20.0 * 2.5 + s + 1 for s in range(3)]  # evaluations 2 and 3
    assert r["paired_differences"][0]["tasks"]["Pendulum-v1"]["final"]["estimate"] == pytest.approx(70 + 1 - 35)
    text = (tmp_path / "out" / "report.md").read_text()
    assert "**Read so far**" in text and "Pendulum-v1 at 400 of its budget of 600" in text


def test_so_far_under_the_total_rule_cuts_each_method_at_its_share(tmp_path, no_processes):
    """The total rule counts all agents' steps: a 3-agent run at 100 steps per agent (300 in all) cuts a 1-agent run
    at 300 of its own steps."""
    results = tmp_path / "r"
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 2, lambda s, i, e: 20.0 * e + s + i)
    suite = hand_suite(tmp_path, budget_rule="total", final_evaluations=1, start_steps=0)  # step 100 is trained
    code, out, err = call([str(suite), "--so_far", "--results", str(results), "--out", str(tmp_path / "out")])
    assert code == 0, out + err
    pend = json.loads((tmp_path / "out" / "report.json").read_text())["tasks"]["Pendulum-v1"]["methods"]
    assert (pend["solo"]["steps_per_agent"], pend["shared"]["steps_per_agent"]) == (300, 100)
    assert pend["solo"]["final"] == [30.0 + s for s in range(3)] and pend["shared"]["final"] == [21.0 + s
                                                                                                for s in range(3)]
    assert pend["shared"]["curve"]["steps"] == [0, 300]


def test_no_window_includes_an_evaluation_made_before_training_started(tmp_path, no_processes):
    """Step 0's evaluation and the random warm-up's (steps <= start_steps: 0 and 100 here) enter no score: the final
    window, the windows at each step (the methods' and a reference's) and IQM against steps keep only evaluations
    made after (each cell says how many it averages); a step or a point of IQM against steps within the warm-up has
    none."""
    untrained = 1e6  # a window that took an evaluation of the warm-up in would show it

    def value(s, i, e):
        return untrained if e <= 1 else 10.0 * e + s

    results, paper = tmp_path / "r", tmp_path / "paper" / "Pendulum-v1"
    paper.mkdir(parents=True)
    for seed in range(3):
        np.save(paper / f"TD3_Pendulum-v1_{seed}.npy", np.array([value(seed, 0, e) for e in range(7)]))
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, value)
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, value)
    spec = {"final_evaluations": 7, "at_steps": [100, 200, 300], "efficiency_points": 6, "bootstrap_reps": 50,
            "tasks": [{"env": "Pendulum-v1", "random": -1000, "target": 0,
                       "references": {"paper": {"folder": str(paper), "prefix": "TD3"}}},
                      {"env": "MountainCarContinuous-v0", "random": 0, "target": 100}]}
    code, out, err = call([str(hand_suite(tmp_path, **spec)), "--results", str(results), "--out",
                           str(tmp_path / "out")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    for task in r["tasks"].values():
        for m, row in task["methods"].items():  # K = 7: all but the 2 untrained, evaluations 2-6 (20 ... 60)
            assert row["final_evaluations"] == 5 and row["final"] == [40.0 + s for s in range(3)], m
    pend = r["tasks"]["Pendulum-v1"]
    for cells in (pend["methods"]["solo"]["at_steps"], pend["references"]["paper"]["at_steps"]):
        assert cells["100"] is None
        assert (cells["200"]["values"], cells["200"]["evaluations"]) == ([20.0 + s for s in range(3)], 1)
        assert (cells["300"]["values"], cells["300"]["evaluations"]) == ([25.0 + s for s in range(3)], 2)
        assert (cells["600"]["values"], cells["600"]["evaluations"]) == ([40.0 + s for s in range(3)], 5)
    efficiency = r["sample_efficiency"]
    assert efficiency["steps"] == pytest.approx([200, 300, 400, 500, 600])  # step 100 (1/6) is in the warm-up
    assert all(max(v["iqm"]) < 1 and np.max(v["ci"]) < 1 for v in efficiency["methods"].values())
    text = (tmp_path / "out" / "report.md").read_text()
    assert "solo on Pendulum-v1: its last 5" in text and "| Pendulum-v1 solo | — | 21.0 [" in text
    assert "(3; 1 evaluation) | 26.0 [" in text and "(3; 2 evaluations) |" in text
    # the total rule: the 3 agents train 200 steps each, so only their evaluation at step 200 counts
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(tmp_path / "rt/solo/TD3" / env, "TD3", env, 1, 7, value)
        fake_runs(tmp_path / "rt/shared/TD3" / env, "DASE_TD3", env, 3, 3, value)
    spec.update(budget_rule="total", final_evaluations=3)
    code, out, err = call([str(hand_suite(tmp_path, **spec)), "--results", str(tmp_path / "rt"), "--out",
                           str(tmp_path / "total")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "total" / "report.json").read_text())
    shared = r["tasks"]["Pendulum-v1"]["methods"]["shared"]
    assert shared["final_evaluations"] == 1 and shared["final"] == [20.0 + s for s in range(3)]
    assert shared["at_steps"]["300"] is None  # 100 steps per agent: the warm-up
    assert r["sample_efficiency"]["steps"] == [600.0]


@pytest.mark.parametrize("length, message", [
    (None, "--so_far: methods.shared on Pendulum-v1 has no curves yet"),
    (1, "--so_far: methods.shared on Pendulum-v1 has only its step-0 evaluation"),
    (2, "--so_far: Pendulum-v1 is read up to step 100 per agent (the furthest every seed of every method on it has "
        "reached), within the random warm-up (start_steps 100)")])
def test_so_far_without_curves_is_one_line_and_writes_nothing(length, message, tmp_path, no_processes):
    results = tmp_path / "r"
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        if length:
            fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, length, lambda s, i, e: 1.0)
    code, out, err = call([str(hand_suite(tmp_path)), "--so_far", "--results", str(results),
                           "--out", str(tmp_path / "out")])
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()
    code, out, err = call([str(hand_suite(tmp_path)), "--so_far", "--dry_run"])
    assert code == 2 and err.count("\n") == 1 and "--so_far already runs nothing" in err


def test_so_far_with_seeds_not_started_names_them_and_the_seeds_to_read(tmp_path, no_processes):
    """A suite run one seed per process stops part-way through its seeds: --so_far names the seeds that have no
    curves and the --seeds that would read the others, in one line, and writes nothing."""
    results = tmp_path / "r"
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 1.0)
    for path in (results / "shared/TD3/Pendulum-v1").glob("DASE_TD3_Pendulum-v1_2*"):  # seed 2 not started
        path.unlink()
    code, out, err = call([str(hand_suite(tmp_path)), "--so_far", "--results", str(results),
                           "--out", str(tmp_path / "out")])
    assert code == 2 and err.count("\n") == 1, err
    assert "--so_far: methods.shared on Pendulum-v1: seed(s) 2 have no curves yet in " in err
    assert err.rstrip().endswith("; --seeds 0,1 reads those that have")
    assert not (tmp_path / "out").exists()
    code, out, err = call([str(hand_suite(tmp_path)), "--so_far", "--results", str(results), "--seeds", "0-1",
                           "--out", str(tmp_path / "out")])
    assert code == 0 and (tmp_path / "out" / "report.json").exists(), err


def test_a_report_on_some_seeds_or_so_far_has_a_folder_of_its_own(tmp_path, no_processes):
    """Without --out, --seeds and --so_far write beside the suite's report, never over it."""
    from utils.compare.cli import default_folder

    assert default_folder("s", None, False) == "s"
    assert default_folder("s", [0, 1, 2, 3, 4], False) == "s_seeds_0-4"
    assert default_folder("s", [0, 2, 5, 6, 7], True) == "s_seeds_0_2_5-7_so_far"
    assert default_folder("s", None, True) == "s_so_far"
    code, out, err = call([str(hand_suite(tmp_path)), "--dry_run", "--seeds", "0-2", "--results", str(tmp_path / "r")])
    assert code == 0 and out.rstrip().endswith("the report would go to Figures/compare/hand_seeds_0-2"), out + err


def test_the_total_rule_gives_each_agent_its_share(tmp_path, no_processes):
    code, out, err = call([str(hand_suite(tmp_path, budget_rule="total")), "--dry_run", "--results",
                           str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 0, err
    commands = out.splitlines()[:4]
    assert "--policy TD3 " in commands[0] and "--max_time_steps 600 " in commands[0]
    assert "--policy DASE_TD3 " in commands[1] and "--max_time_steps 200 " in commands[1]
    assert not (tmp_path / "r").exists() and not (tmp_path / "o").exists()


# ---- bad suites: one line, exit code 2, nothing run or written -----------------------------------------------
BAD = [
    ({"methods": {"solo": {"policy": "PPO"}, "shared": {"policy": "DASE_TD3"}}},
     "methods.solo.policy: unknown policy 'PPO'"),
    ({"methods": {"solo": {"flags": {}}, "shared": {"policy": "DASE_TD3"}}}, "methods.solo: missing key(s) policy"),
    ({"methods": {"solo": {"policy": "TD3"}}}, "methods: expected a mapping of two or more"),
    ({"tasks": [{"env": "Pendulm-v1", "random": 0, "target": 1}]}, "tasks[0] (Pendulm-v1): unknown environment"),
    ({"methods": {"solo": {"policy": "TD3", "flags": {"n_steps": 5}}, "shared": {"policy": "DASE_TD3"}}},
     "methods.solo, TD3 on Pendulum-v1: DASE_main.py: error: unrecognized arguments: --n_steps"),
    ({"methods": {"solo": {"policy": "TD3", "flags": {"eval_freq": 5}}, "shared": {"policy": "DASE_TD3"}}},
     "methods.solo.flags: --eval_freq is set"),
    ({"flags": {"similarity": "cosine"}}, "--similarity"),
    ({"seeds": []}, "seeds: no seed given"),
    ({"seeds": None}, "seeds"),
    ({"tasks": [{"env": "Pendulum-v1", "random": -1000}]}, "missing reference score 'target'"),
    ({"tasks": [{"env": "Pendulum-v1", "target": 0}]}, "missing reference score 'random'"),
    ({"tasks": [{"env": "Pendulum-v1", "random": 5, "target": 5}]}, "they must differ"),
    ({"tasks": [{"env": "Pendulum-v1", "random": "low", "target": 5}]}, "random: expected a number"),
    ({"tasks": [{"env": "Pendulum-v1", "random": 0, "target": 1}, {"env": "Pendulum", "random": 0, "target": 1}]},
     "already a task"),
    ({"tasks": [{"env": "CartPole-v1", "random": 20, "target": 500}]},
     "methods.solo, TD3 on CartPole-v1: --env CartPole-v1: action space is Discrete"),
    ({"baseline": "SAC"}, "baseline: 'SAC' is not one of the methods (solo, shared)"),
    ({"budget_rule": "equal"}, "budget_rule: expected one of per_agent, total"),
    ({"budget": 0}, "budget: must be positive"),
    ({"budget": 50}, "budget 50 is smaller than eval_freq 100"),
    ({"start_steps": 600}, "methods.solo on Pendulum-v1: every evaluation of its 600 steps per agent is made before "
                           "training starts (start_steps 600, eval_freq 100): no final score"),
    ({"budget": 250, "budget_rule": "total"}, "250 over 3 agents is 83 steps each, fewer than eval_freq 100"),
    ({"pairs": [["solo", "nobody"]]}, "pairs: ['solo', 'nobody'] is not a pair"),
    ({"sedes": [0]}, "unknown key(s) sedes"),
    ({"name": "a/b"}, "name: 'a/b' is not a usable folder name"),
    ({"at_steps": [150]}, "at_steps: 150 is not a multiple of eval_freq 100"),
    ({"at_steps": [700]}, "at_steps: 700 is not a multiple of eval_freq 100 within every task's budget"),
    ({"score": "best"}, "score: expected one of own, tasks"),
    ({"seeds_per_run": 0}, "seeds_per_run: must be positive"),
    ({"methods": {"solo": {"policy": "TD3", "seeds": "x"}, "shared": {"policy": "DASE_TD3"}}}, "methods.solo.seeds:"),
    ({"methods": {"solo": {"policy": "TD3", "seed_flags": {"1": {"batch_size": 64}}}, "shared": {"policy": "DASE_TD3"}}},
     "methods.solo.seed_flags.1: only --flush_denormals may differ between a method's seeds"),
    ({"methods": {"solo": {"policy": "TD3", "seed_flags": {"2-3": {"flush_denormals": True}}},
                  "shared": {"policy": "DASE_TD3"}}}, "methods.solo.seed_flags.2-3: seed(s) 3 not among"),
    ({"methods": {"solo": {"policy": "TD3", "seed_flags": {"0-1": {"flush_denormals": True}, "1": {
        "flush_denormals": False}}}, "shared": {"policy": "DASE_TD3"}}}, "seed(s) 1 already in another entry"),
    ({"methods": {"solo": {"policy": "TD3", "seed_flags": [1]}, "shared": {"policy": "DASE_TD3"}}},
     "methods.solo.seed_flags: expected a mapping of seeds"),
    ({"tasks": [{"env": "Pendulum-v1", "random": 0, "target": 1, "methods": ["solo", "nobody"]}]},
     "tasks (Pendulum-v1).methods: expected a list of two or more of the methods (solo, shared)"),
    ({"tasks": [{"env": "Pendulum-v1", "random": 0, "target": 1, "methods": ["solo", "shared"]},
                {"env": "MountainCarContinuous-v0", "random": 0, "target": 1, "methods": ["shared", "solo"]}],
      "methods": {"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3"}, "lost": {"policy": "DDPG"}}},
     "methods.lost: no task lists it"),
    ({"tasks": [{"env": "Pendulum-v1", "random": 0, "target": 1,
                 "references": {"paper": {"folder": "Learning Curves/nowhere/Pendulum-v1", "prefix": "TD3"}}}]},
     "tasks (Pendulum-v1).references.paper: no TD3_Pendulum-v1_SEED[_Agent_I].npy curves"),
    ({"docs": {"file": "docs/replay.md"}}, "docs: missing key(s) marker"),
    ({"final_evaluations": 8}, "final_evaluations: 8 is more than the 7 evaluations of methods.solo on Pendulum-v1"),
    ({"final_evaluations": 4, "budget_rule": "total"},  # the 3 agents of shared: 200 steps each
     "final_evaluations: 4 is more than the 3 evaluations of methods.shared on Pendulum-v1 (200 steps per agent"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_suites_exit_2_with_one_line_and_write_nothing(change, message, tmp_path, no_processes):
    spec = yaml.safe_load(hand_suite(tmp_path).read_text())
    spec.update(change)
    if change.get("seeds", 0) is None:
        del spec["seeds"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = call([str(path), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"{path}: ") and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "hand.yaml"]


def test_a_suite_without_a_name_whose_file_name_is_no_folder_name_says_where_the_name_came_from(tmp_path,
                                                                                                  no_processes):
    spec = yaml.safe_load(hand_suite(tmp_path).read_text())
    del spec["name"]
    path = tmp_path / "my suite.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = call([str(path), "--dry_run"])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "name: 'my suite' is not a usable folder name" in err and "the file's name without .yaml" in err, err


def test_an_out_folder_that_is_a_file_is_refused(tmp_path, no_processes):
    (tmp_path / "o").write_text("")
    code, out, err = call([str(hand_suite(tmp_path)), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 2 and err.count("\n") == 1 and "is a file, not a folder" in err


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry_run"])
def test_final_evaluations_past_the_smoke_suite_s_runs_is_refused_before_anything_runs(dry_run, tmp_path,
                                                                                        no_processes):
    """K of 50 on runs of 4 evaluations (300 steps, one every 100 from step 0): refused up front, as the report
    would refuse it after the training."""
    spec = yaml.safe_load(SMOKE.read_text())
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump({**spec, "final_evaluations": 50}, sort_keys=False))
    code, out, err = call([str(path), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")]
                          + ["--dry_run"] * dry_run)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "final_evaluations: 50 is more than the 4 evaluations of methods.TD3 on Pendulum-v1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smoke.yaml"]


def test_final_evaluations_past_a_reference_s_curves_is_refused_before_anything_runs(tmp_path, no_processes):
    paper = tmp_path / "paper" / "Pendulum-v1"
    paper.mkdir(parents=True)
    for seed in range(3):
        np.save(paper / f"TD3_Pendulum-v1_{seed}.npy", np.zeros(4))  # steps 0 to 300 of the budget's 600
    suite = hand_suite(tmp_path, final_evaluations=5, tasks=[
        {"env": "Pendulum-v1", "random": -1000, "target": 0,
         "references": {"paper": {"folder": str(paper), "prefix": "TD3"}}}])
    code, out, err = call([str(suite), "--dry_run", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 2 and err.count("\n") == 1, err
    assert "final_evaluations: 5 is more than the 4 evaluations of tasks (Pendulum-v1).references.paper" in err


@pytest.fixture
def read_only_disk(tmp_path):
    """A read-only tmpfs (mounting needs root; elsewhere the test is skipped), unmounted afterwards."""
    import shutil
    import uuid

    if sys.platform != "linux" or shutil.which("mount") is None:
        pytest.skip("needs Linux's mount")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", f"ro{uuid.uuid4().hex[:6]}", str(disk)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        disk.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def refused_out(tmp_path: Path, out: Path, dry_run: bool) -> None:
    """--out ``out``: one line, exit code 2, nothing run (no_processes) and nothing written."""
    code, stdout, err = call([str(hand_suite(tmp_path)), "--results", str(tmp_path / "r"), "--out", str(out)]
                             + ["--dry_run"] * dry_run)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert f"--out {out}: cannot write there (" in err and not out.exists()
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry_run"])
def test_an_out_folder_on_a_read_only_disk_is_refused_before_anything_runs(dry_run, tmp_path, read_only_disk,
                                                                           no_processes):
    refused_out(tmp_path, read_only_disk / "report", dry_run)


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry_run"])
@pytest.mark.parametrize("where", ["no permission", "/proc"])
def test_an_out_folder_that_cannot_be_written_is_refused_before_anything_runs(where, dry_run, tmp_path,
                                                                              no_processes):
    import os

    if where == "no permission" and os.geteuid() == 0:
        pytest.skip("root writes in a folder of mode 555")
    if where == "no permission":
        (tmp_path / "locked").mkdir(mode=0o555)
    out = tmp_path / "locked" / "report" if where == "no permission" else Path("/proc/forbidden/report")
    refused_out(tmp_path, out, dry_run)


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "experiments").glob("*.yaml")
                                        if "methods" in (yaml.safe_load(p.read_text()) or {})), ids=lambda p: p.name)
def test_every_committed_suite_plans_runs_their_scripts_accept(path):
    """Each suite in experiments/ loads and becomes runs whose flags pass their scripts' parsers and checks (the
    sweep's check_flags), as utils.compare checks them before it starts anything."""
    from utils.compare.plan import plan_suite

    suite = compare.load_suite(path)
    entries, _, _ = plan_suite(suite)
    assert len(entries) == sum(len(suite.methods_on(t)) for t in suite.tasks)


def test_the_docs_example_suite_is_a_good_suite(tmp_path, no_processes):
    """docs/compare.md's suite, every key of it, plans into runs its scripts accept (dry run: nothing written)."""
    import re

    block = re.search(r"```yaml\n(.*?)```", (ROOT / "docs" / "compare.md").read_text(), re.S).group(1)
    path = tmp_path / "example.yaml"
    path.write_text(block)
    suite = compare.load_suite(path)
    assert compare.suite.TOP_KEYS - set(yaml.safe_load(block)) == {"gpus_per_run", "device", "seeds_per_run"}  # in a comment
    code, out, err = call([str(path), "--dry_run", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 0, err
    assert out.splitlines()[-2] == f"{len(suite.tasks) * len(suite.methods)} runs: 6 to run, 0 finished"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.yaml"]


def test_a_failed_run_means_exit_1_and_no_report(tmp_path, monkeypatch, no_processes):
    """What the sweep reports of a failed run (its exit code and log) ends the comparison: no report from part of
    the runs."""
    from utils.sweep import cli
    from utils.sweep.results import Result

    def fail_all(runs, todo, *args):
        return [Result(run, "failed", 1, 1.0, "exit 1, log: somewhere.log") for run in runs], None

    monkeypatch.setattr(cli, "execute_runs", fail_all)  # what utils.compare runs through (sweep.cli.run_missing)
    code, out, err = call([str(hand_suite(tmp_path)), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 1 and "failed (exit 1, log: somewhere.log)" in out
    assert err == "python -m utils.compare: a run failed (its log is named above); no report written\n"
    assert not (tmp_path / "o").exists()


def test_an_interrupted_comparison_says_to_run_it_again_in_a_table_its_logs_do_not_widen(tmp_path, monkeypatch,
                                                                                          no_processes):
    """Runs stopped by Ctrl-C (with their checkpoints): exit 130, no report, and the words say what continues them,
    utils.compare's own command again (not 'the sweep', which the user never ran); the runs' log paths, however
    long, come last on their rows and widen no column of the table."""
    from utils.sweep import cli
    from utils.sweep.results import classify

    deep = tmp_path / ("a_long_folder_name" * 8)

    def interrupt_all(runs, todo, *args):
        return [classify(run, 143, 1.0, False, True, root=deep) for run in runs], signal.SIGINT

    monkeypatch.setattr(cli, "execute_runs", interrupt_all)
    code, out, err = call([str(hand_suite(tmp_path)), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 130 and not (tmp_path / "o").exists()
    assert "sweep" not in out + err and out.count("rerun the same command to continue") == 4, out
    assert err == ("python -m utils.compare: interrupted; no report written: run the same command again to continue "
                   "the runs from their checkpoints and write it\n")
    table = out.splitlines()[-7:]  # header, rule, 4 runs, counts
    assert table[0].split() == ["run", "wall", "status"] and set(table[1]) == {"-"}
    assert len(table[1]) < len("a_long_folder_name" * 8) < min(len(row) for row in table[2:-1])
    assert all(row.index("interrupted (exit 143, log: ") == table[0].index("status") for row in table[2:-1])


def test_returns_are_shown_to_the_precision_of_the_task_s_range():
    """One decimal for returns of tens and more (the committed reports' tables), three for Level-Based Foraging's
    per-agent range of 0.055 to 0.5, whose differences one decimal would round to 0.1 or 0.0."""
    from utils.compare.report import _final_cell, digits_for
    from utils.compare.suite import Task

    task = lambda random, target: Task(name="t", env="t", random=random, target=target, budget=1)  # noqa: E731
    assert [digits_for(task(r, t)) for r, t in ((24, 500), (-500, -100), (-1228, -150), (0, 50), (0, 5),
                                                (0.055, 0.5), (0, 0.01))] == [1, 1, 1, 1, 2, 3, 4]
    cell = {"final_mean": 0.4712, "final_ci": (0.3851, 0.4999), "normalised_mean": 0.9353}
    assert _final_cell(cell, digits_for(task(0.055, 0.5))) == "0.471 [0.385, 0.500] (0.935)"


def test_seed_curves_average_a_seeds_agents_over_their_common_length_and_read_only_their_prefix(tmp_path):
    """The loader the docs' tables share with the references: a seed's agents averaged over the evaluations all of
    them have (a run under way writes them one after another), a single-file run as it is, another prefix sharing the
    start of the name (DASE_TD3 beside DASE_TD3_float32, TD3 beside DASE_TD3) and a weight trace never read;
    finished_only keeps the seeds whose record says finished; window_mean is the mean of the k evaluations ending at
    the step, None past the curve."""
    from utils.compare.scores import seed_curves, window_mean

    folder = tmp_path / "Env-v1"
    folder.mkdir()
    np.save(folder / "DASE_TD3_Env-v1_0_Agent_0.npy", np.arange(6.0))
    np.save(folder / "DASE_TD3_Env-v1_0_Agent_1.npy", np.arange(4.0) * 3)
    np.save(folder / "DASE_TD3_Env-v1_0_Agent_0_weights.npy", np.full(6, 99.0))
    np.save(folder / "DASE_TD3_float32_Env-v1_1_Agent_0.npy", np.full(6, 99.0))
    np.save(folder / "TD3_Env-v1_2.npy", np.arange(5.0))
    np.save(folder / "TD3_Env-v1_3.npy", np.ones(5))
    (folder / "TD3_Env-v1_2.json").write_text(json.dumps({"finished": "2026-12-05T06:00:00"}))
    (folder / "TD3_Env-v1_3.json").write_text(json.dumps({"config": {}}))  # still running
    dase = seed_curves(folder, "DASE_TD3")
    assert list(dase) == [0] and dase[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert sorted(seed_curves(folder, "TD3")) == [2, 3]
    assert list(seed_curves(folder, "TD3", finished_only=True)) == [2]
    assert list(seed_curves(tmp_path, "TD3", env="Env-v1")) == []  # not in that folder
    assert window_mean(np.arange(11.0), 10_000, 1000, 5) == 8.0 and window_mean(np.arange(11.0), 11_000, 1000, 5) is None


def test_a_small_p_keeps_its_digits_in_the_tables():
    """9 of 9 seeds above gives the exact p 2 / 2^9: the tables printed it "p 0.00"; now two significant digits
    below 0.01, two decimals above."""
    from utils.compare.report import p_text

    assert p_text(2 / 2**9) == "0.0039" and p_text(2 / 2**14) == "0.00012"
    assert p_text(2 / 2**5) == "0.06" and p_text(0.25) == "0.25" and p_text(1.0) == "1.00"
