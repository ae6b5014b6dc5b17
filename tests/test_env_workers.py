"""Environments in worker processes, evaluation beside training: the same numbers as one process, blocking."""
import numpy as np
import pytest
import torch

import DASE_main
from utils.cli import main_guard
from utils.envs.workers import EnvWorkers, LocalEnvs
from utils.run import RunConfig, Trainer


def config(tmp_path, workers, env="Pendulum-v1", **kw) -> RunConfig:
    return RunConfig(**{**dict(policy="DASE_TD3", env=env, seeds=[3, 8], seed=3, num_agents=2, max_time_steps=600,
                               start_time_steps=200, eval_freq=100, eval_episodes=3, batch_size=32,
                               results_dir=str(tmp_path), quiet=True, checkpoint_freq=0, env_workers=workers,
                               algo={"hidden": (32, 32)}), **kw})


def files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.npy"))}


# Pendulum: episodes of 200 steps, longer than an evaluation period (two evaluation steps per training step);
# Hopper: episodes that end early by termination, at different steps for different members
@pytest.mark.parametrize("env", ["Pendulum-v1", "Hopper-v5"])
def test_worker_pool_and_background_evaluation_give_the_files_of_one_process(env, tmp_path):
    serial = Trainer(config(tmp_path / "serial", 0, env))
    assert isinstance(serial.envs, LocalEnvs) and serial.setup.eval_pace is None  # blocking evaluation
    serial.run()
    pool = Trainer(config(tmp_path / "pool", 3, env))
    assert isinstance(pool.envs, EnvWorkers) and len(pool.envs.procs) == 3 and pool.setup.eval_pace >= 2
    pool.run()
    a, b = files(tmp_path / "serial"), files(tmp_path / "pool")
    assert len(a) == 8 and a.keys() == b.keys()  # 2 seeds x 2 agents, curves and weights
    for name in a:
        assert a[name] == b[name], f"{name} differs"
    assert all(not p.is_alive() for p in pool.envs.procs), "workers must be gone after the run"


def test_background_evaluation_really_overlaps_training(tmp_path):
    """The evaluation of step 200 is still running when training steps on (its curve entry is written later)."""
    trainer = Trainer(config(tmp_path, 2))
    seen = []
    step = trainer.step

    def spy():
        seen.append((trainer.t, trainer.pending.t if trainer.pending else None))
        step()

    trainer.step = spy
    trainer.run()
    # the evaluation of step 200 runs during the training steps after it, and ends within its period
    assert (200, 200) in seen and (250, 200) in seen
    assert all(p is None or t - p < 100 for t, p in seen)
    assert len(trainer.curves[0]) == 7


def test_checkpoints_taken_in_a_pool_resume_exactly_in_one_process_and_back(tmp_path):
    Trainer(config(tmp_path / "whole", 0, checkpoint_freq=250)).run()
    Trainer(config(tmp_path / "pieces", 2, checkpoint_freq=250)).run(stop_at=250)  # evaluation at 200 done, 300 not
    state = torch.load(tmp_path / "pieces" / "checkpoints" / "DASE_TD3_Pendulum-v1_3.pt", weights_only=True)
    assert state["t"] == 250 and len(state["curves"][0]) == 3
    Trainer(config(tmp_path / "pieces", 0, checkpoint_freq=250, resume=True)).run(stop_at=500)
    Trainer(config(tmp_path / "pieces", 2, checkpoint_freq=250, resume=True)).run()
    assert files(tmp_path / "whole") == files(tmp_path / "pieces")


def test_env_workers_flag_errors(tmp_path, capsys):
    code = main_guard(DASE_main.run, ["--env", "Pendulum-v1", "--env_workers", "-1", "--results_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--env_workers" in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_ctrl_c_to_the_process_group_checkpoints_and_resumes_with_workers(tmp_path):
    """Ctrl-C reaches the workers too: they must outlive it so that the run can checkpoint."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    args = [sys.executable, str(root / "DASE_main.py"), "--policy", "DASE_TD3", "--env", "Pendulum-v1", "--seed", "6",
            "--max_time_steps", "1200", "--start_time_steps", "200", "--eval_freq", "200", "--eval_episodes", "2",
            "--batch_size", "32", "--checkpoint_freq", "600", "--quiet", "--threads", "1"]
    whole = subprocess.run(args + ["--results_dir", str(tmp_path / "whole"), "--env_workers", "0"], timeout=900,
                           capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr
    proc = subprocess.Popen(args + ["--results_dir", str(tmp_path / "cut"), "--env_workers", "2"],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    curve = tmp_path / "cut" / "DASE_TD3_Pendulum-v1_6_Agent_0.npy"
    deadline = time.monotonic() + 900  # a hang guard: progress, not speed, ends the wait
    while not (curve.exists() and len(np.load(curve)) >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "hung"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 130, err
    assert "SIGINT" in err and "--resume" in err and len(err.strip().splitlines()) == 1, err
    resumed = subprocess.run(args + ["--results_dir", str(tmp_path / "cut"), "--env_workers", "2", "--resume"],
                             timeout=900, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert files(tmp_path / "whole") == files(tmp_path / "cut")


def test_an_environment_that_cannot_be_restored_exactly_is_a_one_line_error():
    """A checkpoint's episode log that does not lead to the saved observation (another environment version,
    a non-deterministic environment) is refused, naming the environment, rather than resumed in another state."""
    from utils.envs.registry import make_env
    from utils.envs.replay import EpisodeLog, restore_env
    from utils.errors import UsageError

    env = make_env("Pendulum-v1")
    obs, _ = env.reset(seed=5)
    actions = [np.array([0.5], dtype=np.float32), np.array([-1.0], dtype=np.float32)]
    for a in actions:
        obs, *_ = env.step(a)
    log = EpisodeLog(5, None, actions).to_dict()
    space = env.action_space.np_random.bit_generator.state
    restored, same_obs, _ = restore_env("Pendulum-v1", log, 5, space, np.asarray(obs))
    np.testing.assert_array_equal(same_obs, obs)  # the honest log restores exactly
    log["actions"] = log["actions"] * 0.5  # a log that leads elsewhere
    with pytest.raises(UsageError, match="cannot restore Pendulum-v1 exactly"):
        restore_env("Pendulum-v1", log, 5, space, np.asarray(obs))


def test_a_worker_that_dies_is_reported_not_waited_for():
    """A worker killed from outside (out of memory, a crash) ends the next step with an error that names it and
    says how to go on, instead of a bare EOFError or a hang; the other workers are shut down."""
    import os
    import signal

    from utils.errors import WorkerDied

    envs = EnvWorkers("Pendulum-v1", [0, 100, 1, 101], [100] * 4, 1, 2)
    try:
        os.kill(envs.procs[1].pid, signal.SIGKILL)
        envs.procs[1].join(timeout=10)
        with pytest.raises(WorkerDied, match=r"environment worker 1 exited unexpectedly \(exit code -9\).*--resume"):
            envs.step(np.zeros((4, 1), dtype=np.float32))
        assert envs.closed and not envs.procs[0].is_alive()
    finally:
        envs.close()
