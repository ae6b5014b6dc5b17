"""algorithms/common/optim.py: Adam and RMSprop without torch.optim's torch._dynamo import must step exactly as torch's
foreach optimizers (every bit of every parameter and moment), write torch's state_dict and load it, both ways."""
import copy
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from algorithms.common.nets import adam, rmsprop
from algorithms.common.optim import ForeachAdam, ForeachRMSprop, MemberAdam, RMSpropTF

SHAPES = [(3, 5, 7), (3, 1, 7), (3, 7, 1), (3, 1, 1)]  # stacked weights, biases, a Q head, a scalar per member


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in SHAPES]


def _grads(step: int, params) -> list[torch.Tensor | None]:
    """Gradients of a step; the last parameter has none on odd steps (it is then skipped, state and all)."""
    g = torch.Generator().manual_seed(1000 + step)
    grads = [torch.randn(p.shape, generator=g) * 10 ** float(i - 2) for i, p in enumerate(params)]
    if step % 2:
        grads[-1] = None
    return grads


def _step(opt, params, step: int) -> None:
    for p, g in zip(params, _grads(step, params)):
        p.grad = None if g is None else g.clone()
    opt.step()


def _same_state(a: dict, b: dict) -> None:
    assert a["param_groups"] == b["param_groups"]
    assert list(a["state"]) == list(b["state"])
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for k in a["state"][i]:
            x, y = a["state"][i][k], b["state"][i][k]
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (i, k)


CASES = [
    (lambda ps, **kw: torch.optim.Adam(ps, foreach=True, **kw), ForeachAdam, {"lr": 3e-4}),
    (lambda ps, **kw: torch.optim.Adam(ps, foreach=True, **kw), ForeachAdam,
     {"lr": 1e-3, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 1e-2}),
    (lambda ps, **kw: torch.optim.RMSprop(ps, foreach=True, **kw), ForeachRMSprop,
     {"lr": 7e-4, "alpha": 0.99, "eps": 1e-5}),
    (lambda ps, **kw: torch.optim.RMSprop(ps, foreach=True, **kw), ForeachRMSprop,
     {"lr": 1e-3, "alpha": 0.9, "eps": 1e-8, "weight_decay": 1e-3}),
]


@pytest.mark.parametrize("reference, ours, settings", CASES)
def test_steps_bit_for_bit_as_torch_with_groups_and_missing_gradients(reference, ours, settings):
    ref_params, our_params = _params(0), _params(0)
    ref = reference(ref_params[:2], **settings)
    mine = ours(our_params[:2], **settings)
    for opt, params in ((ref, ref_params), (mine, our_params)):  # a second group, as the recurrent encoders join
        opt.add_param_group({"params": params[2:], "lr": settings["lr"] / 3})
    for t in range(7):
        _step(ref, ref_params, t)
        _step(mine, our_params, t)
        for a, b in zip(ref_params, our_params):
            assert torch.equal(a, b), t
        _same_state(ref.state_dict(), mine.state_dict())
    assert ref_params[0].ne(_params(0)[0]).any()  # the steps moved the parameters


@pytest.mark.parametrize("reference, ours, settings", CASES)
def test_state_dicts_load_both_ways_and_continue_identically(reference, ours, settings):
    """A checkpoint of torch's optimizer resumes in ours and ours in torch's (runs checkpointed before this
    module existed continue exactly)."""
    base_params = _params(1)
    base = reference(base_params, **settings)
    for t in range(3):
        _step(base, base_params, t)
    saved = base.state_dict()
    runs = []
    for first, second in ((reference, ours), (ours, reference)):
        params = [torch.nn.Parameter(p.detach().clone()) for p in base_params]
        opt = first(params, **settings)
        opt.load_state_dict(copy.deepcopy(saved))  # as torch's, a loaded state shares the dict's tensors
        for t in range(3, 5):
            _step(opt, params, t)
        again = second([torch.nn.Parameter(p.detach().clone()) for p in params], **settings)
        params2 = [p for g in again.param_groups for p in g["params"]]
        again.load_state_dict(opt.state_dict())
        for t in range(5, 8):
            _step(again, params2, t)
        runs.append((params2, again.state_dict()))
    (pa, sa), (pb, sb) = runs
    assert all(torch.equal(a, b) for a, b in zip(pa, pb))
    _same_state(sa, sb)


