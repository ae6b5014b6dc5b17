"""--sync_freq K: Diff-DAC's reference gossip with bounded asynchrony (GALA's gossip buffer), simulated in lockstep
with message delays; against an independent event-by-event simulation in plain Python."""
import math

import numpy as np
import pytest
import torch

import ac_main
from algorithms.common.nets import AgentRNG
from algorithms.sharing.graph import Diffusion, LazyGossip, adjacency
from utils.cli import main_guard
from utils.run import RunConfig, Trainer, train

SEEDS, N = 2, 4


def delays_from(rng: AgentRNG, mean: float) -> np.ndarray:
    """A step's delays [S, n(receiver), n(sender)] from the same stream: geometric on {0, 1, ...} with this mean."""
    u = 1.0 - rng.uniform(N).view(SEEDS, N, N).double().numpy()
    return np.floor(np.log(u) / math.log(mean / (1.0 + mean))).astype(np.int64)


class Plain:
    """The rule of the issue, learner by learner and message by message, in float64 numpy."""

    def __init__(self, adj, w, k, theta):
        self.adj, self.w, self.k = adj, w, k
        self.msg = theta.copy()  # [S, n, P]
        self.msg_step = np.zeros((SEEDS, N), dtype=np.int64)
        self.pending = np.zeros((SEEDS, N, N), dtype=bool)  # [s, receiver, sender]
        self.arrive = np.zeros((SEEDS, N, N), dtype=np.int64)
        self.read = np.broadcast_to(adj.astype(bool), (SEEDS, N, N)).copy()
        self.skips = np.zeros((SEEDS, N), dtype=np.int64)
        self.max_skips = np.zeros((SEEDS, N), dtype=np.int64)
        self.waits_on_current = 0
        self.taken_early = 0  # messages still on their way, taken by a learner that waits for them
        self.t = 0

    def step(self, theta, delays):
        self.t += 1
        t = self.t
        for s in range(SEEDS):
            for j in range(N):
                outs = [i for i in range(N) if self.adj[i, j]]
                if all(self.read[s, i, j] for i in outs):
                    self.msg[s, j] = theta[s, j]
                    self.msg_step[s, j] = t
                    for i in outs:
                        self.pending[s, i, j], self.arrive[s, i, j], self.read[s, i, j] = True, t + delays[s, i, j], False
        new = theta.copy()
        for s in range(SEEDS):
            for i in range(N):
                ins = [j for j in range(N) if self.adj[i, j]]
                ready = all(self.pending[s, i, j] and self.arrive[s, i, j] <= t for j in ins)
                if not ready and self.skips[s, i] < self.k:
                    self.skips[s, i] += 1
                    self.max_skips[s, i] = max(self.max_skips[s, i], self.skips[s, i])
                    continue
                acc = self.w[i, i] * theta[s, i]
                for j in ins:
                    if self.pending[s, i, j]:
                        acc = acc + self.w[i, j] * self.msg[s, j]
                        self.taken_early += int(self.arrive[s, i, j] > t)
                    else:  # waiting for a message not yet published: the neighbour's parameters now
                        acc = acc + self.w[i, j] * theta[s, j]
                        self.waits_on_current += 1
                    self.pending[s, i, j], self.read[s, i, j] = False, True
                new[s, i] = acc
                self.skips[s, i] = 0
        return new


@pytest.mark.parametrize("k,mean", [(1, 1.0), (3, 2.5), (5, 0.5)])
def test_combines_equal_a_plain_event_by_event_simulation(k, mean):
    adj = adjacency("ring", N)
    diffusion = Diffusion(adj, "uniform", SEEDS, torch.device("cpu"))
    seeds = [s * 1000 + i for s in range(SEEDS) for i in range(N)]
    gen = torch.Generator().manual_seed(k)
    theta = torch.randn(SEEDS * N, 3, generator=gen)
    gossip = LazyGossip(diffusion, k, mean, AgentRNG(seeds), [theta])
    mirror = AgentRNG(seeds)
    plain = Plain(adj, diffusion.w[0].double().numpy(), k, theta.double().view(SEEDS, N, 3).numpy())
    skipped = 0
    for _ in range(200):
        theta += 0.1 * torch.randn(theta.shape, generator=gen)  # the local update
        expected = plain.step(theta.double().view(SEEDS, N, 3).numpy(), delays_from(mirror, mean))
        gossip.combine([theta])
        np.testing.assert_allclose(theta.double().view(SEEDS, N, 3).numpy(), expected, rtol=1e-5, atol=1e-5)
        theta.copy_(torch.as_tensor(expected, dtype=torch.float32).view_as(theta))  # no drift between the two
        skipped += int(gossip.stats[1].sum())
    assert plain.max_skips.max() <= k  # nobody skips more than K combines in a row
    assert plain.max_skips.max() == k  # and some learner had to wait after K skips,
    assert plain.taken_early > 0  # taking messages before they arrived
    # in lockstep a neighbour always has a new message by then (its other readers wait at most K steps too), so the
    # rule's last resort, the neighbour's current parameters, is never needed
    assert plain.waits_on_current == 0
    # the statistics agree with the plain count of skips
    assert torch.equal(gossip.skips, torch.as_tensor(plain.skips))


