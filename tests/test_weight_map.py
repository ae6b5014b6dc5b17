"""The weight map's closed forms against the batch-level rule that runs, and --kl_div_var matched."""
import math

import numpy as np
import pytest
import torch

from algorithms import DDPG, SAC, TD3, Batch
from algorithms.replay.sac import DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP
from algorithms.sharing.weights import batch_weights, clipped_normal_variance, dase_weighting
from utils.plot import weight_map


@pytest.mark.parametrize("similarity", ["js", "kl"])
@pytest.mark.parametrize("act_dim,max_action,var", [(2, 1.0, 0.1), (3, 1.0, 0.01), (6, 1.0, 0.1), (4, 2.0, 0.04),
                                                    (17, 0.4, 0.0016)])
@pytest.mark.parametrize("shift,spread", [(0.0, 0.0), (0.1, 0.0), (0.0, 0.2), (0.15, 0.1)])
def test_closed_form_matches_sampled_batches_through_batch_weights(similarity, act_dim, max_action, var, shift, spread):
    """Gaps drawn as the map assumes (N(m M, (sigma^2 + s^2) M^2 I)), weighed by the code that runs: -log w agrees
    with the closed form D to the sampling error of a 100,000-sample covariance fit (well under 3 %)."""
    noise, n = 0.1, 100_000
    gen = torch.Generator().manual_seed(act_dim)
    std = math.sqrt(noise**2 + spread**2) * max_action
    gaps = shift * max_action + std * torch.randn(1, n, act_dim, generator=gen, dtype=torch.float64)
    own = torch.zeros(1, n, dtype=torch.bool)
    w = batch_weights(gaps, torch.zeros_like(gaps), own, var, similarity)
    d_code = -math.log(float(w[0, 0, 0]))
    d_map = float(weight_map.divergence(shift, spread, act_dim, noise, var, max_action, similarity))
    assert d_code == pytest.approx(d_map, rel=0.03, abs=0.02)


def test_agreeing_peer_at_the_papers_setting_is_exp_minus_2025_a():
    for a in (2, 3, 6, 17):
        assert float(weight_map.weight(0.0, 0.0, a, 0.1, 0.1)) == pytest.approx(math.exp(-2.025 * a), rel=1e-12)
        assert float(weight_map.weight(0.0, 0.0, a, 0.1, 0.01)) == pytest.approx(1.0)  # matched
    # the paper's rule peaks where the gaps spread like the reference: s = sqrt(v - sigma^2)
    s = np.linspace(0.0, 0.6, 6001)
    assert s[np.argmax(weight_map.weight(0.0, s, 3, 0.1, 0.1))] == pytest.approx(math.sqrt(0.1 - 0.01), abs=1e-3)


def test_weight_map_cli_writes_the_figure_and_table(tmp_path, capsys):
    assert weight_map.main(["--out", str(tmp_path / "wm"), "--kl_div_var", "0.1", "matched"]) == 0
    assert (tmp_path / "wm" / "weight_map.png").stat().st_size > 10_000
    text = (tmp_path / "wm" / "agreeing_peer.md").read_text()
    assert "| Hopper | 3 | 1.0 | 0.0023 | 1 |" in text
    assert weight_map.main(["--out", str(tmp_path / "x"), "--expl_noise", "0"]) == 2
    assert not (tmp_path / "x").exists()


OBS, B = 4, 8192


