"""A run's files: curves, JSON record, checkpoint, models and lock, and the policy for existing ones.

One ``RunFiles`` per seed: several seeds in one process write exactly the files of each seed run alone.
"""
from __future__ import annotations

import importlib.metadata
import json
import pickle
import platform
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ..errors import UsageError
from ..io import atomic_write, save_curve, save_json, save_torch
from ..naming import (
    CONSENSUS_SUFFIX,
    EPISODE_EVAL_SUFFIX,
    EPISODES_SUFFIX,
    GOSSIP_SUFFIX,
    INTRINSIC_SUFFIX,
    SIAMESE_SUFFIX,
    TASKS_SUFFIX,
    WEIGHTS_SUFFIX,
)
from .checkpoint import RunLock
from .config import RunConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OWNER_KEY = "run"  # in a --save_model file: {"record": the run's JSON record (absolute path), "run_id": its id}


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels use here (AVX2, AVX512, ...): float32 results are bit-identical
    between two machines only when it is the same."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # torch before 2.1 has no such call
        return "unknown"


def cpu_model() -> str:
    """The processor's name as the system gives it (Linux: /proc/cpuinfo's first "model name"; elsewhere
    ``platform.processor()``), or "unknown". Two CPUs with the same instruction set may still round otherwise
    (oneDNN picks its kernels by the processor): an Intel Xeon and an AMD EPYC, both AVX-512, gave other curves
    from the same command (docs/reproducibility.md)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or "unknown"


def software_versions() -> dict:
    import gymnasium

    versions: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                "gymnasium": gymnasium.__version__}
    for mod, dist in (("mujoco", "mujoco"), ("Box2D", "box2d"), ("ale_py", "ale-py"), ("envpool", "envpool")):
        # the installed distribution's version: importing MuJoCo only to read it would cost 0.3 s per run
        try:
            versions[mod] = importlib.metadata.version(dist)
        except Exception:
            versions[mod] = None
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except Exception:
        return None


class RunFiles:
    """Paths and file policy of one seed's run (``cfg`` is that seed's config)."""

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.results = Path(cfg.results_dir)
        self.curves = [self.results / f"{name}.npy" for name in cfg.agent_names()]
        # DASE: per agent, the mean weight given to other agents' samples in each evaluation period
        self.weights = [self.results / f"{name}{WEIGHTS_SUFFIX}.npy" for name in cfg.agent_names()] if cfg.is_dase \
            else []
        # diffusion: per evaluation, the agents' parameter disagreement (Diff-DAC's consensus measure)
        self.consensus = [self.results / f"{cfg.stem}{CONSENSUS_SUFFIX}.npy"] if cfg.method.diffuses else []
        # --eval_tasks all: per agent, its score on every agent's task [evaluations x agents]; named whatever the
        # setting, so that starting over also removes those of an earlier run with "all"
        self.task_curves = [self.results / f"{name}{TASKS_SUFFIX}.npy" for name in cfg.agent_names()]
        # --sync_freq: per agent and evaluation period, [fraction of combines skipped, mean age of combined messages]
        self.gossip = [self.results / f"{name}{GOSSIP_SUFFIX}.npy" for name in cfg.agent_names()] \
            if cfg.sharing_settings().sync_freq else []
        # --curiosity / --rnd: per agent and evaluation period, [mean intrinsic bonus, mean loss of its models]
        self.intrinsic = [self.results / f"{name}{INTRINSIC_SUFFIX}.npy" for name in cfg.agent_names()] \
            if cfg.algo_settings().intrinsic else []
        # --siamese: per agent, the mean auxiliary loss of each evaluation period
        self.siamese = [self.results / f"{name}{SIAMESE_SUFFIX}.npy" for name in cfg.agent_names()] \
            if cfg.algo_settings().siamese else []
        # --episode_eval: per agent, [episode, step, return] of the evaluation episode after each training episode
        self.episode_evals = [self.results / f"{name}{EPISODE_EVAL_SUFFIX}.npy" for name in cfg.agent_names()]
        # the actor-critic family: per agent, a row per finished training episode (onpolicy/episode_log.py)
        self.episode_logs = [self.results / f"{name}{EPISODES_SUFFIX}.csv" for name in cfg.agent_names()]
        self.record = self.results / f"{cfg.stem}.json"
        self.checkpoint = cfg.checkpoint_path
        self.models = [Path(cfg.models_dir) / f"{name}.pt" for name in cfg.agent_names()]
        self.lock = RunLock(self.results / f".{cfg.stem}.lock")

    def existing(self) -> list[Path]:
        return [p for p in [*self.curves, *self.weights, *self.consensus, *self.task_curves, *self.gossip,
                            *self.intrinsic, *self.siamese, *self.episode_evals,
                            *self.episode_logs, self.record] if p.exists()]

    def remove_stale_temps(self) -> None:
        """Temporary files left by a write that was killed."""
        for folder in {self.results, self.checkpoint.parent, Path(self.cfg.models_dir)}:
            for tmp in folder.glob(f".{self.cfg.stem}*.tmp"):
                tmp.unlink()

    def clear(self) -> None:
        """Start over: remove the old curves, record and checkpoint."""
        for p in self.existing():
            p.unlink()
        if self.checkpoint.exists():
            self.checkpoint.unlink()

    def write_record(self, device: torch.device, t: int, seeds_in_process: list[int], env_workers: int = 0,
                     tasks: list[dict | None] | None = None) -> None:
        """The run's JSON record: every flag, versions, device, commit, command line, and each agent's task
        (``tasks``: its physical parameters, for task variants; None entries otherwise); a resumed run (``t`` > 0)
        adds itself to the list of every resume so far, ``resumes``: [{step, threads, cpu, cpu_model,
        flush_denormals, at}, ...]."""
        resumes = self.recorded("resumes", list, []) if t else []
        # who this run is: kept over resumes, so that its --save_model files can be told from another run's
        self.run_id = (self.recorded("run_id", str) if t else None) or uuid.uuid4().hex
        if t:
            resumes.append({"step": t, "threads": torch.get_num_threads(), "cpu": cpu_capability(),
                            "cpu_model": cpu_model(), "flush_denormals": self.cfg.flush_denormals,
                            "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
        record = {"config": asdict(self.cfg), "versions": software_versions(), "device": str(device),
                  "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else
                  f"{platform.machine()} {cpu_capability()}", "cpu_model": cpu_model(),
                  "git_commit": git_commit(), "command": sys.argv, "curves": [p.name for p in self.curves],
                  "torch_threads": torch.get_num_threads(), "seeds_in_process": seeds_in_process,
                  "env_workers_used": env_workers, "tasks": tasks if tasks is not None else [None] * len(self.curves),
                  "checkpoint": str(self.checkpoint) if self.cfg.checkpoint_freq else None,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "resumed_at_step": t or None, "resumes": resumes,
                  "run_id": self.run_id}
        save_json(self.record, record)

    def recorded(self, key: str, kind: type, default=None):
        """A field of the JSON record; ``default`` when the record is missing, damaged or older, or the field is not
        a ``kind``."""
        try:
            value = json.loads(self.record.read_text()).get(key, default)
        except (OSError, ValueError, AttributeError):
            return default
        return value if isinstance(value, kind) else default

    def owner(self) -> dict:
        """What a model file of this run says of its run: the record's absolute path and the run's id."""
        return {"record": str(self.record.resolve()), "run_id": getattr(self, "run_id", None) or self.recorded("run_id", str)}

    def save_curves(self, curves: list[list[float]]) -> None:
        for path, curve in zip(self.curves, curves):
            save_curve(path, curve)

    def save_weights(self, weights: list[list[float]]) -> None:
        for path, values in zip(self.weights, weights):
            save_curve(path, values)

    def save_gossip(self, rows: list[list[list[float]]]) -> None:
        """--sync_freq: per agent, float64 [evaluations, 2] (skipped fraction, mean message age; NaN at step 0)."""
        for path, values in zip(self.gossip, rows):
            save_curve(path, np.asarray(values, dtype=np.float64).reshape(len(values), 2))

    def save_intrinsic(self, rows: list[list[list[float]]]) -> None:
        """--curiosity / --rnd: per agent, float64 [evaluations, 2] (mean bonus, mean model loss; NaN at step 0)."""
        for path, values in zip(self.intrinsic, rows):
            save_curve(path, np.asarray(values, dtype=np.float64).reshape(len(values), 2))

    def save_siamese(self, values: list[list[float]]) -> None:
        """--siamese: per agent, float64 [evaluations] (the mean auxiliary loss; NaN at step 0)."""
        for path, v in zip(self.siamese, values):
            save_curve(path, v)

    def save_consensus(self, values: list[float]) -> None:
        for path in self.consensus:
            save_curve(path, values)

    def save_episode_evals(self, arrays: list[np.ndarray]) -> None:
        """--episode_eval: per agent, the rows [episode, step, return] so far (float64 [episodes, 3])."""
        for path, arr in zip(self.episode_evals, arrays):
            save_curve(path, arr)

    def save_episode_logs(self, texts: list[str]) -> None:
        """The actor-critic family: per agent, its training episodes so far as CSV."""
        for path, text in zip(self.episode_logs, texts):
            atomic_write(path, lambda f: f.write(text), mode="w")  # written before the next text

    def update_record(self, **fields) -> None:
        """Add ``fields`` to the JSON record (what happened during the run: when each agent was solved)."""
        try:
            record = json.loads(self.record.read_text())
        except (OSError, ValueError):
            return  # a record removed or damaged by hand: the curves still stand
        record.update(fields)
        save_json(self.record, record)

    def save_task_curves(self, task_curves: list[list[list[float]]]) -> None:
        """--eval_tasks all: per agent, [evaluations x agents] (float64; no evaluation yet: shape (0, agents))."""
        for path, rows in zip(self.task_curves, task_curves):
            arr = np.asarray(rows, dtype=np.float64).reshape(len(rows), self.cfg.task_count)
            save_curve(path, arr)

    def board(self, t: int) -> Board:
        """TensorBoard writer of this seed, continuing at step ``t`` (later events of an older try are dropped)."""
        return Board(self.results / "tensorboard" / self.cfg.stem, self.cfg.agent_names(), t)

    def save_models(self, states: list[dict]) -> None:
        owner = self.owner()
        for path, state in zip(self.models, states):
            save_torch(path, {**state, OWNER_KEY: owner})

    def save_checkpoint(self, state: dict) -> None:
        save_torch(self.checkpoint, state)

    def finish(self, step: int | None = None, **fields) -> None:
        """A finished run keeps no checkpoint (the curves say everything); its record says it finished (at ``step``
        when it stopped before its budget, with ``fields`` saying why)."""
        try:
            record = json.loads(self.record.read_text())
            # the checkpoint is deleted below: the record no longer names it
            record.update(finished_at_step=self.cfg.max_time_steps if step is None else step,
                          finished=time.strftime("%Y-%m-%dT%H:%M:%S"), checkpoint=None, **fields)
            save_json(self.record, record)
        except (OSError, ValueError):
            pass  # a record removed or damaged by hand: the curves still stand
        if self.checkpoint.exists():
            self.checkpoint.unlink()



def model_path(cfg: RunConfig, i: int, own: str) -> Path:
    """--load_model NAME: agent i's file, models/NAME_Agent_i.pt or else models/NAME.pt ("default": the run's own
    name ``own``); a UsageError when there is none."""
    candidates = [own] if cfg.load_model == "default" else [f"{cfg.load_model}_Agent_{i}", cfg.load_model]
    paths = [Path(cfg.models_dir) / f"{c}.pt" for c in candidates]
    path = next((p for p in paths if p.is_file()), None)
    if path is None:
        raise UsageError(f"--load_model: no model file {paths[0]} (save one with --save_model, or check --models_dir)")
    return path


def load_error(e: Exception, path: Path, cfg: RunConfig, flag: str | None = "--load_model") -> UsageError:
    """A model file that does not load, in one line (torch's message may run to several lines and advise
    weights_only=False: never), begun with the ``flag`` that named it (None: a tool's own reading, no flag)."""
    why = "not a model file of this program" if isinstance(e, (pickle.UnpicklingError, EOFError)) \
        else str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return UsageError(f"{flag + ': ' if flag else ''}cannot load {path} into {cfg.policy} on {cfg.env} ({why})")


def unreadable_model(e: Exception, path: Path, flag: str | None = "--load_model") -> UsageError:
    """A model file torch cannot read at all (cut short, say by a full disk or a copy, or never a model file), in
    one line."""
    return UsageError(f"{flag + ': ' if flag else ''}cannot read {path} ({type(e).__name__}): the file is damaged "
                      "(cut short?) or not a model file of this program")


class Board:
    """--tensorboard: per agent, returns, mean losses and mean weight of shared samples per evaluation period,
    and the training speed, at the evaluation's step."""

    def __init__(self, folder: Path, agents: list[str], t: int):
        from torch.utils.tensorboard import SummaryWriter  # checked by validate()

        self.agents = ["agent_0"] if len(agents) == 1 else [f"agent_{i}" for i in range(len(agents))]
        self.writer = SummaryWriter(str(folder), purge_step=t or None)

    def log(self, t: int, returns, period: dict, steps_per_s: float) -> None:
        for i, agent in enumerate(self.agents):
            self.writer.add_scalar(f"{agent}/return", float(returns[i]), t)
            for name, values in period.items():
                if np.isfinite(values[i]):  # no updates (or no shared samples) in the period: nothing to show
                    self.writer.add_scalar(f"{agent}/{name}", float(values[i]), t)
        if t > 0:
            self.writer.add_scalar("steps_per_s", steps_per_s, t)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
