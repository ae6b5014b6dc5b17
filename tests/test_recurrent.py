"""--recurrent: the batched LSTM against torch.nn.LSTMCell, the recurrent A2C loss against a plain per-member,
per-environment loop built from torch's own modules, and whole runs (seeds batched = alone = killed and resumed,
evaluation on several tasks, bad values)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ac_main
from algorithms.common.cells import BatchedLSTMCell
from algorithms.onpolicy.a2c import A2C
from algorithms.onpolicy.recurrent import RecurrentActorCritic
from utils.cli import main_guard


def run_cli(*args: str) -> int:
    return main_guard(ac_main.run, list(args))


def test_lstm_cell_is_torchs_lstm_cell_per_member():
    """Member i is drawn as torch draws an LSTMCell from the same seed, and computes what that cell computes."""
    seeds, fan_in, hidden = [5, 11], 3, 4
    cell = BatchedLSTMCell(fan_in, hidden, [torch.Generator().manual_seed(s) for s in seeds])
    x, h, c = torch.randn(2, 6, fan_in), torch.randn(2, 6, hidden), torch.randn(2, 6, hidden)
    h1, c1 = cell(x, (h, c))
    for i, s in enumerate(seeds):
        torch.manual_seed(s)
        ref = nn.LSTMCell(fan_in, hidden)
        torch.testing.assert_close(cell.w_ih[i], ref.weight_ih.T, rtol=0, atol=0)
        torch.testing.assert_close(cell.w_hh[i], ref.weight_hh.T, rtol=0, atol=0)
        torch.testing.assert_close(cell.b_ih[i, 0], ref.bias_ih, rtol=0, atol=0)
        torch.testing.assert_close(cell.b_hh[i, 0], ref.bias_hh, rtol=0, atol=0)
        eh, ec = ref(x[i], (h[i], c[i]))
        torch.testing.assert_close(h1[i], eh, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(c1[i], ec, rtol=1e-6, atol=1e-6)


def member_modules(model: RecurrentActorCritic, i: int):
    """Member i of a flat-observation recurrent actor-critic as torch modules (fc, cell, pi, v)."""
    fc = nn.Linear(*model.fc.weight.shape[1:])
    cell = nn.LSTMCell(model.lstm.w_ih.shape[1], model.size)
    pi, v = nn.Linear(model.size, model.pi.weight.shape[2]), nn.Linear(model.size, 1)
    with torch.no_grad():
        for lin, batched in ((fc, model.fc), (pi, model.pi), (v, model.v)):
            lin.weight.copy_(batched.weight[i].T)
            lin.bias.copy_(batched.bias[i, 0])
        cell.weight_ih.copy_(model.lstm.w_ih[i].T)
        cell.weight_hh.copy_(model.lstm.w_hh[i].T)
        cell.bias_ih.copy_(model.lstm.b_ih[i, 0])
        cell.bias_hh.copy_(model.lstm.b_hh[i, 0])
    return fc, cell, pi, v


def reference_loss(modules, batch: dict, i: int, gamma: float, ent_coef: float, vf_coef: float) -> torch.Tensor:
    """Member i's recurrent A2C loss, one environment at a time, one step at a time: the state zeroed after an
    episode's end, n-step returns R_t = r_t + gamma R_{t+1} cut at an end (bootstrapped with V of the real next
    observation from the state after the step, unless terminated) and at the rollout's last step."""
    fc, cell, pi, v = modules
    t_len, k_len = batch["obs"].shape[1:3]
    terms = []
    for k in range(k_len):
        state = (batch["h0"][i, k:k + 1], batch["c0"][i, k:k + 1])
        logp, ent, values, boots = [], [], [], []
        for t in range(t_len):
            if t > 0 and batch["ended"][i, t - 1, k]:
                state = (torch.zeros_like(state[0]), torch.zeros_like(state[1]))
            state = cell(torch.tanh(fc(batch["obs"][i, t, k:k + 1])), state)
            dist = torch.distributions.Categorical(logits=pi(state[0])[0])
            logp.append(dist.log_prob(batch["actions"][i, t, k]))
            ent.append(dist.entropy())
            values.append(v(state[0])[0, 0])
            with torch.no_grad():
                nxt = cell(torch.tanh(fc(batch["next_obs"][i, t, k:k + 1])), state)
                boots.append(v(nxt[0])[0, 0])
        ret = 0.0
        for t in reversed(range(t_len)):
            r, term, end = (float(batch[key][i, t, k]) for key in ("rewards", "terminated", "ended"))
            if end or t == t_len - 1:
                ret = r + (0.0 if term else gamma * float(boots[t]))
            else:
                ret = r + gamma * ret
            adv = ret - float(values[t].detach())
            terms.append(-logp[t] * adv + vf_coef * (ret - values[t]) ** 2 - ent_coef * ent[t])
    return torch.stack(terms).mean()


