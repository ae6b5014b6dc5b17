"""One run past one machine (utils/distributed): the evolver's cross-entropy step against numpy, a local Ray run
whose learner stores every actor's steps and writes the single-machine files, an actor killed mid-run, a learner
paused and resumed, and bad input in one line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.runs import run
from utils.distributed import cli
from utils.distributed.actor import actor_level
from utils.distributed.evolver import Schedule, cem_step, elite_count

ROOT = Path(__file__).resolve().parents[1]
ray = pytest.importorskip("ray")


def test_the_cem_step_equals_numpy_on_fixed_parameters():
    rng = np.random.default_rng(0)
    params = {"w": torch.as_tensor(rng.normal(size=(7, 3, 2)), dtype=torch.float32),
              "b": torch.as_tensor(rng.normal(size=(7, 4)) * 5, dtype=torch.float32)}
    scores = np.array([3.0, -1.0, 7.0, 0.5, 7.5, -4.0, 2.0])
    new, elites = cem_step(params, scores, torch.Generator().manual_seed(3))
    assert elite_count(7) == 3 and list(elites) == [4, 2, 0]  # the best 30 %, best first
    gen = torch.Generator().manual_seed(3)
    first, second = (torch.randn((7, 3, 2), generator=gen, dtype=torch.float64).numpy(),
                     torch.randn((7, 4), generator=gen, dtype=torch.float64).numpy())
    for name, noise in (("w", first), ("b", second)):
        chosen = params[name].numpy().astype(np.float64)[[4, 2, 0]]
        mean, std = chosen.mean(0), np.minimum(chosen.std(0), 1.0)  # population std, capped at 1
        np.testing.assert_allclose(new[name].numpy(), (mean + std * noise).astype(np.float32), rtol=1e-6)
    assert (np.std(params["b"].numpy()[[4, 2, 0]], 0) > 1).any()  # the cap mattered


def test_the_schedule_selects_when_all_are_ready_or_late_and_removes_a_learner_left_out_4_times():
    sched = Schedule(3, every=5, seconds=60, lag=4, start=0.0)
    assert sched.ready([6, 6, 5], now=10) is None  # learner 2 has 4 new evaluations, not 5; not late yet
    assert sched.ready([6, 6, 6], now=10) == [0, 1, 2]
    assert sched.select([0, 1, 2], [6, 6, 6], now=10) == [] and sched.since == [6, 6, 6]
    assert sched.ready([8, 7, 6], now=69) is None  # late at 70 only
    assert sched.ready([8, 7, 6], now=70) is None  # only learner 0 has 2 new ones
    counts = [6, 6, 6]
    for k in range(4):  # learners 0 and 1 move on, learner 2 never does
        counts = [counts[0] + 2, counts[1] + 3, 6]
        now = 70 + 60 * k  # 60 s after the last selection
        assert sched.ready(counts, now - 1) is None and sched.ready(counts, now) == [0, 1]
        removed = sched.select([0, 1], counts, now)
        assert removed == ([2] if k == 3 else []) and sched.missed[2] == k + 1
    assert sched.alive == [0, 1] and sched.selections == 5
    sched.alive = [0]
    assert sched.ready([100, 100, 6], now=10_000) is None  # one learner left: no selection


class Remote:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return self.fn(*args)


class FakeLearner:
    """A learner handle whose curve grows by ``pace`` evaluations whenever the driver reads it."""

    def __init__(self, index: int, pace: int):
        self.curve, self.pace, self.received, self.removed = [0.0], pace, [], False
        self.evaluations = Remote(self.grow)
        self.parameters = Remote(lambda: {"w": torch.full((2,), float(index))})
        self.set_parameters = Remote(self.received.append)
        self.remove = Remote(lambda: setattr(self, "removed", True))

    def grow(self):
        self.curve += [float(len(self.curve))] * self.pace
        return list(self.curve)


class FakeRay:
    @staticmethod
    def wait(runs, num_returns, timeout):
        return [r for r in runs if r["done"]], [r for r in runs if not r["done"]]

    @staticmethod
    def get(x):
        return x


def test_the_evolver_breeds_the_learners_that_keep_up_and_removes_one_that_lags():
    """The driver's evolver loop on fake learners: 0 and 1 advance, 2 never does; with --evolve_seconds 0 every
    selection is among 0 and 1, each alive learner gets a draw, and learner 2 is removed at selection 4."""
    import argparse
    import itertools

    handles = [FakeLearner(0, 2), FakeLearner(1, 3), FakeLearner(2, 0)]
    runs = [{"done": False} for _ in handles]
    ticks = itertools.count()

    class Stop:
        @property
        def signum(self):
            if len(handles[0].received) >= 6:  # enough: end the loop as Ctrl-C would
                return 2
            return None

    args = argparse.Namespace(evolve_every=50, evolve_seconds=0.0, evolve_lag=4, elite=0.5)
    selections = cli.evolve(FakeRay, handles, runs, args, Stop(), clock=lambda: float(next(ticks)))
    assert selections == 6 and args.removed == {2: 4} and handles[2].removed and not handles[0].removed
    assert len(handles[2].received) == 3 and len(handles[1].received) == 6  # none from its removal on
    # elite 0.5 of 2: one elite, std 0, so every learner gets its parameters: learner 0's at the first selection
    # (a tie, the first ranked), then learner 1's (its curve grows faster, so its recent scores are higher)
    assert [float(p["w"][0]) for p in handles[0].received] == [0.0] + [1.0] * 5


class Ref:
    def __init__(self, done=False, error=None):
        self.done, self.error = done, error


class WatchRay:
    @staticmethod
    def wait(refs, num_returns, timeout):
        return [r for r in refs if r.done], [r for r in refs if not r.done]

    @staticmethod
    def get(ref):
        if ref.error:
            raise RuntimeError(f"Traceback (most recent call last):\n  ...\n{ref.error}")
        return 0


def test_an_actor_that_ends_early_is_fed_again_and_one_that_raises_ends_the_run():
    """check_actors: an actor whose task returned while its learner trains is started again; one that raised ends
    the run with one line naming it (its learner would wait for blocks forever); ones of finished learners rest."""
    from utils.errors import WorkerDied

    runs = [Ref(), Ref(done=True)]  # learner 0 trains, learner 1 is done
    feeding = [Ref(done=True), Ref(done=True), Ref()]  # actors 0 and 2 feed learner 0, actor 1 learner 1
    started = []

    def feed(i):
        started.append(i)
        return Ref()
    cli.check_actors(WatchRay, feeding, runs, feed)
    assert started == [0] and not feeding[0].done and feeding[1].done  # actor 1's learner is done: left alone
    feeding[2] = Ref(done=True, error="ValueError: the policy's output is NaN")
    with pytest.raises(WorkerDied, match=r"^actor 2 \(feeding learner 0\) failed: ValueError: the policy's output "
                                         r"is NaN; every learner stopped"):
        cli.check_actors(WatchRay, feeding, runs, feed)


def test_the_evolver_ranks_a_dase_group_by_the_mean_of_its_agents():
    from utils.distributed.learner import group_curve

    assert group_curve([[0.0, 10.0, 20.0], [2.0, -10.0, 40.0]]) == [1.0, 0.0, 30.0]
    assert group_curve([[1.0, 2.0], [3.0]]) == [2.0]  # only evaluations every agent has
    assert group_curve([[5.0, 6.0]]) == [5.0, 6.0]


def test_actors_explore_at_levels_spread_up_to_the_noise():
    assert [actor_level(k, 5, 0.1) for k in range(5)] == pytest.approx([0, 0.025, 0.05, 0.075, 0.1])
    assert actor_level(0, 1, 0.1) == 0


FLAGS = ["--policy", "SAC", "--env", "Pendulum-v1", "--hidden_size", "16", "--eval_episodes", "1", "--quiet",
         "--eval_freq", "250", "--start_steps", "250", "--batch_size", "32"]


def test_a_local_run_stores_every_actors_steps_and_writes_the_files(tmp_path):
    out = tmp_path / "r"
    assert run(cli, "--actors", "4", "--block", "25", *FLAGS, "--num_steps", "750", "--results_dir", str(out)) == 0
    curve = np.load(out / "SAC_Pendulum-v1_0.npy")
    stats = np.load(out / "SAC_Pendulum-v1_0_distributed.npy")
    assert curve.shape == (4,) and stats.shape == (4, 7)  # steps/s, queue, lag, four actors' shares
    assert np.isnan(stats[0, [0, 2, 3, 4, 5, 6]]).all() and (stats[1:, 0] > 0).all()  # step 0: nothing stored yet
    steps = np.nansum(stats[1:, 3:] * 250, axis=0)
    assert (steps > 0).all() and steps.sum() == pytest.approx(750)  # all four actors' steps, every one stored
    record = json.loads((out / "SAC_Pendulum-v1_0.json").read_text())
    assert record["finished"] and record["distributed"]["actors"] == 4 and record["distributed"]["learner"] == 0


def test_the_driver_prints_each_learners_evaluations_as_the_scripts_do(tmp_path, capsys):
    """A Ray worker's output does not reach the terminal: the driver prints the learners' lines as they come."""
    loud = [a for a in FLAGS if a != "--quiet"]
    assert run(cli, "--actors", "2", "--learners", "2", *loud, "--num_steps", "500", "--results_dir",
               str(tmp_path / "r")) == 0
    lines = capsys.readouterr().out.splitlines()
    for s in range(2):
        steps = [line.split("|")[1].split()[1] for line in lines if line.startswith(f"SAC_Pendulum-v1_{s} | step")]
        assert steps == ["0/500", "250/500", "500/500"], lines


def test_the_evolver_breeds_the_learners_while_they_train(tmp_path):
    out = tmp_path / "r"
    assert run(cli, "--actors", "2", "--learners", "2", "--evolve", "--evolve_every", "1", *FLAGS, "--num_steps",
               "1000", "--results_dir", str(out)) == 0
    records = [json.loads((out / f"SAC_Pendulum-v1_{s}.json").read_text()) for s in range(2)]
    assert all(r["finished"] for r in records)
    assert records[0]["distributed"]["evolve"] and records[0]["distributed"]["selections"] >= 1


def test_a_paused_learner_resumes_and_finishes(tmp_path, capsys):
    out = str(tmp_path / "r")
    args = ["--actors", "2", *FLAGS, "--num_steps", "750", "--results_dir", out, "--checkpoint_freq", "250"]
    assert run(cli, *args, "--stop_at", "500") == 0
    assert len(np.load(Path(out) / "SAC_Pendulum-v1_0.npy")) == 3
    capsys.readouterr()
    # the same run again without --resume: refused before Ray starts; with other settings: its learner refuses the
    # checkpoint, in one line (not Ray's traceback of the learner)
    assert run(cli, *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already exists: add --resume" in err, err
    assert run(cli, *args, "--resume", "--batch_size", "64") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was made with batch_size=32, this run has 64" in err, err
    assert len(np.load(Path(out) / "SAC_Pendulum-v1_0.npy")) == 3
    assert run(cli, *args, "--resume") == 0
    assert len(np.load(Path(out) / "SAC_Pendulum-v1_0.npy")) == 4
    assert len(np.load(Path(out) / "SAC_Pendulum-v1_0_distributed.npy")) == 4
    assert json.loads((Path(out) / "SAC_Pendulum-v1_0.json").read_text())["finished"]


class ListQueue:
    """The learner's side of a Ray queue, holding given blocks (no Ray)."""

    def __init__(self, blocks):
        self.blocks = list(blocks)

    def qsize(self) -> int:
        return len(self.blocks)

    def get_nowait_batch(self, n: int) -> list:
        taken, self.blocks = self.blocks[:n], self.blocks[n:]
        return taken

    def get(self, block: bool = True, timeout: float | None = None):
        return self.blocks.pop(0)


