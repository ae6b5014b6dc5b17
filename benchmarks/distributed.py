"""How a distributed run's collection scales with its actors (utils/distributed), and what one learner consumes.

    python -m benchmarks.distributed [--actors 1 2 4 8] [--seconds 20] [--env Pendulum-v1] [--policy SAC]
                                     [--block 50] [--prioritized] [--json out.json]

For each actor count K: K Ray actors (``utils.distributed.actor.EnvActor``, one CPU each, as a run places them) step
their environments with a fixed policy (the learner's initial SAC actor, exploring; no warm-up) and send blocks of
``--block`` steps (a run's default, 50) to a queue the driver empties as fast as they come, for ``--seconds`` after a
warm-up block; the table gives the environment steps collected per second, per actor, and against K times the rate of
one actor. Beside it, the learner's side: one SAC learner's updates per second on this machine (batch 256, 256-256
networks, one torch thread, the replay filled with 10k random transitions), the rate at which a learner consumes
steps at one update per stored step. ``--prioritized``: the actors also compute every step's initial priority (a pass
of every network over each block, as in a ``--prioritized`` run), and the learner samples by priority. Ray starts on
this machine (``ray.init``) with as many logical CPUs as the largest K plus one.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


class FixedLearner:
    """Stands in for a learner: publishes one policy, then says done when told."""

    def __init__(self, published: dict):
        self.published, self.done = published, False

    def latest(self, known: int):
        if self.done:
            return {"done": True}
        return None if known == 0 else {"version": 0, "done": False, "warmup": False, **self.published}

    def stop(self) -> None:
        self.done = True


def learner_config(env: str, policy: str, prioritized: bool = False):
    import sac_main

    return sac_main.build_config(sac_main.parse(["--policy", policy, "--env", env, "--quiet", "--results_dir",
                                                 "/tmp/benchmark-distributed", *(["--prioritized"] * prioritized)]))


def collection_rate(ray, cfg, k: int, seconds: float, block: int = 50) -> float:
    """Environment steps per second that ``k`` actors deliver to the driver."""
    from ray.util.queue import Queue

    from utils.distributed.actor import EnvActor
    from utils.envs.registry import make_env
    from utils.naming import ALGORITHM

    env = make_env(cfg.env)
    agents = ALGORITHM[cfg.algorithm].form()(env.observation_space.shape[0], env.action_space.shape[0],
                                             env.action_space.low, env.action_space.high, cfg.agent_seeds(), "cpu",
                                             **cfg.algo)
    copy = lambda net: {n: v.clone() for n, v in net.state_dict().items()}  # noqa: E731
    published = {"networks": {name: copy(net) for name, net in agents.networks.items()}} if cfg.per \
        else {"actor": copy(agents.actor)}  # prioritized: every network, for the actors' TD errors
    stub = ray.remote(num_cpus=0, max_concurrency=4)(FixedLearner).remote(published)
    queue = Queue(maxsize=2 * k)
    actors = [ray.remote(num_cpus=1)(EnvActor).remote(cfg, i, k, 0.1, block, 0) for i in range(k)]
    running = [a.run.remote(stub, queue) for a in actors]
    for _ in range(k):  # each actor's first block: imports, environments and policies are ready
        queue.get(block=True)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += sum(len(b["rewards"]) for b in [queue.get(block=True)])
    rate = steps / (time.perf_counter() - start)
    ray.get(stub.stop.remote())
    while queue.qsize():
        queue.get_nowait_batch(queue.qsize())
    ray.wait(running, num_returns=len(running), timeout=30)
    for a in actors:
        ray.kill(a)
    return rate


def learner_rate(cfg, updates: int = 300) -> float:
    """One learner's updates per second, batch 256, one thread, on a replay of 10k random transitions."""
    import torch

    from utils.envs.registry import make_env
    from utils.run.replay.learner import Learner

    torch.set_num_threads(1)
    env = make_env(cfg.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    learner = Learner(cfg.algorithm, cfg.algo, cfg.agent_seeds(), 1, obs_dim, act_dim, env.action_space.low,
                      env.action_space.high, 100_000, 256, 1, torch.device("cpu"), prioritized=cfg.per or None)
    rng = np.random.default_rng(0)
    for _ in range(10_000):
        learner.store(rng.normal(size=(1, obs_dim)), rng.uniform(-1, 1, (1, act_dim)), rng.normal(size=1),
                      rng.normal(size=(1, obs_dim)), np.zeros(1), None)
    learner.train(0)
    start = time.perf_counter()
    for t in range(updates):
        learner.train(t)
    return updates / (time.perf_counter() - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.distributed", description=__doc__.split("\n\n")[0])
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--policy", default="SAC")
    p.add_argument("--block", type=int, default=50, help="steps per block an actor sends (a run's --block; 50)")
    p.add_argument("--prioritized", action="store_true", help="actor-side initial priorities, a prioritized learner")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if min(args.actors) < 1 or args.block < 1 or args.seconds <= 0:
        print("benchmarks.distributed: --actors and --block must be at least 1 and --seconds positive", file=sys.stderr)
        return 2
    try:
        import ray
    except ImportError:
        print("Ray is not installed: pip install -r requirements-cluster.txt", file=sys.stderr)
        return 2
    cfg = learner_config(args.env, args.policy, args.prioritized)
    updates = learner_rate(cfg)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ray.init(num_cpus=max(args.actors) + 1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": root}}, logging_level="ERROR")
    rows = []
    try:
        for k in args.actors:
            rows.append({"actors": k, "steps_per_s": collection_rate(ray, cfg, k, args.seconds, args.block)})
    finally:
        ray.shutdown()
    one = rows[0]["steps_per_s"] / rows[0]["actors"]
    print(f"{args.policy} on {args.env}{' (prioritized)' * args.prioritized}, {os.cpu_count()} cores; one learner: "
          f"{updates:.0f} updates/s; blocks of {args.block} steps")
    print("| actors | steps/s collected | per actor | of linear |")
    print("|---|---|---|---|")
    for r in rows:
        r["of_linear"] = r["steps_per_s"] / (one * r["actors"])
        print(f"| {r['actors']} | {r['steps_per_s']:.0f} | {r['steps_per_s'] / r['actors']:.0f} | "
              f"{r['of_linear']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"learner_updates_per_s": updates, "rows": rows, "cores": os.cpu_count(),
                       "env": args.env, "policy": args.policy, "prioritized": args.prioritized,
                       "block": args.block}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
