"""--init common|separate: Diff-DAC's reference starts every learner from the same parameters."""
import json

import numpy as np
import pytest
import torch

import ac_main
from utils.cli import main_guard
from utils.errors import UsageError
from utils.naming import ALGORITHM
from utils.run import RunConfig, Trainer, train
from utils.run.names import CURVE_NAME


def build(kind: str, name: str, member_seeds: list[int]):
    if kind == "replay":
        return ALGORITHM[name].form()(3, 2, -np.ones(2), np.ones(2), member_seeds, "cpu")
    if kind == "discrete":
        return ALGORITHM[name].form("learner", discrete=True)(3, 2, None, None, member_seeds, "cpu")
    cls = ALGORITHM[name].form("learner", discrete=True)
    return cls((3,), 2, None, None, member_seeds, "cpu", True, **({"rollout": (5, 2)} if cls.__name__ == "ACER" else {}))


def flat(agents) -> dict[str, torch.Tensor]:
    return {f"{k}.{n}": p.detach() for k, net in agents.networks.items() for n, p in net.named_parameters()}


CASES = [("replay", "TD3"), ("replay", "DDPG"), ("replay", "SAC"), ("discrete", "SAC"), ("rollout", "A2C"),
         ("rollout", "ACER")]


@pytest.mark.parametrize("kind,name", CASES)
def test_common_start_gives_each_seed_its_first_agents_parameters(kind, name):
    """2 seeds x 3 agents: after start_equal every agent of a seed holds, bit for bit, the parameters that agent 0
    of that seed draws alone (online and target networks alike); the two seeds stay apart."""
    seeds, n = (4, 9), 3
    members = [s + 100 * i for s in seeds for i in range(n)]
    agents = build(kind, name, members)
    before = flat(agents)
    agents.start_equal(n)
    after = flat(agents)
    for k, seed in enumerate(seeds):
        alone = flat(build(kind, name, [seed]))  # agent 0 of the seed, built by itself
        for key, p in after.items():
            for i in range(n):
                assert torch.equal(p[k * n + i], alone[key][0]), (key, seed, i)
            if p[0].numel() > 1 and not torch.equal(before[key][k * n], before[key][k * n + 1]):
                assert not torch.equal(before[key][k * n + 1], p[k * n + 1])  # agent 1 did change
    assert any(not torch.equal(p[0], p[n]) for p in after.values())  # seeds do not start equal


def test_common_start_makes_the_first_updates_of_equal_agents_equal():
    """Equal parameters and fresh optimisers: the same batch moves every agent of a seed identically (the optimiser
    states start equal), while agents started apart stay apart."""
    from algorithms.replay.base import Batch

    agents = build("replay", "TD3", [0, 100, 200])
    agents.start_equal(3)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        obs, nxt = torch.randn(1, 8, 3, generator=g).expand(3, 8, 3), torch.randn(1, 8, 3, generator=g).expand(3, 8, 3)
        act = torch.rand(1, 8, 2, generator=g).expand(3, 8, 2) * 2 - 1
        batch = Batch(obs.contiguous(), act.contiguous(), torch.randn(1, 8, 1, generator=g).expand(3, 8, 1).contiguous(),
                      nxt.contiguous(), torch.ones(3, 8, 1), torch.ones(3, 8, dtype=torch.bool))
        agents.policy_noise = 0.0  # target smoothing draws per-agent noise: switch it off so only the state matters
        agents.update(batch)
    for key, p in flat(agents).items():
        assert torch.equal(p[0], p[1]) and torch.equal(p[0], p[2]), key


SHORT_AC = ["--env", "RandomExtremeAcrobot-v1", "--max_time_steps", "320", "--eval_freq", "160", "--eval_episodes", "1",
            "--envs_per_agent", "2", "--threads", "1", "--env_workers", "0", "--quiet"]


