"""The run's settings, typed, one dataclass per group of flags: what every entry script takes (``RunSettings``, the
environment, seeds, device, evaluation, files, checkpoints) and what the replay scripts add (``ReplaySettings``, the
buffer, its batches and prioritized replay). Their flags and --help are generated from the fields
(utils/settings.py); the checks that need the whole run (its steps, its agents) stay with ``RunConfig``
(utils/run/config.py). The sharing flags are ``utils.run.sharing``'s; each algorithm's its family's ``settings``.

A new run flag is one field here, and its RunConfig field where the run needs it.
"""
from __future__ import annotations

from dataclasses import dataclass, make_dataclass

from ..errors import UsageError
from ..naming import default_init
from ..settings import Settings, Token, again, count, real, setting


@dataclass
class RunSettings(Settings):
    """What every command line takes."""
    env: str = setting("Hopper", "Gymnasium environment id; a name without its version is the newest (Hopper: "
                       "Hopper-v5); the paper's MuJoCo -v2 ids map to -v5", parse=str)
    seed: int | None = setting(None, "run seed; agent i uses seed + 100 * i", parse=int, default_text="0")
    seeds: list | None = setting(None, "several seeds in one process, e.g. --seeds 0 1 2 or --seeds 0-9: one "
                                    "batched model, each seed's files exactly those of --seed S alone (overrides "
                                    "--seed)", parse=str, nargs="+", metavar="SEED", default_text="none")
    gpu: int = setting(0, "GPU ordinal, the paper's spelling; CPU when no GPU is present", parse=int)
    device: str | None = setting(None, "cpu | cuda | cuda:N; overrides --gpu and fails if the device is missing",
                                    parse=str, default_text="auto")
    num_agents: int | None = setting(
        None, "agents sharing one buffer (DASE_), distilling from each other (DPD_) or averaging parameters (DIFF_)",
        parse=count, default_text="2 for DASE_ and DPD_ policies, 4 for DIFF_, 1 otherwise")
    diffusion: bool = setting(False, "after every update each agent averages its actor and critic with its graph "
                              "neighbours (Diff-DAC's adapt-then-combine): TD3 becomes DIFF_TD3, DASE_TD3 "
                              "DIFF_DASE_TD3")
    init: str | None = setting(
        None, "initial parameters of a seed's agents: common = all start equal to agent 0's (drawn from the seed's "
        "own stream, as Diff-DAC's reference starts its learners), separate = each from its own seed", parse=str,
        choices=("common", "separate"), default_text="common for diffusion, DIFF_ policies and --diffusion; "
        "separate otherwise", token=Token(210, lambda v, s, p: None if p is None or v in (None, default_init(p))
                                          else f"{v}init", "commoninit|separateinit"))
    eval_freq: int = setting(1000, "evaluate every this many steps", parse=count)
    eval_episodes: int = setting(10, "episodes per evaluation", parse=count)
    eval_seed_offset: int = setting(
        100, "the evaluation episodes' reset seeds derive from the run's seed plus this, for every agent of the run; "
        "e.g. 0 makes a one-agent run of seed s + 100 score on the episodes of a run of seed s", parse=int)
    eval_tasks: str = setting(
        "own", "task variants (e.g. --env RandomExtremePendulum-v1, one task per agent): 'all' also evaluates each "
        "agent on every agent's task, with the same episode seeds, into {curve}_tasks.npy [evaluations x agents]; "
        "the curve stays the own-task score", parse=str, choices=("own", "all"))
    results_dir: str = setting("Learning Curves", "where curves (.npy) and the run's config (.json) go", parse=str)
    save_model: bool = setting(False, "save each agent's networks after every evaluation")
    load_model: str = setting("", "model to start from: NAME loads models/NAME[_Agent_i].pt, 'default' the run's "
                              "own name", parse=str, default_text="none")
    models_dir: str = setting("models", "folder of --save_model/--load_model files", parse=str)
    quiet: bool = setting(False, "print nothing but errors")
    threads: int | None = setting(None, "torch CPU threads; 1 when several runs share a machine. On a GPU the "
                                     "default is 1, so the environment workers get the cores", parse=int,
                                     default_text="all cores on the CPU, 1 on a GPU")
    flush_denormals: bool = setting(
        False, "treat float32 numbers below 1.2e-38 (denormals) as zero on the CPU (torch.set_flush_denormal): on "
        "Intel CPUs a DDPG critic whose weight decay drives unused weights there runs its products many times faster "
        "(docs/performance.md); the curves then differ in the last bits from a run without it")
    compile: bool = setting(False, "torch.compile the networks (slow start: tens of seconds)")
    checkpoint_freq: int = setting(50_000, "write a checkpoint every this many steps and on SIGINT/SIGTERM; 0 "
                                   "disables; a finished run deletes it", parse=count)
    checkpoint_dir: str | None = setting(None, "where checkpoints go", parse=str,
                                            default_text="RESULTS_DIR/checkpoints")
    stop_at: int | None = setting(
        None, "pause the run at this step (counted as its step budget): write its checkpoint and exit with code 0; "
        "--resume continues it as if it had never stopped, e.g. every run of a sweep to 100k first (python -m "
        "utils.sweep --until)", parse=count, metavar="STEP", default_text="run to the end")
    resume: bool = setting(False, "continue this run from its checkpoint (does nothing if it finished, starts from "
                           "step 0 if it has no checkpoint)")
    overwrite: bool = setting(False, "start the run over, deleting its old curves, weights, JSON record and "
                              "checkpoint")
    env_workers: int | None = setting(
        None, "worker processes that step the environments and evaluation episodes, evaluation then running beside "
        "training; 0: all in this process; results are the same for every value", parse=int,
        default_text="the cores torch leaves free, 0 when fewer than 2")
    tensorboard: bool = setting(False, "also log returns, losses, sharing weights and steps/s per agent for "
                                "TensorBoard, under RESULTS_DIR/tensorboard/RUN (view: tensorboard --logdir "
                                "RESULTS_DIR/tensorboard)")


