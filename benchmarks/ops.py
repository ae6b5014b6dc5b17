"""aten operators per batched update and per exploration step, counted on the CPU.

    python -m benchmarks.ops --policies DASE_TD3 DASE_DDPG DASE_SAC DPD_TD3 --env Pendulum-v1 --agents 2

Each aten call is at least one kernel launch on a GPU, so these counts are the launch budget of an eager
GPU step (a CUDA graph replays them with one launch). Counted with ``utils.run.opcheck.OpRecorder`` over
``Learner.update_once`` (sampling, weights, losses, optimizer steps, soft updates, diagnostics; the mean
of two consecutive updates, which covers both branches of TD3's schedule) and over one exploration step
(actor, noise, clip, the copy to the host), with the optimizers configured as on the CPU (torch's
per-tensor Adam) and as on a GPU (one fused Adam per optimizer).
"""
from __future__ import annotations

import json

import numpy as np
import torch

from utils.cli import Parser, tool_guard
from utils.envs.registry import make_env, resolve_env_id
from utils.io import output_file_problem
from utils.naming import ALGORITHM, algorithm_of, is_multi_agent, parse_policy
from utils.run.opcheck import count_ops, optimizers_as_on_cuda
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

SAC_KW = {"policy_type": "Gaussian"}
PROG = "python -m benchmarks.ops"


def build(policy: str, env_id: str, n: int, batch_size: int = 256, seed: int = 0) -> Learner:
    env = make_env(env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    env.close()
    algorithm = algorithm_of(policy)
    algo = dict(SAC_KW) if algorithm == "SAC" else {}
    learner = Learner(algorithm, algo, [seed + 100 * i for i in range(n)], n, obs_dim, act_dim, low, high,
                      buffer_size=4 * batch_size * n, batch_size=batch_size, updates_per_step=1,
                      device=torch.device("cpu"), sharing=SharingSettings.of(policy, n, {}))
    rng = np.random.default_rng(seed)
    for _ in range(2 * batch_size):
        behaviour = (rng.standard_normal((n, act_dim)), rng.uniform(0.1, 1.0, (n, act_dim))) \
            if learner.agents.gaussian_behaviour else None
        learner.store(rng.standard_normal((n, obs_dim)), rng.uniform(low, high, (n, act_dim)), rng.standard_normal(n),
                      rng.standard_normal((n, obs_dim)), rng.random(n) < 0.01, behaviour)
    return learner


def op_counts(policy: str, env_id: str, n: int, gpu_optimizers: bool = False) -> dict:
    """{"update": aten ops per update, "explore": per exploration step, "top_update": the most frequent}."""
    learner = build(policy, env_id, n)
    if gpu_optimizers:
        optimizers_as_on_cuda(learner.agents)
    for _ in range(4):  # optimizer state exists, the schedule has turned once
        learner.update_once()
    updates = [count_ops(learner.update_once) for _ in range(2)]
    obs = np.zeros((learner.members, learner.buffer.obs.shape[-1]), dtype=np.float32)
    learner.explore(obs)
    explore = count_ops(learner.explore, obs)
    top = sum((u.ops for u in updates), start=type(updates[0].ops)())
    return {"update": sum(u.total for u in updates) / 2, "explore": explore.total,
            "top_update": dict(top.most_common(6))}


def main(argv=None) -> int:
    """The counts; bad input (a policy, an environment, a count, the --json path) is one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", nargs="+", default=["DASE_TD3", "DASE_DDPG", "DASE_SAC", "DPD_TD3"],
                   help="replay policies of DASE_main.py and sac_main.py (default: DASE_TD3 DASE_DDPG DASE_SAC "
                        "DPD_TD3)")
    p.add_argument("--env", default="Pendulum-v1", help="environment with continuous actions (default: Pendulum-v1)")
    p.add_argument("--agents", type=int, default=2, help="agents (default: 2)")
    p.add_argument("--json", default=None, help="write the counts here as JSON")
    args = p.parse_args(argv)
    for policy in args.policies:
        parsed = parse_policy(policy)
        if parsed is None or ALGORITHM[parsed[1]].family != "replay":
            p.error(f"--policies: {policy!r} is not a replay policy of DASE_main.py or sac_main.py "
                    f"(e.g. DASE_TD3, TD3, DPD_DDPG, DASE_SAC)")
    if not 1 <= args.agents <= 64:
        p.error(f"--agents {args.agents}: give 1 to 64")
    if args.agents > 1 and not all(is_multi_agent(policy) for policy in args.policies):
        p.error(f"--agents {args.agents}: {', '.join(q for q in args.policies if not is_multi_agent(q))} "
                f"is a single agent; count it with --agents 1")
    if args.json is not None and (problem := output_file_problem(args.json)):
        p.error(f"--json {args.json[:60]}: {problem}")
    env_id, _ = resolve_env_id(args.env)
    env = make_env(env_id, actions=("box",), who="the op count")
    flat = len(env.observation_space.shape) == 1
    env.close()
    if not flat:
        p.error(f"--env {env_id}: image observations; count on an environment with flat ones (Pendulum-v1)")
    torch.set_num_threads(1)
    rows = []
    for policy in args.policies:
        cpu, gpu = op_counts(policy, env_id, args.agents), op_counts(policy, env_id, args.agents, True)
        rows.append({"policy": policy, "cpu_adam": cpu, "gpu_adam": gpu})
        print(f"{policy:>10} x{args.agents} on {env_id}: update {cpu['update']:6.1f} aten ops (CPU Adam), "
              f"{gpu['update']:6.1f} (GPU fused Adam) | exploration step {cpu['explore']:4d} | most: "
              + ", ".join(f"{k} {v / 2:g}" for k, v in cpu["top_update"].items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": env_id, "agents": args.agents, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
