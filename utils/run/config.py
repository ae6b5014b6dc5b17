"""A run's settings (``RunConfig``) and the checks made before anything is written (``validate``).

Imports nothing else of ``utils.run``: the command lines, the loop and the files all read it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..io import bad_name, file_in_the_way, unwritable
from ..naming import (
    ALGORITHM,
    Method,
    algorithm_of,
    curve_names,
    default_init,
    is_multi_agent,
    method_of,
    parse_policy,
    run_stem,
)
from ..settings import defaults, spec_of
from .cores import available_cores
from .footprint import check_footprint
from .settings import (
    OnPolicyRunSettings,
    OnPolicyStepSettings,
    ReplaySettings,
    ReplayStepSettings,
    RunSettings,
    SacStepSettings,
)

# the choices of --eval_tasks, --warmup_actions and --init: their fields' (utils/run/settings.py)
EVAL_TASKS = spec_of(RunSettings, "eval_tasks").choices or ()
WARMUP_ACTIONS = spec_of(ReplayStepSettings, "warmup_actions").choices or ()
INITS = spec_of(RunSettings, "init").choices or ()
# the defaults RunConfig shares with the flags: each read from its field (utils/run/settings.py)
RUN, ON_POLICY_RUN = defaults(RunSettings), defaults(OnPolicyRunSettings)
REPLAY, STEPS = defaults(ReplaySettings), defaults(ReplayStepSettings)
SAC_STEPS, ON_POLICY_STEPS = defaults(SacStepSettings), defaults(OnPolicyStepSettings)


def agreed(default: Any = MISSING, *, factory: Any = MISSING, older: Any = MISSING) -> Any:
    """A RunConfig field a checkpoint and the run that resumes it must agree on (the resume's check,
    ``checkpoint.COMPATIBLE``, is read from these); ``older``: what a checkpoint or record from before the field
    existed meant (``checkpoint.DEFAULTS``)."""
    meta = {"agree": True, **({"older": older} if older is not MISSING else {})}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(metadata=meta) if default is MISSING else field(default=default, metadata=meta)


@dataclass(frozen=True)
class AlgoSettings:
    """A run's ``algo`` record typed: the settings objects it is made of, each with what the record leaves out at its
    field's default (an older record, a test's partial one, the ``recorded="given"`` settings). The dict stays the
    record (the algorithm's keyword arguments, what a checkpoint compares and a record keeps); reads go through this.
    Keys no settings class declares are left to the algorithm's constructor, which refuses what it does not take."""

    own: Any  # the algorithm's settings (the registry's class; the discrete-action form's when only it takes the keys)
    sequence: Any = None  # replay family: SequenceSettings (seq_encoder None: feed-forward)
    images: Any = None  # replay family on an image task: ImageSettings
    vtrace: tuple[float, float, float] | None = None  # SAC --vtrace: (rho_bar, c_bar, lambda)

    @classmethod
    def of(cls, algorithm: str, record: dict) -> AlgoSettings:
        spec, rest = ALGORITHM[algorithm], dict(record)
        sequence = images = vtrace = None
        if spec.family == "replay":
            from .replay.settings import ImageSettings, SequenceSettings

            sequence = SequenceSettings(**_take(rest, SequenceSettings))
            image_keys = _take(rest, ImageSettings)
            images = ImageSettings(**image_keys) if image_keys else None
            rho_c_lambda = rest.pop("vtrace", None)
            vtrace = (float(rho_c_lambda[0]), float(rho_c_lambda[1]), float(rho_c_lambda[2])) if rho_c_lambda else None
        own = spec.form("settings")
        if spec.has("settings", discrete=True) and not set(rest) <= _names(own):
            own = spec.form("settings", discrete=True)
        return cls(own(**_take(rest, own)), sequence, images, vtrace)

    @property
    def intrinsic(self) -> bool:
        """An intrinsic reward (--curiosity or --rnd) is added to the environment's."""
        return bool(getattr(self.own, "curiosity", None) or getattr(self.own, "rnd", False))

    @property
    def siamese(self) -> str | None:
        """ASAC's auxiliary loss on the image encoder (--siamese), on an image task."""
        return self.images.siamese if self.images is not None else None

    @property
    def discount(self) -> float:
        """The discount factor: TD3's and DDPG's ``discount``, the others' ``gamma``."""
        return float(self.own.discount if hasattr(self.own, "discount") else self.own.gamma)


def _names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def _take(record: dict, cls: type) -> dict:
    """The keys of ``record`` that ``cls`` declares, removed from it."""
    return {name: record.pop(name) for name in _names(cls) & set(record)}


@dataclass
class RunConfig:
    """Everything a run needs; the command lines fill it from their flags."""

    # a registered policy (utils.naming): TD3, DDPG, SAC, or DASE_ / DPD_ / DIFF_ / DIFF_DASE_ + one of them
    policy: str = agreed()
    env: str = agreed()  # a resolved Gymnasium id
    seed: int = agreed(0)
    seeds: list[int] | None = RUN["seeds"]  # several seeds in one process (seed is then seeds[0])
    num_agents: int = agreed(1)
    max_time_steps: int = STEPS["max_time_steps"]
    start_time_steps: int = agreed(STEPS["start_time_steps"])
    eval_freq: int = agreed(RUN["eval_freq"])
    eval_episodes: int = agreed(RUN["eval_episodes"])
    # the evaluation episodes' seeds: episode_seeds(run seed + this)
    eval_seed_offset: int = agreed(RUN["eval_seed_offset"], older=100)
    # the actor-critic family: "sample" draws evaluation actions from the policy
    eval_policy: str = agreed(ON_POLICY_RUN["eval_policy"], older="greedy")
    batch_size: int = agreed(REPLAY["batch_size"])
    buffer_size: int = agreed(REPLAY["buffer_size"])
    updates_per_step: int = agreed(SAC_STEPS["updates_per_step"])
    device: str = "cpu"
    results_dir: str = RUN["results_dir"]
    save_model: bool = RUN["save_model"]
    load_model: str = RUN["load_model"]
    models_dir: str = RUN["models_dir"]
    quiet: bool = RUN["quiet"]
    checkpoint_freq: int = RUN["checkpoint_freq"]  # 0: no checkpoints
    checkpoint_dir: str | None = RUN["checkpoint_dir"]  # default: {results_dir}/checkpoints
    resume: bool = RUN["resume"]
    # pause at this step (the budget's count) with a checkpoint, exit 0; --resume continues (not part of the
    # experiment: a checkpoint resumes whatever stop_at the next command gives)
    stop_at: int | None = RUN["stop_at"]
    threads: int | None = RUN["threads"]  # torch CPU threads; None: all cores on the CPU, 1 beside a GPU
    compile: bool = RUN["compile"]  # torch.compile the networks
    # float32 denormals read and written as zero on the CPU (not agreed: a resume with the other value says so)
    flush_denormals: bool = RUN["flush_denormals"]
    tensorboard: bool = RUN["tensorboard"]  # also write TensorBoard logs under {results_dir}/tensorboard/{stem}
    cuda_graphs: bool = False  # replay the update from CUDA graphs (GPU only)
    env_workers: int | None = 0  # environment worker processes (0: in this process, evaluation blocks; None: auto)
    # what steps the environments: "gymnasium", or "envpool" (Atari, ac_main.py)
    env_backend: str = agreed("gymnasium", older="gymnasium")
    # task variants: "all" also evaluates each agent on every agent's task of its seed
    eval_tasks: str = agreed(RUN["eval_tasks"], older="own")
    overwrite: bool = RUN["overwrite"]
    n_step: int = agreed(REPLAY["n_step"], older=1)  # N-step returns of the replay learners (1: one-step targets)
    per: dict = agreed(factory=dict, older={})  # prioritized replay: alpha, beta, beta_steps, eps ({}: uniform replay)
    # the TD3 tutorial's protocol (utils/run/episodes.py): one evaluation episode after every training episode,
    # "solved" when the mean of the last solved_window of them exceeds solved_at, at most max_episodes episodes
    episode_eval: bool = agreed(STEPS["episode_eval"], older=False)
    solved_at: float | None = agreed(STEPS["solved_at"], older=None)
    solved_window: int = agreed(STEPS["solved_window"], older=100)
    max_episodes: int | None = agreed(STEPS["max_episodes"], older=None)
    # old Gym: a time-limit cut stops bootstrapping as a termination does
    timelimit_as_terminal: bool = agreed(STEPS["timelimit_as_terminal"], older=False)
    # during start_time_steps: uniform random actions, or "policy" (policy + noise)
    warmup_actions: str = agreed(STEPS["warmup_actions"], older="random")
    # initial parameters of a seed's agents: "common" (all equal to agent 0's, drawn from the seed's own stream, as
    # Diff-DAC's reference code starts its learners) or "separate" (each from its own seed); None: common for
    # diffusion (DIFF_) policies, separate otherwise
    init: str | None = agreed(RUN["init"], older="separate")
    # the centralised multi-task baseline (ac_main.py --task_per_env N): one agent whose environment k plays the
    # task of agent k mod N of the seed; 0: off
    task_per_env: int = agreed(ON_POLICY_STEPS["task_per_env"], older=ON_POLICY_STEPS["task_per_env"])

    def __post_init__(self):
        if self.init is None:
            self.init = default_init(self.policy)
    algo: dict = agreed(factory=dict)  # keyword arguments of the algorithm class
    sharing: dict = agreed(factory=dict)  # the sharing scheme's settings (utils.run.sharing.SharingSettings.record)
    flags: dict = field(default_factory=dict)  # the command line as parsed, for the record

    @property
    def algorithm(self) -> str:
        return algorithm_of(self.policy)

    @property
    def envs_per_agent(self) -> int:
        """Training environments per agent: ``--envs_per_agent`` of the on-policy learners, 1 otherwise."""
        return int(getattr(self.algo_settings().own, "envs_per_agent", 1))

    def algo_settings(self) -> AlgoSettings:
        """``algo`` typed (``AlgoSettings``): the settings objects its record is made of."""
        return AlgoSettings.of(self.algorithm, self.algo)

    @property
    def method(self) -> Method:
        return method_of(self.policy)

    @property
    def is_dase(self) -> bool:
        return self.method.experience

    @property
    def is_dpd(self) -> bool:
        return self.method.distils

    @property
    def variant(self) -> str:
        """The file-name tokens of this run's settings (utils/run/names.py: each from its field's declaration)."""
        from .names import variant_of

        return variant_of({**self.algo, **self.sharing, "init": self.init, "task_per_env": self.task_per_env},
                          self.policy)

    def sharing_settings(self):
        """The typed sharing settings of this run."""
        from .sharing import SharingSettings

        return SharingSettings.of(self.policy, self.num_agents, self.sharing)

    @property
    def stem(self) -> str:
        return run_stem(self.policy, self.env, self.seed, self.variant)

    def agent_names(self) -> list[str]:
        """File stems per agent, as in the paper's data: {stem} or {stem}_Agent_{i}."""
        return curve_names(self.stem, self.policy, self.num_agents)

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.checkpoint_dir or Path(self.results_dir) / "checkpoints") / f"{self.stem}.pt"

    def agent_seeds(self) -> list[int]:
        return [self.seed + 100 * i for i in range(self.num_agents)]

    @property
    def task_count(self) -> int:
        """The tasks a seed's agents play together: N with --task_per_env N, else one per agent."""
        return self.task_per_env or self.num_agents

    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds else [self.seed]

    def for_seed(self, seed: int) -> RunConfig:
        """The config of running ``seed`` alone (what that seed's files and checkpoint record)."""
        flags = {**self.flags, "seed": seed, "seeds": None} if self.flags else self.flags
        return replace(self, seed=seed, seeds=None, flags=flags)

    @property
    def name(self) -> str:
        """stem for one seed; {policy}_{env}_{seeds} for several."""
        return self.name_for(self.seed_list())

    def name_for(self, seeds: list[int]) -> str:
        """The name of this run's ``seeds`` alone: a seed's stem, or {policy}_{env}_{a,b,...} for several."""
        if len(seeds) == 1:
            return run_stem(self.policy, self.env, seeds[0], self.variant)
        return run_stem(self.policy, self.env, "{" + ",".join(map(str, seeds)) + "}", self.variant)


