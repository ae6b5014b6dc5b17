"""Every environment of a run: the members' training environments and their evaluation episodes.

``LocalEnvs`` steps them in this process. ``EnvWorkers`` gives each of K worker processes a slice of the
members (their training environments and their evaluation environments), with the arrays in shared
memory and one message per step per worker. Both run the same ``LocalEnvs`` code on the same seeds, so
they give the same transitions, returns and checkpoints.

A step may carry a step of the evaluation episodes too (``eval_actions``). In a pool, the workers step
the evaluation environments after replying for the training ones, so that work overlaps the update the
trainer runs meanwhile; ``eval_results`` waits for it.
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import traceback
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from ..errors import UsageError, WorkerDied
from .atari import continues_game
from .registry import make_env, seeded_envs
from .replay import RESET, EpisodeLog, restore_env


def join_states(states: list[dict]) -> dict:
    """Training-environment checkpoint parts (``state_dict`` of consecutive members) as one, in member order."""
    return {"obs": torch.cat([s["obs"] for s in states]),
            **{k: [x for s in states for x in s[k]] for k in ("episode_count", "episodes", "action_space_rng")}}


def member_tasks(seeds: Sequence[int], tasks, eval_tasks, members: int | None = None) -> tuple[list, list[list]]:
    """Each training environment's task (None: the environment's own physics) and the tasks each of the
    ``members`` (default: one per training environment; K environments per member are consecutive) is evaluated
    on (by default its own alone); every member is evaluated on as many tasks."""
    members = len(seeds) if members is None else members
    k = len(seeds) // members
    tasks = list(tasks) if tasks is not None else [None] * len(seeds)
    eval_tasks = [list(row) for row in eval_tasks] if eval_tasks is not None else [[t] for t in tasks[::k]]
    if len(tasks) != len(seeds) or len(eval_tasks) != members or len({len(row) for row in eval_tasks}) != 1:
        raise ValueError("one task per environment and one equally long list of evaluation tasks per member")
    return tasks, eval_tasks


def action_layout(space) -> tuple[tuple[int, ...], np.dtype, int]:
    """How one environment's actions are held: (shape, dtype, act_dim); act_dim counts a discrete space's actions."""
    if isinstance(space, gym.spaces.Discrete):
        return (), np.dtype(np.int64), int(space.n)
    return tuple(space.shape), np.dtype(space.dtype), int(space.shape[0])


def train_rows(rows: slice, per_member: int) -> slice:
    """The training environments of the members ``rows`` (K = ``per_member`` consecutive ones each)."""
    start = 0 if rows.start is None else rows.start * per_member
    stop = None if rows.stop is None else rows.stop * per_member
    return slice(start, stop)


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """Reset seeds of the evaluation episodes, derived from ``seed`` (the run's seed + ``--eval_seed_offset``, 100 by
    default)."""
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(episodes)]


class Described:
    """What ``describe`` sets on a set of environments (the learner's sizes and the step limit)."""

    obs_shape: tuple[int, ...]
    obs_dim: int
    discrete: bool
    act_dim: int
    low: np.ndarray | None
    high: np.ndarray | None
    max_episode_steps: int | None


class LocalEnvs(Described):
    """Training environments seeded with ``seeds`` (K = len(seeds) / len(eval_seeds) consecutive ones per member:
    the on-policy learners' ``--envs_per_agent``; one for the off-policy ones), and ``episodes`` evaluation
    environments per member reset with the episode seeds of ``eval_seeds[m]``. ``actions``: the action spaces
    the algorithm takes (``registry.make_env``), ``who`` names it in errors.

    Task variants: member m's environments play ``tasks[m]`` (None: the environment as registered); it is
    evaluated on each task of ``eval_tasks[m]`` (default: its own) with the same episode seeds, the evaluation
    slots of a member being task-major: [task 0: episodes 0..E-1, task 1: ..., ...]."""

    def __init__(self, env_id: str, seeds: Sequence[int], eval_seeds: Sequence[int], episodes: int,
                 tasks: Sequence[dict | None] | None = None, eval_tasks: Sequence[Sequence[dict | None]] | None = None,
                 actions: tuple[str, ...] = ("box",), who: str = "DASE"):
        self.env_id, self.seeds = env_id, [int(s) for s in seeds]
        self.per_member = len(self.seeds) // len(eval_seeds)
        self.kinds = dict(actions=actions, who=who)
        self.tasks, eval_tasks = member_tasks(self.seeds, tasks, eval_tasks, len(eval_seeds))
        self.eval_tasks_per_member = len(eval_tasks[0]) if eval_tasks else 1
        self.envs, self.obs = seeded_envs(env_id, self.seeds, self.tasks, **self.kinds)
        self.episodes = [EpisodeLog(s) for s in self.seeds]
        self.episode_count = [0] * len(self.seeds)
        describe(self, self.envs[0])
        self.eval_envs = [[make_env(env_id, task, **self.kinds, training=False) for task in row for _ in range(episodes)]
                          for row in eval_tasks]
        self.eval_seeds = [episode_seeds(int(s), episodes) * self.eval_tasks_per_member for s in eval_seeds]
        self.eval_obs = np.zeros((len(eval_seeds), episodes * self.eval_tasks_per_member, *self.obs_shape),
                                 self.envs[0].observation_space.dtype)
        self.eval_out: tuple | None = None

    # ---- training environments ------------------------------------------------------------------
    def random_actions(self) -> np.ndarray:
        """Uniform actions from each environment's own seeded sampler (the warm-up phase)."""
        return np.stack([env.action_space.sample() for env in self.envs])

    def step(self, actions: np.ndarray | None, eval_actions: np.ndarray | None = None,
             eval_active: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """Act in every training environment (``None``: random actions); returns (obs, actions, rewards,
        next_obs, terminated, ended), ended = terminated or truncated. Finished episodes are reset at once; next_obs
        is the episode's real last state. With ``eval_actions``, also one step of the active evaluation episodes
        (see ``eval_results``). ``last_game`` then holds (scores, game_over) of the training environments: the
        game's own rewards (an Atari game's unclipped ``info["raw_reward"]``) and whether the game ended (not an
        Atari life lost), for the log of training episodes."""
        if actions is None:
            actions = self.random_actions()
        n = len(self.envs)
        obs, next_obs = self.obs, np.empty_like(self.obs)
        rewards, terminated, done = np.empty(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        scores = np.empty(n)
        for i, env in enumerate(self.envs):
            next_obs[i], rewards[i], terminated[i], truncated, info = env.step(actions[i])
            scores[i] = info.get("raw_reward", rewards[i])
            self.episodes[i].actions.append(actions[i])
            done[i] = terminated[i] or truncated
        self.obs = next_obs.copy()
        game_over = done.copy()
        for i in np.nonzero(done)[0]:
            if continues_game(self.envs[i]):  # an Atari life lost: the log goes on with the game (replay.RESET)
                self.episodes[i].actions.append(RESET)
                game_over[i] = False
            else:
                self.episodes[i] = EpisodeLog.before_reset(self.envs[i])
            self.obs[i], _ = self.envs[i].reset()
            self.episode_count[i] += 1
        self.last_game = scores, game_over
        if eval_actions is not None:
            self.eval_out = self.eval_step(eval_actions, eval_active)
        return obs, actions, rewards, next_obs, terminated, done

    # ---- evaluation episodes ----------------------------------------------------------------------
    def eval_reset(self) -> np.ndarray:
        """Reset every evaluation environment with its episode seed; observations [M, E, obs_dim]."""
        for m, (row, seeds) in enumerate(zip(self.eval_envs, self.eval_seeds)):
            for e, (env, s) in enumerate(zip(row, seeds)):
                self.eval_obs[m, e] = env.reset(seed=s)[0]
        return self.eval_obs.copy()

    def eval_step(self, actions: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step the active evaluation episodes; returns (obs, rewards, ended), all [M, E(, obs_dim)]."""
        rewards, ended = np.zeros(active.shape), np.zeros(active.shape, dtype=bool)
        for m, e in zip(*np.nonzero(active)):
            o, rewards[m, e], terminated, truncated, _ = self.eval_envs[m][e].step(actions[m, e])
            self.eval_obs[m, e] = o
            ended[m, e] = terminated or truncated
        return self.eval_obs.copy(), rewards, ended

    def eval_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The evaluation step that came with the last ``step``."""
        out, self.eval_out = self.eval_out, None
        return out

    # ---- checkpoints ---------------------------------------------------------------------------
    def state_dict(self, rows: slice = slice(None)) -> dict:
        """Members ``rows``: current observations, episode logs and samplers of their training environments, for a
        checkpoint."""
        rows = train_rows(rows, self.per_member)
        return {"obs": torch.as_tensor(self.obs[rows]), "episode_count": self.episode_count[rows],
                "episodes": [e.to_dict() for e in self.episodes[rows]],
                "action_space_rng": [env.action_space.np_random.bit_generator.state for env in self.envs[rows]]}

    def load_state_dicts(self, states: list[dict]) -> None:
        """Re-create every training environment in the state the checkpoints describe (in member order)."""
        whole = join_states(states)
        expected = whole["obs"].numpy()
        for env in self.envs:
            env.close()
        restored = [restore_env(self.env_id, rec, seed, space, expected[i], task, **self.kinds) for i, (rec, seed, space, task)
                    in enumerate(zip(whole["episodes"], self.seeds, whole["action_space_rng"], self.tasks))]
        self.envs = [r[0] for r in restored]
        self.episodes = [r[2] for r in restored]
        self.obs = expected.copy()
        self.episode_count = whole["episode_count"]

    def close(self) -> None:
        for env in [*self.envs, *(env for row in self.eval_envs for env in row)]:
            env.close()


# ---- worker processes -------------------------------------------------------------------------------

class Shared:
    """The arrays main process and workers exchange, in shared memory (created before the workers start).

    Observations and actions keep the spaces' dtypes: an environment stepped with a float64 copy of a
    float32 action computes (slightly) different physics."""

    def __init__(self, m: int, episodes: int, obs_shape: tuple[int, ...], act_shape: tuple[int, ...], obs_dtype,
                 act_dtype, per_member: int = 1):
        ctx = mp.get_context("spawn")
        o, a, f = np.dtype(obs_dtype), np.dtype(act_dtype), np.dtype(np.float64)
        e = m * per_member  # training environments
        self.layout = {"obs": ((e, *obs_shape), o), "actions": ((e, *act_shape), a), "rewards": ((e,), f),
                       "next_obs": ((e, *obs_shape), o), "terminated": ((e,), f), "ended": ((e,), f),
                       "scores": ((e,), f), "game_over": ((e,), f),
                       "eval_actions": ((m, episodes, *act_shape), a), "eval_active": ((m, episodes), f),
                       "eval_obs": ((m, episodes, *obs_shape), o), "eval_rewards": ((m, episodes), f),
                       "eval_ended": ((m, episodes), f)}
        self.raw = {k: ctx.RawArray("b", int(np.prod(shape)) * dtype.itemsize)
                    for k, (shape, dtype) in self.layout.items()}
        self.attach()

    def attach(self) -> None:
        for k, (shape, dtype) in self.layout.items():
            setattr(self, k, np.frombuffer(self.raw[k], dtype=dtype).reshape(shape))

    def __getstate__(self):
        return {"layout": self.layout, "raw": self.raw}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.attach()


def _worker(conn, shared: Shared, rows: slice, env_id: str, seeds, eval_seeds, episodes: int, tasks,
            eval_tasks, kinds: dict) -> None:
    """A worker's loop: build its slice of environments (``rows``: its members, whose training environments are
    ``train_rows(rows, K)``), then answer one message per step."""
    # Ctrl-C and SIGTERM reach the whole process group: the main process checkpoints and then closes the
    # workers, which must live until then
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)
    try:
        envs = LocalEnvs(env_id, seeds, eval_seeds, episodes, tasks, eval_tasks, **kinds)
        train = train_rows(rows, envs.per_member)
        shared.obs[train] = envs.obs
        conn.send(("ok", None))
    except BaseException as e:  # noqa: BLE001  (reported to the main process, which raises it)
        conn.send(("error", _describe(e)))
        return
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, OSError):  # the main process is gone (killed): so are we
            envs.close()
            return
        try:
            if cmd == "step":
                random, evaluate = arg
                if random is not None:
                    actions = None if random else shared.actions[train].copy()  # episode logs keep them
                    _, actions, rewards, next_obs, terminated, ended = envs.step(actions)
                    shared.actions[train], shared.rewards[train], shared.next_obs[train] = actions, rewards, next_obs
                    shared.terminated[train], shared.ended[train], shared.obs[train] = terminated, ended, envs.obs
                    shared.scores[train], shared.game_over[train] = envs.last_game
                    conn.send(("ok", None))
                if evaluate:
                    obs, rewards, ended = envs.eval_step(shared.eval_actions[rows], shared.eval_active[rows] > 0)
                    shared.eval_obs[rows], shared.eval_rewards[rows], shared.eval_ended[rows] = obs, rewards, ended
                    conn.send(("ok", None))
            elif cmd == "eval_reset":
                shared.eval_obs[rows] = envs.eval_reset()
                conn.send(("ok", None))
            elif cmd == "state":
                conn.send(("ok", envs.state_dict()))
            elif cmd == "load":
                envs.load_state_dicts([arg])
                shared.obs[train] = envs.obs
                conn.send(("ok", None))
            elif cmd == "close":
                envs.close()
                conn.send(("ok", None))
                return
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", _describe(e)))


def _describe(e: BaseException) -> tuple[bool, str]:
    if isinstance(e, UsageError):
        return True, str(e)
    return False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"


class EnvWorkers(Described):
    """``LocalEnvs``' interface over ``workers`` processes, each owning a contiguous slice of the members."""

    def __init__(self, env_id: str, seeds: Sequence[int], eval_seeds: Sequence[int], episodes: int, workers: int,
                 tasks: Sequence[dict | None] | None = None, eval_tasks: Sequence[Sequence[dict | None]] | None = None,
                 actions: tuple[str, ...] = ("box",), who: str = "DASE"):
        m = len(eval_seeds)
        self.per_member = k = len(seeds) // m
        kinds = dict(actions=actions, who=who)
        tasks, eval_tasks = member_tasks(seeds, tasks, eval_tasks, m)
        self.eval_tasks_per_member = len(eval_tasks[0]) if eval_tasks else 1
        probe = make_env(env_id, tasks[0] if tasks else None, **kinds)
        describe(self, probe)
        workers = max(1, min(workers, m))
        bounds = np.linspace(0, m, workers + 1).round().astype(int)
        self.slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        act_shape, act_dtype, _ = action_layout(probe.action_space)
        self.shared = Shared(m, episodes * self.eval_tasks_per_member, self.obs_shape, act_shape,
                             probe.observation_space.dtype, act_dtype, k)
        probe.close()
        ctx = mp.get_context("spawn")  # workers use no torch threads, but fork after torch's pools is unsafe
        self.conns, self.procs = [], []
        for rows in self.slices:
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_worker, daemon=True,
                               args=(there, self.shared, rows, env_id, list(seeds[train_rows(rows, k)]),
                                     list(eval_seeds[rows]), episodes, tasks[train_rows(rows, k)], eval_tasks[rows],
                                     kinds))
            proc.start()
            self.conns.append(here)
            self.procs.append(proc)
        self.closed = False
        self._gather()
        self.evaluating = False

    @property
    def obs(self) -> np.ndarray:
        return self.shared.obs.copy()

    def _send(self, conn, message) -> None:
        try:
            conn.send(message)
        except (BrokenPipeError, EOFError, OSError):
            self._died(self.conns.index(conn))

    def _died(self, k: int) -> None:
        """Worker k is gone: shut the others down and say so, with what to do."""
        self.procs[k].join(timeout=5)
        code = self.procs[k].exitcode
        self.close()
        raise WorkerDied(f"environment worker {k} exited unexpectedly (exit code {code}); the run's last "
                           "checkpoint is kept: run the same command with --resume") from None

    def _gather(self) -> list:
        """One reply from every worker; a worker's error is raised here."""
        replies = []
        for k, conn in enumerate(self.conns):
            try:
                replies.append(conn.recv())
            except (EOFError, OSError):  # the worker died without a word (killed, out of memory, a crash)
                self._died(k)
        for kind, value in replies:
            if kind == "error":
                usage, text = value
                self.close()
                raise UsageError(text) if usage else RuntimeError(f"environment worker failed: {text}")
        return [value for _, value in replies]

    def step(self, actions: np.ndarray | None, eval_actions: np.ndarray | None = None,
             eval_active: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        obs = self.shared.obs.copy()
        if actions is not None:
            self.shared.actions[:] = actions
        if eval_actions is not None:
            self.shared.eval_actions[:] = eval_actions
            self.shared.eval_active[:] = eval_active
        for conn in self.conns:
            self._send(conn, ("step", (actions is None, eval_actions is not None)))
        self.evaluating = eval_actions is not None
        self._gather()
        s = self.shared
        self.last_game = s.scores.copy(), s.game_over > 0
        return obs, s.actions.copy(), s.rewards.copy(), s.next_obs.copy(), s.terminated > 0, s.ended > 0

    def eval_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.evaluating:
            self._gather()
            self.evaluating = False
        s = self.shared
        return s.eval_obs.copy(), s.eval_rewards.copy(), s.eval_ended > 0

    def eval_reset(self) -> np.ndarray:
        for conn in self.conns:
            self._send(conn, ("eval_reset", None))
        self._gather()
        return self.shared.eval_obs.copy()

    def eval_step(self, actions: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.shared.eval_actions[:] = actions
        self.shared.eval_active[:] = active
        for conn in self.conns:
            self._send(conn, ("step", (None, True)))
        self.evaluating = True
        return self.eval_results()

    def state_dict(self, rows: slice = slice(None)) -> dict:
        for conn in self.conns:
            self._send(conn, ("state", None))
        rows = train_rows(rows, self.per_member)
        return {k: v[rows] for k, v in join_states(self._gather()).items()}

    def load_state_dicts(self, states: list[dict]) -> None:
        whole = join_states(states)
        for conn, rows in zip(self.conns, self.slices):
            self._send(conn, ("load", {k: v[train_rows(rows, self.per_member)] for k, v in whole.items()}))
        self._gather()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for conn, proc in zip(self.conns, self.procs):
            try:
                if proc.is_alive():
                    conn.send(("close", None))
                    conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
            conn.close()


def make_envs(env_id: str, seeds: Sequence[int], eval_seeds: Sequence[int], episodes: int, workers: int = 0,
              tasks: Sequence[dict | None] | None = None,
              eval_tasks: Sequence[Sequence[dict | None]] | None = None, actions: tuple[str, ...] = ("box",),
              who: str = "DASE") -> LocalEnvs | EnvWorkers:
    """The run's environments: in this process (``workers`` 0) or in a pool of worker processes; the arguments as
    in ``LocalEnvs``. (A multi-agent task's are a ``joint.JointEnvs``, which ``run.setup`` makes.)"""
    if workers <= 0:
        return LocalEnvs(env_id, seeds, eval_seeds, episodes, tasks, eval_tasks, actions, who)
    return EnvWorkers(env_id, seeds, eval_seeds, episodes, workers, tasks, eval_tasks, actions, who)


def describe(envs, env: gym.Env) -> None:
    """What the learner needs to know of the environments: ``obs_shape`` (and ``obs_dim``, its first size),
    ``discrete``, ``act_dim`` (a discrete space's number of actions), ``low``/``high`` (None when discrete) and
    ``max_episode_steps``."""
    space = env.action_space
    envs.obs_shape = tuple(env.observation_space.shape)
    envs.obs_dim = envs.obs_shape[0]
    envs.discrete = isinstance(space, gym.spaces.Discrete)
    envs.act_dim = action_layout(space)[2]
    envs.low, envs.high = (None, None) if envs.discrete else (space.low, space.high)
    envs.max_episode_steps = env.spec.max_episode_steps if env.spec else None
