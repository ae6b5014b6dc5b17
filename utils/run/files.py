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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from .checkpoint import RunLock, check_compatible, read_checkpoint
from ..errors import UsageError
from ..io import atomic_write, save_curve, save_json, save_torch
from ..naming import (CONSENSUS_SUFFIX, EPISODE_EVAL_SUFFIX, EPISODES_SUFFIX, GOSSIP_SUFFIX, TASKS_SUFFIX,
                      WEIGHTS_SUFFIX, curve_length)
from .config import RunConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OWNER_KEY = "run"  # in a --save_model file: {"record": the run's JSON record (absolute path), "run_id": its id}


def model_owner(path: Path) -> dict | None:
    """The run a --save_model file says it belongs to; None when it does not say (older files) or cannot be read."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return None
    owner = saved.get(OWNER_KEY) if isinstance(saved, dict) else None
    return owner if isinstance(owner, dict) else None


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels use here (AVX2, AVX512, ...): float32 results are bit-identical
    between two machines only when it is the same."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except AttributeError:  # torch before 2.1 has no such call
        return "unknown"


def software_versions() -> dict:
    import gymnasium

    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                "gymnasium": gymnasium.__version__}
    for mod, dist in (("mujoco", "mujoco"), ("Box2D", "box2d")):
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
            if cfg.sharing.get("sync_freq") else []
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
                            *self.episode_evals,
                            *self.episode_logs, self.record] if p.exists()]

    def remove_stale_temps(self) -> None:
        """Temporary files left by a write that was killed."""
        for folder in {self.results, self.checkpoint.parent, Path(self.cfg.models_dir)}:
            for tmp in folder.glob(f".{self.cfg.stem}*.tmp"):
                tmp.unlink()

    def finished_curves(self) -> list[list[float]] | None:
        """The saved curves when this exact run already finished (all evaluations present), else None."""
        cfg = self.cfg
        if not self.record.exists() or not all(p.exists() for p in self.curves):
            return None
        try:
            record = json.loads(self.record.read_text())
            saved = record["config"]
            curves = [np.load(p, allow_pickle=False) for p in self.curves]
        except Exception:
            return None
        # a run that stopped before its budget (--solved_at, --max_episodes) finished where its record says
        end = record.get("finished_at_step") if record.get("stopped") else cfg.max_time_steps
        if not isinstance(end, int) or end > cfg.max_time_steps:
            return None
        expected = curve_length(end, cfg.eval_freq)
        if any(c.shape != (expected,) for c in curves):
            return None
        if cfg.eval_tasks == "all":
            try:
                shapes = [np.load(p, allow_pickle=False).shape for p in self.task_curves]
            except Exception:
                return None
            if any(s != (expected, cfg.task_count) for s in shapes):
                return None
        check_compatible(saved, asdict(cfg), self.record)
        return [c.tolist() for c in curves]

    def plan(self) -> tuple[str, object]:
        """What to do with this seed, deciding without writing: ("checkpoint", state), ("finished", curves)
        or ("fresh", None). Raises UsageError when the files forbid the run."""
        cfg = self.cfg
        foreign = self.foreign_model()
        if foreign:  # never replace a model another run saved
            raise UsageError(foreign)
        if cfg.resume and self.checkpoint.exists():
            state = read_checkpoint(self.checkpoint)
            check_compatible(state["config"], asdict(cfg), self.checkpoint)
            if state["t"] > cfg.max_time_steps:
                raise UsageError(f"checkpoint {self.checkpoint} is at step {state['t']}, beyond the requested "
                                 f"budget of {cfg.max_time_steps}; raise the budget or use --overwrite")
            return "checkpoint", state
        exists = self.existing()
        if cfg.resume and exists and (done := self.finished_curves()) is not None:
            return "finished", done
        budget = self.finished_budget() if cfg.resume and exists else None
        if budget is not None and budget != cfg.max_time_steps:
            # its checkpoint went with its finish: it cannot go on, and starting over would replace it unasked
            # (with the same budget and a curve file missing, starting over restores the same files)
            raise UsageError(f"{self.record.with_suffix('').name} finished at {budget} steps and this run asks for "
                             f"{cfg.max_time_steps}; a finished run cannot continue: --overwrite starts it over, "
                             "or pick another --results_dir")
        if exists and not (cfg.resume or cfg.overwrite):
            raise UsageError(f"{exists[0]} already exists: add --resume to continue that run, --overwrite to "
                             "start it over, or pick another --seed or --results_dir")
        return "fresh", None

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
        adds itself to the list of every resume so far, ``resumes``: [{step, threads, at}, ...]."""
        resumes = self.resumes() if t else []
        # who this run is: kept over resumes, so that its --save_model files can be told from another run's
        self.run_id = (self.recorded_id() if t else None) or uuid.uuid4().hex
        if t:
            resumes.append({"step": t, "threads": torch.get_num_threads(), "cpu": cpu_capability(),
                            "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
        record = {"config": asdict(self.cfg), "versions": software_versions(), "device": str(device),
                  "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else
                  f"{platform.machine()} {cpu_capability()}",
                  "git_commit": git_commit(), "command": sys.argv, "curves": [p.name for p in self.curves],
                  "torch_threads": torch.get_num_threads(), "seeds_in_process": seeds_in_process,
                  "env_workers_used": env_workers, "tasks": tasks if tasks is not None else [None] * len(self.curves),
                  "checkpoint": str(self.checkpoint) if self.cfg.checkpoint_freq else None,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "resumed_at_step": t or None, "resumes": resumes,
                  "run_id": self.run_id}
        save_json(self.record, record)

    def recorded_id(self) -> str | None:
        """The run id the record holds (None for a record that is missing, damaged or older than run ids)."""
        try:
            run_id = json.loads(self.record.read_text()).get("run_id")
        except (OSError, ValueError, AttributeError):
            return None
        return run_id if isinstance(run_id, str) else None

    def owner(self) -> dict:
        """What a model file of this run says of its run: the record's absolute path and the run's id."""
        return {"record": str(self.record.resolve()), "run_id": getattr(self, "run_id", None) or self.recorded_id()}

    def foreign_model(self) -> str | None:
        """With --save_model: why a model file in the way belongs to another run (it would be replaced), or None.
        A file is this run's when it names this run's record or the id that record holds."""
        if not self.cfg.save_model:
            return None
        mine = {"record": str(self.record.resolve()), "run_id": self.recorded_id()}
        for path in self.models:
            if not path.exists():
                continue
            owner = model_owner(path)
            if owner is not None and (owner.get("record") == mine["record"]
                                      or (mine["run_id"] is not None and owner.get("run_id") == mine["run_id"])):
                continue
            whose = f"the run recorded in {owner['record']}" if owner and owner.get("record") else "another run"
            return (f"--save_model: {path} holds the model of {whose}, which this run would replace; pick another "
                    "--models_dir, or move that file away")
        return None

    def resumes(self) -> list[dict]:
        """The resumes the record lists so far (none for a record that is missing, damaged or older)."""
        try:
            resumes = json.loads(self.record.read_text()).get("resumes", [])
        except (OSError, ValueError, AttributeError):
            return []
        return resumes if isinstance(resumes, list) else []

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
            atomic_write(path, lambda f, text=text: f.write(text), mode="w")

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

    def board(self, t: int) -> "Board":
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

    def finished_budget(self) -> int | None:
        """The step budget this run's record says it finished, or None (still running, killed, or older)."""
        try:
            return json.loads(self.record.read_text()).get("finished_at_step")
        except (OSError, ValueError):
            return None


def model_path(cfg: RunConfig, i: int, own: str) -> Path:
    """--load_model NAME: agent i's file, models/NAME_Agent_i.pt or else models/NAME.pt ("default": the run's own
    name ``own``); a UsageError when there is none."""
    candidates = [own] if cfg.load_model == "default" else [f"{cfg.load_model}_Agent_{i}", cfg.load_model]
    paths = [Path(cfg.models_dir) / f"{c}.pt" for c in candidates]
    path = next((p for p in paths if p.is_file()), None)
    if path is None:
        raise UsageError(f"--load_model: no model file {paths[0]} (save one with --save_model, or check --models_dir)")
    return path


def load_error(e: Exception, path: Path, cfg: RunConfig) -> UsageError:
    """A model file that does not load, in one line (torch's message may run to several lines and advise
    weights_only=False: never)."""
    why = "not a model file of this program" if isinstance(e, (pickle.UnpicklingError, EOFError)) \
        else str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return UsageError(f"--load_model: cannot load {path} into {cfg.policy} on {cfg.env} ({why})")


def check_models(cfg: RunConfig) -> None:
    """--save_model: refuse, before anything is created, a run that would replace a model file another run saved
    (same policy, environment and seed, another results folder)."""
    for seed in cfg.seed_list():
        foreign = RunFiles(cfg.for_seed(seed)).foreign_model()
        if foreign:
            raise UsageError(foreign)


@dataclass
class ResumePlan:
    """Every seed's fate, decided before anything is written: already finished (its curves), continued from its
    checkpoint (its state; all at one step), or started from step 0."""

    finished: dict[int, list[list[float]]]
    states: dict[int, dict]
    fresh: list[int]
    active: list[int]  # the seeds to train, in the order given


def plan_resume(seeds: list[int], files: list["RunFiles"]) -> ResumePlan:
    """Each seed's plan (``RunFiles.plan``); a UsageError when the seeds to continue are at different steps."""
    for f in files:
        f.remove_stale_temps()
    plans = dict(zip(seeds, (f.plan() for f in files)))
    finished = {s: plan for s, (kind, plan) in plans.items() if kind == "finished"}
    states = {s: plan for s, (kind, plan) in plans.items() if kind == "checkpoint"}
    active = [s for s in seeds if s not in finished]
    at = {s: int(states[s]["t"]) if s in states else 0 for s in active}
    if len(set(at.values())) > 1:
        where = ", ".join(f"seed {s} at step {t}" for s, t in at.items())
        raise UsageError(f"--seeds: the runs to continue are at different steps ({where}); resume them in "
                         "separate commands (--seed S --resume) or start them over with --overwrite")
    return ResumePlan(finished, states, [s for s in active if s not in states], active)


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