def test_delays_are_geometric_with_the_mean_given():
    gossip = LazyGossip(Diffusion(adjacency("ring", N), "uniform", SEEDS, torch.device("cpu")), 2, 1.5,
                        AgentRNG(list(range(SEEDS * N))), [torch.zeros(SEEDS * N, 1)])
    d = torch.stack([gossip.delays() for _ in range(2000)]).double()
    assert abs(float(d.mean()) - 1.5) < 0.05
    assert abs(float((d == 0).double().mean()) - 1 / 2.5) < 0.01  # P(d = 0) = 1 / (1 + mean)


def test_zero_delay_combines_every_step_as_the_synchronous_rule():
    adj = adjacency("ring", N)
    diffusion = Diffusion(adj, "uniform", SEEDS, torch.device("cpu"))
    theta = torch.randn(SEEDS * N, 5, generator=torch.Generator().manual_seed(0))
    lazy, sync = theta.clone(), theta.clone()
    gossip = LazyGossip(diffusion, 2, 0.0, None, [lazy])
    for _ in range(10):
        gossip.combine([lazy])
        diffusion.combine([sync])
        torch.testing.assert_close(lazy, sync, rtol=1e-6, atol=1e-6)
    skipped, age = gossip.take_stats()
    assert torch.all(skipped == 0) and torch.all(age == 0)


KW = dict(policy="DIFF_A2C", env="CartPole-v1", seed=1, num_agents=4, max_time_steps=3200, start_time_steps=0,
          eval_freq=800, eval_episodes=1, quiet=True, checkpoint_freq=800, env_workers=0,
          sharing={"topology": "ring", "sync_freq": 2, "message_delay": 1.0},
          algo=dict(lr=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
                    hidden_size=16, n_steps=5, envs_per_agent=2, rms_alpha=0.99, rms_eps=1e-5))


def test_a_killed_run_resumed_is_exact(tmp_path):
    full = RunConfig(results_dir=str(tmp_path / "full"), **KW)
    train(full)
    cut = RunConfig(results_dir=str(tmp_path / "cut"), **KW)
    Trainer(cut).run(stop_at=1600)
    train(RunConfig(results_dir=str(tmp_path / "cut"), resume=True, **KW))
    assert full.stem == "DIFF_A2C_ring_sync2_CartPole-v1_1"
    for name in full.agent_names():
        for suffix in ("", "_gossip"):
            a = np.load(tmp_path / "full" / f"{name}{suffix}.npy")
            np.testing.assert_array_equal(a, np.load(tmp_path / "cut" / f"{name}{suffix}.npy"))
        gossip = np.load(tmp_path / "full" / f"{name}_gossip.npy")
        assert gossip.shape == (5, 2) and np.isnan(gossip[0]).all()
        assert np.all((gossip[1:, 0] > 0) & (gossip[1:, 0] < 1)) and np.all(gossip[1:, 1] > 0)
    np.testing.assert_array_equal(np.load(tmp_path / "full" / f"{full.stem}_consensus.npy"),
                                  np.load(tmp_path / "cut" / f"{full.stem}_consensus.npy"))


def test_sync_freq_zero_is_todays_run(tmp_path):
    base = ["--policy", "DIFF_A2C", "--env", "CartPole-v1", "--max_time_steps", "1600", "--eval_freq", "800",
            "--eval_episodes", "1", "--quiet", "--threads", "1"]
    assert main_guard(ac_main.run, [*base, "--results_dir", str(tmp_path / "a")]) == 0
    assert main_guard(ac_main.run, [*base, "--sync_freq", "0", "--results_dir", str(tmp_path / "b")]) == 0
    names = sorted(p.name for p in (tmp_path / "a").glob("*.npy"))
    assert names == sorted(p.name for p in (tmp_path / "b").glob("*.npy")) and names
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize("args,needle", [
    (["--policy", "DIFF_A2C", "--sync_freq", "-1"], "--sync_freq -1"),
    (["--policy", "DIFF_A2C", "--message_delay", "2"], "give --sync_freq too"),
    (["--policy", "DIFF_A2C", "--sync_freq", "2", "--message_delay", "-1"], "--message_delay -1"),
    (["--policy", "A2C", "--sync_freq", "2"], "combines no parameters"),
    (["--policy", "DIFF_A2C", "--sync_freq", "2", "--link_drop", "0.2"], "not both"),
])
def test_bad_gossip_values_are_one_line_exit_2(tmp_path, capsys, args, needle):
    code = main_guard(ac_main.run, ["--env", "CartPole-v1", *args, "--max_time_steps", "800", "--eval_freq", "400",
                                    "--quiet", "--results_dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err
