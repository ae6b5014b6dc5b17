"""TD3's twin critic as two networks (ours) or as one stacked network: is one product for both Q networks faster?

    python -m benchmarks.twin_critic [--seeds 1 10] [--hidden 256 256] [--batch 256] [--rounds 15]

Times one critic step (forward of Q1 and Q2 on a batch, the two squared errors, backward) on one thread, both ways
alternated ``--rounds`` times (30 steps per round), and prints each side's minimum and median per step. The stacked
way concatenates each layer's Q1 and Q2 weights into one [2N, in, out] tensor and runs the layer once on the input
repeated twice; it first checks that both ways give the same Q values and weight gradients bit for bit, so the
timing compares the same arithmetic. The stacked network lives only here (the library keeps ``EnsembleQ``): this is
the measurement behind docs/performance.md's "one product for both Q networks".
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from algorithms.common.nets import EnsembleQ, init_generators
from utils.cli import Parser, tool_guard

PROG = "python -m benchmarks.twin_critic"
OBS, ACT = 3, 1  # Pendulum-v1, the peers job's environment
STEPS_PER_ROUND = 30


def stacked_copy(twin: EnsembleQ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (weight, bias) with Q1's members first, then Q2's: [2N, in, out], [2N, 1, out]."""
    pairs = zip(twin.q1.net.layers, twin.q2.net.layers)
    return [(torch.cat([a.weight, b.weight]).detach().requires_grad_(),
             torch.cat([a.bias, b.bias]).detach().requires_grad_()) for a, b in pairs]


def stacked_forward(layers, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = obs.shape[0]
    x = torch.cat([obs, action], dim=-1).repeat(2, 1, 1)
    for weight, bias in layers:
        if weight.shape[-1] == 1:  # the Q head, computed as BatchedLinear does
            x = (x * weight.transpose(1, 2)).sum(-1, keepdim=True) + bias
        else:
            x = F.relu(torch.baddbmm(bias, x, weight), inplace=True)
    return x[:n], x[n:]


def measure(seeds: int, hidden: list[int], batch: int, rounds: int) -> dict:
    twin = EnsembleQ(OBS, ACT, tuple(hidden), init_generators(list(range(seeds))))
    layers = stacked_copy(twin)
    g = torch.Generator().manual_seed(0)
    obs, action = torch.randn(seeds, batch, OBS, generator=g), torch.randn(seeds, batch, ACT, generator=g)
    target = torch.randn(seeds, batch, 1, generator=g)
    flat = [p for pair in layers for p in pair]

    def two_networks():
        q1, q2 = twin(obs, action)
        twin.zero_grad(set_to_none=True)
        ((q1 - target).pow(2) + (q2 - target).pow(2)).mean().backward()
        return q1, q2

    def one_network():
        q1, q2 = stacked_forward(layers, obs, action)
        for p in flat:
            p.grad = None
        ((q1 - target).pow(2) + (q2 - target).pow(2)).mean().backward()
        return q1, q2

    a, b = two_networks(), one_network()
    same = torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    for (weight, bias), la, lb in zip(layers, twin.q1.net.layers, twin.q2.net.layers):
        same &= torch.equal(weight.grad, torch.cat([la.weight.grad, lb.weight.grad]))
        same &= torch.equal(bias.grad, torch.cat([la.bias.grad, lb.bias.grad]))
    times = {"two networks": [], "one stacked": []}
    for _ in range(rounds):
        for name, step in (("two networks", two_networks), ("one stacked", one_network)):
            start = time.perf_counter()
            for _ in range(STEPS_PER_ROUND):
                step()
            times[name].append((time.perf_counter() - start) / STEPS_PER_ROUND * 1e3)
    return {"bit_identical": bool(same), "ms": times}


def main(argv=None) -> int:
    """The timings; bad input (sizes, counts) is one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 10], help="members stacked per network (default: 1 10)")
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="hidden sizes (default: 256 256)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default: 256)")
    p.add_argument("--rounds", type=int, default=15, help="alternated rounds of 30 steps each (default: 15)")
    args = p.parse_args(argv)
    for name, values, high in (("--seeds", args.seeds, 64), ("--hidden", args.hidden, 4096),
                               ("--batch", [args.batch], 65536), ("--rounds", [args.rounds], 1000)):
        for v in values:
            if not 1 <= v <= high:
                p.error(f"{name} {v}: give 1 to {high}")
    torch.set_num_threads(1)
    for seeds in args.seeds:
        r = measure(seeds, args.hidden, args.batch, args.rounds)
        cells = " | ".join(f"{k} min {min(v):.2f} ms, median {statistics.median(v):.2f} ms"
                           for k, v in r["ms"].items())
        print(f"{seeds:>3} seed(s), {'-'.join(map(str, args.hidden))}, batch {args.batch}: {cells} | "
              f"bit-identical: {'yes' if r['bit_identical'] else 'NO'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
