"""A run's setup for some of its seeds, at step 0: each member's task, the environments, the memory checks, the
learner (agents, buffers or rollouts, sharing), the tutorial's per-episode evaluations and the actor-critic family's
episode log. ``Trainer`` (loop.py) builds one and runs the loop on it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from ..envs.joint import JointEnvs, check_in_process
from ..envs.pool import EnvPoolEnvs
from ..envs.registry import check_env, image_task, package_of, sensor_layout
from ..envs.variants import task_for
from ..envs.workers import make_envs
from ..errors import UsageError
from ..naming import ALGORITHM
from .config import RunConfig
from .cores import available_cores, default_cpu_threads
from .episodes import EpisodeEvals
from .files import RunFiles, load_error, model_path, unreadable_model
from .memory import check_fits
from .onpolicy.episode_log import EpisodeLog
from .onpolicy.rollout import RolloutLearner
from .protocol import EnvsProtocol, LearnerProtocol
from .replay.images import ImageLearner
from .replay.learner import Learner
from .replay.recurrent import RecurrentLearner


@dataclass
class Setup:
    """What ``set_up`` builds: the trainer's ``setup`` (``trainer.setup.envs``, ``trainer.setup.learner``, ...)."""
    seeds: list  # the seeds this process trains
    seed_cfgs: list  # each seed's own config
    files: list  # each seed's RunFiles
    member_seeds: list  # per member (seed by seed, agent by agent) its seed
    workers: int  # environment worker processes (0: in this process)
    tasks: list  # per member its task variant (None for environments without variants)
    own_task: list | None  # --eval_tasks all: per member the index of its own task among those it is evaluated on
    recorded_tasks: list  # per member what the JSON record lists as its task(s)
    envs: EnvsProtocol  # LocalEnvs, EnvWorkers, EnvPoolEnvs or JointEnvs
    learner: LearnerProtocol  # Learner, RecurrentLearner, ImageLearner or RolloutLearner
    episode_evals: EpisodeEvals | None  # the TD3 tutorial's evaluation episode after every training episode
    episode_log: EpisodeLog | None  # the actor-critic family: every finished training episode
    eval_pace: int | None  # evaluation steps per training step when evaluations run beside training


