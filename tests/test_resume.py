"""Long runs that survive: checkpoints, resume after SIGKILL/SIGTERM, run locking, non-finite guard."""
import json
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import DASE_main
from utils.cli import main_guard
from utils.errors import NonFinite
from utils.run import RunConfig, Trainer

ROOT = Path(__file__).resolve().parent.parent
STEM = "DASE_TD3_Pendulum-v1_3"
# small networks: resume, not width, is tested; one torch thread: beside busy cores the default threads crawl
# (1000 of these steps took 89 s with 2 threads, 8.5 s with 1, on the 2-core machine beside other work)
ARGS = ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--max_time_steps", "2000", "--start_time_steps", "300",
        "--eval_freq", "250", "--eval_episodes", "2", "--seed", "3", "--checkpoint_freq", "300", "--batch_size", "32",
        "--device", "cpu", "--hidden_sizes", "64", "64", "--threads", "1", "--quiet"]

EVALUATIONS = 2000 // 250 + 1
HANG = 900  # seconds without the awaited progress that can only mean a hung run, even on a slow machine
KILLS = 3  # SIGKILLs in the kill-and-resume test
REPORT = re.compile(r"\| step +(\d+)/\d+ \| +([\d.]+) steps/s \|")  # a progress line: the step evaluated, the rate


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    """The runs in this process set its torch threads (--threads 1): the tests of other files keep theirs."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def start(results: Path, *extra: str, args: list[str] = ARGS) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "DASE_main.py"), *args, "--results_dir", str(results), *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def curves(results: Path) -> list[np.ndarray]:
    """Both agents' curves, then their sharing-weight files (NaN where a period had no update)."""
    return [np.load(results / f"{STEM}_Agent_{i}{kind}.npy") for kind in ("", "_weights") for i in range(2)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[np.ndarray]:
    results = tmp_path_factory.mktemp("full")
    proc = start(results)
    out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    return curves(results)


def evaluations(results: Path, since_ns: int) -> int:
    """How many evaluations the curve file written after ``since_ns`` holds (0: none written since)."""
    path = results / f"{STEM}_Agent_0.npy"
    try:
        return len(np.load(path)) if path.stat().st_mtime_ns >= since_ns else 0
    except (FileNotFoundError, ValueError, OSError):
        return 0


def wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    """Poll until ``condition()``; fail if the run exits first. Progress, not speed, ends the wait."""
    deadline = time.monotonic() + HANG
    while not condition():
        assert proc.poll() is None, f"the run exited ({proc.returncode}) before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"no {what} within {HANG} s: the run hangs"
        time.sleep(0.02)


def progress_reports(proc: subprocess.Popen) -> queue.Queue:
    """The run's progress lines as they come (it must not be --quiet): (step, steps/s) per evaluation; None at exit."""
    reports: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            if match := REPORT.search(line):
                reports.put((int(match[1]), float(match[2])))
        reports.put(None)

    threading.Thread(target=read, daemon=True).start()
    return reports


def next_report(reports: queue.Queue, proc: subprocess.Popen, what: str, wait: float = HANG) -> tuple | None:
    """The run's next report, or None if there is none within ``wait`` seconds (a hang when that is HANG)."""
    try:
        report = reports.get(timeout=wait)
    except queue.Empty:
        assert wait < HANG, f"no {what} within {HANG} s: the run hangs"
        return None
    assert report is not None, f"the run exited ({proc.wait()}) before {what}: {proc.stderr.read()}"
    return report


def test_sigkill_at_random_moments_then_resume_gives_identical_curves(uninterrupted, tmp_path):
    """Kill moments come from the steps the run reports, so the test behaves the same on any machine speed.

    Each killed attempt is read until it reports the first evaluation past its checkpoint (past step 300 for the
    first, so that a checkpoint is kept); then it is killed after a random fraction (0 to 1.25) of one evaluation
    period at the rate it reported there: mid-step, mid-evaluation or mid-checkpoint-write, wherever that lands. If
    the next evaluation is reported first, the kill comes at once: a slow or busy machine cannot let the run finish
    (it still has at least 750 steps to go), it only moves where in the period the kill lands.
    """
    rng = random.Random(1234)
    ckpt = tmp_path / "checkpoints" / f"{STEM}.pt"
    loud = [a for a in ARGS if a != "--quiet"]
    kills, resumed_from = 0, []
    while True:
        resumed_from.append(torch.load(ckpt, weights_only=True)["t"] if ckpt.exists() else 0)
        proc = start(tmp_path, "--resume", args=loud)
        reports = progress_reports(proc)
        if kills < KILLS:
            target = max(resumed_from[-1] // 250 * 250 + 250, 500)  # the first evaluation after the checkpoint
            assert target <= 1000  # then the kill comes by the report of step 1250, long before the end
            step = -1
            while step < target:
                step, rate = next_report(reports, proc, f"the report of step {target}")
            assert step == target and rate > 0, (step, rate)
            # a random moment of the next period, or the moment the next evaluation is reported
            next_report(reports, proc, "the next evaluation", wait=rng.uniform(0.0, 1.25) * 250 / rate)
            assert proc.poll() is None, f"the run exited ({proc.returncode}) before its kill: {proc.stderr.read()}"
            proc.send_signal(signal.SIGKILL)  # no chance to clean up
            kills += 1
        proc.wait(timeout=HANG)
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    assert kills == KILLS, "the test must really interrupt the run"
    assert resumed_from == sorted(resumed_from) and resumed_from[1] > 0, resumed_from  # progress kept
    for a, b in zip(uninterrupted, curves(tmp_path)):
        assert a.shape == (EVALUATIONS,)
        np.testing.assert_array_equal(a, b)


def test_sigterm_checkpoints_and_resumes_identically(uninterrupted, tmp_path):
    proc = start(tmp_path)
    ckpt = tmp_path / "checkpoints" / f"{STEM}.pt"
    wait_for(lambda: evaluations(tmp_path, 0) >= 3, proc, "evaluation 3")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "SIGTERM" in err and "--resume" in err and len(err.strip().splitlines()) == 1
    step = torch.load(ckpt, weights_only=True)["t"]
    assert 500 <= step < 2000 and f"at step {step}," in err  # the checkpoint was written at the signal
    proc = start(tmp_path, "--resume")
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    for a, b in zip(uninterrupted, curves(tmp_path)):
        np.testing.assert_array_equal(a, b)


def test_stop_at_pauses_with_a_checkpoint_and_resumes_identically(uninterrupted, tmp_path, capsys):
    """--stop_at 1100 (between evaluations and checkpoints): exit 0 at step 1100 with the checkpoint written there
    and one line saying so; the same command with --resume trains nothing; --resume without it ends with the uninterrupted
    run's curves and weights, bit for bit, and a finished record."""
    loud = [a for a in ARGS if a != "--quiet"] + ["--results_dir", str(tmp_path)]
    record = tmp_path / f"{STEM}.json"
    for again in (False, True):
        before = {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")}
        assert main_guard(DASE_main.run, loud + ["--stop_at", "1100"] + (["--resume"] if again else [])) == 0
        out = capsys.readouterr().out
        assert torch.load(tmp_path / "checkpoints" / f"{STEM}.pt", weights_only=True)["t"] == 1100
        assert f"{STEM} | paused at step 1100 (--stop_at 1100), checkpoint " in out and "--resume" in out, out
        assert len(np.load(tmp_path / f"{STEM}_Agent_0.npy")) == 1000 // 250 + 1
        assert json.loads(record.read_text())["checkpoint"] is not None  # a finished run's record names none
        if again:  # paused there already: nothing trained, the files as they were
            assert {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")} == before
    assert main_guard(DASE_main.run, loud + ["--resume"]) == 0
    for a, b in zip(uninterrupted, curves(tmp_path)):
        np.testing.assert_array_equal(a, b)
    assert not (tmp_path / "checkpoints" / f"{STEM}.pt").exists() and json.loads(record.read_text())["checkpoint"] is None


def test_stop_when_ends_at_the_first_evaluation_it_holds_for_and_resume_continues(uninterrupted, tmp_path):
    """The learning tests' hook (``train(cfg, stop_when=...)``): called after every evaluation with each seed's member
    curves; the run ends at the first evaluation where it holds (here the third, step 500), checkpointed, its curves
    that far the uninterrupted run's; --resume ends with the uninterrupted curves, bit for bit."""
    from DASE_main import build_config, parse
    from utils.run import train

    seen = []
    def third(curves):  # noqa: E306
        seen.append([len(c) for c in curves])
        return len(curves[0]) == 3
    got = train(build_config(parse(ARGS + ["--results_dir", str(tmp_path)])), stop_when=third)
    assert seen == [[2, 2], [3, 3]]  # after each evaluation past step 0, both agents' curves
    assert torch.load(tmp_path / "checkpoints" / f"{STEM}.pt", weights_only=True)["t"] == 500
    for a, b, c in zip(uninterrupted, got, curves(tmp_path)):
        np.testing.assert_array_equal(a[:3], b)
        np.testing.assert_array_equal(b, c)
    assert main_guard(DASE_main.run, ARGS + ["--results_dir", str(tmp_path), "--resume"]) == 0
    for a, b in zip(uninterrupted, curves(tmp_path)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("extra, words", [(["--stop_at", "0"], "--stop_at must be a positive step"),
                                          (["--stop_at", "500", "--checkpoint_freq", "0"], "drop --checkpoint_freq 0")])
def test_bad_stop_at_is_one_line(extra, words, tmp_path, capsys):
    assert main_guard(DASE_main.run, ARGS + ["--results_dir", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err, err
    assert not list(tmp_path.iterdir())


def test_same_run_twice_refuses_unless_resume_or_overwrite(tmp_path, capsys):
    args = ARGS[:-1] + ["--max_time_steps", "300", "--eval_freq", "300", "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, args) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")}
    capsys.readouterr()
    assert main_guard(DASE_main.run, args) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--resume" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")} == before  # nothing lost
    assert main_guard(DASE_main.run, args + ["--overwrite"]) == 0
    assert not (tmp_path / "checkpoints" / f"{STEM}.pt").exists()  # a finished run keeps no checkpoint
    done = {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")}
    capsys.readouterr()
    assert main_guard(DASE_main.run, args + ["--resume"]) == 0  # finished run: nothing left to do
    assert "already complete" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")} == done
    assert main_guard(DASE_main.run, args + ["--resume", "--kl_div_var", "0.3"]) == 2  # not the same experiment
    assert main_guard(DASE_main.run, args + ["--resume", "--overwrite"]) == 2


def test_a_running_run_is_locked(tmp_path, capsys):
    proc = start(tmp_path)
    try:
        wait_for((tmp_path / f".{STEM}.lock").exists, proc, "taking its lock")
        code = main_guard(DASE_main.run, ARGS + ["--results_dir", str(tmp_path), "--overwrite"])
        assert code == 2 and "another process is running" in capsys.readouterr().err
    finally:
        proc.kill()
        proc.wait()
    # other seeds share the folder without trouble
    other = ARGS[:-1] + ["--max_time_steps", "300", "--eval_freq", "300", "--seed", "4", "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, other) == 0


def make_checkpoint(tmp_path: Path) -> Path:
    """A run of 600 steps that stopped at step 300 (as if killed right after its checkpoint)."""
    cfg = DASE_main.build_config(DASE_main.parse(ARGS + ["--max_time_steps", "600", "--results_dir", str(tmp_path)]))
    Trainer(cfg).run(stop_at=300)
    return tmp_path / "checkpoints" / f"{STEM}.pt"


def test_damaged_or_foreign_checkpoints_are_clear_errors(tmp_path, capsys):
    ckpt = make_checkpoint(tmp_path)
    good = ckpt.read_bytes()
    base = ARGS + ["--max_time_steps", "900", "--results_dir", str(tmp_path), "--resume"]
    cases = [
        (good[: len(good) // 2], base, "damaged"),  # truncated by a crash outside our atomic writes
        (b"", base, "damaged"),
        (good, base[:-1] + ["--max_time_steps", "250", "--eval_freq", "250", "--resume"], "beyond the requested budget"),
        (good, base + ["--kl_div_var", "0.5"], "kl_div_var"),
        (good, base + ["--num_agents", "3"], "num_agents"),
    ]
    for content, args, needle in cases:
        ckpt.write_bytes(content)
        curves_before = [p.read_bytes() for p in sorted(tmp_path.glob("*.npy"))]
        capsys.readouterr()
        assert main_guard(DASE_main.run, args) == 2, needle
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
        assert [p.read_bytes() for p in sorted(tmp_path.glob("*.npy"))] == curves_before  # nothing lost
        assert ckpt.read_bytes() == content


def test_policy_mismatch_in_checkpoint(tmp_path, capsys):
    ckpt = make_checkpoint(tmp_path)
    target = tmp_path / "checkpoints" / "DASE_DDPG_Pendulum-v1_3.pt"
    shutil.copy(ckpt, target)
    args = ARGS + ["--policy", "DASE_DDPG", "--max_time_steps", "900", "--results_dir", str(tmp_path / "r2"),
                   "--checkpoint_dir", str(tmp_path / "checkpoints"), "--resume"]
    capsys.readouterr()
    assert main_guard(DASE_main.run, args) == 2
    err = capsys.readouterr().err
    assert "policy='DASE_TD3'" in err and len(err.strip().splitlines()) == 1


def test_stale_temp_files_of_killed_writes_are_removed(tmp_path):
    ckpt = make_checkpoint(tmp_path)
    junk = [tmp_path / f".{STEM}_Agent_0.npy.abc.tmp", ckpt.parent / f".{STEM}.pt.xyz.tmp"]
    for j in junk:
        j.write_bytes(b"half a file")
    assert main_guard(DASE_main.run, ARGS + ["--max_time_steps", "900", "--results_dir", str(tmp_path), "--resume"]) == 0
    assert not any(j.exists() for j in junk)
    assert len(np.load(tmp_path / f"{STEM}_Agent_0.npy")) == 4


def test_non_finite_loss_stops_the_run_naming_agent_and_step(tmp_path):
    cfg = RunConfig(policy="DASE_TD3", env="Pendulum-v1", seed=3, num_agents=2, max_time_steps=800,
                    start_time_steps=100, eval_freq=200, eval_episodes=1, batch_size=16, checkpoint_freq=200,
                    results_dir=str(tmp_path), quiet=True, threads=1, algo={"hidden": (16, 16)})
    trainer = Trainer(cfg)
    update = trainer.agents.update

    def poisoned(batch):
        if trainer.t == 450:  # agent 1's critic breaks during step 450
            with torch.no_grad():
                trainer.agents.critic.q1.net.layers[0].weight[1].fill_(float("nan"))
        return update(batch)

    trainer.agents.update = poisoned
    with pytest.raises(NonFinite) as e:
        trainer.run()
    message = str(e.value)
    assert "agent 1" in message and "step 450" in message and "step 400" in message
    assert torch.load(tmp_path / "checkpoints" / f"{STEM}.pt", weights_only=True)["t"] == 400  # last good one kept
    assert len(np.load(tmp_path / f"{STEM}_Agent_1.npy")) == 3  # evaluations at 0, 200, 400
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert record["config"]["checkpoint_freq"] == 200


def test_non_finite_exit_code(tmp_path, capsys, monkeypatch):
    from algorithms.replay.td3 import TD3

    update = TD3.update

    def poisoned(self, batch):
        if self.updates == 5:
            with torch.no_grad():
                self.actor.net.layers[0].bias[0].fill_(float("inf"))
        return update(self, batch)

    monkeypatch.setattr(TD3, "update", poisoned)
    code = main_guard(DASE_main.run, ARGS + ["--max_time_steps", "600", "--results_dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1 and "agent 0" in err and "non-finite" in err, err


def test_resume_never_overwrites_a_finished_run_of_another_budget(tmp_path, capsys):
    """--resume on a finished run: nothing to do with the same budget, a one-line refusal with another one."""
    base = ARGS[:-1] + ["--results_dir", str(tmp_path)]
    args = base + ["--max_time_steps", "750"]  # the last --max_time_steps counts
    assert main_guard(DASE_main.run, args) == 0
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert record["finished_at_step"] == 750 and "finished" in record
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")}
    for budget in ("500", "1000"):
        code = main_guard(DASE_main.run, base + ["--max_time_steps", budget, "--resume"])
        err = capsys.readouterr().err
        assert code == 2 and "finished at 750 steps" in err and "--overwrite" in err, err
        assert len(err.strip().splitlines()) == 1
        assert {p.name: p.read_bytes() for p in tmp_path.glob("*.npy")} == before
    assert main_guard(DASE_main.run, args + ["--resume"]) == 0  # the same budget: already complete
    assert "already complete" in capsys.readouterr().out


def test_every_resume_is_recorded_and_a_new_thread_count_is_noticed(tmp_path, capsys):
    """The record lists every resume with its step and torch threads (not just the last one), and a CPU run that
    resumes with another --threads than its checkpoint's says so on one line (it changes the curves' last bits)."""
    threads = torch.get_num_threads()
    args = [a for a in ARGS if a != "--quiet"] + ["--max_time_steps", "900", "--results_dir", str(tmp_path)]
    piece = lambda n, stop, *more: Trainer(DASE_main.build_config(  # noqa: E731
        DASE_main.parse(args + ["--threads", str(n), *more]))).run(stop_at=stop)
    try:  # two threads only for the warm-up's random actions (to step 300): they crawl beside busy cores
        piece(2, 300)
        capsys.readouterr()
        piece(1, 600, "--resume")  # 2 threads -> 1
        err = capsys.readouterr().err
        notes = [line for line in err.splitlines() if "torch thread" in line]
        assert len(notes) == 1 and "checkpointed with 2 torch thread(s) and resumes with 1" in notes[0], err
        piece(1, None, "--resume")  # 1 -> 1: nothing to say
        assert "torch thread" not in capsys.readouterr().err
    finally:
        torch.set_num_threads(threads)
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert [(r["step"], r["threads"]) for r in record["resumes"]] == [(300, 1), (600, 1)]
    assert record["finished_at_step"] == 900


def run_in_pieces(tmp_path):
    """piece(stop, *flags): ARGS (not quiet) for 900 steps into tmp_path, run up to step ``stop`` (None: to the end)."""
    args = [a for a in ARGS if a != "--quiet"] + ["--max_time_steps", "900", "--results_dir", str(tmp_path)]
    return lambda stop, *more: Trainer(DASE_main.build_config(DASE_main.parse(args + list(more)))).run(stop_at=stop)


def on_cpu(monkeypatch, **answers: str) -> None:
    """Make the records and the resume check see this CPU: cpu_capability="AVX2", cpu_model="AMD EPYC", ..."""
    import utils.run.files as files
    import utils.run.resume as resume

    for module in (files, resume):
        for name, answer in answers.items():
            monkeypatch.setattr(module, name, lambda answer=answer: answer)


def test_a_resume_on_another_cpu_instruction_set_is_noticed_and_recorded(tmp_path, capsys, monkeypatch):
    """float32 rounds differently under AVX2 and AVX-512 kernels: a checkpoint made on one and resumed on the other
    continues, says so on one line, and the record names each resume's CPU and the run's."""
    piece = run_in_pieces(tmp_path)
    on_cpu(monkeypatch, cpu_capability="AVX2")
    piece(300)
    capsys.readouterr()
    on_cpu(monkeypatch, cpu_capability="AVX512")
    piece(600, "--resume")
    notes = [line for line in capsys.readouterr().err.splitlines() if "CPU" in line]
    assert len(notes) == 1 and "checkpointed on a CPU with AVX2 kernels and resumes on one with AVX512" in notes[0], notes
    piece(None, "--resume")  # AVX512 -> AVX512: nothing to say
    assert "CPU" not in capsys.readouterr().err
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert [(r["step"], r["cpu"]) for r in record["resumes"]] == [(300, "AVX512"), (600, "AVX512")]
    assert record["device_name"].endswith("AVX512")


def test_a_resume_on_another_processor_with_the_same_instruction_set_is_noticed_and_recorded(tmp_path, capsys,
                                                                                            monkeypatch):
    """An Intel Xeon and an AMD EPYC, both AVX-512, wrote other curves from one command (docs/reproducibility.md):
    a checkpoint made on one processor and resumed on another says so on one line, naming both, and the record
    names the run's processor and each resume's."""
    piece = run_in_pieces(tmp_path)
    on_cpu(monkeypatch, cpu_capability="AVX512", cpu_model="Intel(R) Xeon(R) Platinum")
    piece(300)
    capsys.readouterr()
    on_cpu(monkeypatch, cpu_model="AMD EPYC")
    piece(600, "--resume")
    notes = [line for line in capsys.readouterr().err.splitlines() if "checkpointed on" in line]
    assert len(notes) == 1 and "checkpointed on Intel(R) Xeon(R) Platinum and resumes on AMD EPYC" in notes[0], notes
    piece(None, "--resume")  # the same processor: nothing to say
    assert "checkpointed on" not in capsys.readouterr().err
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert [(r["step"], r["cpu_model"]) for r in record["resumes"]] == [(300, "AMD EPYC"), (600, "AMD EPYC")]
    assert record["cpu_model"] == "AMD EPYC"


def denormals_flushed() -> bool:
    """Whether this thread's CPU reads float32 denormals as zero now: the smallest one (bits 0x00000001, made
    without arithmetic) times 2 has the bits 0x00000002 (2.8e-45) when denormals are kept and 0 when they are
    flushed (read as bits: even a conversion to a Python float would flush it)."""
    twice = (torch.tensor([1], dtype=torch.int32).view(torch.float32) * 2).view(torch.int32).item()
    assert twice in (0, 2)
    return twice == 0


def test_flush_denormals_zeroes_them_for_the_run_is_recorded_and_a_resume_that_changes_it_says_so(tmp_path, capsys):
    """--flush_denormals: the run computes with denormals read and written as zero (a DDPG critic's weight decay
    drives unused weights there, which Intel CPUs compute slowly: docs/performance.md), a run without it with them
    kept, whatever the process did before; the record says so, each resume's entry too, and a resume that changes
    it says so on one line (the curves' last bits change from there)."""
    piece = run_in_pieces(tmp_path)
    try:
        assert not denormals_flushed()
        piece(300, "--flush_denormals")
        assert denormals_flushed()
        capsys.readouterr()
        piece(600, "--resume")  # flushed -> kept
        assert not denormals_flushed()
        notes = [line for line in capsys.readouterr().err.splitlines() if "flush_denormals" in line]
        assert len(notes) == 1 and "checkpointed with --flush_denormals and resumes without --flush_denormals" \
            in notes[0], notes
        piece(None, "--resume")  # kept -> kept: nothing to say
        assert "flush_denormals" not in capsys.readouterr().err
    finally:
        torch.set_flush_denormal(False)
    record = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert [(r["step"], r["flush_denormals"]) for r in record["resumes"]] == [(300, False), (600, False)]
    assert record["config"]["flush_denormals"] is False and record["finished_at_step"] == 900
    other = run_in_pieces(tmp_path / "flushed")
    try:
        other(None, "--flush_denormals")
    finally:
        torch.set_flush_denormal(False)
    assert json.loads((tmp_path / "flushed" / f"{STEM}.json").read_text())["config"]["flush_denormals"] is True


def test_the_processor_is_named_as_the_system_names_it():
    """On Linux the record's processor is /proc/cpuinfo's first model name, read independently here."""
    from utils.run.files import cpu_model

    info = Path("/proc/cpuinfo")
    if not info.exists():
        pytest.skip("no /proc/cpuinfo (not Linux)")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("model name")]
    if not names or not names[0]:
        pytest.skip("this /proc/cpuinfo names no model (some ARM kernels)")
    assert cpu_model() == names[0]
