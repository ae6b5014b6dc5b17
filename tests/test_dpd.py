"""DPD: distillation weights and loss, own buffers, batched == one learner at a time, and it learns."""
import math

import numpy as np
import pytest
import torch

from algorithms import SAC, TD3
from algorithms.sharing.dpd import Distillation, distillation_loss, dpd_weights
from utils.run import RunConfig, Trainer
from utils.run.sharing import Scheme, SharingSettings

OBS, ACT, B = 4, 2, 16
LOW, HIGH = -np.full(ACT, 1.5), np.full(ACT, 1.5)


def test_weights_are_clipped_then_normalised():
    q_peer = torch.tensor([0.0, 10.0, -10.0, 0.5]).view(1, 4, 1)
    raw = torch.tensor([1.0, 100.0, 0.01, math.exp(0.5)])  # e^10 and e^-10 hit the clip bounds
    torch.testing.assert_close(dpd_weights(q_peer, torch.zeros_like(q_peer), 1.0).view(-1), raw / raw.sum())
    # alpha -> 0: every state counts the same (unweighted distillation)
    torch.testing.assert_close(dpd_weights(q_peer, torch.zeros_like(q_peer), 0.0).view(-1), torch.full((4,), 0.25))


def one_member(x: torch.Tensor, m: int, members: int) -> torch.Tensor:
    """Place one sample in member m's slot of a stacked input (the other slots are zeros)."""
    out = torch.zeros((members, 1) + x.shape, dtype=x.dtype)
    out[m, 0] = x
    return out


@pytest.mark.parametrize("cls,kw", [(TD3, {"hidden": (16, 16)}),
                                    (SAC, {"policy_type": "Gaussian", "hidden_size": 16})])