def block_of(actor: int, steps: int, terminal_at: int | None = None) -> dict:
    """An actor's block for one Pendulum agent: reward actor * 100 + step, terminated at ``terminal_at``."""
    term = np.zeros((steps, 1), dtype=bool)
    if terminal_at is not None:
        term[terminal_at] = True
    return {"obs": np.zeros((steps, 1, 3), np.float32), "actions": np.zeros((steps, 1, 1), np.float32),
            "rewards": (actor * 100.0 + np.arange(steps, dtype=np.float32))[:, None],
            "next_obs": np.ones((steps, 1, 3), np.float32), "terminated": term, "ended": term.copy(),
            "behaviour": None, "version": 0, "actor": actor}


def test_n_step_returns_never_join_two_actors_blocks(tmp_path):
    """Blocks of two actors arrive interleaved; the learner stores each block's last step as an episode cut, so a
    3-step return (read from consecutive rows) stops at its block's end, bootstrapping there, and at a termination."""
    from utils.distributed.learner import DistributedTrainer
    from utils.run.replay.buffer import n_step_returns

    blocks = [block_of(0, 5), block_of(1, 5, terminal_at=2), block_of(0, 4)]
    _, (cfg,) = cli.build([*FLAGS, "--n_step", "3", "--start_steps", "1000", "--num_steps", "2000",
                           "--results_dir", str(tmp_path / "r")])
    trainer = DistributedTrainer(cfg, ListQueue(blocks), refresh_every=100, actors=2)
    try:
        for _ in range(14):
            trainer.step()
        buffer, gamma = trainer.learner.buffer, 0.99
        rewards = np.concatenate([b["rewards"][:, 0] for b in blocks])
        cuts = {4, 9, 13}  # each block's last step
        for row in range(14):
            total, j, not_done = 0.0, 0, 1.0
            while True:  # the plain 3-step return of one actor's stream
                total += gamma ** j * rewards[row + j]
                if row + j == 7:  # actor 1's termination: no bootstrap
                    not_done = 0.0
                    break
                if row + j in cuts or j == 2:
                    break
                j += 1
            reward, _, nd, discount, _ = n_step_returns(buffer, torch.zeros((1, 1), dtype=torch.long),
                                                        torch.tensor([[row]]))
            assert reward.item() == pytest.approx(total, rel=1e-6), row
            assert (nd.item(), discount.item()) == pytest.approx((not_done, gamma ** (j + 1))), row
    finally:
        trainer.close()