def load_models(agents, cfg: RunConfig, first: int = 0, flag: str | None = "--load_model") -> None:
    """--load_model NAME: agent i loads models/NAME[_Agent_i].pt ("default": the run's own names) into slot first + i.
    A file that does not load is a UsageError begun with ``flag`` (None: a tool's own reading, e.g. utils.play's)."""
    for i, own in enumerate(cfg.agent_names()):
        path = model_path(cfg, i, own)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:
            raise unreadable_model(e, path, flag) from None
        try:
            agents.load_agent_state(first + i, state)
        except Exception as e:
            raise load_error(e, path, cfg, flag) from None


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
    (``--buffer_size`` transitions per member, as algorithms.onpolicy.acer stores them)."""
    own = cfg.algo_settings().own
    n_steps, k = own.n_steps, own.envs_per_agent
    obs = int(np.prod(envs.obs_shape)) * (1 if len(envs.obs_shape) > 1 else 4)
    rest = (8 if envs.discrete else 4 * envs.act_dim) + 12 + 4 * envs.act_dim
    need = members * n_steps * k * (2 * obs + rest)
    if hasattr(own, "buffer_size"):  # ACER
        slots = max(1, own.buffer_size // (n_steps * k))
        stored = 2 * obs
        if len(envs.obs_shape) == 3:  # frame stacks, each frame once (algorithms/onpolicy/frame_store.py): a frame a step,
            # the first stack of each rollout, and room for an episode's first and last stacks in every rollout
            stored = obs // envs.obs_shape[0] + 3 * -(-obs // n_steps)
        need += members * slots * n_steps * k * (stored + rest)
        return (f"--n_steps {n_steps} x --envs_per_agent {k} x --buffer_size {own.buffer_size}: the rollouts "
                f"and replay of {members} learner(s)", need, "lower --buffer_size, --n_steps or --envs_per_agent")
    return (f"--n_steps {n_steps} x --envs_per_agent {k}: the rollouts of {members} learner(s)", need,
            "lower --n_steps or --envs_per_agent")


def replay_memory_check(cfg: RunConfig, device: torch.device, seeds: int):
    """The learner's ``memory_check`` of the replay buffers (shapes from ``SharedReplayBuffer.bytes_for`` and its
    kin): on the CPU only the rows the run will write fill memory (at most ``--max_time_steps`` per writer), though
    the whole capacity is reserved at once."""
    def check(row_bytes: int, groups: int, capacity: int, writers: int) -> None:
        rows = capacity if device.type == "cuda" else min(capacity, cfg.max_time_steps * writers)
        check_fits(f"--buffer_size {cfg.buffer_size}: the replay buffers ({seeds} seed(s))", groups * rows * row_bytes,
                   device, "lower --buffer_size or run fewer --seeds at once", reserve=groups * capacity * row_bytes)
    return check


def member_tasks(cfg: RunConfig, member_seeds: list[int]) -> tuple[list, list, list | None, list | None, list]:
    """(each member's task, each training environment's task, the tasks each member is evaluated on (None: its
    own), the index of its own among them, what the record lists) for K environments per member."""
    n, k, every = cfg.num_agents, cfg.envs_per_agent, cfg.eval_tasks == "all"
    tasks = [task_for(cfg.env, s) for s in member_seeds]
    env_tasks = [x for x in tasks for _ in range(k)]
    if cfg.task_per_env:  # one agent per seed; its environment j plays agent (j mod N)'s task of the seed
        shared = [[task_for(cfg.env, s + 100 * i) for i in range(cfg.task_per_env)] for s in member_seeds]
        env_tasks = [row[j % cfg.task_per_env] for row in shared for j in range(k)]
        # its curve: agent 0's task, the seed's own
        return tasks, env_tasks, (shared if every else None), ([0] * len(tasks) if every else None), shared
    eval_tasks = [tasks[m - m % n:m - m % n + n] for m in range(len(tasks))] if every else None
    return tasks, env_tasks, eval_tasks, ([m % n for m in range(len(tasks))] if every else None), tasks


def make_learner(cfg: RunConfig, device: torch.device, seeds: list[int], member_seeds: list[int],
                 envs) -> LearnerProtocol:
    """The learner of the run's family, its memory checked before its buffers or rollouts are allocated."""
    spec, n, c = ALGORITHM[cfg.algorithm], cfg.num_agents, envs
    images = spec.family == "replay" and image_task(cfg.env)
    if spec.family == "replay" and len(c.obs_shape) != 1 and not images:  # make_env lets Atari's through (ac_main)
        raise UsageError(f"--env {cfg.env}: observations of shape {c.obs_shape}; {cfg.algorithm} needs flat ones or "
                         "a pixel task's frame stacks")
    if spec.family != "replay" and image_task(cfg.env) and sensor_layout(cfg.env)[0].start is not None:
        raise UsageError(f"--env {cfg.env}: observations of several sensors (a Dict) are read by the replay learners "
                         f"(sac_main.py, DASE_main.py), not by {cfg.algorithm}")
    if spec.family == "rollout":  # the rollout storage and ACER's replay of rollouts, before they are allocated
        what, need, hint = rollout_memory(cfg, len(member_seeds), c)
        check_fits(what, need, device, hint)
        return RolloutLearner(cfg.algorithm, cfg.algo, member_seeds, n, c, device, cfg.sharing_settings(),
                              common_init=cfg.init == "common", eval_sample=cfg.eval_policy == "sample")
    kind = ImageLearner if images else RecurrentLearner if cfg.algo_settings().sequence.seq_encoder else Learner
    return kind(cfg.algorithm, cfg.algo, member_seeds, n, sensor_layout(cfg.env) if images else c.obs_dim, c.act_dim, c.low, c.high, cfg.buffer_size,
                cfg.batch_size, cfg.updates_per_step, device, cfg.sharing_settings(), cfg.cuda_graphs, cfg.n_step,
                cfg.per or None, common_init=cfg.init == "common",
                memory_check=replay_memory_check(cfg, device, len(seeds)))


