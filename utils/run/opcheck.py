"""Which aten operators a piece of code runs: how many, and which of them a CUDA graph cannot hold.

Checked on the CPU, so the promise "an update can be captured in a CUDA graph" is tested where CI
runs: ``OpRecorder`` is a ``TorchDispatchMode`` that sees every aten call below the Python API, counts
it, and notes the calls listed in ``CAPTURE_UNSAFE`` (or indexing with a boolean mask). The same counts
are the launch budget of an eager GPU update: each aten call is one or more kernel launches.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten overload packets a captured update must never run, with why. The one place this list lives.
CAPTURE_UNSAFE = {
    "cholesky_inverse": "its batched CUDA kernel (MAGMA's dpotrs) synchronises the stream: capture fails "
                        "with 'operation not permitted when stream is capturing' (seen on an H100)",
    "cholesky_solve": "the same MAGMA batched solve as cholesky_inverse",
    "_linalg_solve_ex": "batched general solves go through MAGMA on CUDA, which may synchronise",
    "linalg_inv_ex": "batched inverses go through the same MAGMA/cuSOLVER paths as a general solve",
    "_local_scalar_dense": ".item(), float(), int() or bool() of a tensor: the host waits for the device, and "
                           "the value read at capture would be frozen into the graph",
    "nonzero": "its output size depends on the data: the host must read it before allocating",
    "masked_select": "output size depends on the data (a hidden nonzero)",
    "_unique2": "output size depends on the data",
    "unique_dim": "output size depends on the data",
    "unique_consecutive": "output size depends on the data",
    "_unique": "output size depends on the data",
    "repeat_interleave": "with a tensor of repeats its output size depends on the data",
}
# indexing with a boolean mask hides a nonzero: x[mask], x[mask] = y
MASK_INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}


def _bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else None
    return isinstance(indices, (list, tuple)) and any(
        isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)


class OpRecorder(TorchDispatchMode):
    """Counts aten calls by overload packet (``add_``, ``baddbmm``, ...) and records capture-unsafe ones."""

    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()
        self.unsafe: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        if name in CAPTURE_UNSAFE:
            self.unsafe.append((str(func), CAPTURE_UNSAFE[name]))
        elif name in MASK_INDEXING and _bool_index(args):
            self.unsafe.append((str(func), "boolean-mask indexing: a hidden nonzero, data-dependent sizes"))
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def optimizers_as_on_cuda(agents) -> None:
    """Replace every optimizer of ``agents`` by the fused Adam a GPU run builds (``algorithms.common.nets.adam``
    with capturable state), same parameters and hyperparameters, fresh state. On the CPU torch's default
    Adam reads its step count with .item(); a GPU run never builds that one, so a capture check on the CPU
    must look at the optimizer the GPU runs."""
    for name, opt in list(vars(agents).items()):
        if not isinstance(opt, torch.optim.Optimizer):
            continue
        groups = [{k: v for k, v in g.items() if k not in ("fused", "capturable", "foreach")}
                  for g in opt.param_groups]
        setattr(agents, name, torch.optim.Adam(groups, fused=True, capturable=True))


def count_ops(fn, *args, **kwargs) -> OpRecorder:
    """Run ``fn`` once under an ``OpRecorder`` and return it."""
    with OpRecorder() as rec:
        fn(*args, **kwargs)
    return rec


def describe(rec: OpRecorder, top: int = 8) -> str:
    most = ", ".join(f"{k} {v}" for k, v in rec.ops.most_common(top))
    return f"{rec.total} aten ops ({most}, ...)"


def unsafe_names(records: Iterable[tuple[str, str]]) -> list[str]:
    return sorted({op for op, _ in records})
