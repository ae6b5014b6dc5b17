"""Starting, resuming and checkpointing a ``Trainer``'s seeds: the resume plan carried out, each seed's checkpoint
(what a process of that seed alone would write: the learner's, the environments' and the series' state), the
periodic checkpoints and where they go. Each function takes the trainer as ``tr``, typed by what it reads
(``state.RunState``).
"""
from __future__ import annotations

import sys
from dataclasses import asdict

import torch

from ..errors import NonFinite
from .checkpoint import FORMAT as CHECKPOINT_FORMAT
from .files import cpu_capability, cpu_model
from .plan import plan_resume
from .progress import non_finite_message
from .seed_files import save_curves
from .state import RunState


def prepare(tr: RunState) -> bool:
    """Resume, skip or start each seed as its files say (``plan_resume`` decides for all before anything is
    written). Returns True when every seed had already finished."""
    cfg = tr.cfg
    plan = plan_resume(tr.setup.seeds, tr.setup.files)
    tr.done_curves = plan.finished
    for s in plan.finished:
        tr.progress.say(f"{cfg.for_seed(s).stem} | already complete ({cfg.max_time_steps} steps): nothing to do")
    if not plan.active:
        return True
    if plan.active != tr.setup.seeds:
        tr.build(plan.active)
    for s, files in zip(tr.setup.seeds, tr.setup.files):
        if s in plan.fresh:
            if cfg.resume and files.existing():
                tr.progress.say(f"{files.cfg.stem} | no checkpoint at {files.checkpoint}: starting from step 0")
            files.clear()
    if plan.states:
        load_checkpoints(tr, [plan.states[s] for s in tr.setup.seeds if s in plan.states])
        note_thread_change(tr, [plan.states[s] for s in tr.setup.seeds if s in plan.states])
        save_curves(tr)  # evaluations after the checkpoint are done again
        for s, files in zip(tr.setup.seeds, tr.setup.files):
            before = plan.states[s]["config"].get("max_time_steps") if s in plan.states else None
            grown = f", its budget grown from {before} to {cfg.max_time_steps} steps" \
                if isinstance(before, int) and before != cfg.max_time_steps else ""
            tr.progress.say(f"{files.cfg.stem} | resumed from {files.checkpoint} at step {tr.t}{grown}")
    return False


def note_thread_change(tr: RunState, states: list[dict]) -> None:
    """One line on stderr when a CPU run resumes with another torch thread count, with --flush_denormals where its
    checkpoint had not it or without it where it had, or on a CPU with another instruction set (AVX2 / AVX-512:
    float32 rounds otherwise) or, with the same one, another processor (an Intel Xeon and an AMD EPYC, both
    AVX-512, rounded otherwise), than its checkpoint's: the rest of the run is then not bit for bit the run that
    would not have stopped (matrix products' last bits)."""
    if tr.device.type != "cpu" or tr.cfg.quiet:
        return
    before = sorted({s["torch_threads"] for s in states if s.get("torch_threads")})  # older checkpoints: unknown
    now = torch.get_num_threads()
    if before and before != [now]:
        print(f"note: {tr.cfg.name} was checkpointed with {' / '.join(map(str, before))} torch thread(s) and "
              f"resumes with {now} (--threads): the curves from step {tr.t} on may differ in the last bits from "
              f"an uninterrupted run; the record's 'resumes' lists each resume's threads", file=sys.stderr)
    flushed = sorted({bool(s.get("config", {}).get("flush_denormals", False)) for s in states})
    if flushed and flushed != [tr.cfg.flush_denormals]:
        said = {True: "with --flush_denormals", False: "without --flush_denormals"}
        was = " and ".join(said[f] for f in flushed)  # seeds of one process checkpointed both ways: both
        print(f"note: {tr.cfg.name} was checkpointed {was} and resumes {said[tr.cfg.flush_denormals]}: "
              f"the curves from step {tr.t} on may differ in the last bits from an uninterrupted run; the record's "
              f"'resumes' lists each resume's setting", file=sys.stderr)
    cpus = sorted({s["cpu_capability"] for s in states if s.get("cpu_capability")})
    models = sorted({s["cpu_model"] for s in states if s.get("cpu_model")})  # checkpoints before 2026-12-05: none
    if cpus and cpus != [cpu_capability()]:
        print(f"note: {tr.cfg.name} was checkpointed on a CPU with {' / '.join(cpus)} kernels and resumes on "
              f"one with {cpu_capability()}: the curves from step {tr.t} on may differ in the last bits from an "
              f"uninterrupted run; the record's 'resumes' lists each resume's CPU", file=sys.stderr)
    elif models and models != [cpu_model()]:
        print(f"note: {tr.cfg.name} was checkpointed on {' / '.join(models)} and resumes on {cpu_model()} (the same "
              f"{cpu_capability()} kernels, but other processors may round otherwise): the curves from step {tr.t} on "
              f"may differ in the last bits from an uninterrupted run; the record's 'resumes' lists each resume's "
              f"CPU", file=sys.stderr)


