"""Run a grid of training runs described by a YAML experiment file.

    python -m utils.sweep experiments/smoke.yaml [--dry_run] [--workers K] [--ray [ADDRESS]]

Every (setting, environment, policy) of the file is ONE run: one process of DASE_main.py or
sac_main.py that trains all of the file's seeds (``--seeds``) and writes to
``{setting's results_dir}/{TD3|DDPG|SAC}/{env}/``, the layout of the paper's published data.
Runs always get ``--resume``: finished runs are skipped without starting a process, interrupted
ones continue from their checkpoints. Runs execute in a local process pool (default) or as Ray
tasks (``--ray``). Exit code: 0 all runs done or skipped, 1 some run failed, 2 a bad experiment
file or command line (one line on stderr, nothing started), 128 + signal when interrupted.
experiments/README.md describes the file format.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib
import io
import math
import os
import re
import shlex
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .cli import Parser, available_cores, count
from .naming import curve_length, curve_names, default_num_agents, is_multi_agent, run_stem, variant_of

ROOT = Path(__file__).resolve().parent.parent
EXIT_FAILED, EXIT_USAGE = 1, 2
RAY_HINT = "pip install -r requirements-cluster.txt"

DASE_SCRIPT, SAC_SCRIPT = "DASE_main.py", "sac_main.py"
POLICY_SCRIPT = {
    **{p: DASE_SCRIPT for p in ("DDPG", "TD3", "DASE_DDPG", "DASE_TD3", "DPD_DDPG", "DPD_TD3")},
    **{p: SAC_SCRIPT for p in ("SAC", "DASE_SAC", "DPD_SAC")},
}
# the two command lines spell the run length and the random warm-up differently
STEP_FLAGS = {DASE_SCRIPT: ("--max_time_steps", "--start_time_steps"), SAC_SCRIPT: ("--num_steps", "--start_steps")}

TOP_KEYS = {"description", "envs", "policies", "seeds", "settings", "steps", "start_steps", "eval_freq",
            "eval_episodes", "flags", "threads_per_run", "gpus_per_run", "device"}
REQUIRED_KEYS = ("envs", "policies", "seeds", "settings", "steps")
SETTING_KEYS = {"description", "results_dir", "flags"}
# flags the sweep sets itself: giving them in `flags` would contradict the grid or the skip logic
RESERVED_FLAGS = {
    "policy": "list policies under 'policies'", "env": "list environments under 'envs'",
    "seed": "list seeds under 'seeds'", "seeds": "list seeds under 'seeds'",
    "results_dir": "give each setting a 'results_dir'",
    "max_time_steps": "use the top-level 'steps'", "num_steps": "use the top-level 'steps'",
    "start_time_steps": "use the top-level 'start_steps'", "start_steps": "use the top-level 'start_steps'",
    "eval_freq": "use the top-level 'eval_freq'", "eval_episodes": "use the top-level 'eval_episodes'",
    "threads": "use the top-level 'threads_per_run'", "device": "use the top-level 'device'",
    "resume": "the sweep always passes --resume", "quiet": "the sweep always passes --quiet",
    "overwrite": "the sweep always passes --resume; to start runs over, delete their results",
    "help": "not a run flag",
}


class ExperimentError(Exception):
    """A bad experiment file: one line saying what to change."""


@dataclass(frozen=True)
class Run:
    """One process of the sweep: one policy on one environment in one setting, all seeds."""

    setting: str
    policy: str
    env: str  # the resolved Gymnasium id: the one in the output file names
    seeds: tuple[int, ...]
    results_dir: str  # as passed to --results_dir; relative paths are relative to the repository root
    script: str
    args: tuple[str, ...]  # the script's flags
    num_agents: int
    steps: int
    eval_freq: int
    checkpoint_dir: str | None = None

    @property
    def label(self) -> str:
        return f"{self.setting} {self.policy} {self.env} seeds {' '.join(seed_tokens(self.seeds))}"

    @property
    def argv(self) -> list[str]:
        """The command after the interpreter: script and flags."""
        return [self.script, *self.args]

    def command_line(self) -> str:
        """The command as a user would type it in the repository folder."""
        return shlex.join(["python", *self.argv])

    def folder(self, root: Path = ROOT) -> Path:
        return root / self.results_dir

    def log_path(self, root: Path = ROOT) -> Path:
        return self.folder(root) / "logs" / f"{run_stem(self.policy, self.env, '_'.join(seed_tokens(self.seeds)), self.variant)}.log"

    variant: str = ""  # naming.VARIANTS: part of every file name of the run

    def stems(self) -> list[str]:
        return [run_stem(self.policy, self.env, seed, self.variant) for seed in self.seeds]

    def expected_files(self, root: Path = ROOT) -> list[tuple[str, int | None]]:
        """Every file a finished run leaves: (path, curve length), None for the JSON records."""
        length = curve_length(self.steps, self.eval_freq)
        out: list[tuple[str, int | None]] = []
        for stem in self.stems():
            out.append((str(self.folder(root) / f"{stem}.json"), None))
            names = curve_names(stem, self.policy, self.num_agents)
            out.extend((str(self.folder(root) / f"{name}.npy"), length) for name in names)
        return out

    def checkpoint_paths(self, root: Path = ROOT) -> list[Path]:
        folder = root / self.checkpoint_dir if self.checkpoint_dir else self.folder(root) / "checkpoints"
        return [folder / f"{stem}.pt" for stem in self.stems()]


@dataclass
class Experiment:
    """A validated experiment file, before it is expanded into runs."""

    path: Path
    envs: list[str]
    policies: list[str]
    seeds: list[int]
    settings: dict[str, tuple[str, dict[str, Any]]]  # name -> (results_dir, flags merged with the global ones)
    steps: int
    start_steps: int
    eval_freq: int
    eval_episodes: int | None
    threads_per_run: int | None
    gpus_per_run: float
    device: str | None
    notices: list[str]


@dataclass
class Result:
    """What became of one run."""

    run: Run
    status: str  # done | skipped | failed | interrupted | not started
    code: int | None = None
    wall: float = 0.0
    note: str = ""


# ---- reading and checking the experiment file -----------------------------------------------------
def _integer(value: Any, what: str) -> int:
    """An integer from YAML: 1000000, 1_000_000, 1.0e+6, or the strings '1e6' / '1_000_000'."""
    if isinstance(value, bool):
        raise ExperimentError(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    try:  # the command lines' own integer parsing: 1e6, 1_000_000, 1.0e+6
        return count(str(value)) if isinstance(value, (float, str)) else count("")
    except argparse.ArgumentTypeError:
        raise ExperimentError(f"{what}: expected an integer, got {value!r}") from None


def _positive(value: Any, what: str, minimum: int = 1) -> int:
    number = _integer(value, what)
    if number < minimum:
        raise ExperimentError(f"{what}: must be {'positive' if minimum == 1 else f'>= {minimum}'}, got {number}")
    return number


def _names(value: Any, what: str) -> list[str]:
    """A non-empty list of distinct strings (a single string counts as a list of one)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise ExperimentError(f"{what}: expected a non-empty list of names, got {value!r}")
    repeated = sorted({x for x in items if items.count(x) > 1})
    if repeated:
        raise ExperimentError(f"{what}: {', '.join(repeated)} listed twice")
    return list(items)


