"""N agents stacked in one model and one optimizer == N agents built and trained separately."""
import copy

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from algorithms import DDPG, SAC, TD3, Batch
from algorithms.common.nets import MLP, BatchedLinear, adam, init_generators, minimise
from algorithms.replay.discrete_sac import DiscreteSAC
from algorithms.sharing.weights import batch_weights, dase_weighting

OBS, ACT, B = 5, 2, 64
LOW, HIGH = -np.full(ACT, 2.0), np.full(ACT, 2.0)

CASES = {
    "DDPG": (DDPG, {}),
    "TD3": (TD3, {"hidden": (32, 32)}),
    "SAC-Gaussian": (SAC, {"policy_type": "Gaussian", "hidden_size": 32, "automatic_entropy_tuning": True}),
    "SAC-Deterministic": (SAC, {"policy_type": "Deterministic", "hidden_size": 32}),
    # the paper's code's noise: each member's one draw per call comes from its own stream too
    "SAC-Deterministic-paper-noise": (SAC, {"hidden_size": 32, "deterministic_noise": "paper_code"}),
    # noisy networks: each member's noise comes from its own stream, so stacked members still equal separate ones
    "TD3-noisy": (TD3, {"hidden": (32, 32), "noisy": True}),
    "SAC-Gaussian-noisy": (SAC, {"policy_type": "Gaussian", "hidden_size": 32, "noisy": True}),
}


def random_batch(n: int, gen: torch.Generator, gaussian: bool) -> Batch:
    writer = torch.randint(0, n, (n, B), generator=gen)
    return Batch(
        obs=torch.randn(n, B, OBS, generator=gen),
        action=torch.rand(n, B, ACT, generator=gen) * 4 - 2,
        reward=torch.randn(n, B, 1, generator=gen),
        next_obs=torch.randn(n, B, OBS, generator=gen),
        not_done=(torch.rand(n, B, 1, generator=gen) > 0.1).float(),
        own=writer == torch.arange(n).view(-1, 1),
        behaviour_mean=torch.randn(n, B, ACT, generator=gen) if gaussian else None,
        behaviour_std=torch.rand(n, B, ACT, generator=gen) + 0.3 if gaussian else None,
    )


def agent_slice(batch: Batch, i: int) -> Batch:
    return Batch(*[None if v is None else v[i : i + 1] for v in vars(batch).values()])


def params(agents):
    return {f"{name}.{k}": p.detach() for name, net in agents.networks.items() for k, p in net.named_parameters()}


@pytest.fixture
def default_dtype(request):
    old = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    yield request.param
    torch.set_default_dtype(old)


UPDATES = 6  # TD3's delayed actor update happens 3 times
MAX_LR = 1e-3  # the largest learning rate of any optimizer in CASES (DDPG's critic)


def assert_params_match(ours: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    """float64 shows the two computations are the same math: 1e-9 is generous after a few Adam steps.

    float32: batched and single matrix products sum in different orders, and which order depends on the
    CPU's vector width (AVX2 vs AVX-512), so nothing is exact. Adam divides by sqrt(v): an element whose
    gradients are at rounding level can step in either direction, by up to lr per update, so the bound
    for every element is 2 * lr * updates. A wrong formula moves nearly every element by far more than
    rounding, so the float32 check also asks 99 % of the elements to agree to 1e-5."""
    if dtype == torch.float64:
        torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-9, msg=name)
        return
    diff = (ours - expected).abs()
    assert float(diff.max()) <= 2 * MAX_LR * UPDATES, f"{name}: max difference {float(diff.max()):.3g}"
    close = diff <= 1e-5 + 1e-5 * expected.abs()
    assert float(close.float().mean()) >= 0.99, f"{name}: only {float(close.float().mean()):.1%} of elements agree"


def update(agents, batch: Batch) -> None:
    """One update as the learner runs it (noisy networks draw their noise first)."""
    with agents.update_noise():
        agents.update(batch)


def dase(agents):
    """The agents with DASE's weights (the paper's rule, v = 0.1), as a DASE run's sharing scheme gives them."""
    agents.weighting = dase_weighting(agents, "js", 0.1)
    return agents


