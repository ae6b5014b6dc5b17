"""Train DDPG, TD3, their DASE_ variants or the DPD_ baseline on one Gymnasium environment and save learning curves."""
from __future__ import annotations

import sys

from utils.errors import interrupt_while_starting

with interrupt_while_starting("DASE_main.py", __name__ == "__main__"):  # Ctrl-C while torch loads: one line
    from utils.cli import (
        Parser,
        add_common_flags,
        add_image_flags,
        add_sequence_flags,
        check_policy,
        count,
        default_agents,
        image_settings,
        main_guard,
        real,
        resolve_env,
        resolve_policy,
        run_flags,
        sequence_settings,
        shared_settings,
        train_checked,
    )
    from utils.naming import SCRIPT_POLICIES, algorithm_of
    from utils.run.replay.settings import ALGORITHM_SETTINGS
    from utils.settings import add_flags, from_flags

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
    add_flags(p, ALGORITHM_SETTINGS)  # each algorithm's own settings (utils/run/replay/settings.py)
    add_sequence_flags(p)
    add_image_flags(p)
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.run import RunConfig

    check_policy(args.policy, "DASE_main.py")
    policy = resolve_policy(args)
    algorithm = algorithm_of(policy)
    settings = from_flags(args, ALGORITHM_SETTINGS[algorithm], ALGORITHM_SETTINGS, algorithm)
    settings.check()
    sharing = shared_settings(args, policy, settings.expl_noise)
    algo = settings.record()
    env = resolve_env(args.env, args.quiet)
    algo.update(sequence_settings(args, env, policy, args.start_time_steps, "--start_time_steps"))
    algo.update(image_settings(args, env, policy))
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy),
                     max_time_steps=args.max_time_steps, start_time_steps=args.start_time_steps,
                     algo=algo, sharing=sharing, episode_eval=args.episode_eval, solved_at=args.solved_at,
                     solved_window=args.solved_window, max_episodes=args.max_episodes,
                     timelimit_as_terminal=args.timelimit_as_terminal, warmup_actions=args.warmup_actions,
                     **run_flags(args))


def run(argv=None):
    return train_checked(build_config(parse(argv)))


if __name__ == "__main__":
    sys.exit(main_guard(run))