def parse_seeds(value: Any) -> list[int]:
    """Seeds as a list ([0, 1, 2]), a number, or a string of numbers and ranges ("0-9", "0-4 7 9")."""
    if isinstance(value, bool):
        raise ExperimentError(f"seeds: expected numbers or ranges like \"0-9\", got {value!r}")
    items = value if isinstance(value, list) else [value]
    seeds: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise ExperimentError(f"seeds: expected numbers or ranges like \"0-9\", got {item!r}")
        tokens = [item] if isinstance(item, int) else [t for t in re.split(r"[\s,]+", item) if t]
        for token in tokens:
            if isinstance(token, int):
                if token < 0:
                    raise ExperimentError(f"seeds: {token} is negative; seeds are non-negative integers")
                seeds.append(token)
                continue
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", token)
            if m is None:
                raise ExperimentError(f"seeds: {token!r} is neither a non-negative integer nor a range like 0-9")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise ExperimentError(f"seeds: {token} is an empty range; write LOW-HIGH with LOW <= HIGH")
            seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise ExperimentError("seeds: no seed given")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ExperimentError(f"seeds: {', '.join(map(str, repeated))} named twice")
    return sorted(seeds)


def seed_tokens(seeds: Sequence[int]) -> list[str]:
    """Seeds as --seeds tokens: runs of three or more consecutive seeds become LOW-HIGH ("0-9")."""
    tokens: list[str] = []
    ordered = sorted(seeds)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            tokens.append(f"{ordered[i]}-{ordered[j]}")
        else:
            tokens.extend(str(s) for s in ordered[i:j + 1])
        i = j + 1
    return tokens