def test_recurrent_a2c_loss_and_gradient_equal_a_plain_loop_with_torch_modules():
    seeds, t_len, k_len, obs_dim, acts, hidden = [3, 8], 6, 3, 4, 2, 5
    agents = A2C((obs_dim,), acts, None, None, seeds, "cpu", True, hidden_size=hidden, recurrent=True)
    g = torch.Generator().manual_seed(1)
    term = (torch.rand(2, t_len, k_len, generator=g) < 0.25).float()
    batch = {"obs": torch.randn(2, t_len, k_len, obs_dim, generator=g),
             "next_obs": torch.randn(2, t_len, k_len, obs_dim, generator=g),
             "actions": torch.randint(0, acts, (2, t_len, k_len), generator=g),
             "rewards": torch.randn(2, t_len, k_len, generator=g), "terminated": term,
             "ended": torch.maximum(term, (torch.rand(2, t_len, k_len, generator=g) < 0.15).float()),
             "h0": torch.randn(2, k_len, hidden, generator=g), "c0": torch.randn(2, k_len, hidden, generator=g)}
    # as environments give it: the next observation of a step inside an episode is the next step's observation
    inside = batch["ended"][:, :-1, :, None] == 0
    batch["next_obs"][:, :-1] = torch.where(inside, batch["obs"][:, 1:], batch["next_obs"][:, :-1])
    assert batch["ended"][:, :-1].sum() >= 2  # state resets inside the rollout are exercised
    out = agents.losses(batch)
    params = list(agents.model.parameters())
    grads = torch.autograd.grad(out["loss"].sum(), params)
    for i in range(2):
        modules = member_modules(agents.model, i)
        expected = reference_loss(modules, batch, i, agents.gamma, agents.ent_coef, agents.vf_coef)
        torch.testing.assert_close(out["loss"][i], expected, rtol=1e-5, atol=1e-6)
        ref = dict(zip(("fc", "cell", "pi", "v"), modules))
        ref_grads = torch.autograd.grad(expected, [p for m in modules for p in m.parameters()])
        fc, cell, pi, v = (list(m.parameters()) for m in modules)
        pairs = {"fc.weight": (fc[0], True), "fc.bias": (fc[1], False), "lstm.w_ih": (cell[0], True),
                 "lstm.w_hh": (cell[1], True), "lstm.b_ih": (cell[2], False), "lstm.b_hh": (cell[3], False),
                 "pi.weight": (pi[0], True), "pi.bias": (pi[1], False), "v.weight": (v[0], True),
                 "v.bias": (v[1], False)}
        by_param = dict(zip([p for m in modules for p in m.parameters()], ref_grads))
        for (name, _), grad in zip(agents.model.named_parameters(), grads):
            p, transposed = pairs[name]
            want = by_param[p].T if transposed else by_param[p]
            torch.testing.assert_close(grad[i].reshape(want.shape), want, rtol=1e-4, atol=1e-6, msg=name)
        assert ref  # the modules were built


