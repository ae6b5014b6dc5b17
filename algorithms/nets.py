"""Networks whose every parameter carries a leading agent dimension.

N agents are trained as one batched model: a linear layer holds weights of shape
[N, in, out] and maps inputs [N, B, in] to [N, B, out] with one ``torch.baddbmm``.
Because each agent's loss only touches its own slice, and Adam is element-wise, one
optimizer over the stacked parameters is exactly N independent optimizers.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F


def init_generators(seeds: Sequence[int]) -> list[torch.Generator]:
    """CPU generators for parameter initialisation, one per agent (device independent)."""
    return [torch.Generator().manual_seed(int(s)) for s in seeds]


class AgentRNG:
    """One torch generator per agent, so agent i's random stream does not depend on N."""

    def __init__(self, seeds: Sequence[int], device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.generators = []
        for s in seeds:
            g = torch.Generator(device=self.device)
            g.manual_seed(int(s))
            self.generators.append(g)

    def __len__(self) -> int:
        return len(self.generators)

    def normal(self, *shape: int) -> torch.Tensor:
        """Standard normal draws of shape [N, *shape]."""
        return torch.stack([torch.randn(shape, generator=g, device=self.device) for g in self.generators])

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        """Integers in [0, high) of shape [N, *shape]."""
        return torch.stack(
            [torch.randint(high, shape, generator=g, device=self.device) for g in self.generators]
        )

    def get_state(self) -> list[torch.Tensor]:
        return [g.get_state() for g in self.generators]

    def set_state(self, states: Sequence[torch.Tensor]) -> None:
        for g, s in zip(self.generators, states):
            g.set_state(s)


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


def adam(params, lr: float, **kwargs) -> torch.optim.Optimizer:
    """Adam as one fused kernel per step where this torch supports it for the parameters' device (CPU from
    torch 2.4, CUDA): several times faster than the per-tensor loop, and the same algorithm."""
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True, **kwargs)
    except (RuntimeError, TypeError):
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
