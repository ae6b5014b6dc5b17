"""Issue 62, item 6: a full disk and a closed stdout end in one line, never a traceback; every file is whole or as it
was (a checkpoint included), no temporary file or empty folder is left, and --resume goes on from the last checkpoint.

The full disk is an ENOSPC raised where the operating system raises it (``os.fsync`` and, inside ``torch.save``, the
file's ``write``, which torch wraps into a RuntimeError), and, where this machine lets the tests mount one, a real
tmpfs of a few megabytes; the closed stdout is a pipe whose reader closed it before the run printed anything."""
from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import DASE_main
from utils import io as uio
from utils.cli import EXIT_DISK_FULL, main_guard
from utils.errors import DiskFull
from utils.run.checkpoint import read_checkpoint

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--policy", "TD3", "--env", "Pendulum-v1", "--max_time_steps", "300", "--start_time_steps", "100",
        "--eval_freq", "100", "--eval_episodes", "1", "--threads", "1", "--batch_size", "32", "--hidden_sizes", "32",
        "32"]
STEM = "TD3_Pendulum-v1_0"
HANG_GUARD = 600  # seconds; only against hangs


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.tmp")]


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fd_name(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


# ---- atomic_write itself ----------------------------------------------------------------------------------------
class FillsUp:
    """A file whose writes fail with ENOSPC once ``room`` bytes are written, as a file on a full disk does."""

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


WRITERS = {"json": (uio.save_json, {"a": list(range(100))}), "curve": (uio.save_curve, np.arange(500.0)),
           "torch": (uio.save_torch, {"w": torch.arange(20000.0)})}


@pytest.mark.parametrize("where", ["write", "fsync"])
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_write_on_a_full_disk_leaves_the_old_file_and_nothing_else(kind, where, tmp_path, monkeypatch):
    save, value = WRITERS[kind]
    old = tmp_path / "old" / f"file.{kind}"
    save(old, {"old": True} if kind != "curve" else np.zeros(3))
    before = old.read_bytes()
    new = tmp_path / "new" / "deeper" / f"file.{kind}"  # its folders do not exist yet
    if where == "fsync":
        monkeypatch.setattr(uio.os, "fsync", enospc)
    else:  # the file fills up after a few bytes (inside torch.save: torch raises a RuntimeError from the OSError)
        real = uio.os.fdopen
        monkeypatch.setattr(uio.os, "fdopen", lambda fd, mode: FillsUp(real(fd, mode), 64))
    for path in (old, new):
        with pytest.raises(DiskFull) as caught:
            save(path, value)
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert old.read_bytes() == before  # the old file, whole
    assert not (tmp_path / "new").exists()  # the folders made for the new one went again
    assert temporaries(tmp_path) == []


# ---- a run: the checkpoint and the first curve --------------------------------------------------------------------
def run_in_process(capsys, *args) -> tuple[int, str, str]:
    code = main_guard(DASE_main.run, [*TINY, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_full_disk_at_a_checkpoint_keeps_the_last_one_whole_and_resume_goes_on(tmp_path, monkeypatch, capsys):
    """The checkpoint of step 200 finds the disk full: one line (exit code 4), the checkpoint of step 100 stays whole,
    no temporary file is left, and --resume after space is freed ends with the curves of a run never stopped."""
    folder = tmp_path / "r"
    checkpoint = folder / "checkpoints" / f"{STEM}.pt"
    real, seen = os.fsync, []

    def fsync(fd):
        if f"{checkpoint.name}." in fd_name(fd):
            seen.append(fd)
            if len(seen) == 2:  # the second checkpoint
                enospc()
        return real(fd)

    monkeypatch.setattr(uio.os, "fsync", fsync)
    code, out, err = run_in_process(capsys, "--results_dir", str(folder), "--checkpoint_freq", "100")
    assert code == EXIT_DISK_FULL, err
    assert err == (f"DASE_main.py: error: no space left on device while writing {checkpoint}; the run's files are as "
                   "they were (free space and continue with --resume)\n")
    assert "Traceback" not in out
    assert read_checkpoint(checkpoint)["t"] == 100  # the last checkpoint, whole
    assert len(np.load(folder / f"{STEM}.npy")) == 3  # the curve of every evaluation so far (steps 0, 100, 200)
    assert temporaries(tmp_path) == [] and not list(folder.glob(".*.lock"))

    monkeypatch.setattr(uio.os, "fsync", real)  # space freed
    code, _, err = run_in_process(capsys, "--results_dir", str(folder), "--checkpoint_freq", "100", "--resume")
    assert code == 0, err
    code, _, err = run_in_process(capsys, "--results_dir", str(tmp_path / "whole"), "--checkpoint_freq", "100")
    assert code == 0, err
    np.testing.assert_array_equal(np.load(folder / f"{STEM}.npy"), np.load(tmp_path / "whole" / f"{STEM}.npy"))


def test_a_full_disk_at_the_first_curve_is_one_line_and_leaves_no_temporary(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "r"
    real = os.fsync

    def fsync(fd):
        if f"{STEM}.npy." in fd_name(fd):
            enospc()
        return real(fd)

    monkeypatch.setattr(uio.os, "fsync", fsync)
    code, _, err = run_in_process(capsys, "--results_dir", str(folder))
    assert code == EXIT_DISK_FULL
    assert err.count("\n") == 1 and f"no space left on device while writing {folder / STEM}.npy;" in err, err
    assert sorted(p.name for p in folder.iterdir()) == [f"{STEM}.json"]  # no curve, no temporary, no lock
    monkeypatch.setattr(uio.os, "fsync", real)
    code, _, err = run_in_process(capsys, "--results_dir", str(folder), "--resume")
    assert code == 0, err
    assert len(np.load(folder / f"{STEM}.npy")) == 4


def test_a_full_disk_before_the_first_file_leaves_no_run_folder(tmp_path, monkeypatch, capsys):
    """The lock is the first file a run writes (its process id): on a full disk it goes again, and so does the
    results folder made for it."""
    folder = tmp_path / "new" / "r"
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: enospc() if fd_name(fd).endswith(".lock") else real(fd, data))
    code, _, err = run_in_process(capsys, "--results_dir", str(folder))
    assert code == EXIT_DISK_FULL
    assert err.count("\n") == 1 and f"while writing {folder}/.{STEM}.lock;" in err, err
    assert not (tmp_path / "new").exists()


# ---- a real full disk: a tmpfs of a few megabytes --------------------------------------------------------------
@pytest.fixture
def tiny_disk(tmp_path):
    """A tmpfs of 8 MB (mounting needs root; elsewhere the test is skipped), unmounted afterwards."""
    if sys.platform != "linux" or shutil.which("mount") is None:
        pytest.skip("needs Linux's mount")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", f"tiny{uuid.uuid4().hex[:6]}", str(disk)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """A file that takes all of the disk's free space but ``leave`` bytes."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - leave))
    return filler


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "DASE_main.py"), *TINY, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_GUARD)


def test_a_real_full_disk_at_a_checkpoint_and_before_the_first_file(tiny_disk):
    folder = tiny_disk / "r"
    checkpoint = folder / "checkpoints" / f"{STEM}.pt"
    paused = cli("--results_dir", str(folder), "--checkpoint_freq", "100", "--stop_at", "100", "--quiet")
    assert paused.returncode == 0, paused.stderr
    before = checkpoint.read_bytes()
    filler = fill(tiny_disk, 48 * 1024)  # room for the curve and the record (~4 KB each), not for a checkpoint (~100 KB)
    full = cli("--results_dir", str(folder), "--checkpoint_freq", "100", "--resume", "--quiet")
    assert full.returncode == EXIT_DISK_FULL, full.stderr
    assert full.stderr.count("\n") == 1 and f"no space left on device while writing {checkpoint};" in full.stderr
    assert checkpoint.read_bytes() == before and temporaries(tiny_disk) == []
    filler.unlink()
    resumed = cli("--results_dir", str(folder), "--checkpoint_freq", "100", "--resume", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert len(np.load(folder / f"{STEM}.npy")) == 4 and not checkpoint.exists()

    filler = fill(tiny_disk, 0)
    nothing = cli("--results_dir", str(tiny_disk / "other"), "--quiet")
    assert nothing.returncode == EXIT_DISK_FULL and nothing.stderr.count("\n") == 1, nothing.stderr
    assert not (tiny_disk / "other").exists()


# ---- stdout closed: output piped into `head` ----------------------------------------------------------------------
@pytest.mark.parametrize("stderr_too", [False, True], ids=["stdout", "stdout_and_stderr"])
def test_a_closed_stdout_ends_the_lines_not_the_run(stderr_too, tmp_path):
    """``python DASE_main.py ... | head`` (and ``2>&1 | head``): once the reader is gone the run prints nothing more,
    says so once on stderr (unless stderr went with it), trains and writes its files to the end, and exits 0; with
    --stop_at its checkpoint is there for --resume."""
    folder = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, str(ROOT / "DASE_main.py"), *TINY, "--results_dir", str(folder),
                             "--checkpoint_freq", "100", "--stop_at", "200"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if stderr_too else subprocess.PIPE)
    proc.stdout.close()  # the reader exits before the run prints its first line
    _, err = proc.communicate(timeout=HANG_GUARD)
    err = (err or b"").decode()
    assert proc.returncode == 0, err
    if stderr_too:
        assert err == ""
    else:
        assert err == ("DASE_main.py: note: stdout was closed (the program reading it has exited); the run goes on "
                       "without progress lines and writes its files as usual\n")
    assert read_checkpoint(folder / "checkpoints" / f"{STEM}.pt")["t"] == 200
    assert len(np.load(folder / f"{STEM}.npy")) == 3
    resumed = subprocess.run([sys.executable, str(ROOT / "DASE_main.py"), *TINY, "--results_dir", str(folder),
                              "--checkpoint_freq", "100", "--resume"], cwd=ROOT, capture_output=True, text=True,
                             timeout=HANG_GUARD)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr
    assert len(np.load(folder / f"{STEM}.npy")) == 4


def test_a_reader_gone_after_the_first_line(tmp_path):
    """The reader takes one line and goes (``| head -1``): no traceback, no "Exception ignored", the run completes."""
    folder = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, str(ROOT / "DASE_main.py"), *TINY, "--results_dir", str(folder)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.communicate(timeout=HANG_GUARD)[1].decode()
    assert first.startswith(f"{STEM} | step        0/300".encode())
    assert proc.returncode == 0 and "Traceback" not in err and "Exception ignored" not in err, err
    assert len(np.load(folder / f"{STEM}.npy")) == 4


# ---- the tools beside the scripts (issue 89, item 3): one line, exit code 4, every output whole or absent ----------
def one_line_exit_4(code: int, err: str, prog: str, where: str) -> None:
    assert code == EXIT_DISK_FULL, err
    assert err.count("\n") == 1 and err.startswith(f"{prog}: error: no space left on device while writing {where}"), err
    assert err.rstrip().endswith("no file was left half-written (free space and run it again)"), err


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too: a temporary file left is a difference), with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fails_when_named(word: str, real: Callable):
    """``os.fsync`` that finds the disk full for a file whose name holds ``word`` (the last write's flush)."""
    def fsync(fd):
        if word in fd_name(fd):
            enospc()
        return real(fd)
    return fsync