# learners (seeds x agents) one process may hold: each has its networks, optimizer states and environments
MAX_MEMBERS = 4096
MAX_EVAL_EPISODES = 1000  # evaluation episodes per learner and evaluation: one environment each


def flag_names(names: dict[str, str] | None) -> Callable[[str], str]:
    """A RunConfig field -> its flag as the calling command line spells it (``names``: the script's own names)."""
    own = names or {}
    return lambda field: "--" + own.get(field, field)


def check_settings(cfg: RunConfig, names: dict[str, str] | None = None) -> None:
    """The checks every run takes before anything is created or written (``checks.validate`` adds A3C's own first).

    ``names`` maps RunConfig fields to the flag names of the calling command line.
    """
    flag = flag_names(names)
    _check_members(cfg)
    _check_numbers(cfg, flag)
    _check_tasks(cfg)
    _check_episodes(cfg)
    _check_execution(cfg)
    _check_sizes(cfg)
    check_footprint(cfg)  # every size flag: the memory of networks, batches, buffers and environments
    _check_folders(cfg)


def _check_members(cfg: RunConfig) -> None:
    """The learners one process holds, before anything (a graph over them included) is built; their memory is
    ``footprint.check_footprint``'s, once the numbers are checked."""
    members = len(cfg.seed_list()) * max(int(cfg.num_agents), 1)
    if members > MAX_MEMBERS:
        raise UsageError(f"--seeds/--num_agents: {len(cfg.seed_list())} seed(s) x {cfg.num_agents} agent(s) = {members} "
                         f"learners in one process, at most {MAX_MEMBERS}; split the seeds over several processes "
                         "(python -m utils.sweep does) or use fewer agents")


