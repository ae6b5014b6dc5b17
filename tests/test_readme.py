"""The documentation's flag tables (README.md and docs/*.md, under ``<!-- flags: NAME -->`` markers) list
exactly the flags the command lines take (a flag added or renamed in one place and not the other fails here),
and what README tells a new user to run does what it says."""
import argparse
import re
from pathlib import Path

import numpy as np
import pytest

import ac_main
import DASE_main
import sac_main
from utils import plot

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# README and the manual it links to, where the flag tables and most commands live
DOCS = "\n".join([README] + [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))])


def table_lines(name: str) -> list[str]:
    """The lines after the one marker ``<!-- flags: NAME -->`` in README or docs/*.md."""
    marker = f"<!-- flags: {name} -->"
    assert DOCS.count(marker) == 1, f"README and docs/ need exactly one {marker}, have {DOCS.count(marker)}"
    return DOCS.split(marker, 1)[1].lstrip("\n").splitlines()


def table_flags(name: str) -> set[str]:
    """The flags in the first column of the table under the marker ``<!-- flags: NAME -->``."""
    marker = f"<!-- flags: {name} -->"
    lines = table_lines(name)
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert len(rows) > 2, f"no table under {marker}"
    flags = set()
    for row in rows[2:]:
        first = row.split("|")[1]
        flags.update(re.findall(r"`(--[a-z_0-9]+)`", first))
    return flags


def built_parser(module, argv) -> argparse.ArgumentParser:
    """The parser ``module.parse`` builds (caught at its parse_args call)."""
    seen = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen["parser"] = self
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_args = capture
    try:
        module.parse(argv)
    finally:
        argparse.ArgumentParser.parse_args = original
    return seen["parser"]


def parser_flags(module, argv) -> set[str]:
    """Every long option of the parser ``module.parse`` builds."""
    return {o for a in built_parser(module, argv)._actions for o in a.option_strings if o.startswith("--")
            and o != "--help"}


@pytest.mark.parametrize("module,argv,tables", [
    (DASE_main, [], ["common", "DASE_main"]),
    (sac_main, [], ["common", "sac_main"]),
    (ac_main, [], ["common", "ac_main"]),
    (plot, ["Learning Curves"], ["plot"]),
], ids=["DASE_main", "sac_main", "ac_main", "plot"])
def test_flag_tables_match_the_parsers(module, argv, tables):
    # ac_main.py takes the common flags but those of the replay learners (the replay scripts' buffer flags and
    # DASE's and DPD's sharing flags); its own table lists what it adds, --buffer_size (ACER's replay) included
    from utils.run.settings import ReplaySettings
    from utils.run.sharing import GraphSettings, SharingSettings
    from utils.settings import flag_of, flagged

    flags = lambda cls: {flag_of(cls, f.name) for f in flagged(cls)}  # noqa: E731
    replay_only = flags(ReplaySettings) | {"--no_cuda_graphs"} | (flags(SharingSettings) - flags(GraphSettings))
    common = set(table_flags("common")) - (replay_only if module is ac_main else set())
    documented = set().union(*(common if t == "common" else table_flags(t) for t in tables))
    actual = parser_flags(module, argv)
    assert not actual - documented, f"in --help but not in the docs' tables: {sorted(actual - documented)}"
    assert not documented - actual, f"in the docs' tables but not taken: {sorted(documented - actual)}"