def _flags(value: Any, what: str) -> dict[str, Any]:
    """A mapping of flag names (with or without leading dashes) to YAML scalars or lists of them."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExperimentError(f"{what}: expected a mapping of flag names to values, got {value!r}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = str(key).lstrip("-")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ExperimentError(f"{what}: {key!r} is not a flag name")
        if name in RESERVED_FLAGS:
            raise ExperimentError(f"{what}: --{name} is set by the sweep; {RESERVED_FLAGS[name]}")
        if isinstance(item, list):  # a flag taking several values: a non-empty list of numbers or strings
            ok = bool(item) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in item)
        else:  # true/false switch a store_true flag on/off; null is a mistake, not "no value"
            ok = isinstance(item, (str, int, float, bool))
        if not ok:
            raise ExperimentError(f"{what}: --{name} needs a value (a number, a string, true/false or a list), "
                                  f"got {item!r}")
        out[name] = item
    return out


def flag_args(flags: dict[str, Any]) -> list[str]:
    """Flags as command-line tokens: true -> --flag, false -> nothing, lists -> --flag a b."""
    out: list[str] = []
    for name, value in flags.items():
        if value is True:
            out.append(f"--{name}")
        elif value is False:
            continue
        elif isinstance(value, list):
            out.extend([f"--{name}", *(str(v) for v in value)])
        else:
            out.extend([f"--{name}", str(value)])
    return out


def _resolve_env(name: str) -> tuple[str, str | None]:
    """The Gymnasium id the command lines would run for this name, and their notice when it was mapped."""
    from .envs.registry import resolve_env_id
    from .errors import UsageError

    try:
        return resolve_env_id(name)
    except UsageError as e:
        raise ExperimentError(f"envs: {str(e).removeprefix('--env: ')}") from None


def load_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file; raises ExperimentError with a one-line reason."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ExperimentError(f"cannot read the experiment file: {e.strerror or e}") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ExperimentError(f"not valid YAML{where}: {problem}") from None
    if not isinstance(spec, dict):
        raise ExperimentError("expected a mapping with keys " + ", ".join(REQUIRED_KEYS))
    unknown = sorted(str(k) for k in spec if k not in TOP_KEYS)
    if unknown:
        raise ExperimentError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(TOP_KEYS))}")
    missing = [k for k in REQUIRED_KEYS if k not in spec]
    if missing:
        raise ExperimentError(f"missing key(s) {', '.join(missing)}")

    policies = _names(spec["policies"], "policies")
    for policy in policies:
        if policy not in POLICY_SCRIPT:
            raise ExperimentError(f"policies: unknown policy {policy!r}; use one of {', '.join(POLICY_SCRIPT)}")
    notices: list[str] = []
    envs: list[str] = []
    for name in _names(spec["envs"], "envs"):
        env, notice = _resolve_env(name)
        if notice:
            notices.append(notice)
        if env in envs:
            raise ExperimentError(f"envs: {name} runs {env}, which is already listed")
        envs.append(env)
    seeds = parse_seeds(spec["seeds"])
    steps = _positive(spec["steps"], "steps")
    start_steps = _positive(spec.get("start_steps", 25_000), "start_steps", minimum=0)
    eval_freq = _positive(spec.get("eval_freq", 1000), "eval_freq")
    if eval_freq > steps:
        raise ExperimentError(f"eval_freq {eval_freq} is larger than steps {steps}")
    if start_steps >= steps:
        notices.append(f"note: start_steps {start_steps} >= steps {steps}: the runs act randomly and never train")
    eval_episodes = _positive(spec["eval_episodes"], "eval_episodes") if "eval_episodes" in spec else None
    threads = _positive(spec["threads_per_run"], "threads_per_run") if "threads_per_run" in spec else None
    gpus = spec.get("gpus_per_run", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not math.isfinite(gpus) or gpus < 0:
        raise ExperimentError(f"gpus_per_run: expected a number >= 0 (a share of one GPU, e.g. 0.25), got {gpus!r}")
    device = spec.get("device")
    if device is not None and not (isinstance(device, str) and re.fullmatch(r"cpu|cuda(:\d+)?", device)):
        raise ExperimentError(f"device: expected cpu, cuda or cuda:N, got {device!r}")
    common = _flags(spec.get("flags"), "flags")

    raw_settings = spec["settings"]
    if not isinstance(raw_settings, dict) or not raw_settings:
        raise ExperimentError("settings: expected a mapping of setting names to {results_dir: ..., flags: {...}}")
    settings: dict[str, tuple[str, dict[str, Any]]] = {}
    folders: dict[str, str] = {}
    for name, body in raw_settings.items():
        where = f"settings.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ExperimentError(f"settings: {name!r} is not a usable name (letters, digits, _ . -)")
        if not isinstance(body, dict):
            raise ExperimentError(f"{where}: expected a mapping with results_dir (and optionally flags)")
        unknown = sorted(str(k) for k in body if k not in SETTING_KEYS)
        if unknown:
            raise ExperimentError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                                  f"{', '.join(sorted(SETTING_KEYS))}")
        results_dir = body.get("results_dir")
        if not isinstance(results_dir, str) or not results_dir.strip():
            raise ExperimentError(f"{where}: needs a results_dir (a folder name)")
        key = os.path.normpath(ROOT / results_dir)
        if key in folders:
            raise ExperimentError(f"{where}: results_dir {results_dir!r} is also setting {folders[key]!r}'s; "
                                  "the runs would overwrite each other: give each setting its own folder")
        folders[key] = name
        blocked = next((p for p in [Path(key), *Path(key).parents] if p.exists()), None)
        if blocked is not None and not blocked.is_dir():
            raise ExperimentError(f"{where}: results_dir {results_dir!r}: {blocked} is a file, not a folder")
        settings[name] = (results_dir, {**common, **_flags(body.get("flags"), f"{where}.flags")})
    return Experiment(path=path, envs=envs, policies=policies, seeds=seeds, settings=settings, steps=steps,
                      start_steps=start_steps, eval_freq=eval_freq, eval_episodes=eval_episodes,
                      threads_per_run=threads, gpus_per_run=float(gpus), device=device, notices=notices)


def expand(exp: Experiment, threads: int | None) -> list[Run]:
    """One Run per (setting, environment, policy), each training all seeds in one process."""
    runs = []
    for setting, (base_dir, flags) in exp.settings.items():
        for env in exp.envs:
            for policy in exp.policies:
                script = POLICY_SCRIPT[policy]
                multi = is_multi_agent(policy)
                if "num_agents" in flags:
                    num_agents = _positive(flags["num_agents"], f"settings.{setting}: --num_agents")
                    if not multi and num_agents != 1:
                        raise ExperimentError(f"settings.{setting}: --num_agents {num_agents} does not apply to "
                                              f"{policy}, a single agent; use DASE_{policy} or DPD_{policy}")
                else:
                    num_agents = default_num_agents(policy)
                algo = policy.split("_")[-1]
                results_dir = (Path(base_dir) / algo / env).as_posix()
                steps_flag, start_flag = STEP_FLAGS[script]
                args = ["--policy", policy, "--env", env, "--seeds", *seed_tokens(exp.seeds),
                        "--results_dir", results_dir, steps_flag, str(exp.steps), start_flag, str(exp.start_steps),
                        "--eval_freq", str(exp.eval_freq)]
                if exp.eval_episodes is not None:
                    args += ["--eval_episodes", str(exp.eval_episodes)]
                if threads is not None:
                    args += ["--threads", str(threads)]
                if exp.device is not None:
                    args += ["--device", exp.device]
                args += ["--quiet", "--resume", *flag_args(flags)]
                checkpoint_dir = flags.get("checkpoint_dir")
                runs.append(Run(setting=setting, policy=policy, env=env, seeds=tuple(exp.seeds),
                                results_dir=results_dir, script=script, args=tuple(args), num_agents=num_agents,
                                steps=exp.steps, eval_freq=exp.eval_freq, variant=variant_of(flags),
                                checkpoint_dir=str(checkpoint_dir) if checkpoint_dir is not None else None))
    return runs


def check_flags(runs: Sequence[Run]) -> None:
    """Parse every run's flags with its script's own parser, so a typo stops the sweep before it starts."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    parsers: dict[str, Callable] = {}
    for run in runs:
        if run.script not in parsers:
            parsers[run.script] = importlib.import_module(Path(run.script).stem).parse
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                parsers[run.script](list(run.args))
        except SystemExit as e:
            if e.code not in (0, None):
                message = " ".join(err.getvalue().split()) or f"its parser exited with {e.code}"
                raise ExperimentError(f"settings.{run.setting}, {run.policy}: {message}") from None


