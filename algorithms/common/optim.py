"""Adam and RMSprop for the CPU runs, without torch.optim's start-up cost.

torch.optim's optimizers (torch 2.x) import ``torch._dynamo`` the first time one is built or stepped, for the
``torch.compile`` integration of their methods. That import costs 2-4 s of CPU per process (measured on the 2-core
AMD EPYC machine: 2.5-3.8 s): a sixth of a 100k-step A2C CartPole run and most of a short test run. A CPU run
here never compiles its optimizer, so these two classes do what ``torch.optim.Adam(..., foreach=True)`` and
``torch.optim.RMSprop(..., foreach=True)`` do without it:

- the same ``torch._foreach_*`` element-wise operations in the same order, per parameter group, on the
  parameters that have a gradient (a parameter whose gradient is None is skipped, as torch does), so every
  parameter and moment gets exactly torch's bits (tests/test_optim.py steps both side by side);
- the same ``state_dict`` (state keyed by parameter index, ``step`` a float32 scalar tensor, the same group
  settings), and ``load_state_dict`` takes torch's: a checkpoint written with torch.optim resumes here and the
  other way round.

They subclass ``torch.optim.Optimizer`` (isinstance checks, ``param_groups``, ``state``) but replace every method
of it that imports ``torch._dynamo``. Only the settings the project uses are supported (no amsgrad, maximize,
momentum, centering, capturable or differentiable states); anything else raises at construction. A GPU run keeps
torch's fused, capturable Adam (``algorithms.common.nets.adam``).
"""
from __future__ import annotations

import copy
import math
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch


class _ForeachOptimizer(torch.optim.Optimizer):
    """The parts of ``torch.optim.Optimizer`` the project uses, none of which imports ``torch._dynamo``."""

    DEFAULTS: dict[str, Any] = {}  # every group setting with torch's default, in torch's order
    STATE_KEYS: tuple[str, ...] = ()  # the moments, created like the parameter at its first step
    STATE_INIT = 0.0  # their first value

    def __init__(self, params: Iterable, **settings):  # noqa: D107 (deliberately not Optimizer.__init__)
        unknown = set(settings) - set(self.DEFAULTS)
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected settings {sorted(unknown)}")
        self.defaults = {**self.DEFAULTS, **settings}
        self._check(self.defaults)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                     "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            setattr(self, name, OrderedDict())
        self.state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def _check(self, group: dict) -> None:
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, torch.Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, torch.Tensor) or not p.is_leaf:
                raise ValueError("can only optimize leaf tensors")
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check(group)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()

    def _with_grads(self, group: dict) -> tuple[list[torch.Tensor], list[torch.Tensor], list[dict]]:
        """The group's parameters that have a gradient, their gradients and states (created at the first step)."""
        params, grads, states = [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse or torch.is_complex(p):
                raise RuntimeError(f"{type(self).__name__}: sparse gradients and complex parameters are unsupported")
            state = self.state[p]
            if not state:
                # torch.optim's scalar dtype: float64 under a float64 default, else float32
                scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
                state["step"] = torch.tensor(0.0, dtype=scalar)
                for key in self.STATE_KEYS:
                    state[key] = torch.full_like(p, self.STATE_INIT, memory_format=torch.preserve_format)
            params.append(p)
            grads.append(p.grad)
            states.append(state)
        return params, grads, states

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, states = self._with_grads(group)
            if params:
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)  # exact: whole numbers in a float scalar
                self._update(group, params, grads, states)
        return loss

    def _update(self, group: dict, params: list, grads: list, states: list[dict]) -> None:
        raise NotImplementedError

    # ---- the state, in torch.optim's layout ---------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            start = len(index)
            index.update({id(p): start + i for i, p in enumerate(group["params"]) if id(p) not in index})
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(p)] if isinstance(p, torch.Tensor) else p): v for p, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = copy.deepcopy(state_dict["param_groups"])
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        by_index = {i: p for g, s in zip(self.param_groups, saved) for i, p in zip(s["params"], g["params"])}
        state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k not in by_index:
                state[k] = v
                continue
            p = by_index[k]
            state[p] = {key: (value if key == "step" else
                              value.to(dtype=p.dtype, device=p.device) if p.is_floating_point() else
                              value.to(device=p.device)) if torch.is_tensor(value) else value
                        for key, value in v.items()}
        self.state = state
        # a setting an older torch did not save (decoupled_weight_decay) keeps this optimizer's value
        self.param_groups = [{**g, **s, "params": g["params"]} for g, s in zip(self.param_groups, saved)]
        for group in self.param_groups:
            self._check(group)


_TINY32 = torch.finfo(torch.float32).tiny  # float32's smallest normal number, 2**-126