def test_load_converts_to_the_parameters_dtype_keeps_step_and_copies_the_groups():
    """load_state_dict keeps torch's behaviour: tensors already of the parameter's dtype and device are used as
    they are, others converted; the groups are copied (changing the saved dict's lr changes nothing)."""
    params = _params(2)
    opt = ForeachAdam(params, lr=1e-3)
    _step(opt, params, 0)
    saved = opt.state_dict()
    other = ForeachAdam([torch.nn.Parameter(p.detach().double()) for p in params], lr=1e-3)
    other.load_state_dict(saved)
    first = other.param_groups[0]["params"][0]
    assert other.state[first]["exp_avg"].dtype == torch.float64
    assert other.state[first]["step"].dtype == torch.float32
    saved["param_groups"][0]["lr"] = 5.0
    assert other.param_groups[0]["lr"] == 1e-3


def test_refuses_what_it_does_not_implement_and_mismatched_states():
    p = _params(3)
    with pytest.raises(ValueError):
        ForeachAdam(p, amsgrad=True)
    with pytest.raises(ValueError):
        ForeachRMSprop(p, momentum=0.9)
    with pytest.raises(TypeError):
        ForeachAdam(p, nesterov=True)
    with pytest.raises(ValueError):
        ForeachAdam([], lr=1e-3)
    with pytest.raises(ValueError):
        ForeachAdam(p).load_state_dict(ForeachAdam(p[:2]).state_dict())


def test_the_project_builds_these_on_the_cpu():
    params = _params(4)
    assert type(adam(params, lr=1e-3)) is ForeachAdam
    assert type(adam(params, lr=1e-3, fused=True)) is torch.optim.Adam  # asked for explicitly
    assert type(rmsprop(params, lr=1e-3, alpha=0.99, eps=1e-5)) is ForeachRMSprop


def test_a_cpu_training_run_never_imports_torch_dynamo(tmp_path):
    """The point of the module: torch.optim's import of torch._dynamo costs 2-4 s per process; an A2C and a
    DASE_TD3 run, and an agent's checkpoint state written and read back, must not pay it."""
    code = f"""
import sys
import DASE_main, ac_main
from utils.cli import main_guard
from algorithms.replay.td3 import TD3
common = ["--threads", "1", "--quiet", "--eval_episodes", "1"]
assert main_guard(ac_main.run, ["--policy", "A2C", "--env", "CartPole-v1", "--max_time_steps", "240",
    "--eval_freq", "120", "--results_dir", {str(tmp_path / "a")!r}, *common]) == 0
assert main_guard(DASE_main.run, ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--max_time_steps", "200",
    "--start_time_steps", "100", "--eval_freq", "100", "--results_dir", {str(tmp_path / "b")!r}, *common]) == 0
agents = TD3(3, 1, [-2.0], [2.0], [0, 1])
agents.load_state_dict(agents.state_dict())
print("torch._dynamo" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_a_state_saved_without_a_newer_setting_loads_with_this_optimizers_value():
    """torch releases add group settings (decoupled_weight_decay); a checkpoint of an older torch lacks them."""
    params = _params(5)
    opt = ForeachAdam(params, lr=1e-3, weight_decay=1e-2)
    _step(opt, params, 0)
    saved = copy.deepcopy(opt.state_dict())
    del saved["param_groups"][0]["decoupled_weight_decay"]
    other = ForeachAdam([torch.nn.Parameter(p.detach().clone()) for p in params], lr=1e-3)
    other.load_state_dict(saved)
    assert other.param_groups[0]["decoupled_weight_decay"] is False
    assert other.param_groups[0]["weight_decay"] == 1e-2  # the saved settings win where there are some


def _subnormal_states(opts: list, params_per_opt: list) -> None:
    """Give every optimizer the same moments, a third of them float32 subnormals and some exactly zero: the state
    of dead ReLU units' weights after thousands of steps without a gradient."""
    g = torch.Generator().manual_seed(7)
    first = params_per_opt[0]
    moments = []
    for p in first:
        sq = torch.rand(p.shape, generator=g) * 1e-3
        kind = torch.randint(0, 3, p.shape, generator=g)
        sq = torch.where(kind == 0, torch.rand(p.shape, generator=g) * 1.1e-38, sq)  # subnormal (and a few 0)
        sq = torch.where((kind == 1) & (torch.rand(p.shape, generator=g) < 0.3), torch.zeros(()), sq)
        moments.append((torch.randn(p.shape, generator=g) * 1e-3, sq, kind == 0))
    for opt, params in zip(opts, params_per_opt):
        for p, (avg, sq, _) in zip(params, moments):
            opt.state[p]["exp_avg"].copy_(avg)
            opt.state[p]["exp_avg_sq"].copy_(sq)
    return [dead for _, _, dead in moments]


