"""Throughput of the batched update and of the whole training loop, for several agent counts.

    python -m benchmarks.throughput --policy DASE_TD3 --env HalfCheetah-v5 --agents 1 2 5 10 --json out.json

(a) batched updates per second after a warm-up, on a buffer of random transitions;
(b) the whole training loop (environment steps, updates, evaluations) for a fixed step budget,
    the workload of the speed issue: --start_time_steps 1000 --max_time_steps 4000 --eval_freq 1000.
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

from algorithms.nets import AgentRNG
from utils.buffer import SharedReplayBuffer
from utils.cli import resolve_device
from utils.envs import make_env, resolve_env_id
from utils.training import ALGORITHMS, RunConfig, Trainer


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def algo_kwargs(policy: str, sac_policy_type: str) -> dict:
    return {"policy_type": sac_policy_type} if policy.endswith("SAC") else {}


def time_updates(policy: str, env_id: str, n: int, device: torch.device, updates: int, warmup: int,
                 batch_size: int, sac_policy_type: str) -> float:
    """Seconds per batched update of n agents."""
    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    env.close()
    seeds = [100 * i for i in range(n)]
    kw = algo_kwargs(policy, sac_policy_type)
    agents = ALGORITHMS[policy.removeprefix("DASE_")](obs_dim, act_dim, low, high, seeds, device, **kw)
    buffer = SharedReplayBuffer(obs_dim, act_dim, 20_000, n, device, agents.gaussian_behaviour)
    rng = np.random.default_rng(0)
    for _ in range(20_000 // n):
        buffer.add(rng.standard_normal((n, obs_dim)), rng.uniform(low, high, (n, act_dim)), rng.standard_normal(n),
                   rng.standard_normal((n, obs_dim)), rng.random(n) < 0.01,
                   (rng.standard_normal((n, act_dim)), rng.uniform(0.1, 1, (n, act_dim))) if agents.gaussian_behaviour else None)
    sampler = AgentRNG(seeds, device)
    for _ in range(warmup):
        agents.update(buffer.sample(batch_size, sampler))
    sync(device)
    start = time.perf_counter()
    for _ in range(updates):
        agents.update(buffer.sample(batch_size, sampler))
    sync(device)
    return (time.perf_counter() - start) / updates


def time_loop(policy: str, env_id: str, n: int, device: torch.device, start_steps: int, max_steps: int,
              eval_freq: int, sac_policy_type: str) -> float:
    """Wall-clock seconds of a whole run (setup excluded: environments, networks, buffer)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(policy=policy, env=env_id, seed=0, num_agents=n, max_time_steps=max_steps,
                        start_time_steps=start_steps, eval_freq=eval_freq, device=str(device), results_dir=tmp,
                        checkpoint_freq=0, quiet=True, algo=algo_kwargs(policy, sac_policy_type))
        trainer = Trainer(cfg)
        sync(device)
        start = time.perf_counter()
        trainer.run()
        sync(device)
        return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", type=str, default="DASE_TD3", help="DASE_TD3, DASE_DDPG, DASE_SAC (default: DASE_TD3)")
    p.add_argument("--env", type=str, default="HalfCheetah-v5", help="environment (default: HalfCheetah-v5)")
    p.add_argument("--agents", type=int, nargs="+", default=[1, 2, 5, 10], help="agent counts (default: 1 2 5 10)")
    p.add_argument("--device", type=str, default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--updates", type=int, default=200, help="timed updates per agent count (default: 200)")
    p.add_argument("--warmup", type=int, default=30, help="untimed updates first (default: 30)")
    p.add_argument("--batch_size", type=int, default=256, help="batch per agent (default: 256)")
    p.add_argument("--policy_type", type=str, default="Gaussian", help="SAC policy type (default: Gaussian)")
    p.add_argument("--loop_agents", type=int, nargs="*", default=[1, 2],
                   help="agent counts for the whole-loop timing; none to skip (default: 1 2)")
    p.add_argument("--start_time_steps", type=int, default=1000, help="loop: random steps (default: 1000)")
    p.add_argument("--max_time_steps", type=int, default=4000, help="loop: step budget (default: 4000)")
    p.add_argument("--eval_freq", type=int, default=1000, help="loop: evaluation period (default: 1000)")
    p.add_argument("--json", type=str, default=None, help="write the results here as JSON")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    env_id, _ = resolve_env_id(args.env)
    device = torch.device(resolve_device(args.device, 0))

    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    env.close()
    results = []
    base = None
    for n in args.agents:
        sec = time_updates(args.policy, env_id, n, device, args.updates, args.warmup, args.batch_size, args.policy_type)
        base = base or (sec if n == 1 else None)
        row = {"agents": n, "updates_per_s": 1 / sec, "agent_updates_per_s": n / sec, "ms_per_update": 1000 * sec,
               "cost_vs_one_agent": sec / base if base else None, "loop_seconds": None, "loop_env_steps_per_s": None}
        if n in args.loop_agents:
            loop = time_loop(args.policy, env_id, n, device, args.start_time_steps, args.max_time_steps,
                             args.eval_freq, args.policy_type)
            row["loop_seconds"] = loop
            row["loop_env_steps_per_s"] = n * args.max_time_steps / loop
        results.append(row)
        print(f"agents {n:>3} | {row['ms_per_update']:8.2f} ms/update | {row['updates_per_s']:8.1f} updates/s | "
              f"{row['agent_updates_per_s']:8.1f} agent-updates/s | cost x{row['cost_vs_one_agent'] or float('nan'):.2f}"
              + (f" | loop {row['loop_seconds']:.1f} s" if row["loop_seconds"] else ""), flush=True)
    gaussian = args.policy.endswith("SAC") and args.policy_type == "Gaussian"
    report = {
        "results": results, "policy": args.policy, "env": env_id, "batch_size": args.batch_size,
        "loop": {"start_time_steps": args.start_time_steps, "max_time_steps": args.max_time_steps,
                 "eval_freq": args.eval_freq},
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "buffer_bytes_1e6": SharedReplayBuffer.bytes_for(obs_dim, act_dim, 1_000_000, gaussian),
    }
    print(f"shared buffer of 1e6 transitions for {env_id}: {report['buffer_bytes_1e6']:,} bytes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
