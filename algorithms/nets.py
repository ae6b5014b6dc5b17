"""Networks whose every parameter carries a leading agent dimension.

N agents are trained as one batched model: a linear layer holds weights of shape
[N, in, out] and maps inputs [N, B, in] to [N, B, out] with one ``torch.baddbmm``.
Because each agent's loss only touches its own slice, and Adam is element-wise, one
optimizer over the stacked parameters is exactly N independent optimizers.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def init_generators(seeds: Sequence[int]) -> list[torch.Generator]:
    """CPU generators for parameter initialisation, one per agent (device independent)."""
    return [torch.Generator().manual_seed(int(s)) for s in seeds]


MASK32 = 0xFFFFFFFF


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (Wellons' "lowbias32") on int64 tensors holding values below 2**32."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK32  # only the low 32 bits of the product matter, so int64 wrap-around is harmless
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


class AgentRNG:
    """Counter-based random numbers with one stream per agent: draw k of agent m hashes (m's key, m's call
    counter, k). Every call draws for all agents at once with a few element-wise tensor operations, on any
    device, with no host synchronisation and nothing a CUDA graph cannot capture; the counters are tensors
    advanced in place. Agent m's numbers depend only on its seed and the calls made, not on how many agents
    are drawn with it, and integers and uniforms are bit-identical on every device."""

    def __init__(self, seeds: Sequence[int], device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        keys = [np.random.SeedSequence(int(s)).generate_state(2) for s in seeds]
        self.key = torch.as_tensor(np.asarray(keys, dtype=np.int64), device=self.device)  # [N, 2], < 2**32
        self.counter = torch.zeros(len(keys), dtype=torch.int64, device=self.device)

    def __len__(self) -> int:
        return self.key.shape[0]

    def bits(self, *shape: int) -> torch.Tensor:
        """Uniform 32-bit integers (as int64) of shape [N, *shape]; advances every agent's counter by one."""
        k = torch.arange(math.prod(shape), dtype=torch.int64, device=self.device).view(1, *shape)
        expand = (-1,) + (1,) * len(shape)
        key0, key1 = self.key[:, 0].view(expand), self.key[:, 1].view(expand)
        low, high = (self.counter & MASK32).view(expand), (self.counter >> 32).view(expand)
        h = mix32((k * 0x9E3779B9 + key0) & MASK32)
        h = mix32(h ^ low)
        h = mix32((h + key1) & MASK32)
        h = mix32(h ^ high)
        self.counter += 1
        return h

    def uniform(self, *shape: int) -> torch.Tensor:
        """Floats in [0, 1) with 24 random bits, [N, *shape]."""
        return (self.bits(*shape) >> 8).to(torch.float32) * 2.0**-24

    def normal(self, *shape: int) -> torch.Tensor:
        """Standard normal draws of shape [N, *shape] (Box-Muller on two uniforms)."""
        b = self.bits(2, *shape)
        u1 = ((b[:, 0] >> 8) + 1).to(torch.float32) * 2.0**-24  # (0, 1]: the log stays finite
        u2 = (b[:, 1] >> 8).to(torch.float32) * 2.0**-24
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos((2.0 * math.pi) * u2)

    def randint(self, high: int | torch.Tensor, *shape: int) -> torch.Tensor:
        """Integers in [0, high) of shape [N, *shape]; ``high`` may be a tensor (a buffer's size on the device).
        The modulo bias is below high / 2**32 (under 0.03 % for a buffer of 1e6)."""
        return self.bits(*shape) % high

    def get_state(self) -> list[torch.Tensor]:
        """Per agent: (key0, key1, counter) as a CPU int64 tensor."""
        return list(torch.cat([self.key, self.counter.unsqueeze(1)], dim=1).cpu().unbind(0))

    def set_state(self, states: Sequence[torch.Tensor]) -> None:
        state = torch.stack([torch.as_tensor(s, dtype=torch.int64) for s in states]).to(self.device)
        if state.shape != (len(self), 3):
            raise ValueError(f"random state of shape {tuple(state.shape)}, expected ({len(self)}, 3)")
        self.key.copy_(state[:, :2])
        self.counter.copy_(state[:, 2])


