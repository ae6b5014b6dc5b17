"""A DDPG critic step with denormal weights, computed with them kept and with them flushed to zero
(``--flush_denormals``): how much do denormals cost on this CPU?

    python -m benchmarks.denormals [--fraction 0 0.07] [--batch 256] [--rounds 10]

The paper's DDPG critic (state -> 400, [features, action] -> 300 -> 1) for one DASE_DDPG run (2 members) on
LunarLanderContinuous (8 observations, 2 actions): a forward on a batch, the squared error, backward, on one thread.
``--fraction`` of the second layer's weights are set to denormal values (float32 below 1.2e-38) first, as the
critic's weight decay leaves the weights of units that stopped firing (0.07 of them in a DASE_DDPG checkpoint at step
43k on LunarLander, 2026-12-06). Each fraction is timed with denormals kept and flushed (torch.set_flush_denormal),
alternated ``--rounds`` times (20 steps per round); the script prints each side's median per step and their ratio.
Flushing changes values below 1.2e-38 only, so the Q values agree to float32's precision, but not always bit for bit:
the printed largest difference says how far. docs/performance.md ("Denormals: DDPG on Intel CPUs") has its numbers.
"""
from __future__ import annotations

import statistics
import time

import torch

from algorithms.common.nets import init_generators
from algorithms.replay.ddpg import DDPGCritic
from utils.cli import Parser, tool_guard

PROG = "python -m benchmarks.denormals"
OBS, ACT, MEMBERS = 8, 2, 2  # LunarLanderContinuous, one DASE_DDPG run of 2 agents
STEPS_PER_ROUND = 20
SMALLEST_NORMAL = torch.finfo(torch.float32).tiny  # 1.1754944e-38


def with_denormals(critic: DDPGCritic, fraction: float, seed: int = 0) -> None:
    """Sets ``fraction`` of the second layer's weights (drawn at random) to denormal values, each of either sign."""
    g = torch.Generator().manual_seed(seed)
    w = critic.l2.weight.data
    chosen = torch.rand(w.shape, generator=g) < fraction
    sign = torch.where(torch.rand(w.shape, generator=g) < 0.5, -1.0, 1.0)
    tiny = sign * SMALLEST_NORMAL * torch.rand(w.shape, generator=g).clamp_min(1e-3)  # 1e-3 to 1 of the smallest
    w[chosen] = tiny[chosen]


def measure(fraction: float, batch: int, rounds: int) -> dict:
    critic = DDPGCritic(OBS, ACT, init_generators(list(range(MEMBERS))))
    with_denormals(critic, fraction)
    g = torch.Generator().manual_seed(1)
    obs, action = torch.randn(MEMBERS, batch, OBS, generator=g), torch.rand(MEMBERS, batch, ACT, generator=g) * 2 - 1
    target = torch.randn(MEMBERS, batch, 1, generator=g)

    def step() -> torch.Tensor:
        q = critic(obs, action)
        critic.zero_grad(set_to_none=True)
        (q - target).pow(2).mean().backward()
        return q.detach()

    sides = {"kept": False, "flushed": True}
    q = {}
    for name, flush in sides.items():
        torch.set_flush_denormal(flush)
        q[name] = step()
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for _ in range(rounds):
            for name, flush in sides.items():
                torch.set_flush_denormal(flush)
                start = time.perf_counter()
                for _ in range(STEPS_PER_ROUND):
                    step()
                times[name].append((time.perf_counter() - start) / STEPS_PER_ROUND * 1e3)
    finally:
        torch.set_flush_denormal(False)
    return {"ms": {k: statistics.median(v) for k, v in times.items()},
            "max_abs_diff": float((q["kept"] - q["flushed"]).abs().max())}


def main(argv=None) -> int:
    """The timings; bad input is one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--fraction", type=float, nargs="+", default=[0.0, 0.07],
                   help="share of the second layer's weights made denormal (default: 0 0.07)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default: 256)")
    p.add_argument("--rounds", type=int, default=10, help="alternated rounds of 20 steps each (default: 10)")
    args = p.parse_args(argv)
    for f in args.fraction:
        if not 0.0 <= f <= 1.0:
            p.error(f"--fraction {f}: give 0 to 1")
    for name, v, high in (("--batch", args.batch, 65536), ("--rounds", args.rounds, 1000)):
        if not 1 <= v <= high:
            p.error(f"{name} {v}: give 1 to {high}")
    if not torch.set_flush_denormal(False):
        p.error("this CPU cannot flush denormals (torch.set_flush_denormal needs SSE3 on x86)")
    torch.set_num_threads(1)
    for f in args.fraction:
        r = measure(f, args.batch, args.rounds)
        kept, flushed = r["ms"]["kept"], r["ms"]["flushed"]
        print(f"denormal share {f:g}, batch {args.batch}: kept {kept:.2f} ms, flushed {flushed:.2f} ms per critic "
              f"step ({kept / flushed:.1f}x); largest Q difference {r['max_abs_diff']:.3g}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
