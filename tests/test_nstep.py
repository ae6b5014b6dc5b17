"""N-step returns (--n_step): the buffer's targets on hand-built episodes with a termination, a truncation and the
ring's wrap-around, as SB3 tests its n-step replay; the algorithms bootstrap with the per-sample discount; whole
runs stay exact across --seeds batching and --resume."""
import numpy as np
import pytest
import torch

import DASE_main
from algorithms.replay.base import Batch
from algorithms.replay.td3 import TD3
from utils.cli import main_guard
from utils.run.replay.buffer import SharedReplayBuffer, n_step_returns


def hand_built() -> SharedReplayBuffer:
    """2 writers, room for 4 steps, n = 3, gamma = 0.5; six steps t = 0..5, so steps 4 and 5 overwrite 0 and 1.
    Writer w at step t: reward 10 t + w, next state 100 t + w; writer 0 terminates at step 3, writer 1's episode is
    truncated by a time limit at step 2."""
    buf = SharedReplayBuffer(1, 1, capacity=8, writers=2, n_step=3, gamma=0.5)
    for t in range(6):
        terminated = np.array([t == 3, False])
        ended = np.array([t == 3, t == 2])
        buf.add(np.zeros((2, 1)), np.zeros((2, 1)), np.array([10.0 * t, 10.0 * t + 1]),
                np.array([[100.0 * t], [100.0 * t + 1]]), terminated, ended=ended)
    return buf


# (row, reward, next state, not_done, discount): rows hold step t at (t mod 4) * 2 + writer
CASES = [
    (4, 20 + 0.5 * 30, 300, 0.0, 0.25),  # w0 from step 2: step 3 terminates, no bootstrap
    (5, 21, 201, 1.0, 0.5),  # w1 from step 2: truncated there, bootstraps from its real last state
    (7, 31 + 0.5 * 41 + 0.25 * 51, 501, 1.0, 0.125),  # w1 from step 3: steps 3, 4, 5 across the wrap-around
    (0, 40 + 0.5 * 50, 500, 1.0, 0.25),  # w0 from step 4: only step 5 is stored after it
    (2, 50, 500, 1.0, 0.5),  # w0 from the newest step: one step
]


@pytest.mark.parametrize("row, reward, next_obs, not_done, discount", CASES)
def test_n_step_targets_by_hand(row, reward, next_obs, not_done, discount):
    buf = hand_built()
    g = torch.zeros((1, 1), dtype=torch.int64)
    r, s, nd, d, _ = n_step_returns(buf, g, torch.tensor([[row]]))
    assert (float(r), float(s), float(nd), float(d)) == (reward, next_obs, not_done, discount)


def test_the_batch_carries_the_discount_only_for_n_step():
    one = SharedReplayBuffer(1, 1, capacity=8, writers=2)
    one.add(np.zeros((2, 1)), np.zeros((2, 1)), np.ones(2), np.ones((2, 1)), np.zeros(2))
    from algorithms.common.nets import AgentRNG

    assert one.sample(4, AgentRNG([0, 1])).discount is None
    assert hand_built().sample(4, AgentRNG([0, 1])).discount.shape == (2, 4, 1)


def test_n_step_needs_whole_steps():
    with pytest.raises(ValueError, match="multiple"):
        SharedReplayBuffer(1, 1, capacity=7, writers=2, n_step=3)


def test_td3_bootstraps_with_the_batch_discount():
    agent = TD3(3, 1, [-1.0], [1.0], [0], "cpu")
    b = 4
    batch = Batch(torch.randn(1, b, 3), torch.zeros(1, b, 1), torch.randn(1, b, 1), torch.randn(1, b, 3),
                  torch.tensor([[[1.0], [0.0], [1.0], [1.0]]]), torch.ones(1, b, dtype=torch.bool),
                  discount=torch.tensor([[[0.5], [0.25], [0.125], [1.0]]]))
    state = agent.update_rng.get_state()
    target = agent.target(batch)
    agent.update_rng.set_state(state)  # the same target-policy noise
    one_step = agent.target(Batch(*[v for v in vars(batch).values()][:6]))  # discount 0.99
    q = (one_step - batch.reward) / (batch.not_done * 0.99)  # min Q'(s', a') where bootstrapped
    expected = batch.reward + batch.not_done * batch.discount * torch.nan_to_num(q)
    torch.testing.assert_close(target, expected)


ARGS = ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--n_step", "3", "--max_time_steps", "1200",
        "--start_time_steps", "300", "--eval_freq", "400", "--eval_episodes", "2", "--batch_size", "32",
        "--threads", "1", "--env_workers", "0", "--quiet"]


def test_n_step_runs_equal_across_seed_batching_and_resume(tmp_path, seed_one_three_ways):
    names = [f"DASE_TD3_Pendulum-v1_1_Agent_{i}.npy" for i in range(2)]
    for curve in seed_one_three_ways(DASE_main, ARGS, 600, tmp_path, names):
        assert curve.shape == (4,)


def test_n_step_zero_is_one_line(tmp_path, capsys):
    assert main_guard(DASE_main.run, ["--n_step", "0", "--results_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--n_step must be a positive integer" in err and "\n" not in err
