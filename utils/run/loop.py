"""The one training loop behind both command lines: S seeds x N agents, lockstep environments, shared buffers.

``Trainer.run`` is the loop; what it calls lives beside it: ``RunConfig`` (config.py: settings and checks),
``LocalEnvs``/``EnvWorkers`` (utils.envs.workers: training environments and evaluation episodes, in this
process or in worker processes), ``Learner`` (batched agents, buffers, updates), ``Evaluation`` (one evaluation
of snapshots of the actors, beside training when environments run in workers), ``RunFiles`` and
``plan_resume`` (files.py: one seed's files, lock and resume policy), ``Progress``, ``StopSignals`` and the
stop reports (progress.py).
"""
from __future__ import annotations

import random
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ..cores import available_cores, default_cpu_threads
from ..envs.variants import task_for
from ..memory import check_fits
from ..envs.workers import make_envs
from ..errors import Interrupted, NonFinite, UsageError
from ..naming import ALGORITHM
from .checkpoint import FORMAT as CHECKPOINT_FORMAT
from .checks import validate
from .config import RunConfig
from .replay.buffer import SharedReplayBuffer
from .episodes import EpisodeEvals
from .onpolicy.episode_log import EpisodeLog
from .evaluation import Evaluation
from .files import RunFiles, check_models, cpu_capability, load_error, model_path, plan_resume
from .replay.learner import Learner
from .replay.recurrent import RecurrentLearner
from .onpolicy.rollout import RolloutLearner
from .progress import Progress, StopSignals, interrupted_message, non_finite_message, paused_message


def load_models(agents, cfg: RunConfig, first: int = 0) -> None:
    """--load_model NAME: agent i loads models/NAME[_Agent_i].pt ("default": the run's own names) into slot first + i."""
    for i, own in enumerate(cfg.agent_names()):
        path = model_path(cfg, i, own)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            agents.load_agent_state(first + i, state)
        except Exception as e:
            raise load_error(e, path, cfg) from None


def default_workers(device: torch.device, members: int) -> int:
    """Environment workers on the cores torch leaves free (on a GPU it needs one), at most one per member."""
    free = available_cores() - (1 if device.type == "cuda" else torch.get_num_threads())
    return min(free, members) if free >= 2 else 0


