"""Agents on a graph: topologies, mixing weights, diffusion, sampling by neighbour, and their command lines."""
import json

import numpy as np
import pytest
import torch

import DASE_main
from algorithms.common.nets import AgentRNG
from algorithms.sharing.graph import (
    Diffusion,
    adjacency,
    check_adjacency,
    disagreement,
    mixing_matrix,
    neighbours,
    second_eigenvalue_modulus,
)
from utils.cli import main_guard
from utils.errors import UsageError
from utils.run import RunConfig, Trainer, train
from utils.run.files import OWNER_KEY
from utils.run.names import CURVE_NAME, variant_of
from utils.run.replay.learner import Learner
from utils.run.sharing import SharingSettings

GRAPHS = {"ring5": adjacency("ring", 5), "star4": adjacency("star", 4), "complete3": adjacency("complete", 3),
          "path4": np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])}


def test_named_topologies():
    assert adjacency("ring", 4).tolist() == [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]]
    assert adjacency("star", 3).tolist() == [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    assert adjacency("complete", 3).sum() == 6 and not adjacency("none", 3).any()
    assert neighbours(adjacency("complete", 4))[1] == [2, 3, 0]  # i+1, i+2, ...: DPD's peer offsets
    assert neighbours(adjacency("ring", 4))[0] == [1, 3]


@pytest.mark.parametrize("name", list(GRAPHS))
def test_uniform_is_row_stochastic_and_metropolis_doubly_stochastic(name):
    a = GRAPHS[name]
    u, m = mixing_matrix(a, "uniform"), mixing_matrix(a, "metropolis")
    np.testing.assert_allclose(u.sum(1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.sum(1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.sum(0), 1.0, rtol=0, atol=1e-15)
    for w in (u, m):
        assert (w >= 0).all() and ((w > 0) == (a + np.eye(len(a)) > 0)).all()  # weights exactly on the links
    deg = a.sum(1)
    np.testing.assert_allclose(u[a == 1], np.repeat(1.0 / (deg + 1), deg))  # Diff-DAC: 1 / (|N(i)| + 1) each
    if name == "star4":
        assert not np.allclose(u.sum(0), 1.0)  # uniform weights are not doubly stochastic on an irregular graph


@pytest.mark.parametrize("name,rule", [("ring5", "uniform"), ("path4", "metropolis"), ("star4", "metropolis")])
def test_pure_diffusion_shrinks_disagreement_at_the_second_eigenvalue(name, rule):
    a = GRAPHS[name]
    n = len(a)
    w = mixing_matrix(a, rule)
    lam = second_eigenvalue_modulus(w)
    # float64 parameters [2 seeds x n agents, 3, 7]; the limit of W^k x is the stationary average
    p = torch.randn(2 * n, 3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    diffusion = Diffusion(a, rule, 2, torch.device("cpu"))
    diffusion.w = torch.as_tensor(w).expand(2, -1, -1).contiguous()  # float64 weights for a float64 check
    pi = np.real(np.linalg.eig(w.T)[1][:, np.argmax(np.abs(np.linalg.eig(w.T)[0]))])
    pi = torch.as_tensor(pi / pi.sum())
    limit = torch.einsum("j,sj...->s...", pi, p.view(2, n, 3, 7)).unsqueeze(1)
    gaps = []
    for _ in range(40):
        diffusion.combine([p])
        gaps.append(float((p.view(2, n, 3, 7) - limit).norm()))
    rates = np.array(gaps[21:]) / np.array(gaps[20:-1])
    np.testing.assert_allclose(rates, lam, rtol=2e-3)
    assert gaps[-1] < gaps[0] * lam ** 30


def test_link_drops_keep_rows_stochastic_and_are_reproducible():
    a = adjacency("ring", 4)
    make = lambda: Diffusion(a, "uniform", 2, torch.device("cpu"), 0.5, AgentRNG(list(range(8))))  # noqa: E731
    d1, d2 = make(), make()
    ws = [d1.weights() for _ in range(20)]
    for w, w2 in zip(ws, [d2.weights() for _ in range(20)]):
        assert torch.equal(w, w2)  # counter-based streams: the same drops every time
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4))
        assert ((w > 0) <= torch.as_tensor(a + np.eye(4) > 0)).all()  # never a link that is not in the graph
    dropped = sum(float((w[:, torch.as_tensor(a) > 0] == 0).float().mean()) for w in ws) / len(ws)
    assert 0.35 < dropped < 0.65  # about half the messages lost
    m = Diffusion(a, "metropolis", 2, torch.device("cpu"), 0.5, AgentRNG(list(range(8)))).weights()
    torch.testing.assert_close(m.sum(-1), torch.ones(2, 4))  # the lost weight stays with the agent


def test_disagreement_is_diff_dacs_consensus_measure():
    gen = torch.Generator().manual_seed(1)
    params = [torch.randn(6, 4, 5, generator=gen), torch.randn(6, 1, 3, generator=gen)]
    params[1][:3, 0, 0] = 0.0  # a parameter whose mean is 0 in seed 0: left out
    got = disagreement(params, 2)
    for s in range(2):
        flat = np.concatenate([p[3 * s:3 * s + 3].reshape(3, -1).double().numpy() for p in params], axis=1)
        mean, std = flat.mean(0), flat.std(0)
        keep = mean != 0
        assert got[s].item() == pytest.approx(np.mean(np.abs(std[keep] / mean[keep])), rel=1e-12)
    same = [p[:1].expand(3, *p.shape[1:]).contiguous() for p in params]
    assert disagreement(same, 1).item() == 0.0


SMALL = dict(env="Pendulum-v1", max_time_steps=400, start_time_steps=200, eval_freq=200, eval_episodes=1,
             batch_size=32, quiet=True, checkpoint_freq=0, algo={"hidden": (16, 16)})


def learner_after_warmup(policy, n, sharing, seeds=(0,)):
    settings = SharingSettings.of(policy, n, sharing)
    settings.check()
    member_seeds = [s + 100 * i for s in seeds for i in range(n)]
    low, high = -np.ones(1), np.ones(1)
    learner = Learner("TD3", {"hidden": (8, 8)}, member_seeds, n, 3, 1, low, high, buffer_size=4000, batch_size=64,
                      updates_per_step=1, device=torch.device("cpu"), sharing=settings)
    rng = np.random.default_rng(0)
    for _ in range(300):
        m = len(member_seeds)
        learner.store(rng.standard_normal((m, 3)), rng.uniform(-1, 1, (m, 1)), rng.standard_normal(m),
                      rng.standard_normal((m, 3)), rng.random(m) < 0.05, None)
    return learner


def test_a_complete_graph_makes_every_agent_equal_after_the_first_combine():
    learner = learner_after_warmup("DIFF_TD3", 4, {"topology": "complete"}, seeds=(0, 5))
    before = learner.agents.actor.net.layers[0].weight.detach().clone()
    assert not torch.equal(before[0], before[1])
    learner.update_once()
    for net in (learner.agents.actor, learner.agents.critic):
        for p in net.parameters():
            for s in range(2):
                for i in range(1, 4):
                    assert torch.equal(p[4 * s], p[4 * s + i])  # bit for bit
            assert not torch.equal(p[0], p[4])  # seeds stay apart (one block each)
    # targets are not mixed: they follow their own online network by the Polyak update
    targets = learner.agents.critic_target.q1.net.layers[0].weight
    assert not torch.equal(targets[0], targets[1])


def test_dase_on_a_graph_samples_only_own_and_neighbour_rows_uniformly():
    n = 5
    learner = learner_after_warmup("DASE_TD3", n, {"topology": "ring"})
    counts = np.zeros((n, n))
    for _ in range(40):
        batch = learner.scheme.sample(learner.buffer, 64, learner.sampler)
        # the writer of every sampled row, read back from the buffer's tag
        rows = torch.stack([torch.where((learner.buffer.obs[0] == batch.obs[m, :, None]).all(-1))[1]
                            for m in range(n)])
        writers = learner.buffer.writer[0, rows].long()
        for m in range(n):
            counts[m] += np.bincount(writers[m].numpy(), minlength=n)
        assert torch.equal(batch.own, writers == torch.arange(n).view(-1, 1))
    allowed = adjacency("ring", n) + np.eye(n)
    assert (counts[allowed == 0] == 0).all()  # never a non-neighbour's transition
    expected = counts.sum(1, keepdims=True) / 3
    chi2 = ((counts - expected) ** 2 / expected)[allowed > 0].sum()
    assert chi2 < 30  # 10 degrees of freedom: p < 0.001 above ~29.6


def test_dpd_on_a_ring_distils_only_from_neighbours():
    learner = learner_after_warmup("DPD_TD3", 4, {"topology": "ring", "dpd_batch_size": 16})
    assert [p.tolist() for p in learner.scheme.peer_slots] == [[1, 2, 3, 0], [3, 0, 1, 2]]
    star = SharingSettings.of("DPD_TD3", 4, {"topology": "star"})
    with pytest.raises(UsageError, match="DPD on this graph"):
        star.check()


def seed_runs(tmp_path, policy, sharing, n, **kw):
    cfg = RunConfig(policy=policy, seed=0, num_agents=n, results_dir=str(tmp_path / policy), sharing=sharing,
                    save_model=True, models_dir=str(tmp_path / policy / "models"), **{**SMALL, **kw})
    return cfg, train(cfg)


@pytest.mark.parametrize("policy", ["DASE_TD3", "DIFF_TD3"])
def test_a_graph_without_links_is_independent_agents(policy, tmp_path):
    """DASE sampling only its own rows, or diffusion with no neighbours (agents started apart), equals TD3 runs of
    the agents' seeds: the same networks, and the same curves once each TD3 run plays the evaluation episodes of the
    run it stands in for (every agent of a run of seed 0 plays those of seed 0 + 100: --eval_seed_offset 100 - 100 i
    for the TD3 run of seed 100 i)."""
    n = 3
    cfg, curves = seed_runs(tmp_path, policy, {"topology": "none"}, n, buffer_size=3000, init="separate")
    for i in range(n):
        alone_cfg = RunConfig(policy="TD3", seed=100 * i, results_dir=str(tmp_path / f"td3_{i}"), save_model=True,
                              models_dir=str(tmp_path / f"td3_{i}" / "models"), buffer_size=1000,
                              eval_seed_offset=100 - 100 * i, **SMALL)
        alone = train(alone_cfg)
        np.testing.assert_array_equal(curves[i], alone[0])
        mine = torch.load(tmp_path / policy / "models" / f"{cfg.agent_names()[i]}.pt", weights_only=True)
        theirs = torch.load(tmp_path / f"td3_{i}" / "models" / f"{alone_cfg.stem}.pt", weights_only=True)
        for net in (n for n in theirs if n != OWNER_KEY):  # the networks; each file names its own run
            for k in theirs[net]:
                assert torch.equal(mine[net][k], theirs[net][k]), (i, net, k)


def test_diffusion_runs_write_their_consensus_and_resume_exactly(tmp_path):
    kw = dict(policy="DIFF_TD3", seed=2, num_agents=4, sharing={"topology": "ring", "link_drop": 0.3}, init="separate",
              **{**SMALL, "max_time_steps": 600, "checkpoint_freq": 100})
    full = train(RunConfig(results_dir=str(tmp_path / "full"), **kw))
    Trainer(RunConfig(results_dir=str(tmp_path / "cut"), **kw)).run(stop_at=300)
    resumed = train(RunConfig(results_dir=str(tmp_path / "cut"), resume=True, **kw))
    for a, b in zip(full, resumed):
        np.testing.assert_array_equal(a, b)
    stem = "DIFF_TD3_ring_drop0.3_separateinit_Pendulum-v1_2"
    c_full = np.load(tmp_path / "full" / f"{stem}_consensus.npy")
    c_cut = np.load(tmp_path / "cut" / f"{stem}_consensus.npy")
    assert c_full.shape == (4,) and np.array_equal(c_full, c_cut)
    assert c_full[-1] < c_full[0]  # averaging with neighbours pulls the agents together
    assert CURVE_NAME.match(f"{stem}_Agent_3").group("variant") == "ring_drop0.3_separateinit"


def test_names_carry_the_graph():
    assert variant_of({"topology": "complete"}) == ""
    assert variant_of({"topology": "ring", "diffusion_weights": "metropolis", "kl_div_var": "matched"}) == \
        "matched_ring_metropolis"
    token = variant_of({"adjacency": [[0, 1], [1, 0]]})
    assert token.startswith("adj") and len(token) == 11 and token != variant_of({"adjacency": [[0, 0], [0, 0]]})
    m = CURVE_NAME.match(f"DIFF_DASE_SAC_{token}_Hopper-v5_3_Agent_1")
    assert (m.group("method"), m.group("alg"), m.group("variant"), m.group("env")) == ("DIFF_DASE", "SAC", token,
                                                                                      "Hopper-v5")


BASE = ["--env", "Pendulum-v1", "--max_time_steps", "400", "--start_time_steps", "200", "--eval_freq", "200",
        "--eval_episodes", "1", "--quiet", "--threads", "1"]


@pytest.mark.parametrize("args,needle", [
    (["--policy", "DASE_TD3", "--adjacency", "[[0,2],[2,0]]"], "0 or 1"),
    (["--policy", "DASE_TD3", "--adjacency", "[[0,1],[0,0]]"], "symmetric"),
    (["--policy", "DASE_TD3", "--adjacency", "[[1,1],[1,0]]"], "diagonal"),
    (["--policy", "DASE_TD3", "--adjacency", "[[0,1,1],[1,0,1],[1,1,0]]"], "3 x 3, the run has 2 agents"),
    (["--policy", "DASE_TD3", "--adjacency", "[[0,1],[1,0"], "cannot read"),
    (["--policy", "DASE_TD3", "--adjacency", "no/such/file.npy"], "cannot read"),
    (["--policy", "DASE_TD3", "--adjacency", "[1, 0]"], "square"),
    (["--policy", "DASE_TD3", "--num_agents", "1", "--topology", "ring"], "has no links"),
    (["--policy", "DIFF_TD3", "--num_agents", "1"], "at least 2"),
    (["--policy", "TD3", "--topology", "ring"], "single-agent"),
    (["--policy", "DPD_TD3", "--diffusion"], "no diffusion form"),
    (["--policy", "DIFF_TD3", "--link_drop", "1.5"], "[0, 1)"),
    (["--policy", "DASE_TD3", "--link_drop", "0.1"], "apply to diffusion"),
    (["--policy", "DASE_TD3", "--topology", "ring", "--adjacency", "[[0,1],[1,0]]"], "give one of them"),
    (["--policy", "DPD_TD3", "--num_agents", "4", "--topology", "star"], "DPD on this graph"),
])
def test_malformed_graphs_are_one_line_exit_2(args, needle, tmp_path, capsys):
    code = main_guard(DASE_main.run, BASE + args + ["--results_dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "r").exists()


def test_adjacency_files_and_the_diffusion_flag(tmp_path):
    matrix = adjacency("star", 3)
    np.save(tmp_path / "g.npy", matrix)
    np.savetxt(tmp_path / "g.txt", matrix, fmt="%d")
    stems = []
    for source in (str(tmp_path / "g.npy"), str(tmp_path / "g.txt"), json.dumps(matrix.tolist())):
        cfg = DASE_main.build_config(DASE_main.parse(BASE + ["--policy", "TD3", "--diffusion", "--num_agents", "3",
                                                             "--adjacency", source]))
        assert cfg.policy == "DIFF_TD3" and cfg.sharing["adjacency"] == matrix.tolist()
        stems.append(cfg.stem)
    assert len(set(stems)) == 1 and "_adj" in stems[0]
    assert check_adjacency(matrix, 3).dtype == np.int64
    ring = DASE_main.build_config(DASE_main.parse(BASE + ["--policy", "DIFF_TD3"]))
    assert ring.num_agents == 4 and ring.stem == "DIFF_TD3_ring_Pendulum-v1_0"  # Diff-DAC's default: a ring
    dase = DASE_main.build_config(DASE_main.parse(BASE + ["--policy", "DASE_TD3", "--topology", "complete"]))
    assert dase.stem == "DASE_TD3_Pendulum-v1_0"  # complete is today's DASE, same files
