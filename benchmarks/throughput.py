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
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np
import torch

from utils.cli import resolve_device
from utils.envs.registry import make_env, resolve_env_id
from utils.naming import algorithm_of
from utils.run import RunConfig, Trainer
from utils.run.buffer import SharedReplayBuffer
from utils.run.learner import Learner
from utils.run.sharing import SharingSettings


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def algo_kwargs(policy: str, sac_policy_type: str) -> dict:
    return {"policy_type": sac_policy_type} if policy.endswith("SAC") else {}


def filled_learner(policy: str, env_id: str, n: int, device: torch.device, batch_size: int, sac_policy_type: str,
                   seeds: int = 1, sharing: dict | None = None) -> Learner:
    """A learner of ``seeds`` groups of n agents (its sharing scheme included) on 20,000 random transitions."""
    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    env.close()
    m = seeds * n
    member_seeds = [s + 100 * i for s in range(seeds) for i in range(n)]
    settings = SharingSettings.of(policy, n, sharing or {})
    learner = Learner(algorithm_of(policy), algo_kwargs(policy, sac_policy_type), member_seeds, n, obs_dim, act_dim,
                      low, high, 20_000, batch_size, 1, device, settings)
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
                 batch_size: int, sac_policy_type: str, seeds: int = 1, sharing: dict | None = None) -> dict:
    """Seconds per batched update (``Learner.update_once``: sampling, the update with its sharing weights, what the
    scheme runs after it, the diagnostics) of ``seeds`` groups of n agents; for a diffusing method also the
    seconds of its combine step alone, on the same parameters."""
    learner = filled_learner(policy, env_id, n, device, batch_size, sac_policy_type, seeds, sharing)
    out = {"update": seconds_per_call(learner.update_once, device, updates, warmup), "diffusion": None}
    diffusion = learner.scheme.diffusion
    if diffusion is not None and diffusion.edges:
        params = learner.scheme.mixed
        out["diffusion"] = seconds_per_call(lambda: diffusion.combine(params), device, updates, warmup)
    return out


def loop_config(policy: str, env_id: str, n: int, seeds: int, device: torch.device, start_steps: int, max_steps: int,
                eval_freq: int, eval_episodes: int, sac_policy_type: str, workers: int | None, tmp: str,
                cuda_graphs: bool = False, sharing: dict | None = None) -> RunConfig:
    return RunConfig(policy=policy, env=env_id, seed=0, seeds=list(range(seeds)) if seeds > 1 else None, num_agents=n,
                     max_time_steps=max_steps, start_time_steps=start_steps, eval_freq=eval_freq,
                     eval_episodes=eval_episodes, device=str(device), results_dir=tmp, checkpoint_freq=0, quiet=True,
                     env_workers=workers, cuda_graphs=cuda_graphs, algo=algo_kwargs(policy, sac_policy_type),
                     sharing=dict(sharing or {}))


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n\n")[0])
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
                   help="(b), (c): replay the updates from CUDA graphs (default on a GPU, as in training runs; "
                        "(a) always times eager updates)")
    p.add_argument("--no_cuda_graphs", dest="cuda_graphs", action="store_const", const=False,
                   help="(b), (c): eager updates on a GPU")
    p.add_argument("--json", type=str, default=None, help="write the results here as JSON")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    env_id, _ = resolve_env_id(args.env)
    device = torch.device(resolve_device(args.device, 0))
    if args.cuda_graphs is None:
        args.cuda_graphs = device.type == "cuda"

    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    env.close()
    sharing = {k: v for k, v in (("topology", args.topology), ("diffusion_weights", args.diffusion_weights))
               if v not in (None, "uniform")}
    results = []
    base = {}
    for seeds in args.seeds:
        for n in args.agents:
            m = seeds * n
            timed = time_updates(args.policy, env_id, n, device, args.updates, args.warmup, args.batch_size,
                                 args.policy_type, seeds, sharing)
            sec = timed["update"]
            base.setdefault(seeds, sec if n == 1 else None)
            share = timed["diffusion"] / sec if timed["diffusion"] is not None else None
            row = {"seeds": seeds, "agents": n, "members": m, "updates_per_s": 1 / sec,
                   "ms_diffusion": 1000 * timed["diffusion"] if share is not None else None, "diffusion_share": share,
                   "agent_updates_per_s": m / sec, "ms_per_update": 1000 * sec,
                   "cost_vs_one_agent": sec / base[seeds] if base[seeds] else None, "train_env_steps_per_s": None,
                   "protocol_seconds": None, "protocol_env_steps_per_s": None, "projected_hours_1M": None}
            if n in args.loop_agents:
                with tempfile.TemporaryDirectory() as tmp:
                    cfg = loop_config(args.policy, env_id, n, seeds, device, args.start_time_steps,
                                      args.max_time_steps, args.eval_freq, args.eval_episodes, args.policy_type,
                                      args.env_workers, tmp, args.cuda_graphs, sharing)
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
            print(f"seeds {seeds:>2} x agents {n:>3} | {row['ms_per_update']:8.2f} ms/update{mixing} | "
                  f"{row['agent_updates_per_s']:8.1f} agent-updates/s | cost x{row['cost_vs_one_agent'] or float('nan'):.2f}"
                  + loops, flush=True)
    gaussian = args.policy.endswith("SAC") and args.policy_type == "Gaussian"
    report = {
        "results": results, "policy": args.policy, "env": env_id, "batch_size": args.batch_size,
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
