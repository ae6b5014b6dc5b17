"""Train the parallel actor-critic family on one Gymnasium environment and save learning curves: A2C (synchronous,
batched, K environments per agent), DIFF_A2C (A2C agents on a graph averaging parameters, Diff-DAC's Diff-A2C),
A3C (asynchronous workers in processes, Hogwild) and ACER (replay with Retrace; discrete actions, and continuous ones with
a Gaussian policy and a stochastic dueling network)."""
from __future__ import annotations

import sys

from utils.errors import interrupt_while_starting

with interrupt_while_starting("ac_main.py", __name__ == "__main__"):  # Ctrl-C while torch loads: one line
    from utils.cli import (
        Parser,
        add_common_flags,
        available_cores,
        check_policy,
        default_agents,
        main_guard,
        resolve_env,
        resolve_policy,
        run_flags,
        shared_settings,
        train_checked,
    )
    from utils.errors import UsageError
    from utils.naming import SCRIPT_POLICIES, algorithm_of, settings_owners
    from utils.run.settings import OnPolicyStepSettings, policy_settings
    from utils.settings import add_flags, from_flags, given

POLICIES = SCRIPT_POLICIES["ac_main.py"]
ALGORITHM_SETTINGS = settings_owners("ac_main.py")  # each algorithm's own settings, from the registry

def parse(argv=None):
    p = Parser(prog="ac_main.py", description=__doc__)
    add_flags(p, {"script": policy_settings("A2C", POLICIES)}, parsed_defaults=True)
    add_common_flags(p, replay=False)
    add_flags(p, {"script": OnPolicyStepSettings}, parsed_defaults=True)
    add_flags(p, ALGORITHM_SETTINGS)  # each algorithm's own settings (utils/run/onpolicy/settings.py)
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.envs.pool import backend_for
    from utils.run import RunConfig

    check_policy(args.policy, "ac_main.py")
    policy = resolve_policy(args)
    algorithm = algorithm_of(policy)
    cls = ALGORITHM_SETTINGS[algorithm]
    known = {}
    if algorithm == "A3C":
        known["num_processes"] = args.num_processes if args.num_processes is not None else available_cores()
        if args.device is None:  # auto picks a GPU where one is present; A3C's actor-learners are CPU processes
            args.device = "cpu"
    settings = from_flags(args, cls, ALGORITHM_SETTINGS, algorithm, **known)
    if getattr(settings, "optimizer", None) == "adam" and {"--rms_alpha", "--rms_eps"} & given(args, ALGORITHM_SETTINGS):
        raise UsageError("--rms_alpha and --rms_eps set RMSprop; drop them with --optimizer adam")
    settings.check()
    algo = settings.record()
    if args.task_per_env and algorithm == "A3C":
        raise UsageError("--task_per_env: A3C's workers each play the agent's own task; use A2C or ACER")
    env = resolve_env(args.env, args.quiet)
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy),
                     env_backend=backend_for(args.env_backend, env, algorithm),
                     max_time_steps=args.max_time_steps, start_time_steps=args.start_time_steps,
                     algo=algo, sharing=shared_settings(args, policy), task_per_env=args.task_per_env,
                     **run_flags(args))


def run(argv=None):
    return train_checked(build_config(parse(argv)))


if __name__ == "__main__":
    sys.exit(main_guard(run))