def checkpoint_due(tr: RunState) -> bool:
    """A periodic checkpoint (--checkpoint_freq) falls on this step (or within the K environment steps it just
    took); none at the end (the run finishes)."""
    freq, stride = tr.cfg.checkpoint_freq, tr.setup.learner.steps_per_iteration
    return bool(freq) and tr.t // freq > (tr.t - stride) // freq and tr.t < tr.cfg.max_time_steps


def checkpoint_where(tr: RunState) -> str | None:
    """Where the checkpoints go: the file (one seed) or the folder; None when --checkpoint_freq is 0."""
    if not tr.cfg.checkpoint_freq:
        return None
    return str(tr.setup.files[0].checkpoint) if len(tr.setup.files) == 1 else f"{tr.setup.files[0].checkpoint.parent}/"


def seed_state(tr: RunState, k: int) -> dict:
    """The k-th seed's checkpoint: what a process of that seed alone would write."""
    rows = tr.rows(k)
    return {"format": CHECKPOINT_FORMAT, "config": asdict(tr.setup.seed_cfgs[k]), "t": tr.t,
            "torch_threads": torch.get_num_threads(), "cpu_capability": cpu_capability(), "cpu_model": cpu_model(),
            **tr.outputs.state(k),
            **({"episode_evals": tr.setup.episode_evals.state_dict(rows)} if tr.setup.episode_evals is not None else {}),
            **({"episode_log": tr.setup.episode_log.state_dict(rows)} if tr.setup.episode_log is not None else {}),
            **tr.setup.learner.state_dict(k), **tr.setup.envs.state_dict(rows)}


def save_checkpoint(tr: RunState) -> None:
    tr.finish_evaluation()  # a checkpoint holds complete curves; a stop without one too
    if not tr.cfg.checkpoint_freq:
        return
    check_finite(tr)
    for k, files in enumerate(tr.setup.files):
        if k not in tr.stopped:
            files.save_checkpoint(seed_state(tr, k))
    tr.last_checkpoint = tr.t


def load_checkpoints(tr: RunState, states: list[dict]) -> None:
    """Continue exactly where the checkpoints (one per seed, all at one step) left off."""
    tr.setup.learner.load_state_dicts(states)
    tr.setup.envs.load_state_dicts(states)
    tr.t = int(states[0]["t"])
    tr.outputs.load(states)
    if tr.setup.episode_evals is not None:
        tr.setup.episode_evals.load_state_dicts([s.get("episode_evals") for s in states])
    if tr.setup.episode_log is not None:
        tr.setup.episode_log.load_state_dicts([s.get("episode_log") for s in states])
    tr.last_checkpoint = tr.t


def check_finite(tr: RunState) -> None:
    """Stop naming seed, agent and step when a loss or a parameter went NaN/inf (one host sync), with the learner's
    ``non_finite_hint()`` where it has one (what to try instead of the general advice)."""
    n = tr.cfg.num_agents
    members = [f"agent {m % n} (seed {s}) of {tr.setup.seed_cfgs[m // n].stem}" for m, s in enumerate(tr.setup.member_seeds)]
    where = checkpoint_where(tr) or str(tr.setup.files[0].checkpoint)
    hint = getattr(tr.setup.learner, "non_finite_hint", None)
    message = non_finite_message(tr.setup.learner.broken(), tr.t, members, where, tr.last_checkpoint,
                                 hint() if hint is not None else None)
    if message is not None:
        raise NonFinite(message)
