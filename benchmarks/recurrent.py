"""The cost of recurrent SAC's update (``--seq_encoder``) against a feed-forward SAC update of as many samples.

    python -m benchmarks.recurrent --windows 16 --seq_len 16 --agents 1 --threads 1

Both updates train on the same number of samples: B windows of L steps (burn-in excluded) for the recurrent one,
B x (L - burn_in) transitions for the feed-forward one, whose actor and critics read the recurrent one's feature
width (observation + state), so the only difference is the encoder (its unrolls, online and target, and the
backward pass through time). Each timing is the median of ``--repeats`` blocks of ``--updates`` updates, the two
kinds alternated block by block (so the ratio holds on a busy machine); random batches, on the CPU.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from algorithms.replay.base import Batch
from algorithms.replay.sac import SAC
from algorithms.replay.sequence import ENCODERS
from algorithms.replay.sequence_agents import RecurrentSAC
from utils.cli import Parser, tool_guard
from utils.errors import UsageError
from utils.io import output_file_problem

PROG = "python -m benchmarks.recurrent"


def batches(members: int, windows: int, length: int, obs_dim: int, act_dim: int, state: int, features: int,
            burn_in: int):
    """A window batch for the recurrent update and a flat batch of as many trained samples for the other."""
    m, b, n = members, windows, length
    r = torch.randn
    seq = Batch(r(m, b, n, obs_dim), r(m, b, n, act_dim).clamp(-1, 1), r(m, b, n, 1), r(m, b, n, obs_dim),
                torch.ones(m, b, n, 1), torch.ones(m, b, n, dtype=torch.bool), r(m, b, n, act_dim),
                r(m, b, n, act_dim).abs() + 0.1,
                sequence={"first": (torch.rand(m, b, n) < 0.02).float(), "state": r(m, b, state)})
    k = b * (n - burn_in)
    flat = Batch(r(m, k, features), r(m, k, act_dim).clamp(-1, 1), r(m, k, 1), r(m, k, features),
                 torch.ones(m, k, 1), torch.ones(m, k, dtype=torch.bool), r(m, k, act_dim), r(m, k, act_dim).abs() + 0.1)
    return seq, flat


def timed(update, batch, updates: int) -> float:
    start = time.perf_counter()
    for _ in range(updates):
        update(batch)
    return (time.perf_counter() - start) / updates


def main(argv=None) -> int:
    """The timings; bad input (a count, the encoder, the --json path) is one line, exit 2."""
    return tool_guard(PROG, _main, argv)


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", type=int, default=16, help="windows per member and update (default: 16)")
    p.add_argument("--seq_len", type=int, default=16, help="steps per window (default: 16)")
    p.add_argument("--burn_in", type=int, default=0, help="leading steps not trained on (default: 0)")
    p.add_argument("--encoder", type=str, default="gru", help="gru, lstm or attn (default: gru)")
    p.add_argument("--seq_hidden", type=int, default=64, help="state width (default: 64)")
    p.add_argument("--obs_dim", type=int, default=2, help="observation width (default: 2, the masked Pendulum)")
    p.add_argument("--act_dim", type=int, default=1, help="action width (default: 1)")
    p.add_argument("--agents", type=int, default=1, help="members updated at once (default: 1)")
    p.add_argument("--updates", type=int, default=20, help="updates per timed block (default: 20)")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks per kind (default: 5)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    p.add_argument("--json", type=str, default=None, help="also write the numbers to this file")
    args = p.parse_args(argv)
    for name in ("windows", "seq_len", "seq_hidden", "obs_dim", "act_dim", "agents", "updates", "repeats", "threads"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if not 0 <= args.burn_in < args.seq_len:
        raise UsageError(f"--burn_in {args.burn_in} must be in [0, --seq_len {args.seq_len})")
    if args.encoder not in ENCODERS:
        raise UsageError(f"--encoder {args.encoder!r}: one of {', '.join(ENCODERS)}")
    if args.json is not None and (problem := output_file_problem(args.json)):
        p.error(f"--json {args.json[:60]}: {problem}")
    torch.set_num_threads(args.threads)
    seeds, ones = list(range(args.agents)), [-1.0] * args.act_dim
    recurrent = RecurrentSAC(args.obs_dim, args.act_dim, ones, [1.0] * args.act_dim, seeds, policy_type="Gaussian",
                             seq_encoder=args.encoder, seq_len=args.seq_len, burn_in=args.burn_in,
                             seq_hidden=args.seq_hidden)
    state = recurrent.encoder.state_size
    plain = SAC(recurrent.encoder.features, args.act_dim, ones, [1.0] * args.act_dim, seeds, policy_type="Gaussian")
    seq, flat = batches(args.agents, args.windows, args.seq_len, args.obs_dim, args.act_dim, state,
                        recurrent.encoder.features, args.burn_in)
    timed(recurrent.update, seq, 3)  # warm-up: allocator, first-call costs
    timed(plain.update, flat, 3)
    times = {"recurrent": [], "feed_forward": []}
    for _ in range(args.repeats):
        times["recurrent"].append(timed(recurrent.update, seq, args.updates))
        times["feed_forward"].append(timed(plain.update, flat, args.updates))
    med = {k: statistics.median(v) for k, v in times.items()}
    samples = args.windows * (args.seq_len - args.burn_in)
    out = {"encoder": args.encoder, "windows": args.windows, "seq_len": args.seq_len, "burn_in": args.burn_in,
           "samples": samples, "agents": args.agents, "threads": args.threads,
           "recurrent_ms": 1000 * med["recurrent"], "feed_forward_ms": 1000 * med["feed_forward"],
           "ratio": med["recurrent"] / med["feed_forward"]}
    print(f"{args.encoder}, {args.agents} member(s), {args.windows} windows x {args.seq_len} steps (burn-in "
          f"{args.burn_in}) = {samples} samples: recurrent {out['recurrent_ms']:.1f} ms, feed-forward "
          f"{out['feed_forward_ms']:.1f} ms per update, ratio {out['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