@dataclass
class OnPolicyRunSettings(RunSettings):
    """ac_main.py's: CartPole by default, its own policies' agents and diffusion, and how evaluation picks
    actions."""
    env: str = again("CartPole-v1")
    num_agents: int | None = setting(
        None, "agents per seed: SEAC's, each learning from all agents' rollouts, or DIFF_A2C's, averaging parameters "
        "(A2C, A3C and ACER are one agent)", parse=count, default_text="2 for SEAC, 4 for DIFF_A2C, 1 otherwise")
    diffusion: bool = setting(False, "after every update each agent averages its parameters with its graph "
                              "neighbours (Diff-DAC's adapt-then-combine): A2C becomes DIFF_A2C")
    eval_policy: str = setting(
        "greedy", "evaluation actions: greedy = the policy's most likely action (its mean when continuous), sample = "
        "drawn from the policy as in training, from a stream of each agent's seed and the step (the SEAC authors' "
        "scores on Level-Based Foraging, where a greedy policy can stall)", parse=str, choices=("greedy", "sample"))
    env_backend: str | None = setting(
        None, "what steps an Atari game for A2C and ACER: envpool (EnvPool's C++ thread pool, its own DeepMind "
        "preprocessing; pip install -r requirements-atari.txt; --env_workers sets its threads) or gymnasium (ale-py "
        "under this project's wrappers, utils/envs/atari.py); the two differ in small ways (docs/actor_critic.md)",
        parse=str, choices=("envpool", "gymnasium"),
        default_text="envpool for Atari games where it is installed (A3C: gymnasium), gymnasium otherwise")


@dataclass
class ReplaySettings(Settings):
    """What the replay scripts (DASE_main.py, sac_main.py) add: the buffer and its batches."""
    buffer_size: int = setting(1_000_000, "replay capacity in transitions: the one buffer all agents share (DASE_, "
                               "baselines), or each learner's own (DPD_); at least --batch_size", parse=count)
    batch_size: int = setting(256, "minibatch size per agent", parse=count)
    n_step: int = setting(1, "N-step returns: each target sums the rewards of up to N steps of the sample's writer "
                          "and bootstraps with gamma^N, cut where an episode ended (a time limit still bootstraps)",
                          parse=count)
    prioritized: bool = setting(False, "prioritized replay (Schaul et al. 2016): each agent samples rows with "
                                "probability p^alpha / sum, p = |TD error| + eps, new rows at the highest priority; "
                                "importance weights multiply the sharing weights")
    per_alpha: float = setting(0.6, "--prioritized: priority exponent alpha", parse=real)
    per_beta: float = setting(0.4, "--prioritized: importance-weight exponent beta at the start, annealed linearly "
                              "to 1", parse=real)
    per_beta_steps: int | None = setting(None, "--prioritized: steps over which beta reaches 1", parse=count,
                                            default_text="the run's length")
    per_eps: float = setting(1e-6, "--prioritized: eps added to |TD error|", parse=real)
    cuda_graphs: bool | None = setting(None, "replay each batched update from a CUDA graph (GPU only)",
                                          off_flag="--no_cuda_graphs", default_text="on a GPU unless --compile")

    def check_together(self) -> None:
        per = (self.per_alpha, self.per_beta, self.per_beta_steps, self.per_eps)
        if not self.prioritized and per != (0.6, 0.4, None, 1e-6):
            raise UsageError("--per_alpha/--per_beta/--per_beta_steps/--per_eps apply with --prioritized; add it or "
                             "drop them")