def _check_numbers(cfg: RunConfig, flag) -> None:
    """The policy, counts and step numbers."""
    if parse_policy(cfg.policy) is None:
        raise UsageError(f"--policy: unknown policy {cfg.policy!r}")
    positive = {"num_agents": cfg.num_agents, "max_time_steps": cfg.max_time_steps, "eval_freq": cfg.eval_freq,
                "batch_size": cfg.batch_size, "buffer_size": cfg.buffer_size, "updates_per_step": cfg.updates_per_step,
                "eval_episodes": cfg.eval_episodes}
    for name, value in positive.items():
        if value <= 0:
            raise UsageError(f"{flag(name)} must be a positive integer, got {value}")
    if cfg.updates_per_step > 1000:
        raise UsageError(f"{flag('updates_per_step')} {cfg.updates_per_step}: at most 1000 updates per environment step")
    if cfg.eval_episodes > MAX_EVAL_EPISODES:
        raise UsageError(f"--eval_episodes {cfg.eval_episodes}: at most {MAX_EVAL_EPISODES} episodes per evaluation "
                         "(each is an environment per learner)")
    if cfg.eval_policy not in ("greedy", "sample"):
        raise UsageError(f"--eval_policy {cfg.eval_policy!r}: use greedy or sample")
    if cfg.eval_policy == "sample" and ALGORITHM[cfg.algorithm].family != "rollout":
        raise UsageError(f"--eval_policy sample: {cfg.algorithm} evaluates greedily; A2C, SEAC and ACER can sample")
    if not is_multi_agent(cfg.policy) and cfg.num_agents != 1:
        forms = [f"{m}_{cfg.algorithm}" for m in ALGORITHM[cfg.algorithm].methods if m]  # those that exist
        raise UsageError(f"--num_agents {cfg.num_agents}: {cfg.policy} is a single agent"
                         + (f"; use {', '.join(forms)} for several" if forms else ""))
    if ALGORITHM[cfg.algorithm].agents > 1 and cfg.num_agents < 2:
        raise UsageError(f"--num_agents {cfg.num_agents}: {cfg.policy}'s agents learn from each other's rollouts; it "
                         "needs at least 2 (A2C is the single learner)")
    if cfg.is_dpd and cfg.num_agents < 2:
        raise UsageError(f"--num_agents {cfg.num_agents}: {cfg.policy} distils between learners; it needs at least 2")
    if cfg.method.diffuses and cfg.num_agents < 2:
        raise UsageError(f"--num_agents {cfg.num_agents}: {cfg.policy} averages parameters over a graph; it needs "
                         "at least 2 agents")
    cfg.sharing_settings().check()
    if cfg.n_step <= 0:
        raise UsageError(f"--n_step must be a positive integer, got {cfg.n_step}")
    if cfg.n_step > 1 and cfg.n_step * cfg.num_agents > cfg.buffer_size:
        raise UsageError(f"--n_step {cfg.n_step}: the buffer (--buffer_size {cfg.buffer_size}) cannot hold {cfg.n_step} "
                         f"steps of {cfg.num_agents} agent(s); lower --n_step")
    algo = cfg.algo_settings()
    if getattr(algo.own, "normalize_obs", False) and (cfg.is_dpd or cfg.method.diffuses):
        raise UsageError(f"--normalize_obs: {cfg.policy}'s agents read each other's networks (distillation or "
                         "parameter averaging), which each agent's own statistics would not fit; not implemented")
    if algo.intrinsic and cfg.n_step > 1:
        raise UsageError(f"--n_step {cfg.n_step}: intrinsic rewards (--curiosity, --rnd) are computed for one-step "
                         "transitions here; drop one")
    if cfg.per:
        p = cfg.per
        for ok, message in [(p["alpha"] >= 0, f"--per_alpha {p['alpha']} must be >= 0"),
                            (0.0 <= p["beta"] <= 1.0, f"--per_beta {p['beta']} must be in [0, 1]"),
                            (p["beta_steps"] > 0, f"--per_beta_steps must be a positive integer, got {p['beta_steps']}"),
                            (p["eps"] > 0, f"--per_eps {p['eps']} must be > 0")]:
            if not ok:
                raise UsageError(message)
        if cfg.sharing_settings().samples_by_writer:
            raise UsageError("--prioritized: learners that sample only their neighbours' rows (DASE on a graph that "
                             "is not complete) are not prioritized here; drop --prioritized or use --topology complete")
    k = cfg.envs_per_agent
    if k <= 0:
        raise UsageError(f"--envs_per_agent must be a positive integer, got {k}")
    if getattr(algo.own, "n_steps", 1) <= 0:
        raise UsageError(f"--n_steps must be a positive integer, got {algo.own.n_steps}")
    for name, value in {"eval_freq": cfg.eval_freq, "max_time_steps": cfg.max_time_steps}.items():
        if k > 1 and value % k:
            raise UsageError(f"{flag(name)} {value}: each step of an agent is one step of its {k} environments "
                             f"(--envs_per_agent {k}), so give a multiple of {k}")
    if cfg.start_time_steps < 0:
        raise UsageError(f"{flag('start_time_steps')} must be >= 0, got {cfg.start_time_steps}")
    if cfg.eval_freq > cfg.max_time_steps:
        raise UsageError(f"--eval_freq {cfg.eval_freq} is larger than the run ({cfg.max_time_steps} steps): "
                         f"lower --eval_freq or raise {flag('max_time_steps')}")


