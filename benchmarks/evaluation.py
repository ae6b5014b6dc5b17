"""Evaluation throughput: members x episodes evaluation episodes, in this process or in worker processes.

    python -m benchmarks.evaluation --env HalfCheetah-v5 --members 20 --episodes 10 --workers 0 2 --json eval.json

Each configuration plays one full evaluation (every episode to its end) with freshly initialised
TD3 actors (256-256) on --device and reports environment steps per second (all episodes' steps
over the wall time, start-up of the workers excluded).
"""
from __future__ import annotations

import json
import os
import platform
import time

import torch

from algorithms.common.nets import DeterministicActor, init_generators
from utils.cli import Parser, available_cores, resolve_device, tool_guard
from utils.envs.registry import make_env, resolve_env_id
from utils.envs.workers import make_envs
from utils.io import output_file_problem
from utils.run.evaluation import Evaluation

PROG = "python -m benchmarks.evaluation"


def measure(env_id: str, members: int, episodes: int, workers: int, device: torch.device) -> dict:
    envs = make_envs(env_id, list(range(members)), [100 + m for m in range(members)], episodes, workers)
    try:
        actor = DeterministicActor(envs.obs_dim, envs.act_dim, (256, 256), init_generators(range(members)),
                                   envs.low, envs.high).to(device)

        @torch.no_grad()
        def policy(obs):
            return actor(torch.as_tensor(obs, dtype=torch.float32, device=device)).cpu().numpy()

        start = time.perf_counter()
        ev = Evaluation(envs, policy, 0)
        steps = 0
        while not ev.done:
            steps += int(ev.active.sum())
            ev.advance(1)
        seconds = time.perf_counter() - start
    finally:
        envs.close()
    return {"members": members, "episodes": episodes, "workers": workers, "env_steps": steps, "seconds": seconds,
            "env_steps_per_s": steps / seconds}


def main(argv=None) -> int:
    """The measurement; bad input (a count, an environment, a device, the --json path) is one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--env", type=str, default="HalfCheetah-v5", help="environment (default: HalfCheetah-v5)")
    p.add_argument("--members", type=int, default=20, help="seeds x agents evaluated (default: 20)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per member (default: 10)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="worker counts to try (default: 0 2)")
    p.add_argument("--device", type=str, default="cpu", help="device of the actors (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--json", type=str, default=None, help="write the results here as JSON")
    args = p.parse_args(argv)
    for flag, value, most in (("--members", args.members, 4096), ("--episodes", args.episodes, 1000),
                              ("--threads", 1 if args.threads is None else args.threads, 4 * available_cores())):
        if not 1 <= value <= most:
            p.error(f"{flag} {value}: give 1 to {most}")
    if any(not 0 <= w <= 4 * available_cores() for w in args.workers):
        p.error(f"--workers {' '.join(map(str, args.workers))}: each 0 (in this process) to {4 * available_cores()}")
    if args.json is not None and (problem := output_file_problem(args.json)):
        p.error(f"--json {args.json[:60]}: {problem}")
    env_id, _ = resolve_env_id(args.env)
    device = torch.device(resolve_device(args.device, 0))
    env = make_env(env_id, actions=("box",), who="the evaluated TD3 actors")
    flat = len(env.observation_space.shape) == 1
    env.close()
    if not flat:
        p.error(f"--env {env_id}: image observations; the evaluated actors take flat ones (HalfCheetah-v5)")
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for workers in args.workers:
        row = measure(env_id, args.members, args.episodes, workers, device)
        rows.append(row)
        print(f"{env_id} | {args.members} x {args.episodes} episodes | workers {workers:>2} | "
              f"{row['env_steps']:,} steps in {row['seconds']:.2f} s | {row['env_steps_per_s']:,.0f} env steps/s",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows, "env": env_id, "device": str(device), "cpu_count": os.cpu_count(),
                       "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                       "threads": torch.get_num_threads()}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
