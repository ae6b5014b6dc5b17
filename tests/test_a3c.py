"""A3C: the gradient each actor-learner pushes, the n-step targets, and AsyncTrainer's runs, stops and resumes."""
import copy
import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from algorithms.onpolicy.a3c import ActorCritic, Rollout, SharedAdam, nstep_targets, rollout_loss
from utils.envs import atari
from utils.envs.registry import make_env
from utils.errors import Interrupted, UsageError, WorkerDied
from utils.run.config import RunConfig
from utils.run.onpolicy.asynchronous import ACTIONS, ActorLearner, AsyncTrainer, a3c_settings, check_a3c, worker_seed

STEM = "A3C_CartPole-v1_0"


def a3c_config(tmp_path, max_time_steps=3000, eval_freq=1000, eval_episodes=2, checkpoint_freq=0, **kw):
    algo = kw.pop("algo", {"num_processes": 2})
    return RunConfig(policy="A3C", env="CartPole-v1", seed=0, max_time_steps=max_time_steps, start_time_steps=0,
                     eval_freq=eval_freq, eval_episodes=eval_episodes, results_dir=str(tmp_path),
                     checkpoint_freq=checkpoint_freq, quiet=True, algo=algo, **kw)


class RecordingAdam(torch.optim.Adam):
    """Adam that keeps a copy of the gradients it is stepped with (what a worker pushed)."""

    def __init__(self, params, **kw):
        super().__init__(params, **kw)
        self.pushed: list[list[torch.Tensor]] = []

    def step(self, closure=None):
        self.pushed.append([p.grad.clone() for p in self.param_groups[0]["params"]])
        return super().step(closure)


# ---- the gradient a worker pushes ------------------------------------------------------------------------------
def test_each_push_carries_exactly_the_gradient_of_the_workers_own_latest_rollout():
    """The references never zero the worker's local gradients: on torch 2.x their second push is the sum of the
    first two rollouts' gradients. Here the expected gradient is computed on a fresh copy of the model with the
    weights the worker pulled and the rollout it played, for its first and its second push."""
    settings = a3c_settings({"n_steps": 20})
    torch.manual_seed(3)
    shared = ActorCritic(4, 2, 16)
    optimizer = RecordingAdam(shared.parameters(), lr=1e-2)
    learner = ActorLearner(shared, optimizer, make_env("CartPole-v1", actions=ACTIONS, who="A3C"), settings, seed=7)
    pulled = []
    for k in range(2):
        pulled.append(copy.deepcopy(shared.state_dict()))
        rollout = learner.iteration(settings["n_steps"])
        fresh = ActorCritic(**shared.spec())
        fresh.load_state_dict(pulled[k])
        rollout_loss(fresh, rollout, settings["gamma"], settings["gae_lambda"], settings["ent_coef"],
                     settings["vf_coef"]).backward()
        torch.nn.utils.clip_grad_norm_(fresh.parameters(), settings["max_grad_norm"])
        assert len(optimizer.pushed) == k + 1
        for got, want in zip(optimizer.pushed[k], [p.grad for p in fresh.parameters()]):
            assert want.abs().sum() > 0
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7, msg=lambda m: f"push {k + 1}: {m}")
    # the second push was computed at the weights after the first step, not at the first ones
    assert any(not torch.equal(pulled[0][k], pulled[1][k]) for k in pulled[0])


