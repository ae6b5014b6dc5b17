"""Multi-agent environments: N players acting together in one environment (Level-Based Foraging, the multi-robot
warehouse), agent k of a seed controlling player k.

``lbforaging`` and ``rware`` (maintained Gymnasium packages; ``registry.register`` imports them) register ids such as ``Foraging-8x8-2p-2f-coop-v3`` and
``rware-tiny-2ag-v2`` with Tuple observation and action spaces (one entry per player), a list of rewards (one per
player) and one ``terminated`` for the whole team; both end an episode at their own step limit (50 for LBF, 500 for
RWARE) by ``terminated``, which is kept as they report it (as the SEAC authors' code did).

``JointEnvs`` gives the trainer the per-member view of ``workers.LocalEnvs`` (observations, actions, rewards and
flags per member environment, K per member) over one environment per (seed, k < K): member (s, agent i)'s
environment j is player i of joint environment (s, j). Its evaluation episodes are played jointly too: the N agents
of a seed play E episodes together, each scoring its own player's return. Checkpoints keep, per joint environment,
how its episode began and the joint actions since (``replay.EpisodeLog``), so a run resumes exactly.
"""
from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from ..errors import UsageError
from .registry import _create, check_joint, register
from .replay import EpisodeLog, check_restored, start_episode
from .workers import episode_seeds, join_states, train_rows


def is_joint(spaces) -> bool:
    """Whether an environment (or its spaces) has one action space per player."""
    return isinstance(spaces.action_space, gym.spaces.Tuple)


class FreshStart(gym.Wrapper):
    """Every reset starts from nothing of the last episode. LBF's reset places each player on a cell no other
    player occupies, counting the other players' cells of the episode that just ended (lbforaging 2.0.0,
    ``spawn_players``), so a reset would depend on more than the random generator: a checkpoint's replay could not
    rebuild it, and evaluation episodes would differ with what was played before them. The players' old cells are
    forgotten first (the starts are drawn as in a new environment). RWARE rebuilds everything at reset."""

    def reset(self, **kwargs):
        for player in getattr(self.env.unwrapped, "players", ()):
            player.position = None
        return self.env.reset(**kwargs)


def make_joint(env_id: str, agents: int | None, who: str) -> gym.Env:
    """One multi-agent environment (``FreshStart``), checked (``check_joint``)."""
    register(env_id)
    env = _create(env_id)
    try:
        if not is_joint(env):
            raise UsageError(f"--env {env_id}: not a multi-agent environment")
        check_joint(env_id, env, agents, who)
    except UsageError:
        env.close()
        raise
    return FreshStart(env)


def check_in_process(workers: int | None) -> None:
    """A multi-agent task steps in the trainer's process: a UsageError for --env_workers > 0."""
    if workers:
        raise UsageError(f"--env_workers {workers}: a multi-agent task steps in the trainer's process; drop "
                         "--env_workers")


def episode_limit(env: gym.Env) -> int | None:
    """The environment's own step limit (LBF's ``max_episode_steps``, RWARE's ``max_steps``) or Gymnasium's."""
    spec = env.spec
    if spec is None:
        return None
    return spec.max_episode_steps or spec.kwargs.get("max_episode_steps") or spec.kwargs.get("max_steps")