def partial_then_full(real_savefig, word: str):
    """Figure.savefig that, for a file whose name holds ``word``, writes a few bytes and finds the disk full."""
    def savefig(fig, path, *args, **kwargs):
        if word in str(path):
            Path(path).write_bytes(b"\x89PNG half a figure")
            enospc()
        return real_savefig(fig, path, *args, **kwargs)
    return savefig


FRAMES = [np.full((8, 12, 3), 40 * k, dtype=np.uint8) for k in range(6)]


def fake_watch(args) -> dict:
    return {"cfg": type("C", (), {"policy": "TD3", "env": "E", "seed": 0}), "returns": [1.0], "lengths": [5],
            "loaded": "x", "frames": [FRAMES]}


@pytest.mark.parametrize("film", ["gif", "mp4"])
@pytest.mark.parametrize("where", ["write", "fsync"])
def test_play_on_a_full_disk_writes_no_film_and_keeps_the_old_one(film, where, tmp_path, monkeypatch, capsys):
    """utils.play --gif/--mp4: the disk fills up while the film is written (Pillow's writes; ffmpeg says "No space
    left on device" and exits non-zero, which imageio never checked: it reported the unplayable 8 KB file as
    written) or at its flush: one line, exit code 4, no film (a new one) or the old one as it was, no temporary."""
    import builtins

    from utils import play

    monkeypatch.setattr(play, "watch", fake_watch)
    old = tmp_path / "kept" / f"film.{film}"
    assert play.main(["run", f"--{film}", str(old)]) == 0
    kept = old.read_bytes()
    new = tmp_path / "new" / "deeper" / f"film.{film}"  # its folders do not exist yet
    capsys.readouterr()
    if where == "fsync":
        monkeypatch.setattr(uio.os, "fsync", fails_when_named(f".film.{film}.", os.fsync))
    elif film == "gif":  # Pillow's file fills up after a few bytes
        real_open = builtins.open
        monkeypatch.setattr(builtins, "open", lambda file, *a, **k: FillsUp(real_open(file, *a, **k), 64)
                            if ".film.gif." in str(file) else real_open(file, *a, **k))
    else:  # an ffmpeg that writes part of the file, then says what a full disk made it say, as ffmpeg does
        fake = tmp_path / "ffmpeg"
        fake.write_text('#!/bin/sh\ncat > /dev/null\nfor a; do last="$a"; done\nhead -c 8192 /dev/zero > "$last"\n'
                        'echo "[out#0/mp4 @ 0x1] Error writing trailer: No space left on device" >&2\nexit 234\n')
        fake.chmod(0o755)
        import imageio_ffmpeg

        monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", lambda: str(fake))
    for path, args in ((old, ["--overwrite"]), (new, [])):
        code = play.main(["run", f"--{film}", str(path), *args])
        out, err = capsys.readouterr()
        one_line_exit_4(code, err, "python -m utils.play", str(path))
        assert "wrote" not in out
    assert old.read_bytes() == kept and sorted(p.name for p in old.parent.iterdir()) == [f"film.{film}"]
    assert not (tmp_path / "new").exists()


