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
        default_agents,
        image_settings,
        main_guard,
        resolve_env,
        resolve_policy,
        run_flags,
        sequence_settings,
        shared_settings,
        train_checked,
    )
    from utils.naming import SCRIPT_POLICIES, algorithm_of, settings_owners
    from utils.run.settings import ReplayStepSettings, policy_settings
    from utils.settings import add_flags, from_flags

POLICIES = SCRIPT_POLICIES["DASE_main.py"]
ALGORITHM_SETTINGS = settings_owners("DASE_main.py")  # each algorithm's own settings, from the registry


def parse(argv=None):
    p = Parser(prog="DASE_main.py", description=__doc__)
    add_flags(p, {"script": policy_settings("DASE_TD3", POLICIES)}, parsed_defaults=True)
    add_common_flags(p)
    add_flags(p, {"script": ReplayStepSettings}, parsed_defaults=True)
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