def test_the_actors_n_step_targets_follow_the_learners_rule():
    """n_step_targets against a plain loop per writer: up to N steps, cut at an ended episode and at the block's end;
    the bootstrap from the last summed step's next state (not_done 0 only where it terminated)."""
    from utils.distributed.actor import n_step_targets

    rng = np.random.default_rng(0)
    s_len, n, gamma = 9, 3, 0.9
    block = {"rewards": rng.normal(size=(s_len, n)), "next_obs": rng.normal(size=(s_len, n, 2)),
             "terminated": np.zeros((s_len, n), bool), "ended": np.zeros((s_len, n), bool)}
    block["terminated"][2, 0] = block["ended"][2, 0] = True
    block["ended"][5, 1] = True  # a time limit: ended, not terminated
    for n_step in (1, 3, 4):
        reward, discount, next_obs, not_done = n_step_targets(block, n_step, gamma)
        for w in range(n):
            for s in range(s_len):
                total, j = 0.0, 0
                while True:
                    total += gamma ** j * block["rewards"][s + j, w]
                    if block["ended"][s + j, w] or s + j == s_len - 1 or j == n_step - 1:
                        break
                    j += 1
                assert reward[s, w] == pytest.approx(total, rel=1e-5)
                assert discount[s, w] == pytest.approx(gamma ** (j + 1), rel=1e-6)
                np.testing.assert_array_equal(next_obs[s, w], block["next_obs"][s + j, w])
                assert not_done[s, w] == (0.0 if block["terminated"][s + j, w] else 1.0)