def agreeing_peer_weight(cls, kw, noise_fn, act_dim: int, max_action: float) -> float:
    """Agent 1 copies agent 0's actor; half of agent 0's batch is agent 1's exploration around the same policy."""
    low, high = -np.full(act_dim, max_action), np.full(act_dim, max_action)
    kw = dict(kw)
    kl_div_var = kw.pop("kl_div_var")
    agents = cls(OBS, act_dim, low, high, [0, 100], "cpu", **kw)
    agents.weighting = dase_weighting(agents, "js", kl_div_var)
    with torch.no_grad():
        for p in agents.actor.parameters():
            p[1].copy_(p[0])
        for p in agents.actor.parameters():  # small weights: actions well inside the bounds (no clipping)
            p.mul_(0.1)
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(2, B, OBS, generator=gen)
    with torch.no_grad():
        pi = agents.actor(obs)
    actions = pi + noise_fn(torch.randn(2, B, act_dim, generator=gen)) * max_action
    own = torch.zeros(2, B, dtype=torch.bool)
    own[:, : B // 2] = True
    batch = Batch(obs, actions, torch.zeros(2, B, 1), obs, torch.ones(2, B, 1), own)
    w = agents.weights(batch)
    assert torch.all(w[own] == 1.0)
    return float(w[0, B - 1, 0])


CASES = {
    "TD3": (TD3, {"hidden": (16, 16)}, lambda z: 0.1 * z),
    "DDPG": (DDPG, {}, lambda z: 0.1 * z),
    "SAC-Deterministic": (SAC, {"hidden_size": 16},
                          lambda z: (DETERMINISTIC_NOISE * z).clamp(-DETERMINISTIC_NOISE_CLIP, DETERMINISTIC_NOISE_CLIP)),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("act_dim,max_action", [(2, 1.0), (3, 2.0)])
def test_matched_gives_an_identical_peer_weight_one(case, act_dim, max_action):
    cls, kw, noise = CASES[case]
    matched = agreeing_peer_weight(cls, {**kw, "kl_div_var": "matched"}, noise, act_dim, max_action)
    paper = agreeing_peer_weight(cls, {**kw, "kl_div_var": 0.1}, noise, act_dim, max_action)
    assert matched == pytest.approx(1.0, abs=0.01)
    sigma = 0.1 if case != "SAC-Deterministic" else math.sqrt(
        clipped_normal_variance(DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP))
    expected = float(weight_map.weight(0.0, 0.0, act_dim, sigma, 0.1, max_action))
    assert paper == pytest.approx(expected, rel=0.05)
    if max_action == 1.0 and case != "SAC-Deterministic":
        assert expected == pytest.approx(math.exp(-2.025 * act_dim))


def test_matched_variance_is_the_noise_variance_per_dimension():
    low, high = np.array([-1.0, -3.0]), np.array([1.0, 3.0])
    td3 = TD3(OBS, 2, low, high, [0], "cpu", hidden=(8, 8), expl_noise=0.2)
    torch.testing.assert_close(dase_weighting(td3, "js", "matched").var,
                               torch.tensor([0.04, 0.36], dtype=torch.float64))
    sac = SAC(OBS, 2, low, high, [0], "cpu", hidden_size=8)
    v = clipped_normal_variance(DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP)
    torch.testing.assert_close(dase_weighting(sac, "js", "matched").var, torch.tensor([v, 9 * v], dtype=torch.float64))
    samples = np.clip(np.random.default_rng(0).normal(0, 0.1, 2_000_000), -0.25, 0.25)
    assert v == pytest.approx(samples.var(), rel=0.01) and v < 0.01
    assert dase_weighting(td3, "js", 0.1).var == 0.1
    gaussian = SAC(OBS, 2, low, high, [0], "cpu", policy_type="Gaussian")
    with pytest.raises(ValueError, match="Gaussian"):
        dase_weighting(gaussian, "js", "matched")


@pytest.mark.parametrize("kl_div_vars", [[0.1, "matched"], [0.1], [0.05, 0.1, "matched"]])
def test_weight_map_texts_stay_inside_their_panels_and_titles_do_not_touch(kl_div_vars):
    """Drawn, not just written: every note lies inside its panel, and no two panel titles overlap."""
    import matplotlib.pyplot as plt

    fig = weight_map.figure(kl_div_vars, 0.1, "js")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = []
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for text in ax.texts:
            t = text.get_window_extent(renderer)
            assert box.x0 <= t.x0 and t.x1 <= box.x1 and box.y0 <= t.y0 and t.y1 <= box.y1, text.get_text()
        titles.append(ax.title.get_window_extent(renderer))
    for i, a in enumerate(titles):
        for b in titles[i + 1:]:
            assert not a.overlaps(b), "two panel titles touch"
    plt.close(fig)
