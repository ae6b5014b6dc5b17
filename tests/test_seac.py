"""SEAC (algorithms/onpolicy/seac.py): its losses and gradients against a plain per-agent loop with explicit importance
ratios, lambda 0 as independent A2C learners, the graph, the command line, and exact resume."""
import json

import numpy as np
import pytest
import torch

import ac_main
from algorithms.onpolicy.a2c import A2C
from algorithms.onpolicy.seac import SEAC
from utils.cli import main_guard


def run_cli(*args: str) -> int:
    try:
        return main_guard(ac_main.run, list(args))
    except SystemExit as e:  # argparse's own refusals
        return e.code


def rollout_of(agents, m: int, t: int, k: int, obs_dim: int, discrete: bool, seed: int = 0) -> dict:
    """A rollout as the learner keeps it, its actions drawn by the agents themselves (so the stored log-probabilities
    are the collectors')."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(m, t, k, obs_dim, generator=g)
    actions, log_mu = [], []
    for step in range(t):
        a, mu = agents.sample(obs[:, step])
        actions.append(a)
        log_mu.append(mu)
    ended = (torch.rand(m, t, k, generator=g) < 0.2).float()
    # the next observation is the next step's where the episode goes on
    next_obs = torch.randn(m, t, k, obs_dim, generator=g)
    next_obs[:, :-1] = torch.where(ended[:, :-1, :, None].bool(), next_obs[:, :-1], obs[:, 1:])
    return {"obs": obs, "next_obs": next_obs, "actions": torch.stack(actions, 1),
            "rewards": torch.randn(m, t, k, generator=g), "terminated": ended * (torch.rand(m, t, k, generator=g) < 0.5),
            "ended": ended, "mu": torch.stack(log_mu, 1)}


def mlp(layers, i: int, x: torch.Tensor) -> torch.Tensor:
    """Member i of a stacked ReLU MLP, as plain products."""
    for j, layer in enumerate(layers):
        x = x @ layer.weight[i] + layer.bias[i, 0]
        x = torch.relu(x) if j < len(layers) - 1 else x
    return x


def plain_loss(agents: SEAC, rollout: dict, i: int, peers: list[int], discrete: bool) -> torch.Tensor:
    """Agent i's SEAC loss as the authors' code computes it, one peer at a time, with torch.distributions."""
    pi, v = agents.model.pi.layers, agents.model.v.layers
    gamma, t = agents.gamma, rollout["obs"].shape[1]

    def dist(i, obs):
        head = mlp(pi, i, obs)
        if discrete:
            return torch.distributions.Categorical(logits=head)
        return torch.distributions.Independent(torch.distributions.Normal(head, agents.model.log_std[i, 0].exp()), 1)

    def returns(k):  # k's n-step returns with k's own critic
        with torch.no_grad():
            r = rollout["rewards"][k]
            out, nxt = torch.zeros_like(r), mlp(v, k, rollout["next_obs"][k, -1]).squeeze(-1)
            run = nxt
            for s in range(t - 1, -1, -1):
                boot = mlp(v, k, rollout["next_obs"][k, s]).squeeze(-1)
                run = r[s] + gamma * (1 - rollout["terminated"][k, s]) * boot * rollout["ended"][k, s] \
                    + gamma * (1 - rollout["ended"][k, s]) * run
                out[s] = run
        return out

    own = dist(i, rollout["obs"][i])
    value = mlp(v, i, rollout["obs"][i]).squeeze(-1)
    adv = returns(i) - value
    loss = -(adv.detach() * own.log_prob(rollout["actions"][i])).mean() + agents.vf_coef * adv.pow(2).mean() \
        - agents.ent_coef * own.entropy().mean()
    for k in peers:
        d = dist(i, rollout["obs"][k])
        log_p = d.log_prob(rollout["actions"][k])
        w = (log_p.exp() / (rollout["mu"][k].squeeze(-1).exp() + 1e-7)).detach()
        other = returns(k) - mlp(v, i, rollout["obs"][k]).squeeze(-1)
        loss = loss + agents.seac_lambda * (-(w * log_p * other.detach()).mean()
                                             + agents.vf_coef * (w * other.pow(2)).mean())
    return loss


@pytest.mark.parametrize("discrete", [True, False])
def test_losses_and_gradients_equal_a_plain_per_agent_loop(discrete):
    """Two seeds of three agents, one seed's agents on a path graph 0-1-2: each agent's loss and its gradient equal
    the per-agent loop's (own A2C terms plus each allowed peer's importance-weighted terms)."""
    obs_dim, act_dim, n = 3, 2, 3
    agents = SEAC((obs_dim,), act_dim, -np.ones(act_dim), np.ones(act_dim), [1, 2, 3, 4, 5, 6], "cpu", discrete,
                  hidden_size=8, seac_lambda=0.7)
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    agents.share(n, path)
    rollout = rollout_of(agents, 6, 5, 1, obs_dim, discrete)  # K = 1: one time axis for the loop
    ours = agents.losses(rollout)["loss"]
    params = list(agents.model.parameters())
    grads = torch.autograd.grad(ours.sum(), params)
    squeeze = {key: value.squeeze(2) for key, value in rollout.items()}
    for m in range(6):
        seed, i = divmod(m, n)
        peers = [seed * n + j for j in range(n) if path[i, j]]
        theirs = plain_loss(agents, squeeze, m, peers, discrete)
        torch.testing.assert_close(ours[m], theirs, rtol=1e-5, atol=1e-6)
        for _p, g, plain in zip(params, grads, torch.autograd.grad(theirs, params, allow_unused=True)):
            torch.testing.assert_close(g[m], plain[m] if plain is not None else torch.zeros_like(g[m]),
                                       rtol=1e-4, atol=1e-6)


def test_lambda_zero_is_an_a2c_update_on_each_agent_s_own_rollout():
    """With seac_lambda 0 each agent's update is that of an A2C learner with SEAC's settings alone on its rollout."""
    obs_dim, seeds = 4, [3, 7]
    seac = SEAC((obs_dim,), 2, None, None, seeds, "cpu", True, hidden_size=16, seac_lambda=0.0)
    rollout = rollout_of(seac, 2, 5, 3, obs_dim, True)
    seac.update(rollout)
    for m, seed in enumerate(seeds):
        alone = A2C((obs_dim,), 2, None, None, [seed], "cpu", True, lr=3e-4, gae_lambda=1.0, hidden_size=16,
                    optimizer="adam", activation="relu", init="orthogonal", adam_eps=1e-3)
        alone.update({key: value[m:m + 1] for key, value in rollout.items() if key != "mu"})
        for p, q in zip(seac.model.parameters(), alone.model.parameters()):
            torch.testing.assert_close(p[m], q[0], rtol=1e-5, atol=1e-7)


def test_snac_is_one_network_trained_on_every_agent_s_rollout():
    """--shared_network: a seed's agents start equal to agent 0 and stay equal, each update that of one A2C network
    (SEAC's settings) on the agents' rollouts side by side."""
    obs_dim = 4
    snac = SEAC((obs_dim,), 3, None, None, [5, 9], "cpu", True, hidden_size=16, seac_lambda=0.0,
                shared_network=True)
    snac.share(2, np.array([[0, 1], [1, 0]]))
    one = A2C((obs_dim,), 3, None, None, [5], "cpu", True, lr=3e-4, gae_lambda=1.0, hidden_size=16,
              optimizer="adam", activation="relu", init="orthogonal", adam_eps=1e-3)
    for step in range(3):
        rollout = rollout_of(snac, 2, 5, 3, obs_dim, True, seed=step)
        snac.update(rollout)
        one.update({key: torch.cat([value[0:1], value[1:2]], dim=2) for key, value in rollout.items() if key != "mu"})
        for p, q in zip(snac.model.parameters(), one.model.parameters()):
            assert torch.equal(p[0], p[1])
            torch.testing.assert_close(p[0], q[0], rtol=1e-5, atol=1e-6)


def test_the_collector_s_log_probability_is_stored_and_weights_are_one_for_a_peer_acting_alike():
    """Agents that start equal give their peers' samples weight ~1 (pi_i = pi_k on k's actions)."""
    agents = SEAC((3,), 2, None, None, [0, 1], "cpu", True, hidden_size=8)
    agents.start_equal(2)
    rollout = rollout_of(agents, 2, 5, 2, 3, True)
    torch.testing.assert_close(agents.losses(rollout)["importance"], torch.ones(2), rtol=1e-5, atol=1e-6)


CARTPOLE = ["--env", "CartPole-v1", "--max_time_steps", "2000", "--eval_freq", "1000", "--eval_episodes", "2",
            "--threads", "1", "--env_workers", "0", "--quiet"]


def test_lambda_zero_and_one_runs_differ_and_a_paused_run_resumes_exactly(tmp_path):
    for lam in ("0", "1"):
        assert run_cli("--policy", "SEAC", *CARTPOLE, "--seac_lambda", lam, "--results_dir", str(tmp_path / lam)) == 0
    a = np.load(tmp_path / "0" / "SEAC_lambda0_CartPole-v1_0_Agent_0.npy")  # independent learners: files of their own
    b = np.load(tmp_path / "1" / "SEAC_CartPole-v1_0_Agent_0.npy")
    assert a.shape == b.shape == (3,)
    record = json.loads((tmp_path / "1" / "SEAC_CartPole-v1_0.json").read_text())["config"]
    assert record["num_agents"] == 2 and record["algo"]["seac_lambda"] == 1.0 and record["algo"]["lr"] == 3e-4
    zero = json.loads((tmp_path / "0" / "SEAC_lambda0_CartPole-v1_0.json").read_text())["config"]
    assert zero["algo"]["seac_lambda"] == 0.0
    # the trained parameters differ: compare the checkpoints of a pause at the same step
    for lam in ("0", "1"):
        assert run_cli("--policy", "SEAC", *CARTPOLE, "--seac_lambda", lam, "--stop_at", "1200",
                       "--checkpoint_freq", "1000", "--results_dir", str(tmp_path / f"cut{lam}")) == 0
    states = [torch.load(tmp_path / f"cut{lam}" / "checkpoints" / f"SEAC{stem}_CartPole-v1_0.pt", weights_only=True)
              for lam, stem in (("0", "_lambda0"), ("1", ""))]
    assert any(not torch.equal(x, y) for x, y in zip(*map(_tensors, states)) if x.shape == y.shape)
    assert run_cli("--policy", "SEAC", *CARTPOLE, "--seac_lambda", "1", "--checkpoint_freq", "1000", "--resume",
                   "--results_dir", str(tmp_path / "cut1")) == 0
    for i in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / "cut1" / f"SEAC_CartPole-v1_0_Agent_{i}.npy"),
                                      np.load(tmp_path / "1" / f"SEAC_CartPole-v1_0_Agent_{i}.npy"))


def _tensors(state):
    """Every tensor of a checkpoint, depth first (the trained parameters among them)."""
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict):
        for value in state.values():
            yield from _tensors(value)
    elif isinstance(state, (list, tuple)):
        for value in state:
            yield from _tensors(value)


@pytest.mark.parametrize("args, words", [
    (["--seac_lambda", "-1"], "--seac_lambda -1 must be >= 0"),
    (["--num_agents", "1"], "needs at least 2"),
    (["--policy", "A2C", "--seac_lambda", "1"], "--seac_lambda applies to SEAC, not A2C"),
    (["--shared_network"], "give --seac_lambda 0 with it"),
])
def test_bad_seac_input_is_one_line_exit_2(tmp_path, capsys, args, words):
    argv = ["--policy", "SEAC", *CARTPOLE, "--results_dir", str(tmp_path / "out"), *args]
    assert run_cli(*argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