def hand_curves(folder: Path) -> None:
    folder.mkdir(parents=True)
    for seed in range(2):
        np.save(folder / f"TD3_Pendulum-v1_{seed}.npy", np.linspace(-1000, -200, 6) + seed)


@pytest.mark.parametrize("where", ["figure", "table", "fsync"])
def test_plot_on_a_full_disk_writes_none_of_its_files(where, tmp_path, monkeypatch, capsys):
    """utils.plot: the disk fills up in a figure (part of it written), in summary.md or at the flush of the last
    file: one line, exit code 4; a new --out folder is not there, an old one holds its files as they were (no new
    figure beside an old summary), no temporary."""
    from matplotlib.figure import Figure

    from utils.plot import cli as plot_cli

    hand_curves(tmp_path / "curves")
    old, new = tmp_path / "old", tmp_path / "new" / "plots"
    assert plot_cli.main([str(tmp_path / "curves"), "--out", str(old)]) == 0
    before = snapshot(old)
    assert sorted(before) == ["Pendulum-v1.png", "all_environments.png", "summary.csv", "summary.md"]
    np.save(tmp_path / "curves" / "TD3_Pendulum-v1_2.npy", np.zeros(6))  # the new files would differ
    capsys.readouterr()
    if where == "figure":
        monkeypatch.setattr(Figure, "savefig", partial_then_full(Figure.savefig, "all_environments"))
    elif where == "table":  # summary.md: half of it written
        real = Path.write_text
        monkeypatch.setattr(Path, "write_text", lambda path, text, *a, **k: (real(path, text[:20]), enospc())
                            if path.name == "summary.md" else real(path, text, *a, **k))
    else:
        monkeypatch.setattr(uio.os, "fsync", fails_when_named("summary.md", os.fsync))
    for out in (old, new):
        code = plot_cli.main([str(tmp_path / "curves"), "--out", str(out)])
        _, err = capsys.readouterr()
        one_line_exit_4(code, err, "python -m utils.plot", f"into {out};")
    assert snapshot(old) == before
    assert not (tmp_path / "new").exists()


