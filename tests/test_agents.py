"""``python -m utils.compare SUITE.yaml --agents``: ICC(1) against a plain two-way sum of squares, its permutation p
against every way of dealing a small set of scores into runs, each agent's final score from curves written by hand,
and the command's refusals (one line, exit 2, nothing written)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.test_claims import claims_suite
from tests.test_compare import call, fake_runs, hand_suite
from utils.compare.agents import icc1, icc_p


def plain_icc(x: np.ndarray) -> float:
    """ICC(1) by loops: the between-run and within-run sums of squares, each over its degrees of freedom."""
    n, k = len(x), len(x[0])
    grand = sum(sum(row) for row in x) / (n * k)
    between = sum(k * (sum(row) / k - grand) ** 2 for row in x)
    within = sum((v - sum(row) / k) ** 2 for row in x for v in row)
    msb, msw = between / (n - 1), within / (n * (k - 1))
    return (msb - msw) / (msb + (k - 1) * msw)


@pytest.mark.parametrize("shape", [(2, 2), (5, 2), (10, 2), (6, 4), (3, 25)])
def test_icc_against_the_sums_of_squares_by_loops(shape):
    rng = np.random.default_rng(sum(shape))
    for coupling in (0.0, 1.0, 5.0):
        x = rng.normal(size=shape) + coupling * rng.normal(size=(shape[0], 1))
        assert icc1(x) == pytest.approx(plain_icc(x.tolist()), rel=1e-12, abs=1e-12)


def test_icc_against_shrout_and_fleiss_published_example():
    """Shrout and Fleiss (1979), Psychological Bulletin 86(2), Table 2: 6 targets rated by 4 judges; their ICC(1,1),
    the one-way random-effects ICC, is 0.17 (0.166 unrounded)."""
    ratings = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    assert icc1(ratings) == pytest.approx(0.1657, abs=5e-4)


def test_icc_at_its_ends():
    runs = np.array([[1.0], [5.0], [-2.0], [7.0]])
    assert icc1(np.repeat(runs, 3, axis=1)) == pytest.approx(1.0)  # a run's agents equal: all variance between runs
    # every run's agents spread alike around one mean: no variance between runs, ICC -1 / (k - 1)
    assert icc1(np.array([[0.0, 2.0, 4.0], [4.0, 0.0, 2.0], [2.0, 4.0, 0.0]])) == pytest.approx(-0.5)
    assert np.isnan(icc1(np.full((3, 2), 4.0))) and np.isnan(icc_p(np.full((3, 2), 4.0)))
    assert np.isnan(icc1(np.array([[1.0, 2.0]]))) and np.isnan(icc1(np.array([[1.0], [2.0]])))  # one run, one agent


def every_deal(values: list[float], k: int):
    """Every way of dealing ``values`` into runs of ``k`` (as sets: run order and order within a run ignored)."""
    if not values:
        yield []
        return
    first, rest = values[0], values[1:]
    for mates in itertools.combinations(range(len(rest)), k - 1):
        run = [first] + [rest[i] for i in mates]
        others = [v for i, v in enumerate(rest) if i not in mates]
        for deal in every_deal(others, k):
            yield [run] + deal


@pytest.mark.parametrize("x", [[[1.0, 1.2], [3.0, 3.3], [8.0, 7.5], [4.0, 4.4]],  # coupled: few deals reach it
                               [[1.0, 8.0], [3.0, 4.4], [7.5, 1.2], [4.0, 3.3]],  # the same scores, uncoupled
                               [[0.0, 1.0, 5.0], [2.0, 2.5, 9.0], [1.0, 6.0, 6.5]]])
def test_the_permutation_p_against_every_deal(x):
    """Under no coupling every deal of the scores into runs is equally likely: the exact p is the share of all deals
    whose ICC reaches the observed one; the sampled p (10,000 deals) lies within 0.015 of it."""
    x = np.array(x)
    observed = icc1(x)
    deals = [icc1(np.array(d)) for d in every_deal(x.ravel().tolist(), x.shape[1])]
    exact = np.mean([v >= observed - 1e-12 for v in deals])
    assert icc_p(x) == pytest.approx(exact, abs=0.015)
    assert icc_p(x) == icc_p(x)  # generator seeded: the same p every call


def coupled_runs(tmp_path, length: int):
    """solo (TD3) 7 evaluations, seeds 0-7, 10 e + s; shared (DASE_TD3, 2 agents) ``length`` evaluations, agent i of
    seed s scoring 20 e + 10 s + i: its agents coupled by the seed. The runs' folder."""
    results = tmp_path / "r"
    env = "Pendulum-v1"
    fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s, seeds=range(8))
    fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 2, length, lambda s, i, e: 20.0 * e + 10 * s + i,
              seeds=range(8))
    return results