def test_nstep_returns_and_advantages_with_a_termination_and_a_truncation():
    """4 steps, gamma 0.9: step 0 goes on to s_1; step 1 terminates (its next value 100 is never used); step 2 is
    truncated by a time limit (bootstrap with V of its real last observation, 5); step 3 is the rollout's last
    (bootstrap with V of the next observation, 10)."""
    rewards = torch.tensor([1.0, 2.0, 3.0, 4.0])
    values = torch.tensor([0.5, 1.0, 1.5, 2.0])  # V(s_i)
    next_values = torch.tensor([1.0, 100.0, 5.0, 10.0])  # V(s'_i); s'_0 = s_1
    terminated = torch.tensor([False, True, False, False])
    truncated = torch.tensor([False, False, True, False])
    R, A = nstep_targets(rewards, values, next_values, terminated, truncated, gamma=0.9)
    # R_3 = 4 + .9*10 = 13; R_2 = 3 + .9*5 = 7.5; R_1 = 2; R_0 = 1 + .9*R_1 = 2.8; A = R - V
    torch.testing.assert_close(R, torch.tensor([2.8, 2.0, 7.5, 13.0]))
    torch.testing.assert_close(A, torch.tensor([2.3, 1.0, 6.0, 11.0]))
    # GAE lambda 0.5: deltas 1 + .9*1 - .5 = 1.4, 2 - 1 = 1, 3 + 4.5 - 1.5 = 6, 4 + 9 - 2 = 11; only A_0 looks
    # ahead (A_0 = 1.4 + .9*.5*A_1 = 1.85); the returns stay the n-step ones
    R, A = nstep_targets(rewards, values, next_values, terminated, truncated, gamma=0.9, gae_lambda=0.5)
    torch.testing.assert_close(R, torch.tensor([2.8, 2.0, 7.5, 13.0]))
    torch.testing.assert_close(A, torch.tensor([1.85, 1.0, 6.0, 11.0]))


def test_loss_is_the_summed_policy_entropy_and_value_terms():
    torch.manual_seed(1)
    model = ActorCritic(3, 2, 8)
    obs = torch.randn(4, 3)
    rollout = Rollout(obs, torch.tensor([0, 1, 1, 0]), torch.tensor([1.0, 0.0, 1.0, 1.0]),
                      torch.tensor([False, False, True, False]), torch.zeros(4, dtype=torch.bool), torch.randn(4, 3))
    dist, v = model(obs)
    R, A = nstep_targets(rollout.rewards, v.detach(), model.value(rollout.next_obs).squeeze(-1).detach(),
                         rollout.terminated, rollout.truncated, 0.99)
    want = (-(dist.log_prob(rollout.actions) * A) - 0.01 * dist.entropy() + 0.5 * (R - v) ** 2).sum()
    torch.testing.assert_close(rollout_loss(model, rollout), want)


def test_box_actions_are_clipped_for_the_environment_and_learned_unclipped():
    torch.manual_seed(0)
    env = make_env("Pendulum-v1", actions=ACTIONS, who="A3C")
    model = ActorCritic(3, 1, 8, low=env.action_space.low, high=env.action_space.high)
    with torch.no_grad():
        model.log_std.fill_(2.0)  # std e^2: most samples fall outside [-2, 2]
    a, env_a = model.act(torch.zeros(64, 3))
    assert (np.abs(env_a) <= 2.0).all() and (a.abs() > 2.0).any()
    np.testing.assert_array_equal(env_a, np.clip(a.numpy(), -2.0, 2.0))
    greedy, _ = model.act(torch.zeros(1, 3), greedy=True)
    torch.testing.assert_close(greedy, model.policy(torch.zeros(1, 3)).detach())
    learner = ActorLearner(model, SharedAdam(model.parameters()), env, a3c_settings({"n_steps": 5}), seed=1)
    rollout = learner.iteration(5)
    assert rollout.actions.shape == (5, 1) and model.log_std.grad is not None


def test_shared_adam_state_lives_in_shared_memory():
    model = ActorCritic(4, 2, 8).share_memory()
    optimizer = SharedAdam(model.parameters())
    tensors = [v for s in optimizer.state.values() for v in s.values()]
    assert tensors and all(t.is_shared() for t in tensors)
    optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    assert all(v.is_shared() for s in optimizer.state.values() for v in s.values())


def test_settings_are_checked():
    assert a3c_settings({})["n_steps"] == 20 and a3c_settings({"lr": 7e-4})["lr"] == 7e-4
    for bad in ({"learning_rate": 1e-3}, {"n_steps": 0}, {"gamma": 1.5}, {"num_processes": 2.5}):
        with pytest.raises(UsageError):
            a3c_settings(bad)
    assert worker_seed(5, 0) == 1005 and worker_seed(5, 1) == 2005 and worker_seed(5, 1, 3000) != 2005