def test_readme_is_the_front_door():
    """README stays short and names the test command CI runs; the manual lives in docs/ and README links it."""
    assert len(README.splitlines()) <= 250
    assert "## Tests" in README
    command = readme_commands("python -m pytest")[0]
    ci = [line.split() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert len(ci) == 1 and ci[0][: len(command)] == command, "CI must run README's test command"
    assert readme_commands("ruff check") == [["ruff", "check", "."]], "README names the linter CI runs"
    assert "ruff check ." in (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands("mypy") == [["mypy"]], "README names the type checker CI runs"
    assert "mypy" in (ROOT / ".ci" / "run").read_text().splitlines()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name}" in README, f"README does not link docs/{page.name}"


def table_meanings(name: str) -> dict[str, str]:
    """The meaning column of the table under ``<!-- flags: NAME -->``, per flag, without backticks."""
    lines = table_lines(name)
    out = {}
    for row in lines[2:]:
        if not row.startswith("|"):
            break
        cells = [c.strip() for c in row.strip("|").split("|")]
        for flag in re.findall(r"`(--[a-z_0-9]+)`", cells[0]):
            out[flag] = cells[2].replace("`", "")
    return out


@pytest.mark.parametrize("flag", ["--threads", "--overwrite"])
def test_help_and_readme_say_the_same(flag):
    """Flags whose README wording and --help wording a user compared and found at odds: the same sentence in both
    (the help adds its '(default: ...)')."""
    action = next(a for a in built_parser(DASE_main, [])._actions if flag in a.option_strings)
    help_text = re.sub(r"\s*\(default: [^)]*\)$", "", action.help).replace("%%", "%")
    assert help_text == table_meanings("common")[flag]


def readme_commands(program: str, text: str = README) -> list[list[str]]:
    """Every command of the bash blocks of ``text`` (README) that starts with ``program`` (continuation lines
    joined, comments dropped), split as the shell would, in order."""
    import shlex

    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:len(program.split())] == program.split():
                commands.append(words)
    return commands


def fake_run(root: Path, argv: list[str], module=DASE_main) -> None:
    """The files a finished run of ``argv`` leaves (constant curves, its JSON record's eval_freq), under ``root``."""
    import json

    import numpy as np

    from utils.naming import curve_length, curve_names, default_num_agents, run_stem

    args = module.parse(argv)
    budget = getattr(args, "max_time_steps", None) or args.num_steps
    folder = root / args.results_dir
    folder.mkdir(parents=True, exist_ok=True)
    stem = run_stem(args.policy, args.env, args.seed or 0)
    for name in curve_names(stem, args.policy, default_num_agents(args.policy)):
        np.save(folder / f"{name}.npy", np.full(curve_length(budget, args.eval_freq), -500.0))
    (folder / f"{stem}.json").write_text(json.dumps({"config": {"eval_freq": args.eval_freq}}))


def test_the_first_plot_command_shows_the_first_run_alone(tmp_path, monkeypatch):
    """A new user who follows README from the top: the first run, then README's first plot command, in a checkout
    that holds the committed runs under 'Learning Curves/CPU 100k' and, later, the smoke sweep's runs (evaluated
    every 500 steps). The first plot shows exactly the first run; the sweep's plot command, its runs alone."""
    import csv
    import shutil

    first = next(c for c in readme_commands("python DASE_main.py") if "Pendulum-v1" in c)
    shutil.copytree(ROOT / "Learning Curves" / "CPU 100k", tmp_path / "Learning Curves" / "CPU 100k")
    fake_run(tmp_path, first[2:])
    monkeypatch.chdir(tmp_path)
    plots = readme_commands("python -m utils.plot")

    def plotted(command) -> set[tuple[str, str, str]]:
        assert plot.main(command[3:]) == 0, command
        out = Path(command[command.index("--out") + 1])
        with open(out / "summary.csv") as f:
            return {(r["environment"], r["method"], r["runs"]) for r in csv.DictReader(f)}

    assert plotted(plots[0]) == {("Pendulum-v1", "DASE_TD3", "2")}
    # the smoke sweep (experiments/smoke.yaml: TD3 and DASE_TD3, seeds 0-1, 1000 steps, eval every 500)
    smoke = [c for c in readme_commands("python -m utils.plot", DOCS) if any("smoke" in w for w in c)]
    assert smoke, "the docs plot the smoke sweep's runs"
    for policy in ("TD3", "DASE_TD3"):
        for seed in (0, 1):
            fake_run(tmp_path, ["--policy", policy, "--env", "Pendulum-v1", "--seed", str(seed), "--max_time_steps",
                                "1000", "--eval_freq", "500", "--results_dir", "Learning Curves/smoke/TD3/Pendulum-v1"])
    assert plotted(plots[0]) == {("Pendulum-v1", "DASE_TD3", "2")}
    assert plotted(smoke[0]) == {("Pendulum-v1", "DASE_TD3", "4"), ("Pendulum-v1", "TD3", "2")}


