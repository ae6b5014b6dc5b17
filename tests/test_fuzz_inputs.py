"""Bad input anywhere is one line and exit 2, found by Hypothesis (property-based fuzzing).

For every entry point the test reads the parser's own flags (so a new flag is covered without editing this file) and
draws values for one of them: values no flag may take (a number flag given "abc", "nan", "" or "inf"; a choice that
is not one), which must give exit code 2; and unusual values (negative, zero, absurdly large, empty or blank strings,
a path that is a file, under a file, 300 bytes long, with spaces and non-ASCII letters), which may run (exit 0) or be
refused. Either way: never a traceback, and a refusal is exactly one line on stderr that leaves nothing behind in the
fresh folder the entry point ran in. A tiny base command (200 steps, 1 evaluation episode) makes an accepted value
cheap; step budgets and episode counts get no large values (a long run is legal, not a failure).

By default a bounded number of examples per entry point (CI); FUZZ_EXAMPLES=500 (or more) for a long hunt. A failure
Hypothesis finds becomes a regular case in test_cli.py / test_tool_errors.py once fixed.
"""
import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ac_main
import DASE_main
import sac_main
from benchmarks import denormals, evaluation, gpu_graphs_check, ops, peers, recurrent, throughput, twin_critic
from utils import play
from utils.cli import Parser, count, main_guard, real
from utils.plot import cli as plot_cli
from utils.plot import tasks as plot_tasks
from utils.plot import weight_map
from utils.plot import windows as plot_windows
from utils.run.sharing import kl_variance
from utils.sweep import cli as sweep_cli

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
NUMBER_TYPES = (int, float, count, real)
# flags whose large values make a legal but long run: only bad or small values are drawn for them
LONG = {"--max_time_steps", "--num_steps", "--eval_episodes", "--train_steps", "--updates", "--warmup", "--seeds",
        "--agents", "--loop_agents", "--max_episodes", "--solved_window", "--hidden_sizes", "--hidden_size",
        "--envs_per_agent", "--num_processes", "--n_steps", "--dpd_batch_size", "--batch_size", "--buffer_size",
        "--replay_start", "--replay_ratio", "--start_time_steps", "--start_steps", "--num_agents", "--env_workers",
        "--training_window"}
# flags that load or mirror something from elsewhere, or would start a long or GPU-bound action when accepted
SKIP = {"-h", "--help", "--resume", "--overwrite", "--load_model", "--save_model", "--tensorboard", "--compile",
        "--cuda_graphs", "--no_cuda_graphs", "--device", "--gpu", "--threads", "--env", "--policy"}


class _Captured(Exception):
    pass


def parser_of(call) -> Parser:
    """The Parser an entry point builds, caught as it is about to parse."""
    box = {}
    own = "parse_args" in Parser.__dict__  # else inherited: put back by deleting, or a later patch of argparse's
    original = Parser.parse_args           # own parse_args (test_readme's) would no longer reach Parser

    def grab(self, *args, **kwargs):
        box["parser"] = self
        raise _Captured

    Parser.parse_args = grab
    try:
        call()
    except _Captured:
        pass
    finally:
        if own:
            Parser.parse_args = original
        else:
            del Parser.parse_args
    return box["parser"]


def script(module):
    def run(argv):
        return main_guard(module.run, argv)
    return run


def peers_without_sb3(argv):
    """benchmarks.peers as on a machine without Stable-Baselines3 (CI's): every accepted value ends at its install
    hint (exit 2), so no example starts the timed jobs."""
    original = peers.has_sb3
    peers.has_sb3 = lambda: False
    try:
        return peers.main(argv)
    finally:
        peers.has_sb3 = original


def curve_dir(tmp: Path) -> Path:
    d = tmp / "curves"
    d.mkdir()
    np.save(d / "TD3_Pendulum-v1_0.npy", np.linspace(-1500, -200, 3))
    return d