# ---- runs ---------------------------------------------------------------------------------------------------------
def test_a_short_run_writes_a_complete_curve_and_its_record_per_seed(tmp_path):
    curves = AsyncTrainer(a3c_config(tmp_path, seeds=[0, 1])).run()  # the seeds one after another
    assert len(curves) == 2 and all(c.shape == (4,) for c in curves)  # steps 0, 1000, 2000, 3000
    for seed, curve in zip([0, 1], curves):
        stem = f"A3C_CartPole-v1_{seed}"
        np.testing.assert_array_equal(np.load(tmp_path / f"{stem}.npy"), curve)
        record = json.loads((tmp_path / f"{stem}.json").read_text())
        assert record["finished_at_step"] == 3000 and record["config"]["algo"]["n_steps"] == 20
        assert record["curves"] == [f"{stem}.npy"] and record["config"]["seed"] == seed
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


def test_a_run_stopped_at_a_checkpoint_resumes_to_a_complete_curve(tmp_path):
    cfg = a3c_config(tmp_path, checkpoint_freq=1000)
    first = AsyncTrainer(cfg).run(stop_at=2000)[0]
    assert first.shape == (3,)
    state = torch.load(tmp_path / "checkpoints" / f"{STEM}.pt", weights_only=True)
    assert state["t"] == 2000 and state["curves"] == [first.tolist()]
    assert float(state["optimizer"]["state"][0]["step"]) > 0  # the workers stepped the shared optimizer
    resumed = AsyncTrainer(a3c_config(tmp_path, checkpoint_freq=1000, resume=True)).run()[0]
    assert resumed.shape == (4,)
    np.testing.assert_array_equal(resumed[:3], first)
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert record["finished_at_step"] == 3000 and [r["step"] for r in record["resumes"]] == [2000]
    assert not (tmp_path / "checkpoints" / f"{STEM}.pt").exists()