def _check_tasks(cfg: RunConfig) -> None:
    """--eval_tasks: "all" needs agents that play different tasks."""
    from ..envs.variants import has_variants, redraws

    if cfg.eval_tasks not in EVAL_TASKS:
        raise UsageError(f"--eval_tasks must be one of {', '.join(EVAL_TASKS)}, got {cfg.eval_tasks!r}")
    if cfg.task_per_env:
        if cfg.task_per_env < 2:
            raise UsageError(f"--task_per_env {cfg.task_per_env}: the tasks of at least 2 agents (0: off)")
        if cfg.num_agents != 1 or is_multi_agent(cfg.policy):
            raise UsageError(f"--task_per_env: one learner plays the tasks of {cfg.task_per_env} agents; use a "
                             f"single-agent policy (A2C, ACER), not {cfg.policy} with {cfg.num_agents} agents")
        if not has_variants(cfg.env) or redraws(cfg.env):
            raise UsageError(f"--task_per_env: {cfg.env} has no task per agent; use a RandomExtreme task variant "
                             "(e.g. RandomExtremeAcrobot-v1)")
        if cfg.envs_per_agent < cfg.task_per_env:
            raise UsageError(f"--task_per_env {cfg.task_per_env} needs --envs_per_agent >= {cfg.task_per_env} (one "
                             f"environment per task at least), got {cfg.envs_per_agent}")
    if cfg.task_per_env < 0:
        raise UsageError(f"--task_per_env {cfg.task_per_env}: a number of agents' tasks (0: off)")
    if cfg.eval_tasks != "all":
        return
    if not has_variants(cfg.env):
        raise UsageError(f"--eval_tasks all: every agent plays the same {cfg.env}; it needs a task variant with one "
                         "task per agent (e.g. RandomExtremePendulum-v1), or drop --eval_tasks")
    if redraws(cfg.env):
        raise UsageError(f"--eval_tasks all: {cfg.env} draws new parameters at every reset, the same way for every "
                         "agent; use its RandomExtreme variant (one task per agent), or drop --eval_tasks")
    if cfg.task_count < 2:
        raise UsageError(f"--eval_tasks all: with --num_agents {cfg.num_agents} the only task is the agent's own; "
                         "drop --eval_tasks or train several agents")