class JointEnvs:
    """``LocalEnvs``' interface for a multi-agent environment: ``seeds`` and ``eval_seeds`` as there (members seed by
    seed, agent by agent; K = len(seeds) / len(eval_seeds) environments per member), ``agents`` (N) per seed. Joint
    environment (s, j) is reset with the seed of agent 0's environment j; agent i's environment j shares it."""

    def __init__(self, env_id: str, seeds: Sequence[int], eval_seeds: Sequence[int], episodes: int, agents: int,
                 who: str = "A2C"):
        members, n = len(eval_seeds), agents
        if members % n:
            raise ValueError("members must be whole seeds of N agents")
        self.env_id, self.n, self.who = env_id, n, who
        self.per_member = k = len(seeds) // members
        s = members // n
        self.eval_tasks_per_member = 1
        # [S * K, N]: the member environment (row of the per-member arrays) of each joint environment's players
        self.rows = np.array([[(q * n + i) * k + j for i in range(n)] for q in range(s) for j in range(k)])
        self.seeds = [int(seeds[r[0]]) for r in self.rows]
        self.envs = [make_joint(env_id, n, who) for _ in self.seeds]
        first = self.envs[0]
        space = first.observation_space.spaces[0]
        self.obs_shape, self.obs_dim = tuple(space.shape), int(space.shape[0])
        self.discrete, self.act_dim, self.low, self.high = True, int(first.action_space.spaces[0].n), None, None
        self.max_episode_steps = episode_limit(first)
        self.obs = np.zeros((len(seeds), *self.obs_shape), space.dtype)
        self.episodes = []
        for g, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            self.obs[self.rows[g]] = np.stack(env.reset(seed=seed)[0])
            env.action_space.seed(seed)
            self.episodes.append(EpisodeLog(seed))
        self.episode_count = [0] * len(seeds)
        self.eval_envs = [[make_joint(env_id, n, who) for _ in range(episodes)] for _ in range(s)]
        self.eval_seeds = [episode_seeds(int(eval_seeds[q * n]), episodes) for q in range(s)]
        self.eval_obs = np.zeros((members, episodes, *self.obs_shape), space.dtype)
        self.eval_out: tuple | None = None

    # ---- training environments ------------------------------------------------------------------
    def random_actions(self) -> np.ndarray:
        actions = np.zeros(len(self.obs), np.int64)
        for g, env in enumerate(self.envs):
            actions[self.rows[g]] = env.action_space.sample()
        return actions

    def step(self, actions: np.ndarray | None, eval_actions: np.ndarray | None = None,
             eval_active: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """As ``LocalEnvs.step``, each joint environment stepped once with its players' actions."""
        if actions is None:
            actions = self.random_actions()
        actions = np.asarray(actions)
        n = len(self.obs)
        obs, next_obs = self.obs, np.empty_like(self.obs)
        rewards, terminated, done = np.empty(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for g, env in enumerate(self.envs):
            rows = self.rows[g]
            joint = actions[rows].astype(np.int64)
            o, r, term, trunc, _ = env.step(tuple(int(a) for a in joint))
            self.episodes[g].actions.append(joint)
            next_obs[rows], rewards[rows] = np.stack(o), np.asarray(r, dtype=np.float64)
            terminated[rows], done[rows] = bool(term), bool(term or trunc)
        self.obs = next_obs.copy()
        for g, env in enumerate(self.envs):
            rows = self.rows[g]
            if done[rows[0]]:
                self.episodes[g] = EpisodeLog.before_reset(env)
                self.obs[rows] = np.stack(env.reset()[0])
                for r in rows:
                    self.episode_count[r] += 1
        if eval_actions is not None:
            self.eval_out = self.eval_step(eval_actions, eval_active)
        return obs, actions, rewards, next_obs, terminated, done

    # ---- evaluation episodes ----------------------------------------------------------------------
    def _players(self, q: int) -> slice:
        return slice(q * self.n, (q + 1) * self.n)

    def eval_reset(self) -> np.ndarray:
        for q, (row, seeds) in enumerate(zip(self.eval_envs, self.eval_seeds)):
            for e, (env, seed) in enumerate(zip(row, seeds)):
                self.eval_obs[self._players(q), e] = np.stack(env.reset(seed=seed)[0])
        return self.eval_obs.copy()

    def eval_step(self, actions: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step the joint evaluation episodes any of whose players is still active; [M, E(, obs_dim)] as
        ``LocalEnvs.eval_step`` (a seed's agents end their episodes together)."""
        rewards, ended = np.zeros(active.shape), np.zeros(active.shape, dtype=bool)
        for q, row in enumerate(self.eval_envs):
            p = self._players(q)
            for e in np.nonzero(active[p].any(axis=0))[0]:
                o, r, term, trunc, _ = row[e].step(tuple(int(a) for a in actions[p, e]))
                self.eval_obs[p, e], rewards[p, e], ended[p, e] = np.stack(o), r, term or trunc
        return self.eval_obs.copy(), rewards, ended

    def eval_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out, self.eval_out = self.eval_out, None
        return out

    # ---- checkpoints ---------------------------------------------------------------------------
    def _joint(self, rows: slice) -> slice:
        """The joint environments of the members ``rows`` (whole seeds)."""
        start, stop = rows.start or 0, len(self.eval_obs) if rows.stop is None else rows.stop
        if start % self.n or stop % self.n:
            raise ValueError("a multi-agent checkpoint holds whole seeds")
        return slice(start // self.n * self.per_member, stop // self.n * self.per_member)

    def state_dict(self, rows: slice = slice(None)) -> dict:
        """Members ``rows``' observations and episode counts, and their joint environments' episode logs and
        action samplers."""
        env_rows, joint = train_rows(rows, self.per_member), self._joint(rows)
        return {"obs": torch.as_tensor(self.obs[env_rows]), "episode_count": self.episode_count[env_rows],
                "episodes": [e.to_dict() for e in self.episodes[joint]],
                "action_space_rng": [[s.np_random.bit_generator.state for s in env.action_space.spaces]
                                     for env in self.envs[joint]]}

    def load_state_dicts(self, states: list[dict]) -> None:
        """Re-create every joint environment as the checkpoints (in member order) describe it, by replaying its
        episode's joint actions from how the episode began."""
        whole = join_states(states)
        expected = whole["obs"].numpy()
        for env in self.envs:
            env.close()
        self.envs, self.episodes = [], []
        for g, (log, seed, samplers) in enumerate(zip(whole["episodes"], self.seeds, whole["action_space_rng"])):
            env = make_joint(self.env_id, self.n, self.who)
            obs = start_episode(env, log, seed, self.env_id)
            actions = [a.numpy().astype(np.int64) for a in log["actions"]]
            for a in actions:
                obs = env.step(tuple(int(x) for x in a))[0]
            for space, state in zip(env.action_space.spaces, samplers):
                space.np_random.bit_generator.state = state
            check_restored(self.env_id, np.stack(obs), expected[self.rows[g]])
            self.envs.append(env)
            self.episodes.append(EpisodeLog(log["seed"], log["rng_state"], actions))
        self.obs = expected.copy()
        self.episode_count = list(whole["episode_count"])

    def close(self) -> None:
        for env in [*self.envs, *(env for row in self.eval_envs for env in row)]:
            env.close()