def after_first_evaluations(path: Path, count: int, action) -> threading.Thread:
    """A thread that calls ``action`` once the curve at ``path`` holds ``count`` evaluations."""
    def watch():
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if len(np.load(path)) >= count:
                    return action()
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_sigterm_checkpoints_and_resume_completes_the_curve(tmp_path):
    previous = signal.signal(signal.SIGTERM, lambda *a: None)  # a signal arriving after the run must not end pytest
    try:
        after_first_evaluations(tmp_path / f"{STEM}.npy", 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
        with pytest.raises(Interrupted, match="SIGTERM"):
            AsyncTrainer(a3c_config(tmp_path, max_time_steps=500_000, checkpoint_freq=100_000)).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    state = torch.load(tmp_path / "checkpoints" / f"{STEM}.pt", weights_only=True)
    t = state["t"]
    assert t >= 1000 and len(state["curves"][0]) == t // 1000 + 1
    budget = (t // 1000 + 2) * 1000
    resumed = AsyncTrainer(a3c_config(tmp_path, max_time_steps=budget, checkpoint_freq=100_000, resume=True)).run()[0]
    assert resumed.shape == (budget // 1000 + 1,)
    np.testing.assert_array_equal(resumed[:len(state["curves"][0])], state["curves"][0])


def test_sigterm_with_checkpoints_off_still_writes_every_episode_played(tmp_path):
    """A 16-core Pong run stopped by SIGTERM without checkpoints once lost the ~38k steps of episodes played after
    its last evaluation: the log was written only at evaluations and checkpoints. Here evaluations are 100k apart,
    so every row comes from the stop."""
    previous = signal.signal(signal.SIGTERM, lambda *a: None)
    try:
        trainer = AsyncTrainer(a3c_config(tmp_path, max_time_steps=500_000, eval_freq=100_000))
        def stop():  # once the trainer has collected 10 episodes (workers start slowly on a busy machine)
            deadline = time.time() + 120
            while len(trainer.episode_log.rows[0]) < 10 and time.time() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)
        after_first_evaluations(tmp_path / f"{STEM}.npy", 1, stop)
        with pytest.raises(Interrupted, match="no checkpoint"):
            trainer.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    rows = (tmp_path / f"{STEM}_episodes.csv").read_text().splitlines()[1:]
    assert len(rows) == len(trainer.episode_log.rows[0]) >= 10
    assert max(int(r.split(",")[1]) for r in rows) > 0


def test_a3c_runs_on_cpu_when_a_gpu_is_present_and_no_device_is_given(monkeypatch):
    """Auto device picks cuda:0 where a GPU is present; A3C's actor-learners are CPU processes and refuse a GPU,
    so without --device an A3C run on a GPU machine failed with '--device cuda:0 ... drop --device'."""
    import ac_main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert ac_main.build_config(ac_main.parse(["--policy", "A3C", "--env", "CartPole-v1"])).device == "cpu"
    assert ac_main.build_config(ac_main.parse(["--policy", "A2C", "--env", "CartPole-v1"])).device == "cuda:0"
    with pytest.raises(UsageError, match="drop --device"):
        check_a3c(ac_main.build_config(ac_main.parse(["--policy", "A3C", "--env", "CartPole-v1", "--device", "cuda"])))


def test_a3c_refuses_flush_denormals_which_its_spawned_actor_learners_would_not_take(tmp_path, capsys):
    """--flush_denormals is the training process's setting; A3C trains in spawned processes that would not have it,
    so it is refused on one line (exit 2) before anything is written, not silently ignored."""
    import ac_main
    from utils.cli import main_guard

    code = main_guard(ac_main.run, ["--policy", "A3C", "--env", "CartPole-v1", "--max_time_steps", "400", "--eval_freq", "200",
                                    "--results_dir", str(tmp_path / "r"), "--flush_denormals"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--flush_denormals" in err, err
    assert not (tmp_path / "r").exists()


def test_a_killed_worker_stops_the_run_with_worker_died(tmp_path):
    trainer = AsyncTrainer(a3c_config(tmp_path, max_time_steps=500_000))
    after_first_evaluations(tmp_path / f"{STEM}.npy", 1, lambda: os.kill(trainer.processes[1].pid, signal.SIGKILL))
    with pytest.raises(WorkerDied, match="worker 1") as e:
        trainer.run()
    assert "\n" not in str(e.value)
    assert all(p.exitcode is not None for p in trainer.processes)


@pytest.mark.slow
def test_a3c_learns_cartpole(tmp_path):
    """2 workers reach a mean of 475 over 10 greedy evaluation episodes within 500k total steps, with the default
    settings (lr 1e-4, n_steps 20, hidden 64). Measured once on 2 shared CPU cores: 480.9 at step 50,000 (curve
    9.4, 49.0, 405.8, 439.9, 344.5, 480.9), 42 s; the run stops at the first evaluation >= 475."""
    cfg = a3c_config(tmp_path, max_time_steps=500_000, eval_freq=10_000, eval_episodes=10, checkpoint_freq=0)
    start = time.time()
    curve = AsyncTrainer(cfg).run(stop_when=lambda curves: curves[0][-1] >= 475)[0]
    print(f"A3C CartPole-v1: {curve.tolist()} ({time.time() - start:.0f} s)")
    assert curve.max() >= 475, curve.tolist()


def test_reward_scale_scales_what_a_worker_learns_from_not_its_episode_returns():
    """Two workers on the same seeded CartPole with the same model and sampling seed, one with --reward_scale 0.5:
    the same actions, rewards halved in the rollout, the finished episodes' returns the environment's."""
    torch.manual_seed(0)
    model = ActorCritic(4, 2)
    rollouts, finished = [], []
    for scale in (1.0, 0.5):
        settings = a3c_settings({"n_steps": 5, **({"reward_scale": scale} if scale != 1.0 else {})})
        torch.manual_seed(3)
        learner = ActorLearner(model, SharedAdam(model.parameters()), make_env("CartPole-v1", actions=ACTIONS,
                                                                                 who="A3C"), settings, seed=1)
        learner.pull()
        rollouts.append(learner.rollout(60))
        finished.append(list(learner.finished))
    plain, scaled = rollouts
    assert torch.equal(plain.actions, scaled.actions)
    torch.testing.assert_close(scaled.rewards, plain.rewards * 0.5)
    assert finished[0] and finished[0] == finished[1]  # episodes ended, their returns unscaled


def test_the_a3c_references_atari_trunk():
    """--encoder a3c: 16 8x8/4 and 32 4x4/2 convolutions (84x84 -> 20x20 -> 9x9); recurrent, the 2592 flattened
    features go straight into the LSTM of 256 (A3C-ACER-PyTorch); feed-forward, through a layer of 256 (Mnih et al.
    2016). The spec rebuilds it (worker copies, model files), and the default trunk's spec stays as it was."""
    from torch import nn

    for recurrent in (True, False):
        model = ActorCritic(4, 6, 64, recurrent=recurrent, frames=(4, 84, 84), encoder="a3c")
        convs = [m for m in model.fc if isinstance(m, nn.Conv2d)]
        assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == \
            [(4, 16, (8, 8), (4, 4)), (16, 32, (4, 4), (2, 2))]
        linears = [m for m in model.fc if isinstance(m, nn.Linear)]
        if recurrent:
            assert not linears and (model.lstm.input_size, model.lstm.hidden_size) == (32 * 9 * 9, 256)
        else:
            assert [(m.in_features, m.out_features) for m in linears] == [(32 * 9 * 9, 256)]
        assert model.policy.in_features == 256 and model.spec()["encoder"] == "a3c"
        copy_ = ActorCritic(**model.spec())
        assert [p.shape for p in copy_.parameters()] == [p.shape for p in model.parameters()]
        frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8).float()
        if recurrent:
            _, actions, state = model.act(frames, state=model.initial_state(3))
        else:
            _, actions = model.act(frames)
        assert actions.shape == (3,)
    assert "encoder" not in ActorCritic(4, 6, 64, recurrent=True, frames=(4, 84, 84)).spec()
    with pytest.raises(ValueError):
        ActorCritic(4, 2, 64, encoder="a3c")  # flat observations have no trunk to swap


@pytest.mark.skipif(not atari.available(), reason="needs ale-py")
def test_an_a3c_workers_atari_episodes_are_whole_games_at_their_own_score():
    """A worker on Space Invaders (one learner episode per life, rewards clipped) reports whole games at their
    unclipped score and length: those of a plain copy of the game replayed with the worker's actions
    (tests/test_episode_log.py's ``games_of``)."""
    from tests.test_episode_log import games_of
    env = make_env("SpaceInvadersNoFrameskip-v4", actions=("discrete",), who="A3C")
    model = ActorCritic(4, env.action_space.n, 16, frames=(4, 84, 84), encoder="a3c")
    learner = ActorLearner(model, SharedAdam(model.parameters()), env, a3c_settings({"n_steps": 100}), seed=5)
    actions = torch.cat([learner.rollout(100).actions.reshape(-1) for _ in range(12)]).numpy()
    expected = games_of("SpaceInvadersNoFrameskip-v4", [5], actions[:, None])
    assert len(expected) >= 2 and learner.finished == [(score, length) for _, _, score, length in expected]


@pytest.mark.skipif(not atari.available(), reason="needs ale-py")
def test_an_a3c_worker_resumed_from_an_older_checkpoint_reports_lives():
    """A run resumed from a checkpoint made before whole-game rows (``whole_games`` False) goes on logging its
    episodes as they were: one per life, the clipped rewards the worker learns from."""
    env = make_env("SpaceInvadersNoFrameskip-v4", actions=("discrete",), who="A3C")
    model = ActorCritic(4, env.action_space.n, 16, frames=(4, 84, 84), encoder="a3c")
    settings = {**a3c_settings({"n_steps": 100}), "whole_games": False}
    learner = ActorLearner(model, SharedAdam(model.parameters()), env, settings, seed=5)
    rollouts = [learner.rollout(100) for _ in range(12)]
    rewards = torch.cat([r.rewards for r in rollouts]).tolist()
    ends = torch.cat([r.terminated | r.truncated for r in rollouts]).tolist()
    lives, ret, length = [], 0.0, 0
    for r, end in zip(rewards, ends):
        ret, length = ret + r, length + 1
        if end:
            lives.append((ret, length))
            ret, length = 0.0, 0
    assert len(lives) >= 4 and learner.finished == lives and all(r <= n for r, n in lives)  # clipped: <= 1 a step
