"""Train DDPG, TD3, their DASE_ variants or the DPD_ baseline on one Gymnasium environment and save learning curves."""
from __future__ import annotations

import sys

from utils.cli import (Parser, add_common_flags, add_sequence_flags, check_policy, count, default_agents, main_guard,
                       real, resolve_env, resolve_policy, run_flags, sequence_settings, shared_settings, train_checked)
from utils.errors import UsageError
from utils.naming import SCRIPT_POLICIES, algorithm_of

POLICIES = SCRIPT_POLICIES["DASE_main.py"]


def parse(argv=None):
    p = Parser(prog="DASE_main.py", description=__doc__)
    p.add_argument("--policy", type=str, default="DASE_TD3", help=f"one of {', '.join(POLICIES)} (default: DASE_TD3)")
    add_common_flags(p)
    p.add_argument("--start_time_steps", type=count, default=25_000,
                   help="initial steps (per agent) with no updates, acting uniformly at random unless --warmup_actions "
                        "policy (default: 25000)")
    p.add_argument("--max_time_steps", type=count, default=1_000_000,
                   help="environment steps per agent (default: 1e6)")
    p.add_argument("--expl_noise", type=real, default=0.1,
                   help="std of the Gaussian exploration noise, times max action (default: 0.1)")
    p.add_argument("--discount", type=real, default=0.99, help="discount factor (default: 0.99)")
    p.add_argument("--tau", type=real, default=None,
                   help="target network update rate (default: 0.005 for TD3; 0.001 for DDPG, as in the paper)")
    p.add_argument("--policy_noise", type=real, default=0.2,
                   help="TD3 target policy noise, times max action (default: 0.2)")
    p.add_argument("--noise_clip", type=real, default=0.5,
                   help="TD3 target noise clip, times max action (default: 0.5)")
    p.add_argument("--policy_freq", type=count, default=2,
                   help="TD3: update actor and targets every this many critic updates (default: 2)")
    p.add_argument("--hidden_sizes", type=count, nargs="+", default=None, metavar="WIDTH",
                   help="hidden layer widths of actor and critics, e.g. 400 300 (default: 256 256 for TD3; DDPG's "
                        "400 300, two widths)")
    p.add_argument("--actor_lr", type=real, default=None, help="actor's Adam learning rate (default: 3e-4 for TD3, "
                                                                  "1e-4 for DDPG)")
    p.add_argument("--critic_lr", type=real, default=None, help="critics' Adam learning rate (default: 3e-4 for TD3, "
                                                                   "1e-3 for DDPG)")
    p.add_argument("--warmup_actions", type=str, default="random", choices=["random", "policy"],
                   help="what acts during --start_time_steps (no updates then): uniformly random actions, or the "
                        "untrained policy plus exploration noise, as the TD3 tutorial does (default: random)")
    p.add_argument("--timelimit_as_terminal", action="store_true",
                   help="store a time-limit cut as a termination (no bootstrap), as old Gym code did; for "
                        "comparisons with it (default: off, the cut bootstraps)")
    p.add_argument("--episode_eval", action="store_true",
                   help="after every training episode of every agent, play one deterministic evaluation episode "
                        "and write {curve}_episode_eval.npy: rows (episode, agent step, return), as the TD3 tutorial")
    p.add_argument("--solved_at", type=real, default=None, metavar="R",
                   help="with --episode_eval: an agent is solved at the first episode where the mean return of "
                        "its last --solved_window evaluation episodes exceeds R; the run's JSON records episode "
                        "and step, and a seed stops when all its agents are solved or done (--max_episodes; peers keep "
                        "training until then)")
    p.add_argument("--solved_window", type=count, default=100,
                   help="--solved_at: evaluation episodes in the mean (default: 100)")
    p.add_argument("--max_episodes", type=count, default=None,
                   help="an agent is done after this many training episodes; a seed stops when all its agents "
                        "are done or solved (default: no limit)")
    add_sequence_flags(p)
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.run import RunConfig

    check_policy(args.policy, "DASE_main.py")
    policy = resolve_policy(args)
    algorithm = algorithm_of(policy)
    tau = args.tau if args.tau is not None else (0.001 if algorithm == "DDPG" else 0.005)
    checks = [(0.0 < tau <= 1.0, f"--tau {tau} must be in (0, 1]"),
              (0.0 <= args.discount <= 1.0, f"--discount {args.discount} must be in [0, 1]"),
              (args.expl_noise >= 0, f"--expl_noise {args.expl_noise} must be >= 0"),
              (args.policy_noise >= 0 and args.noise_clip >= 0, "--policy_noise and --noise_clip must be >= 0"),
              (args.policy_freq > 0, f"--policy_freq must be a positive integer, got {args.policy_freq}")]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    sharing = shared_settings(args, policy)
    if algorithm == "TD3":
        algo = dict(discount=args.discount, tau=tau, policy_noise=args.policy_noise, noise_clip=args.noise_clip,
                    policy_freq=args.policy_freq, expl_noise=args.expl_noise)
    else:
        algo = dict(discount=args.discount, tau=tau, expl_noise=args.expl_noise)
    algo.update(network_settings(args, algorithm))
    env = resolve_env(args.env, args.quiet)
    algo.update(sequence_settings(args, env, policy, args.start_time_steps, "--start_time_steps"))
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy),
                     max_time_steps=args.max_time_steps, start_time_steps=args.start_time_steps,
                     algo=algo, sharing=sharing, episode_eval=args.episode_eval, solved_at=args.solved_at,
                     solved_window=args.solved_window, max_episodes=args.max_episodes,
                     timelimit_as_terminal=args.timelimit_as_terminal, warmup_actions=args.warmup_actions,
                     **run_flags(args))


def network_settings(args, algorithm: str) -> dict:
    """--hidden_sizes, --actor_lr, --critic_lr as the algorithm's keywords; only those given, so that a run without
    them has the same settings (and checkpoints) as before these flags existed."""
    out = {}
    if args.hidden_sizes is not None:
        if min(args.hidden_sizes) <= 0:
            raise UsageError(f"--hidden_sizes {' '.join(map(str, args.hidden_sizes))}: widths must be positive integers")
        if algorithm == "DDPG" and len(args.hidden_sizes) != 2:
            raise UsageError(f"--hidden_sizes {' '.join(map(str, args.hidden_sizes))}: DDPG's critic takes exactly "
                             "two widths (state -> W1, then [features, action] -> W2)")
        out["hidden"] = list(args.hidden_sizes)
    for name in ("actor_lr", "critic_lr"):
        value = getattr(args, name)
        if value is not None:
            if not value > 0:
                raise UsageError(f"--{name} {value} must be > 0")
            out[name] = value
    return out


def run(argv=None):
    return train_checked(build_config(parse(argv)))


if __name__ == "__main__":
    sys.exit(main_guard(run))