@pytest.mark.parametrize("eps, steps_before", [(1e-8, 1), (1e-8, 5000), (1e-6, 1), (1e-30, 1), (0.0, 3)])
def test_subnormal_second_moments_step_bit_for_bit_as_torch(monkeypatch, eps, steps_before):
    """ForeachAdam lifts subnormal second moments to float32's smallest normal number before the sqrt (the CPU's
    sqrt is several times slower on subnormals); with eps 1e-8 or 1e-6 that changes no bit of any step, even at the
    first step where the bias correction is smallest. With eps 0 or 1e-30 the bound fails and torch's own sqrt
    must be used. Checked against torch.optim.Adam on states full of subnormals, zeros and dead gradients."""
    ref_params, our_params = _params(8), _params(8)
    ref = torch.optim.Adam(ref_params, lr=1e-3, eps=eps, foreach=True)
    mine = ForeachAdam(our_params, lr=1e-3, eps=eps)
    for opt, params in ((ref, ref_params), (mine, our_params)):  # create the states, then overwrite them
        for p in params:
            p.grad = torch.ones_like(p)
        opt.step()
        for p in params:
            opt.state[p]["step"].fill_(float(steps_before))
    dead = _subnormal_states([ref, mine], [ref_params, our_params])
    fast = eps >= 1e-8
    calls = []
    real_sqrt = torch._foreach_sqrt
    monkeypatch.setattr(torch, "_foreach_sqrt", lambda xs: calls.append(1) or real_sqrt(xs))
    for t in range(4):
        grads = _grads(t, ref_params)
        for params in (ref_params, our_params):
            for p, g, d in zip(params, grads, dead):
                p.grad = None if g is None else torch.where(d, torch.zeros(()), g)  # dead units: no gradient
        calls.clear()
        mine.step()
        assert bool(calls) is not fast  # the subnormal-safe path where (and only where) the bound holds
        monkeypatch.setattr(torch, "_foreach_sqrt", real_sqrt)
        ref.step()
        monkeypatch.setattr(torch, "_foreach_sqrt", lambda xs: calls.append(1) or real_sqrt(xs))
        for a, b in zip(ref_params, our_params):
            assert torch.equal(a, b), t
        _same_state(ref.state_dict(), mine.state_dict())
    sq = mine.state[our_params[0]]["exp_avg_sq"]
    assert ((sq > 0) & (sq < torch.finfo(torch.float32).tiny)).any()  # subnormals were still there at the end


def _member_adam_run(masks, settings, seed=0):
    """MemberAdam over stacked parameters stepped under ``masks``, beside one torch.optim.Adam per member that steps
    only when its mask is on (a plain per-member loop: the independent computation)."""
    params = _params(seed)
    ours = MemberAdam(params, **settings)
    n = params[0].shape[0]
    singles = [[torch.nn.Parameter(p.detach()[i].clone()) for p in params] for i in range(n)]
    refs = [torch.optim.Adam(ps, foreach=False, **settings) for ps in singles]
    for step, mask in enumerate(masks):
        grads = [torch.randn(p.shape, generator=torch.Generator().manual_seed(50 + step)) for p in params]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        ours.step(mask=None if mask is None else torch.tensor(mask))
        for i in range(n):
            if mask is None or mask[i]:
                for p, g in zip(singles[i], grads):
                    p.grad = g[i].clone()
                refs[i].step()
    return params, singles, ours, refs


@pytest.mark.parametrize("settings", [{"lr": 1e-4}, {"lr": 3e-3, "betas": (0.8, 0.99), "eps": 1e-6}])
def test_member_adam_moves_each_member_as_its_own_adam_on_its_own_steps(settings):
    masks = [None, [True, False, True], [False, False, True], [True, True, False], None, [False, True, False]]
    params, singles, ours, refs = _member_adam_run(masks, settings)
    for j, p in enumerate(params):
        for i in range(p.shape[0]):
            torch.testing.assert_close(p.detach()[i], singles[i][j].detach(), rtol=1e-5, atol=1e-7)
            st, ref = ours.state[p], refs[i].state[singles[i][j]]
            torch.testing.assert_close(st["exp_avg"][i], ref["exp_avg"], rtol=1e-6, atol=0)
            torch.testing.assert_close(st["exp_avg_sq"][i], ref["exp_avg_sq"], rtol=1e-6, atol=0)
            t = float(ref["step"])
            torch.testing.assert_close(float(st["beta1_power"][i]), settings.get("betas", (0.9, 0.999))[0] ** t,
                                       rtol=1e-6, atol=0)
    # each member stepped 4 times of the 6, on different steps; a member masked out of its first step keeps its
    # initial parameters exactly
    fresh = _params(0)
    _, _, late, _ = _member_adam_run([[False, True, True]], settings)
    assert torch.equal(late.param_groups[0]["params"][0].detach()[0], fresh[0].detach()[0])
    assert not torch.equal(late.param_groups[0]["params"][0].detach()[1], fresh[0].detach()[1])


