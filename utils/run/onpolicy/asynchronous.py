"""A3C's training run: W asynchronous actor-learner processes on one shared model (Hogwild), evaluated by this one.

Design (``AsyncTrainer``):

* Shared memory. The ``ActorCritic``'s parameters and the ``SharedAdam``'s state (step, moments) are moved to shared
  memory in this process and handed to W worker processes (torch.multiprocessing, spawn context). Each worker keeps a
  local copy of the model: before every rollout it pulls the shared weights, plays ``n_steps`` steps in its own
  environment, computes the rollout's gradient on the local copy (zeroed first: each push carries exactly that
  rollout's gradient), clips it by norm, hands it to the shared parameters and steps the shared optimizer, without a
  lock (Hogwild: two workers' steps may interleave, as in the paper). Every worker uses one torch thread.
* The step counter. ``StepGate`` holds, in shared memory under one lock, the steps claimed by workers, the steps done
  (the global step counter T: a worker adds its rollout's steps once its gradient is applied) and a limit. A worker
  claims min(n_steps, limit - claimed) steps before a rollout (a rollout is cut short to land on the limit) and waits
  while nothing is left. This process sets the limit to the next step where it must see the model as it is: the next
  evaluation (every ``eval_freq`` steps, from step 0), checkpoint (every ``checkpoint_freq`` steps), the end of the run
  (``max_time_steps``, the total over all workers). When T reaches the limit every worker is idle, so an evaluation
  sees the model exactly at a multiple of ``eval_freq`` and a checkpoint holds parameters and optimizer state that no
  worker is writing. An evaluation plays a snapshot of the model while the workers go on to the next limit.
* Evaluation: greedy actions (argmax / the Gaussian's mean) in ``eval_episodes`` environments reset with the seeds
  ``episode_seeds(seed + --eval_seed_offset, eval_episodes)``, as the off-policy Trainer evaluates; one curve per seed,
  ``{stem}.npy``, saved after every evaluation.
* Files as the Trainer writes them (``RunFiles``): the lock, the JSON record, the curve, the checkpoint (the shared
  model, the optimizer's state, T and the curve; every ``checkpoint_freq`` steps and on SIGINT/SIGTERM), and
  ``plan_resume`` deciding every seed's fate before anything is written. Several seeds run one after another.

Seeds: the shared model is initialised after ``torch.manual_seed(seed)``; worker w (0-based) resets its environment
once with, and seeds its torch sampling with, ``worker_seed(seed, w, t)`` = seed + 1000 * (w + 1) for a run started
at step 0 (a run resumed at step t > 0 draws a different seed from (seed + 1000 * (w + 1), t), not to replay the
episodes it began with). A3C is not reproducible bit for bit: the order in which the asynchronous gradients arrive
decides the run, so neither two runs of one seed nor a resumed run and an uninterrupted one give the same curve.

The worker processes are spawned: a script that runs an AsyncTrainer must do so under ``if __name__ == "__main__":``.
The JSON record's ``env_workers_used`` is the number of actor-learner processes.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import asdict, fields, replace

import numpy as np
import torch
import torch.multiprocessing as mp

from algorithms.onpolicy.a3c import ActorCritic, Rollout, SharedAdam, rollout_loss

from ...envs.atari import continues_game
from ...envs.registry import check_env, make_env
from ...envs.variants import task_for
from ...envs.workers import episode_seeds
from ...errors import Interrupted, NonFinite, UsageError, WorkerDied
from ...settings import defaults
from ..checkpoint import FORMAT as CHECKPOINT_FORMAT
from ..config import RunConfig, _check_execution, _check_folders
from ..files import RunFiles, load_error, model_path
from ..memory import check_fits
from ..plan import check_models, plan_resume
from ..progress import Progress, StopSignals, interrupted_message, paused_message
from ..seed_files import lock_all
from .episode_log import EpisodeLog
from .settings import A3CSettings

ACTIONS = ("box", "discrete")  # A3C takes both kinds of action space
WORKER_BYTES = 300e6  # one spawned actor-learner process (Python, torch, its environment): 370 MB resident on CartPole,
# part of it shared libraries counted in every process
POLL_S = 0.001  # how often an idle worker, and this process while it waits for the workers, look at the counter


# ---- settings ----------------------------------------------------------------------------------------------
def a3c_settings(algo: dict) -> dict:
    """cfg.algo with every A3C setting filled in from ``A3CSettings`` (onpolicy/settings.py); a UsageError names a key
    that A3C does not know or a value out of range."""
    known = [f.name for f in fields(A3CSettings)]
    unknown = sorted(set(algo) - set(known))
    if unknown:
        raise UsageError(f"A3C has no setting {unknown[0]!r}; its settings are {', '.join(known)}")
    s = {**defaults(A3CSettings), **algo}
    for key in ("n_steps", "num_processes", "hidden_size"):
        if not isinstance(s[key], (int, np.integer)) or isinstance(s[key], bool) or s[key] <= 0:
            raise UsageError(f"--{key} must be a positive integer, got {s[key]!r}")
        s[key] = int(s[key])
    for key in ("lr", "gamma", "gae_lambda", "ent_coef", "vf_coef", "max_grad_norm"):
        s[key] = float(s[key])
    A3CSettings(**s).check()
    return s


def check_a3c(cfg: RunConfig) -> None:
    """A3C's own limits (one shared model, CPU worker processes), checked by ``validate`` before its common checks."""
    if cfg.policy != "A3C":
        raise UsageError(f"AsyncTrainer trains A3C, not {cfg.policy!r}")
    for name in ("max_time_steps", "eval_freq", "eval_episodes"):
        if getattr(cfg, name) <= 0:
            raise UsageError(f"--{name} must be a positive integer, got {getattr(cfg, name)}")
    if cfg.eval_freq > cfg.max_time_steps:
        raise UsageError(f"--eval_freq {cfg.eval_freq} is larger than the run ({cfg.max_time_steps} steps): "
                         "lower --eval_freq or raise --max_time_steps")
    if cfg.num_agents != 1:
        raise UsageError(f"--num_agents {cfg.num_agents}: A3C trains one shared model; its actor-learners are "
                         "--num_processes")
    if not cfg.device.startswith("cpu"):
        raise UsageError(f"--device {cfg.device}: A3C's actor-learners run on CPU cores; drop --device")
    if cfg.flush_denormals:  # its actor-learners are spawned processes, each with the CPU's own default
        raise UsageError("--flush_denormals: A3C's actor-learner processes do not take it; drop it")
    if cfg.seeds is not None and (not cfg.seeds or len(set(cfg.seeds)) != len(cfg.seeds)):
        raise UsageError(f"--seeds {cfg.seeds}: give one or more different seeds")
    workers = a3c_settings(cfg.algo)["num_processes"]
    # each actor-learner is a spawned Python process with its own torch and environment
    check_fits(f"--num_processes {workers}: {workers} actor-learner processes", workers * WORKER_BYTES, None,
               "lower --num_processes")
    for seed in cfg.seed_list():
        if not 0 <= seed or seed + 1000 * workers >= 2**32:
            raise UsageError(f"--seed {seed}: seeds must be in [0, 2**32 - {1000 * workers})")
    _check_execution(cfg)
    _check_folders(cfg)