def test_plot_training_on_a_full_disk_writes_none_of_its_files(tmp_path, monkeypatch, capsys):
    from utils.plot import cli as plot_cli

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "A2C_CartPole-v1_0_episodes.csv").write_text(
        "step,agent,return,length\n" + "".join(f"{10 * k},0,{k},10\n" for k in range(1, 30)))
    monkeypatch.setattr(uio.os, "fsync", fails_when_named("training.md", os.fsync))
    code = plot_cli.main([str(logs), "--training", "--training_window", "5", "--out", str(tmp_path / "out")])
    one_line_exit_4(code, capsys.readouterr().err, "python -m utils.plot", f"into {tmp_path / 'out'};")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["figure", "fsync"])
def test_compare_on_a_full_disk_writes_no_file_of_its_report(where, tmp_path, monkeypatch, capsys):
    """utils.compare: report.json, the figures, report.md (and the docs page of --write_docs) are one set: the disk
    filling up in a figure (part of it written) or at the flush of report.md is one line and exit code 4, and no
    file of the new report is there; an old report stays whole, as it was (it used to be report.json and three
    figures of the new one beside the old report.md)."""
    from matplotlib.figure import Figure

    from tests.test_compare import fake_runs, hand_suite
    from utils import compare

    results = tmp_path / "r"
    suite = hand_suite(tmp_path)
    for env, scale in (("Pendulum-v1", -10.0), ("MountainCarContinuous-v0", 1.0)):
        fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: scale * (10 * e + s))
        fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: scale * (20 * e + s + i))
    old, new = tmp_path / "old", tmp_path / "new" / "report"
    assert compare.main([str(suite), "--results", str(results), "--out", str(old)]) == 0
    before = snapshot(old)
    assert {"report.json", "report.md", "aggregates.png"} <= set(before)
    np.save(results / "solo/TD3/Pendulum-v1/TD3_Pendulum-v1_0.npy", np.zeros(7))  # the new report would differ
    capsys.readouterr()
    if where == "figure":
        monkeypatch.setattr(Figure, "savefig", partial_then_full(Figure.savefig, "performance_profile"))
    else:
        monkeypatch.setattr(uio.os, "fsync", fails_when_named("report.md", os.fsync))
    for out in (old, new):
        code = compare.main([str(suite), "--results", str(results), "--out", str(out)])
        _, err = capsys.readouterr()
        one_line_exit_4(code, err, "python -m utils.compare", f"into {out};")
    assert snapshot(old) == before
    assert not (tmp_path / "new").exists()


