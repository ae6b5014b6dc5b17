"""Each seed's files around a ``Trainer``'s loop: every seed's lock, its JSON record opened and finished, its curves
and the files beside them saved after each evaluation, and a seed stopped on its own when its agents are all done
(the TD3 tutorial's solved / out of episodes) while the others go on. Each function takes the trainer as
``tr``, typed by what it reads: ``state.RunState``.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import numpy as np

from .episodes import EpisodeEvals
from .state import RunState


def note_done(tr: RunState) -> None:
    """Members became done (solved, or out of episodes): a seed whose agents are all done stops here (its files
    finished at this step, its record saying why); otherwise its record says who is solved so far."""
    newly, tr.newly_done = tr.newly_done, []
    ee = tr.setup.episode_evals
    if ee is None:  # members are done only by the per-episode evaluations
        return
    for k, files in enumerate(tr.setup.files):
        rows = tr.rows(k)
        if k in tr.stopped or not any(rows.start <= m < rows.stop for m in newly):
            continue
        if all(ee.done[rows]):
            stop_seed(tr, k, ee)
        else:
            files.update_record(**ee.record(rows))


def stop_seed(tr: RunState, k: int, ee: EpisodeEvals) -> None:
    """Seed k's run ends at this step; the other seeds of the process go on (its members keep computing in the
    batched model, untouched by and not touching the others, but nothing of it is written any more)."""
    tr.finish_evaluation()  # an evaluation under way belongs to the curves
    rows = tr.rows(k)
    save_seed_files(tr, k)
    reason = "solved" if all(s is not None for s in ee.solved[rows]) else "max_episodes"
    tr.setup.files[k].finish(tr.t, stopped=reason, **ee.record(rows))
    tr.stopped.add(k)
    tr.done_curves[tr.setup.seeds[k]] = [list(c) for c in tr.curves[rows]]
    tr.progress.say(f"{tr.setup.seed_cfgs[k].stem} | stopped at step {tr.t}: "
                    + ("every agent solved" if reason == "solved" else "every agent solved or out of episodes")
                    + f" (episodes {ee.episodes[rows]})")


@contextmanager
def lock_all(files: list) -> Iterator[ExitStack]:
    """Every seed's lock (all or none) while inside; what else must happen on leaving goes on the stack yielded."""
    with ExitStack() as cleanup:
        for f in list(files):
            f.lock.acquire()
            cleanup.callback(f.lock.release)
        yield cleanup


@contextmanager
def locked(tr: RunState):
    """Every seed's lock while inside; the environments closed on leaving."""
    with lock_all(tr.setup.files) as cleanup:
        cleanup.callback(tr.close)
        yield


def open_outputs(tr: RunState) -> None:
    """Each seed's JSON record (and TensorBoard writer); the progress clock starts."""
    ee = tr.setup.episode_evals
    for k, files in enumerate(tr.setup.files):
        rows = tr.rows(k)
        files.write_record(tr.device, tr.t, tr.setup.seeds, tr.setup.workers, tr.setup.recorded_tasks[rows])
        if ee is not None and any(ee.done[rows]):  # a resume keeps what the record said of its done agents
            files.update_record(**ee.record(rows))
    tr.progress.start(tr.t, [files.board(tr.t) for files in tr.setup.files] if tr.cfg.tensorboard else [])


def finish(tr: RunState) -> None:
    """The last evaluation; each seed's record says finished, its checkpoint goes (seeds that stopped earlier
    have finished already)."""
    tr.finish_evaluation()
    ee = tr.setup.episode_evals
    # wall seconds since this process started (or resumed) the run's loop, and those spent in evaluations that
    # training waited for (benchmarks.peers reads them to time the learning alone)
    timing = {"loop_s": round(time.perf_counter() - tr.clock, 3), "evaluation_s": round(tr.eval_seconds, 3)}
    for k, files in enumerate(tr.setup.files):
        if k in tr.stopped:
            continue
        if tr.cfg.episode_eval:
            save_seed_files(tr, k)  # episodes after the last evaluation
        files.finish(**(ee.record(tr.rows(k)) if ee is not None else {}), timing=timing)


def save_curves(tr: RunState) -> None:
    for k in range(len(tr.setup.files)):
        if k not in tr.stopped:
            save_seed_files(tr, k)


def save_seed_files(tr: RunState, k: int) -> None:
    """The k-th seed's curves and the files beside them, as they are now."""
    files = tr.setup.files[k]
    tr.outputs.save(files, k)
    if tr.cfg.episode_eval and tr.setup.episode_evals is not None:
        files.save_episode_evals(tr.setup.episode_evals.arrays(tr.rows(k)))
    if tr.setup.episode_log is not None:
        files.save_episode_logs([tr.setup.episode_log.csv(m) for m in range(tr.rows(k).start, tr.rows(k).stop)])


def save_models(tr: RunState) -> None:
    """--save_model: each seed's agents, after an evaluation."""
    for k, files in enumerate(tr.setup.files):
        files.save_models([tr.setup.learner.agents.agent_state(m) for m in range(tr.rows(k).start, tr.rows(k).stop)])


def curve_arrays(tr: RunState) -> list[np.ndarray]:
    """Every member's curve, seed by seed (seeds that had already finished included)."""
    by_seed = dict(tr.done_curves)
    by_seed.update({s: tr.curves[tr.rows(k)] for k, s in enumerate(tr.setup.seeds) if k not in tr.stopped})
    return [np.asarray(c, dtype=np.float64) for s in tr.cfg.seed_list() for c in by_seed[s]]
