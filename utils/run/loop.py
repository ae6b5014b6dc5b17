"""The one training loop behind the command lines: S seeds x N agents, lockstep environments, shared buffers.

``Trainer.run`` is the loop; what it calls lives beside it: ``RunConfig`` (config.py: settings and checks),
``set_up`` (setup.py: each member's task, the environments, the memory checks and the learner), ``Outputs``
(series.py: the curves and every other per-evaluation series, saved, checkpointed and resumed from one registry),
the resume plan and checkpoints (resume.py), ``Evaluation`` (one evaluation of snapshots of the actors, beside
training when environments run in workers), ``RunFiles`` (files.py: one seed's files and lock), ``plan_resume``
(plan.py: what to do with each seed's existing files), ``Progress``, ``StopSignals`` and the stop reports (progress.py).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import Interrupted
from ..naming import ALGORITHM
from . import resume, seed_files
from .checks import validate
from .config import RunConfig
from .evaluation import Evaluation
from .files import RunFiles
from .plan import check_models
from .progress import Progress, StopSignals, interrupted_message, paused_message
from .protocol import AgentsProtocol, LearnerProtocol
from .series import Outputs
from .setup import Setup, set_threads, set_up


class Trainer:
    """One process training S seeds x N agents in lockstep; each seed writes exactly the files of its own run. It is
    a ``state.RunState``: what resume.py and seed_files.py read of it is declared there."""

    setup: Setup  # the seeds' environments, learner, files and episode records (setup.py), rebuilt by ``build``
    outputs: Outputs
    progress: Progress
    pending: Evaluation | None
    newly_done: list[int]
    stopped: set[int]
    t: int

    def __init__(self, cfg: RunConfig, validated: bool = False):
        if not validated:  # the command lines validate first, naming their own flags
            validate(cfg)
        check_models(cfg)
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        # seconds of this process's loop and of its blocking evaluations, for the record of a finished run
        self.clock, self.eval_seconds = time.perf_counter(), 0.0
        set_threads(cfg, self.device)
        self.last_checkpoint: int | None = None
        self.done_curves: dict[int, list[list[float]]] = {}  # seeds that had already finished
        self.built = False
        self.build(cfg.seed_list())

    def build(self, seeds: list[int]) -> None:
        """Environments, agents, buffers and evaluator for these seeds, at step 0 (setup.py: ``self.setup``)."""
        if self.built:
            self.close()
        self.setup = set_up(self.cfg, self.device, seeds)
        self.built = True
        self.pending = None  # an evaluation that runs beside training
        self.newly_done = []  # members done at the last step (solved, or out of episodes)
        self.stopped = set()  # the seeds (indices) whose agents are all done: their files are final
        self.outputs = Outputs(self.cfg, self.learner.scheme, len(seeds))  # curves and the series beside them
        self.progress = Progress(self.cfg.name, self.cfg.max_time_steps, seeds, self.rows, self.cfg.quiet)
        self.t = 0

    @property
    def curves(self) -> list[list[float]]:
        """Every member's learning curve so far."""
        return self.outputs.values["curves"]

    @property
    def learner(self) -> LearnerProtocol:
        return self.setup.learner

    @property
    def envs(self):
        return self.setup.envs

    @property
    def agents(self) -> AgentsProtocol:
        return self.setup.learner.agents

    @property
    def seeds(self) -> list[int]:
        """The seeds this process trains (fewer than the run's when some had already finished)."""
        return self.setup.seeds

    @property
    def files(self) -> list[RunFiles]:
        return self.setup.files

    def rows(self, k: int) -> slice:
        """The members of the k-th seed."""
        return slice(k * self.cfg.num_agents, (k + 1) * self.cfg.num_agents)

    def run(self, stop_at: int | None = None, stop_when=None) -> list[np.ndarray]:
        """Train to cfg.max_time_steps, evaluating at step 0 and every cfg.eval_freq steps.

        A finished run deletes its checkpoint (the curves are complete). ``stop_at``: stop early at
        that step after writing a checkpoint, as if interrupted there (for training in pieces).
        ``stop_when(curves)``: called after every evaluation with each seed's member curves so far (a list of
        lists); the run stops there, as ``stop_at`` does, once it holds for every seed still training (the learning
        tests end at their bar instead of at their budget).
        """
        cfg = self.cfg
        stop_at = cfg.stop_at if stop_at is None else stop_at
        with seed_files.locked(self):
            if resume.prepare(self):
                return seed_files.curve_arrays(self)
            if stop_at is not None and stop_at <= self.t < cfg.max_time_steps:  # paused there already
                self.progress.say(paused_message(cfg.name, self.t, stop_at, resume.checkpoint_where(self)))
                return seed_files.curve_arrays(self)
            seed_files.open_outputs(self)
            self.clock, self.eval_seconds = time.perf_counter(), 0.0  # the loop starts (or resumes) here
            with self.stop_signals() as stop:
                if self.t == 0 and not len(self.curves[0]):  # a checkpoint at step 0 (a learner stopped before
                    self.start_evaluation()  # its actors' first block) holds step 0's evaluation already
                evaluated = len(self.curves[0])
                while self.t < cfg.max_time_steps:
                    self.step()
                    if self.t % cfg.eval_freq == 0:
                        self.start_evaluation()
                    if self.newly_done:
                        seed_files.note_done(self)
                        if len(self.stopped) == len(self.seeds):
                            break
                    reached = False
                    if stop_when is not None and len(self.curves[0]) != evaluated and self.t < cfg.max_time_steps:
                        evaluated = len(self.curves[0])
                        reached = all(stop_when(self.curves[self.rows(k)]) for k in range(len(self.seeds))
                                      if k not in self.stopped)
                    paused = stop_at is not None and self.t >= stop_at and self.t < cfg.max_time_steps
                    if reached or paused or stop.signum or resume.checkpoint_due(self):
                        resume.save_checkpoint(self)
                    if reached or paused or stop.signum:  # checkpoints on or off: the episodes played up to here
                        seed_files.save_curves(self)
                    if reached:
                        self.progress.say(f"{cfg.name} | stopped at step {self.t}: the stop condition holds")
                        return seed_files.curve_arrays(self)
                    if paused and stop_at is not None:
                        self.progress.say(paused_message(cfg.name, self.t, stop_at, resume.checkpoint_where(self)))
                        return seed_files.curve_arrays(self)
                    if stop.signum:  # named: the seeds this process was still training
                        running = [seed for seed in self.seeds if seed not in self.done_curves] or self.seeds
                        raise Interrupted(stop.signum, interrupted_message(stop.signum, cfg.name_for(running), self.t,
                                                                           resume.checkpoint_where(self)))
            seed_files.finish(self)
        return seed_files.curve_arrays(self)

    def stop_signals(self) -> StopSignals:
        """What the loop reads SIGINT/SIGTERM from (a learner in a thread of a Ray actor is told by its driver)."""
        return StopSignals()

    def step(self) -> None:
        """One environment step for every member (and of a pending evaluation), then the batched updates."""
        warmup = self.t < self.cfg.start_time_steps
        random = warmup and self.cfg.warmup_actions == "random"
        actions, behaviour = self.learner.act(self.envs.obs, random)  # None: random
        ev = self.pending
        obs, actions, rewards, next_obs, terminated, ended = self.envs.step(actions, *(ev.next_actions() if ev else ()))
        if self.cfg.timelimit_as_terminal:  # old Gym: the time limit's cut is stored as a termination
            terminated = np.logical_or(terminated, ended).astype(np.asarray(terminated).dtype)
        self.learner.store(obs, actions, rewards, next_obs, terminated, behaviour, ended=ended)
        if self.setup.episode_log is not None:  # whole games at their own score (an Atari game's lives, unclipped)
            games = self.setup.episode_log.games  # else a checkpoint's older rows: the learner's episodes, as they were
            scores, game_over = getattr(self.envs, "last_game", (rewards, ended)) if games else (rewards, ended)
            self.setup.episode_log.observe(scores, game_over, self.t + self.learner.steps_per_iteration)
        if not warmup:
            self.learner.train(self.t)  # in a worker pool, the evaluation episodes step meanwhile
        if self.setup.episode_evals is not None:  # after this step's update: the actor the next episode starts with
            self.newly_done += self.setup.episode_evals.after_step(np.asarray(ended, dtype=bool), self.t + 1,
                                                                   self.greedy_policy)
        pace = self.setup.eval_pace  # an evaluation is pending here only when it runs beside training
        if ev is not None and pace is not None:
            ev.observe(*self.envs.eval_results())
            ev.advance(pace - 1)
            if ev.done:
                self.finish_evaluation()
        self.t += self.learner.steps_per_iteration

    def greedy_policy(self, obs: np.ndarray) -> np.ndarray:
        """Every member's current actor without noise: [M, E, obs_dim] -> [M, E, act_dim]."""
        return self.learner.greedy_actions(obs).cpu().numpy()

    def start_evaluation(self) -> None:
        """Evaluate snapshots of every member's actor taken now: at once, or beside training (``--env_workers``)."""
        self.finish_evaluation()
        resume.check_finite(self)
        rate = self.progress.rate(self.t)
        if self.cfg.save_model:
            seed_files.save_models(self)
        period = self.learner.period_stats()
        if self.learner.scheme.writes_consensus:  # of the parameters evaluated now, one value per seed
            period["consensus"] = np.repeat(self.learner.scheme.consensus(), self.cfg.num_agents)
        if self.learner.scheme.writes_gossip:  # skipped combines and message ages since the last evaluation
            period["gossip"] = self.learner.scheme.gossip_stats()
        self.pending = Evaluation(self.envs, self.learner.snapshot(self.t), self.t, period, rate, self.setup.own_task)
        if self.setup.eval_pace is None:
            self.finish_evaluation()

    def finish_evaluation(self) -> None:
        """Play the pending evaluation to its end; append to and save the curves, report progress."""
        ev, self.pending = self.pending, None
        if ev is None:
            return
        start = time.perf_counter()
        scores = ev.run()
        self.eval_seconds += time.perf_counter() - start
        self.outputs.append(ev, scores)
        seed_files.save_curves(self)
        self.progress.evaluation(ev.t, scores, ev.period, ev.rate)

    def close(self) -> None:
        self.progress.close()
        self.pending = None
        self.envs.close()
        if self.setup.episode_evals is not None:
            self.setup.episode_evals.close()


def trainer(cfg: RunConfig, validated: bool = False):
    """The trainer of cfg, built: what needs the environment's sizes (the replay buffers' memory) is checked here,
    before anything is written. A3C's asynchronous workers have their own trainer (onpolicy/asynchronous.py); every
    other algorithm runs this loop."""
    if ALGORITHM[cfg.algorithm].family == "async":
        from .onpolicy.asynchronous import AsyncTrainer

        return AsyncTrainer(cfg, validated)
    return Trainer(cfg, validated)


def train(cfg: RunConfig, validated: bool = False, stop_when=None) -> list[np.ndarray]:
    """Train cfg.num_agents agents for every seed; returns (and saves after every evaluation) their curves.
    ``stop_when(curves)``: end early once it holds for each seed's member curves (see ``Trainer.run``)."""
    return trainer(cfg, validated).run(stop_when=stop_when)
