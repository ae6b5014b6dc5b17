"""SAC's --deterministic_noise paper_code: the DASE paper's SAC code's use of the Deterministic policy's noise (one
draw per call shared by the batch, in absolute units, actions never clipped to the bounds; DASE's weights against pi(s)
plus such a draw), against the default per-sample noise clipped to the bounds."""
import numpy as np
import torch

from algorithms import SAC, Batch
from algorithms.replay.sac import DETERMINISTIC_NOISE, DETERMINISTIC_NOISE_CLIP
from algorithms.sharing.weights import BatchDivergence, dase_weighting

OBS, ACT, B = 4, 3, 64
LOW, HIGH = -np.full(ACT, 2.0), np.full(ACT, 2.0)  # an action scale of 2: absolute and scaled noise differ


def agents(noise: str) -> SAC:
    sac = SAC(OBS, ACT, LOW, HIGH, [0, 1], hidden_size=16, deterministic_noise=noise)
    with torch.no_grad():  # the actor's output at the upper bound on every state: noise pushes it past
        last = [m for m in sac.actor.modules() if hasattr(m, "bias") and m.bias is not None][-1]
        last.bias.fill_(20.0)
    return sac


def batch(gen: torch.Generator, n: int = 2) -> Batch:
    writer = torch.randint(0, n, (n, B), generator=gen)
    return Batch(obs=torch.randn(n, B, OBS, generator=gen), action=torch.rand(n, B, ACT, generator=gen) * 4 - 2,
                 reward=torch.randn(n, B, 1, generator=gen), next_obs=torch.randn(n, B, OBS, generator=gen),
                 not_done=torch.ones(n, B, 1), own=writer == torch.arange(n).view(-1, 1))


def test_paper_code_draws_once_per_call_in_absolute_units_and_never_clips_to_the_bounds():
    obs = torch.randn(2, B, OBS, generator=torch.Generator().manual_seed(0))
    paper, ours = agents("paper_code"), agents("per_sample")
    eps = torch.randn(2, B, ACT, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        pi = paper.actor(obs)
        action, log_prob = paper.sample(obs, eps)
        d = action - pi
        expected = (DETERMINISTIC_NOISE * eps[:, :1]).clamp(-DETERMINISTIC_NOISE_CLIP, DETERMINISTIC_NOISE_CLIP)
        torch.testing.assert_close(d, expected.expand_as(d))  # each agent's first draw on every row, not times 2
        assert not torch.equal(d[0], d[1])  # each agent its own draw
        assert (action > 2.0).any() and action.max() <= 2.0 + DETERMINISTIC_NOISE_CLIP + 1e-6  # past the bound
        assert log_prob.shape == (2, B, 1) and not log_prob.any()
        mine, _ = ours.sample(obs, eps)
        torch.testing.assert_close(mine, (pi + (DETERMINISTIC_NOISE * eps).clamp(-0.25, 0.25) * 2).clamp(-2, 2))
        assert mine.max() <= 2.0 and not torch.equal(mine[:, 0], mine[:, 1])
    explored, _ = paper.explore(np.random.default_rng(0).normal(size=(2, OBS)).astype(np.float32))
    assert explored.shape == (2, ACT) and (explored > 2.0).any() and explored.max() <= 2.25 + 1e-6  # sent as is


def test_paper_code_weighs_dase_samples_against_the_learners_noisy_action_and_the_default_against_pi():
    seen = {}

    class Recording(BatchDivergence):  # DASE's batch-level rule, keeping the learner's actions it is given
        def __call__(self, agents_, batch_, policy_actions=None):
            seen[noise] = None if policy_actions is None else policy_actions.clone()
            return super().__call__(agents_, batch_, policy_actions)
    for noise in ("paper_code", "per_sample"):
        sac = agents(noise)
        sac.weighting = dase_weighting(sac, "js", 0.1)
        sac.weighting.__class__ = Recording
        b = batch(torch.Generator().manual_seed(2))
        with torch.no_grad():
            pi = sac.actor(b.obs)
        sac.update(b)
        if noise == "per_sample":
            assert seen[noise] is None  # the rule takes the noise-free pi(s) itself
        else:
            d = seen[noise] - pi
            assert torch.equal(d, d[:, :1].expand_as(d)) and d.abs().max() <= DETERMINISTIC_NOISE_CLIP + 1e-6
            assert d.abs().min() > 0


def test_plain_sac_with_paper_code_draws_nothing_for_weights():
    """Without DASE (every weight 1) the paper_code update draws from the update stream exactly twice, as the default
    does: the target's next actions and the actor loss's actions."""
    counts = []
    for noise in ("paper_code", "per_sample"):
        sac = agents(noise)
        before = int(sac.update_rng.counter[0])
        sac.update(batch(torch.Generator().manual_seed(3)))
        counts.append(int(sac.update_rng.counter[0]) - before)
    assert counts[0] == counts[1]