@pytest.mark.parametrize("flush", [True, False])
def test_an_actor_rounds_denormals_as_its_learner_does(tmp_path, flush):
    """--flush_denormals reaches the Ray actors (processes of their own): an actor built from the run's settings reads
    and writes float32 numbers below 1.2e-38 as zero exactly when the flag is given, as the learner's process does."""
    from utils.distributed.actor import EnvActor

    flags = [*FLAGS, "--num_steps", "500", "--results_dir", str(tmp_path / "r")] + (["--flush_denormals"] * flush)
    _, (cfg,) = cli.build(flags)
    if not torch.set_flush_denormal(not flush):  # the opposite state first, so that the actor must change it
        pytest.skip("this CPU cannot flush denormals")
    try:
        EnvActor(cfg, 0, 1, 0.1, 25, 0)
        tiny = torch.tensor([1e-39], dtype=torch.float32)
        assert ((tiny * 1.0).item() == 0.0) is flush
    finally:
        torch.set_flush_denormal(False)


def test_the_learner_stores_the_actors_initial_priorities(tmp_path):
    """A block with the actor's |TD errors| [S, members, writers]: each stored row's priority under each member is
    (|td| + eps) ** alpha, not the learner's largest priority."""
    from utils.distributed.learner import DistributedTrainer

    blocks = [block_of(0, 4), block_of(1, 3)]
    rng = np.random.default_rng(1)
    for b in blocks:
        b["td_errors"] = rng.uniform(0.01, 3.0, size=(len(b["rewards"]), 2, 2))
        for k in ("obs", "actions", "next_obs", "rewards", "terminated", "ended"):  # two agents: DASE_SAC's group
            b[k] = np.concatenate([b[k], b[k]], axis=1)
    flags = [*FLAGS, "--policy", "DASE_SAC", "--prioritized", "--per_alpha", "0.7", "--start_steps", "1000",
             "--num_steps", "2000", "--results_dir", str(tmp_path / "r")]
    _, (cfg,) = cli.build(flags)
    trainer = DistributedTrainer(cfg, ListQueue(blocks), refresh_every=100, actors=2)
    try:
        assert "networks" in trainer.latest and "critic_target" in trainer.latest["networks"]
        for _ in range(7):
            trainer.step()
        p = trainer.learner.buffer.priorities.priorities  # [members, rows]
        td = np.concatenate([b["td_errors"] for b in blocks])  # [steps, members, writers]
        expected = (td + 1e-6) ** 0.7
        for step in range(7):
            for w in range(2):
                np.testing.assert_allclose(p[:, step * 2 + w].numpy(), expected[step, :, w], rtol=1e-5)
    finally:
        trainer.close()