def test_distributed_a_learner_on_a_full_disk_is_one_line_exit_4(capsys):
    """utils.distributed: a learner's file on a full disk reaches the driver as Ray's RayTaskError (its text the
    learner's traceback, 75 lines); the driver says it in one line, as the scripts do, with exit code 4."""
    ray = pytest.importorskip("ray")
    from utils.distributed import cli as dist_cli

    path = "/results/SAC_Pendulum-v1_0.json"
    try:  # DiskFull raised from the OSError, as utils.io.atomic_write raises it
        try:
            enospc()
        except OSError as e:
            raise DiskFull(e.errno, e.strerror, path) from e
    except DiskFull as e:
        cause = e
    failed = ray.exceptions.RayTaskError("LearnerActor.run", "Traceback (most recent call last):\n ...\n"
                                         f"utils.errors.DiskFull: [Errno 28] No space left on device: '{path}'",
                                         cause).as_instanceof_cause()

    class Ray:
        exceptions = ray.exceptions

        @staticmethod
        def get(refs):
            raise failed

    code = main_guard(lambda argv: dist_cli.learner_results(Ray, ["a learner's run"]), [])
    err = capsys.readouterr().err
    assert code == EXIT_DISK_FULL and err.count("\n") == 1, err
    assert f"no space left on device while writing {path}; the run's files are as they were" in err, err