def test_the_graph_page_plots_its_own_two_runs_in_a_clone_with_the_committed_folders(tmp_path, monkeypatch):
    """docs/graph.md's block: two runs, then a plot with --consensus, in a clone whose Learning Curves/ holds
    committed runs evaluated at another interval (a2c_pong: every 100,000 steps). The plot reads the two runs alone
    (it read all of Learning Curves/ and refused the mix of intervals)."""
    import csv
    import shutil

    block = next(b for b in re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "graph.md").read_text(), re.S)
                 if "--consensus" in b)
    shutil.copytree(ROOT / "Learning Curves" / "a2c_pong", tmp_path / "Learning Curves" / "a2c_pong")
    runs = readme_commands("python DASE_main.py", "```bash\n" + block + "```")
    assert len(runs) == 2
    for command in runs:
        fake_run(tmp_path, command[2:])
    monkeypatch.chdir(tmp_path)
    (command,) = readme_commands("python -m utils.plot", "```bash\n" + block + "```")
    assert plot.main([*command[3:], "--out", str(tmp_path / "out")]) == 0, command
    with open(tmp_path / "out" / "summary.csv") as f:
        assert {(r["environment"], r["method"]) for r in csv.DictReader(f)} == {
            ("RandomExtremePendulum-v1", "DIFF_TD3")}


def test_figures_hold_data_and_pictures_only():
    """Tables are made by the tools (utils.plot, utils.plot.windows, utils.plot.weight_map), not by scripts kept
    beside the pictures."""
    assert not sorted((ROOT / "Figures").rglob("*.py"))


