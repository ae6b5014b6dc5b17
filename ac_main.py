"""Train the parallel actor-critic family on one Gymnasium environment and save learning curves: A2C (synchronous,
batched, K environments per agent), DIFF_A2C (A2C agents on a graph averaging parameters, Diff-DAC's Diff-A2C),
A3C (asynchronous workers in processes, Hogwild) and ACER (replay with Retrace; discrete actions, and continuous ones with
a Gaussian policy and a stochastic dueling network)."""
from __future__ import annotations

import sys

import numpy as np

from utils.cli import (Parser, add_common_flags, available_cores, check_policy, count, default_agents, main_guard, real,
                       resolve_env, resolve_policy, run_flags, shared_settings, train_checked)
from utils.errors import UsageError
from utils.naming import SCRIPT_POLICIES, algorithm_of

POLICIES = SCRIPT_POLICIES["ac_main.py"]
# flags of the replay learners that mean nothing here
SKIP = ("--similarity", "--dpd_alpha", "--dpd_batch_size", "--kl_div_var", "--kl_precision", "--buffer_size", "--batch_size",
        "--cuda_graphs", "--no_cuda_graphs", "--n_step", "--prioritized", "--per_alpha", "--per_beta",
        "--per_beta_steps", "--per_eps")
# per algorithm: defaults of the flags whose default differs (the reference codes' values)
DEFAULTS = {"A2C": dict(lr=7e-4, n_steps=5, max_grad_norm=0.5),  # SB3 / Diff-DAC's A2C
            "A3C": dict(lr=1e-4, n_steps=20, max_grad_norm=40.0),  # A3C-ACER-PyTorch, ikostrikov/pytorch-a3c
            "ACER": dict(lr=7e-4, n_steps=20, max_grad_norm=10.0)}  # OpenAI baselines' ACER (k = 20)
ONLY = {"--envs_per_agent": ("A2C", "ACER"), "--num_processes": ("A3C",), "--encoder": ("A3C",), "--rms_alpha": ("A2C", "ACER"),
        "--rms_eps": ("A2C", "ACER"), "--buffer_size": ("ACER",),
        "--replay_ratio": ("ACER",), "--replay_start": ("ACER",), "--trace_max": ("ACER",),
        "--trust_region_decay": ("ACER",), "--trust_region_threshold": ("ACER",), "--action_std": ("ACER",),
        "--sdn_samples": ("ACER",), "--replay_only": ("ACER",), "--reward_scale": ("A2C", "A3C", "ACER"),
        "--optimizer": ("A2C", "ACER"), "--trust_region_entropy": ("ACER",), "--prob_eps": ("ACER",)}
# ACER's flags, with their defaults (OpenAI baselines' ACER; Kaixhin/ACER spells them the same way, with dashes)
ACER_DEFAULTS = dict(buffer_size=100_000, replay_ratio=4.0, replay_start=1000, trace_max=10.0, trust_region_decay=0.99,
                     trust_region_threshold=1.0)