def worker_seed(seed: int, w: int, t: int = 0) -> int:
    """Worker w's environment and sampling seed in a run of ``seed`` (re)started at step ``t``."""
    base = seed + 1000 * (w + 1)
    return base if t == 0 else int(np.random.SeedSequence([base, t]).generate_state(1)[0])


# ---- the workers ---------------------------------------------------------------------------------------------
class StepGate:
    """The global step counter and the limit workers may not pass, in shared memory under one lock."""

    def __init__(self, ctx, t: int = 0):
        self.lock = ctx.Lock()
        self.claimed, self.done, self.limit = (ctx.RawValue("q", t) for _ in range(3))
        self.stopped = ctx.RawValue("b", 0)

    def claim(self, n_steps: int) -> int:
        """Steps this worker may play now (0: none left below the limit)."""
        with self.lock:
            n = min(n_steps, self.limit.value - self.claimed.value)
            if n > 0:
                self.claimed.value += n
            return max(n, 0)

    def complete(self, n: int) -> int:
        """Count a rollout's steps as done; the global step count T after them."""
        with self.lock:
            self.done.value += n
            return self.done.value

    def open(self, limit: int) -> None:
        with self.lock:
            self.limit.value = limit

    def close(self) -> int:
        """No more claims; returns the step the workers will stop at once their rollouts in flight are done."""
        with self.lock:
            self.limit.value = self.claimed.value
            return self.claimed.value

    @property
    def t(self) -> int:
        with self.lock:
            return self.done.value

    def stop(self) -> None:
        self.stopped.value = 1