TRAIN = ["--env", "Pendulum-v1", "--eval_freq", "100", "--eval_episodes", "1", "--threads", "1", "--quiet",
         "--results_dir", "{tmp}/r", "--models_dir", "{tmp}/m", "--checkpoint_freq", "0"]
ENTRIES = {
    "DASE_main.py": (script(DASE_main), lambda: DASE_main.parse([]), TRAIN + ["--max_time_steps", "200",
                                                                          "--start_time_steps", "100"]),
    "sac_main.py": (script(sac_main), lambda: sac_main.parse([]), TRAIN + ["--num_steps", "200", "--start_steps", "100"]),
    "ac_main.py": (script(ac_main), lambda: ac_main.parse([]),
                   ["--env", "CartPole-v1", "--max_time_steps", "160", "--eval_freq", "80", "--eval_episodes", "1",
                    "--envs_per_agent", "2", "--threads", "1", "--quiet", "--results_dir", "{tmp}/r",
                    "--models_dir", "{tmp}/m", "--checkpoint_freq", "0"]),
    "utils.plot": (plot_cli.main, lambda: plot_cli.parse([]), ["{curves}", "--out", "{tmp}/out"]),
    "utils.plot.windows": (plot_windows.main, lambda: plot_windows.main([]), ["{curves}", "--at", "1000"]),
    "utils.plot.tasks": (plot_tasks.main, lambda: plot_tasks.main([]), ["{curves}"]),
    "utils.plot.weight_map": (weight_map.main, lambda: weight_map.main([]), ["--out", "{tmp}/out"]),
    "benchmarks.throughput": (throughput.main, lambda: throughput.main([]),
                              ["--env", "Pendulum-v1", "--agents", "1", "--updates", "2", "--warmup", "0",
                               "--loop_agents", "--threads", "1", "--json", "{tmp}/out.json"]),
    "benchmarks.ops": (ops.main, lambda: ops.main([]), ["--policies", "TD3", "--agents", "1", "--env", "Pendulum-v1",
                                                         "--json", "{tmp}/out.json"]),
    "benchmarks.evaluation": (evaluation.main, lambda: evaluation.main([]),
                              ["--env", "Pendulum-v1", "--members", "2", "--episodes", "1", "--workers", "0",
                               "--threads", "1", "--json", "{tmp}/out.json"]),
    "benchmarks.recurrent": (recurrent.main, lambda: recurrent.main([]),
                             ["--windows", "2", "--seq_len", "3", "--seq_hidden", "4", "--updates", "1", "--repeats",
                              "1", "--json", "{tmp}/out.json"]),
    # without a GPU every accepted value ends at "needs a GPU" (exit 2, one line); with one, a 40-step check runs
    "benchmarks.gpu_graphs_check": (gpu_graphs_check.main, lambda: gpu_graphs_check.main([]),
                                    ["--steps", "40", "--policies", "DASE_TD3", "--json", "{tmp}/out.json"]),
    "benchmarks.twin_critic": (twin_critic.main, lambda: twin_critic.main([]),
                               ["--seeds", "1", "--hidden", "4", "--batch", "2", "--rounds", "1"]),
    "benchmarks.denormals": (denormals.main, lambda: denormals.main([]),
                             ["--fraction", "0.5", "--batch", "2", "--rounds", "1"]),
    # a run record whose models were never saved: every accepted value ends at "no model file" (exit 2, one line)
    "utils.play": (play.main, lambda: play.parse([]), ["{record}", "--episodes", "1"]),
    "benchmarks.peers": (peers_without_sb3, lambda: peers.main([]), ["--jobs", "td3", "--runs", "1"]),
    # --dry_run: the sweep reads, checks and plans the file's runs and starts none
    "utils.sweep": (sweep_cli.main, lambda: sweep_cli.parse_args([]), ["{experiment}", "--dry_run"]),
}


def flags_of(name: str) -> list:
    parser = parser_of(ENTRIES[name][1])
    return [a for a in parser._actions if a.option_strings and a.option_strings[-1] not in SKIP
            and not any(s in SKIP for s in a.option_strings)]