def test_member_adam_does_not_depend_on_the_other_members_bit_for_bit():
    """A member's bits are the same whether it is stepped alone or stacked with others (seeds in one process)."""
    masks = [None, [True, False, True], [False, True, True], None]
    stacked, _, _, _ = _member_adam_run(masks, {"lr": 1e-3})
    alone = [torch.nn.Parameter(p.detach()[2:3].clone()) for p in _params(0)]
    opt = MemberAdam(alone, lr=1e-3)
    for step, mask in enumerate(masks):
        grads = [torch.randn(p.shape, generator=torch.Generator().manual_seed(50 + step)) for p in stacked]
        for p, g in zip(alone, grads):
            p.grad = g[2:3].clone()
        opt.step(mask=None if mask is None else torch.tensor(mask[2:3]))
    for a, s in zip(alone, stacked):
        assert torch.equal(a.detach(), s.detach()[2:3])


def test_member_adam_state_dict_resumes_exactly():
    masks = [None, [True, False, True], [False, True, False], None, [True, True, False]]
    full, _, _, _ = _member_adam_run(masks, {"lr": 1e-3})
    params = _params(0)
    first = MemberAdam(params, lr=1e-3)
    for step, mask in enumerate(masks):
        grads = [torch.randn(p.shape, generator=torch.Generator().manual_seed(50 + step)) for p in params]
        if step == 2:  # save, rebuild, load: the rest continues as if uninterrupted
            saved = copy.deepcopy(first.state_dict())
            params = [torch.nn.Parameter(p.detach().clone()) for p in params]
            first = MemberAdam(params, lr=1e-3)
            first.load_state_dict(saved)
        for p, g in zip(params, grads):
            p.grad = g.clone()
        first.step(mask=None if mask is None else torch.tensor(mask))
    for a, b in zip(params, full):
        assert torch.equal(a.detach(), b.detach())


def test_rmsprop_tf_is_tensorflows_rmsprop_element_by_element():
    """RMSpropTF against TensorFlow 1's ApplyRMSProp written out per element in float64 (ms from 1; ms <- rho ms +
    (1 - rho) g^2; var <- var - lr g / sqrt(ms + eps)) over steps where a parameter sometimes has no gradient; then
    its state_dict resumes a fresh optimizer exactly. Its first step is about lr g, where torch's is about 10 lr."""
    lr, rho, eps = 7e-4, 0.99, 1e-5
    params = [p.detach().double().requires_grad_() for p in _params(3)]
    opt = RMSpropTF(params, lr=lr, alpha=rho, eps=eps)
    var = [p.detach().clone().flatten().tolist() for p in params]
    ms = [[1.0] * p.numel() for p in params]
    for step in range(6):
        grads = _grads(step, params)
        for p, g in zip(params, grads):
            p.grad = None if g is None else g.double()
        opt.step()
        for i, g in enumerate(grads):
            if g is None:
                continue
            for j, gj in enumerate(g.double().flatten().tolist()):
                ms[i][j] = rho * ms[i][j] + (1 - rho) * gj * gj
                var[i][j] -= lr * gj / (ms[i][j] + eps) ** 0.5
        for p, v in zip(params, var):
            torch.testing.assert_close(p.detach().flatten(), torch.tensor(v, dtype=torch.float64), rtol=1e-12,
                                       atol=1e-15)
    twin = [p.detach().clone().requires_grad_() for p in params]
    resumed = RMSpropTF(twin, lr=lr, alpha=rho, eps=eps)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    for o, ps in ((opt, params), (resumed, twin)):
        for p, g in zip(ps, _grads(6, ps)):
            p.grad = None if g is None else g.double()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(params, twin))
    # the first step's size: TensorFlow's ~ lr |g| (for |g| << 1), torch's ~ lr / sqrt(1 - alpha) = 10 lr
    small = [torch.nn.Parameter(torch.zeros(4)) for _ in range(2)]
    for o in (RMSpropTF([small[0]], lr=lr, alpha=rho, eps=eps), ForeachRMSprop([small[1]], lr=lr, alpha=rho, eps=eps)):
        o.param_groups[0]["params"][0].grad = torch.full((4,), 1e-2)
        o.step()
    g = 1e-2
    tf_first, torch_first = lr * g / (rho + (1 - rho) * g * g + eps) ** 0.5, lr * g / (((1 - rho) * g * g) ** 0.5 + eps)
    assert 0.99 * lr * g < tf_first < 1.01 * lr * g and 9.8 * lr < torch_first < 10 * lr
    torch.testing.assert_close(small[0].detach().abs(), torch.full((4,), tf_first), rtol=1e-5, atol=0)
    torch.testing.assert_close(small[1].detach().abs(), torch.full((4,), torch_first), rtol=1e-5, atol=0)
