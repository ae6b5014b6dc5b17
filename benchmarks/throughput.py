"""Throughput of the batched update and of the whole training loop, for several agent and seed counts.

    python -m benchmarks.throughput --policy DASE_TD3 --env HalfCheetah-v5 --agents 1 2 5 10 --seeds 1 4 --json out.json

For every (seeds S, agents N) pair, S x N members in one batched model:
(a) ms per batched update after a warm-up, on buffers of random transitions (S groups);
(b) training env steps/s: environment steps of all members per second over the training steps
    after --start_time_steps (exploration, environment steps, storing, updates; no evaluation);
(c) the whole paper protocol (evaluation every --eval_freq steps with --eval_episodes episodes)
    for --max_time_steps steps: env steps/s of all members' training, and the projected hours for
    1M steps of every member at that speed.
(b) and (c) only for the agent counts in --loop_agents.

The on-policy A2C and DIFF_A2C (ac_main.py) update from the rollout they have just collected, so for them every
(S, N) pair times the training loop itself, as ac_main.py builds and runs it (``Trainer.step``), with no
evaluation at all (not even the one a run makes at step 0): after --warmup untimed updates, --updates timed
rollouts, each --n_steps loop steps of --envs_per_agent environments per member and then one batched update.
Reported: environment steps of all members per second (S x N x K x n_steps x updates / seconds), and how that
wall time splits: the update (the ``RolloutLearner.train`` calls that update, DIFF_A2C's combine included, which
is also timed alone), acting (drawing the actions), the environments' steps, storing into the rollout, and the
loop's own rest. A2C is one agent per run: its N agents are N independent members (seeds 0..S x N - 1) of one
batched model, as a run of --seeds makes them.

    python -m benchmarks.throughput --policy A2C --env CartPole-v1 --agents 1 4 --threads 1
"""
from __future__ import annotations

import json
import os
import platform
import tempfile
import time

import numpy as np
import torch

from utils.cli import Parser, resolve_device, tool_guard
from utils.envs.registry import make_env, resolve_env_id
from utils.errors import UsageError
from utils.io import output_file_problem
from utils.naming import ALGORITHM, algorithm_of, is_multi_agent, parse_policy
from utils.run import RunConfig, Trainer
from utils.run.replay.buffer import SharedReplayBuffer
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def algo_kwargs(policy: str, sac_policy_type: str) -> dict:
    return {"policy_type": sac_policy_type} if policy.endswith("SAC") else {}


PER = dict(alpha=0.6, beta=0.4, beta_steps=1_000_000, eps=1e-6)  # --prioritized: the command lines' defaults


