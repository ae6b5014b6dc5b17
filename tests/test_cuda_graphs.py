"""The CUDA-graph update's bookkeeping, checked on the CPU: which branch is replayed when, and the counters.

A real replay runs the recorded kernels and none of the Python. ``FakeGraphs`` keeps that contract on the
CPU: its "graph" is the update function, and replaying it undoes the Python counter the function advances,
so the result is right only if ``UpdateGraphs`` picks the right branch and advances the counters itself.
(Equality of real graphs with eager updates, and their speed, need a GPU: see docs/performance.md.)
"""
import numpy as np
import pytest

import DASE_main
from utils.cli import main_guard
from utils.run import RunConfig, Trainer
from utils.run.replay.cuda_graphs import UpdateGraphs


class FakeGraphs(UpdateGraphs):
    def _pool(self):
        self.captured, self.replays, self.eager = [], 0, 0

    def _eager(self, fn):
        self.eager += 1
        fn()

    def _capture(self, fn):
        key = self.learner.agents.schedule()
        self.captured.append(key)
        return key, fn  # a real graph holds the kernels of the branch it was captured in

    def _replay(self, graph):
        key, fn = graph
        agents = self.learner.agents
        # the fake re-runs the eager update, which would pick its branch by itself: check it is the graph's
        assert agents.schedule() == key, f"replayed the graph of branch {key} at branch {agents.schedule()}"
        updates = agents.updates
        self.replays += 1
        fn()
        agents.updates = updates  # a replay runs no Python


# policy: (algorithm settings, agents, schedule branches, sharing settings)
CASES = {
    "DASE_TD3": ({"hidden": (32, 32)}, 2, [(False,), (True,)], {}),  # critic-only and critic + actor branches
    "DASE_DDPG": ({}, 2, [()], {}),
    "DASE_SAC": ({"policy_type": "Gaussian", "hidden_size": 32, "automatic_entropy_tuning": True}, 2, [(True,)], {}),
    "DPD_TD3": ({"hidden": (32, 32)}, 2, [(False,), (True,)], {"dpd_batch_size": 16}),
    # diffusion inside the update, with link drops drawn from the scheme's own stream
    "DIFF_TD3": ({"hidden": (32, 32)}, 3, [(False,), (True,)], {"topology": "ring", "link_drop": 0.3}),
}


def run(tmp_path, policy, graphs: bool):
    algo, agents, _, sharing = CASES[policy]
    cfg = RunConfig(policy=policy, env="Pendulum-v1", seed=2, num_agents=agents, max_time_steps=500,
                    start_time_steps=200, eval_freq=100, eval_episodes=2, batch_size=32, results_dir=str(tmp_path),
                    quiet=True, checkpoint_freq=0, algo=algo, sharing=sharing)
    trainer = Trainer(cfg)
    if graphs:
        trainer.learner.graphs = FakeGraphs(trainer.learner)
    trainer.run()
    return trainer


@pytest.mark.parametrize("policy", list(CASES))
def test_graph_replays_give_the_eager_run(policy, tmp_path):
    eager = run(tmp_path / "eager", policy, graphs=False)
    graphed = run(tmp_path / "graphs", policy, graphs=True)
    g = graphed.learner.graphs
    assert g.captured == CASES[policy][2]  # each branch captured once, when it first came up
    assert g.eager >= 3 and g.eager + g.replays == 300  # eager until every optimizer has state, then graphs
    assert eager.agents.updates == graphed.agents.updates == 300
    for path in sorted((tmp_path / "eager").glob("*.npy")):
        np.testing.assert_array_equal(np.load(path), np.load(tmp_path / "graphs" / path.name), err_msg=path.name)
    for name, net in eager.agents.networks.items():
        for (k, p), q in zip(net.state_dict().items(), graphed.agents.networks[name].state_dict().values()):
            assert p.equal(q), f"{name}.{k}"


class FailingGraphs(FakeGraphs):
    def _capture(self, fn):
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore lines")


def test_a_failed_capture_falls_back_to_eager_updates(tmp_path, capsys):
    """A capture that raises changes no state: the run goes on eagerly, ends as an eager run, and says why."""
    eager = run(tmp_path / "eager", "DASE_TD3", graphs=False)
    cfg_dir = tmp_path / "failing"
    algo, agents, *_ = CASES["DASE_TD3"]
    trainer = Trainer(RunConfig(policy="DASE_TD3", env="Pendulum-v1", seed=2, num_agents=agents, max_time_steps=500,
                                start_time_steps=200, eval_freq=100, eval_episodes=2, batch_size=32,
                                results_dir=str(cfg_dir), quiet=True, checkpoint_freq=0, algo=algo))
    trainer.learner.graphs = FailingGraphs(trainer.learner)
    trainer.run()
    assert trainer.learner.graphs is None and trainer.agents.updates == eager.agents.updates == 300
    err = capsys.readouterr().err
    assert err.count("CUDA graph capture failed") == 1 and "operation not permitted" in err and "more lines" not in err
    for path in sorted((tmp_path / "eager").glob("*.npy")):
        np.testing.assert_array_equal(np.load(path), np.load(cfg_dir / path.name), err_msg=path.name)


def test_cuda_graphs_without_a_gpu_is_a_one_line_error(tmp_path, capsys):
    code = main_guard(DASE_main.run, ["--env", "Pendulum-v1", "--device", "cpu", "--cuda_graphs",
                                      "--results_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--cuda_graphs" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())