def parse(argv=None):
    p = Parser(prog="ac_main.py", description=__doc__)
    p.add_argument("--policy", type=str, default="A2C", help=f"one of {', '.join(POLICIES)} (default: A2C)")
    add_common_flags(p, env_default="CartPole-v1", skip=SKIP)
    p.add_argument("--max_time_steps", type=count, default=1_000_000,
                   help="environment steps per agent, over all of its environments (default: 1e6)")
    p.add_argument("--start_time_steps", type=count, default=0,
                   help="initial steps per agent with uniformly random actions and no updates (default: 0)")
    p.add_argument("--envs_per_agent", type=count, default=None,
                   help="A2C, ACER: environments each agent steps in lockstep; --eval_freq and --max_time_steps "
                        "count all of them and must be multiples (default: 8)")
    p.add_argument("--num_processes", type=count, default=None,
                   help="A3C: asynchronous worker processes, each with its own environment (default: the cores here)")
    p.add_argument("--n_steps", type=count, default=None,
                   help="rollout length per environment before an update (default: 5 for A2C, 20 for A3C and ACER)")
    p.add_argument("--lr", type=real, default=None,
                   help="learning rate: RMSprop for A2C and ACER, shared Adam for A3C (default: 7e-4; 1e-4 for A3C)")
    p.add_argument("--gamma", type=real, default=0.99, help="discount factor (default: 0.99)")
    p.add_argument("--gae_lambda", type=real, default=1.0,
                   help="GAE lambda; 1.0 = plain n-step returns R = r + gamma R, as A3C (default: 1.0; SB3-zoo "
                        "often 0.95)")
    p.add_argument("--ent_coef", type=real, default=0.01, help="entropy bonus coefficient (default: 0.01)")
    p.add_argument("--vf_coef", type=real, default=0.5, help="value loss coefficient (default: 0.5)")
    p.add_argument("--max_grad_norm", type=real, default=None,
                   help="clip each agent's gradient to this norm; 0: no clipping (default: 0.5 for A2C, 40 for A3C, 10 "
                        "for ACER)")
    p.add_argument("--rms_alpha", type=real, default=None, help="A2C, ACER: RMSprop smoothing (default: 0.99)")
    p.add_argument("--rms_eps", type=real, default=None, help="A2C, ACER: RMSprop epsilon (default: 1e-5)")
    p.add_argument("--buffer_size", type=count, default=None,
                   help="ACER: replay capacity per agent in transitions, kept as whole rollouts (default: 1e5)")
    p.add_argument("--replay_ratio", type=real, default=None,
                   help="ACER: mean of the Poisson number of replay updates after each on-policy one (default: 4)")
    p.add_argument("--replay_start", type=count, default=None,
                   help="ACER: transitions an agent's replay holds before replay updates begin (default: 1000)")
    p.add_argument("--trace_max", type=real, default=None,
                   help="ACER: c, the truncation of the importance weights min(c, rho) (default: 10)")
    p.add_argument("--replay_only", action="store_true", default=None,
                   help="ACER: no on-policy update; each fresh rollout is only stored, and every update is a replay "
                        "update (Wang et al. 2017's continuous ACER, 'entirely off-policy'; default: off)")
    p.add_argument("--no_trust_region", action="store_true",
                   help="ACER: plain truncated importance-sampling updates, without the trust region")
    p.add_argument("--trust_region_decay", type=real, default=None,
                   help="ACER: Polyak rate of the average policy network (default: 0.99)")
    p.add_argument("--trust_region_threshold", type=real, default=None,
                   help="ACER: delta, the trust region's bound on k^T z (default: 1)")
    p.add_argument("--trust_region_entropy", action="store_true", default=None,
                   help="discrete ACER: project the entropy bonus's gradient with the policy gradient (OpenAI "
                        "baselines, A3C-ACER-PyTorch; default: off, the bonus is added after the trust region)")
    p.add_argument("--prob_eps", type=real, default=None,
                   help="discrete ACER: eps added where the update divides by or takes the log of a probability "
                        "(rho = pi / (mu + eps), log(pi + eps), c / (rho + eps), k = -pi_avg / (pi + eps), the trust "
                        "region's |k|^2 + eps), as OpenAI baselines and A3C-ACER-PyTorch (1e-6); keeps the update finite "
                        "where a probability underflowed to 0 (default: 0, the exact formulas)")
    p.add_argument("--optimizer", choices=("rmsprop", "rmsprop_tf", "adam"), default=None,
                   help="A2C, ACER: rmsprop (torch's; --rms_alpha, --rms_eps), rmsprop_tf (TensorFlow's, as OpenAI "
                        "baselines ran A2C and ACER, SB3's RMSpropTFLike: square average from 1, eps under the root) "
                        "or, ACER only, adam (A3C-ACER-PyTorch's shared Adam: betas 0.9, 0.999, eps 1e-8; each "
                        "member its own step count) (default: rmsprop)")
    p.add_argument("--action_std", type=real, default=None,
                   help="ACER on a Box action space: the Gaussian policy's fixed standard deviation, as a fraction of "
                        "half the action range per dimension (default: 0.3)")
    p.add_argument("--sdn_samples", type=count, default=None,
                   help="ACER on a Box action space: n, the actions sampled for the stochastic dueling network's "
                        "mean advantage (default: 5)")
    p.add_argument("--reward_scale", type=real, default=None,
                   help="multiply the rewards the agents learn from by this (curves and training-episode "
                        "logs keep the environment's rewards), e.g. 0.1 on Pendulum-v1 (default: 1)")
    p.add_argument("--task_per_env", type=int, default=0, metavar="N",
                   help="the centralised multi-task baseline: one agent whose environment k plays the task agent "
                        "k mod N of the same seed would get (task variants; needs --envs_per_agent >= N); files "
                        "named {policy}_tasks{N}_...; --eval_tasks all evaluates it on the N tasks (default: 0, off)")
    p.add_argument("--hidden_size", type=count, default=64,
                   help="width of the two hidden layers of the policy and value networks (default: 64); with "
                        "--recurrent the width of its linear layer and LSTM on flat observations")
    p.add_argument("--encoder", choices=("nature", "a3c"), default=None,
                   help="A3C on Atari: the trunk before the heads (and the LSTM): nature, the Nature DQN's 3 "
                        "convolutions and a layer of 512; a3c, the A3C references' 16 and 32 convolutions (then a "
                        "layer of 256, or with --recurrent straight into the LSTM of 256) (default: nature)")
    p.add_argument("--recurrent", action="store_true",
                   help="A2C, A3C: an LSTM between the encoder and the policy and value heads (flat observations: "
                        "linear --hidden_size + tanh, LSTM of --hidden_size; Atari: Nature CNN, LSTM of 256), its "
                        "state carried across the n steps and zeroed at episode ends, as the A3C references; files "
                        "named {policy}_lstm_...")
    return p.parse_args(argv)


