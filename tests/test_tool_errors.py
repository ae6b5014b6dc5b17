"""The tools beside the training scripts answer bad input as the scripts do: one line on stderr, exit code 2, no
usage block, no traceback, nothing written."""
import pytest
import torch

from benchmarks import evaluation, gpu_graphs_check, ops, throughput
from utils.plot import cli as plot_cli
from utils.plot import tasks as plot_tasks
from utils.plot import weight_map
from utils.plot import windows as plot_windows

CASES = [
    (plot_cli.main, ["DIR", "--smooth", "0"], "--smooth"),
    (plot_cli.main, ["DIR", "--smooth", "abc"], "invalid int value"),
    (plot_cli.main, ["DIR", "--training", "--training_window", "0"], "--training_window"),
    (plot_windows.main, ["DIR", "--at", "abc"], "invalid int value"),
    (plot_tasks.main, ["DIR", "--last", "x"], "invalid int value"),
    (weight_map.main, ["--kl_div_var", "-1"], "must be positive"),
    (throughput.main, ["--policy", "FOO"], "unknown policy 'FOO'"),
    (throughput.main, ["--agents", "0"], "--agents 0: must be positive"),
    (throughput.main, ["--updates", "-1"], "--updates -1: must be positive"),
    (throughput.main, ["--batch_size", "abc"], "invalid int value"),
    (throughput.main, ["--env", "Nope-v9"], "unknown environment"),
    (throughput.main, ["--env", "CartPole-v1"], "continuous"),
    # found by tests/test_fuzz_inputs.py once it read these two tools' parsers (tracebacks before)
    (ops.main, ["--agents", "0"], "--agents 0: give 1 to 64"),
    (ops.main, ["--policies", "FOO"], "'FOO' is not a replay policy"),
    (ops.main, ["--policies", "A2C", "--agents", "1"], "'A2C' is not a replay policy"),
    (ops.main, ["--policies", "TD3"], "TD3 is a single agent"),
    (ops.main, ["--env", "Nope-v9"], "unknown environment"),
    (ops.main, ["--env", "CartPole-v1"], "continuous"),
    (ops.main, ["--json", "DIR/x/../"], "--json"),
    (evaluation.main, ["--members", "-1"], "--members -1: give 1 to 4096"),
    (evaluation.main, ["--episodes", "0"], "--episodes 0: give 1 to 1000"),
    (evaluation.main, ["--workers", "0", "-1"], "--workers 0 -1"),
    (evaluation.main, ["--threads", "0"], "--threads 0"),
    (evaluation.main, ["--env", "Nope-v9"], "unknown environment"),
    (evaluation.main, ["--json", "DIR"], "--json"),
    (gpu_graphs_check.main, ["--steps", "3"], "--steps 3: give 40 to 1000000"),
    (gpu_graphs_check.main, ["--policies", "TD3"], "invalid choice: 'TD3'"),
    (gpu_graphs_check.main, ["--json", "DIR"], "--json"),
]
if not torch.cuda.is_available():
    CASES.append((throughput.main, ["--device", "cuda"], "no CUDA GPU"))
    CASES.append((evaluation.main, ["--device", "cuda"], "no CUDA GPU"))
    CASES.append((gpu_graphs_check.main, [], "needs a GPU"))


@pytest.mark.parametrize("main,argv,needle", CASES, ids=[f"{m.__module__} {' '.join(a)}" for m, a, _ in CASES])
def test_one_line_and_exit_2(main, argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("DIR", str(tmp_path)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert "usage:" not in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,env,needle", [
    (["0"], {}, "DIVISOR must be a whole number from 1 to 100, got '0'"),
    (["x"], {}, "got 'x'"),
    (["101"], {}, "got '101'"),
    (["2"], {"DEVICE": "tpu"}, "DEVICE must be cpu, cuda or cuda:N, got 'tpu'"),
    pytest.param([], {}, "no CUDA GPU here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the check would run")),
])
def test_the_gpu_onpolicy_check_answers_bad_input_in_one_line(argv, env, needle, tmp_path):
    """benchmarks/gpu_onpolicy_check.sh (a shell script for the GPU machine): a bad divisor or device, or no GPU,
    is one line on stderr and exit code 2 before anything is installed, run or written."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(root / "benchmarks" / "gpu_onpolicy_check.sh"), *argv], cwd=root,
                          capture_output=True, text=True, env={**os.environ, "OUT": str(out), **env}, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and needle in done.stderr
    assert not out.exists()