def test_diff_a2c_starts_in_consensus_by_default_and_apart_with_separate(tmp_path):
    assert main_guard(ac_main.run, ["--policy", "DIFF_A2C", *SHORT_AC, "--results_dir", str(tmp_path / "c")]) == 0
    assert main_guard(ac_main.run, ["--policy", "DIFF_A2C", *SHORT_AC, "--results_dir", str(tmp_path / "s"),
                                    "--init", "separate"]) == 0
    common = np.load(tmp_path / "c" / "DIFF_A2C_ring_RandomExtremeAcrobot-v1_0_consensus.npy")
    separate = np.load(tmp_path / "s" / "DIFF_A2C_ring_separateinit_RandomExtremeAcrobot-v1_0_consensus.npy")
    assert common[0] == 0.0 and separate[0] > 0.0
    record = json.loads((tmp_path / "s" / "DIFF_A2C_ring_separateinit_RandomExtremeAcrobot-v1_0.json").read_text())
    assert record["config"]["init"] == "separate"
    m = CURVE_NAME.match("DIFF_A2C_ring_separateinit_RandomExtremeAcrobot-v1_0_Agent_2")
    assert m.group("variant") == "ring_separateinit" and m.group("env") == "RandomExtremeAcrobot-v1"


SMALL = dict(env="Pendulum-v1", max_time_steps=400, start_time_steps=200, eval_freq=200, eval_episodes=1,
             batch_size=32, quiet=True, algo={"hidden": (16, 16)})


def test_common_dase_agents_score_alike_at_step_0_and_seeds_batch_as_alone(tmp_path):
    """DASE_TD3 --init common: both agents of a seed play the same actor on the same evaluation episodes at step 0;
    seed 1 batched with seed 0 writes what seed 1 alone writes."""
    both = train(RunConfig(policy="DASE_TD3", seeds=[0, 1], num_agents=2, init="common",
                           results_dir=str(tmp_path / "both"), **SMALL))
    alone = train(RunConfig(policy="DASE_TD3", seed=1, num_agents=2, init="common", results_dir=str(tmp_path / "one"),
                            **SMALL))
    assert both[2][0] == both[3][0] and both[0][0] == both[1][0]
    for a, b in zip(both[2:], alone):
        np.testing.assert_array_equal(a, b)
    assert (tmp_path / "one" / "DASE_TD3_commoninit_Pendulum-v1_1_Agent_0.npy").exists()


def test_a_checkpoint_resumes_only_with_its_own_init(tmp_path):
    kw = dict(policy="DIFF_TD3", seed=0, num_agents=2, checkpoint_freq=100, results_dir=str(tmp_path),
              sharing={"topology": "ring"}, **SMALL)
    Trainer(RunConfig(**kw)).run(stop_at=300)
    path = tmp_path / "checkpoints" / "DIFF_TD3_ring_Pendulum-v1_0.pt"
    state = torch.load(path, weights_only=True)
    assert state["config"]["init"] == "common"
    del state["config"]["init"]  # as a checkpoint made before --init existed: its agents started apart
    torch.save(state, path)
    with pytest.raises(UsageError, match="init='separate', this run has 'common'"):
        train(RunConfig(**kw, resume=True))
    assert len(train(RunConfig(**kw, resume=True, init="separate"))[0]) == 3


def test_no_clipping_with_max_grad_norm_0(tmp_path):
    """--max_grad_norm 0 leaves the gradient as it is: the same update as a threshold no gradient reaches, unlike a
    small one; the command line takes it."""
    from algorithms.onpolicy.a2c import A2C

    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(2, 5, 3, 4, generator=g), "next_obs": torch.randn(2, 5, 3, 4, generator=g),
             "actions": torch.randint(0, 2, (2, 5, 3), generator=g), "rewards": 10 * torch.randn(2, 5, 3, generator=g),
             "terminated": torch.zeros(2, 5, 3), "ended": torch.zeros(2, 5, 3)}
    after = {}
    for norm in (0.0, 1e30, 0.01):
        agent = A2C((4,), 2, None, None, [0, 1], "cpu", True, max_grad_norm=norm)
        agent.update(batch)
        after[norm] = [p.detach().clone() for p in agent.model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(after[0.0], after[1e30]))
    assert not all(torch.equal(a, b) for a, b in zip(after[0.0], after[0.01]))
    assert main_guard(ac_main.run, ["--policy", "DIFF_A2C", *SHORT_AC, "--max_grad_norm", "0",
                                    "--results_dir", str(tmp_path)]) == 0
    assert main_guard(ac_main.run, ["--policy", "A2C", *SHORT_AC, "--max_grad_norm", "-1",
                                    "--results_dir", str(tmp_path / "bad")]) == 2
