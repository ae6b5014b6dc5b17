"""Train SAC, DASE_SAC or the DPD_SAC baseline on one Gymnasium environment: a Gaussian or deterministic policy on a
continuous action space, a categorical one (Christodoulou's discrete SAC) on a discrete action space."""
from __future__ import annotations

import sys

from utils.errors import interrupt_while_starting

with interrupt_while_starting("sac_main.py", __name__ == "__main__"):  # Ctrl-C while torch loads: one line
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
    from utils.errors import UsageError
    from utils.naming import SCRIPT_FLAG_NAMES, SCRIPT_POLICIES, settings_owners
    from utils.run.replay.settings import VtraceSettings
    from utils.run.settings import SacStepSettings, policy_settings
    from utils.settings import add_flags, from_flags

POLICIES = SCRIPT_POLICIES["sac_main.py"]
SAC_SETTINGS = settings_owners("sac_main.py")  # SAC's settings by action space, from the registry
FLAG_NAMES = SCRIPT_FLAG_NAMES["sac_main.py"]


def parse(argv=None):
    p = Parser(prog="sac_main.py", description=__doc__)
    add_flags(p, {"script": policy_settings("DASE_SAC", POLICIES)}, parsed_defaults=True)
    add_common_flags(p)
    add_flags(p, {"script": SacStepSettings}, parsed_defaults=True)
    add_flags(p, {"V-trace": VtraceSettings}, parsed_defaults=True)
    add_flags(p, SAC_SETTINGS)  # SAC's own settings, by action space (utils/run/replay/settings.py)
    add_sequence_flags(p)
    add_image_flags(p)
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.envs.registry import action_kind
    from utils.run import RunConfig

    check_policy(args.policy, "sac_main.py")
    policy = resolve_policy(args)
    env = resolve_env(args.env, args.quiet)
    discrete = action_kind(env, "SAC") == "discrete"
    owner = "SAC (discrete actions)" if discrete else "SAC (continuous actions)"
    known = {} if discrete or args.reward_scale is not None or not env.startswith("Humanoid") else {"reward_scale": 20.0}
    settings = from_flags(args, SAC_SETTINGS[owner], SAC_SETTINGS, owner, **known)
    if discrete and args.kl_div_var == "matched":
        raise UsageError(f"--kl_div_var matched: {env} has discrete actions; their DASE weights compare action "
                         "probabilities per sample, with no reference variance (drop it)")
    settings.check()
    vtrace = from_flags(args, VtraceSettings, {"V-trace": VtraceSettings}, "V-trace")
    vtrace.check()
    if vtrace.vtrace:
        if discrete:
            raise UsageError(f"--vtrace: {env} has discrete actions; V-trace is implemented for the Gaussian SAC on "
                             "continuous actions only (drop --vtrace)")
        if args.n_step < 2:
            raise UsageError("--vtrace corrects N-step targets: add --n_step N with N >= 2")
        if settings.policy_type != "Gaussian":
            raise UsageError("--vtrace needs action probabilities: use --policy_type Gaussian")
    algo = {**settings.record(), **vtrace.record()}
    algo.update(sequence_settings(args, env, policy, args.start_steps, "--start_steps"))
    algo.update(image_settings(args, env, policy))
    sharing = shared_settings(args, policy, policy_type=getattr(settings, "policy_type", None))
    return RunConfig(policy=policy, env=env, num_agents=default_agents(args, policy), sharing=sharing,
                     max_time_steps=args.num_steps, start_time_steps=args.start_steps,
                     updates_per_step=args.updates_per_step,
                     algo=algo, **run_flags(args))


def run(argv=None):
    return train_checked(build_config(parse(argv)), FLAG_NAMES)


if __name__ == "__main__":
    sys.exit(main_guard(run))