class ActorLearner:
    """One worker's actor-learner: pull the shared weights, play n steps, push the rollout's gradient.

    ``shared``: the shared ``ActorCritic``; ``optimizer``: the optimizer over its parameters (a ``SharedAdam`` in a
    run; in tests any optimizer); ``settings``: ``a3c_settings``; the environment is reset once with ``seed``."""

    def __init__(self, shared: ActorCritic, optimizer: torch.optim.Optimizer, env, settings: dict, seed: int):
        self.shared, self.optimizer, self.env, self.s = shared, optimizer, env, settings
        self.local = ActorCritic(**shared.spec())
        self.obs, _ = env.reset(seed=int(seed))
        self.state = self.local.initial_state() if self.local.recurrent else None  # --recurrent: the acting state
        self.reward_scale = float(settings.get("reward_scale", 1.0))
        self.whole_games = bool(settings.get("whole_games", True))  # False: a resumed older run's rows, episodes
        self.ep_return, self.ep_length = 0.0, 0
        self.finished: list[tuple[float, int]] = []  # (return, length) of the episodes ended since the last take

    def pull(self) -> None:
        self.local.load_state_dict(self.shared.state_dict())

    def rollout(self, n: int) -> Rollout:
        """n steps with the local model's sampled actions; an episode that ends is reset at once."""
        obs, actions, rewards, term, trunc, next_obs = [], [], [], [], [], []
        start = self.state
        for _ in range(n):
            o = torch.as_tensor(self.obs, dtype=torch.float32)
            if self.state is None:
                a, env_action = self.local.act(o)
            else:
                a, env_action, self.state = self.local.act(o, state=self.state)
            nxt, r, terminated, truncated, info = self.env.step(int(env_action) if self.local.discrete else env_action)
            obs.append(o)
            actions.append(a)
            rewards.append(float(r) * self.reward_scale)  # what the update learns from (episode returns: raw)
            term.append(bool(terminated))
            trunc.append(bool(truncated))
            next_obs.append(torch.as_tensor(nxt, dtype=torch.float32))
            # the log's rows are whole games at their own score (an Atari game's lives, unclipped)
            score = float(info.get("raw_reward", r)) if self.whole_games else float(r)
            self.ep_return, self.ep_length = self.ep_return + score, self.ep_length + 1
            if terminated or truncated:
                if not (self.whole_games and continues_game(self.env)):
                    self.finished.append((self.ep_return, self.ep_length))
                    self.ep_return, self.ep_length = 0.0, 0
                if self.state is not None:
                    self.state = self.local.initial_state()
            self.obs = self.env.reset()[0] if terminated or truncated else nxt
        return Rollout(torch.stack(obs), torch.stack(actions), torch.tensor(rewards), torch.tensor(term),
                       torch.tensor(trunc), torch.stack(next_obs), start)

    def push(self, rollout: Rollout) -> None:
        """The rollout's gradient (of the local copy, clipped by norm) onto the shared parameters; one shared step.

        The local gradients are zeroed first. (The reference implementations never zero them: they counted on the
        shared optimizer's zero_grad clearing the gradient tensors they alias, which torch >= 2.0 sets to None
        instead, so their k-th push carries the sum of the worker's first k rollouts' gradients.)"""
        s = self.s
        self.local.zero_grad(set_to_none=True)
        loss = rollout_loss(self.local, rollout, s["gamma"], s["gae_lambda"], s["ent_coef"], s["vf_coef"])
        loss.backward()
        if s["max_grad_norm"] > 0:  # 0: no clipping
            torch.nn.utils.clip_grad_norm_(self.local.parameters(), s["max_grad_norm"])
        for shared, local in zip(self.shared.parameters(), self.local.parameters()):
            shared.grad = local.grad
        self.optimizer.step()

    def iteration(self, n: int) -> Rollout:
        self.pull()
        rollout = self.rollout(n)
        self.push(rollout)
        return rollout


