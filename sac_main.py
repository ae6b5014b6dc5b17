"""Train SAC, DASE_SAC or the DPD_SAC baseline on one Gymnasium environment: a Gaussian or deterministic policy on a
continuous action space, a categorical one (Christodoulou's discrete SAC) on a discrete action space."""
from __future__ import annotations

import sys

from utils.cli import (Parser, add_common_flags, add_sequence_flags, check_policy, count, default_agents, main_guard,
                       real, resolve_env, resolve_policy, run_flags, sequence_settings, shared_settings, train_checked)
from utils.errors import UsageError
from utils.naming import SCRIPT_FLAG_NAMES, SCRIPT_POLICIES

POLICIES = SCRIPT_POLICIES["sac_main.py"]
DISCRETE_TARGET_ENTROPY_SCALE = 0.89  # CleanRL's; Christodoulou's 0.98 lets alpha grow without bound for |A| = 2
FLAG_NAMES = SCRIPT_FLAG_NAMES["sac_main.py"]


def parse(argv=None):
    p = Parser(prog="sac_main.py", description=__doc__)
    p.add_argument("--policy", type=str, default="DASE_SAC", help=f"one of {', '.join(POLICIES)} (default: DASE_SAC)")
    p.add_argument("--policy_type", type=str, default=None, choices=["Deterministic", "Gaussian"],
                   help="policy family on a continuous action space (default: Deterministic); refused on a discrete "
                        "one, whose policy is categorical")
    add_common_flags(p)
    p.add_argument("--start_steps", type=count, default=25_000,
                   help="initial steps with uniformly random actions and no updates (default: 25000)")
    p.add_argument("--num_steps", type=count, default=1_000_000, help="environment steps per agent (default: 1e6)")
    p.add_argument("--updates_per_step", type=count, default=1, help="gradient updates per environment step (default: 1)")
    p.add_argument("--target_update_interval", type=count, default=1,
                   help="soft-update the target critics every this many updates (default: 1)")
    p.add_argument("--alpha", type=real, default=0.2, help="entropy temperature (initial value when tuned) (default: 0.2)")
    p.add_argument("--automatic_entropy_tuning", action="store_const", const=True, default=None,
                   help="learn alpha towards a target entropy: -|A| for a Gaussian policy (a deterministic one has "
                        "no entropy), --target_entropy_scale * log|A| for discrete actions (default: off; on for "
                        "discrete actions)")
    p.add_argument("--no_automatic_entropy_tuning", dest="automatic_entropy_tuning", action="store_const",
                   const=False, help="keep alpha fixed at --alpha (for discrete actions, where tuning is the default)")
    p.add_argument("--target_entropy_scale", type=real, default=None,
                   help="discrete actions: alpha is tuned towards entropy target_entropy_scale * log|A|, in (0, 1]. "
                        "Christodoulou's 0.98 makes alpha grow without bound for 2 actions (CartPole), as reported "
                        "on p-christ's discrete SAC; CleanRL uses 0.89 (default: 0.89)")
    p.add_argument("--reward_scale", type=real, default=None,
                   help="reward multiplier in the critic target (default: 5; 20 for Humanoid; 1 for discrete "
                        "actions)")
    p.add_argument("--gamma", type=real, default=0.99, help="discount factor (default: 0.99)")
    p.add_argument("--tau", type=real, default=0.005, help="target critic update rate (default: 0.005)")
    p.add_argument("--lr", type=real, default=3e-4, help="Adam learning rate of every network (default: 3e-4)")
    p.add_argument("--hidden_size", type=int, default=256, help="width of the two hidden layers (default: 256)")
    p.add_argument("--vtrace", action="store_true",
                   help="V-trace corrections of the N-step targets (needs --n_step > 1 and --policy_type Gaussian: "
                        "the stored behaviour Gaussian gives the importance ratios)")
    p.add_argument("--vtrace_rho", type=real, default=1.0, help="--vtrace: rho_bar, the clip of rho (default: 1)")
    p.add_argument("--vtrace_c", type=real, default=1.0, help="--vtrace: c_bar, the clip of the traces (default: 1)")
    p.add_argument("--vtrace_lambda", type=real, default=1.0, help="--vtrace: lambda of the traces (default: 1)")
    add_sequence_flags(p)
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.envs.registry import action_kind
    from utils.run import RunConfig

    check_policy(args.policy, "sac_main.py")
    policy = resolve_policy(args)
    env = resolve_env(args.env, args.quiet)
    discrete = action_kind(env, "SAC") == "discrete"
    if discrete:
        discrete_defaults(args, env)
    else:
        if args.target_entropy_scale is not None:
            raise UsageError(f"--target_entropy_scale: {env} has continuous actions, whose target entropy is -|A|; "
                             "the flag applies to discrete action spaces (drop it)")
        # the continuous defaults, as the flags always held them (records and checkpoints stay as they were)
        args.policy_type = args.policy_type or "Deterministic"
        args.automatic_entropy_tuning = bool(args.automatic_entropy_tuning)
    default_scale = 1.0 if discrete else 20.0 if env.startswith("Humanoid") else 5.0
    reward_scale = args.reward_scale if args.reward_scale is not None else default_scale
    tuning = "--automatic_entropy_tuning (the default for discrete actions; or --no_automatic_entropy_tuning)" \
        if discrete else "--automatic_entropy_tuning"
    checks = [(0.0 < args.tau <= 1.0, f"--tau {args.tau} must be in (0, 1]"),
              (0.0 <= args.gamma <= 1.0, f"--gamma {args.gamma} must be in [0, 1]"),
              (args.lr > 0, f"--lr {args.lr} must be positive"),
              (args.alpha >= 0, f"--alpha {args.alpha} must be >= 0"),
              (args.alpha > 0 or not args.automatic_entropy_tuning, f"{tuning} needs --alpha > 0"),
              (args.hidden_size > 0, f"--hidden_size must be a positive integer, got {args.hidden_size}"),
              (args.target_update_interval > 0,
               f"--target_update_interval must be a positive integer, got {args.target_update_interval}")]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    vtrace = (args.vtrace_rho, args.vtrace_c, args.vtrace_lambda)
    if not args.vtrace and vtrace != (1.0, 1.0, 1.0):
        raise UsageError("--vtrace_rho/--vtrace_c/--vtrace_lambda apply with --vtrace; add it or drop them")
    if args.vtrace:
        if discrete:
            raise UsageError(f"--vtrace: {env} has discrete actions; V-trace is implemented for the Gaussian SAC on "
                             "continuous actions only (drop --vtrace)")
        if args.n_step < 2:
            raise UsageError("--vtrace corrects N-step targets: add --n_step N with N >= 2")
        if args.policy_type != "Gaussian":
            raise UsageError("--vtrace needs action probabilities: use --policy_type Gaussian")
        if min(vtrace) <= 0 or args.vtrace_lambda > 1:
            raise UsageError("--vtrace_rho and --vtrace_c must be > 0, --vtrace_lambda in (0, 1]")
    algo = dict(policy_type=args.policy_type, gamma=args.gamma, tau=args.tau, lr=args.lr, alpha=args.alpha,
                automatic_entropy_tuning=args.automatic_entropy_tuning, reward_scale=reward_scale,
                hidden_size=args.hidden_size, target_update_interval=args.target_update_interval)
    if discrete:  # Christodoulou's SAC: categorical policy, no policy_type
        del algo["policy_type"]
        algo["target_entropy_scale"] = args.target_entropy_scale
    if args.vtrace:  # only then: runs without it keep the settings (and checkpoints) they always had
        algo["vtrace"] = list(vtrace)
    algo.update(sequence_settings(args, env, policy, args.start_steps, "--start_steps"))
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy), sharing=shared_settings(args, policy),
                     max_time_steps=args.num_steps, start_time_steps=args.start_steps,
                     updates_per_step=args.updates_per_step,
                     algo=algo, **run_flags(args))


def discrete_defaults(args, env: str) -> None:
    """Discrete SAC's settings where the continuous ones do not apply: no --policy_type (refused when given),
    alpha tuned by default, the target entropy's scale checked (default 0.89), --kl_div_var matched refused."""
    if args.policy_type is not None:
        raise UsageError(f"--policy_type {args.policy_type}: {env} has discrete actions; discrete SAC's policy is "
                         "categorical (drop --policy_type)")
    if args.kl_div_var == "matched":
        raise UsageError(f"--kl_div_var matched: {env} has discrete actions; their DASE weights compare action "
                         "probabilities per sample, with no reference variance (drop it)")
    if args.target_entropy_scale is None:
        args.target_entropy_scale = DISCRETE_TARGET_ENTROPY_SCALE
    if not 0.0 < args.target_entropy_scale <= 1.0:
        raise UsageError(f"--target_entropy_scale {args.target_entropy_scale} must be in (0, 1] (a share of the "
                         "largest entropy, log|A|)")
    if args.automatic_entropy_tuning is None:
        args.automatic_entropy_tuning = True


def run(argv=None):
    return train_checked(build_config(parse(argv)), FLAG_NAMES)


if __name__ == "__main__":
    sys.exit(main_guard(run))