@pytest.mark.parametrize("default_dtype", [torch.float64, torch.float32], indirect=True, ids=["float64", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_stacked_agents_equal_separate_agents(case, default_dtype):
    cls, kw = CASES[case]
    n, seeds = 3, [4, 104, 204]
    stacked = dase(cls(OBS, ACT, LOW, HIGH, seeds, "cpu", **kw))
    singles = [dase(cls(OBS, ACT, LOW, HIGH, [s], "cpu", **kw)) for s in seeds]
    for i, single in enumerate(singles):  # same initialisation, slice by slice
        for k, p in params(single).items():
            assert torch.equal(params(stacked)[k][i : i + 1], p), k
    gen = torch.Generator().manual_seed(0)
    gaussian = kw.get("policy_type") == "Gaussian"
    for _ in range(UPDATES):
        batch = random_batch(n, gen, gaussian)
        update(stacked, batch)
        for i, single in enumerate(singles):
            update(single, agent_slice(batch, i))
    moved = False
    for i, single in enumerate(singles):
        for k, p in params(single).items():
            assert_params_match(params(stacked)[k][i : i + 1], p, default_dtype, f"agent {i} {k}")
    for k, p in params(stacked).items():
        fresh = params(cls(OBS, ACT, LOW, HIGH, seeds, "cpu", **kw))[k]
        moved |= not torch.allclose(p, fresh)
    assert moved, "the updates changed nothing"


def random_discrete_batch(n: int, gen: torch.Generator, actions: int) -> Batch:
    """Discrete SAC's batch: action indices as floats [N, B, 1], the behaviour's probabilities [N, B, A]."""
    batch = random_batch(n, gen, False)
    batch.action = torch.randint(0, actions, (n, B, 1), generator=gen).to(batch.obs.dtype)
    batch.behaviour_probs = torch.softmax(2.0 * torch.randn(n, B, actions, generator=gen), -1)
    return batch


@pytest.mark.parametrize("default_dtype", [torch.float64, torch.float32], indirect=True, ids=["float64", "float32"])
@pytest.mark.parametrize("tuning, noisy", [(True, False), (False, False), (True, True)],
                         ids=["tuned", "fixed alpha", "tuned noisy"])
def test_discrete_sac_stacked_agents_equal_separate_agents(tuning, noisy, default_dtype):
    """Discrete SAC with DASE's per-sample categorical weights: members stacked == members built alone."""
    n, seeds, actions = 3, [4, 104, 204], 4
    kw = {"hidden_size": 32, "automatic_entropy_tuning": tuning, "target_entropy_scale": 0.7, "noisy": noisy}
    stacked = dase(DiscreteSAC(OBS, actions, None, None, seeds, "cpu", **kw))
    singles = [dase(DiscreteSAC(OBS, actions, None, None, [s], "cpu", **kw)) for s in seeds]
    for i, single in enumerate(singles):
        for k, p in params(single).items():
            assert torch.equal(params(stacked)[k][i : i + 1], p), k
    gen = torch.Generator().manual_seed(0)
    for _ in range(UPDATES):
        batch = random_discrete_batch(n, gen, actions)
        update(stacked, batch)
        for i, single in enumerate(singles):
            update(single, agent_slice(batch, i))
    for i, single in enumerate(singles):
        for k, p in params(single).items():
            assert_params_match(params(stacked)[k][i : i + 1], p, default_dtype, f"agent {i} {k}")
    fresh = params(DiscreteSAC(OBS, actions, None, None, seeds, "cpu", **kw))
    online = [k for k in fresh if k.startswith(("actor.", "critic."))]
    assert all(not torch.allclose(params(stacked)[k], fresh[k]) for k in online)  # every online layer learned
    assert tuning != torch.allclose(stacked.temperature.log_alpha, fresh["temperature.log_alpha"])


def test_batched_linear_is_n_plain_linear_layers():
    gens = init_generators([1, 2, 3])
    layer = BatchedLinear(4, 6, gens)
    x = torch.randn(3, 10, 4)
    y = layer(x)
    for i in range(3):
        torch.testing.assert_close(y[i], F.linear(x[i], layer.weight[i].T, layer.bias[i, 0]))
    # each agent's initialisation depends on its own seed only
    other = BatchedLinear(4, 6, init_generators([9, 2, 3]))
    assert torch.equal(other.weight[1:], layer.weight[1:]) and not torch.equal(other.weight[0], layer.weight[0])


@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True)
@pytest.mark.parametrize("cls", [TD3, DDPG])
def test_critic_loss_is_the_weighted_td_error(cls, default_dtype):
    """The reported critic loss equals sum_k w_k (TD error_k)^2 / sum_k w_k, computed by hand (float64: the
    formula is checked, not the summation order)."""
    n = 2
    kw = {"policy_noise": 0.0, "hidden": (32, 32)} if cls is TD3 else {}
    agents = dase(cls(OBS, ACT, LOW, HIGH, [0, 100], "cpu", **kw))
    batch = random_batch(n, torch.Generator().manual_seed(5), False)
    with torch.no_grad():
        w = batch_weights(batch.action, agents.actor(batch.obs), batch.own, 0.1, "js")
        next_a = agents.actor_target(batch.next_obs)
        if cls is TD3:
            q1t, q2t = agents.critic_target(batch.next_obs, next_a)
            y = batch.reward + 0.99 * batch.not_done * torch.min(q1t, q2t)
            q1, q2 = agents.critic(batch.obs, batch.action)
            sq = (q1 - y) ** 2 + (q2 - y) ** 2
        else:
            y = batch.reward + 0.99 * batch.not_done * agents.critic_target(batch.next_obs, next_a)
            sq = (agents.critic(batch.obs, batch.action) - y) ** 2
    expected = torch.stack([(w[i] * sq[i]).sum() / w[i].sum() for i in range(n)])
    assert float(w[~batch.own].min()) < 1.0  # the weights really are in play
    info = agents.update(batch)
    torch.testing.assert_close(info["critic_loss"], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # compiling takes tens of seconds on CPU
@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True)
@pytest.mark.parametrize("case", ["TD3", "SAC-Gaussian"])
def test_compiled_networks_equal_eager(case, default_dtype):
    """float64: compiled kernels fuse and reorder arithmetic; in float32 that differs by rounding, which Adam
    can amplify to a full step (see assert_params_match)."""
    cls, kw = CASES[case]
    eager = dase(cls(OBS, ACT, LOW, HIGH, [1, 101], "cpu", **kw))
    compiled = dase(cls(OBS, ACT, LOW, HIGH, [1, 101], "cpu", **kw))
    compiled.compile()
    gen = torch.Generator().manual_seed(2)
    for _ in range(4):
        batch = random_batch(2, gen, kw.get("policy_type") == "Gaussian")
        eager.update(batch)
        compiled.update(batch)
    for k, p in params(compiled).items():
        torch.testing.assert_close(p, params(eager)[k], rtol=1e-9, atol=1e-9)
    obs = torch.randn(2, 3, OBS)
    with torch.no_grad():  # act() feeds float32 observations; the networks here are float64
        torch.testing.assert_close(compiled.actor(obs), eager.actor(obs), rtol=1e-10, atol=1e-12)
    assert set(compiled.agent_state(0)["actor"]) == set(eager.agent_state(0)["actor"])  # same file layout


@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True)
def test_fused_adam_through_minimise_equals_plain_adam(default_dtype):
    """On a GPU our optimizers are fused Adam; minimise feeds it contiguous gradients (the narrow layers'
    gradients come transposed, which fused Adam, at least on the CPU, steps wrongly). float64: the two Adams
    round differently in float32."""
    gens = init_generators([1, 2, 3])
    net = MLP([5, 32, 4], gens)  # the 4-wide head takes the transposed baddbmm path
    ref = copy.deepcopy(net)
    ours, plain = adam(net.parameters(), lr=1e-2, fused=True), torch.optim.Adam(ref.parameters(), lr=1e-2, foreach=False)
    x = torch.randn(3, 16, 5, generator=torch.Generator().manual_seed(0))
    for _ in range(5):
        minimise(ours, net(x).pow(2).sum())
        plain.zero_grad()
        ref(x).pow(2).sum().backward()
        plain.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_cpu_adam_equals_the_per_tensor_loop_bit_for_bit(weight_decay):
    """Our CPU Adam (foreach) takes exactly the steps of torch's per-tensor Adam, so runs made before the switch
    reproduce bit for bit; gradients over many magnitudes, stacked shapes like the networks'."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(2, 3, 256), (2, 1, 256), (2, 256, 256), (2, 256, 1), (2, 1, 1), (20, 17, 64)]
    ours = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in shapes]
    loop = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt = adam(ours, lr=3e-4, weight_decay=weight_decay)
    ref = torch.optim.Adam(loop, lr=3e-4, weight_decay=weight_decay, foreach=False)
    for _ in range(50):
        for a, b in zip(ours, loop):
            g = torch.randn(a.shape, generator=gen) * 10.0 ** float(torch.randint(-8, 2, (1,), generator=gen))
            a.grad, b.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, loop))