# ---- whole runs -----------------------------------------------------------------------------------------------
SHORT = ["--recurrent", "--env", "CartPole-v1", "--max_time_steps", "2400", "--eval_freq", "800",
         "--eval_episodes", "2", "--envs_per_agent", "4", "--hidden_size", "16", "--threads", "1", "--env_workers",
         "0", "--quiet"]


def test_recurrent_seeds_batched_equal_alone_and_a_cut_resume(tmp_path, seed_one_three_ways):
    """Stopped at 1208 steps (mid-rollout: 302 loop steps of 4 environments, n = 5): the checkpoint must hold the
    acting state and the state the rollout began with."""
    curves = seed_one_three_ways(ac_main, ["--policy", "A2C", *SHORT], 1208, tmp_path, ["A2C_lstm_CartPole-v1_1.npy"])
    assert curves[0].shape == (4,)


def test_recurrent_seeds_and_cut_resume_on_a_continuous_task(tmp_path, seed_one_three_ways):
    """The same on Pendulum, where Gaussian actions make every later action and return depend on the exact state
    and parameters (a resume that restarted the acting state from zero, or a member whose update depends on how
    many members share the model, fails here, not on CartPole's argmax evaluations)."""
    args = ["--policy", "A2C", *SHORT, "--env", "Pendulum-v1"]
    curves = seed_one_three_ways(ac_main, args, 1208, tmp_path, ["A2C_lstm_Pendulum-v1_1.npy"])
    assert curves[0].shape == (4,) and len(set(curves[0].tolist())) == 4


def test_recurrent_acting_states_are_zeroed_at_episode_ends_and_replayed_by_the_update(tmp_path):
    """While acting, the state after a step is zero for the environments whose episode ended; at each update,
    replaying the rollout from the state it began with (h0, c0) gives exactly the states the agents acted with."""
    from algorithms.onpolicy.recurrent import masked
    from utils.run import Trainer

    cfg = ac_main.build_config(ac_main.parse(["--policy", "A2C", *SHORT, "--results_dir", str(tmp_path)]))
    trainer = Trainer(cfg)
    learner, agents = trainer.learner, trainer.learner.agents
    acted: list[tuple[np.ndarray, torch.Tensor]] = []  # per step of the current rollout: ended, the state after
    checked = []
    store, update = learner.store, agents.update

    def spy_store(*args, ended=None, **kwargs):
        store(*args, ended=ended, **kwargs)
        acted.append((np.asarray(ended), agents.state[0].clone()))

    def spy_update(rollout):
        with torch.no_grad():
            starts = torch.cat([torch.zeros_like(rollout["ended"][:, :1]), rollout["ended"][:, :-1]], dim=1)
            after = agents.model.unroll(rollout["obs"], (rollout["h0"], rollout["c0"]), starts)[2]
        for t, (_ended, h) in enumerate(acted):
            replayed = masked((after[0][:, t], after[1][:, t]), rollout["ended"][:, t])[0]
            # the same states; last bits may differ (the update encodes T*K observations in one product, acting K)
            torch.testing.assert_close(replayed, h, rtol=1e-5, atol=1e-6)
        checked.append(len(acted))
        acted.clear()
        return update(rollout)
    learner.store, agents.update = spy_store, spy_update
    trainer.run(stop_at=400)
    assert checked and set(checked) == {5}  # every update, n = 5 steps each
    ends = [(e, h) for e, h in acted if e.any()]  # the last rollout, not yet updated
    for ended, h in ends:
        flat = h.reshape(-1, h.shape[-1])
        assert torch.all(flat[torch.as_tensor(ended.reshape(-1))] == 0)


