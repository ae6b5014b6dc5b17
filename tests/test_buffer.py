"""The shared replay buffer: layout, wrap-around, per-agent sampling and ownership."""
import numpy as np
import pytest
import torch

from algorithms.common.nets import AgentRNG
from utils.run.replay.buffer import SharedReplayBuffer


def fill(buf, steps, n, start=0):
    for t in range(start, start + steps):
        ids = np.arange(n)
        buf.add(obs=np.stack([[t, i] for i in ids]), action=np.full((n, 1), t * 0.01), reward=ids + t,
                next_obs=np.stack([[t + 1, i] for i in ids]), terminated=np.zeros(n, bool))


def test_wraps_around_and_keeps_newest():
    buf = SharedReplayBuffer(2, 1, capacity=7, writers=2)
    fill(buf, 5, 2)  # 10 rows into 7 slots
    assert len(buf) == 7 and buf.ptr == 3
    written = [(t, i) for t in range(5) for i in range(2)]
    assert set(map(tuple, buf.obs[0].numpy().astype(int))) == set(written[3:])  # the 7 newest rows
    assert tuple(buf.obs[0, 0].numpy().astype(int)) == written[7]  # row 7 overwrote slot 0
    # writer ids follow the rows wherever they land
    np.testing.assert_array_equal(buf.writer[0].numpy(), buf.obs[0, :, 1].numpy().astype(int))


def test_sampling_is_per_agent_and_marks_own_samples():
    n = 3
    buf = SharedReplayBuffer(2, 1, capacity=300, writers=n)
    fill(buf, 100, n)
    batch = buf.sample(512, AgentRNG([0, 100, 200]))
    assert batch.obs.shape == (n, 512, 2) and batch.reward.shape == (n, 512, 1) and batch.own.shape == (n, 512)
    writers = batch.obs[..., 1].long()
    assert torch.equal(batch.own, writers == torch.arange(n).view(-1, 1))
    for i in range(n):  # everyone samples the whole shared buffer, not only its own rows
        assert set(writers[i].tolist()) == {0, 1, 2}
    assert not torch.equal(batch.obs[0], batch.obs[1])  # each agent draws its own indices
    # rows stay whole: reward = writer + t, next_obs = obs + 1 step
    torch.testing.assert_close(batch.reward[..., 0], batch.obs[..., 0] + batch.obs[..., 1])
    torch.testing.assert_close(batch.next_obs[..., 0], batch.obs[..., 0] + 1)


def test_capacity_is_shared_by_all_agents():
    with pytest.raises(ValueError):
        SharedReplayBuffer(2, 1, capacity=2, writers=3)
    buf = SharedReplayBuffer(2, 1, capacity=10, writers=2)
    fill(buf, 50, 2)
    assert len(buf) == 10  # not 10 per agent
    assert buf.nbytes() == 10 * (2 + 1 + 1 + 2 + 1 + 1) * 4 + 10 * 2 == SharedReplayBuffer.bytes_for(2, 1, 10)
    big = SharedReplayBuffer(7, 3, capacity=50, writers=2, gaussian_behaviour=True)
    assert big.nbytes() == SharedReplayBuffer.bytes_for(7, 3, 50, gaussian_behaviour=True)


def test_gaussian_behaviour_is_stored():
    buf = SharedReplayBuffer(1, 2, capacity=10, writers=2, gaussian_behaviour=True)
    buf.add(np.zeros((2, 1)), np.zeros((2, 2)), np.zeros(2), np.zeros((2, 1)), np.zeros(2, bool),
            behaviour=(np.full((2, 2), 0.5), np.full((2, 2), 0.2)))
    buf.add(np.zeros((2, 1)), np.zeros((2, 2)), np.zeros(2), np.zeros((2, 1)), np.zeros(2, bool))  # random phase
    np.testing.assert_allclose(buf.behaviour_mean[0, :4].numpy(), [[0.5, 0.5]] * 2 + [[0, 0]] * 2)
    np.testing.assert_allclose(buf.behaviour_std[0, :4].numpy(), [[0.2, 0.2]] * 2 + [[1, 1]] * 2)


def test_discrete_actions_and_behaviour_probabilities_are_stored():
    """Discrete SAC: the action index in a width-1 action column, the writer's probabilities beside it (uniform for
    the warm-up's random actions), sampled row for row."""
    buf = SharedReplayBuffer(1, 1, capacity=10, writers=2, behaviour_width=3)
    buf.add(np.array([[0.0], [1.0]]), np.array([2, 0]), np.zeros(2), np.zeros((2, 1)), np.zeros(2, bool),
            behaviour=(np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]),))
    buf.add(np.array([[2.0], [3.0]]), np.array([1, 1]), np.zeros(2), np.zeros((2, 1)), np.zeros(2, bool))
    np.testing.assert_array_equal(buf.action[0, :4, 0].numpy(), [2, 0, 1, 1])
    stored = [[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]] + [[1 / 3] * 3] * 2
    np.testing.assert_allclose(buf.behaviour_probs[0, :4].numpy(), stored, rtol=1e-6)
    batch = buf.sample(64, AgentRNG([0, 100]))
    assert batch.behaviour_mean is None and batch.behaviour_probs.shape == (2, 64, 3)
    rows = batch.obs[..., 0].long()  # row k holds obs k
    torch.testing.assert_close(batch.behaviour_probs, buf.behaviour_probs[0, rows])
    torch.testing.assert_close(batch.action[..., 0], buf.action[0, rows, 0])
    assert buf.nbytes() == SharedReplayBuffer.bytes_for(1, 1, 10, behaviour_width=3)
    state = buf.state_dict()
    again = SharedReplayBuffer(1, 1, capacity=10, writers=2, behaviour_width=3)
    again.load_state_dict(state)
    assert torch.equal(again.behaviour_probs[:, :4], buf.behaviour_probs[:, :4])
