"""Train SAC, DASE_SAC or the DPD_SAC baseline (Gaussian or deterministic policy) on one Gymnasium environment."""
from __future__ import annotations

import sys

from utils.cli import (Parser, add_common_flags, check_policy, count, default_agents, main_guard, real, resolve_env,
                       resolve_policy, run_flags, shared_settings)
from utils.errors import UsageError
from utils.naming import SCRIPT_FLAG_NAMES, SCRIPT_POLICIES

POLICIES = SCRIPT_POLICIES["sac_main.py"]
FLAG_NAMES = SCRIPT_FLAG_NAMES["sac_main.py"]


def parse(argv=None):
    p = Parser(prog="sac_main.py", description=__doc__)
    p.add_argument("--policy", type=str, default="DASE_SAC", help=f"one of {', '.join(POLICIES)} (default: DASE_SAC)")
    p.add_argument("--policy_type", type=str, default="Deterministic", choices=["Deterministic", "Gaussian"],
                   help="policy family (default: Deterministic)")
    add_common_flags(p)
    p.add_argument("--start_steps", type=count, default=25_000,
                   help="initial steps with uniformly random actions and no updates (default: 25000)")
    p.add_argument("--num_steps", type=count, default=1_000_000, help="environment steps per agent (default: 1e6)")
    p.add_argument("--updates_per_step", type=count, default=1, help="gradient updates per environment step (default: 1)")
    p.add_argument("--target_update_interval", type=count, default=1,
                   help="soft-update the target critics every this many updates (default: 1)")
    p.add_argument("--alpha", type=real, default=0.2, help="entropy temperature (initial value when tuned) (default: 0.2)")
    p.add_argument("--automatic_entropy_tuning", action="store_true",
                   help="learn alpha towards entropy -|A| (Gaussian policy only; default: off)")
    p.add_argument("--reward_scale", type=real, default=None,
                   help="reward multiplier in the critic target (default: 5; 20 for Humanoid)")
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
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.run import RunConfig

    check_policy(args.policy, "sac_main.py")
    policy = resolve_policy(args)
    env = resolve_env(args.env, args.quiet)
    reward_scale = args.reward_scale if args.reward_scale is not None else (20.0 if env.startswith("Humanoid") else 5.0)
    checks = [(0.0 < args.tau <= 1.0, f"--tau {args.tau} must be in (0, 1]"),
              (0.0 <= args.gamma <= 1.0, f"--gamma {args.gamma} must be in [0, 1]"),
              (args.lr > 0, f"--lr {args.lr} must be positive"),
              (args.alpha >= 0, f"--alpha {args.alpha} must be >= 0"),
              (args.alpha > 0 or not args.automatic_entropy_tuning, "--automatic_entropy_tuning needs --alpha > 0"),
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
        if args.n_step < 2:
            raise UsageError("--vtrace corrects N-step targets: add --n_step N with N >= 2")
        if args.policy_type != "Gaussian":
            raise UsageError("--vtrace needs action probabilities: use --policy_type Gaussian")
        if min(vtrace) <= 0 or args.vtrace_lambda > 1:
            raise UsageError("--vtrace_rho and --vtrace_c must be > 0, --vtrace_lambda in (0, 1]")
    algo = dict(policy_type=args.policy_type, gamma=args.gamma, tau=args.tau, lr=args.lr, alpha=args.alpha,
                automatic_entropy_tuning=args.automatic_entropy_tuning, reward_scale=reward_scale,
                hidden_size=args.hidden_size, target_update_interval=args.target_update_interval)
    if args.vtrace:  # only then: runs without it keep the settings (and checkpoints) they always had
        algo["vtrace"] = list(vtrace)
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy), sharing=shared_settings(args, policy),
                     max_time_steps=args.num_steps, start_time_steps=args.start_steps,
                     updates_per_step=args.updates_per_step,
                     algo=algo, **run_flags(args))


def run(argv=None):
    from utils.run import notices, train, validate

    cfg = build_config(parse(argv))
    validate(cfg, FLAG_NAMES)
    if not cfg.quiet:
        for line in notices(cfg, FLAG_NAMES):
            print(line, file=sys.stderr)
    return train(cfg, validated=True)


if __name__ == "__main__":
    sys.exit(main_guard(run))