# ---- state of runs on disk ---------------------------------------------------------------------------
def files_complete(expected: Sequence[tuple[str, int | None]]) -> bool:
    """True when every JSON record exists and every curve exists with its full length."""
    import numpy as np

    for path, length in expected:
        if not os.path.isfile(path):
            return False
        if length is None:
            continue
        try:
            curve = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception:  # a damaged file is an unfinished run; the CLI rewrites it
            return False
        if curve.shape != (length,):
            return False
    return True


def run_state(run: Run, root: Path = ROOT) -> str:
    """'finished', 'would resume' (a checkpoint exists) or 'would run'."""
    if files_complete(run.expected_files(root)):
        return "finished"
    if any(p.exists() for p in run.checkpoint_paths(root)):
        return "would resume"
    return "would run"


# ---- executing runs ----------------------------------------------------------------------------------
def _command_runner() -> Callable[..., tuple[int | None, float, bool]]:
    """The function that executes one run; built in a closure so Ray ships it by value to any worker."""

    def execute(argv: list[str], root: str, log_path: str, expected: list, register=None,
                stop_flag=None) -> tuple[int | None, float, bool]:
        """Run `python argv` in root, output appended to log_path; (exit code, seconds, files complete).

        register(proc) is called with the process once started (the local pool forwards signals to it);
        stop_flag is a Ray actor polled while the run goes on: once it holds a signal number the run gets
        SIGTERM, and a run not started yet does not start (exit code None). SIGTERM, not SIGINT: the
        command lines treat both alike (checkpoint, stop), but a process inherits its parent thread's
        blocked signals, and Ray's task threads block SIGINT, so a run started there never sees one.
        """
        import os
        import shlex
        import signal
        import socket
        import subprocess
        import sys
        import time

        import numpy as np

        def stop_requested() -> int:
            if stop_flag is None:
                return 0
            import ray

            return ray.get(stop_flag.get.remote())

        if stop_requested():
            return None, 0.0, False
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        with open(log_path, "a") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} on {socket.gethostname()}: "
                      f"{shlex.join(['python', *argv])}\n")
            log.flush()
            start = time.monotonic()
            # its own session: a Ctrl-C in the terminal reaches the sweep only, which passes it on once
            proc = subprocess.Popen([sys.executable, *argv], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            if register is not None:
                register(proc)
            try:
                passed_on = False
                while True:
                    try:
                        code = proc.wait(timeout=2.0 if stop_flag is not None else None)
                        break
                    except subprocess.TimeoutExpired:
                        if not passed_on and stop_requested():
                            proc.send_signal(signal.SIGTERM)  # the run checkpoints and stops
                            passed_on = True
            except KeyboardInterrupt:  # a Ray task cancelled from outside
                proc.send_signal(signal.SIGTERM)
                code = proc.wait()
            wall = time.monotonic() - start
        complete = True
        for path, length in expected:
            try:
                ok = os.path.isfile(path) and (length is None or
                                               np.load(path, mmap_mode="r", allow_pickle=False).shape == (length,))
            except Exception:
                ok = False
            complete = complete and ok
        return code, wall, complete

    return execute


def classify(run: Run, code: int | None, wall: float, complete: bool, stopping: bool, root: Path = ROOT) -> Result:
    """Turn an exit code into a Result: done only when the process succeeded and left every file."""
    if code is None:
        return Result(run, "not started", note="the sweep was interrupted")
    log = display_path(run.log_path(root))
    if code == 0 and complete:
        return Result(run, "done", code, wall)
    if stopping and code in (130, 143, -signal.SIGINT, -signal.SIGTERM):  # stopped as asked, checkpointed
        return Result(run, "interrupted", code, wall, f"exit {code}, log: {log}; rerun the sweep to continue")
    if code == 0:
        return Result(run, "failed", code, wall, f"exit 0 but its curves are incomplete, log: {log}")
    why = f"exit {code}"
    if code < 0:
        with contextlib.suppress(ValueError):
            why = f"killed by {signal.Signals(-code).name}"
    return Result(run, "failed", code, wall, f"{why}, log: {log}")


def display_path(path: Path) -> str:
    """A path relative to the current folder when it lies inside it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


class LocalPool:
    """At most `workers` runs at once, each a subprocess; on SIGINT/SIGTERM the runs get SIGTERM."""

    def __init__(self, workers: int, root: Path = ROOT):
        self.workers, self.root = workers, root
        self.execute = _command_runner()
        self._lock = threading.Lock()
        self._procs: set = set()
        self.stop_signal: int | None = None

    def _run(self, run: Run) -> Result:
        with self._lock:
            if self.stop_signal is not None:
                return Result(run, "not started", note="the sweep was interrupted")
        started: list = []

        def register(proc) -> None:
            with self._lock:
                self._procs.add(proc)
                started.append(proc)
                stop = self.stop_signal
            if stop is not None:  # stop() came between our check and Popen: pass the signal on now
                proc.send_signal(signal.SIGTERM)

        code, wall, complete = self.execute(run.argv, str(self.root), str(run.log_path(self.root)),
                                            run.expected_files(self.root), register)
        with self._lock:
            self._procs.difference_update(started)
        return classify(run, code, wall, complete, self.stop_signal is not None, self.root)

    def stop(self, signum: int) -> None:
        """Start no further run and send SIGTERM to the running ones (they checkpoint and exit).

        SIGTERM whatever arrived: the command lines treat SIGINT and SIGTERM alike, and SIGINT may be
        blocked in a mask the runs inherited (e.g. when the sweep itself runs inside a Ray task).
        """
        with self._lock:
            first = self.stop_signal is None
            self.stop_signal = self.stop_signal or signum
            procs = list(self._procs) if first else []
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    def run_all(self, runs: Sequence[Run], report: Callable[[Result], None]) -> list[Result]:
        """Execute runs in order of submission, reporting each as it ends; returns results in input order."""
        results: dict[int, Result] = {}
        with _forward_signals(self.stop), concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            futures = {pool.submit(self._run, run): i for i, run in enumerate(runs)}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                report(results[futures[future]])
        return [results[i] for i in range(len(runs))]


@contextlib.contextmanager
def _forward_signals(handler: Callable[[int], None]):
    """Route SIGINT and SIGTERM to handler(signum) while inside (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: handler(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_ray(runs: Sequence[Run], address: str | None, cpus: int, gpus: float, max_in_flight: int | None,
            report: Callable[[Result], None], root: Path = ROOT) -> tuple[list[Result], int | None]:
    """Execute runs as Ray tasks (num_cpus=cpus, num_gpus=gpus each); returns results and the stop signal."""
    import ray

    started_here = False
    if not ray.is_initialized():
        if address is None:
            ray.init(include_dashboard=False)
        else:
            ray.init(address=address)
        started_here = True
    task = ray.remote(_command_runner()).options(num_cpus=cpus, num_gpus=gpus)

    # Ray's own cancellation reaches a task only between Python bytecodes, not while it waits for its
    # process; so the tasks poll this flag instead and pass the signal on to their runs themselves
    class StopFlag:
        def __init__(self):
            self.signum = 0

        def set(self, signum: int) -> None:
            self.signum = self.signum or signum

        def get(self) -> int:
            return self.signum

    flag = ray.remote(num_cpus=0)(StopFlag).remote()
    results: dict[int, Result] = {}
    pending: dict[Any, int] = {}
    queue = list(enumerate(runs))
    stop: list[int] = []  # the signals received; the handler only records them, the loop acts on them
    flagged = False

    try:
        with _forward_signals(lambda signum: stop.append(signum)):
            while queue or pending:
                if stop and not flagged:
                    ray.get(flag.set.remote(stop[0]))
                    flagged = True
                while queue and not stop and (max_in_flight is None or len(pending) < max_in_flight):
                    i, run = queue.pop(0)
                    ref = task.remote(run.argv, str(root), str(run.log_path(root)), run.expected_files(root),
                                      None, flag)
                    pending[ref] = i
                if not pending:
                    break
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    i = pending.pop(ref)
                    run = runs[i]
                    try:
                        code, wall, complete = ray.get(ref)
                        results[i] = classify(run, code, wall, complete, bool(stop), root)
                    except ray.exceptions.RayError as e:  # a lost node or worker, a task cancelled from outside
                        results[i] = Result(run, "failed", note=f"Ray: {type(e).__name__}: "
                                            f"{(str(e).splitlines() or [''])[0]}; log: "
                                            f"{display_path(run.log_path(root))}")
                    report(results[i])
    finally:
        if started_here:
            ray.shutdown()
    for i, run in queue:
        results[i] = Result(run, "not started", note="the sweep was interrupted")
    return [results[i] for i in range(len(runs))], (stop[0] if stop else None)


# ---- output ------------------------------------------------------------------------------------------
def plural(n: int, word: str = "run") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_wall(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def summary(results: Sequence[Result]) -> str:
    """The table printed at the end: run, status (with exit code and log for failures), wall time."""
    rows = [("run", "status", "wall")]
    for r in results:
        status = f"{r.status} ({r.note})" if r.note else r.status
        rows.append((r.run.label, status, format_wall(r.wall) if r.status not in ("skipped", "not started") else "-"))
    width = [max(len(row[k]) for row in rows) for k in range(2)]
    lines = [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    lines.insert(1, "-" * len(max(lines, key=len)))
    counts = {s: sum(r.status == s for r in results) for s in ("done", "skipped", "failed", "interrupted",
                                                                "not started")}
    lines.append(f"{plural(len(results))}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in
                                                      ("done", "skipped", "failed")))
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The sweep's own flags."""
    p = Parser(prog="python -m utils.sweep", description="Run the grid of an experiment file (experiments/*.yaml): "
                "one process per (setting, environment, policy) training all seeds, finished runs skipped, "
                "interrupted ones resumed.")
    p.add_argument("experiment", nargs="?", help="the experiment file (YAML)")
    p.add_argument("--dry_run", action="store_true", help="print each run's command and state; start nothing")
    p.add_argument("--workers", type=int, default=None,
                   help="runs at once (default: cores // threads_per_run); with --ray, a cap on tasks in flight")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run as Ray tasks: a new local Ray instance, or join ADDRESS ('auto', HOST:PORT, "
                        "ray://HOST:PORT)")
    args = p.parse_args(argv)
    # "--ray exp.yaml" takes the file as the address: accept it when it is plainly a file name
    if args.experiment is None and args.ray and args.ray.endswith((".yaml", ".yml")):
        args.experiment, args.ray = args.ray, "local"
    if args.experiment is None:
        p.error("the experiment file is required")
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be a positive integer, got {args.workers}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code."""
    args = parse_args(argv)
    name = args.experiment
    try:
        exp = load_experiment(name)
        if args.ray:
            # Ray tasks reserve num_cpus each, so a run's threads must be a whole number known up front
            threads: int | None = exp.threads_per_run or 1
            workers = args.workers
        else:
            workers = args.workers or max(1, available_cores() // (exp.threads_per_run or 1))
            threads = exp.threads_per_run or (1 if workers > 1 else None)
        runs = expand(exp, threads)
        check_flags(runs)
    except ExperimentError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.ray and not args.dry_run:
        try:
            importlib.import_module("ray")  # optional: only --ray needs it
        except ImportError:
            print(RAY_HINT, file=sys.stderr)
            return EXIT_USAGE
    for notice in exp.notices:
        print(notice, file=sys.stderr)

    states = [run_state(run) for run in runs]
    if args.dry_run:
        width = max(len(s) for s in states)
        for run, state in zip(runs, states):
            print(f"{state:<{width}}  {run.command_line()}")
        todo = sum(s != "finished" for s in states)
        print(f"{plural(len(runs))}: {todo} to run, {len(runs) - todo} finished")
        return 0
    todo = [run for run, state in zip(runs, states) if state != "finished"]
    skipped = {id(run) for run, state in zip(runs, states) if state == "finished"}
    backend = f"Ray ({args.ray})" if args.ray else f"{workers} worker(s)"
    per_run = f"{threads} thread(s)" if threads else "all cores"
    print(f"{name}: {plural(len(runs))}, {len(runs) - len(todo)} finished (skipped), {len(todo)} to run on {backend}, "
          f"{per_run} each", flush=True)
    counter = iter(range(1, len(todo) + 1))

    def report(result: Result) -> None:
        extra = f" ({result.note})" if result.note else ""
        print(f"[{next(counter)}/{len(todo)}] {result.status}{extra}: {result.run.label} "
              f"in {format_wall(result.wall)}", flush=True)

    stop_signal: int | None = None
    if not todo:
        executed: list[Result] = []
    elif args.ray:
        try:
            executed, stop_signal = run_ray(todo, None if args.ray == "local" else args.ray, threads or 1,
                                            exp.gpus_per_run, args.workers, report)
        except ConnectionError as e:
            print(f"cannot reach the Ray cluster at {args.ray}: {e}", file=sys.stderr)
            return EXIT_USAGE
    else:
        pool = LocalPool(workers)
        executed = pool.run_all(todo, report)
        stop_signal = pool.stop_signal
    by_run = {id(r.run): r for r in executed}
    results = [Result(run, "skipped") if id(run) in skipped else by_run[id(run)] for run in runs]
    print(summary(results), flush=True)
    if stop_signal is not None:
        return 128 + stop_signal
    return EXIT_FAILED if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