def filled_learner(policy: str, env_id: str, n: int, device: torch.device, batch_size: int, sac_policy_type: str,
                   seeds: int = 1, sharing: dict | None = None, replay: dict | None = None) -> Learner:
    """A learner of ``seeds`` groups of n agents (its sharing scheme included) on 20,000 random transitions."""
    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    env.close()
    m = seeds * n
    member_seeds = [s + 100 * i for s in range(seeds) for i in range(n)]
    settings = SharingSettings.of(policy, n, sharing or {})
    replay = replay or {}
    learner = Learner(algorithm_of(policy), algo_kwargs(policy, sac_policy_type), member_seeds, n, obs_dim, act_dim,
                      low, high, 20_000, batch_size, 1, device, settings, n_step=replay.get("n_step", 1),
                      prioritized=replay.get("per") or None)
    rng = np.random.default_rng(0)
    gaussian = learner.agents.gaussian_behaviour
    for _ in range(20_000 // n):
        learner.store(rng.standard_normal((m, obs_dim)), rng.uniform(low, high, (m, act_dim)), rng.standard_normal(m),
                      rng.standard_normal((m, obs_dim)), rng.random(m) < 0.01,
                      (rng.standard_normal((m, act_dim)), rng.uniform(0.1, 1, (m, act_dim))) if gaussian else None)
    return learner


def seconds_per_call(fn, device: torch.device, calls: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    return (time.perf_counter() - start) / calls


def time_updates(policy: str, env_id: str, n: int, device: torch.device, updates: int, warmup: int,
                 batch_size: int, sac_policy_type: str, seeds: int = 1, sharing: dict | None = None,
                 replay: dict | None = None, cuda_graphs: bool = False) -> dict:
    """Seconds per batched update (``Learner.update_once``: sampling, the update with its sharing weights, what the
    scheme runs after it, the diagnostics) of ``seeds`` groups of n agents, eager or (``cuda_graphs``, on a GPU)
    replayed from CUDA graphs after the warm-up captured them; for a diffusing method also the seconds of its
    combine step alone, on the same parameters."""
    learner = filled_learner(policy, env_id, n, device, batch_size, sac_policy_type, seeds, sharing, replay)
    update = learner.update_once
    if cuda_graphs and device.type == "cuda":
        from utils.run.replay.cuda_graphs import UpdateGraphs
        learner.graphs = UpdateGraphs(learner)  # eager until ready, then captured; eager again if a capture fails

        def update():
            (learner.graphs.step if learner.graphs is not None else learner.update_once)()
    out = {"update": seconds_per_call(update, device, updates, warmup), "diffusion": None,
           "graphs": learner.graphs is not None and bool(learner.graphs.graphs)}
    diffusion = learner.scheme.diffusion
    if diffusion is not None and diffusion.edges:
        params = learner.scheme.mixed
        out["diffusion"] = seconds_per_call(lambda: diffusion.combine(params), device, updates, warmup)
    return out


def loop_config(policy: str, env_id: str, n: int, seeds: int, device: torch.device, start_steps: int, max_steps: int,
                eval_freq: int, eval_episodes: int, sac_policy_type: str, workers: int | None, tmp: str,
                cuda_graphs: bool = False, sharing: dict | None = None, replay: dict | None = None) -> RunConfig:
    return RunConfig(policy=policy, env=env_id, seed=0, seeds=list(range(seeds)) if seeds > 1 else None, num_agents=n,
                     max_time_steps=max_steps, start_time_steps=start_steps, eval_freq=eval_freq,
                     eval_episodes=eval_episodes, device=str(device), results_dir=tmp, checkpoint_freq=0, quiet=True,
                     env_workers=workers, cuda_graphs=cuda_graphs, algo=algo_kwargs(policy, sac_policy_type),
                     sharing=dict(sharing or {}), **(replay or {}))


def time_training(cfg: RunConfig, steps: int) -> float:
    """Seconds per training step (all members) after the warm-up, without evaluations."""
    trainer = Trainer(cfg)
    try:
        while trainer.t < cfg.start_time_steps + 20:  # warm-up and a few updates, untimed
            trainer.step()
        sync(trainer.device)
        start = time.perf_counter()
        for _ in range(steps):
            trainer.step()
        sync(trainer.device)
        return (time.perf_counter() - start) / steps
    finally:
        trainer.close()


def time_loop(cfg: RunConfig) -> float:
    """Wall-clock seconds of a whole run (setup excluded: environments, networks, buffer)."""
    trainer = Trainer(cfg)
    sync(trainer.device)
    start = time.perf_counter()
    trainer.run()
    sync(trainer.device)
    return time.perf_counter() - start


# ---- the on-policy family (ac_main.py's A2C, DIFF_A2C) ----------------------------------------------------------
ROLLOUT_PARTS = ("update", "act", "env", "store")


def rollout_config(policy: str, env_id: str, n: int, seeds: int, device: torch.device, envs_per_agent: int,
                   n_steps: int, rollouts: int, workers: int | None, tmp: str, topology: str | None,
                   diffusion_weights: str) -> RunConfig:
    """The RunConfig ac_main.py makes of these flags (its defaults: learning rate, clipping, network width)."""
    import ac_main

    steps = envs_per_agent * n_steps * rollouts  # per member: --max_time_steps counts all of its environments
    argv = ["--policy", policy, "--env", env_id, "--max_time_steps", str(steps), "--eval_freq", str(steps),
            "--envs_per_agent", str(envs_per_agent), "--n_steps", str(n_steps), "--results_dir", tmp,
            "--checkpoint_freq", "0", "--device", str(device), "--quiet"]
    if parse_policy(policy)[0].multi_agent:
        argv += ["--num_agents", str(n), "--seeds", f"0-{seeds - 1}"]
        argv += ["--topology", topology] if topology else []
        argv += ["--diffusion_weights", diffusion_weights]
    else:  # one agent per run: N agents are N more seeds' members of the batched model
        argv += ["--seeds", f"0-{seeds * n - 1}"]
    argv += ["--env_workers", str(workers)] if workers is not None else []
    return ac_main.build_config(ac_main.parse(argv))


def time_rollouts(cfg: RunConfig, rollouts: int, warmup: int) -> dict:
    """Wall seconds of ``rollouts`` rollouts-and-updates of the training loop (after ``warmup`` untimed ones), and
    the seconds spent in each part of it (``ROLLOUT_PARTS``; 'combine': DIFF_A2C's parameter averaging alone)."""
    trainer = Trainer(cfg)
    try:
        learner, device = trainer.learner, trainer.device
        spent = dict.fromkeys((*ROLLOUT_PARTS, "combine"), 0.0)
        calls = dict.fromkeys(spent, 0)

        def timed(part: str, fn, counts=lambda: True):
            def call(*args, **kwargs):
                sync(device)
                start = time.perf_counter()
                out = fn(*args, **kwargs)
                sync(device)
                if counts():
                    spent[part] += time.perf_counter() - start
                    calls[part] += 1
                return out
            return call

        # the loop finds these on the instances; train counts only when its rollout is complete (it updates)
        learner.train = timed("update", learner.train, lambda: learner.position == 0)
        learner.act = timed("act", learner.act)
        learner.store = timed("store", learner.store)
        trainer.envs.step = timed("env", trainer.envs.step)
        diffusion = learner.scheme.diffusion
        if diffusion is not None:
            diffusion.combine = timed("combine", diffusion.combine)
        per_rollout = learner.n_steps
        for _ in range(warmup * per_rollout):
            trainer.step()
        for part in spent:
            spent[part], calls[part] = 0.0, 0
        t0 = trainer.t
        sync(device)
        start = time.perf_counter()
        for _ in range(rollouts * per_rollout):
            trainer.step()
        sync(device)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "env_steps": learner.members * (trainer.t - t0), "members": learner.members,
                "workers": trainer.setup.workers, "spent": spent, "updates": calls["update"]}
    finally:
        trainer.close()


def rollout_main(args, env_id: str, device: torch.device) -> int:
    """--policy A2C / DIFF_A2C: the loop's throughput and where its time goes, per (seeds, agents)."""
    method, algorithm = parse_policy(args.policy)
    if algorithm != "A2C":
        raise SystemExit(f"benchmarks.throughput: {args.policy} is not covered; on-policy: A2C, DIFF_A2C")
    if method.multi_agent and min(args.agents) < 2:
        raise SystemExit(f"benchmarks.throughput: {args.policy} averages over a graph of at least 2 agents; "
                         f"--agents {' '.join(map(str, args.agents))}")
    k = args.envs_per_agent if args.envs_per_agent is not None else 8
    n_steps = args.n_steps if args.n_steps is not None else 5
    results = []
    for seeds in args.seeds:
        for n in args.agents:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = rollout_config(args.policy, env_id, n, seeds, device, k, n_steps, args.warmup + args.updates,
                                     args.env_workers, tmp, args.topology, args.diffusion_weights)
                timed = time_rollouts(cfg, args.updates, args.warmup)
            sec, spent, updates = timed["seconds"], timed["spent"], timed["updates"]
            row = {"seeds": seeds, "agents": n, "members": timed["members"], "envs_per_agent": k, "n_steps": n_steps,
                   "env_workers": timed["workers"], "seconds": sec, "env_steps": timed["env_steps"],
                   "updates": updates, "train_env_steps_per_s": timed["env_steps"] / sec,
                   "ms_per_update": 1000 * spent["update"] / updates,
                   **{f"{part}_share": spent[part] / sec for part in ROLLOUT_PARTS},
                   "other_share": 1 - sum(spent[part] for part in ROLLOUT_PARTS) / sec,
                   "ms_combine": 1000 * spent["combine"] / updates if method.diffuses else None,
                   "combine_share_of_update": spent["combine"] / spent["update"] if method.diffuses else None}
            results.append(row)
            mixing = (f"; combine {row['ms_combine']:.3f} ms = {100 * row['combine_share_of_update']:.1f} % of it"
                      if method.diffuses else "")
            print(f"seeds {seeds:>2} x agents {n:>3} = {row['members']:>3} members x {k} envs | "
                  f"{row['train_env_steps_per_s']:9.1f} env steps/s | update {100 * row['update_share']:4.1f} % "
                  f"({row['ms_per_update']:.2f} ms each{mixing}) | act {100 * row['act_share']:4.1f} % | env "
                  f"{100 * row['env_share']:4.1f} % | store {100 * row['store_share']:4.1f} % | rest "
                  f"{100 * row['other_share']:4.1f} %", flush=True)
    report = {
        "results": results, "policy": args.policy, "env": env_id, "family": "rollout",
        "loop": {"envs_per_agent": k, "n_steps": n_steps, "timed_updates": args.updates, "warmup_updates": args.warmup,
                 "evaluation": "none", "env_workers": args.env_workers,
                 "topology": args.topology if method.diffuses else None,
                 "diffusion_weights": args.diffusion_weights if method.diffuses else None},
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


def main(argv=None) -> int:
    """The benchmark; bad input (a flag, an environment whose actions the policy cannot take) is one line, exit 2."""
    return tool_guard("python -m benchmarks.throughput", _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog="python -m benchmarks.throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", type=str, default="DASE_TD3",
                   help="a registered policy: DASE_TD3, DIFF_TD3, DASE_SAC, ... (default: DASE_TD3)")
    p.add_argument("--topology", type=str, default=None, help="graph of DASE_/DPD_/DIFF_ policies (default: theirs)")
    p.add_argument("--diffusion_weights", type=str, default="uniform", help="DIFF_: uniform or metropolis")
    p.add_argument("--env", type=str, default="HalfCheetah-v5", help="environment (default: HalfCheetah-v5)")
    p.add_argument("--agents", type=int, nargs="+", default=[1, 2, 5, 10], help="agent counts (default: 1 2 5 10)")
    p.add_argument("--device", type=str, default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--updates", type=int, default=200, help="timed updates per agent count (default: 200)")
    p.add_argument("--warmup", type=int, default=30, help="untimed updates first (default: 30)")
    p.add_argument("--batch_size", type=int, default=256, help="batch per agent (default: 256)")
    p.add_argument("--policy_type", type=str, default="Gaussian", help="SAC policy type (default: Gaussian)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1], help="seed counts S: S x N members (default: 1)")
    p.add_argument("--loop_agents", type=int, nargs="*", default=[1, 2],
                   help="agent counts for the loop timings (b) and (c); none to skip (default: 1 2)")
    p.add_argument("--train_steps", type=int, default=500, help="(b): timed training steps (default: 500)")
    p.add_argument("--start_time_steps", type=int, default=1000, help="loop: random steps (default: 1000)")
    p.add_argument("--max_time_steps", type=int, default=4000, help="(c): step budget (default: 4000)")
    p.add_argument("--eval_freq", type=int, default=1000, help="(c): evaluation period (default: 1000)")
    p.add_argument("--eval_episodes", type=int, default=10, help="(c): episodes per evaluation (default: 10)")
    p.add_argument("--env_workers", type=int, default=None,
                   help="environment worker processes for the loops (default: the training default)")
    p.add_argument("--cuda_graphs", action="store_const", const=True, default=None,
                   help="(a), (b), (c): replay the updates from CUDA graphs (default on a GPU, as in training runs)")
    p.add_argument("--no_cuda_graphs", dest="cuda_graphs", action="store_const", const=False,
                   help="(a), (b), (c): eager updates on a GPU")
    p.add_argument("--json", type=str, default=None, help="write the results here as JSON")
    p.add_argument("--n_step", type=int, default=1, help="replay learners: N-step returns (default: 1)")
    p.add_argument("--prioritized", action="store_true",
                   help="replay learners: prioritized replay with the command lines' defaults")
    p.add_argument("--envs_per_agent", type=int, default=None,
                   help="A2C, DIFF_A2C: environments per member (default: 8); there --updates and --warmup count "
                        "rollouts, each followed by one update")
    p.add_argument("--n_steps", type=int, default=None, help="A2C, DIFF_A2C: rollout length (default: 5)")
    args = p.parse_args(argv)
    if parse_policy(args.policy) is None:
        p.error(f"--policy: unknown policy {args.policy!r}; use a registered one (DASE_TD3, DIFF_TD3, DASE_SAC, A2C, ...)")
    positive = {"--agents": args.agents, "--seeds": args.seeds, "--updates": [args.updates],
                "--batch_size": [args.batch_size], "--train_steps": [args.train_steps],
                "--max_time_steps": [args.max_time_steps], "--eval_freq": [args.eval_freq],
                "--eval_episodes": [args.eval_episodes], "--n_step": [args.n_step],
                "--threads": [args.threads or 1], "--loop_agents": args.loop_agents or [1]}
    for flag, values in positive.items():
        if any(v < 1 for v in values):
            p.error(f"{flag} {' '.join(map(str, values))}: must be positive")
    if args.n_step > 1000 or args.updates > 10**6 or args.warmup > 10**6:
        p.error("--n_step at most 1000, --updates and --warmup at most 1000000")
    if args.json is not None:
        problem = output_file_problem(args.json)
        if problem:
            p.error(f"--json {args.json[:60]}: {problem}")
    if args.warmup < 0 or args.start_time_steps < 0:
        p.error("--warmup and --start_time_steps must be >= 0")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        env_id, _ = resolve_env_id(args.env)
        device = torch.device(resolve_device(args.device, 0))
    except UsageError as e:
        p.error(str(e))
    if args.cuda_graphs is None:
        args.cuda_graphs = device.type == "cuda"
    parsed = parse_policy(args.policy)
    if parsed is not None and ALGORITHM[parsed[1]].family != "replay":
        return rollout_main(args, env_id, device)
    if args.envs_per_agent is not None or args.n_steps is not None:
        p.error("--envs_per_agent and --n_steps apply to A2C and DIFF_A2C only")
    if not is_multi_agent(args.policy) and max(args.agents) > 1:
        p.error(f"--agents {' '.join(map(str, args.agents))}: {args.policy} is a single agent; time it with --agents 1 "
                f"(--seeds S batches S of it), or time DASE_{args.policy} for several agents")

    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    env.close()
    sharing = {k: v for k, v in (("topology", args.topology), ("diffusion_weights", args.diffusion_weights))
               if v not in (None, "uniform")}
    replay = {"n_step": args.n_step, **({"per": dict(PER)} if args.prioritized else {})}
    results = []
    base = {}
    for seeds in args.seeds:
        for n in args.agents:
            m = seeds * n
            timed = time_updates(args.policy, env_id, n, device, args.updates, args.warmup, args.batch_size,
                                 args.policy_type, seeds, sharing, replay, args.cuda_graphs)
            sec = timed["update"]
            base.setdefault(seeds, sec if n == 1 else None)
            share = timed["diffusion"] / sec if timed["diffusion"] is not None else None
            row = {"seeds": seeds, "agents": n, "members": m, "updates_per_s": 1 / sec,
                   "ms_diffusion": 1000 * timed["diffusion"] if share is not None else None, "diffusion_share": share,
                   "agent_updates_per_s": m / sec, "ms_per_update": 1000 * sec, "update_from_graphs": timed["graphs"],
                   "cost_vs_one_agent": sec / base[seeds] if base[seeds] else None, "train_env_steps_per_s": None,
                   "protocol_seconds": None, "protocol_env_steps_per_s": None, "projected_hours_1M": None}
            if n in args.loop_agents:
                with tempfile.TemporaryDirectory() as tmp:
                    cfg = loop_config(args.policy, env_id, n, seeds, device, args.start_time_steps,
                                      args.max_time_steps, args.eval_freq, args.eval_episodes, args.policy_type,
                                      args.env_workers, tmp, args.cuda_graphs, sharing, replay)
                    step = time_training(cfg, args.train_steps)
                    loop = time_loop(cfg)
                row["train_env_steps_per_s"] = m / step
                row["protocol_seconds"] = loop
                row["protocol_env_steps_per_s"] = m * args.max_time_steps / loop
                # 1M steps of every member: the warm-up share of this budget is not representative, so use
                # the training steps' cost plus this budget's evaluation overhead per step
                eval_overhead = max(loop - args.max_time_steps * step, 0.0) / args.max_time_steps
                row["projected_hours_1M"] = 1_000_000 * (step + eval_overhead) / 3600
            results.append(row)
            loops = (f" | train {row['train_env_steps_per_s']:8.1f} env steps/s | protocol "
                     f"{row['protocol_env_steps_per_s']:8.1f} env steps/s, 1M steps in {row['projected_hours_1M']:.1f} h"
                     if row["protocol_seconds"] else "")
            mixing = f" | combine {row['ms_diffusion']:.3f} ms = {100 * share:.1f} % of it" if share is not None else ""
            print(f"seeds {seeds:>2} x agents {n:>3} | {row['ms_per_update']:8.2f} ms/update"
                  f"{' (graphs)' if timed['graphs'] else ''}{mixing} | "
                  f"{row['agent_updates_per_s']:8.1f} agent-updates/s | cost x{row['cost_vs_one_agent'] or float('nan'):.2f}"
                  + loops, flush=True)
    gaussian = args.policy.endswith("SAC") and args.policy_type == "Gaussian"
    report = {
        "results": results, "policy": args.policy, "env": env_id, "batch_size": args.batch_size, "replay": replay,
        "loop": {"start_time_steps": args.start_time_steps, "max_time_steps": args.max_time_steps,
                 "eval_freq": args.eval_freq, "eval_episodes": args.eval_episodes, "train_steps": args.train_steps,
                 "env_workers": args.env_workers, "cuda_graphs": args.cuda_graphs},
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "buffer_bytes_1e6": SharedReplayBuffer.bytes_for(obs_dim, act_dim, 1_000_000, gaussian),
    }
    print(f"shared buffer of 1e6 transitions for {env_id}: {report['buffer_bytes_1e6']:,} bytes")
    from benchmarks.ops import op_counts  # counted on the CPU: the launch budget of an eager GPU step

    ops = op_counts(args.policy, env_id, 2, gpu_optimizers=True)
    report["aten_ops_2_agents"] = {"update": ops["update"], "explore": ops["explore"]}
    print(f"aten ops (CPU-counted, 2 agents, optimizers as on a GPU): {ops['update']:.1f} per update, "
          f"{ops['explore']} per exploration step")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