def set_up(cfg: RunConfig, device: torch.device, seeds: list[int]) -> Setup:
    """Environments, agents, buffers and evaluator for these seeds, at step 0 (the global seeds set from the first)."""
    n, k, spec = cfg.num_agents, cfg.envs_per_agent, ALGORITHM[cfg.algorithm]
    set_global_seeds(seeds[0])
    seed_cfgs = [cfg.for_seed(s) for s in seeds]
    member_seeds = [m for c in seed_cfgs for m in c.agent_seeds()]
    joint = package_of(cfg.env) is not None  # a multi-agent task: agent k of a seed plays player k of one game
    if joint:  # the synchronous on-policy learners only (one line for the others), in this process
        check_env(cfg.env, spec.actions, cfg.algorithm, joint=spec.family == "rollout")
        check_in_process(cfg.env_workers)
    workers = 0 if joint else default_workers(device, len(member_seeds)) if cfg.env_workers is None \
        else cfg.env_workers
    tasks, env_tasks, eval_tasks, own_task, recorded = member_tasks(cfg, member_seeds)
    # K environments per member (on-policy learners): environment j > 0 of a member has a seed derived from
    # the member's seed and j, and plays the member's task
    env_seeds = [s if j == 0 else int(np.random.SeedSequence([s, j]).generate_state(1)[0])
                 for s in member_seeds for j in range(k)]
    eval_seeds = [s + cfg.eval_seed_offset for s in seeds for _ in range(n)]
    envs: EnvsProtocol
    if joint:
        envs = JointEnvs(cfg.env, env_seeds, eval_seeds, cfg.eval_episodes, n, cfg.algorithm)
    elif cfg.env_backend == "envpool":  # EnvPool's own threads step the games (--env_workers: how many)
        envs, workers = EnvPoolEnvs(cfg.env, env_seeds, eval_seeds, cfg.eval_episodes, env_tasks, eval_tasks,
                                    threads=cfg.env_workers or 0), 0
    else:
        envs = make_envs(cfg.env, env_seeds, eval_seeds, cfg.eval_episodes, workers, env_tasks, eval_tasks,
                         spec.actions, cfg.algorithm)
    try:
        learner = make_learner(cfg, device, seeds, member_seeds, envs)
    except UsageError:
        envs.close()
        raise
    if cfg.load_model:
        for j, seed_cfg in enumerate(seed_cfgs):
            load_models(learner.agents, seed_cfg, j * n)
    if cfg.compile:
        learner.agents.compile()
    episode_evals = None  # the TD3 tutorial's protocol: an evaluation episode after every training episode
    if cfg.episode_eval or cfg.solved_at is not None or cfg.max_episodes is not None:
        episode_evals = EpisodeEvals(cfg.env, [s for s in seeds for _ in range(n)], tasks, cfg.episode_eval,
                                     cfg.solved_at, cfg.solved_window, cfg.max_episodes,
                                     dict(actions=spec.actions, who=cfg.algorithm))
    limit = envs.max_episode_steps
    return Setup(seeds=seeds, seed_cfgs=seed_cfgs, files=[RunFiles(c) for c in seed_cfgs], member_seeds=member_seeds,
                 workers=workers, tasks=tasks, own_task=own_task, recorded_tasks=recorded, envs=envs,
                 learner=learner,
                 episode_evals=episode_evals,
                 # the actor-critic family: every finished training episode, as Diff-DAC's reference reports them
                 episode_log=EpisodeLog(len(member_seeds), k) if spec.family == "rollout" else None,
                 # evaluation steps per training step that finish an evaluation within one evaluation period
                 eval_pace=-(-limit * k // cfg.eval_freq) if limit and workers else None)


def set_threads(cfg: RunConfig, device: torch.device) -> None:
    """torch's CPU threads: --threads, else 1 on a GPU, else the cores nothing else keeps busy now; and whether the
    CPU reads and writes float32 denormals as zero (--flush_denormals; set either way, as the state is the
    process's)."""
    torch.set_flush_denormal(cfg.flush_denormals)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    elif device.type == "cuda":
        # the GPU does the arithmetic; torch's CPU threads (one per core by default) would only spin against
        # the environment workers on the same cores (measured on 16 cores: evaluation 6x slower)
        torch.set_num_threads(1)
    else:  # the cores nothing else keeps busy now (a run beside a busy core would otherwise wait for it)
        torch.set_num_threads(default_cpu_threads())