def test_recurrent_evaluation_on_every_task_keeps_one_state_per_task(tmp_path):
    """A ring of recurrent DIFF_A2C agents on task variants: evaluated on all tasks, each agent's own-task score is
    the one an evaluation on its own task alone gives (a state shared between the tasks' blocks would change it)."""
    args = [*SHORT, "--policy", "DIFF_A2C", "--num_agents", "2", "--env", "RandomExtremeCartPole-v1"]
    assert run_cli(*args, "--eval_tasks", "all", "--results_dir", str(tmp_path / "all")) == 0
    assert run_cli(*args, "--eval_tasks", "own", "--results_dir", str(tmp_path / "own")) == 0
    for i in range(2):
        name = f"DIFF_A2C_ring_lstm_RandomExtremeCartPole-v1_0_Agent_{i}"
        curve = np.load(tmp_path / "all" / f"{name}.npy")
        assert curve.shape == (4,) and np.all(curve >= 1)
        np.testing.assert_array_equal(curve, np.load(tmp_path / "own" / f"{name}.npy"))
        tasks = np.load(tmp_path / "all" / f"{name}_tasks.npy")
        assert tasks.shape[-1] == 2


def test_recurrent_greedy_policy_keeps_one_state_per_part():
    """Calls for two blocks of episodes interleaved (as an evaluation on two tasks makes them) give what two
    policies each fed its own block give; a Gaussian head, so that any change of state shows in the actions."""
    from utils.run.onpolicy.rollout import recurrent_policy

    agents = A2C((3,), 2, -np.ones(2), np.ones(2), [4, 9], "cpu", False, hidden_size=8, recurrent=True)
    g = np.random.default_rng(0)
    blocks = [g.normal(size=(5, 2, 4, 3)).astype(np.float32) for _ in range(2)]
    both = recurrent_policy(agents, agents.model)
    apart = [recurrent_policy(agents, agents.model) for _ in range(2)]
    for t in range(5):
        for j in range(2):
            np.testing.assert_array_equal(both(blocks[j][t], part=j), apart[j](blocks[j][t]))
    first, again = recurrent_policy(agents, agents.model), recurrent_policy(agents, agents.model)
    for t in range(3):
        a = first(blocks[0][t])
    assert not np.array_equal(a, again(blocks[0][2]))  # the state matters: step 3 differs from a first step