def _sqrt_second_moments(exp_avg_sqs: list[torch.Tensor], eps: float, bias_correction2_sqrt: float) -> list:
    """``torch._foreach_sqrt(exp_avg_sqs)`` as far as Adam's step can tell, without the CPU's slow subnormal path.

    The second moment of a weight whose gradient has stayed zero (a dead ReLU unit's) decays by beta2 per step
    into float32's subnormal range. The CPU's sqrt takes a slow path there: in a trained 400-300 TD3 of the
    tutorial's runs a quarter of the moments were subnormal, which made that one sqrt 5-8x slower and a quarter
    of the whole run's time. For a moment v below the smallest normal number t, sqrt(v) <= sqrt(t) ~ 1.1e-19,
    and Adam's denominator sqrt(v) / bc2 + eps rounds to eps exactly whenever sqrt(t) / bc2 lies below half of
    eps's last place (eps 1e-8: 4.4e-16, against at most 3.4e-18 at the first step): raising such moments to t
    before the sqrt then changes no bit of any step (tests/test_optim.py checks subnormal states against torch).
    Where the bound does not hold (eps 0 or tiny, a float64 state), torch's own sqrt."""
    if eps > 0 and all(v.dtype == torch.float32 for v in exp_avg_sqs):
        half_place = float(np.spacing(np.float32(eps))) / 2
        if 2 * math.sqrt(_TINY32) / bias_correction2_sqrt < half_place:  # 2x: the float32 roundings on the way
            denom = torch._foreach_clamp_min(exp_avg_sqs, _TINY32)
            torch._foreach_sqrt_(denom)
            return denom
    return torch._foreach_sqrt(exp_avg_sqs)


class ForeachAdam(_ForeachOptimizer):
    """``torch.optim.Adam(params, lr, betas, eps, weight_decay, foreach=True)`` on the CPU, bit for bit."""

    DEFAULTS = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False,
                "maximize": False, "foreach": True, "capturable": False, "differentiable": False, "fused": None,
                "decoupled_weight_decay": False}
    STATE_KEYS = ("exp_avg", "exp_avg_sq")

    def _check(self, group: dict) -> None:
        if group["amsgrad"] or group["maximize"] or group["capturable"] or group["differentiable"] \
                or group["fused"] or group["decoupled_weight_decay"]:
            raise ValueError("ForeachAdam: amsgrad, maximize, capturable, differentiable, fused and decoupled "
                             "weight decay are not supported (use torch.optim.Adam)")
        if not 0.0 <= group["lr"] or not 0.0 <= group["eps"] or not 0.0 <= group["weight_decay"] \
                or not all(0.0 <= b < 1.0 for b in group["betas"]):
            raise ValueError(f"ForeachAdam: invalid settings {group}")

    def _update(self, group: dict, params: list, grads: list, states: list[dict]) -> None:
        # torch.optim.adam._multi_tensor_adam with capturable=False, amsgrad=False, maximize=False, real tensors
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        if weight_decay != 0:
            grads = torch._foreach_add(grads, params, alpha=weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        counts = [s["step"].item() for s in states]
        step_size = [(lr / (1 - beta1 ** t)) * -1 for t in counts]
        bias_correction2_sqrt = [(1 - beta2 ** t) ** 0.5 for t in counts]
        denom = _sqrt_second_moments(exp_avg_sqs, eps, min(bias_correction2_sqrt))
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denom, step_size)


class ForeachRMSprop(_ForeachOptimizer):
    """``torch.optim.RMSprop(params, lr, alpha, eps, weight_decay, foreach=True)`` on the CPU, bit for bit."""

    DEFAULTS = {"lr": 1e-2, "momentum": 0, "alpha": 0.99, "eps": 1e-8, "centered": False, "weight_decay": 0,
                "capturable": False, "foreach": True, "maximize": False, "differentiable": False}
    STATE_KEYS = ("square_avg",)

    def _check(self, group: dict) -> None:
        if group["momentum"] or group["centered"] or group["capturable"] or group["maximize"] \
                or group["differentiable"]:
            raise ValueError("ForeachRMSprop: momentum, centered, capturable, maximize and differentiable are not "
                             "supported (use torch.optim.RMSprop)")
        if not 0.0 <= group["lr"] or not 0.0 <= group["eps"] or not 0.0 <= group["weight_decay"] \
                or not 0.0 <= group["alpha"]:
            raise ValueError(f"ForeachRMSprop: invalid settings {group}")

    def _update(self, group: dict, params: list, grads: list, states: list[dict]) -> None:
        # torch.optim.rmsprop._multi_tensor_rmsprop with momentum 0, centered=False, capturable=False, real tensors
        lr, alpha, eps, weight_decay = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        square_avgs = [s["square_avg"] for s in states]
        if weight_decay != 0:
            grads = torch._foreach_add(grads, params, alpha=weight_decay)
        torch._foreach_mul_(square_avgs, alpha)
        torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
        avg = torch._foreach_sqrt(square_avgs)
        torch._foreach_add_(avg, eps)
        torch._foreach_addcdiv_(params, grads, avg, value=-lr)


