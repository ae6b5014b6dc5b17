"""Atari games on EnvPool (``--env_backend envpool``): the lockstep learners' environments stepped by EnvPool's C++
thread pool instead of Python wrappers around ale-py, with ``workers.LocalEnvs``' interface.

The preprocessing is EnvPool's own (its Atari options set to the DeepMind protocol atari.py implements): 1 to 30
no-op frames at a game's start, frame skip 4 with the maximum of the last two frames, 84x84 grey (area resize), 4
stacked frames (oldest first), FIRE at a reset where the game has it, no sticky actions, a game truncated after
27,000 steps (108,000 frames); in training also one learner episode per life and rewards clipped to their sign;
evaluation plays whole games and scores the game's own reward. Where it differs from atari.py (docs/actor_critic.md,
"Two engines"): its reset presses FIRE alone (atari.py: FIRE, then action 2), a lost life keeps the frame stack
going (atari.py starts a new stack), its grey is OpenCV's fixed-point conversion (a pixel may differ by one level)
and its no-op counts come from its own generator.

Seeds: EnvPool takes every environment's seed when the pool is made (``env_seed``; a later ``reset(seed=...)``
is ignored), as int32; a run's environment seed s is used as s mod (2^31 - 1). An environment's episodes depend
on its seed alone, not on the pool it is in, so a seed's files are those of the seed run alone.

Resume: an EnvPool environment cannot be saved, so a checkpoint keeps every action each training environment took
since the pool was made (one byte a step); resuming makes the pool again with the same seeds and replays them (the
games are deterministic without sticky actions), then checks the observation it reached against the checkpoint's.
Replaying costs a pool step per recorded step (a 1.1M-step Pong run of 16 environments: 69k pool steps).

Episode ends: EnvPool resets a finished environment at the next step it is given (that step's action is not
played); ``step`` gives the finished ones that step at once (``env_id`` = those alone), so that, as in
``LocalEnvs``, the returned next observation is the episode's last and ``obs`` the next episode's first.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from ..errors import UsageError
from .atari import FRAME_SKIP, NOOP_MAX, SCREEN, STACK, is_atari
from .replay import check_restored
from .workers import episode_seeds, join_states, train_rows

MAX_STEPS = 108_000 // FRAME_SKIP  # the ALE's 30-minute limit of a game, in the learner's steps
INT32 = 2**31 - 1


def installed() -> bool:
    """Whether EnvPool can be imported (without importing it: that costs a second)."""
    return importlib.util.find_spec("envpool") is not None


def backend_for(choice: str | None, env_id: str, algorithm: str) -> str:
    """--env_backend resolved: ``choice`` checked (a UsageError where EnvPool cannot serve the run), or by default
    envpool for an Atari game played by a lockstep learner where EnvPool is installed, gymnasium otherwise."""
    if choice is None:
        return "envpool" if algorithm != "A3C" and is_atari(env_id) and installed() else "gymnasium"
    if choice == "envpool":
        if algorithm == "A3C":
            raise UsageError("--env_backend envpool: A3C's workers each step one game of their own (gymnasium); "
                             "EnvPool serves the lockstep learners, A2C and ACER")
        if not installed():
            raise UsageError("--env_backend envpool: EnvPool is not installed (pip install -r requirements-atari.txt)")
        game_id(env_id)
    return choice


def game_id(env_id: str) -> str:
    """EnvPool's id of the Atari game ``env_id`` plays (``ALE/Pong-v5``, ``PongNoFrameskip-v4`` -> ``Pong-v5``); a
    UsageError for an id that is not an Atari game or a game EnvPool lacks."""
    if not is_atari(env_id):
        raise UsageError(f"--env_backend envpool serves Atari games (ALE/Pong-v5, PongNoFrameskip-v4, ...); {env_id} "
                         "runs on gymnasium: drop --env_backend or give --env_backend gymnasium")
    game = str(gym.spec(env_id).kwargs.get("game", ""))
    name = "".join(part.capitalize() for part in re.split(r"[_\s]+", game)) + "-v5"
    import envpool

    if name not in envpool.list_all_envs():
        raise UsageError(f"--env_backend envpool: EnvPool has no game {name} for {env_id}; use --env_backend gymnasium")
    return name


def make_pool(env_id: str, seeds: Sequence[int], training: bool, threads: int):
    """An EnvPool of ``len(seeds)`` environments of ``env_id``'s game with the DeepMind preprocessing, stepped all
    together (sync mode), environment i seeded with ``seeds[i]`` (mod 2^31 - 1)."""
    import envpool

    n = len(seeds)
    return envpool.make(game_id(env_id), env_type="gymnasium", num_envs=n, batch_size=n,
                        num_threads=max(0, min(threads, n)), env_seed=[int(s) % INT32 for s in seeds],
                        episodic_life=training, reward_clip=training, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP,
                        stack_num=STACK, img_height=SCREEN, img_width=SCREEN, gray_scale=True,
                        use_inter_area_resize=True, use_fire_reset=True, repeat_action_probability=0.0,
                        full_action_space=False, max_episode_steps=MAX_STEPS)


class ActionLog:
    """Every action of n environments since their pool was made, [steps, n] uint8 (a game has at most 18 actions),
    grown by doubling."""

    def __init__(self, n: int):
        self.rows, self.data = 0, np.zeros((1024, n), dtype=np.uint8)

    def append(self, actions: np.ndarray) -> None:
        if self.rows == len(self.data):
            self.data = np.concatenate([self.data, np.zeros_like(self.data)])
        self.data[self.rows] = actions
        self.rows += 1

    def column(self, i: int) -> torch.Tensor:
        return torch.from_numpy(self.data[:self.rows, i].copy())

    @staticmethod
    def of_columns(columns: list[torch.Tensor]) -> ActionLog:
        lengths = {len(c) for c in columns}
        if len(lengths) != 1:
            raise UsageError(f"the checkpoint's EnvPool action logs have different lengths {sorted(lengths)}; start "
                             "over with --overwrite")
        log = ActionLog(len(columns))
        log.rows = lengths.pop()
        log.data = np.stack([c.numpy().astype(np.uint8) for c in columns], axis=1).reshape(log.rows, len(columns))
        return log


class EnvPoolEnvs:
    """``LocalEnvs``' interface (training environments, evaluation episodes, checkpoints) on EnvPool for Atari:
    ``seeds`` the training environments' (K = len(seeds) / len(eval_seeds) consecutive ones per member), ``episodes``
    evaluation games per member reset with the episode seeds of ``eval_seeds[m]``; ``threads`` EnvPool's worker
    threads (0: as many as the machine has cores)."""

    def __init__(self, env_id: str, seeds: Sequence[int], eval_seeds: Sequence[int], episodes: int,
                 tasks: Sequence[dict | None] | None = None, eval_tasks=None, threads: int = 0):
        if any(t is not None for t in (tasks or [])) or eval_tasks is not None:
            raise UsageError(f"--env_backend envpool: {env_id} has no task variants")
        self.env_id, self.seeds, self.threads = env_id, [int(s) for s in seeds], int(threads)
        self.per_member, self.eval_tasks_per_member, self.episodes = len(self.seeds) // len(eval_seeds), 1, episodes
        self.pool = make_pool(env_id, self.seeds, True, self.threads)
        self.obs = self.pool.reset()[0]
        self.log = ActionLog(len(self.seeds))
        self.episode_count = [0] * len(self.seeds)
        self.samplers = [np.random.default_rng(s) for s in self.seeds]
        space = self.pool.single_action_space
        self.obs_shape, self.discrete, self.act_dim = tuple(self.obs.shape[1:]), True, int(space.n)
        self.obs_dim, self.low, self.high, self.max_episode_steps = self.obs_shape[0], None, None, MAX_STEPS
        self.eval_seeds = [episode_seeds(int(s), episodes) for s in eval_seeds]
        self.eval_pool = None
        self.eval_obs = np.zeros((len(eval_seeds), episodes, *self.obs_shape), np.uint8)
        self.eval_out: tuple | None = None

    # ---- training environments ------------------------------------------------------------------
    def random_actions(self) -> np.ndarray:
        """Uniform actions, each environment's from a generator of its seed (the warm-up phase)."""
        return np.array([g.integers(self.act_dim) for g in self.samplers], dtype=np.int64)

    def _step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """One step of every training environment, and at once the reset step of those whose episode ended."""
        self.log.append(actions)
        next_obs, rewards, terminated, truncated, info = self.pool.step(actions.astype(np.int32))
        if not np.array_equal(info["env_id"], np.arange(len(self.seeds))):  # sync mode answers in order
            raise RuntimeError(f"EnvPool answered environments {info['env_id']} out of order")
        done = terminated | truncated
        # info["reward"]: the game's own reward (the clipped one is ``rewards``); info["terminated"]: the game over
        self.last_game = info["reward"].astype(np.float64), (info["terminated"] > 0) | truncated
        self.obs = next_obs.copy()
        if done.any():
            ids = np.flatnonzero(done).astype(np.int32)
            self.obs[ids] = self.pool.step(np.zeros(len(ids), dtype=np.int32), ids)[0]
            for i in ids:
                self.episode_count[i] += 1
        return next_obs, rewards.astype(np.float64), terminated.astype(bool), done

    def step(self, actions: np.ndarray | None, eval_actions: np.ndarray | None = None,
             eval_active: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """As ``LocalEnvs.step``: (obs, actions, rewards, next_obs, terminated, ended), finished episodes reset."""
        actions = self.random_actions() if actions is None else np.asarray(actions, dtype=np.int64)
        obs = self.obs
        next_obs, rewards, terminated, done = self._step(actions)
        if eval_actions is not None:
            self.eval_out = self.eval_step(eval_actions, eval_active)
        return obs, actions, rewards, next_obs, terminated, done

    # ---- evaluation games --------------------------------------------------------------------------
    def eval_reset(self) -> np.ndarray:
        """A fresh pool of every member's evaluation games, each seeded with its episode seed; [M, E, ...]."""
        self.close_eval()
        self.eval_pool = make_pool(self.env_id, [s for row in self.eval_seeds for s in row], False, self.threads)
        self.eval_obs = self.eval_pool.reset()[0].reshape(self.eval_obs.shape)
        return self.eval_obs.copy()

    def eval_step(self, actions: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step the active games (a finished one is not stepped again); (obs, rewards, ended), all [M, E(, ...)]."""
        rewards, ended = np.zeros(active.shape), np.zeros(active.shape, dtype=bool)
        ids = np.flatnonzero(active).astype(np.int32)
        if ids.size:
            obs, r, terminated, truncated, info = self.eval_pool.step(
                np.asarray(actions).reshape(-1)[ids].astype(np.int32), ids)
            flat = self.eval_obs.reshape(-1, *self.obs_shape)
            flat[info["env_id"]] = obs
            rewards.reshape(-1)[info["env_id"]] = r
            ended.reshape(-1)[info["env_id"]] = terminated | truncated
        return self.eval_obs.copy(), rewards, ended

    def eval_results(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out, self.eval_out = self.eval_out, None
        return out

    # ---- checkpoints ---------------------------------------------------------------------------
    def state_dict(self, rows: slice = slice(None)) -> dict:
        """Members ``rows``: their training environments' observations, episode counts, actions since the pool was
        made and warm-up samplers."""
        envs = range(len(self.seeds))[train_rows(rows, self.per_member)]
        return {"obs": torch.as_tensor(self.obs[list(envs)]), "episode_count": [self.episode_count[i] for i in envs],
                "episodes": [{"envpool_actions": self.log.column(i)} for i in envs],
                "action_space_rng": [self.samplers[i].bit_generator.state for i in envs]}

    def load_state_dicts(self, states: list[dict]) -> None:
        """Make the pool again and replay every recorded action (in member order)."""
        whole = join_states(states)
        if any("envpool_actions" not in e for e in whole["episodes"]):
            raise UsageError(f"the checkpoint of {self.env_id} was written by the gymnasium engine; resume with "
                             "--env_backend gymnasium, or start over with --overwrite")
        log = ActionLog.of_columns([e["envpool_actions"] for e in whole["episodes"]])
        self.pool.close()
        self.pool = make_pool(self.env_id, self.seeds, True, self.threads)
        self.obs = self.pool.reset()[0]
        self.log = ActionLog(len(self.seeds))
        for r in range(log.rows):
            self._step(log.data[r].astype(np.int64))
        check_restored(self.env_id, self.obs, whole["obs"].numpy())
        self.episode_count = list(whole["episode_count"])
        for g, state in zip(self.samplers, whole["action_space_rng"]):
            g.bit_generator.state = state

    def close_eval(self) -> None:
        if self.eval_pool is not None:
            self.eval_pool.close()
            self.eval_pool = None

    def close(self) -> None:
        self.close_eval()
        self.pool.close()
