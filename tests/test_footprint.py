"""A run's memory estimated from every size flag before anything is built (utils/run/footprint.py, issue 89 item 4):
`--ensemble_q 100000` filled a 24 GB machine without a word; now it, and every other size flag (networks, batches,
sequence windows, image features, candidate actions, buffers, environments, workers, learners), is one line naming
the flag and exit code 2, within seconds."""
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ac_main
import DASE_main
import sac_main
from utils.errors import UsageError
from utils.naming import SCRIPT_POLICIES
from utils.run import RunConfig, memory, validate
from utils.run.footprint import check_footprint, footprint

ROOT = Path(__file__).resolve().parent.parent
MODULES = {"DASE_main.py": DASE_main, "sac_main.py": sac_main, "ac_main.py": ac_main}


def limited_memory():
    """The child's address space capped at 6 GB: a check that let a run through fails the test, not the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))


def script(name, *args, tmp_path):
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(ROOT / name), *args, "--results_dir", str(tmp_path / "r"),
                          "--models_dir", str(tmp_path / "m")], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, preexec_fn=limited_memory)
    return out, time.monotonic() - started


def total(module, args):
    cfg = module.build_config(module.parse([*args, "--quiet"]))
    return sum(p.device + p.host for p in footprint(cfg))


def test_the_issues_command_is_one_line_and_exit_2_within_seconds(tmp_path):
    args = ["--policy", "SAC", "--env", "Pendulum-v1", "--num_steps", "2000", "--ensemble_q", "100000"]
    need = total(sac_main, args)
    assert need > 100e9  # 100000 critics of 256 x 256, their targets and Adam's moments
    if memory.available_bytes() > need:
        pytest.skip(f"this machine has {memory.human(memory.available_bytes())} available: the run could fit")
    out, seconds = script("sac_main.py", *args, tmp_path=tmp_path)
    err = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(err) == 1, out.stderr[-2000:]
    assert err[0].startswith("sac_main.py: error: --ensemble_q 100000 x --hidden_size 256: the networks of 1 "
                             "learner(s)") and err[0].endswith("lower --ensemble_q or --hidden_size"), err
    assert seconds < 60 and not out.stdout and not (tmp_path / "r").exists()


# sizes no machine has memory for (terabytes at least), so refused wherever the tests run
HUGE = [
    ("DASE_main.py", ["--policy", "TD3", "--ensemble_q", "10000000"], "lower --ensemble_q or --hidden_sizes"),
    ("sac_main.py", ["--policy", "SAC", "--batch_size", "1e10", "--buffer_size", "1e10"],
     "--batch_size 10000000000: one update's batch"),
    ("sac_main.py", ["--policy", "SAC", "--env", "VelocityMaskedPendulum-v1", "--seq_encoder", "gru", "--seq_len",
                     "10000000", "--start_steps", "1e7", "--buffer_size", "1e8"], "lower --batch_size or --seq_len"),
    ("sac_main.py", ["--policy", "SAC", "--env", "PixelPendulum-v1", "--image_features", "1e9"],
     "lower --image_features or --hidden_size"),
    ("sac_main.py", ["--policy", "SAC", "--rnd", "--rnd_n_sample", "1e10"], "lower --rnd_n_sample"),
    ("DASE_main.py", ["--policy", "DPD_TD3", "--dpd_batch_size", "1e10", "--buffer_size", "1e10"],
     "lower --dpd_batch_size"),
]


@pytest.mark.parametrize("name,args,needle", HUGE, ids=[" ".join(a) for _, a, _ in HUGE])
def test_every_size_flag_is_in_the_estimate(name, args, needle, tmp_path):
    out, seconds = script(name, "--env", "Pendulum-v1", *args, tmp_path=tmp_path)
    err = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(err) == 1 and needle in err[0], out.stderr[-2000:]
    assert err[0].startswith(f"{name}: error: ") and "would fill" in err[0]
    assert seconds < 60 and not (tmp_path / "r").exists()


def refused(monkeypatch, module, args, available):
    """validate's refusal of ``args`` on a machine with ``available`` bytes free."""
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: available)
    cfg = module.build_config(module.parse([*args, "--quiet", "--results_dir", "/nonexistent/never-written"]))
    with pytest.raises(UsageError) as e:
        validate(cfg)
    return str(e.value)