def test_the_learner_keeps_the_statistics_of_what_it_stores_and_publishes_them(tmp_path):
    """--normalize_obs: every stored observation joins the learner's statistics (it acts on none itself), and the
    actors receive them with the parameters."""
    from utils.distributed.learner import DistributedTrainer

    blocks = [block_of(0, 4), block_of(1, 3)]
    rng = np.random.default_rng(2)
    for b in blocks:
        b["obs"] = rng.normal(3.0, 2.0, size=b["obs"].shape).astype(np.float32)
    _, (cfg,) = cli.build([*FLAGS, "--normalize_obs", "--start_steps", "1000", "--num_steps", "2000",
                           "--results_dir", str(tmp_path / "r")])
    trainer = DistributedTrainer(cfg, ListQueue(blocks), refresh_every=1, actors=2)
    try:
        for _ in range(7):
            trainer.step()
        norm = trainer.learner.normalizer
        stored = np.concatenate([b["obs"][:, 0] for b in blocks])
        np.testing.assert_allclose(norm.mean.numpy()[0], stored.mean(0), rtol=1e-6)
        trainer.publish()
        np.testing.assert_allclose(trainer.latest["obs_normalizer"]["mean"].numpy()[0], stored.mean(0), rtol=1e-6)
    finally:
        trainer.close()


def test_runs_with_actor_priorities_n_steps_normalised_observations_and_curiosity_finish(tmp_path):
    out = tmp_path / "r"
    assert run(cli, "--actors", "2", "--block", "20", *FLAGS, "--prioritized", "--n_step", "3", "--normalize_obs",
               "--num_steps", "750", "--results_dir", str(out / "n_step")) == 0
    assert len(np.load(out / "n_step" / "SAC_norm_Pendulum-v1_0.npy")) == 4  # --normalize_obs: "norm" in the name
    assert run(cli, "--actors", "2", "--block", "20", *FLAGS, "--prioritized", "--curiosity", "forward",
               "--num_steps", "750", "--results_dir", str(out)) == 0
    (curve,) = [p for p in out.glob("SAC*_Pendulum-v1_0.npy")]
    intrinsic = np.load(curve.with_name(curve.stem + "_intrinsic.npy"))
    assert len(np.load(curve)) == 4 and np.isfinite(intrinsic[-2:]).all() and (intrinsic[-2:, 0] > 0).all()


def test_a_recurrent_learner_stores_the_actors_states_and_restarts_windows_at_block_starts(tmp_path):
    """--seq_encoder: each row keeps the state the actor acted with; a block's first row is marked as a start (its
    windows then restart from that stored state, not from zeros), and its last as an episode cut."""
    from utils.distributed.learner import DistributedTrainer

    _, (cfg,) = cli.build([*FLAGS, "--seq_encoder", "gru", "--seq_len", "4", "--seq_hidden", "8", "--start_steps",
                           "1000", "--num_steps", "2000", "--results_dir", str(tmp_path / "r")])
    blocks = [block_of(0, 5), block_of(1, 5)]
    rng = np.random.default_rng(3)
    for b in blocks:
        b["state"] = rng.normal(size=(5, 1, 8)).astype(np.float32)
        b["first"] = np.zeros((5, 1), np.float32)
    blocks[0]["first"][2] = 1.0  # an episode started inside the block
    trainer = DistributedTrainer(cfg, ListQueue(blocks), refresh_every=100, actors=2)
    try:
        for _ in range(10):
            trainer.step()
        buffer = trainer.learner.buffer
        assert buffer.restart_from_stored and "encoder" in trainer.latest
        np.testing.assert_array_equal(buffer.state[0, :10].numpy(), np.concatenate([b["state"][:, 0] for b in blocks]))
        assert buffer.first[0, :10, 0].tolist() == [1, 0, 1, 0, 0, 1, 0, 0, 0, 0]
        assert buffer.ended[0, :10, 0].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
        batch = buffer.sample(8, trainer.learner.sampler)  # windows of 4 rows: their restart states are the rows'
        restart, stored = batch.sequence["restart"], buffer.state[0, :10]
        assert restart.shape == (1, 8, 4, 8)
        for window in restart[0]:
            assert all((stored == step).all(dim=1).any() for step in window)
    finally:
        trainer.close()


def test_a_recurrent_distributed_run_finishes(tmp_path):
    out = tmp_path / "r"
    assert run(cli, "--actors", "2", "--block", "20", *FLAGS, "--seq_encoder", "gru", "--seq_len", "8",
               "--seq_hidden", "16", "--prev_action", "--num_steps", "750", "--results_dir", str(out)) == 0
    (curve,) = out.glob("SAC*_Pendulum-v1_0.npy")
    assert len(np.load(curve)) == 4


