"""The default CPU thread count and OpenMP's wait policy: a run with the default threads must not crawl beside a busy
core (benchmarks/threads.py measures it; docs/performance.md has the numbers)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from utils.run import cores

ROOT = Path(__file__).resolve().parent.parent


def wait_policy(env: dict) -> str:
    """OMP_WAIT_POLICY as a fresh process sees it after importing the package, then torch."""
    code = "import utils, torch, os; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_openmp_threads_sleep_while_they_wait_unless_the_user_says_otherwise():
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    assert wait_policy(base) == "PASSIVE"
    assert wait_policy({**base, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"
    assert wait_policy({**base, "GOMP_SPINCOUNT": "300000"}) == "None"


@pytest.mark.parametrize("busy_fraction, idle", [(0.0, 2), (0.1, 2), (0.45, 1), (0.5, 1), (0.95, 0), (1.0, 0)])
def test_idle_cores_are_the_cores_other_processes_leave_free(monkeypatch, busy_fraction, idle):
    """Two cores, busy for the given fraction of the window (from /proc/stat's counters): the idle ones, whole cores
    rounded; the default threads are those, at least one."""
    readings = iter([(0, 0), (int(200 * busy_fraction), 200)])
    monkeypatch.setattr(cores, "_cpu_times", lambda which: next(readings))
    monkeypatch.setattr(cores, "_IDLE", None)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1})
    assert cores.idle_cores(window=0) == idle
    assert cores.default_cpu_threads() == max(1, idle)
    monkeypatch.setattr(cores, "_cpu_times", lambda which: pytest.fail("measured twice"))
    assert cores.idle_cores() == idle  # once per process


def test_cpu_times_read_the_cores_of_this_process(monkeypatch, tmp_path):
    stat = ("cpu  9 9 9 9 9 9 9 9 0 0\n"
            "cpu0 10 0 5 80 5 0 0 0 0 0\n"
            "cpu1 50 0 0 50 0 0 0 0 0 0\n"
            "intr 1 2 3\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: __import__("io").StringIO(stat)
                        if path == "/proc/stat" else real_open(path, *a, **k))
    assert cores._cpu_times({0}) == (15, 100)  # user + system; idle and iowait are not busy
    assert cores._cpu_times({0, 1}) == (65, 200)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat here")
def test_a_spinning_process_takes_a_core(monkeypatch):
    """Measured for real: a process spinning beside leaves at most all cores but one idle."""
    monkeypatch.setattr(cores, "_IDLE", None)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        import time
        time.sleep(0.3)
        assert cores.idle_cores(window=0.3) <= len(os.sched_getaffinity(0)) - 1
    finally:
        hog.kill()
        hog.wait()