@pytest.mark.parametrize("policy", ["ACER"])
def test_recurrent_is_refused_where_it_does_not_apply(tmp_path, capsys, policy):
    assert run_cli("--policy", policy, *SHORT, "--results_dir", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--recurrent applies to A2C and A3C" in err[0]
    assert not any(tmp_path.iterdir())


# ---- A3C ------------------------------------------------------------------------------------------------------
def test_recurrent_a3c_loss_equals_the_plain_loop():
    """A3C's recurrent rollout loss (summed over the steps, as the paper accumulates its gradients) is the plain
    loop's mean loss times n, with a termination and a truncation inside the rollout."""
    from algorithms.onpolicy.a3c import ActorCritic, Rollout, rollout_loss

    torch.manual_seed(2)
    model = ActorCritic(4, 3, hidden_size=6, recurrent=True)
    n = 7
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(n, 4, generator=g)
    term = torch.tensor([0, 0, 1, 0, 0, 0, 0], dtype=torch.bool)
    trunc = torch.tensor([0, 0, 0, 0, 1, 0, 0], dtype=torch.bool)
    next_obs = torch.randn(n, 4, generator=g)
    next_obs[:-1] = torch.where((term | trunc)[:-1, None], next_obs[:-1], obs[1:])
    h0 = (torch.randn(1, 6, generator=g), torch.randn(1, 6, generator=g))
    rollout = Rollout(obs, torch.randint(0, 3, (n,), generator=g), torch.randn(n, generator=g), term, trunc,
                      next_obs, h0)
    batch = {"obs": obs.view(1, n, 1, 4), "next_obs": next_obs.view(1, n, 1, 4),
             "actions": rollout.actions.view(1, n, 1), "rewards": rollout.rewards.view(1, n, 1),
             "terminated": term.float().view(1, n, 1), "ended": (term | trunc).float().view(1, n, 1),
             "h0": h0[0].view(1, 1, 6), "c0": h0[1].view(1, 1, 6)}
    expected = reference_loss((model.fc[0], model.lstm, model.policy, model.value), batch, 0, 0.99, 0.01, 0.5)
    got = rollout_loss(model, rollout, gamma=0.99, ent_coef=0.01, vf_coef=0.5)
    torch.testing.assert_close(got, expected * n, rtol=1e-5, atol=1e-5)


def test_recurrent_a3c_worker_carries_its_state_and_zeroes_it_at_episode_ends():
    """An A3C worker's acting state: zeros at the start; each rollout begins from the state the previous one ended
    in, kept without a graph (truncated BPTT: the update back-propagates within its rollout only); and replaying a
    rollout from its start state, zeroed after each episode end, ends exactly in the state the worker acts on next
    (a worker that forgot the zeroing, or kept its start state late, would not)."""
    from algorithms.onpolicy.a3c import ActorCritic, SharedAdam
    from utils.envs.registry import make_env
    from utils.run.onpolicy.asynchronous import ACTIONS, ActorLearner, a3c_settings

    torch.manual_seed(0)
    shared = ActorCritic(4, 2, 8, recurrent=True)
    worker = ActorLearner(shared, SharedAdam(shared.parameters()), make_env("CartPole-v1", actions=ACTIONS, who="A3C"),
                          a3c_settings({}), 1)
    assert all(torch.equal(x, torch.zeros_like(x)) for x in worker.state)
    previous, ends = worker.state, 0
    for _ in range(6):
        worker.pull()
        rollout = worker.rollout(40)
        assert rollout.state is previous and not any(x.requires_grad for x in rollout.state)
        state = rollout.state
        with torch.no_grad():
            for i in range(len(rollout)):
                state = worker.local.step(rollout.obs[i:i + 1], state)[2]
                if rollout.terminated[i] or rollout.truncated[i]:
                    state = worker.local.initial_state()
        ends += int(rollout.terminated.sum() + rollout.truncated.sum())
        for replayed, acting in zip(state, worker.state):
            torch.testing.assert_close(replayed, acting, rtol=0, atol=1e-6)
        previous = worker.state
        worker.push(rollout)
    assert ends >= 4  # episodes ended inside rollouts: the zeroing was exercised


def test_recurrent_a3c_runs_and_names_its_files(tmp_path):
    args = ["--policy", "A3C", "--recurrent", "--env", "CartPole-v1", "--num_processes", "2", "--max_time_steps",
            "2000", "--eval_freq", "1000", "--eval_episodes", "2", "--quiet", "--results_dir", str(tmp_path)]
    assert run_cli(*args) == 0
    curve = np.load(tmp_path / "A3C_lstm_CartPole-v1_0.npy")
    assert curve.shape == (3,) and np.all(curve >= 1)
    import json
    record = json.loads((tmp_path / "A3C_lstm_CartPole-v1_0.json").read_text())
    assert "recurrent" in json.dumps(record)


@pytest.mark.slow
def test_recurrent_a2c_learns_the_velocity_masked_cartpole(tmp_path):
    """Positions only: a feed-forward A2C cannot tell which way the pole moves and stays below 50 (measured over 300k
    steps, 3 seeds, with and without --reward_scale 0.1); recurrent A2C with --reward_scale 0.1, seed 0, measured:
    500, 476, 204, 457, 202 at 110k-150k steps. The bar, a mean above 150 over those five evaluations, needs memory."""
    args = ["--policy", "A2C", "--recurrent", "--env", "VelocityMaskedCartPole-v1", "--reward_scale", "0.1",
            "--max_time_steps", "150000", "--eval_freq", "10000", "--eval_episodes", "10", "--threads", "1",
            "--env_workers", "0", "--quiet", "--results_dir", str(tmp_path)]
    assert run_cli(*args) == 0
    curve = np.load(tmp_path / "A2C_lstm_VelocityMaskedCartPole-v1_0.npy")
    assert curve[-5:].mean() > 150, curve