def test_agents_reads_each_agent_s_final_score_and_writes_nothing(tmp_path, no_processes):
    """8 seeds, 7 evaluations, the final score the mean of the last 2 (5 and 6). solo has one agent and is not read;
    shared's agent i of seed s scores 20 e + s + i: its finals 110 + s + i, coupled by the seed."""
    results = coupled_runs(tmp_path, 7)
    suite = claims_suite(tmp_path, [])
    code, out, err = call([str(suite), "--results", str(results), "--agents"])
    assert code == 0 and err == "", err
    x = np.array([[110.0 + 10 * s, 111.0 + 10 * s] for s in range(8)])
    assert "mean of its last 2 evaluations), curves read at the budget" in out
    assert f"- shared (2 agents) on Pendulum-v1, seeds 0-7: ICC {icc1(x):.3f}, p {icc_p(x):.4f}" in out
    assert icc1(x) > 0.99 and icc_p(x) == pytest.approx(1 / 10_001)  # no deal of the scores reaches it
    assert "    seed 3: 140.0, 141.0" in out and "solo" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand.yaml", "r"]  # nothing written


def test_agents_of_a_suite_without_several_agents_says_so(tmp_path, no_processes):
    results = tmp_path / "r"
    for name in ("solo", "other"):
        fake_runs(results / f"{name}/TD3/Pendulum-v1", "TD3", "Pendulum-v1", 1, 7, lambda s, i, e: 1.0 * e)
    suite = hand_suite(tmp_path, tasks=[{"env": "Pendulum-v1", "random": -1000, "target": 0}],
                       methods={"solo": {"policy": "TD3"}, "other": {"policy": "TD3"}}, baseline="solo")
    code, out, err = call([str(suite), "--results", str(results), "--agents"])
    assert code == 0 and "hand: no method or published reference has more than one agent; nothing to read" in out


@pytest.mark.parametrize("extra, message", [(["--plan"], "--plan and --agents: one at a time"),
                                            (["--out", "o"], "--agents runs and writes nothing: leave out"),
                                            (["--so_far"], "--agents runs and writes nothing: leave out")])
def test_agents_refuses_what_it_cannot_do_in_one_line(extra, message, tmp_path, no_processes):
    code, out, err = call([str(claims_suite(tmp_path, [])), "--results", str(tmp_path / "r"), "--agents", *extra])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand.yaml"]