def build_config(args):
    """Turn flags into a RunConfig (checks what the flags alone can tell)."""
    from utils.run import RunConfig

    check_policy(args.policy, "ac_main.py")
    policy = resolve_policy(args)
    algorithm = algorithm_of(policy)
    for flag, algorithms in ONLY.items():
        if algorithm not in algorithms and getattr(args, flag[2:]) is not None:
            raise UsageError(f"{flag} applies to {' and '.join(algorithms)}, not {algorithm}; drop it")
    if args.recurrent and algorithm not in ("A2C", "A3C"):
        raise UsageError(f"--recurrent applies to A2C and A3C, not {algorithm}; drop it")
    if algorithm != "ACER" and args.no_trust_region:
        raise UsageError(f"--no_trust_region applies to ACER, not {algorithm}; drop it")
    if algorithm == "ACER" and args.gae_lambda != 1.0:
        raise UsageError("--gae_lambda: ACER's targets are Retrace's, not GAE; drop it")
    defaults = DEFAULTS[algorithm]
    lr = args.lr if args.lr is not None else defaults["lr"]
    n_steps = args.n_steps if args.n_steps is not None else defaults["n_steps"]
    max_grad_norm = args.max_grad_norm if args.max_grad_norm is not None else defaults["max_grad_norm"]
    rms_alpha = args.rms_alpha if args.rms_alpha is not None else 0.99
    rms_eps = args.rms_eps if args.rms_eps is not None else 1e-5
    checks = [(lr > 0, f"--lr {lr} must be > 0"), (0.0 <= args.gamma <= 1.0, f"--gamma {args.gamma} must be in [0, 1]"),
              (0.0 <= args.gae_lambda <= 1.0, f"--gae_lambda {args.gae_lambda} must be in [0, 1]"),
              (args.ent_coef >= 0 and args.vf_coef >= 0, "--ent_coef and --vf_coef must be >= 0"),
              (max_grad_norm >= 0, f"--max_grad_norm {max_grad_norm} must be >= 0 (0: no clipping)"),
              (n_steps > 0, f"--n_steps must be a positive integer, got {n_steps}"),
              (args.hidden_size > 0, f"--hidden_size must be a positive integer, got {args.hidden_size}"),
              (0.0 < rms_alpha < 1.0 and rms_eps > 0, "--rms_alpha must be in (0, 1) and --rms_eps > 0")]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    algo = dict(lr=lr, gamma=args.gamma, gae_lambda=args.gae_lambda, ent_coef=args.ent_coef, vf_coef=args.vf_coef,
                max_grad_norm=max_grad_norm, hidden_size=args.hidden_size, n_steps=n_steps)
    if args.recurrent:
        algo["recurrent"] = True  # absent otherwise: feed-forward runs' records stay as they were
    if algorithm == "A3C":
        workers = args.num_processes if args.num_processes is not None else available_cores()
        if workers <= 0:
            raise UsageError(f"--num_processes must be a positive integer, got {workers}")
        algo.update(num_processes=workers)
        if args.device is None:  # auto picks a GPU where one is present; A3C's actor-learners are CPU processes
            args.device = "cpu"
        if args.encoder is not None:  # recorded only when given
            algo["encoder"] = args.encoder
    else:
        algo.update(envs_per_agent=args.envs_per_agent if args.envs_per_agent is not None else 8,
                    rms_alpha=rms_alpha, rms_eps=rms_eps)
    if args.optimizer == "rmsprop_tf":  # recorded only when it is not the default
        algo["optimizer"] = "rmsprop_tf"
    elif args.optimizer == "adam" and algorithm != "ACER":
        raise UsageError("--optimizer adam is ACER's (A3C-ACER-PyTorch's shared Adam); A2C takes rmsprop or rmsprop_tf")
    if args.reward_scale is not None:  # recorded only when given
        if not (np.isfinite(args.reward_scale) and 0.0 < args.reward_scale <= 1e6):
            raise UsageError(f"--reward_scale {args.reward_scale} must be in (0, 1e6]")
        algo["reward_scale"] = args.reward_scale
    if algorithm == "ACER":
        acer = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in ACER_DEFAULTS.items()}
        checks = [(acer["replay_ratio"] >= 0, "--replay_ratio must be >= 0"),
                  (acer["trace_max"] > 0, "--trace_max must be > 0"),
                  (0.0 <= acer["trust_region_decay"] < 1.0, "--trust_region_decay must be in [0, 1)"),
                  (acer["trust_region_threshold"] > 0, "--trust_region_threshold must be > 0"),
                  (acer["buffer_size"] >= n_steps * algo["envs_per_agent"],
                   f"--buffer_size {acer['buffer_size']} cannot hold one rollout of --n_steps {n_steps} x "
                   f"--envs_per_agent {algo['envs_per_agent']} transitions")]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        del algo["gae_lambda"]
        algo["q_coef"] = algo.pop("vf_coef")
        algo.update(acer, trust_region=not args.no_trust_region)
        if args.replay_only:  # recorded only when given
            if acer["replay_ratio"] == 0:
                raise UsageError("--replay_only with --replay_ratio 0 would never update; give a ratio > 0")
            algo["replay_only"] = True
        if args.action_std is not None:  # continuous ACER's own settings: recorded only when given
            if not 0.0 < args.action_std <= 10.0:
                raise UsageError(f"--action_std {args.action_std} must be in (0, 10]")
            algo["action_std"] = args.action_std
        if args.sdn_samples is not None:
            if not 1 <= args.sdn_samples <= 1000:
                raise UsageError(f"--sdn_samples {args.sdn_samples} must be in [1, 1000]")
            algo["sdn_samples"] = args.sdn_samples
        if args.optimizer == "adam":  # recorded only when it is not the default
            if args.rms_alpha is not None or args.rms_eps is not None:
                raise UsageError("--rms_alpha and --rms_eps set RMSprop; drop them with --optimizer adam")
            del algo["rms_alpha"], algo["rms_eps"]
            algo["optimizer"] = "adam"
        if args.trust_region_entropy:
            if args.no_trust_region:
                raise UsageError("--trust_region_entropy projects the entropy's gradient onto the trust region; "
                                 "drop it or --no_trust_region")
            algo["trust_region_entropy"] = True
        if args.prob_eps is not None:  # recorded only when given
            if not 0.0 < args.prob_eps <= 0.1:
                raise UsageError(f"--prob_eps {args.prob_eps} must be in (0, 0.1]")
            algo["prob_eps"] = args.prob_eps
    if args.task_per_env and algorithm == "A3C":
        raise UsageError("--task_per_env: A3C's workers each play the agent's own task; use A2C or ACER")
    return RunConfig(policy=policy, env=resolve_env(args.env, args.quiet), num_agents=default_agents(args, policy),
                     max_time_steps=args.max_time_steps, start_time_steps=args.start_time_steps,
                     algo=algo, sharing=shared_settings(args, policy), task_per_env=args.task_per_env,
                     **run_flags(args))


def run(argv=None):
    return train_checked(build_config(parse(argv)))


if __name__ == "__main__":
    sys.exit(main_guard(run))
