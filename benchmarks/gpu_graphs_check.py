"""On a GPU: do updates replayed from CUDA graphs give the eager run, and is an eager GPU run repeatable?

For each policy, three short Pendulum-v1 runs on the GPU with the same seed: eager, eager again, and
CUDA graphs. It reports whether the curves and the final parameters are equal (bit for bit, and the
largest absolute difference), whether the graphs were really used (branches captured, replays), and
the wall time of each run. Needs a GPU; on a machine without one it says so and exits with code 2.

    python -m benchmarks.gpu_graphs_check [--steps 1000] [--json out.json]
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from utils.cli import Parser, tool_guard
from utils.io import output_file_problem

PROG = "python -m benchmarks.gpu_graphs_check"

# policy: (algorithm settings, agents, sharing settings), as in tests/test_cuda_graphs.py but at the default width
CASES = {
    "DASE_TD3": ({}, 2, {}),
    "DASE_DDPG": ({}, 2, {}),
    "DASE_SAC": ({"policy_type": "Gaussian", "automatic_entropy_tuning": True}, 2, {}),
    "DPD_TD3": ({}, 2, {"dpd_batch_size": 64}),
    "DIFF_TD3": ({}, 3, {"topology": "ring", "link_drop": 0.3}),
}


def one_run(policy: str, out: Path, graphs: bool, steps: int, seed: int):
    from utils.run import RunConfig, Trainer
    algo, agents, sharing = CASES[policy]
    cfg = RunConfig(policy=policy, env="Pendulum-v1", seed=seed, num_agents=agents, max_time_steps=steps,
                    start_time_steps=steps // 4, eval_freq=steps // 4, eval_episodes=2, batch_size=256,
                    results_dir=str(out), quiet=True, checkpoint_freq=0, algo=dict(algo), sharing=dict(sharing),
                    device="cuda", cuda_graphs=graphs)
    trainer = Trainer(cfg)
    t0 = time.perf_counter()
    trainer.run()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    g = trainer.learner.graphs
    info = {"wall_s": round(wall, 2), "updates": int(trainer.agents.updates),
            "graphs_used": g is not None, "branches": len(g.graphs) if g is not None else 0}
    params = {f"{name}.{k}": v.detach().double().cpu() for name, net in trainer.agents.networks.items()
              for k, v in net.state_dict().items() if torch.is_tensor(v) and v.is_floating_point()}
    curves = {p.name: np.load(p) for p in sorted(out.glob("*.npy"))}
    return info, params, curves


def compare(a, b):
    (_, pa, ca), (_, pb, cb) = a, b
    diff = max((pa[k] - pb[k]).abs().max().item() for k in pa)
    params_equal = all(pa[k].equal(pb[k]) for k in pa)
    curves_equal = ca.keys() == cb.keys() and all(np.array_equal(ca[k], cb[k], equal_nan=True) for k in ca)
    return {"params_equal": params_equal, "max_abs_param_diff": diff, "curves_equal": curves_equal}


def main(argv=None) -> int:
    """The check; bad input (a count, a policy, the --json path) and a machine without a GPU: one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000, help="environment steps per run, a quarter random (default: 1000)")
    p.add_argument("--seed", type=int, default=3, help="the runs' seed (default: 3)")
    p.add_argument("--policies", nargs="+", default=list(CASES), choices=list(CASES),
                   help="policies to check (default: all five)")
    p.add_argument("--json", type=str, default=None, help="write the results here as JSON")
    args = p.parse_args(argv)
    if not 40 <= args.steps <= 1_000_000:
        p.error(f"--steps {args.steps}: give 40 to 1000000 (a quarter are random, the rest update)")
    if not 0 <= args.seed < 2**31:
        p.error(f"--seed {args.seed}: give 0 to {2**31 - 1}")
    if args.json is not None and (problem := output_file_problem(args.json)):
        p.error(f"--json {args.json[:60]}: {problem}")
    if not torch.cuda.is_available():
        p.error("needs a GPU: torch.cuda.is_available() is False on this machine")
    print(torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in args.policies:
            runs = {name: one_run(policy, Path(tmp) / policy / name, graphs, args.steps, args.seed)
                    for name, graphs in (("eager", False), ("eager_again", False), ("graphs", True))}
            res = {name: r[0] for name, r in runs.items()}
            res["eager_vs_eager_again"] = compare(runs["eager"], runs["eager_again"])
            res["eager_vs_graphs"] = compare(runs["eager"], runs["graphs"])
            results[policy] = res
            print(policy, json.dumps(res), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
