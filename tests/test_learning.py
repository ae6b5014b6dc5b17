"""Slow: the agents really learn. Pendulum-v1: a random policy scores about -1200, a good one above -200."""
import numpy as np
import pytest

from utils.run import RunConfig, train

pytestmark = pytest.mark.slow


def learned(curve: np.ndarray) -> bool:
    """Reached a mean evaluation return above -400, and stays there (median of the last 5 evaluations)."""
    return curve.max() > -400 and np.median(curve[-5:]) > -400


# 128-128 networks (the paper's are 256-256) learn Pendulum as well at 40% of the cost on a small CPU
@pytest.mark.parametrize("policy,num_agents", [("TD3", 1), ("DASE_TD3", 2), ("DPD_TD3", 2)])
def test_td3_learns_pendulum_within_10000_steps(policy, num_agents, tmp_path):
    curves = train(RunConfig(policy=policy, env="Pendulum-v1", seed=0, num_agents=num_agents, max_time_steps=10_000,
                             start_time_steps=1000, eval_freq=1000, results_dir=str(tmp_path), quiet=True,
                             algo={"hidden": (128, 128)}))
    assert len(curves) == num_agents
    for i, curve in enumerate(curves):
        assert curve.shape == (11,)
        assert curve[0] < -900, "the untrained policy should be poor"
        assert learned(curve), f"agent {i} did not learn: {np.round(curve)}"