def _script(name: str):
    """An experiments/ script loaded as a module (they are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recurrent_tables_in_the_docs_are_the_committed_curves():
    """docs/recurrent.md's two tables (masked Pendulum, masked CartPole) are what experiments/step_tables.py
    (recurrent) computes from the finished runs under 'Learning Curves/', line for line, between their markers."""
    module = _script("step_tables")
    page = (ROOT / "docs" / "recurrent.md").read_text()
    for task in module.TASKS:
        lines = module.recurrent(task).splitlines()
        assert len(lines) >= 4, task.env  # header, rule and at least two committed runs
        block = page.split(f"<!-- {task.mark} -->\n")[1].split(f"<!-- /{task.mark} -->")[0]
        assert block.strip().splitlines() == lines, task.env


def test_the_side_by_side_table_in_the_docs_is_the_committed_curves():
    """docs/side_by_side.md's table (ours beside the paper's own code) is what experiments/step_tables.py
    (side_by_side) computes from the committed curves, line for line, between its markers."""
    lines = _script("step_tables").side_by_side()
    assert sum(line.startswith("| paper's code") or line.startswith("| our") for line in lines) >= 4
    page = (ROOT / "docs" / "side_by_side.md").read_text()
    block = page.split("<!-- side_by_side_table -->\n")[1].split("<!-- /side_by_side_table -->")[0]
    assert block.strip().splitlines() == lines


def test_the_permutation_test_counts_every_relabelling():
    """Two seeds against three: 10 relabellings; the p-value is the share whose |difference of means| reaches the
    observed one, counted here over all 120 orderings of the five values (each relabelling 12 times)."""
    import itertools

    from utils.plot.stats import permutation_p

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0, 7.0])
    pooled, observed = np.concatenate([a, b]), abs(a.mean() - b.mean())
    hits = [abs(np.mean(p[:2]) - np.mean(p[2:])) >= observed - 1e-9 for p in itertools.permutations(pooled)]
    assert permutation_p(a, b) == pytest.approx(np.mean(hits))


def test_the_sign_flip_test_counts_every_labelling():
    """The share of the 2^n sign labellings whose |sum| reaches the observed one (a plain loop over them), exact at 5
    seeds and at 16 (65,536 labellings, counted by halves; tests/test_claims.py holds the rest)."""
    import itertools

    from utils.plot import stats

    d = np.array([3.0, -1.0, 2.0, 5.0, 0.5])
    hits = [abs(sum(s * x for s, x in zip(signs, d))) >= abs(d.sum()) - 1e-9
            for signs in itertools.product((1, -1), repeat=len(d))]
    assert stats.sign_flip_p(d) == pytest.approx(np.mean(hits))
    assert stats.sign_flip_p(np.ones(5)) == pytest.approx(2 / 32)  # all positive: only the all-same labellings
    big = np.random.default_rng(1).normal(0.3, 1.0, size=16)
    exact = np.mean([abs(np.dot(s, big)) >= abs(big.sum()) - 1e-9
                     for s in itertools.product((1.0, -1.0), repeat=16)])
    assert stats.sign_flip_p(big) == pytest.approx(exact, abs=1e-12)


def _tutorial():
    return _script("tutorial_table")


def test_the_tutorial_table_counts_episodes_to_solve_from_the_records(tmp_path):
    """Finished records only; an agent never solved counts as never (the median reads '> E' once half the seeds
    never were); the interval is a percentile bootstrap of the median, checked against a plain loop."""
    import json

    module = _tutorial()
    env = "LunarLanderContinuous-v3"

    def record(policy, seed, solved, finished=True):
        body = {"config": {"max_episodes": 1000}, "solved": [None if e is None else {"episode": e, "step": 100 * e}
                                                             for e in solved]}
        if finished:
            body["finished"] = "2026-11-25T10:00:00"
        (tmp_path / f"{policy}_{env}_{seed}.json").write_text(json.dumps(body))

    for seed, e in enumerate([300, 500, None, 400, 700]):
        record("TD3", seed, [e])
    for seed, pair in enumerate([(200, None), (None, None), (350, 600), (None, 900)]):
        record("DASE_TD3", seed, list(pair))
    record("DASE_TD3", 4, [100, 100], finished=False)  # still running: no verdict
    lines = module.table(tmp_path)
    assert lines[2] == "| 0 | 300 | 200 | not within 1000 |"
    assert lines[4] == "| 2 | not within 1000 | 350 | 600 |"
    assert lines[6] == "| 4 | 700 | — | — |"
    td3 = [300, 500, np.inf, 400, 700]
    rng = np.random.default_rng(0)
    medians = [np.median(np.asarray(td3)[rng.integers(0, 5, 5)]) for _ in range(module.BOOTSTRAP)]
    lo, hi = np.percentile(medians, [2.5, 97.5], method="inverted_cdf")
    show = lambda v: "> 1000" if not np.isfinite(v) else f"{v:.0f}"  # noqa: E731
    median_row = lines[7].split(" | ")
    assert median_row[1] == f"500 [{show(lo)}, {show(hi)}] (5)"
    assert median_row[2].startswith("> 1000 [") and median_row[2].endswith("(4)")  # 2 of 4 never: median never
    assert lines[8] == "| solved within the limit | 4 of 5 | 2 of 4 | 2 of 4 |"


def test_the_tutorial_interim_table_compares_running_dase_agents_with_td3_at_equal_episodes_and_steps(tmp_path):
    """--interim: a running DASE_TD3 seed's agents, each against finished TD3's last-100 mean at the agent's own
    episode count and at its own step (TD3 steps at another pace, so the two differ); the interval and the
    sign-flip p checked against plain computations; a TD3 solved before the agent's episode is no comparison."""
    import itertools
    import json

    module = _tutorial()
    env = "LunarLanderContinuous-v3"
    rng = np.random.default_rng(3)

    def rows(n, shift, pace):
        e = np.arange(1, n + 1, dtype=float)
        return np.stack([e, pace * e, rng.normal(size=n) * 10 + shift + e / 10], axis=1)

    by_episode, by_step = [], []
    for seed, (shift0, shift1) in enumerate([(5.0, 30.0), (-20.0, 0.0), (40.0, 10.0)]):
        td3 = rows(1000, 0.0, 250.0)
        np.save(tmp_path / f"TD3_{env}_{seed}_episode_eval.npy", td3)
        (tmp_path / f"TD3_{env}_{seed}.json").write_text(json.dumps(
            {"config": {"max_episodes": 1000}, "solved": [None], "finished": "x"}))
        e, t = [], []
        for agent, (n, shift) in enumerate([(150 + 10 * seed, shift0), (170, shift1)]):
            a = rows(n, shift, 300.0)
            np.save(tmp_path / f"DASE_TD3_{env}_{seed}_Agent_{agent}_episode_eval.npy", a)
            ours = a[n - 100:n, 2].mean()
            e.append(ours - td3[n - 100:n, 2].mean())  # TD3's episodes n-99 .. n
            k = int(300 * n // 250)  # TD3's episodes up to the agent's step 300 n
            t.append(ours - td3[k - 100:k, 2].mean())
        (tmp_path / f"DASE_TD3_{env}_{seed}.json").write_text(json.dumps({"config": {"max_episodes": 1000}}))
        by_episode.append(np.mean(e))
        by_step.append(np.mean(t))
    lines = module.interim(tmp_path)
    assert len(lines) == 2 + 6 + 1 + 2

    def summary(x):
        x = np.array(x)
        pick = np.random.default_rng(0).integers(0, len(x), size=(module_stats.BOOTSTRAP, len(x)))
        lo, hi = np.percentile(x[pick].mean(axis=1), [2.5, 97.5])
        flips = [abs(np.dot(s, x)) >= abs(x.sum()) - 1e-9 for s in itertools.product((1, -1), repeat=len(x))]
        per_seed = ", ".join(f"{k}: {v:+.1f}" for k, v in enumerate(x))
        return (f"per seed {per_seed}; mean over {len(x)} seeds {x.mean():+.1f} [95 % CI {lo:+.1f}, {hi:+.1f}], "
                f"above TD3 on {int(np.sum(x > 0))} of {len(x)}, sign-flip p {np.mean(flips):.2f}")

    import utils.plot.stats as module_stats

    assert lines[-2] == "- agents − TD3 at the same episode, " + summary(by_episode)
    assert lines[-1] == "- agents − TD3 at the same step, " + summary(by_step)
    # TD3 of seed 2 solved (and stopped) at episode 120: no TD3 value at the agents' later episodes
    td3 = np.load(tmp_path / f"TD3_{env}_2_episode_eval.npy")[:120]
    np.save(tmp_path / f"TD3_{env}_2_episode_eval.npy", td3)
    lines = module.interim(tmp_path)
    assert "— (TD3 solved at episode 120)" in lines[6] and lines[-2].count(": ") == 2 + 0  # seeds 0 and 1 only
    (tmp_path / f"DASE_TD3_{env}_1.json").write_text(json.dumps({"config": {}, "finished": "x"}))
    assert len(module.interim(tmp_path)) == 2 + 4 + 1 + 2  # a finished seed belongs to the main table, not here
    assert len(module.interim(tmp_path, at_step=300 * 150)) == 2 + 6 + 1 + 2  # a cut shows every seed at that step


def test_the_tutorial_interim_table_in_the_docs_is_the_committed_curves():
    """docs/tutorial.md's interim block is the DASE_TD3 files at step 150,000 (skipped while a restarted run has
    not reached it again)."""
    folder = _tutorial().FOLDER
    # evaluated every 5000 steps, and the episode rows are written with each evaluation: 31 points = step 150,000
    reached = [len(np.load(p)) for p in folder.glob("DASE_TD3_*_Agent_[0-9].npy")]
    if len(reached) < 10 or min(reached) < 31:
        pytest.skip("the DASE_TD3 tutorial run is being redone and has not reached step 150,000 again")
    lines = _tutorial().interim(at_step=150_000)
    page = (ROOT / "docs" / "tutorial.md").read_text()
    block = page.split("<!-- tutorial_interim -->\n")[1].split("<!-- /tutorial_interim -->")[0]
    assert block.strip().splitlines() == lines


def test_the_tutorial_table_in_the_docs_is_the_committed_records():
    lines = _tutorial().table()
    page = (ROOT / "docs" / "tutorial.md").read_text()
    block = page.split("<!-- tutorial_table -->\n")[1].split("<!-- /tutorial_table -->")[0]
    assert block.strip().splitlines() == lines


def test_the_diff_dac_table_in_the_docs_is_the_committed_curves(capsys):
    """docs/actor_critic.md's Diff-DAC verdict table is what experiments/diff_dac_table.py computes from the curves,
    consensus files and training-episode logs committed under 'Learning Curves/diff_dac', line for line."""
    table = _script("diff_dac_table")
    assert table.main() == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert sum(line.startswith("| ") and "[" in line for line in lines) == 6 + 4  # every setting, every pair
    page = (ROOT / "docs" / "actor_critic.md").read_text()
    block = page.split("<!-- diff_dac_table -->\n")[1].split("<!-- /diff_dac_table -->")[0]
    assert block.strip().splitlines() == lines


def test_the_lunar_300k_tables_read_windows_and_weight_spans_at_the_right_steps(tmp_path):
    """Entry k of a curve is the evaluation at step 1000 k and entry k of a weight trace covers the updates of steps
    (1000 (k-1), 1000 k]: the return at 100k is the mean of entries 96-100, the weight of 25k-100k the mean of
    entries 26-100; a seed's agents are averaged first; a trace that stops short of a span leaves it out."""
    module = _script("step_tables")
    env, k = module.OURS.name, np.arange(301, dtype=float)
    tmp_path = tmp_path / env  # a run folder is named after its environment
    tmp_path.mkdir()
    for agent, scale in ((0, 1.0), (1, 3.0)):
        np.save(tmp_path / f"DASE_TD3_{env}_0_Agent_{agent}.npy", scale * k)
        trace = scale * k
        trace[:26] = np.nan  # warm-up: no update
        np.save(tmp_path / f"DASE_TD3_{env}_0_Agent_{agent}_weights.npy", trace)
        np.save(tmp_path / f"DASE_TD3_{env}_1_Agent_{agent}_weights.npy", trace[:150])  # seed 1 stopped at 149k
    curves = module.seed_curves(tmp_path, "DASE_TD3")
    assert list(curves) == [0] and module.at(curves, 100_000) == pytest.approx([2.0 * 98])
    cells = module.mean_weights(tmp_path, "DASE_TD3", (0, 1))
    assert cells[0] == f"{2.0 * 63:.3f} ({2.0 * 63:.3f}-{2.0 * 63:.3f})"  # both seeds
    assert cells[1] == f"{2.0 * 150.5:.3f} ({2.0 * 150.5:.3f}-{2.0 * 150.5:.3f})"
    assert cells[2] == f"{2.0 * 250.5:.3f} ({2.0 * 250.5:.3f}-{2.0 * 250.5:.3f})"


def test_the_lunar_300k_why_table_in_the_docs_is_the_committed_curves():
    """docs/experiments.md's table of what DASE_TD3's LunarLander 300k result depends on is what
    experiments/step_tables.py (lunar_300k) computes from the curves and weight traces in the repository: a change to how
    a cell, an interval or a p-value is computed, or a curve changed without its table, fails here. (The first
    table, ours beside the paper's, is utils.compare's: tests/test_compare.py holds it.)"""
    module = _script("step_tables")
    page = (ROOT / "docs" / "experiments.md").read_text()
    block = page.split("<!-- lunar_300k_why -->\n")[1].split("<!-- /lunar_300k_why -->")[0]
    assert block.strip() == module.lunar_300k().strip()


def test_the_acer_mujoco_table_reads_windows_at_the_right_steps_and_counts_the_seeds_that_reached_them(tmp_path):
    """Entry k of a curve is the evaluation at step 10k x k: the cell at 100k is the mean over seeds of entries 6-10,
    a seed whose curve stops short of a step is left out of it (and the count says so), and the comparison needs two
    seeds of each method at the step."""
    module = _script("step_tables")
    env, k = module.ACER_ENVS[0], np.arange(101, dtype=float)
    for method, scale, seeds in (("ACER", 1.0, {0: 101, 1: 101}), ("TD3", 2.0, {0: 101, 1: 20})):
        (tmp_path / method / env).mkdir(parents=True)
        for seed, n in seeds.items():
            np.save(tmp_path / method / env / f"{method}_{env}_{seed}.npy", (scale + seed) * k[:n])
    acer, td3 = module.acer_runs(tmp_path, "ACER", env), module.acer_runs(tmp_path, "TD3", env)
    assert module.at(acer, 100_000, module.ACER_FREQ) == pytest.approx([8.0, 16.0])
    assert module.at(td3, 250_000, module.ACER_FREQ) == pytest.approx([2.0 * 23])  # seed 1 stopped at 190k
    assert module.reached(td3) == "190k-1000k, seeds 0,1"
    rows = [[c.strip() for c in row.strip("|").split("|")] for row in module.acer_mujoco(tmp_path).splitlines()]
    assert rows[2][:3] == [f"{env} ACER", "1000k, seeds 0,1", module.cell(np.array([8.0, 16.0]), 0)]
    assert rows[3][3] == module.cell(np.array([46.0]), 0)
    assert rows[4][:2] == [f"{env} SAC", "not run"]
    assert rows[5][0] == f"{env} ACER − TD3"
    assert rows[5][2].startswith(f"{12.0 - (16.0 + 24.0) / 2:+.0f} (p ") and rows[5][3] == "—"  # one TD3 seed
    paper = tmp_path / "paper" / "TD3" / "HalfCheetah-v2"  # the paper's runs: an evaluation every 1000 steps
    paper.mkdir(parents=True)
    np.save(paper / "TD3_HalfCheetah-v2_0.npy", np.arange(1001, dtype=float))
    np.save(paper / "DASE_TD3_HalfCheetah-v2_0_Agent_0.npy", np.zeros(1001))  # not TD3's
    assert module.paper_at("TD3", env, 100_000, tmp_path / "paper") == pytest.approx([80.0])  # 60k, 70k, ..., 100k


def test_the_acer_mujoco_table_in_the_docs_is_the_committed_curves():
    """docs/actor_critic.md's ACER, TD3 and SAC table on HalfCheetah-v5 is what experiments/step_tables.py
    (acer_mujoco) computes from the curves in the repository: a curve committed without its table fails here."""
    page = (ROOT / "docs" / "actor_critic.md").read_text()
    block = page.split("<!-- acer_mujoco_table -->\n")[1].split("<!-- /acer_mujoco_table -->")[0]
    assert block.strip() == _script("step_tables").acer_mujoco().strip()


SCRIPTS = {"python DASE_main.py": DASE_main, "python sac_main.py": sac_main, "python ac_main.py": ac_main}


def doc_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every training command in the bash blocks of README and docs/*.md."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for program in SCRIPTS:
            # a bash loop's variable ($seed, ${seed}) as its first value would be
            text = re.sub(r"\$\{?seed\}?", "0", path.read_text())
            for c in readme_commands(program, text):
                c = c[:-1] if c[-1] == "&" else c  # started in the background
                out.append((f"{path.name}: {' '.join(c[2:])[:60]}", [program, *c[2:]]))
    return out


@pytest.mark.parametrize("where, command", doc_commands(), ids=[w for w, _ in doc_commands()])
def test_every_training_command_in_the_docs_passes_its_scripts_checks(where, command, tmp_path, monkeypatch):
    """What a reader copies must start: each command's flags pass its script's parser and the checks it makes
    before training (utils.run.validate: ranges, sizes, divisibility, folders), run from an empty folder. (A Pong
    command whose --eval_freq was no multiple of its 16 environments failed at once, and nothing caught it.)"""
    from utils.run import validate

    monkeypatch.chdir(tmp_path)
    module = SCRIPTS[command[0]]
    args = module.parse(command[1:])
    validate(module.build_config(args), getattr(module, "FLAG_NAMES", None))