def test_weights_and_loss_equal_a_per_sample_computation(cls, kw, float64):
    """In float64: with alpha = 3 and critics scaled up, a weight exp(alpha * dQ) carries float32's rounding of
    Q (|Q| ~ 50, one ulp ~ 4e-6) times alpha, ~1e-5 relative, and how Q rounds depends on the CPU's vector
    width (the batched and per-sample paths sum in different orders). float64 leaves ~1e-14: the tolerances
    below then test the formula, on any x86-64 CPU."""
    alpha = 3.0  # large enough that some weights hit the clip bounds
    seeds = [1, 101, 201, 2, 102, 202]
    agents = cls(OBS, ACT, LOW, HIGH, seeds, "cpu", **kw)
    scheme = Scheme(SharingSettings.of("DPD_TD3", 3, {"dpd_alpha": alpha}), agents, seeds, torch.device("cpu"))
    m_count = agents.members
    with torch.no_grad():  # make the critics disagree strongly, so clipping matters
        for p in agents.critic.parameters():
            p.mul_(4.0)
    obs = torch.randn(m_count, B, OBS, generator=torch.Generator().manual_seed(0))
    for offset, peer in zip((1, 2), scheme.peer_slots):
        assert peer.tolist() == [(i + offset) % 3 + 3 * (i // 3) for i in range(6)]  # peers within each seed
        action, w = scheme.distillation.peer_targets(obs, peer)
        loss = distillation_loss(agents.actor(obs), action, w)
        raw = torch.zeros(m_count, B)
        expected_action = torch.zeros(m_count, B, ACT)  # float64 (the default dtype here)
        with torch.no_grad():
            for m in range(m_count):
                p = int(peer[m])
                for i in range(B):
                    a = agents.actor(one_member(obs[m, i], p, m_count))[p, 0].clamp(agents.low, agents.high)
                    q_p = agents.critic.q1(one_member(obs[m, i], p, m_count), one_member(a, p, m_count))[p, 0, 0]
                    q_s = agents.critic.q1(one_member(obs[m, i], m, m_count), one_member(a, m, m_count))[m, 0, 0]
                    raw[m, i] = min(max(math.exp(alpha * float(q_p - q_s)), 0.01), 100.0)
                    expected_action[m, i] = a
        expected_w = raw / raw.sum(dim=1, keepdim=True)
        assert ((raw == 0.01) | (raw == 100.0)).any(), "the test should exercise the clip"
        assert action.dtype == torch.float64
        torch.testing.assert_close(action, expected_action, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(w[..., 0], expected_w, rtol=1e-10, atol=1e-14)
        for m in range(m_count):
            own = torch.stack([agents.actor(one_member(obs[m, i], m, m_count))[m, 0] for i in range(B)])
            per_sample = ((own - expected_action[m]) ** 2).mean(-1)
            torch.testing.assert_close(loss[m], (expected_w[m] * per_sample).sum(), rtol=1e-10, atol=1e-12)


def test_batched_distillation_equals_learners_one_by_one(float64):
    seeds, kw = [4, 104], dict(hidden=(16, 16))
    stacked = TD3(OBS, ACT, LOW, HIGH, seeds, "cpu", **kw)
    distillation = Distillation(stacked, alpha=0.7)
    alone = [TD3(OBS, ACT, LOW, HIGH, [s], "cpu", **kw) for s in seeds]  # same initialisation per seed
    opts = [torch.optim.Adam(a.actor.parameters(), lr=1e-4) for a in alone]
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        obs = torch.randn(2, B, OBS, generator=gen)
        distillation.distill(obs, torch.tensor([1, 0]))
        actions, weights = [], []
        for m, p in ((0, 1), (1, 0)):  # both targets first: the peer's actor before anyone's step
            with torch.no_grad():
                a = alone[p].actor(obs[m : m + 1]).clamp(stacked.low, stacked.high)
                w = torch.exp(0.7 * (alone[p].critic.q1(obs[m : m + 1], a) - alone[m].critic.q1(obs[m : m + 1], a)))
                w = w.clamp(0.01, 100.0)
            actions.append(a)
            weights.append(w / w.sum())
        for m in range(2):
            loss = (weights[m] * (alone[m].actor(obs[m : m + 1]) - actions[m]).pow(2).mean(-1, keepdim=True)).sum()
            opts[m].zero_grad()
            loss.backward()
            opts[m].step()
    for m in range(2):
        for (name, p), q in zip(stacked.actor.named_parameters(), alone[m].actor.parameters()):
            torch.testing.assert_close(p[m : m + 1], q, rtol=0, atol=1e-10, msg=name)
    assert not torch.equal(stacked.actor.net.layers[0].weight, TD3(OBS, ACT, LOW, HIGH, seeds, "cpu", **kw)
                           .actor.net.layers[0].weight), "distillation should have moved the actors"


def test_learners_update_on_their_own_buffers_and_distil_on_the_peers(tmp_path):
    cfg = RunConfig(policy="DPD_TD3", env="Pendulum-v1", seeds=[0, 1], num_agents=2, max_time_steps=300,
                    start_time_steps=150, eval_freq=300, eval_episodes=1, batch_size=32, quiet=True,
                    results_dir=str(tmp_path), algo={"hidden": (16, 16)}, sharing={"dpd_batch_size": 24})
    trainer = Trainer(cfg)
    learner = trainer.learner
    written = [set() for _ in range(4)]  # observations each learner's environment produced
    rl_rows = [set() for _ in range(4)]
    distil_rows = [[set() for _ in range(4)] for _ in range(4)]
    distillation = learner.scheme.distillation
    store, update, distill = learner.store, trainer.agents.update, distillation.distill

    def recording_store(obs, *rest, **kw):
        for m in range(4):
            written[m].add(tuple(np.asarray(obs[m], dtype=np.float32)))
        return store(obs, *rest, **kw)

    def recording_update(batch):
        assert batch.own.all()  # nothing external: every RL sample is the learner's own
        for m in range(4):
            rl_rows[m].update(map(tuple, batch.obs[m].numpy()))
        return update(batch)

    def recording_distill(obs, peer):
        assert obs.shape == (4, 24, 3)
        for m in range(4):
            distil_rows[m][int(peer[m])].update(map(tuple, obs[m].numpy()))
        return distill(obs, peer)

    learner.store, trainer.agents.update, distillation.distill = recording_store, recording_update, recording_distill
    trainer.run()
    for m in range(4):
        peer = m ^ 1  # learners 0-1 are seed 0's, 2-3 seed 1's
        assert rl_rows[m] and rl_rows[m] <= written[m]
        assert distil_rows[m][peer] and distil_rows[m][peer] <= written[peer]
        assert not any(distil_rows[m][j] for j in range(4) if j != peer)  # never across seeds
        assert not rl_rows[m] & written[peer]
