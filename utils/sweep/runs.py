"""An experiment expanded into runs (one process per setting, environment and policy), and their state on disk."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..naming import (
    algorithm_of,
    curve_length,
    curve_names,
    default_num_agents,
    flag_name,
    is_multi_agent,
    method_of,
    run_stem,
    script_of,
    with_diffusion,
)
from .execute import files_complete
from .experiment import ROOT, Experiment, ExperimentError, flag_args, positive, seed_tokens

LOG_SEEDS_BYTES = 96  # the seeds' part of a log file name; policy, environment and variant stay well under 255 with it


@dataclass(frozen=True)
class Run:
    """One process of the sweep: one policy on one environment in one setting, all its seeds (or seeds_per_run of
    them)."""

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
        """{stem}.log with the seeds as --seeds tokens ("0-4"); a seed list too long for a file name (many
        non-consecutive seeds) becomes its first and last seed, its count and a hash of the whole list."""
        seeds = "_".join(seed_tokens(self.seeds))
        if len(seeds.encode()) > LOG_SEEDS_BYTES:
            digest = hashlib.sha256(seeds.encode()).hexdigest()[:10]
            seeds = f"{min(self.seeds)}-{max(self.seeds)}_{len(self.seeds)}seeds_{digest}"
        return self.folder(root) / "logs" / f"{run_stem(self.policy, self.env, seeds, self.variant)}.log"

    variant: str = ""  # naming.VARIANTS: part of every file name of the run
    until: int | None = None  # the sweep's --until: the run pauses at this step (--stop_at), checkpointed

    def paused_at(self, until: int) -> Run:
        """This run told to pause at step ``until`` (--stop_at), unless its budget ends there or before."""
        if until >= self.steps:
            return self
        return replace(self, args=(*self.args, "--stop_at", str(until)), until=until)

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


def expand(exp: Experiment, threads: int | None) -> list[Run]:
    """One Run per (setting, environment, policy), each training all seeds in one process; with ``seeds_per_run`` K,
    one Run per K of them (in order)."""
    per_run = exp.seeds_per_run or len(exp.seeds)
    batches = [tuple(exp.seeds[i:i + per_run]) for i in range(0, len(exp.seeds), per_run)]
    runs = []
    for setting, (base_dir, flags) in exp.settings.items():
        for env in exp.envs:
            for policy in exp.policies_of(setting):
                script = script_of(policy)
                if flags.get("diffusion"):  # as the command lines fold --diffusion into the policy
                    policy = with_diffusion(policy) or policy
                multi = is_multi_agent(policy)
                if "num_agents" in flags:
                    num_agents = positive(flags["num_agents"], f"settings.{setting}: --num_agents")
                    if not multi and num_agents != 1:
                        raise ExperimentError(f"settings.{setting}: --num_agents {num_agents} does not apply to "
                                              f"{policy}, a single agent; use DASE_{policy} or DPD_{policy}")
                else:
                    num_agents = default_num_agents(policy)
                algo = algorithm_of(policy)
                results_dir = (Path(base_dir) / algo / env).as_posix()
                steps_flag, start_flag = flag_name(script, "max_time_steps"), flag_name(script, "start_time_steps")
                variant, checkpoint_dir = sweep_variant(policy, flags), flags.get("checkpoint_dir")
                for seeds in batches:
                    args = ["--policy", policy, "--env", env, "--seeds", *seed_tokens(seeds),
                            "--results_dir", results_dir, steps_flag, str(exp.steps_of(setting)), start_flag,
                            str(exp.start_steps), "--eval_freq", str(exp.eval_freq)]
                    if exp.eval_episodes is not None:
                        args += ["--eval_episodes", str(exp.eval_episodes)]
                    if threads is not None:
                        args += ["--threads", str(threads)]
                    if exp.device is not None:
                        args += ["--device", exp.device]
                    args += ["--quiet", "--resume", *flag_args(flags)]
                    runs.append(Run(setting=setting, policy=policy, env=env, seeds=seeds,
                                    results_dir=results_dir, script=script, args=tuple(args), num_agents=num_agents,
                                    steps=exp.steps_of(setting), eval_freq=exp.eval_freq, variant=variant,
                                    checkpoint_dir=str(checkpoint_dir) if checkpoint_dir is not None else None))
    return runs


def joined(runs: list[Run]) -> Run:
    """The runs of one setting, policy and environment split by seeds_per_run, as the one run that would train all
    their seeds in one process (its files are theirs: a seed's curves do not depend on the seeds beside it)."""
    first = runs[0]
    if len(runs) == 1:
        return first
    seeds = tuple(sorted(seed for run in runs for seed in run.seeds))
    at = first.args.index("--seeds") + 1
    end = at + len(seed_tokens(first.seeds))
    args = (*first.args[:at], *seed_tokens(seeds), *first.args[end:])
    return replace(first, seeds=seeds, args=args)


def sweep_variant(policy: str, flags: dict) -> str:
    """The variant the command line will give a run of ``policy`` with ``flags`` (a DIFF_ method's default graph
    included), so the sweep knows its files."""
    from ..cli import read_adjacency
    from ..run.names import variant_of

    settings = dict(flags)
    settings["adjacency"] = read_adjacency(str(flags["adjacency"])) if flags.get("adjacency") is not None else None
    method = method_of(policy)
    if method.diffuses and not settings.get("topology") and settings["adjacency"] is None:
        settings["topology"] = method.default_topology
    return variant_of(settings, policy)


def _load_script(path: Path, name: str):
    """An entry script (DASE_main.py, ...) as a module, without putting the repository on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_flags(runs: Sequence[Run]) -> None:
    """Check every run as its script would before it writes anything, so that no run of a file starts unless all of
    them can: its flags parsed by its script's own parser and made into settings by its own config builder, those
    checked (``utils.run.validate``: ranges, sizes, folders), and then against its environment's spaces
    (``utils.run.checks.check_environment``: a continuous-action algorithm on a discrete environment; each
    environment made once). The first run refused stops the sweep, naming the run and the reason."""
    from ..errors import UsageError
    from ..run import validate
    from ..run.checks import check_environment

    modules: dict[str, object] = {}
    for run in runs:
        if run.script not in modules:  # the entry script, loaded from the repository root wherever this runs
            name = Path(run.script).stem
            modules[run.script] = sys.modules.get(name) or _load_script(ROOT / run.script, name)
        module = modules[run.script]
        err = io.StringIO()
        where = f"settings.{run.setting}, {run.policy} on {run.env}"
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                args = module.parse(list(run.args))
                cfg = module.build_config(args)
                validate(cfg, getattr(module, "FLAG_NAMES", None))
                check_environment(cfg)
        except SystemExit as e:
            if e.code not in (0, None):
                message = " ".join(err.getvalue().split()) or f"its parser exited with {e.code}"
                raise ExperimentError(f"{where}: {message}") from None
        except UsageError as e:
            raise ExperimentError(f"{where}: {e}") from None


def run_progress(run: Run, root: Path = ROOT) -> int | None:
    """The step to which every unfinished seed of ``run`` has its curves (the least advanced seed; seeds whose record
    says they stopped early are done and left out), or None where a seed has no curve yet."""
    import json

    import numpy as np

    steps = []
    for stem in run.stems():
        try:
            if json.loads((run.folder(root) / f"{stem}.json").read_text()).get("stopped"):
                continue
        except (OSError, ValueError):
            pass
        for name in curve_names(stem, run.policy, run.num_agents):
            try:
                length = len(np.load(run.folder(root) / f"{name}.npy", mmap_mode="r", allow_pickle=False))
            except (OSError, ValueError):
                return None
            steps.append((length - 1) * run.eval_freq)
    return min(steps) if steps else None


def run_state(run: Run, root: Path = ROOT) -> str:
    """'finished', 'would resume' (a checkpoint exists) or 'would run'."""
    if files_complete(run.expected_files(root)):
        return "finished"
    if any(p.exists() for p in run.checkpoint_paths(root)):
        return "would resume"
    return "would run"