def _check_episodes(cfg: RunConfig) -> None:
    """The initial parameters; the tutorial's protocol and the warm-up (replay learners only: the command lines of the
    others lack them)."""
    import math

    if cfg.init not in INITS:
        raise UsageError(f"--init must be one of {', '.join(INITS)}, got {cfg.init!r}")
    if cfg.num_agents == 1 and cfg.init != default_init(cfg.policy):
        raise UsageError(f"--init {cfg.init}: a run of one agent has no peer to start equal to or apart from; drop it")
    if cfg.warmup_actions not in WARMUP_ACTIONS:
        raise UsageError(f"--warmup_actions must be one of {', '.join(WARMUP_ACTIONS)}, got {cfg.warmup_actions!r}")
    if cfg.solved_window <= 0:
        raise UsageError(f"--solved_window must be a positive integer, got {cfg.solved_window}")
    if cfg.max_episodes is not None and cfg.max_episodes <= 0:
        raise UsageError(f"--max_episodes must be a positive integer, got {cfg.max_episodes}")
    if cfg.solved_at is not None and not math.isfinite(cfg.solved_at):
        raise UsageError(f"--solved_at must be a finite number, got {cfg.solved_at}")
    if cfg.solved_at is not None and not cfg.episode_eval:
        raise UsageError("--solved_at judges the episodes of --episode_eval: add --episode_eval")
    if cfg.solved_window != RunConfig.__dataclass_fields__["solved_window"].default and cfg.solved_at is None:
        raise UsageError(f"--solved_window {cfg.solved_window} applies with --solved_at: add it or drop --solved_window")