class BatchedLinear(nn.Module):
    """N independent linear layers applied at once: [N, B, in] -> [N, B, out]."""

    def __init__(self, fan_in: int, fan_out: int, gens: Sequence[torch.Generator], init: str = "torch"):
        super().__init__()
        n = len(gens)
        self.weight = nn.Parameter(torch.empty(n, fan_in, fan_out))
        self.bias = nn.Parameter(torch.empty(n, 1, fan_out))
        with torch.no_grad():
            for i, g in enumerate(gens):
                if init == "torch":  # the default of nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for W and b
                    bound = 1.0 / math.sqrt(fan_in)
                    self.weight[i].uniform_(-bound, bound, generator=g)
                    self.bias[i].uniform_(-bound, bound, generator=g)
                elif init == "xavier":  # Glorot uniform weights, zero bias
                    bound = math.sqrt(6.0 / (fan_in + fan_out))
                    self.weight[i].uniform_(-bound, bound, generator=g)
                    self.bias[i].zero_()
                else:
                    raise ValueError(f"unknown init {init!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.weight.shape[-1]
        # batched matrix-vector products are slow through bmm on CPU (measured: 2.5x for a Q head)
        if out == 1:
            return (x * self.weight.transpose(1, 2)).sum(-1, keepdim=True) + self.bias
        if out <= 16:  # narrow outputs (action heads) run faster as W^T x^T
            return torch.baddbmm(self.bias.transpose(1, 2), self.weight.transpose(1, 2), x.transpose(1, 2)).transpose(1, 2)
        return torch.baddbmm(self.bias, x, self.weight)


class MLP(nn.Module):
    """Stacked ReLU multilayer perceptron: sizes = (in, hidden..., out), no output activation."""

    def __init__(self, sizes: Sequence[int], gens: Sequence[torch.Generator], init: str = "torch"):
        super().__init__()
        self.layers = nn.ModuleList(
            BatchedLinear(a, b, gens, init) for a, b in zip(sizes[:-1], sizes[1:])
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = F.relu(layer(x), inplace=True)  # baddbmm's backward does not need its output
        return self.layers[-1](x)


class DeterministicActor(nn.Module):
    """a = tanh(MLP(s)) scaled to the action bounds (max_action for symmetric bounds)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int], gens, low, high, init: str = "torch"):
        super().__init__()
        self.net = MLP([obs_dim, *hidden, act_dim], gens, init)
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("offset", (high + low) / 2)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * self.scale + self.offset


class QNetwork(nn.Module):
    """Q(s, a) = MLP([s, a]) for N agents."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int], gens, init: str = "torch"):
        super().__init__()
        self.net = MLP([obs_dim + act_dim, *hidden, 1], gens, init)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1))


def weighted_mean(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per-agent weighted mean over the batch: x, w [N, B, 1] -> [N]."""
    return (w * x).sum(dim=(1, 2)) / w.sum(dim=(1, 2)).clamp_min(1e-12)


def adam(params, lr: float, fused: bool | None = None, **kwargs) -> torch.optim.Optimizer:
    """Adam over stacked parameters. On a GPU: one fused kernel per step, capturable by CUDA graphs. On the
    CPU by default the per-tensor loop: fused Adam there splits each tensor into chunks that depend on its size,
    so a member's last bits would depend on how many members share the tensor (seeds in one process must equal
    seeds alone, bit for bit)."""
    params = list(params)
    cuda = bool(params) and params[0].is_cuda
    if fused is None:
        fused = cuda
    if fused:
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=cuda, **kwargs)
    return torch.optim.Adam(params, lr=lr, **kwargs)


def minimise(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One optimizer step on ``loss``, differentiating only the optimizer's own parameters
    (an actor loss then costs no weight gradients of the critic it flows through). Parameters the
    loss does not use (a Gaussian actor's log-std head in DPD's distillation) are left alone."""
    params = [p for group in opt.param_groups for p in group["params"]]
    for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True)):
        # fused Adam (torch 2.13, CPU) silently mis-steps strided gradients, e.g. narrow layers' transposed ones
        p.grad = g if g is None else g.contiguous()
    opt.step()


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, for all agents in one fused call."""
    torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), tau)


def freeze(module: nn.Module) -> nn.Module:
    """Target networks are never trained directly."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module