def set_global_seeds(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rollout_memory(cfg: RunConfig, members: int, envs) -> tuple[str, float, str]:
    """(what, bytes, hint) of an on-policy run's rollout storage, members x n steps x K environments of
    (observation, next observation, action, reward, flags, behaviour), and of ACER's replay of whole rollouts
    (``--buffer_size`` transitions per member, as algorithms.acer stores them)."""
    n_steps, k = int(cfg.algo["n_steps"]), int(cfg.algo["envs_per_agent"])
    obs = int(np.prod(envs.obs_shape)) * (1 if len(envs.obs_shape) > 1 else 4)
    rest = (8 if envs.discrete else 4 * envs.act_dim) + 12 + 4 * envs.act_dim
    need = members * n_steps * k * (2 * obs + rest)
    if "buffer_size" in cfg.algo:  # ACER
        slots = max(1, int(cfg.algo["buffer_size"]) // (n_steps * k))
        stored = 2 * obs
        if len(envs.obs_shape) == 3:  # frame stacks, each frame once (algorithms/frame_store.py): a frame a step,
            # the first stack of each rollout, and room for an episode's first and last stacks in every rollout
            stored = obs // envs.obs_shape[0] + 3 * -(-obs // n_steps)
        need += members * slots * n_steps * k * (stored + rest)
        return (f"--n_steps {n_steps} x --envs_per_agent {k} x --buffer_size {cfg.algo['buffer_size']}: the rollouts "
                f"and replay of {members} learner(s)", need, "lower --buffer_size, --n_steps or --envs_per_agent")
    return (f"--n_steps {n_steps} x --envs_per_agent {k}: the rollouts of {members} learner(s)", need,
            "lower --n_steps or --envs_per_agent")


class Trainer:
    """One process training S seeds x N agents in lockstep; each seed writes exactly the files of its own run."""

    def __init__(self, cfg: RunConfig, validated: bool = False):
        if not validated:  # the command lines validate first, naming their own flags
            validate(cfg)
        check_models(cfg)
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        elif self.device.type == "cuda":
            # the GPU does the arithmetic; torch's CPU threads (one per core by default) would only spin against
            # the environment workers on the same cores (measured on 16 cores: evaluation 6x slower)
            torch.set_num_threads(1)
        else:  # the cores nothing else keeps busy now (a run beside a busy core would otherwise wait for it)
            torch.set_num_threads(default_cpu_threads())
        self.last_checkpoint: int | None = None
        self.done_curves: dict[int, list[list[float]]] = {}  # seeds that had already finished
        self.envs = None
        self.build(cfg.seed_list())

    def build(self, seeds: list[int]) -> None:
        """Environments, agents, buffers and evaluator for these seeds, at step 0."""
        cfg, n = self.cfg, self.cfg.num_agents
        if self.envs is not None:
            self.close()
        set_global_seeds(seeds[0])
        self.seeds = seeds
        self.seed_cfgs = [cfg.for_seed(s) for s in seeds]
        self.files = [RunFiles(c) for c in self.seed_cfgs]
        self.member_seeds = [m for c in self.seed_cfgs for m in c.agent_seeds()]
        self.pending: Evaluation | None = None  # an evaluation that runs beside training
        self.workers = default_workers(self.device, len(self.member_seeds)) if cfg.env_workers is None \
            else cfg.env_workers
        # task variants: each agent's own task from its own seed (None for other environments); --eval_tasks all:
        # every member is also evaluated on the tasks of its seed's other agents, in agent order
        self.tasks = [task_for(cfg.env, s) for s in self.member_seeds]
        every = cfg.eval_tasks == "all"
        spec, k = ALGORITHM[cfg.algorithm], cfg.envs_per_agent
        env_tasks = [x for x in self.tasks for _ in range(k)]
        if cfg.task_per_env:  # one agent per seed; its environment j plays agent (j mod N)'s task of the seed
            shared = [[task_for(cfg.env, s + 100 * i) for i in range(cfg.task_per_env)] for s in self.member_seeds]
            env_tasks = [row[j % cfg.task_per_env] for row in shared for j in range(k)]
            eval_tasks = shared if every else None
            self.own_task = [0] * len(self.tasks) if every else None  # its curve: agent 0's task, the seed's own
            self.recorded_tasks = shared  # the JSON's tasks: per agent the list of the N tasks it plays
        else:
            self.recorded_tasks = self.tasks
            eval_tasks = [self.tasks[m - m % n:m - m % n + n] for m in range(len(self.tasks))] if every else None
            self.own_task = [m % n for m in range(len(self.tasks))] if every else None
        # K environments per member (on-policy learners): environment j > 0 of a member has a seed derived from
        # the member's seed and j, and plays the member's task
        env_seeds = [s if j == 0 else int(np.random.SeedSequence([s, j]).generate_state(1)[0])
                     for s in self.member_seeds for j in range(k)]
        self.envs = c = make_envs(cfg.env, env_seeds, [s + cfg.eval_seed_offset for s in seeds for _ in range(n)],
                                  cfg.eval_episodes, self.workers, env_tasks,
                                  eval_tasks, spec.actions, cfg.algorithm)
        if spec.family == "replay" and len(c.obs_shape) != 1:  # make_env lets Atari's images through (ac_main.py)
            c.close()
            raise UsageError(f"--env {cfg.env}: observations of shape {c.obs_shape}; {cfg.algorithm} needs flat ones")
        if spec.family == "replay":  # the buffer, before it is allocated (rows that will be written, on the CPU)
            groups = len(seeds) * (1 if cfg.is_dase else n)
            rows = cfg.buffer_size if self.device.type == "cuda" else \
                min(cfg.buffer_size, cfg.max_time_steps * (n if cfg.is_dase else 1))
            row_bytes = 4 * (2 * c.obs_dim + 3 * c.act_dim + 4)  # obs, next obs, action (+ behaviour), reward, flags
            seq = cfg.algo
            if seq.get("seq_encoder"):  # sequence replay: an episode-start flag and the writer's state per row
                width = {"gru": seq["seq_hidden"], "lstm": 2 * seq["seq_hidden"]}.get(
                    seq["seq_encoder"], seq["seq_len"] * (c.obs_dim + 1))
                row_bytes += 4 * (1 + width + (2 * c.act_dim if seq.get("prev_action") else 0))
            try:
                check_fits(f"--buffer_size {cfg.buffer_size}: the replay buffers ({len(seeds)} seed(s))",
                           groups * rows * row_bytes, self.device, "lower --buffer_size or run fewer --seeds at once",
                           reserve=groups * cfg.buffer_size * row_bytes)
            except UsageError:
                c.close()
                raise
        if spec.family == "rollout":  # the rollout storage and ACER's replay of rollouts, before they are allocated
            try:
                what, need, hint = rollout_memory(cfg, len(self.member_seeds), c)
                check_fits(what, need, self.device, hint)
            except UsageError:
                c.close()
                raise
            self.learner = RolloutLearner(cfg.algorithm, cfg.algo, self.member_seeds, n, c, self.device,
                                          cfg.sharing_settings(), common_init=cfg.init == "common")
        else:
            kind = RecurrentLearner if cfg.algo.get("seq_encoder") else Learner
            self.learner = kind(cfg.algorithm, cfg.algo, self.member_seeds, n, c.obs_dim, c.act_dim, c.low,
                                   c.high, cfg.buffer_size, cfg.batch_size, cfg.updates_per_step, self.device,
                                   cfg.sharing_settings(), cfg.cuda_graphs, cfg.n_step, cfg.per or None,
                                   common_init=cfg.init == "common")
        if cfg.load_model:
            for j, seed_cfg in enumerate(self.seed_cfgs):
                load_models(self.learner.agents, seed_cfg, j * n)
        if cfg.compile:
            self.learner.agents.compile()
        # the TD3 tutorial's protocol: an evaluation episode after every training episode, solved/done members
        self.episode_evals = None
        if cfg.episode_eval or cfg.solved_at is not None or cfg.max_episodes is not None:
            self.episode_evals = EpisodeEvals(cfg.env, [s for s in seeds for _ in range(n)], self.tasks,
                                              cfg.episode_eval, cfg.solved_at, cfg.solved_window, cfg.max_episodes,
                                              dict(actions=spec.actions, who=cfg.algorithm))
        # the actor-critic family: every finished training episode, as Diff-DAC's reference reports them
        self.episode_log = EpisodeLog(len(self.member_seeds), k) if spec.family == "rollout" else None
        self.newly_done: list[int] = []  # members done at the last step (solved, or out of episodes)
        self.stopped: set[int] = set()  # the seeds (indices) whose agents are all done: their files are final
        limit = c.max_episode_steps
        # evaluation steps per training step that finish an evaluation within one evaluation period
        self.eval_pace = -(-limit * k // cfg.eval_freq) if limit and self.workers else None
        self.curves: list[list[float]] = [[] for _ in self.member_seeds]
        self.weight_curves: list[list[float]] = [[] for _ in self.member_seeds]  # mean weight of shared samples
        self.consensus_curves: list[list[float]] = [[] for _ in seeds]  # the agents' parameter disagreement per seed
        self.task_curves: list[list[list[float]]] = [[] for _ in self.member_seeds]  # --eval_tasks all: [evals][N]
        self.gossip_curves: list[list[list[float]]] = [[] for _ in self.member_seeds]  # --sync_freq: [evals][2]
        self.progress = Progress(cfg.name, cfg.max_time_steps, seeds, self.rows, cfg.quiet)  # started by open_outputs
        self.t = 0

    @property
    def agents(self):
        return self.learner.agents

    @property
    def buffer(self) -> SharedReplayBuffer:
        return self.learner.buffer

    def rows(self, k: int) -> slice:
        """The members of the k-th seed."""
        return slice(k * self.cfg.num_agents, (k + 1) * self.cfg.num_agents)

    # ---- the loop ----------------------------------------------------------------------------
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
        with self.locked():
            if self.prepare():
                return self.curve_arrays()
            if stop_at is not None and stop_at <= self.t < cfg.max_time_steps:  # paused there already
                self.progress.say(paused_message(cfg.name, self.t, stop_at, self.checkpoint_where()))
                return self.curve_arrays()
            self.open_outputs()
            with StopSignals() as stop:
                if self.t == 0:
                    self.start_evaluation()
                evaluated = len(self.curves[0])
                while self.t < cfg.max_time_steps:
                    self.step()
                    if self.t % cfg.eval_freq == 0:
                        self.start_evaluation()
                    if self.newly_done:
                        self.note_done()
                        if len(self.stopped) == len(self.seeds):
                            break
                    reached = False
                    if stop_when is not None and len(self.curves[0]) != evaluated and self.t < cfg.max_time_steps:
                        evaluated = len(self.curves[0])
                        reached = all(stop_when(self.curves[self.rows(k)]) for k in range(len(self.seeds))
                                      if k not in self.stopped)
                    paused = stop_at is not None and self.t >= stop_at and self.t < cfg.max_time_steps
                    if reached or paused or stop.signum or self.checkpoint_due():
                        self.save_checkpoint()
                    if reached or paused or stop.signum:  # checkpoints on or off: the episodes played up to here
                        self.save_curves()
                    if reached:
                        self.progress.say(f"{cfg.name} | stopped at step {self.t}: the stop condition holds")
                        return self.curve_arrays()
                    if paused:
                        self.progress.say(paused_message(cfg.name, self.t, stop_at, self.checkpoint_where()))
                        return self.curve_arrays()
                    if stop.signum:  # named: the seeds this process was still training
                        running = [seed for seed in self.seeds if seed not in self.done_curves] or self.seeds
                        raise Interrupted(stop.signum, interrupted_message(stop.signum, cfg.name_for(running), self.t,
                                                                           self.checkpoint_where()))
            self.finish()
        return self.curve_arrays()

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
        if self.episode_log is not None:
            self.episode_log.observe(rewards, ended, self.t + self.learner.steps_per_iteration)
        if not warmup:
            self.learner.train(self.t)  # in a worker pool, the evaluation episodes step meanwhile
        if self.episode_evals is not None:  # after this step's update: the actor the next episode starts with
            self.newly_done += self.episode_evals.after_step(np.asarray(ended, dtype=bool), self.t + 1,
                                                             self.greedy_policy)
        if ev is not None:
            ev.observe(*self.envs.eval_results())
            ev.advance(self.eval_pace - 1)
            if ev.done:
                self.finish_evaluation()
        self.t += self.learner.steps_per_iteration

    def greedy_policy(self, obs: np.ndarray) -> np.ndarray:
        """Every member's current actor without noise: [M, E, obs_dim] -> [M, E, act_dim]."""
        return self.agents.act(obs).cpu().numpy()

    def note_done(self) -> None:
        """Members became done (solved, or out of episodes): a seed whose agents are all done stops here (its files
        finished at this step, its record saying why); otherwise its record says who is solved so far."""
        newly, self.newly_done = self.newly_done, []
        ee = self.episode_evals
        for k, files in enumerate(self.files):
            rows = self.rows(k)
            if k in self.stopped or not any(rows.start <= m < rows.stop for m in newly):
                continue
            if all(ee.done[rows]):
                self.stop_seed(k)
            else:
                files.update_record(**ee.record(rows))

    def stop_seed(self, k: int) -> None:
        """Seed k's run ends at this step; the other seeds of the process go on (its members keep computing in the
        batched model, untouched by and not touching the others, but nothing of it is written any more)."""
        self.finish_evaluation()  # an evaluation under way belongs to the curves
        rows, ee = self.rows(k), self.episode_evals
        self.save_seed_files(k)
        reason = "solved" if all(s is not None for s in ee.solved[rows]) else "max_episodes"
        self.files[k].finish(self.t, stopped=reason, **ee.record(rows))
        self.stopped.add(k)
        self.done_curves[self.seeds[k]] = [list(c) for c in self.curves[rows]]
        self.progress.say(f"{self.seed_cfgs[k].stem} | stopped at step {self.t}: "
                          + ("every agent solved" if reason == "solved" else "every agent solved or out of episodes")
                          + f" (episodes {ee.episodes[rows]})")

    # ---- around the loop -----------------------------------------------------------------------
    @contextmanager
    def locked(self):
        """Every seed's lock (all or none) while inside; the environments closed on leaving."""
        with ExitStack() as cleanup:
            for files in list(self.files):
                files.lock.acquire()
                cleanup.callback(files.lock.release)
            cleanup.callback(self.close)
            yield

    def open_outputs(self) -> None:
        """Each seed's JSON record (and TensorBoard writer); the progress clock starts."""
        ee = self.episode_evals
        for k, files in enumerate(self.files):
            rows = self.rows(k)
            files.write_record(self.device, self.t, self.seeds, self.workers, self.recorded_tasks[rows])
            if ee is not None and any(ee.done[rows]):  # a resume keeps what the record said of its done agents
                files.update_record(**ee.record(rows))
        self.progress.start(self.t, [files.board(self.t) for files in self.files] if self.cfg.tensorboard else [])

    def finish(self) -> None:
        """The last evaluation; each seed's record says finished, its checkpoint goes (seeds that stopped earlier
        have finished already)."""
        self.finish_evaluation()
        ee = self.episode_evals
        for k, files in enumerate(self.files):
            if k in self.stopped:
                continue
            if self.cfg.episode_eval:
                self.save_seed_files(k)  # episodes after the last evaluation
            files.finish(**(ee.record(self.rows(k)) if ee is not None else {}))

    def start_evaluation(self) -> None:
        """Evaluate snapshots of every member's actor taken now: at once, or beside training (``--env_workers``)."""
        self.finish_evaluation()
        self.check_finite()
        rate = self.progress.rate(self.t)
        if self.cfg.save_model:
            for k, files in enumerate(self.files):
                files.save_models([self.agents.agent_state(m) for m in range(self.rows(k).start, self.rows(k).stop)])
        period = self.learner.period_stats()
        if self.learner.scheme.writes_consensus:  # of the parameters evaluated now, one value per seed
            period["consensus"] = np.repeat(self.learner.scheme.consensus(), self.cfg.num_agents)
        if self.learner.scheme.writes_gossip:  # skipped combines and message ages since the last evaluation
            period["gossip"] = self.learner.scheme.gossip_stats()
        self.pending = Evaluation(self.envs, self.learner.snapshot(), self.t, period, rate, self.own_task)
        if self.eval_pace is None:
            self.finish_evaluation()

    def finish_evaluation(self) -> None:
        """Play the pending evaluation to its end; append to and save the curves, report progress."""
        ev, self.pending = self.pending, None
        if ev is None:
            return
        scores = ev.run()
        for m, score in enumerate(scores):
            self.curves[m].append(float(score))
            self.weight_curves[m].append(float(ev.period["weight"][m]))
        if "consensus" in ev.period:
            for k, curve in enumerate(self.consensus_curves):
                curve.append(float(ev.period["consensus"][self.rows(k).start]))
        if "gossip" in ev.period:
            for m, row in enumerate(ev.period["gossip"]):
                self.gossip_curves[m].append([float(x) for x in row])
        if self.cfg.eval_tasks == "all":
            for m, row in enumerate(ev.task_scores()):
                self.task_curves[m].append([float(x) for x in row])
        self.save_curves()
        self.progress.evaluation(ev.t, scores, ev.period, ev.rate)

    def save_curves(self) -> None:
        for k in range(len(self.files)):
            if k not in self.stopped:
                self.save_seed_files(k)

    def save_seed_files(self, k: int) -> None:
        """The k-th seed's curves and the files beside them, as they are now."""
        files = self.files[k]
        files.save_curves(self.curves[self.rows(k)])
        if self.learner.scheme.writes_weights:
            files.save_weights(self.weight_curves[self.rows(k)])
        if self.learner.scheme.writes_consensus:
            files.save_consensus(self.consensus_curves[k])
        if self.learner.scheme.writes_gossip:
            files.save_gossip(self.gossip_curves[self.rows(k)])
        if self.cfg.eval_tasks == "all":
            files.save_task_curves(self.task_curves[self.rows(k)])
        if self.cfg.episode_eval:
            files.save_episode_evals(self.episode_evals.arrays(self.rows(k)))
        if self.episode_log is not None:
            files.save_episode_logs([self.episode_log.csv(m) for m in range(self.rows(k).start, self.rows(k).stop)])

    # ---- starting, resuming, checkpoints ------------------------------------------------------
    def prepare(self) -> bool:
        """Resume, skip or start each seed as its files say (``plan_resume`` decides for all before anything is
        written). Returns True when every seed had already finished."""
        cfg = self.cfg
        plan = plan_resume(self.seeds, self.files)
        self.done_curves = plan.finished
        for s in plan.finished:
            self.progress.say(f"{cfg.for_seed(s).stem} | already complete ({cfg.max_time_steps} steps): nothing to do")
        if not plan.active:
            return True
        if plan.active != self.seeds:
            self.build(plan.active)
        for s, files in zip(self.seeds, self.files):
            if s in plan.fresh:
                if cfg.resume and files.existing():
                    self.progress.say(f"{files.cfg.stem} | no checkpoint at {files.checkpoint}: starting from step 0")
                files.clear()
        if plan.states:
            self.load_checkpoints([plan.states[s] for s in self.seeds if s in plan.states])
            self.note_thread_change([plan.states[s] for s in self.seeds if s in plan.states])
            self.save_curves()  # evaluations after the checkpoint are done again
            for files in self.files:
                self.progress.say(f"{files.cfg.stem} | resumed from {files.checkpoint} at step {self.t}")
        return False

    def note_thread_change(self, states: list[dict]) -> None:
        """One line on stderr when a CPU run resumes with another torch thread count, or on a CPU with another
        instruction set (AVX2 / AVX-512: float32 rounds otherwise), than its checkpoint's: the rest of the run is then
        not bit for bit the run that would not have stopped (matrix products' last bits)."""
        if self.device.type != "cpu" or self.cfg.quiet:
            return
        before = sorted({s["torch_threads"] for s in states if s.get("torch_threads")})  # older checkpoints: unknown
        now = torch.get_num_threads()
        if before and before != [now]:
            print(f"note: {self.cfg.name} was checkpointed with {' / '.join(map(str, before))} torch thread(s) and "
                  f"resumes with {now} (--threads): the curves from step {self.t} on may differ in the last bits from "
                  f"an uninterrupted run; the record's 'resumes' lists each resume's threads", file=sys.stderr)
        cpus = sorted({s["cpu_capability"] for s in states if s.get("cpu_capability")})
        if cpus and cpus != [cpu_capability()]:
            print(f"note: {self.cfg.name} was checkpointed on a CPU with {' / '.join(cpus)} kernels and resumes on "
                  f"one with {cpu_capability()}: the curves from step {self.t} on may differ in the last bits from an "
                  f"uninterrupted run; the record's 'resumes' lists each resume's CPU", file=sys.stderr)

    def checkpoint_due(self) -> bool:
        """A periodic checkpoint (--checkpoint_freq) falls on this step (or within the K environment steps it just
        took); none at the end (the run finishes)."""
        freq, stride = self.cfg.checkpoint_freq, self.learner.steps_per_iteration
        return bool(freq) and self.t // freq > (self.t - stride) // freq and self.t < self.cfg.max_time_steps

    def checkpoint_where(self) -> str | None:
        """Where the checkpoints go: the file (one seed) or the folder; None when --checkpoint_freq is 0."""
        if not self.cfg.checkpoint_freq:
            return None
        return str(self.files[0].checkpoint) if len(self.files) == 1 else f"{self.files[0].checkpoint.parent}/"

    def seed_state(self, k: int) -> dict:
        """The k-th seed's checkpoint: what a process of that seed alone would write."""
        rows = self.rows(k)
        return {"format": CHECKPOINT_FORMAT, "config": asdict(self.seed_cfgs[k]), "t": self.t,
                "torch_threads": torch.get_num_threads(), "cpu_capability": cpu_capability(),
                "curves": self.curves[rows], "weight_curves": self.weight_curves[rows],
                "consensus_curve": self.consensus_curves[k],
                "task_curves": self.task_curves[rows], "gossip_curves": self.gossip_curves[rows],
                **({"episode_evals": self.episode_evals.state_dict(rows)} if self.episode_evals is not None else {}),
                **({"episode_log": self.episode_log.state_dict(rows)} if self.episode_log is not None else {}),
                **self.learner.state_dict(k), **self.envs.state_dict(rows)}

    def save_checkpoint(self) -> None:
        self.finish_evaluation()  # a checkpoint holds complete curves; a stop without one too
        if not self.cfg.checkpoint_freq:
            return
        self.check_finite()
        for k, files in enumerate(self.files):
            if k not in self.stopped:
                files.save_checkpoint(self.seed_state(k))
        self.last_checkpoint = self.t

    def load_checkpoints(self, states: list[dict]) -> None:
        """Continue exactly where the checkpoints (one per seed, all at one step) left off."""
        self.learner.load_state_dicts(states)
        self.envs.load_state_dicts(states)
        self.t = int(states[0]["t"])
        self.curves = [list(c) for s in states for c in s["curves"]]
        self.weight_curves = [list(w) for s in states for w in s["weight_curves"]]
        self.consensus_curves = [list(s.get("consensus_curve", [])) for s in states]
        self.task_curves = [[list(r) for r in c] for s in states for c in s.get("task_curves", [[]] * len(s["curves"]))]
        self.gossip_curves = [[list(r) for r in c] for s in states
                              for c in s.get("gossip_curves", [[]] * len(s["curves"]))]
        if self.episode_evals is not None:
            self.episode_evals.load_state_dicts([s.get("episode_evals") for s in states])
        if self.episode_log is not None:
            self.episode_log.load_state_dicts([s.get("episode_log") for s in states])
        self.last_checkpoint = self.t

    # ---- guards and messages ------------------------------------------------------------------
    def check_finite(self) -> None:
        """Stop naming seed, agent and step when a loss or a parameter went NaN/inf (one host sync)."""
        n = self.cfg.num_agents
        members = [f"agent {m % n} (seed {s}) of {self.seed_cfgs[m // n].stem}"
                   for m, s in enumerate(self.member_seeds)]
        where = self.checkpoint_where() or str(self.files[0].checkpoint)
        message = non_finite_message(self.learner.broken(), self.t, members, where, self.last_checkpoint)
        if message is not None:
            raise NonFinite(message)

    def curve_arrays(self) -> list[np.ndarray]:
        """Every member's curve, seed by seed (seeds that had already finished included)."""
        by_seed = dict(self.done_curves)
        by_seed.update({s: self.curves[self.rows(k)] for k, s in enumerate(self.seeds) if k not in self.stopped})
        return [np.asarray(c, dtype=np.float64) for s in self.cfg.seed_list() for c in by_seed[s]]

    def close(self) -> None:
        self.progress.close()
        self.pending = None
        self.envs.close()
        if self.episode_evals is not None:
            self.episode_evals.close()


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