PIXELS = ["--env", "PixelPendulum-v1", "--image_features", "8", "--buffer_size", "500", "--batch_size", "8"]


def stacks_block(actor: int, steps: int, rng, frames: list) -> dict:
    """An actor's block of PixelPendulum stacks (3 frames of 84x84) from its running episode ``frames`` (a list the
    block extends), with no episode end inside it: every stack reaches back into the actor's earlier frames."""
    obs, nxt = [], []
    for _ in range(steps):
        obs.append(np.stack(frames[-3:]))
        frames.append(rng.integers(0, 256, (84, 84), dtype=np.uint8))
        nxt.append(np.stack(frames[-3:]))
    zeros = np.zeros((steps, 1), dtype=bool)
    return {"obs": np.stack(obs)[:, None], "actions": rng.normal(size=(steps, 1, 1)).astype(np.float32),
            "rewards": np.zeros((steps, 1), np.float32), "next_obs": np.stack(nxt)[:, None], "terminated": zeros,
            "ended": zeros.copy(), "behaviour": None, "version": 0, "actor": actor}


def test_a_pixel_learner_rebuilds_every_stack_of_interleaved_blocks(tmp_path):
    """Pixel tasks: blocks of two actors arrive interleaved, mid-episode; each frame is stored once and each block's
    first stacks, whose older frames are the actor's and not the rows before them, are rebuilt from the start's
    head: every stored observation and next observation is the one the actor sent."""
    from utils.distributed.learner import DistributedTrainer

    _, (cfg,) = cli.build([*FLAGS, *PIXELS, "--start_steps", "1000", "--num_steps", "2000", "--results_dir",
                           str(tmp_path / "r")])
    rng = np.random.default_rng(5)
    episodes = [[rng.integers(0, 256, (84, 84), dtype=np.uint8) for _ in range(5)] for _ in range(2)]
    blocks = [stacks_block(k % 2, 4, rng, episodes[k % 2]) for k in range(5)]
    trainer = DistributedTrainer(cfg, ListQueue(blocks), refresh_every=100, actors=2)
    try:
        for _ in range(20):
            trainer.step()
        buffer = trainer.learner.buffer
        assert "encoder" in trainer.latest and buffer.size == 20
        obs, nxt = buffer.observations(torch.zeros((1, 1), dtype=torch.long), torch.arange(20).view(1, -1))
        sent = np.concatenate([b["obs"][:, 0] for b in blocks]), np.concatenate([b["next_obs"][:, 0] for b in blocks])
        np.testing.assert_array_equal(obs["pixels"][0].numpy(), sent[0])
        np.testing.assert_array_equal(nxt["pixels"][0].numpy(), sent[1])
    finally:
        trainer.close()


@pytest.mark.parametrize("env", ["PixelPendulum-v1", "SensorPendulum-v1"])
def test_a_pixel_or_sensor_distributed_run_finishes(tmp_path, env):
    out = tmp_path / "r"
    assert run(cli, "--actors", "2", "--block", "20", *FLAGS, *PIXELS, "--env", env, "--num_steps", "500",
               "--results_dir", str(out)) == 0
    curve = np.load(out / f"SAC_{env}_0.npy")
    assert curve.shape == (3,) and np.isfinite(curve).all()
    assert json.loads((out / f"SAC_{env}_0.json").read_text())["finished"]


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGTERM, False)],
                         ids=["SIGINT-group", "SIGTERM-group", "SIGTERM-driver"])