class RMSpropTF(_ForeachOptimizer):
    """RMSprop as TensorFlow 1's ``RMSPropOptimizer`` computes it, which OpenAI baselines' A2C and ACER used (and
    Stable-Baselines3 copies as ``RMSpropTFLike`` for the same reason): the square average starts at 1, not 0, and
    eps goes under the square root. Without momentum or centering:

        v <- alpha v + (1 - alpha) g^2,    p <- p - lr g / sqrt(v + eps)        (v = 1 before the first step)

    torch's RMSprop starts v at 0 and adds eps outside the root: its first step is lr g / (sqrt(1 - alpha) |g| + eps),
    about 10 lr per element whatever the gradient's size, where this one's is about lr g. Element-wise, so stacked
    members stay independent; only foreach operations, no host synchronisation, on any device."""

    DEFAULTS = {"lr": 1e-2, "alpha": 0.99, "eps": 1e-10}
    STATE_KEYS = ("square_avg",)
    STATE_INIT = 1.0

    def _check(self, group: dict) -> None:
        if not 0.0 <= group["lr"] or not 0.0 <= group["eps"] or not 0.0 <= group["alpha"] <= 1.0:
            raise ValueError(f"RMSpropTF: invalid settings {group}")

    def _update(self, group: dict, params: list, grads: list, states: list[dict]) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        square_avgs = [s["square_avg"] for s in states]
        torch._foreach_mul_(square_avgs, alpha)
        torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
        root = torch._foreach_add(square_avgs, eps)
        torch._foreach_sqrt_(root)
        torch._foreach_addcdiv_(params, grads, root, value=-lr)


class MemberAdam(_ForeachOptimizer):
    """Adam over stacked parameters (a leading member dimension N) in which every member keeps its own step count,
    so that ``step(mask)`` can move only the members of ``mask`` [N] bool and leave the others exactly as they were:
    their parameters, both moments and their bias corrections. ACER uses it (``--optimizer adam``): a member that
    draws fewer Poisson replay updates than another skips the later ones, and a step count shared by the whole
    tensor would then be wrong for it.

    Per member the update is Adam's (Kingma and Ba; torch.optim.Adam with no weight decay):
    m <- b1 m + (1 - b1) g, v <- b2 v + (1 - b2) g^2, p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    b1^t and b2^t are kept as running products per member (state ``beta1_power``, ``beta2_power`` [N]) rather than
    powers of a step count: multiplication rounds the same way whatever the tensor's length, which keeps a member's
    bits independent of how many members share the tensor (seeds in one process equal seeds alone). They match
    torch's Adam to float32 rounding (tests/test_optim.py steps each member beside its own torch.optim.Adam).
    Only tensor operations, no host synchronisation: safe inside a CUDA graph."""

    DEFAULTS = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8}
    STATE_KEYS = ("exp_avg", "exp_avg_sq")

    def _check(self, group: dict) -> None:
        if not 0.0 < group["lr"] or not 0.0 <= group["eps"] or not all(0.0 <= b < 1.0 for b in group["betas"]):
            raise ValueError(f"MemberAdam: invalid settings {group}")

    @torch.no_grad()
    def step(self, closure=None, mask: torch.Tensor | None = None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        first = self.param_groups[0]["params"][0]
        move = torch.ones(first.shape[0], dtype=torch.bool, device=first.device) if mask is None else \
            mask.to(first.device)  # the members that step (all parameters share the member dimension and device)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                n = p.shape[0]
                if not state:
                    for key in self.STATE_KEYS:
                        state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["beta1_power"] = torch.ones(n, dtype=p.dtype, device=p.device)
                    state["beta2_power"] = torch.ones(n, dtype=p.dtype, device=p.device)
                shape = (n,) + (1,) * (p.dim() - 1)
                g = p.grad
                m = torch.lerp(state["exp_avg"], g, 1 - beta1)
                v = state["exp_avg_sq"] * beta2 + (1 - beta2) * g * g
                b1 = torch.where(move, state["beta1_power"] * beta1, state["beta1_power"])
                b2 = torch.where(move, state["beta2_power"] * beta2, state["beta2_power"])
                # a member that never moved has b1 = 1 and a zero denominator here: where() keeps its old values
                step_size = (lr / (1 - b1)).view(shape)
                denom = v.sqrt() / (1 - b2).sqrt().view(shape) + eps
                keep = ~move.view(shape)
                p.copy_(torch.where(keep, p, p - step_size * m / denom))
                state["exp_avg"].copy_(torch.where(keep, state["exp_avg"], m))
                state["exp_avg_sq"].copy_(torch.where(keep, state["exp_avg_sq"], v))
                state["beta1_power"].copy_(b1)
                state["beta2_power"].copy_(b2)
        return loss