def _worker(w: int, shared: ActorCritic, optimizer: SharedAdam, gate: StepGate, env_id: str, task, settings: dict,
            seed: int, errors, episodes=None) -> None:
    """A worker process's life: actor-learner iterations while steps are left below the gate's limit; each training
    episode that ends goes to ``episodes`` as (w, T once its rollout was applied, return, length, time.time())."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the trainer decides
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if ids != {id(p) for p in shared.parameters()}:
            raise RuntimeError("the optimizer does not hold the shared parameters")
        parent = os.getppid()
        learner = ActorLearner(shared, optimizer, make_env(env_id, task, actions=ACTIONS, who="A3C"), settings, seed)
        while not gate.stopped.value:
            n = gate.claim(settings["n_steps"])
            if n == 0:
                if os.getppid() != parent:  # the trainer is gone
                    return
                time.sleep(POLL_S)
                continue
            learner.iteration(n)
            t = gate.complete(n)
            if episodes is not None:
                for ret, length in learner.finished:
                    episodes.put((w, t, ret, length, time.time()))
            learner.finished.clear()
    except BaseException as e:
        errors.put(f"{type(e).__name__}: {e}".splitlines()[0])
        sys.exit(1)


class WorkerPool:
    """W actor-learner processes (spawned) on one shared model and optimizer behind a ``StepGate`` at step ``t``;
    their errors and finished training episodes come back through queues."""

    def __init__(self, cfg: RunConfig, model: ActorCritic, optimizer: SharedAdam, task, settings: dict, t: int):
        ctx = mp.get_context("spawn")
        self.stem, self.gate = cfg.stem, StepGate(ctx, t)
        self.errors, self.episodes = ctx.SimpleQueue(), ctx.SimpleQueue()
        self.processes = [ctx.Process(target=_worker, name=f"A3C-worker-{w}", daemon=True,
                                      args=(w, model, optimizer, self.gate, cfg.env, task, settings,
                                            worker_seed(cfg.seed, w, t), self.errors, self.episodes))
                          for w in range(settings["num_processes"])]

    def start(self) -> None:
        for p in self.processes:
            p.start()

    def finished_episodes(self) -> list[tuple]:
        """The training episodes the workers finished since the last call: (w, T, return, length, time.time())."""
        rows = []
        while not self.episodes.empty():
            rows.append(self.episodes.get())
        return rows

    def wait(self, target: int, signals, on_episodes, kept: str) -> int:
        """Until the workers have done ``target`` steps (or a stop signal came); the step reached. ``on_episodes``
        takes the episodes finished meanwhile; ``kept`` says what a worker's death leaves behind."""
        while True:
            t = self.gate.t
            on_episodes(self.finished_episodes())
            if t >= target or (signals is not None and signals.signum is not None):
                on_episodes(self.finished_episodes())  # what the last rollouts reported
                return t
            for w, p in enumerate(self.processes):
                if p.exitcode is not None:
                    self.died(w, p, t, kept)
            time.sleep(POLL_S)

    def died(self, w: int, p, t: int, kept: str) -> None:
        why = self.errors.get() if not self.errors.empty() else f"exit code {p.exitcode}"
        self.stop()
        raise WorkerDied(f"{self.stem}: A3C worker {w} (pid {p.pid}) died near step {t} ({why}); the other "
                         f"workers were stopped, {kept}")

    def stop(self) -> None:
        self.gate.stop()
        for p in self.processes:
            if p.pid is not None:
                p.join(timeout=10)
                if p.exitcode is None:
                    p.terminate()
                    p.join(timeout=5)