def _check_execution(cfg: RunConfig) -> None:
    """Device, threads, workers, checkpoints, TensorBoard, resume."""
    if cfg.cuda_graphs and not cfg.device.startswith("cuda"):
        raise UsageError(f"--cuda_graphs needs a GPU (--device cuda), the run is on {cfg.device}; drop --cuda_graphs")
    if cfg.cuda_graphs and cfg.compile:
        raise UsageError("--cuda_graphs and --compile do not combine: pick one")
    if cfg.env_workers is not None and cfg.env_workers < 0:
        raise UsageError(f"--env_workers must be >= 0 (0 steps the environments in this process), got {cfg.env_workers}")
    if cfg.threads is not None and cfg.threads <= 0:
        raise UsageError(f"--threads must be a positive integer, got {cfg.threads}")
    if cfg.threads is not None and cfg.threads > 4 * available_cores():
        raise UsageError(f"--threads {cfg.threads}: this machine has {available_cores()} cores; give at most "
                         f"{4 * available_cores()}")
    if cfg.checkpoint_freq < 0:
        raise UsageError(f"--checkpoint_freq must be >= 0 (0 disables checkpoints), got {cfg.checkpoint_freq}")
    if cfg.stop_at is not None and cfg.stop_at <= 0:
        raise UsageError(f"--stop_at must be a positive step, got {cfg.stop_at}")
    if cfg.stop_at is not None and not cfg.checkpoint_freq:
        raise UsageError(f"--stop_at {cfg.stop_at} pauses the run in its checkpoint: drop --checkpoint_freq 0")
    if cfg.tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401  (only whether it imports)
        except ImportError:
            raise UsageError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
    if cfg.resume and cfg.overwrite:
        raise UsageError("--resume and --overwrite contradict each other: pick one")


