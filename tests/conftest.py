import os
from pathlib import Path

import pytest
import torch

from utils.cli import available_cores  # the repository root is on the path: pyproject.toml's pythonpath

ROOT = Path(__file__).resolve().parent.parent


def pytest_xdist_auto_num_workers(config):
    """pytest -n auto: one worker per core this process may use (its affinity, and a cgroup CPU quota where one
    is set: a container's 2 cores on a large host are 2, not the host's count), at most 8."""
    cores = available_cores()
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, min(cores, 8))


def pytest_collection_modifyitems(config, items):
    """The files of slow tests first, the all-slow ones (test_learning.py: minutes of training in two processes
    before its first test ends) at the very front, each file's own order kept: with pytest -n W the other workers
    run the fast files beside them instead of waiting on them at the end."""
    by_file: dict = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item.get_closest_marker("slow") is not None)
    rank = {path: 0 if all(slow) else 1 if any(slow) else 2 for path, slow in by_file.items()}
    items.sort(key=lambda item: rank[item.path])


# pytest -n W (pytest-xdist): W worker processes share the cores, so each keeps its share of torch threads (two
# workers of two threads each on two cores would spin against each other), and so do the runs the tests start as
# subprocesses without --threads (torch reads OMP_NUM_THREADS at start-up). Measured on the 2-core machine with the
# other core busy: a DPD_DDPG smoke run took 39 s with torch's default 2 threads, 11 s with 1.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = max(1, available_cores() // _WORKERS)
    torch.set_num_threads(_SHARE)
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(_SHARE)


@pytest.fixture(autouse=True)
def _reset_torch_seed():
    """Tests must not depend on each other's global torch RNG state."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def float64():
    """Numerical checks in float64, so they hold on any x86-64 CPU (float32 rounding differs with the vector width)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture
def full_and_killed_runs():
    """run(args, stem, full, cut, settle): the command line ``args`` (a script and its flags, checkpointing) run to
    the end into ``full``, and again into ``cut``, SIGKILLed ``settle`` seconds after its first checkpoint appears
    (no chance to clean up) and then continued with --resume. The two runs' exit codes are checked; compare the
    folders' files."""
    import signal
    import subprocess
    import time

    def run(args: list[str], stem: str, full: Path, cut: Path, settle: float) -> None:
        done = subprocess.run([*args, "--results_dir", str(full)], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        ckpt = cut / "checkpoints" / f"{stem}.pt"
        proc = subprocess.Popen([*args, "--results_dir", str(cut)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600
        while not ckpt.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(settle)  # somewhere after the first checkpoint
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL, "the run must really be killed before it finishes"
        resumed = subprocess.run([*args, "--results_dir", str(cut), "--resume"], cwd=ROOT, capture_output=True,
                                 text=True)
        assert resumed.returncode == 0, resumed.stderr

    return run


@pytest.fixture
def seed_one_three_ways():
    """check(script, args, stop, folder, names): seed 1 of ``args`` (a script module's flags, no seed) trained
    batched with seed 0, alone, and stopped at step ``stop`` (a checkpoint there) then resumed, all in this
    process; each curve ``names`` of the three runs must be bit for bit the same. Returns seed 1's curves alone."""
    from utils.cli import main_guard
    from utils.run import Trainer

    def check(script, args: list[str], stop: int, folder: Path, names: list[str]) -> list:
        import numpy as np

        assert main_guard(script.run, [*args, "--seeds", "0", "1", "--results_dir", str(folder / "both")]) == 0
        assert main_guard(script.run, [*args, "--seed", "1", "--results_dir", str(folder / "one")]) == 0
        cut = [*args, "--seed", "1", "--checkpoint_freq", str(stop), "--results_dir", str(folder / "cut")]
        Trainer(script.build_config(script.parse(cut))).run(stop_at=stop)
        assert main_guard(script.run, [*cut, "--resume"]) == 0
        alone = []
        for name in names:
            a = np.load(folder / "one" / name)
            np.testing.assert_array_equal(a, np.load(folder / "both" / name))
            np.testing.assert_array_equal(a, np.load(folder / "cut" / name))
            alone.append(a)
        return alone

    return check


@pytest.fixture
def no_processes(monkeypatch):
    """A test that must not start a process (utils.compare's planning and reports): subprocess.Popen refuses."""
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