# ---- evaluation ------------------------------------------------------------------------------------------------
class GreedyEvaluation:
    """The evaluation episodes of one seed: ``episodes`` environments reset with ``episode_seeds(seed + offset, ...)``
    (``--eval_seed_offset``, 100 by default) and played with the model's greedy actions; ``__call__`` gives the mean
    return."""

    def __init__(self, env_id: str, task, seed: int, episodes: int, offset: int = 100):
        self.envs = [make_env(env_id, task, actions=ACTIONS, who="A3C", training=False) for _ in range(episodes)]
        self.seeds = episode_seeds(seed + offset, episodes)

    @torch.no_grad()
    def __call__(self, model: ActorCritic) -> float:
        obs = np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, self.seeds)])
        returns, active = np.zeros(len(self.envs)), np.ones(len(self.envs), dtype=bool)
        state = model.initial_state(len(self.envs)) if model.recurrent else None
        while active.any():
            o = torch.as_tensor(obs, dtype=torch.float32)
            if state is None:
                _, actions = model.act(o, greedy=True)
            else:  # one state per episode; an episode that ended keeps stepping its state, unused
                _, actions, state = model.act(o, greedy=True, state=state)
            for e in np.nonzero(active)[0]:
                o, r, terminated, truncated, _ = self.envs[e].step(int(actions[e]) if model.discrete else actions[e])
                obs[e], returns[e] = o, returns[e] + r
                active[e] = not (terminated or truncated)
        return float(returns.mean())

    def close(self) -> None:
        for env in self.envs:
            env.close()


# ---- the trainer -----------------------------------------------------------------------------------------------
class AsyncTrainer:
    """A3C on cfg.env for every seed of cfg (one after another); see the module's docstring.

    ``cfg.algo``: lr 1e-4, gamma 0.99, gae_lambda 1.0, ent_coef 0.01, vf_coef 0.5, max_grad_norm 40, n_steps 20,
    num_processes 2, hidden_size 64 (``A3CSettings``; missing keys take these, and the record and
    checkpoints list them all)."""

    def __init__(self, cfg: RunConfig, validated: bool = False):
        cfg = replace(cfg, algo=a3c_settings(cfg.algo))
        if not validated:
            # utils.run.checks.validate refuses "A3C" as long as the policy registry (utils.naming) does not list it:
            # the checks of its that apply here, and A3C's own
            check_a3c(cfg)
        check_models(cfg)
        self.cfg, self.s = cfg, cfg.algo
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.spec = a3c_spec(cfg)  # how every seed's shared model is built
        self.seed: A3CSeed | None = None  # the seed training now

    def run(self, stop_at: int | None = None, stop_when=None) -> list[np.ndarray]:
        """Train every seed to cfg.max_time_steps; the curves, one per seed (seeds already finished included).

        ``stop_at``: stop each seed at that step after writing a checkpoint (for training in pieces).
        ``stop_when(curves)``: stop a seed, with a checkpoint, after the first evaluation for which it is true of the
        seed's curves so far (``[curve]``: one member, as ``Trainer.run`` gives a seed's members)."""
        cfg = self.cfg
        stop_at = cfg.stop_at if stop_at is None else stop_at
        seeds = cfg.seed_list()
        files = [RunFiles(cfg.for_seed(s)) for s in seeds]
        curves = []
        with lock_all(files):
            plans = [plan_resume([s], [f]) for s, f in zip(seeds, files)]  # every seed decided before any writes
            for s, f, plan in zip(seeds, files, plans):
                if s in plan.finished:
                    if not cfg.quiet:
                        print(f"{f.cfg.stem} | already complete ({cfg.max_time_steps} steps): nothing to do")
                    curves.append(np.asarray(plan.finished[s][0], dtype=np.float64))
                    continue
                state = plan.states.get(s)
                if stop_at is not None and state is not None and stop_at <= int(state["t"]) < cfg.max_time_steps:
                    if not cfg.quiet:  # paused there already
                        print(paused_message(f.cfg.stem, int(state["t"]), stop_at, str(f.checkpoint)), flush=True)
                    curves.append(np.asarray(state["curves"][0], dtype=np.float64))
                    continue
                self.seed = A3CSeed(f, self.s, self.spec)
                curve = self.seed.train(state, stop_at, stop_when)
                curves.append(np.asarray(curve, dtype=np.float64))
        return curves

    @property
    def processes(self) -> list:
        """The current seed's worker processes."""
        return self.seed.pool.processes if self.seed is not None and self.seed.pool is not None else []

    @property
    def episode_log(self) -> EpisodeLog:
        """The current seed's training episodes."""
        if self.seed is None:
            raise RuntimeError("episode_log: no seed is training")
        return self.seed.episode_log