def _check_sizes(cfg: RunConfig) -> None:
    """The buffer against the batches, and the seeds' range."""
    if cfg.buffer_size < cfg.num_agents:
        raise UsageError(f"--buffer_size {cfg.buffer_size} cannot hold one step of {cfg.num_agents} agents")
    if cfg.buffer_size < cfg.batch_size:
        raise UsageError(f"--buffer_size {cfg.buffer_size} is smaller than one batch (--batch_size {cfg.batch_size}): "
                         "raise --buffer_size or lower --batch_size")
    distil = cfg.sharing_settings().dpd_batch_size if cfg.is_dpd else 0
    if cfg.buffer_size < distil:
        raise UsageError(f"--buffer_size {cfg.buffer_size} is smaller than one distillation batch (--dpd_batch_size "
                         f"{distil}): raise --buffer_size or lower --dpd_batch_size")
    for seed in cfg.seed_list():
        if not 0 <= seed or seed + 100 * cfg.num_agents >= 2**32:
            raise UsageError(f"--seed {seed}: seeds must be in [0, 2**32 - {100 * cfg.num_agents})")
        if not 0 <= seed + cfg.eval_seed_offset < 2**32:
            raise UsageError(f"--eval_seed_offset {cfg.eval_seed_offset}: seed {seed} plus it must be in [0, 2**32)")
    if cfg.seeds is not None and (not cfg.seeds or len(set(cfg.seeds)) != len(cfg.seeds)):
        raise UsageError(f"--seeds {cfg.seeds}: give one or more different seeds")


def _check_folders(cfg: RunConfig) -> None:
    """Every folder the run writes is a folder (or can become one) and takes files."""
    for name, given in {"--results_dir": cfg.results_dir, "--checkpoint_dir": cfg.checkpoint_dir,
                        "--models_dir": cfg.models_dir}.items():
        if given is not None and not str(given).strip():  # Path("") is the current folder: files would land there
            raise UsageError(f"{name} {str(given)!r}: an empty path names no folder; give a folder's name")
    folders: dict[str, str | Path] = {"--results_dir": cfg.results_dir, "--checkpoint_dir": cfg.checkpoint_path.parent,
               "--models_dir": cfg.models_dir}
    for name, folder in folders.items():
        refused = bad_name(folder)
        if refused:
            raise UsageError(f"{name}: {refused}; pick a shorter path")
        blocked = file_in_the_way(folder)
        if blocked is not None:
            raise UsageError(f"{name} {folder}: {blocked} is a file, not a folder; pick another path")
    written = {"--results_dir": True, "--checkpoint_dir": cfg.checkpoint_freq > 0, "--models_dir": cfg.save_model}
    for name, folder in folders.items():
        reason = written[name] and unwritable(Path(folder))
        if reason:
            raise UsageError(f"{name} {folder}: cannot write there ({reason}); pick another path")


def notices(cfg: RunConfig, names: dict[str, str] | None = None) -> list[str]:
    """Legal settings that are probably not what the user meant."""
    flag = flag_names(names)
    out = []
    if cfg.start_time_steps >= cfg.max_time_steps:
        out.append(f"note: {flag('start_time_steps')} {cfg.start_time_steps} >= {flag('max_time_steps')} "
                   f"{cfg.max_time_steps}: the whole run acts randomly and never trains")
    n = cfg.num_agents
    if cfg.sharing_settings().samples_by_writer and cfg.buffer_size % n:
        out.append(f"note: --buffer_size {cfg.buffer_size} holds {cfg.buffer_size - cfg.buffer_size % n} transitions: "
                   f"sampling by neighbour keeps whole steps of the {n} agents")
    elif cfg.n_step > 1 and cfg.is_dase and cfg.buffer_size % n:
        out.append(f"note: --buffer_size {cfg.buffer_size} holds {cfg.buffer_size - cfg.buffer_size % n} transitions: "
                   f"N-step returns keep whole steps of the {n} agents")
    if cfg.max_time_steps % cfg.eval_freq:
        out.append(f"note: the last {cfg.max_time_steps % cfg.eval_freq} steps are not evaluated "
                   f"({flag('max_time_steps')} is not a multiple of --eval_freq {cfg.eval_freq})")
    return out
