"""The two command lines: smoke runs of all six policies, and one-line errors with exit code 2."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import DASE_main
import sac_main
from utils.cli import main_guard
from utils.envs import atari

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--env", "Pendulum-v1", "--seed", "5", "--eval_freq", "200", "--eval_episodes", "2", "--batch_size", "32"]
SCRIPTS = {"DDPG": "DASE_main.py", "TD3": "DASE_main.py", "SAC": "sac_main.py"}
MULTI = ("DASE_", "DPD_")


def cli(script, *args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)  # a hang guard, generous for slow machines


@pytest.mark.parametrize("policy", ["DDPG", "TD3", "SAC", "DASE_DDPG", "DASE_TD3", "DASE_SAC", "DPD_DDPG", "DPD_TD3",
                                    "DPD_SAC"])
def test_smoke_run_writes_curves(policy, tmp_path):
    script = SCRIPTS[policy.removeprefix("DASE_").removeprefix("DPD_")]
    # small networks (the default widths' cost is the benchmarks' business): every policy runs end to end in seconds
    budget = ["--num_steps", "600", "--start_steps", "200", "--policy_type", "Gaussian", "--hidden_size", "64"] \
        if script == "sac_main.py" else ["--max_time_steps", "600", "--start_time_steps", "200", "--hidden_sizes", "64", "64"]
    out = cli(script, "--policy", policy, *TINY, *budget, "--results_dir", str(tmp_path), "--device", "cpu")
    assert out.returncode == 0, out.stderr
    stem = f"{policy}_Pendulum-v1_5"
    names = [f"{stem}_Agent_{i}.npy" for i in range(2)] if policy.startswith(MULTI) else [f"{stem}.npy"]
    weights = [f"{stem}_Agent_{i}_weights.npy" for i in range(2)] if policy.startswith("DASE") else []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names + weights + [f"{stem}.json"])
    for name in names:
        curve = np.load(tmp_path / name)
        assert curve.dtype == np.float64 and curve.shape == (4,) and np.isfinite(curve).all()
        assert curve.min() > -2000 and curve.max() <= 0  # Pendulum returns per 200-step episode
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    assert record["config"]["policy"] == policy and record["device"] == "cpu"
    assert record["versions"]["torch"] == torch.__version__ and "git_commit" in record
    assert len(out.stdout.strip().splitlines()) == 4  # one progress line per evaluation


def test_v2_names_map_to_maintained_versions(tmp_path):
    out = cli("DASE_main.py", "--policy", "TD3", "--env", "LunarLanderContinuous-v2", "--max_time_steps", "200",
              "--start_time_steps", "200", "--eval_freq", "200", "--eval_episodes", "1", "--results_dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "LunarLanderContinuous-v3 instead (results differ from those published on LunarLanderContinuous-v2)" \
        in out.stderr
    assert (tmp_path / "TD3_LunarLanderContinuous-v3_0.npy").is_file()


def test_save_and_load_model_round_trip(tmp_path):
    args = ["--policy", "DASE_TD3", *TINY, "--max_time_steps", "400", "--start_time_steps", "200",
            "--results_dir", str(tmp_path / "r"), "--models_dir", str(tmp_path / "m"), "--quiet"]
    assert main_guard(DASE_main.run, args + ["--save_model"]) == 0
    files = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert files == ["DASE_TD3_Pendulum-v1_5_Agent_0.pt", "DASE_TD3_Pendulum-v1_5_Agent_1.pt"]
    # a run that loads them and does not train evaluates exactly the saved policies
    curves = DASE_main.run(args[:-5] + ["--max_time_steps", "200", "--start_time_steps", "1000", "--eval_freq", "200",
                                        "--results_dir", str(tmp_path / "r2"), "--models_dir", str(tmp_path / "m"),
                                        "--load_model", "default", "--quiet"])
    saved = [np.load(tmp_path / "r" / f"DASE_TD3_Pendulum-v1_5_Agent_{i}.npy") for i in range(2)]
    for i in range(2):
        assert curves[i][0] == saved[i][-1]


ERRORS = [
    (DASE_main, ["--policy", "PPO"], "--policy"),
    (DASE_main, ["--policy", "DASE_SAC"], "sac_main.py"),
    (sac_main, ["--policy", "TD3"], "DASE_main.py"),
    (DASE_main, ["--env", "Hoper-v5"], "Hopper-v5"),
    (DASE_main, ["--env", "CartPole-v1"], "continuous"),
    (DASE_main, ["--batch_size", "0"], "--batch_size"),
    (DASE_main, ["--buffer_size", "-5"], "--buffer_size"),
    (DASE_main, ["--num_agents", "0"], "--num_agents"),
    (DASE_main, ["--policy", "TD3", "--num_agents", "3"], "--num_agents"),
    (DASE_main, ["--policy", "DPD_TD3", "--num_agents", "1"], "--num_agents"),
    (sac_main, ["--policy", "DPD_SAC", "--dpd_batch_size", "0"], "--dpd_batch_size"),
    (DASE_main, ["--policy_noise", "inf"], "--policy_noise"),
    (sac_main, ["--lr", "nan"], "--lr"),
    (DASE_main, ["--max_time_steps", "2.5e-1"], "--max_time_steps"),
    (DASE_main, ["--max_time_steps", "0"], "--max_time_steps"),
    (DASE_main, ["--max_time_steps", "500", "--eval_freq", "1000"], "--eval_freq"),
    (DASE_main, ["--buffer_size", "1", "--num_agents", "2"], "--buffer_size"),
    (DASE_main, ["--buffer_size", "10"], "smaller than one batch"),
    (DASE_main, ["--policy", "DPD_TD3", "--buffer_size", "300", "--dpd_batch_size", "500"], "--dpd_batch_size"),
    (DASE_main, ["--results_dir", "/proc/forbidden"], "cannot write there"),
    (DASE_main, ["--policy", "TD3", "--kl_div_var", "matched"], "DASE_ policy"),
    (DASE_main, ["--kl_div_var", "matched", "--expl_noise", "0"], "--expl_noise"),
    (sac_main, ["--policy_type", "Gaussian", "--kl_div_var", "matched"], "Gaussian"),
    (sac_main, ["--policy_type", "Gaussian", "--deterministic_noise", "paper_code"], "only the Deterministic policy"),
    (sac_main, ["--deterministic_noise", "per_batch"], "--deterministic_noise"),
    (DASE_main, ["--kl_div_var", "wide"], "'matched'"),
    (DASE_main, ["--seed", "3", "--seeds", "1", "2"], "give one of them"),
    (DASE_main, ["--policy", "DPD_TD3", "--similarity", "kl"], "DPD_TD3"),
    (DASE_main, ["--start_time_steps", "-1"], "--start_time_steps"),
    (DASE_main, ["--tau", "2"], "--tau"),
    (DASE_main, ["--kl_div_var", "0"], "--kl_div_var"),
    (DASE_main, ["--similarity", "cosine"], "--similarity"),
    (DASE_main, ["--seed", "abc"], "--seed"),
    (DASE_main, ["--device", "tpu"], "--device"),
    (DASE_main, ["--threads", "0"], "--threads"),
    (DASE_main, ["--seed", "-1"], "--seed"),
    (DASE_main, ["--results_dir", "README.md"], "is a file"),
    (sac_main, ["--checkpoint_dir", "README.md/sub"], "is a file"),
    (DASE_main, ["--checkpoint_freq", "-1"], "--checkpoint_freq"),
    (DASE_main, ["--load_model", "nothing_here"], "--load_model"),
    (sac_main, ["--num_steps", "0"], "--num_steps"),
    (sac_main, ["--num_steps", "100"], "raise --num_steps"),
    (sac_main, ["--start_steps", "-3"], "--start_steps"),
    (sac_main, ["--hidden_size", "0"], "--hidden_size"),
    (sac_main, ["--policy_type", "Beta"], "--policy_type"),
    (sac_main, ["--env", "Pendulum-v1", "--batch_size", "-1"], "--batch_size"),
    # an empty folder name would put the files in the current folder (the repository's root)
    (DASE_main, ["--results_dir", ""], "--results_dir '': an empty path"),
    (sac_main, ["--results_dir", ""], "--results_dir '': an empty path"),
    (DASE_main, ["--checkpoint_dir", ""], "--checkpoint_dir '': an empty path"),
    (sac_main, ["--models_dir", "", "--save_model"], "--models_dir '': an empty path"),
    # discrete actions: SAC becomes discrete SAC, with its own settings
    (sac_main, ["--env", "CartPole-v1", "--policy_type", "Gaussian"], "--policy_type applies to SAC (continuous actions)"),
    (sac_main, ["--env", "CartPole-v1", "--policy_type", "Deterministic"], "--policy_type applies to SAC (continuous actions), not SAC (discrete actions)"),
    (sac_main, ["--env", "CartPole-v1", "--target_entropy_scale", "0"], "--target_entropy_scale 0 must be in (0, 1]"),
    (sac_main, ["--env", "Acrobot-v1", "--target_entropy_scale", "1.5"], "--target_entropy_scale 1.5 must be in"),
    (sac_main, ["--env", "CartPole-v1", "--target_entropy_scale", "-0.2"], "--target_entropy_scale -0.2 must be in"),
    (sac_main, ["--env", "CartPole-v1", "--target_entropy_scale", "nan"], "--target_entropy_scale"),
    (sac_main, ["--target_entropy_scale", "0.5"], "applies to SAC (discrete actions)"),
    (sac_main, ["--env", "CartPole-v1", "--kl_div_var", "matched"], "--kl_div_var matched: CartPole-v1 has discrete"),
    (sac_main, ["--env", "CartPole-v1", "--alpha", "0"], "--alpha 0 must be > 0"),
    (sac_main, ["--alpha", "0"], "--alpha 0 must be > 0"),  # kept as log(alpha): a crash before 2026-11-29
    (sac_main, ["--env", "CarRacing-v3"], "observations must be flat vectors"),
    # the other command line's spelling of a flag points to this one's
    (sac_main, ["--max_time_steps", "100"], "sac_main.py calls it --num_steps"),
    (sac_main, ["--start_time_steps=100"], "sac_main.py calls it --start_steps"),
    (DASE_main, ["--num_steps", "100"], "DASE_main.py calls it --max_time_steps"),
    # the TD3 tutorial's protocol and networks
    (DASE_main, ["--episode_eval", "--solved_at", "200", "--solved_window", "0"], "--solved_window must be a positive"),
    (DASE_main, ["--solved_at", "200"], "add --episode_eval"),
    (DASE_main, ["--episode_eval", "--solved_window", "5"], "applies with --solved_at"),
    (DASE_main, ["--episode_eval", "--solved_at", "nan"], "--solved_at: must be a finite number"),
    (DASE_main, ["--max_episodes", "0"], "--max_episodes must be a positive integer"),
    (DASE_main, ["--seed", "3", "--eval_seed_offset", "-4"], "--eval_seed_offset -4: seed 3 plus it must be in"),
    (sac_main, ["--eval_seed_offset", "5e9"], "--eval_seed_offset"),
    (DASE_main, ["--warmup_actions", "noisy"], "--warmup_actions: invalid choice"),
    (DASE_main, ["--policy", "DIFF_TD3", "--init", "maybe"], "--init: invalid choice"),
    (DASE_main, ["--policy", "TD3", "--init", "common"], "no peer to start equal to"),
    (DASE_main, ["--policy", "DASE_TD3", "--kl_precision", "float16"], "--kl_precision: invalid choice"),
    (DASE_main, ["--buffer_size", "1e18"], "would allocate"),
    (DASE_main, ["--eval_episodes", "1e12"], "at most 1000 episodes"),
    (DASE_main, ["--hidden_sizes", "1e9", "1e9"], "lower --hidden_sizes"),
    (sac_main, ["--hidden_size", "1000000"], "lower --hidden_size"),
    (DASE_main, ["--n_step", "1e9"], "lower --n_step"),
    (DASE_main, ["--threads", "100000"], "give at most"),
    (DASE_main, ["--results_dir", "/tmp/" + "a" * 300], "file systems take at most 255"),
    (DASE_main, ["--policy", "DIFF_TD3", "--num_agents", "2", "--adjacency", "[[0,1],[1,1]]"],
     "--adjacency: its diagonal must be 0"),
    (DASE_main, ["--buffer_size", "1e11", "--seeds", "0-3"], "lower --buffer_size or run fewer --seeds"),
    # a legal-but-odd budget's notice must not come before a refusal that needs the environment's sizes
    (DASE_main, ["--buffer_size", "1e18", "--max_time_steps", "2000"], "would allocate"),
    (sac_main, ["--buffer_size", "1e12"], "would allocate"),
    (DASE_main, ["--seeds", "0-200000"], "at most 4096"),
    (DASE_main, ["--policy", "DIFF_TD3", "--num_agents", "100000"], "at most 4096"),
    (DASE_main, ["--policy", "TD3", "--kl_precision", "float32"], "computes no sharing weights"),
    (DASE_main, ["--policy", "DASE_TD3", "--similarity", "none", "--kl_precision", "float32"],
     "computes no sharing weights"),
    (sac_main, ["--policy", "DASE_SAC", "--policy_type", "Gaussian", "--kl_precision", "float32"],
     "only a deterministic actor"),
    (sac_main, ["--policy", "DASE_SAC", "--env", "CartPole-v1", "--kl_precision", "float32"],
     "only a deterministic actor"),
    (DASE_main, ["--policy", "DDPG", "--hidden_sizes", "400"], "DDPG's critic takes exactly two widths"),
    (DASE_main, ["--hidden_sizes", "400", "0"], "--hidden_sizes 0 must be >= 1"),
    (DASE_main, ["--actor_lr=-1e-3"], "--actor_lr -0.001 must be > 0"),
    (DASE_main, ["--start_steps", "100"], "DASE_main.py calls it --start_time_steps"),
    # a version no Gymnasium had is a typo, not an old id to map to the newest
    (DASE_main, ["--env", "Pendulum-v9"], "--env Pendulum-v9: no such version; the newest Pendulum is Pendulum-v1"),
]
if atari.available():  # the replay learners take flat observations only
    ERRORS.append((sac_main, ["--env", "ALE/Pong-v5"], "Atari games are played by A2C"))
if not torch.cuda.is_available():
    ERRORS.append((DASE_main, ["--device", "cuda"], "no CUDA GPU"))
    ERRORS.append((sac_main, ["--device", "cuda:1"], "no CUDA GPU"))


@pytest.mark.parametrize("module,args,needle", ERRORS, ids=[" ".join(a) for _, a, _ in ERRORS])
def test_bad_input_is_one_line_exit_2_no_files(module, args, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("a file where a folder is expected")
    results = str(tmp_path / "results")
    if "--results_dir" in args:
        results = args[args.index("--results_dir") + 1]
    models = args[args.index("--models_dir") + 1] if "--models_dir" in args else str(tmp_path / "models")
    try:
        code = main_guard(module.run, ["--env", "Pendulum-v1", *args, "--results_dir", results,
                                       "--models_dir", models])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err, err
    assert err.startswith(f"{module.__name__}.py: error: "), err  # argparse's errors and ours read alike
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"], "nothing may be written on bad input"


def test_notices_for_odd_but_legal_budgets(capsys):
    from utils.run import RunConfig, notices

    cfg = RunConfig(policy="TD3", env="Pendulum-v1", max_time_steps=2500, eval_freq=1000, start_time_steps=3000)
    lines = notices(cfg)
    assert len(lines) == 2 and "never trains" in lines[0] and "last 500 steps" in lines[1]
    assert notices(RunConfig(policy="TD3", env="Pendulum-v1", max_time_steps=2000, start_time_steps=1000)) == []


def test_error_exit_code_from_a_real_process(tmp_path):
    out = cli("DASE_main.py", "--env", "CartPole-v1", "--results_dir", str(tmp_path / "r"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Box" in out.stderr
    assert not (tmp_path / "r").exists()


def test_a_garbage_model_file_is_one_line_without_torchs_advice(tmp_path, capsys):
    models = tmp_path / "models"
    models.mkdir()
    (models / "TD3_Pendulum-v1_0.pt").write_bytes(b"not a checkpoint at all")
    code = main_guard(DASE_main.run, ["--policy", "TD3", "--env", "Pendulum-v1", "--load_model", "default",
                                      "--models_dir", str(models), "--results_dir", str(tmp_path / "r"),
                                      "--max_time_steps", "2000", "--start_time_steps", "1000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a model file of this program" in err[0], err
    assert "weights_only" not in err[0]
    assert not (tmp_path / "r").exists()


def test_resume_with_a_changed_flag_names_that_flag(tmp_path, capsys):
    import ac_main
    from utils.run import Trainer

    base = ["--policy", "A2C", "--env", "CartPole-v1", "--max_time_steps", "8000", "--eval_freq", "2000",
            "--checkpoint_freq", "2000", "--quiet", "--results_dir", str(tmp_path)]
    Trainer(ac_main.build_config(ac_main.parse(base))).run(stop_at=2000)
    capsys.readouterr()
    assert main_guard(ac_main.run, [*base, "--resume", "--lr", "0.001"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was made with --lr 0.0007, this run has 0.001" in err[0], err