class A3CSeed:
    """One seed's A3C run: its shared model and optimizer, its worker pool, the gate opened limit by limit, its
    evaluations, episodes and checkpoints (``AsyncTrainer`` runs the seeds one after another)."""

    def __init__(self, files: RunFiles, settings: dict, spec: dict):
        self.files, self.cfg, self.s, self.spec = files, files.cfg, settings, spec
        self.pool: WorkerPool | None = None
        self.last_checkpoint: int | None = None

    def train(self, state: dict | None, stop_at: int | None, stop_when) -> list[float]:
        """Train from ``state`` (a checkpoint) or step 0 to the budget, a pause or a stop; the seed's curve."""
        cfg, s, files = self.cfg, self.s, self.files
        task = task_for(cfg.env, cfg.seed)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        self.model = ActorCritic(**self.spec).share_memory()
        self.optimizer = SharedAdam(self.model.parameters(), lr=s["lr"])
        self.t, self.curve, self.last_checkpoint = 0, [], None
        # the training episodes, as the lockstep family logs them (env = the worker's index)
        self.episode_log, self.epoch = EpisodeLog(1, s["num_processes"]), time.time()
        progress = Progress(cfg.stem, cfg.max_time_steps, [cfg.seed], lambda k: slice(0, 1), cfg.quiet)
        if state is not None:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.t, self.curve, self.last_checkpoint = int(state["t"]), list(state["curves"][0]), int(state["t"])
            files.save_curves([self.curve])  # evaluations after the checkpoint are done again
            self.episode_log.load_state_dicts([state.get("episode_log")])
            files.save_episode_logs([self.episode_log.csv(0)])  # episodes after the checkpoint are played again
            progress.say(f"{cfg.stem} | resumed from {files.checkpoint} at step {self.t}")
        else:
            if cfg.resume and files.existing():
                progress.say(f"{cfg.stem} | no checkpoint at {files.checkpoint}: starting from step 0")
            if cfg.load_model:  # the shared model starts from a --save_model file (the optimizer from scratch)
                self.model.load_state_dict(load_a3c_model(cfg, self.spec))
            files.clear()
        files.write_record(torch.device("cpu"), self.t, [cfg.seed], s["num_processes"], [task])
        progress.start(self.t)
        evaluation = GreedyEvaluation(cfg.env, task, cfg.seed, cfg.eval_episodes, cfg.eval_seed_offset)
        # a checkpoint from before whole-game rows: the workers go on logging their episodes (lives on Atari)
        workers = {**s, "whole_games": self.episode_log.games}
        self.pool = WorkerPool(cfg, self.model, self.optimizer, task, workers, self.t)
        try:
            self.pool.start()
            with StopSignals() as signals:
                finished = self.loop(files, evaluation, progress, signals, stop_at, stop_when)
            if finished:
                self.save_episodes(files)
                files.finish()
        finally:
            self.pool.stop()
            evaluation.close()
            progress.close()
        return self.curve

    @property
    def workers(self) -> WorkerPool:
        """The pool of the seed's run, while it runs."""
        if self.pool is None:
            raise RuntimeError("the worker pool is used before the run started it")
        return self.pool

    def loop(self, files, evaluation, progress, signals, stop_at, stop_when) -> bool:
        """Open the gate limit by limit, evaluating and checkpointing at each; True when the run finished."""
        cfg, gate = self.cfg, self.workers.gate
        pending = self.snapshot() if self.evaluation_due() else None
        while True:
            if self.t >= cfg.max_time_steps:
                self.workers.stop()
                self.evaluate(pending, evaluation, progress, files)
                return True
            target = self.next_limit(stop_at)
            gate.open(target)
            if pending is not None:  # the workers train on meanwhile
                self.evaluate(pending, evaluation, progress, files)
                pending = None
                if stop_when is not None and stop_when([self.curve]):
                    self.t = self.wait(gate.close(), None, files)
                    self.save_checkpoint(files)
                    return False
            self.t = self.wait(target, signals, files)
            stopping = signals.signum is not None
            if stopping:  # the rollouts in flight end the run's last steps
                self.t = self.wait(gate.close(), None, files)
            pending = self.snapshot() if self.evaluation_due() else None
            if stopping or self.t == stop_at or self.checkpoint_due():
                self.evaluate(pending, evaluation, progress, files)  # a checkpoint holds complete curves
                pending = None
                self.save_checkpoint(files)
            if stopping:
                self.save_episodes(files)  # checkpoints off too: the episodes played since the last evaluation
                where = str(files.checkpoint) if cfg.checkpoint_freq else None
                raise Interrupted(signals.signum, interrupted_message(signals.signum, files.cfg.stem, self.t, where))
            if self.t == stop_at:
                progress.say(paused_message(files.cfg.stem, self.t, stop_at, str(files.checkpoint)))
                return False

    def next_limit(self, stop_at: int | None) -> int:
        cfg, t = self.cfg, self.t
        after = lambda freq: (t // freq + 1) * freq  # noqa: E731
        limits = [cfg.max_time_steps, after(cfg.eval_freq)]
        if cfg.checkpoint_freq:
            limits.append(after(cfg.checkpoint_freq))
        if stop_at is not None and stop_at > t:
            limits.append(stop_at)
        return min(limits)

    def wait(self, target: int, signals, files) -> int:
        """Until the workers have done ``target`` steps (or a stop signal came); the step reached."""
        kept = (f"the last checkpoint ({files.checkpoint}, step {self.last_checkpoint}) is kept"
                if self.last_checkpoint is not None else "no checkpoint was written")
        return self.workers.wait(target, signals, self.log_episodes, kept)

    # ---- training episodes, evaluations and checkpoints ----------------------------------------------------------
    def log_episodes(self, rows: list[tuple]) -> None:
        """The workers' finished episodes into the log (wall seconds counted from the run's start)."""
        log = self.episode_log
        for w, t, ret, length, when in rows:
            log.rows[0].append((int(w), int(t), float(ret), int(length), round(log.wall_before + when - self.epoch, 3)))

    def save_episodes(self, files: RunFiles) -> None:
        self.log_episodes(self.workers.finished_episodes())
        files.save_episode_logs([self.episode_log.csv(0)])

    def evaluation_due(self) -> bool:
        """Step t is a multiple of eval_freq whose evaluation the curve does not hold yet."""
        return self.t % self.cfg.eval_freq == 0 and len(self.curve) == self.t // self.cfg.eval_freq

    def checkpoint_due(self) -> bool:
        freq = self.cfg.checkpoint_freq
        return bool(freq) and self.t % freq == 0 and self.t < self.cfg.max_time_steps

    def snapshot(self) -> tuple[int, ActorCritic]:
        """(t, a copy of the shared model now): every worker is idle at the gate."""
        copy = ActorCritic(**self.model.spec())
        copy.load_state_dict(self.model.state_dict())
        return self.t, copy

    def evaluate(self, pending, evaluation: GreedyEvaluation, progress: Progress, files: RunFiles) -> float | None:
        """Play a snapshot's evaluation episodes; the curve gets (and saves) its mean return."""
        if pending is None:
            return None
        t, model = pending
        if not all(torch.isfinite(p).all() for p in model.parameters()):
            kept = (f"the last good checkpoint ({files.checkpoint}, step {self.last_checkpoint}) is kept"
                    if self.last_checkpoint is not None else "no checkpoint was written")
            raise NonFinite(f"{self.cfg.stem}: non-finite parameters by step {t}; stopped, {kept}. Lower --lr or "
                            "check the rewards")
        score = evaluation(model)
        self.curve.append(score)
        files.save_curves([self.curve])
        if self.cfg.save_model:  # the model just evaluated, playable by python -m utils.play
            files.save_models([a3c_model_file(model, t)])
        self.save_episodes(files)
        progress.evaluation(t, np.array([score]), {}, progress.rate(t))
        return score

    def save_checkpoint(self, files: RunFiles) -> None:
        """The shared model, the optimizer's state, the step and the curve (the workers are idle at the gate)."""
        if not self.cfg.checkpoint_freq:
            return
        state = {"format": CHECKPOINT_FORMAT, "config": asdict(files.cfg), "t": self.t, "algorithm": "A3C",
                 "torch_threads": torch.get_num_threads(), "curves": [list(self.curve)],
                 "model": {k: v.clone() for k, v in self.model.state_dict().items()},
                 "optimizer": self.optimizer.state_dict()}
        self.save_episodes(files)
        state["episode_log"] = {**self.episode_log.state_dict(slice(0, 1)),
                                "wall": self.episode_log.wall_before + time.time() - self.epoch}
        files.save_checkpoint(state)
        self.last_checkpoint = self.t


def a3c_model_file(model: ActorCritic, t: int) -> dict:
    """What --save_model writes for A3C: the shared model's parameters, how to build it, and its step."""
    return {"algorithm": "A3C", "spec": model.spec(), "model": {k: v.clone() for k, v in model.state_dict().items()},
            "t": int(t)}


def load_a3c_model(cfg: RunConfig, spec: dict) -> dict:
    """--load_model NAME: the weights of models/NAME.pt ("default": the run's own name), an A3C model file of a
    model built as ``spec``; a UsageError in one line otherwise."""
    path = model_path(cfg, 0, cfg.stem)
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(saved, dict) or saved.get("algorithm") != "A3C":
            raise ValueError("not an A3C model file")
        if json.dumps(saved["spec"], sort_keys=True) != json.dumps(spec, sort_keys=True):
            raise ValueError(f"its model is built as {saved['spec']}, this run's as {spec}")
        a3c_model(spec, saved["model"])  # every tensor's name and shape
    except Exception as e:
        raise load_error(e, path, cfg) from None
    return saved["model"]


def a3c_model(spec: dict, weights: dict) -> ActorCritic:
    """An A3C model built from its ``spec`` with ``weights`` loaded (a model file's or a checkpoint's)."""
    model = ActorCritic(**spec)
    model.load_state_dict(weights)
    return model.eval()


def a3c_spec(cfg: RunConfig) -> dict:
    """The spec of the model a run of ``cfg`` trains (from its environment's spaces, ``registry.check_env``: the
    spaces of every task of a variant are those of the id)."""
    probe = check_env(cfg.env, ACTIONS, "A3C")
    shape, space = probe.observation_space.shape, probe.action_space
    discrete, s = not hasattr(space, "low"), a3c_settings(cfg.algo)
    spec = {"obs_dim": shape[0], "act_dim": int(space.n) if discrete else space.shape[0],
            "hidden_size": s["hidden_size"]}
    if not discrete:
        spec.update(low=space.low.tolist(), high=space.high.tolist())
    if s["recurrent"]:
        spec["recurrent"] = True
    if len(shape) == 3:
        spec["frames"] = list(shape)
    if s["encoder"] != defaults(A3CSettings)["encoder"]:
        if len(shape) != 3:
            raise UsageError(f"--encoder {s['encoder']} is an Atari trunk; {cfg.env} has flat observations")
        spec["encoder"] = s["encoder"]
    return spec


def train(cfg: RunConfig, validated: bool = False) -> list[np.ndarray]:
    """Train A3C for every seed of cfg; the curves (one per seed), saved after every evaluation."""
    return AsyncTrainer(cfg, validated).run()