def test_the_tools_on_a_real_full_disk(tiny_disk, tmp_path, capsys, monkeypatch):
    """A tmpfs filled up: utils.play (--gif, --mp4 by the real ffmpeg), utils.plot, utils.compare and utils.distributed
    (a learner in a Ray worker) each say one line and exit with code 4, and leave nothing on the disk."""
    from tests.test_compare import fake_runs, hand_suite
    from utils import compare, play
    from utils.plot import cli as plot_cli

    fill(tiny_disk, 0)
    before = sorted(p.name for p in tiny_disk.iterdir())
    monkeypatch.setattr(play, "watch", lambda args: {**fake_watch(args), "frames": [FRAMES * 20]})
    for film in ("gif", "mp4"):
        code = play.main(["run", f"--{film}", str(tiny_disk / f"film.{film}")])
        one_line_exit_4(code, capsys.readouterr().err, "python -m utils.play", str(tiny_disk / f"film.{film}"))
    hand_curves(tmp_path / "curves")
    code = plot_cli.main([str(tmp_path / "curves"), "--out", str(tiny_disk / "plots")])
    one_line_exit_4(code, capsys.readouterr().err, "python -m utils.plot", f"into {tiny_disk / 'plots'};")
    suite = hand_suite(tmp_path)
    for env in ("Pendulum-v1", "MountainCarContinuous-v0"):
        fake_runs(tmp_path / "r/solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s)
        fake_runs(tmp_path / "r/shared/TD3" / env, "DASE_TD3", env, 3, 7, lambda s, i, e: 20.0 * e + s + i)
    code = compare.main([str(suite), "--results", str(tmp_path / "r"), "--out", str(tiny_disk / "report")])
    one_line_exit_4(code, capsys.readouterr().err, "python -m utils.compare", f"into {tiny_disk / 'report'};")
    assert sorted(p.name for p in tiny_disk.iterdir()) == before
    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, "-m", "utils.distributed", "--actors", "1", "--policy", "SAC", "--env",
                           "Pendulum-v1", "--hidden_size", "16", "--eval_episodes", "1", "--quiet", "--eval_freq",
                           "250", "--start_steps", "250", "--batch_size", "32", "--num_steps", "500", "--results_dir",
                           str(tiny_disk / "r")], cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD)
    # Ray's C++ core may add a log line of its own when an actor's error races the driver's exit under load
    # ("[date pid tid] task_manager.cc:N: Failed to push error to driver ..."): not ours, left out of the count
    ours = [line for line in done.stderr.splitlines() if not re.match(r"\[\d{4}-\d\d-\d\d [^]]*\] \w+\.cc:\d+:", line)]
    assert done.returncode == EXIT_DISK_FULL and len(ours) == 1, done.stderr
    assert f"no space left on device while writing {tiny_disk / 'r'}" in done.stderr, done.stderr
    assert sorted(p.name for p in tiny_disk.iterdir()) == before
