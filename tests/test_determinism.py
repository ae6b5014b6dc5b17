"""The same seed gives the same curves on CPU, bit for bit; another seed gives other curves."""
import numpy as np
import pytest

from utils.run import RunConfig, train

SMALL = dict(env="Pendulum-v1", max_time_steps=600, start_time_steps=300, eval_freq=300, eval_episodes=2,
             batch_size=32, quiet=True)
ALGO = {"DASE_TD3": {"hidden": (64, 64)}, "DASE_SAC": {"policy_type": "Gaussian", "hidden_size": 64}}


def run(policy, seed, tmp_path, num_agents=2):
    cfg = RunConfig(policy=policy, seed=seed, num_agents=num_agents, results_dir=str(tmp_path / f"{policy}{seed}"),
                    algo=ALGO[policy], **SMALL)
    return train(cfg)


@pytest.mark.parametrize("policy", ["DASE_TD3", "DASE_SAC"])
def test_same_seed_same_curves(policy, tmp_path):
    first, again = run(policy, 0, tmp_path), run(policy, 0, tmp_path / "again")
    other = run(policy, 1, tmp_path)
    assert len(first) == 2 and all(len(c) == 3 for c in first)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])
    assert not np.array_equal(first[0][1:], first[1][1:])  # the two agents are different agents


def test_one_dase_agent_is_the_baseline(tmp_path):
    """N = 1 has no external samples: DASE_TD3 must reproduce TD3 exactly (only file names differ)."""
    cfg = dict(seed=3, results_dir=str(tmp_path), algo=ALGO["DASE_TD3"], **SMALL)
    (dase,) = train(RunConfig(policy="DASE_TD3", num_agents=1, **cfg))
    (base,) = train(RunConfig(policy="TD3", num_agents=1, **cfg))
    np.testing.assert_array_equal(dase, base)
    assert (tmp_path / "DASE_TD3_Pendulum-v1_3_Agent_0.npy").is_file() and (tmp_path / "TD3_Pendulum-v1_3.npy").is_file()
