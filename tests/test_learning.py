"""Slow: the agents really learn. Pendulum-v1: a random policy scores about -1200, a good one above -200.

Every algorithm's update (TD3, DDPG, SAC) and every multi-agent method (DASE, DPD, diffusion on a graph) must
turn Pendulum's random policy into a good one; the diffusing ring of 4 does it with each agent on its own
RandomExtreme pendulum (mass and length x [0.5, 0.75) or (1.25, 1.5]), evaluated on its own task. The six
runs go at once, in two processes of one torch thread each: on a 2-core machine one thread trains these small networks as fast as two (measured: TD3 10k steps, 83 s
with one thread, 82 s with two), so two runs side by side take half the time of one after the other. Each run ends
at the first evaluation where its test's bar holds (``stop_when``), else at its step budget.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np
import pytest

from utils.cli import available_cores
from utils.run import RunConfig, train

pytestmark = pytest.mark.slow

# name: (policy, agents, steps, algorithm settings, environment, sharing settings). 128-128 networks (the paper's
# are 256-256 and DDPG's 400-300) learn Pendulum as well at a fraction of the cost on a small CPU. DDPG's slow
# targets (tau 0.001) and actor (lr 1e-4) need about 10k steps where the others need about 6-8k. The order packs
# the two processes (each takes the next run when it is free); measured here with one thread each: DIFF_TD3 120 s,
# DPD_TD3 115, DDPG 110, DASE_TD3 87, SAC 89, TD3 83: about 310 s in all.
PENDULUM = "Pendulum-v1"
RUNS = {
    # started apart, as measured (--init separate); with the common start that is now diffusion's default, agent 2 of
    # seed 0 reached only -899 in 12k steps (a data point for issue 34's verdict, not a bar). 16k steps: on an AVX-512
    # Xeon (other float rounding than the AVX2 machine the bar was set on) agent 2's best was -802 at 12k, -492 by 16k;
    # the run stops at the first evaluation where the bar holds, so a faster machine spends no more
    "DIFF_TD3 ring of 4, extreme tasks": ("DIFF_TD3", 4, 16_000, {"hidden": (128, 128)}, "RandomExtremePendulum-v1",
                                          {"topology": "ring"}, {"init": "separate"}),
    "DPD_TD3": ("DPD_TD3", 2, 10_000, {"hidden": (128, 128)}, PENDULUM, {}),
    "DDPG": ("DDPG", 1, 15_000, {"hidden": (128, 128)}, PENDULUM, {}),
    "DASE_TD3": ("DASE_TD3", 2, 10_000, {"hidden": (128, 128)}, PENDULUM, {}),
    "SAC": ("SAC", 1, 10_000, {"hidden_size": 128}, PENDULUM, {}),
    "TD3": ("TD3", 1, 10_000, {"hidden": (128, 128)}, PENDULUM, {}),
    # issue 25's bar: N-step returns with prioritized replay learn within the same budget as TD3
    "TD3 --n_step 3 --prioritized": ("TD3", 1, 10_000, {"hidden": (128, 128)}, PENDULUM, {},
                                     {"n_step": 3, "per": dict(alpha=0.6, beta=0.4, beta_steps=10_000, eps=1e-6)}),
}


def learned(curve) -> bool:
    """Reached a mean evaluation return above -400, and stays there (median of the last 5 evaluations)."""
    curve = np.asarray(curve)
    return curve.max() > -400 and np.median(curve[-5:]) > -400


def ring_learned(curves) -> bool:
    """The ring's bar (see its test): every agent's best well above random play and its start, half of them > -400."""
    best = [max(c) for c in curves]
    return all(b > -700 and b > c[0] + 500 for b, c in zip(best, curves)) and sorted(best)[len(best) // 2] > -400


def run(name: str, folder: str) -> list[np.ndarray]:
    """The run, ended at the first evaluation where its test's bar holds for every agent (else at its budget): the
    bar is judged as the curve grows, so no step is spent after it is met."""
    policy, agents, steps, algo, env, sharing, *replay = RUNS[name]
    bar = ring_learned if name.startswith("DIFF_TD3 ring") else (lambda curves: all(learned(c) for c in curves))
    return train(RunConfig(policy=policy, env=env, seed=0, num_agents=agents, max_time_steps=steps,
                           start_time_steps=1000, eval_freq=1000, results_dir=folder, quiet=True, threads=1,
                           algo=dict(algo), sharing=dict(sharing), **(replay[0] if replay else {})), stop_when=bar)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    """Every run of RUNS, finished; each test reads its own (a run that raised raises in its test only)."""
    folder = tmp_path_factory.mktemp("learning")
    spawn = multiprocessing.get_context("spawn")  # not fork: the parent's torch threads would not survive it
    with ProcessPoolExecutor(max_workers=max(1, min(2, available_cores())), mp_context=spawn) as pool:
        return {name: pool.submit(run, name, str(folder / name)) for name in RUNS}


@pytest.mark.parametrize("name", [name for name in RUNS if name != "DIFF_TD3 ring of 4, extreme tasks"])
def test_learns_pendulum(name, runs):
    policy, agents, steps, *_ = RUNS[name]
    curves = runs[name].result()
    assert len(curves) == agents
    for i, curve in enumerate(curves):
        assert curve.shape == curves[0].shape and 5 <= len(curve) <= steps // 1000 + 1
        assert curve[0] < -900, "the untrained policy should be poor"
        assert learned(curve), f"{policy} agent {i} did not learn: {np.round(curve)}"


def test_a_diffusing_ring_learns_its_extreme_pendulums(runs):
    """Four TD3 learners averaging parameters with their ring neighbours after every update, each on a pendulum of
    its own mass and length (x 0.5-0.75 or 1.25-1.5), evaluated on its own: one common policy must serve four
    different pendulums, so the bar is lower than for a single task (measured, seed 0, best evaluations: -87,
    -93, -424, -218; random play: -1100 to -1700). Every agent gets well above random play, and half of them
    reach a good policy."""
    curves = runs["DIFF_TD3 ring of 4, extreme tasks"].result()
    assert len(curves) == 4
    best = [float(c.max()) for c in curves]
    for i, curve in enumerate(curves):
        assert curve.shape == curves[0].shape and len(curve) <= 17 and curve[0] < -900, np.round(curve)
        assert best[i] > -700 and best[i] > curve[0] + 500, f"agent {i} did not learn: {np.round(curve)}"
    assert sorted(best)[2] > -400, f"fewer than half the agents reached -400: {np.round(best)}"