def test_environments_workers_buffers_and_learners_count_too(monkeypatch):
    # flags whose ranges stop short of terabytes, on a machine with little memory free
    short = ["--env", "Pendulum-v1", "--max_time_steps", "2000", "--eval_freq", "1000"]
    message = refused(monkeypatch, DASE_main, [*short, "--seeds", "0-99", "--eval_episodes", "1000"], 1e9)
    assert message.startswith("--eval_episodes 1000: the environments of 200 learner(s)"), message
    assert message.endswith("lower --eval_episodes or run fewer --seeds at once"), message
    message = refused(monkeypatch, ac_main, ["--env", "CartPole-v1", "--envs_per_agent", "100000", "--max_time_steps",
                                             "1e6", "--eval_freq", "1e6"], 100e6)
    assert message.startswith("--envs_per_agent 100000 x --eval_episodes 10: the environments of 1 learner(s)")
    message = refused(monkeypatch, DASE_main, [*short, "--policy", "TD3", "--seeds", "0-9", "--env_workers", "8"],
                      100e6)
    assert message.startswith("--env_workers 8: the environment workers of 10 learner(s)"), message
    message = refused(monkeypatch, DASE_main, ["--env", "Pendulum-v1", "--policy", "TD3"], 10e6)
    assert message.startswith("--buffer_size 1000000: the replay buffers of 1 learner(s)"), message
    message = refused(monkeypatch, DASE_main, [*short, "--policy", "TD3", "--seeds", "0-999"], 1e9)
    assert message.startswith("--hidden_sizes 256 256: the networks of 1000 learner(s)"), message
    assert message.endswith("lower --hidden_sizes or run fewer --seeds at once"), message


def test_on_a_gpu_its_share_is_checked_against_the_gpu_the_rest_against_the_machine(monkeypatch):
    cfg = RunConfig(policy="TD3", env="Pendulum-v1", device="cuda", seeds=list(range(100)), eval_episodes=1000,
                    buffer_size=10_000, algo={"hidden": (256, 256)})
    parts = footprint(cfg)
    assert sum(p.host for p in parts) > 500e6 > sum(p.device for p in parts) > 300e6  # environments vs networks
    for gpu, host, named in [(1e12, 100e6, "--eval_episodes 1000: the environments"),
                             (100e6, 1e12, "--hidden_sizes 256 256: the networks")]:
        monkeypatch.setattr(memory, "available_bytes",
                            lambda device=None, gpu=gpu, host=host: host if device is None else gpu)
        with pytest.raises(UsageError, match=named):
            check_footprint(cfg)
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 1e12)
    check_footprint(cfg)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_policy_at_its_defaults_is_a_small_estimate(name):
    """A lower bound: the defaults of every policy need far less than any machine has, so none is refused."""
    env = "CartPole-v1" if name == "ac_main.py" else "Pendulum-v1"
    for policy in SCRIPT_POLICIES[name]:
        args = ["--policy", policy, "--env", env] + (["--num_agents", "2"] if policy == "SEAC" else [])
        assert total(MODULES[name], args) < 100e6, policy


def _interrupted_early(script_name: str, args: list[str], tmp_path) -> list[tuple[int, str]]:
    """(exit code, stderr) of the script sent SIGINT at several moments of its start-up, while its imports load."""
    import signal

    found = []
    for delay in (0.05, 0.3, 0.6):
        proc = subprocess.Popen([sys.executable, str(ROOT / script_name), *args, "--results_dir", str(tmp_path / "r")],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        found.append((proc.returncode, err))
    return found


@pytest.mark.parametrize("name,args", [("DASE_main.py", ["--policy", "TD3", "--env", "Pendulum-v1"]),
                                       ("sac_main.py", ["--policy", "SAC", "--env", "Pendulum-v1"]),
                                       ("ac_main.py", ["--policy", "A2C", "--env", "CartPole-v1"])])
def test_ctrl_c_while_a_script_starts_is_one_line_and_exit_130(name, args, tmp_path):
    """Issue 89 item 5: Ctrl-C half a second after `python DASE_main.py ...` printed a 33-line traceback from the
    middle of torch's import; the scripts catch it around their imports as main_guard does later."""
    for code, err in _interrupted_early(name, args, tmp_path):
        lines = err.strip().splitlines()
        assert code == 130 and len(lines) == 1, err
        # while the imports load (or, on a fast machine, in main_guard or the loop: one line too)
        assert lines[0].startswith((f"{name}: interrupted while starting", "interrupted by SIGINT")), err
        assert "Traceback" not in err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.npy"))