def strict_values(action) -> list[str]:
    """Values the flag can never take."""
    if action.choices is not None:
        return ["not-a-choice"]
    if action.type in (int, count):
        return ["abc", "", "nan", "1.5x"]
    if action.type in (float, real):
        return ["abc", "", "nan", "inf"]
    if action.type is kl_variance:
        return ["abc", "nan", "-1"]
    return []


def loose_values(action, flag: str) -> list[str]:
    """Unusual values: legal for some flags, not for others."""
    if action.type in (int, float, count, real, kl_variance):
        small = ["-1", "0", "-0", "1", "0.5"]
        return small if flag in LONG else small + ["1e12", "-1e12", "99999999999999999999"]
    return ["", " ", "a" * 300, "{file}", "{file}/below", "dir with space ü", "nope"]


def cases(name: str):
    out = []
    for action in flags_of(name):
        flag = action.option_strings[-1]
        if action.nargs == 0:
            out.append((flag, None, False))
            continue
        out += [(flag, v, True) for v in strict_values(action)]
        out += [(flag, v, False) for v in loose_values(action, flag)]
    return out


def snapshot(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def check(name: str, tmp: Path, flag: str, value, strict: bool) -> None:
    run, _, base = ENTRIES[name]
    (tmp / "a_file").write_text("not a folder")
    curves = curve_dir(tmp)
    experiment = tmp / "experiment.yaml"
    experiment.write_text(f"envs: [Pendulum-v1]\npolicies: [TD3, DASE_TD3]\nseeds: 0-1\nsteps: 400\nstart_steps: 100\n"
                          f"eval_freq: 200\nsettings:\n  a:\n    results_dir: {tmp / 'sweep'}\n")
    record = tmp / "TD3_Pendulum-v1_0.json"
    record.write_text(json.dumps({"config": {"policy": "TD3", "env": "Pendulum-v1", "models_dir": str(tmp / "none")}}))
    subs = {"{tmp}": str(tmp), "{curves}": str(curves), "{file}": str(tmp / "a_file"), "{experiment}": str(experiment),
            "{record}": str(record)}

    def fill(token: str) -> str:
        for k, v in subs.items():
            token = token.replace(k, v)
        return token

    argv = [fill(t) for t in base] + [flag] + ([] if value is None else [fill(value)])
    if os.environ.get("FUZZ_LOG"):  # which case runs now, for a hunt that seems stuck
        with open(os.environ["FUZZ_LOG"], "a") as log:
            log.write(f"{name} {flag} {value!r}\n")
    before = snapshot(tmp)
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp)  # a relative or empty path lands here, never in the repository
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = run(argv)
            except SystemExit as e:
                code = e.code
    finally:
        os.chdir(cwd)
    text = err.getvalue()
    shown = f"{name} {flag} {value!r}: exit {code}, stderr {text[-500:]!r}"
    assert "Traceback" not in text, shown
    if code == 3:  # a legal value that makes training diverge (--lr 1e20): the run stops, one line naming the step
        assert not strict and len(text.strip().splitlines()) == 1 and "non-finite" in text, shown
        return
    assert code in (0, 2), shown
    if strict:
        assert code == 2, shown
    if code == 2:
        assert len(text.strip().splitlines()) == 1, shown
        assert snapshot(tmp) == before, shown + f"; left {sorted(set(snapshot(tmp)) - set(before))}"


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_flag_of_every_entry_point_is_read(name):
    """The fuzz reads the parsers: every entry point has flags to draw from, and values of each kind."""
    drawn = cases(name)
    assert len({flag for flag, _, _ in drawn}) >= 2
    assert any(strict for _, _, strict in drawn)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_bad_and_unusual_values_are_refused_in_one_line_or_run(name, tmp_path_factory):
    drawn = cases(name)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.sampled_from(drawn))
    def one(case):
        flag, value, strict = case
        check(name, tmp_path_factory.mktemp("fuzz"), flag, value, strict)

    one()
