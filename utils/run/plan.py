"""What to do with a run's existing files, decided before anything is written: each seed finished (its curves),
continued from its checkpoint, or started from step 0, or refused (a model file of another run in the way, a
finished run asked to go on, files that --resume or --overwrite would have to name).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import UsageError
from ..naming import curve_length
from .checkpoint import check_compatible, read_checkpoint
from .config import RunConfig
from .files import OWNER_KEY, RunFiles


def model_owner(path: Path) -> dict | None:
    """The run a --save_model file says it belongs to; None when it does not say (older files) or cannot be read."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return None
    owner = saved.get(OWNER_KEY) if isinstance(saved, dict) else None
    return owner if isinstance(owner, dict) else None


def finished_curves(files: RunFiles) -> list[list[float]] | None:
    """The saved curves when this exact run already finished (all evaluations present), else None."""
    cfg = files.cfg
    if not files.record.exists() or not all(p.exists() for p in files.curves):
        return None
    try:
        record = json.loads(files.record.read_text())
        saved = record["config"]
        curves = [np.load(p, allow_pickle=False) for p in files.curves]
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
            shapes = [np.load(p, allow_pickle=False).shape for p in files.task_curves]
        except Exception:
            return None
        if any(s != (expected, cfg.task_count) for s in shapes):
            return None
    check_compatible(saved, asdict(cfg), files.record)
    return [c.tolist() for c in curves]


def seed_plan(files: RunFiles) -> tuple[str, Any]:
    """What to do with this seed: ("checkpoint", state), ("finished", curves) or ("fresh", None). Raises
    UsageError when the files forbid the run."""
    cfg = files.cfg
    foreign = foreign_model(files)
    if foreign:  # never replace a model another run saved
        raise UsageError(foreign)
    if cfg.resume and files.checkpoint.exists():
        state = read_checkpoint(files.checkpoint)
        check_compatible(state["config"], asdict(cfg), files.checkpoint)
        if state["t"] > cfg.max_time_steps:
            raise UsageError(f"checkpoint {files.checkpoint} is at step {state['t']}, beyond the requested "
                             f"budget of {cfg.max_time_steps}; raise the budget or use --overwrite")
        return "checkpoint", state
    exists = files.existing()
    if cfg.resume and exists and (done := finished_curves(files)) is not None:
        return "finished", done
    budget = files.recorded("finished_at_step", int) if cfg.resume and exists else None
    if budget is not None and budget != cfg.max_time_steps:
        # its checkpoint went with its finish: it cannot go on, and starting over would replace it unasked
        # (with the same budget and a curve file missing, starting over restores the same files)
        raise UsageError(f"{files.record.with_suffix('').name} finished at {budget} steps and this run asks for "
                         f"{cfg.max_time_steps}; a finished run cannot continue: --overwrite starts it over, "
                         "or pick another --results_dir")
    if exists and not (cfg.resume or cfg.overwrite):
        raise UsageError(f"{exists[0]} already exists: add --resume to continue that run, --overwrite to "
                         "start it over, or pick another --seed or --results_dir")
    return "fresh", None


def foreign_model(files: RunFiles) -> str | None:
    """With --save_model: why a model file in the way belongs to another run (it would be replaced), or None.
    A file is this run's when it names this run's record or the id that record holds."""
    if not files.cfg.save_model:
        return None
    mine = {"record": str(files.record.resolve()), "run_id": files.recorded("run_id", str)}
    for path in files.models:
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


def check_models(cfg: RunConfig) -> None:
    """--save_model: refuse, before anything is created, a run that would replace a model file another run saved
    (same policy, environment and seed, another results folder)."""
    for seed in cfg.seed_list():
        foreign = foreign_model(RunFiles(cfg.for_seed(seed)))
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


def plan_resume(seeds: list[int], files: list[RunFiles]) -> ResumePlan:
    """Each seed's plan (``seed_plan``); a UsageError when the seeds to continue are at different steps."""
    for f in files:
        f.remove_stale_temps()
    plans = dict(zip(seeds, (seed_plan(f) for f in files)))
    finished = {s: plan for s, (kind, plan) in plans.items() if kind == "finished"}
    states = {s: plan for s, (kind, plan) in plans.items() if kind == "checkpoint"}
    active = [s for s in seeds if s not in finished]
    at = {s: int(states[s]["t"]) if s in states else 0 for s in active}
    if len(set(at.values())) > 1:
        where = ", ".join(f"seed {s} at step {t}" for s, t in at.items())
        raise UsageError(f"--seeds: the runs to continue are at different steps ({where}); resume them in "
                         "separate commands (--seed S --resume) or start them over with --overwrite")
    return ResumePlan(finished, states, [s for s in active if s not in states], active)