def test_agents_without_curves_is_one_line(tmp_path, no_processes):
    code, out, err = call([str(claims_suite(tmp_path, [])), "--results", str(tmp_path / "none"), "--agents"])
    assert code == 2 and "--agents: methods.shared on Pendulum-v1 has no curves yet in" in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_agents_reads_a_published_reference_of_several_agents_on_the_suite_s_grid(tmp_path, no_processes):
    """A reference evaluated every 50 steps, 2 agents per seed, read on the suite's grid (every 100 steps) up to the
    budget (600): agent a of seed s scores step / 10 + 7 s + 3 a, so its final (evaluations at 500 and 600) is
    55 + 7 s + 3 a; a reference of one curve per seed is not read; the agents' mean is the report's reference score."""
    from utils.compare.agents import reference_agents, reference_finals
    from utils.compare.scores import load_reference
    from utils.compare.suite import load_suite

    paper = tmp_path / "paper" / "Pendulum-v1"
    paper.mkdir(parents=True)
    for seed in range(4):
        np.save(paper / f"TD3_Pendulum-v1_{seed}.npy", np.zeros(25))
        for agent in range(2):
            np.save(paper / f"DASE_TD3_Pendulum-v1_{seed}_Agent_{agent}.npy", np.arange(25) * 5.0 + 7 * seed + 3 * agent)
    results = tmp_path / "r"
    env = "Pendulum-v1"
    fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s, seeds=range(8))
    fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 2, 7, lambda s, i, e: 20.0 * e + s + i, seeds=range(8))
    refs = {"paper": {"folder": str(paper), "prefix": "DASE_TD3", "eval_freq": 50},
            "paper_solo": {"folder": str(paper), "prefix": "TD3", "eval_freq": 50}}
    suite = hand_suite(tmp_path, tasks=[{"env": env, "random": -1000, "target": 0, "references": refs}],
                       methods={"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3"}}, seeds="0-7")
    code, out, err = call([str(suite), "--results", str(results), "--agents"])
    assert code == 0 and err == "", err
    x = np.array([[55.0 + 7 * s, 58.0 + 7 * s] for s in range(4)])
    assert f"- paper (published, 2 agents) on Pendulum-v1, seeds 0-3: ICC {icc1(x):.3f}, p {icc_p(x):.4f}" in out
    assert "    seed 2: 69.0, 72.0" in out and "paper_solo" not in out
    read = load_suite(suite, str(results))
    task = read.tasks[0]
    ref = task.references[0]
    assert reference_agents(task.references[1]) == {}  # one curve per seed: no agents to read
    seeds, finals = reference_finals(ref, reference_agents(ref), mean := load_reference(ref, task, read), read, 2)
    assert seeds == (0, 1, 2, 3) and finals.tolist() == x.tolist()
    assert finals.mean(axis=1) == pytest.approx(mean.final(2))
    for path in (results / "shared").rglob("*"):  # our runs not started: the published reference answers alone
        if path.is_file():
            path.unlink()
    code, out, err = call([str(suite), "--results", str(results), "--agents"])
    assert code == 0 and err == "", err
    assert "- our runs: methods.shared on Pendulum-v1 has no curves yet in" in out
    assert f"- paper (published, 2 agents) on Pendulum-v1, seeds 0-3: ICC {icc1(x):.3f}" in out


def test_experiments_md_holds_the_agents_lines_as_the_tool_prints_them():
    """docs/experiments.md's block of --agents answers: under each "SUITE [--seeds S]:" every line `--agents` prints
    from the committed curves (per-seed rows left out), no more and no fewer; and the no-sharing control's line as its
    command prints it."""
    import re
    import subprocess
    import sys

    from tests.test_compare import ROOT
    from utils.plot.tables import has_markers

    page = (ROOT / "docs" / "experiments.md").read_text()
    assert has_markers(page, "agents_lines")
    block = page.split("<!-- agents_lines -->")[1].split("<!-- /agents_lines -->")[0]
    answers: dict[str, list[str]] = {}
    for line in block.strip().strip("`").strip().splitlines():
        if line.startswith("- "):
            answers[list(answers)[-1]].append(line)  # under the last header
        else:
            answers[line.removesuffix(":")] = []
    assert len(answers) >= 5
    for header, lines in answers.items():
        name, *extra = header.split()
        code, out, err = call([str(ROOT / "experiments" / f"{name}.yaml"), "--agents", *extra])
        assert code == 0, err
        assert lines == [x for x in out.splitlines() if x.startswith("- ")], header
    command = re.search(r'```bash\n(python -c "import numpy as np; from utils\.compare\.agents.*?)\n```', page, re.S)
    assert command is not None
    code = command.group(1).replace("\\\n", "").split('python -c "', 1)[1].rsplit('"', 1)[0]
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    icc, p = done.stdout.split()[1].rstrip(","), done.stdout.split()[3]  # "ICC 0.529, p 0.0759"
    assert f"gives ICC {icc} (p {p})" in page


def test_agents_on_runs_under_way_reads_them_so_far_and_one_seed_has_no_icc(tmp_path, no_processes):
    """Runs under way (shared's curves 5 evaluations of 7): read up to step 400 as --so_far reads them, the final score
    the mean of evaluations 3 and 4; one seed (--seeds 2): its agents listed, no ICC."""
    results = coupled_runs(tmp_path, 5)
    suite = claims_suite(tmp_path, [])
    code, out, err = call([str(suite), "--results", str(results), "--agents"])
    assert code == 0 and err == "", err
    assert "curves read so far (runs under way): Pendulum-v1 at step 400 of 600" in out
    assert "    seed 3: 100.0, 101.0" in out  # (60 + 80) / 2 + 30 + agent
    code, out, err = call([str(suite), "--results", str(results), "--agents", "--seeds", "2"])
    assert code == 0 and "- shared (2 agents) on Pendulum-v1, seeds 2: one seed: no ICC" in out
    assert "    seed 2: 90.0, 91.0" in out
