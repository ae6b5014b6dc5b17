"""Networks whose every parameter carries a leading agent dimension.

N agents are trained as one batched model: a linear layer holds weights of shape
[N, in, out] and maps inputs [N, B, in] to [N, B, out] with one ``torch.baddbmm``.
Because each agent's loss only touches its own slice, and Adam is element-wise, one
optimizer over the stacked parameters is exactly N independent optimizers.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

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

    # a block of calls hashed at once holds at most this many numbers (int64 or float32 each)
    BLOCK_NUMBERS = 1 << 20
    MAX_BLOCK_CALLS = 256

    def __init__(self, seeds: Sequence[int], device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        keys = [np.random.SeedSequence(int(s)).generate_state(2) for s in seeds]
        self.key = torch.as_tensor(np.asarray(keys, dtype=np.int64), device=self.device)  # [N, 2], < 2**32
        self.counter = torch.zeros(len(keys), dtype=torch.int64, device=self.device)
        # Blocks: the hashing (the integer part, exact on every device and for every size) of the next calls of
        # one kind and shape, done at once; each call then only picks its slice (see ``_block``). Off while a
        # CUDA graph is captured: a slice index is a Python number, which a graph would freeze.
        self.blocks = True
        # Calls since construction or the last ``set_state``: every call advances every counter by one, so call i
        # hashes (counter at that time) + i, and a block made at call s holds calls s .. s + K - 1 whatever kinds
        # are drawn in between. Per (kind, shape): (s, tensors [K, N, ...] per output).
        self._calls = 0
        self._blocks: dict[tuple, tuple[int, tuple[torch.Tensor, ...]]] = {}

    def __len__(self) -> int:
        return self.key.shape[0]

    def _hash(self, shape: tuple[int, ...], calls: int | None) -> torch.Tensor:
        """Uniform 32-bit integers for the next call ([N, *shape]) or the next ``calls`` calls ([calls, N, *shape]),
        call j hashed with counter + j; advances nothing."""
        lead = () if calls is None else (calls,)
        k = torch.arange(math.prod(shape), dtype=torch.int64, device=self.device).view(*(1,) * len(lead), 1, *shape)
        expand = (*(1,) * len(lead), -1) + (1,) * len(shape)
        key0, key1 = self.key[:, 0].view(expand), self.key[:, 1].view(expand)
        counter = self.counter if calls is None else \
            self.counter + torch.arange(calls, dtype=torch.int64, device=self.device).view(-1, 1)
        low, high = (counter & MASK32).view(*lead, *expand[len(lead):]), (counter >> 32).view(*lead, *expand[len(lead):])
        h = mix32((k * 0x9E3779B9 + key0) & MASK32)
        h = mix32(h ^ low)
        h = mix32((h + key1) & MASK32)
        return mix32(h ^ high)

    def bits(self, *shape: int) -> torch.Tensor:
        """Uniform 32-bit integers (as int64) of shape [N, *shape]; advances every agent's counter by one."""
        h = self._hash(shape, None)
        self._advance()
        return h

    def _advance(self) -> None:
        self.counter += 1
        self._calls += 1

    def _block(self, kind: str, shape: tuple[int, ...], make) -> tuple[torch.Tensor, ...]:
        """This call's slices of a block of calls: ``make(bits [K, N, *shape]) -> tensors [K, N, ...]``, hashed
        for K consecutive counters at once and sliced by the call's offset, so each call returns what ``bits`` then
        ``make`` on [N, ...] would. Every call still advances the counter by one (so states, checkpoints and the
        unblocked path agree). Calls of other kinds or shapes in between only skip entries (their counters), so
        streams that mix kinds keep their blocks; a block is replaced once the calls pass its end, and all are
        dropped on ``set_state``."""
        i, key = self._calls, (kind, shape)
        entry = self._blocks.get(key)
        if entry is None or i >= entry[0] + entry[1][0].shape[0]:
            for k in [k for k, (start, t) in self._blocks.items() if i >= start + t[0].shape[0]]:
                del self._blocks[k]  # used up: their memory goes back
            per_call = len(self) * max(1, math.prod(shape))
            calls = max(1, min(self.MAX_BLOCK_CALLS, self.BLOCK_NUMBERS // per_call))
            entry = self._blocks[key] = (i, make(self._hash(shape, calls)))
        self._advance()
        return tuple(t[i - entry[0]] for t in entry[1])  # [K, ...] contiguous: each slice is, as the eager result

    def uniform(self, *shape: int) -> torch.Tensor:
        """Floats in [0, 1) with 24 random bits, [N, *shape] (exact in float32, so a block gives the same)."""
        if self.blocks:
            return self._block("uniform", shape, lambda b: (_uniform24(b),))[0]
        return _uniform24(self.bits(*shape))

    def normal(self, *shape: int) -> torch.Tensor:
        """Standard normal draws of shape [N, *shape] (Box-Muller on two uniforms).

        The uniforms are exact (24-bit integers times 2**-24), so computing them for a block of calls gives the
        same numbers; log, sqrt and cos run per call on a contiguous [N, *shape] tensor, as without blocks (their
        vectorised and scalar code paths may round differently, and which one runs depends on the size)."""
        if self.blocks:
            u1, u2 = self._block("normal", (2, *shape), _uniform_pair)
        else:
            u1, u2 = _uniform_pair(self.bits(2, *shape), lead=1)
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos((2.0 * math.pi) * u2)

    def randint(self, high: int | torch.Tensor, *shape: int) -> torch.Tensor:
        """Integers in [0, high) of shape [N, *shape]; ``high`` may be a tensor (a buffer's size on the device).
        The modulo bias is below high / 2**32 (under 0.03 % for a buffer of 1e6)."""
        if self.blocks:
            return self._block("bits", shape, lambda b: (b,))[0] % high
        return self.bits(*shape) % high

    def get_state(self) -> list[torch.Tensor]:
        """Per agent: (key0, key1, counter) as a CPU int64 tensor."""
        return list(torch.cat([self.key, self.counter.unsqueeze(1)], dim=1).cpu().unbind(0))

    def set_state(self, states: Sequence[torch.Tensor]) -> None:
        self._calls, self._blocks = 0, {}
        state = torch.stack([torch.as_tensor(s, dtype=torch.int64) for s in states]).to(self.device)
        if state.shape != (len(self), 3):
            raise ValueError(f"random state of shape {tuple(state.shape)}, expected ({len(self)}, 3)")
        self.key.copy_(state[:, :2])
        self.counter.copy_(state[:, 2])


def _uniform24(b: torch.Tensor) -> torch.Tensor:
    """Floats in [0, 1) from 32-bit integers: their top 24 bits times 2**-24, exact in float32."""
    return (b >> 8).to(torch.float32) * 2.0**-24


def _uniform_pair(b: torch.Tensor, lead: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Box-Muller's two uniforms from bits [..., 2, *shape] with ``lead`` leading dims: u1 in (0, 1] (its log
    stays finite), u2 in [0, 1), each exact in float32."""
    first, second = b.select(lead, 0), b.select(lead, 1)
    u1 = ((first >> 8) + 1).to(torch.float32) * 2.0**-24
    u2 = _uniform24(second)
    return u1, u2


class BatchedLinear(nn.Module):
    """N independent linear layers applied at once: [N, B, in] -> [N, B, out]."""

    def __init__(self, fan_in: int, fan_out: int, gens: Sequence[torch.Generator], init: str = "torch",
                 gain: float = 1.0):
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
                elif init == "orthogonal":  # an orthogonal [out, in] matrix times ``gain``, zero bias (SEAC's)
                    w = torch.empty(fan_out, fan_in)
                    torch.nn.init.orthogonal_(w, gain=gain, generator=g)
                    self.weight[i].copy_(w.t())
                    self.bias[i].zero_()
                elif init == "xavier":  # Glorot uniform weights, zero bias
                    bound = math.sqrt(6.0 / (fan_in + fan_out))
                    self.weight[i].uniform_(-bound, bound, generator=g)
                    self.bias[i].zero_()
                else:
                    raise ValueError(f"unknown init {init!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return affine(x, self.weight, self.bias)


def affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x [N, B, in] @ weight [N, in, out] + bias [N, 1, out], each member's rows computed as if it were alone."""
    out = weight.shape[-1]
    # batched matrix-vector products are slow through bmm on CPU (measured: 2.5x for a Q head)
    if out == 1:
        return (x * weight.transpose(1, 2)).sum(-1, keepdim=True) + bias
    if out <= 16:  # narrow outputs (action heads) run faster as W^T x^T
        bias, weight, xt = bias.transpose(1, 2), weight.transpose(1, 2), x.transpose(1, 2)
        if x.shape[0] == 1 and x.shape[1] == 1:
            # one member, one row (a lone agent's exploration step): torch computes a batch of one matrix-vector
            # product otherwise than a batch of several, in the last bits; a batch of two views of it gives the
            # bits every member gets in a batched model, so a seed alone equals the seed batched with others
            two = lambda t: t.expand(2, -1, -1)  # noqa: E731
            return torch.baddbmm(two(bias), two(weight), two(xt))[:1].transpose(1, 2)
        return torch.baddbmm(bias, weight, xt).transpose(1, 2)
    return torch.baddbmm(bias, x, weight)


class NoisyBatchedLinear(BatchedLinear):
    """A factorised-Gaussian noisy linear layer (Fortunato et al. 2018, "Noisy Networks for Exploration") for N
    members: y = x (mu_W + sigma_W * f(e_in) f(e_out)^T) + mu_b + sigma_b * f(e_out), f(e) = sign(e) sqrt(|e|),
    e_in ~ N(0, I_in), e_out ~ N(0, I_out) per member. mu is the plain layer's ``weight`` and ``bias`` (initialised
    as it would be); sigma starts at sigma0 / sqrt(in) for weights and biases alike (the paper's factorised choice,
    sigma0 = 0.5). The noise is set by ``draw_noise`` before a use and removed by ``clear_noise`` after it; without
    noise (evaluation, or anything that drew none) the layer is its mean. The noisy part is computed as
    ((x * f(e_in)) sigma_W + sigma_b) * f(e_out), which equals the formula without forming an [N, in, out] noise."""

    def __init__(self, layer: BatchedLinear, sigma0: float):
        nn.Module.__init__(self)
        n, fan_in, fan_out = layer.weight.shape
        self.weight, self.bias = layer.weight, layer.bias
        self.weight_sigma = nn.Parameter(torch.full((n, fan_in, fan_out), sigma0 / math.sqrt(fan_in),
                                                    dtype=layer.weight.dtype, device=layer.weight.device))
        self.bias_sigma = nn.Parameter(torch.full((n, 1, fan_out), sigma0 / math.sqrt(fan_in),
                                                  dtype=layer.bias.dtype, device=layer.bias.device))
        self.noise: tuple[torch.Tensor, torch.Tensor] | None = None  # f(e_in) [N, 1, in], f(e_out) [N, 1, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = affine(x, self.weight, self.bias)
        if self.noise is None:
            return mean
        f_in, f_out = self.noise
        return mean + affine(x * f_in, self.weight_sigma, self.bias_sigma) * f_out


def make_noisy(module: nn.Module, sigma0: float) -> nn.Module:
    """Every ``BatchedLinear`` of ``module`` becomes a ``NoisyBatchedLinear`` over the same mean parameters."""
    for name, child in list(module.named_children()):
        if type(child) is BatchedLinear:
            setattr(module, name, NoisyBatchedLinear(child, sigma0))
        else:
            make_noisy(child, sigma0)
    return module


def noisy_layers(module: nn.Module) -> list[NoisyBatchedLinear]:
    return [m for m in module.modules() if isinstance(m, NoisyBatchedLinear)]


def scaled_noise(e: torch.Tensor) -> torch.Tensor:
    """f(e) = sign(e) sqrt(|e|), the factorised noise's scaling."""
    return torch.sign(e) * torch.sqrt(torch.abs(e))


def draw_noise(module: nn.Module, rng: AgentRNG) -> None:
    """New noise for every noisy layer of ``module``: one draw of all their (in + out) normals from ``rng``, split
    in the order of ``module.modules()`` (per layer: e_in, then e_out)."""
    layers = noisy_layers(module)
    if not layers:
        return
    sizes = [s for layer in layers for s in layer.weight.shape[1:]]
    parts = scaled_noise(rng.normal(sum(sizes))).split(sizes, dim=-1)
    for j, layer in enumerate(layers):
        layer.noise = (parts[2 * j].unsqueeze(1), parts[2 * j + 1].unsqueeze(1))


def clear_noise(module: nn.Module) -> None:
    for layer in noisy_layers(module):
        layer.noise = None


class MLP(nn.Module):
    """Stacked multilayer perceptron (ReLU, or tanh as SB3's actor-critics): sizes = (in, hidden..., out), no output
    activation."""

    def __init__(self, sizes: Sequence[int], gens: Sequence[torch.Generator], init: str = "torch",
                 activation: str = "relu", out_gain: float = 1.0):
        super().__init__()  # init "orthogonal": hidden layers with the activation's gain, the last with ``out_gain``
        hidden_gain = nn.init.calculate_gain(activation)
        last = len(sizes) - 2
        self.layers = nn.ModuleList(
            BatchedLinear(a, b, gens, init, gain=out_gain if j == last else hidden_gain)
            for j, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
        )
        if activation not in ("relu", "tanh"):
            raise ValueError(f"unknown activation {activation!r}")
        self.tanh = activation == "tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (not ``self.layers[:-1]``: slicing a ModuleList builds a new one, several % of a small on-policy run)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:  # baddbmm's backward does not need its output, so ReLU may overwrite it
                x = torch.tanh(x) if self.tanh else F.relu(x, inplace=True)
        return x


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


class EnsembleQ(nn.Module):
    """``n`` independent Q networks ``q1`` .. ``qn``, built in that order; 2 are TD3's and SAC's twin critics, whose
    targets take their minimum (``ensemble_min``)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden, gens, init: str = "torch", n: int = 2):
        super().__init__()
        self.n = int(n)
        for j in range(self.n):
            setattr(self, f"q{j + 1}", QNetwork(obs_dim, act_dim, hidden, gens, init))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(getattr(self, f"q{j + 1}")(obs, action) for j in range(self.n))


def ensemble_min(qs: Sequence[torch.Tensor], pick: torch.Tensor | None = None) -> torch.Tensor:
    """The minimum over critics' values ([N, B, 1] each): over all of them (``pick`` None), or per agent over the
    ones ``pick`` [N, n] (bool) marks, REDQ's subset."""
    if pick is None:
        out = qs[0]
        for q in qs[1:]:
            out = torch.min(out, q)
        return out
    stacked = torch.stack(tuple(qs))  # [n, N, B, 1]
    keep = pick.t().reshape(len(qs), -1, 1, 1)
    return torch.where(keep, stacked, torch.full_like(stacked, float("inf"))).amin(0)


def ensemble_subset(rng: AgentRNG, n: int, m: int) -> torch.Tensor | None:
    """Per agent, ``m`` of the ``n`` critics drawn uniformly without replacement from its stream ([N, n] bool); None
    (and nothing drawn) when ``m`` is ``n``."""
    if m >= n:
        return None
    ranks = rng.uniform(n).argsort(-1).argsort(-1)
    return ranks < m


def squared_errors(qs: Sequence[torch.Tensor], target: torch.Tensor) -> torch.Tensor:
    """sum_j (Q_j - target)^2, [N, B, 1]."""
    out = (qs[0] - target).pow(2)
    for q in qs[1:]:
        out = out + (q - target).pow(2)
    return out


def weighted_mean(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per-agent weighted mean over the batch: x, w [N, B, 1] -> [N]."""
    return (w * x).sum(dim=(1, 2)) / w.sum(dim=(1, 2)).clamp_min(1e-12)


def adam(params, lr: float, fused: bool | None = None, **kwargs) -> torch.optim.Optimizer:
    """Adam over stacked parameters. On a GPU: one fused kernel per step, capturable by CUDA graphs. On the
    CPU by default the multi-tensor (foreach) Adam: the same element-wise operations as torch's per-tensor loop,
    in the same order, so the same bits (checked in tests/test_batched_update.py), from one call per operation
    instead of one per tensor. Not fused Adam there: it splits each tensor into chunks that depend on its size,
    so a member's last bits would depend on how many members share the tensor (seeds in one process must equal
    seeds alone, bit for bit)."""
    params = list(params)
    cuda = bool(params) and params[0].is_cuda
    if fused is None:
        fused = cuda
    if fused:
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=cuda, **kwargs)
    if not cuda:  # the same bits and state as torch's foreach Adam, without its 2-4 s import (algorithms/common/optim.py)
        from .optim import ForeachAdam
        return ForeachAdam(params, lr=lr, **kwargs)
    return torch.optim.Adam(params, lr=lr, foreach=True, **kwargs)


def rmsprop(params, lr: float, alpha: float, eps: float, tf_like: bool = False) -> torch.optim.Optimizer:
    """RMSprop over stacked parameters, foreach (not fused): the same element-wise operations whatever the number
    of members. On the CPU without torch.optim's import cost (algorithms/common/optim.py), the same bits. ``tf_like``:
    TensorFlow 1's RMSprop (square average from 1, eps under the root: ``algorithms.common.optim.RMSpropTF``)."""
    params = list(params)
    if tf_like:
        from .optim import RMSpropTF
        return RMSpropTF(params, lr=lr, alpha=alpha, eps=eps)
    if params and params[0].is_cuda:
        return torch.optim.RMSprop(params, lr=lr, alpha=alpha, eps=eps, foreach=True)
    from .optim import ForeachRMSprop
    return ForeachRMSprop(params, lr=lr, alpha=alpha, eps=eps)


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