# ---- each entry script's own flags ------------------------------------------------------------------------------
def policy_settings(default: str, policies) -> type:
    """A script's ``--policy``: its default and the policies it trains (a class per script, first in its --help)."""
    return make_dataclass("PolicySettings", [("policy", str, setting(default, f"one of {', '.join(policies)}",
                                                                     parse=str))], bases=(Settings,))


@dataclass
class ReplayStepSettings(Settings):
    """DASE_main.py's step budget, warm-up and the TD3 tutorial's episode flags."""
    start_time_steps: int = setting(25_000, "initial steps (per agent) with no updates, acting uniformly at random "
                                    "unless --warmup_actions policy", parse=count)
    max_time_steps: int = setting(1_000_000, "environment steps per agent", parse=count, default_text="1e6")
    warmup_actions: str = setting("random", "what acts during --start_time_steps (no updates then): uniformly random "
                                  "actions, or the untrained policy plus exploration noise, as the TD3 tutorial does",
                                  parse=str, choices=("random", "policy"))
    timelimit_as_terminal: bool = setting(False, "store a time-limit cut as a termination (no bootstrap), as old Gym "
                                          "code did; for comparisons with it (off: the cut bootstraps)")
    episode_eval: bool = setting(False, "after every training episode of every agent, play one deterministic "
                                 "evaluation episode and write {curve}_episode_eval.npy: rows (episode, agent step, "
                                 "return), as the TD3 tutorial")
    solved_at: float | None = setting(
        None, "with --episode_eval: an agent is solved at the first episode where the mean return of its last "
        "--solved_window evaluation episodes exceeds R; the run's JSON records episode and step, and a seed stops when "
        "all its agents are solved or done (--max_episodes; peers keep training until then)", parse=real,
        metavar="R", default_text="none")
    solved_window: int = setting(100, "--solved_at: evaluation episodes in the mean", parse=count)
    max_episodes: int | None = setting(None, "an agent is done after this many training episodes; a seed stops when "
                                       "all its agents are done or solved", parse=count, default_text="no limit")


@dataclass
class SacStepSettings(Settings):
    """sac_main.py's step budget and warm-up, under the spellings of the SAC code it follows."""
    start_time_steps: int = setting(25_000, "initial steps with uniformly random actions and no updates",
                                    parse=count, flag="--start_steps")
    max_time_steps: int = setting(1_000_000, "environment steps per agent", parse=count, flag="--num_steps",
                                  default_text="1e6")
    updates_per_step: int = setting(1, "gradient updates per environment step", parse=count)


@dataclass
class OnPolicyStepSettings(Settings):
    """ac_main.py's step budget, warm-up and the centralised multi-task baseline."""
    max_time_steps: int = setting(1_000_000, "environment steps per agent, over all of its environments",
                                  parse=count, default_text="1e6")
    start_time_steps: int = setting(0, "initial steps per agent with uniformly random actions and no updates",
                                    parse=count)
    task_per_env: int = setting(
        0, "the centralised multi-task baseline: one agent whose environment k plays the task agent k mod N of the "
        "same seed would get (task variants; needs --envs_per_agent >= N); files named {policy}_tasks{N}_...; "
        "--eval_tasks all evaluates it on the N tasks (0: off)", parse=int, metavar="N",
        token=Token(70, lambda v, s, p: f"tasks{int(v)}" if int(v or 0) > 0 else None, r"tasks\d+"))