def test_ctrl_c_stops_every_learner_with_a_checkpoint_and_resume_finishes(tmp_path, signum, to_group):
    """SIGINT or SIGTERM to the driver, or to its whole process group (Ctrl-C in a terminal, timeout, Slurm: Ray's
    processes are in that group too): each learner stops at the end of a step with a checkpoint, the command says so
    in one line and exits 128 + the signal; the same command with --resume finishes the run."""
    out = tmp_path / "r"
    args = ["--actors", "2", "--learners", "2", *FLAGS, "--num_steps", "2000", "--results_dir", str(out),
            "--checkpoint_freq", "250"]
    proc = subprocess.Popen([sys.executable, "-m", "utils.distributed", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(480):
            time.sleep(0.25)
            if all((out / f"SAC_Pendulum-v1_{s}.npy").exists() for s in range(2)):
                break
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        assert proc.wait(timeout=300) == 128 + signum
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = proc.stderr.read().strip()
    name = signal.Signals(signum).name
    assert len(err.splitlines()) == 1 and err.startswith(f"interrupted by {name}: stopped SAC_Pendulum-v1_0"), err
    assert "SAC_Pendulum-v1_1 at step" in err and "continue with --resume" in err
    records = [json.loads((out / f"SAC_Pendulum-v1_{s}.json").read_text()) for s in range(2)]
    assert not any(r.get("finished") for r in records) and records[1]["distributed"]["learner"] == 1
    if signum == signal.SIGTERM:
        return  # resuming is the same after either signal: tested once, after Ctrl-C
    assert run(cli, *args, "--resume") == 0
    for s in range(2):
        assert len(np.load(out / f"SAC_Pendulum-v1_{s}.npy")) == 9
        assert json.loads((out / f"SAC_Pendulum-v1_{s}.json").read_text())["finished"]


class DrainingQueue(ListQueue):
    """A Ray queue's learner side that runs dry: ``get`` waits in vain (``Empty``) once its blocks are taken."""

    def get(self, block: bool = True, timeout: float | None = None):
        from ray.util.queue import Empty

        if not self.blocks:
            raise Empty
        return super().get(block, timeout)


def test_a_learner_stopped_before_its_first_step_resumes_with_one_step_0_evaluation(tmp_path):
    """A learner told to stop before any actor's block came (the CI's Ctrl-C test on a slow start) checkpoints at
    step 0 with step 0's evaluation; resumed, it does not evaluate step 0 again: one evaluation per eval_freq."""
    from utils.distributed.learner import DistributedTrainer
    from utils.errors import Interrupted

    out = tmp_path / "r"
    flags = [*FLAGS, "--num_steps", "500", "--results_dir", str(out), "--checkpoint_freq", "250"]
    _, (cfg,) = cli.build(flags)
    trainer = DistributedTrainer(cfg, DrainingQueue([]), refresh_every=100, actors=1)
    trainer.stopper.signum = int(signal.SIGTERM)
    try:
        with pytest.raises(Interrupted):
            trainer.run()
    finally:
        trainer.close()
    assert len(np.load(out / "SAC_Pendulum-v1_0.npy")) == 1
    _, (cfg,) = cli.build([*flags, "--resume"])
    trainer = DistributedTrainer(cfg, DrainingQueue([block_of(0, 500)]), refresh_every=100, actors=1)
    try:
        (curve,) = trainer.run()
    finally:
        trainer.close()
    saved = np.load(out / "SAC_Pendulum-v1_0.npy")
    assert len(curve) == len(saved) == 3 and saved[0] == saved[1]  # steps 0, 250 (no update before 250), 500
    assert len(np.load(out / "SAC_Pendulum-v1_0_distributed.npy")) == 3


def session_processes(sid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every living (not zombie) process of session ``sid``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_bytes() if proc.name.isdigit() else b""
            fields = stat[stat.rindex(b")") + 2:].split() if stat else []
            if fields and int(fields[3]) == sid and fields[0] != b"Z":
                found.append((int(proc.name), (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
def test_ctrl_c_while_ray_starts_leaves_no_process_behind(tmp_path):
    """Issue 89: Ctrl-C to the whole group while ray.init was starting (its raylet up, its agents coming) exited 130
    but left ray::DashboardAgent and ray::RuntimeEnvAgent alive under init, deaf to SIGTERM. Now: one line, exit 130,
    and no process of the command's session is left (the command runs in a session of its own, so its processes are
    the only ones in it). Since a Ctrl-C let through while Ray started was lost at times under load (CI: the run
    trained on), it is held until the learners' stop handlers are in place: they stop at step 1 with a checkpoint."""
    proc = subprocess.Popen([sys.executable, "-m", "utils.distributed", "--actors", "1", *FLAGS, "--num_steps", "200000",
                             "--results_dir", str(tmp_path / "r")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(1200):  # the raylet started: Ray is half-way up
            time.sleep(0.05)
            if any("raylet/raylet" in cmd for _, cmd in session_processes(proc.pid)) or proc.poll() is not None:
                break
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        try:  # under a loaded CI machine Ray's shutdown of a half-started cluster has taken minutes
            code = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            left = session_processes(proc.pid)
            proc.kill()
            pytest.fail(f"no exit 300 s after Ctrl-C; its session's processes: {left}; its stderr: "
                        f"{proc.communicate()[1][-2000:]}")
        assert code == 130
        err = proc.stderr.read().strip()
        assert len(err.splitlines()) == 1 and "interrupted by SIGINT: stopped" in err and "Traceback" not in err, err
        assert list((tmp_path / "r").rglob("*.pt")), "no checkpoint: the held Ctrl-C did not reach the learner"
        time.sleep(0.5)
        assert session_processes(proc.pid) == []
    finally:
        for pid, _ in session_processes(proc.pid):  # only this test's own processes
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def actor_pids() -> list[str]:
    """The processes of this machine's Ray actors that step environments (``ray::EnvActor...``)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"ray::EnvActor" in (proc / "cmdline").read_bytes():
                pids.append(proc.name)
        except OSError:
            continue
    return pids


def test_a_killed_actor_is_restarted_and_the_run_goes_on(tmp_path):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "utils.distributed", "--actors", "3", *FLAGS, "--num_steps", "2000",
           "--results_dir", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        killed = None
        for _ in range(240):
            time.sleep(0.5)
            found = actor_pids()
            if len(found) >= 3 and (out / "SAC_Pendulum-v1_0.npy").exists():
                killed = int(found[0])
                os.kill(killed, signal.SIGKILL)
                break
        assert killed is not None, "no actor process found"
        assert proc.wait(timeout=600) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(np.load(out / "SAC_Pendulum-v1_0.npy")) == 9


@pytest.mark.slow
def test_four_actors_feeding_one_learner_learn_pendulum(tmp_path):
    """SAC (the DASE paper's: deterministic policy, reward scale 5; 64-wide networks for CI's two cores) fed by 4
    actors exploring at 0-0.1 reaches -400 on Pendulum-v1 (random play: about -1200) within 10k stored steps, and
    its last evaluations stay well above random play. The actors' pace makes each run its own: SAC's small networks
    may learn and then swing back (CI, 2026-12-05: -245 at 5k, -612 at 10k), so it asks for the level reached, not
    held to the end."""
    out = tmp_path / "r"
    assert run(cli, "--actors", "4", "--policy", "SAC", "--env", "Pendulum-v1", "--num_steps", "10000",
               "--start_steps", "1000", "--eval_freq", "1000", "--eval_episodes", "5", "--hidden_size", "64",
               "--quiet", "--results_dir", str(out)) == 0
    curve = np.load(out / "SAC_Pendulum-v1_0.npy")
    assert curve[1:].max() > -400 and curve[-3:].max() > -1000, curve


@pytest.mark.parametrize("args, words", [
    (["--actors", "0"], "--actors 0: at least 1"),
    (["--learners", "0"], "--learners 0: at least 1"),
    (["--evolve"], "--evolve breeds several learners"),
    (["--actors", "2", "--learners", "3"], "--actors 2 < --learners 3: every learner needs an actor"),
    (["--evolve_lag", "0"], "--evolve_lag 0: at least 1"),
    (["--rnd", "--rnd_n_sample", "4"], "--rnd_n_sample: the actors hold no RND model"),
    (["--seeds", "0", "1"], "learner m trains --seed + m"),
    (["--address", "127.0.0.1:1"], "--address 127.0.0.1:1: cannot reach a Ray cluster there"),
    (["--policy", "DPD_TD3"], "DPD_ and DIFF_ learners are not distributed"),
    (["--policy", "DIFF_SAC"], "DPD_ and DIFF_ learners are not distributed"),
    # an unknown policy: the distributed ones listed, not every one the scripts train
    (["--policy", "FOO"], "--policy FOO: the distributed run trains DASE_TD3, DASE_DDPG, TD3, DDPG, DASE_SAC, SAC"),
    (["--actors", "two"], "argument --actors: invalid int value: 'two'"),
    (["--actor", "2"], "unrecognized arguments: --actor 2"),  # no abbreviations: the script's flags go on
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, words):
    base = ["--policy", "SAC", "--env", "Pendulum-v1", "--quiet"]
    assert run(cli, *base, *args, "--results_dir", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_its_errors_and_an_early_ctrl_c_name_the_tool_and_claim_no_curves(tmp_path, capsys, monkeypatch):
    """Its own refusals begin 'python -m utils.distributed: error:', as every tool names itself; Ctrl-C before its
    loop's signal handler (starting Ray, before any evaluation) is one line that claims no saved curves."""
    base = ["--policy", "SAC", "--env", "Pendulum-v1", "--quiet", "--results_dir", str(tmp_path / "out")]
    assert run(cli, *base, "--actors", "0") == 2
    assert capsys.readouterr().err == "python -m utils.distributed: error: --actors 0: at least 1\n"

    def ctrl_c(args, learners):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "train", ctrl_c)
    assert run(cli, *base) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m utils.distributed: interrupted while starting"), err
    assert "saved so far are complete" not in err and not (tmp_path / "out").exists()


def test_without_ray_it_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert run(cli, "--policy", "SAC", "--env", "Pendulum-v1", "--results_dir", str(tmp_path / "o")) == 2
    assert "pip install -r requirements-cluster.txt" in capsys.readouterr().err
