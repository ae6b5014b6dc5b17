"""benchmarks.peers: our command and the Stable-Baselines3 program of each job do the same work, and the tool
answers as the others do without SB3 or with bad flags (SB3 itself is not needed: its classes are stubbed here)."""
import json
import sys
import types

import pytest

import ac_main
import DASE_main
import sac_main
from benchmarks import peers


def sb3_kwargs(job, monkeypatch):
    """Run the SB3 program of ``job`` against stub classes; what it passed to each model and to learn()."""
    calls = []

    class Model:
        def __init__(self, policy, env, **kwargs):
            calls.append({"class": type(self).__name__, "env": env, **kwargs})

        def learn(self, total_timesteps):
            calls[-1]["total_timesteps"] = total_timesteps

    stubs = {name: type(name, (Model,), {}) for name in ("A2C", "SAC", "TD3")}
    sb3 = types.ModuleType("stable_baselines3")
    sb3.__dict__.update(stubs)
    common = types.ModuleType("stable_baselines3.common")
    env_util = types.ModuleType("stable_baselines3.common.env_util")
    env_util.make_vec_env = lambda env_id, n_envs, seed: ("vec", env_id, n_envs, seed)
    env_util.make_atari_env = lambda env_id, n_envs, seed: ("atari", env_id, n_envs, seed)
    vec_env = types.ModuleType("stable_baselines3.common.vec_env")
    vec_env.VecFrameStack = lambda env, n_stack: ("stack", env, n_stack)
    evaluation = types.ModuleType("stable_baselines3.common.evaluation")
    evaluation.evaluate_policy = lambda model, env, n_eval_episodes, deterministic: (calls[-1].setdefault(
        "evaluations", []).append((n_eval_episodes, deterministic)) or (0.0, 0.0))
    noise = types.ModuleType("stable_baselines3.common.noise")
    noise.NormalActionNoise = lambda mean, sigma: ("normal", list(mean), list(sigma))
    for name, module in {"stable_baselines3": sb3, "stable_baselines3.common": common,
                         "stable_baselines3.common.env_util": env_util,
                         "stable_baselines3.common.vec_env": vec_env,
                         "stable_baselines3.common.evaluation": evaluation,
                         "stable_baselines3.common.noise": noise}.items():
        monkeypatch.setitem(sys.modules, name, module)
    argv = peers.sb3(job)
    assert argv[0] == "-c"
    monkeypatch.setattr(sys, "argv", ["-c", argv[2]])
    exec(compile(argv[1], "sb3_program", "exec"), {"__name__": "__main__"})
    return calls


def test_td3_and_sac_jobs_have_our_settings(monkeypatch, tmp_path):
    for name, script in (("td3", DASE_main), ("sac", sac_main), ("td3_seeds", DASE_main)):
        job = peers.JOBS[name]
        argv = peers.ours(job, str(tmp_path))
        cfg = script.build_config(script.parse(argv[1:]))
        calls = sb3_kwargs(job, monkeypatch)
        assert len(calls) == (10 if name == "td3_seeds" else 1)
        assert [c["seed"] for c in calls] == (cfg.seeds or [cfg.seed])
        for c in calls:
            assert c["class"] == ("SAC" if name == "sac" else "TD3")
            assert c["total_timesteps"] == cfg.max_time_steps == job.steps
            assert c["learning_starts"] == cfg.start_time_steps
            assert c["batch_size"] == cfg.batch_size and c["buffer_size"] == cfg.buffer_size
            assert c["train_freq"] == c["gradient_steps"] == cfg.updates_per_step == 1
            assert c["evaluations"] == [(cfg.eval_episodes, True)] * 2  # at the start and at the end, as ours
            assert cfg.eval_freq == cfg.max_time_steps
            algo = cfg.algo
            gamma = algo.get("discount", algo.get("gamma"))
            assert (c["gamma"], c["tau"]) == (gamma, algo["tau"])
            assert c["policy_kwargs"]["net_arch"] == [256, 256]
            if name == "sac":
                assert algo["hidden_size"] == 256 and c["learning_rate"] == algo["lr"]
                assert c["ent_coef"] == algo["alpha"] and not algo["automatic_entropy_tuning"]
                assert algo["policy_type"] == "Gaussian"
            else:
                assert c["learning_rate"] == 3e-4  # TD3's Adam rate for actor and critics (ours: fixed)
                assert c["policy_delay"] == algo["policy_freq"]
                assert (c["target_policy_noise"], c["target_noise_clip"]) == (algo["policy_noise"], algo["noise_clip"])
                assert c["action_noise"] == ("normal", [0.0], [algo["expl_noise"] * 2.0])  # Pendulum: max action 2


def test_a2c_job_has_our_settings(monkeypatch, tmp_path):
    job = peers.JOBS["a2c"]
    cfg = ac_main.build_config(ac_main.parse(peers.ours(job, str(tmp_path))[1:]))
    (c,) = sb3_kwargs(job, monkeypatch)
    algo = cfg.algo
    assert c["class"] == "A2C" and c["env"] == ("vec", "CartPole-v1", algo["envs_per_agent"], 0)
    assert c["total_timesteps"] == cfg.max_time_steps == job.steps and c["n_steps"] == algo["n_steps"]
    for ours_key, theirs in (("lr", "learning_rate"), ("gamma", "gamma"), ("gae_lambda", "gae_lambda"),
                             ("ent_coef", "ent_coef"), ("vf_coef", "vf_coef"), ("max_grad_norm", "max_grad_norm"),
                             ("rms_eps", "rms_prop_eps")):
        assert c[theirs] == algo[ours_key], ours_key
    assert c["policy_kwargs"]["net_arch"] == {"pi": [algo["hidden_size"]] * 2, "vf": [algo["hidden_size"]] * 2}
    assert c["evaluations"] == [(cfg.eval_episodes, True)] * 2


def test_a2c_atari_job_has_our_settings(monkeypatch, tmp_path):
    """Pong with 16 environments, n = 5, the same RMSprop and coefficients, one evaluation game at each end; ours on
    EnvPool with the job's threads for torch and EnvPool."""
    from utils.envs.pool import installed

    if not installed():
        pytest.skip("EnvPool is not installed (pip install -r requirements-atari.txt): the Atari job runs on it")
    job = peers.JOBS["a2c_atari"]
    cfg = ac_main.build_config(ac_main.parse(peers.ours(job, str(tmp_path), threads=2)[1:]))
    (c,) = sb3_kwargs(job, monkeypatch)
    algo = cfg.algo
    assert cfg.env == "PongNoFrameskip-v4" and cfg.env_backend == "envpool" and cfg.threads == cfg.env_workers == 2
    assert c["class"] == "A2C" and c["env"] == ("stack", ("atari", cfg.env, algo["envs_per_agent"], 0), 4)
    assert algo["envs_per_agent"] == peers.ATARI_ENVS and c["n_steps"] == algo["n_steps"] == 5
    assert c["total_timesteps"] == cfg.max_time_steps == job.steps == cfg.eval_freq
    for ours_key, theirs in (("lr", "learning_rate"), ("gamma", "gamma"), ("gae_lambda", "gae_lambda"),
                             ("ent_coef", "ent_coef"), ("vf_coef", "vf_coef"), ("max_grad_norm", "max_grad_norm"),
                             ("rms_eps", "rms_prop_eps")):
        assert c[theirs] == algo[ours_key], ours_key
    assert algo["optimizer"] == "rmsprop" and c["use_rms_prop"] and not c["normalize_advantage"]
    assert c["evaluations"] == [(cfg.eval_episodes, True)] * 2 and cfg.eval_episodes == peers.ATARI_EVAL_GAMES
    assert peers.scaled(job, 0.001).steps == 80 and peers.scaled(job, 0.1).steps % 80 == 0


def test_without_sb3_or_with_bad_flags_it_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(peers, "has_sb3", lambda: False)
    for argv, needle in (([], "pip install -r requirements-bench.txt"), (["--jobs", "ppo"], "unknown job 'ppo'"),
                         (["--runs", "0"], "--runs 0"), (["--scale", "0"], "--scale 0"),
                         (["--json", str(tmp_path)], "--json"), (["--threads", "0"], "--threads 0"),
                         (["--core", "0", "--threads", "2"], "--core pins to one core")):
        with pytest.raises(SystemExit) as e:
            peers.main(argv)
        err = capsys.readouterr().err.strip()
        assert e.value.code == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert list(tmp_path.iterdir()) == []


def test_scaled_jobs_keep_whole_vector_steps_and_one_update():
    assert peers.scaled(peers.JOBS["a2c"], 0.05).steps == 5000
    assert peers.scaled(peers.JOBS["a2c"], 0.0001).steps == 8
    assert peers.scaled(peers.JOBS["td3"], 0.001).steps == 1001
    assert peers.compare([(1.0, 2.0), (3.0, 2.0), (2.0, 4.0)]) == {"ours_s": 2.0, "sb3_s": 2.0, "ratio": 1.0,
                                                                   "pair_ratios": [0.5, 1.5, 0.5]}
    json.dumps(peers.compare([(1.0, 2.0)]))


def test_learning_seconds_come_from_our_record_and_from_sb3s_learn_lines(tmp_path):
    """A finished run's record holds its loop's seconds and its evaluations' (the a2c job, shrunk): the learning
    time is their difference, positive and below the loop's; SB3's is the sum of the program's learn_s lines."""
    from tests.runs import run

    job = peers.scaled(peers.JOBS["a2c"], 0.008)
    assert run(ac_main, *peers.ours(job, str(tmp_path))[1:]) == 0
    timing = json.loads(next(tmp_path.glob("*.json")).read_text())["timing"]
    assert 0 < timing["evaluation_s"] < timing["loop_s"]
    assert peers.learning_seconds(ours_out=str(tmp_path)) == timing["loop_s"] - timing["evaluation_s"]
    assert peers.learning_seconds(sb3_stdout="seed 0: evaluation 1 -> 2\nlearn_s 1.5\nlearn_s 2.25\n") == 3.75


def test_learning_seconds_of_a_seeds_run_count_its_one_loop_once(tmp_path):
    """The td3_seeds job (--seeds 0-9) writes ten records, each with the timing of the one loop that trained them
    all (a seed stopped early has none): its learning is that loop's, once; records of two processes are refused."""
    timing = {"loop_s": 12.5, "evaluation_s": 2.25}
    for seed in range(10):
        record = {"seed": seed, **({"timing": timing} if seed != 3 else {"stopped": "solved"})}
        (tmp_path / f"TD3_Pendulum-v1_{seed}.json").write_text(json.dumps(record))
    assert peers.learning_seconds(ours_out=str(tmp_path)) == 10.25
    (tmp_path / "TD3_Pendulum-v1_3.json").write_text(json.dumps({"timing": {"loop_s": 9.0, "evaluation_s": 1.0}}))
    with pytest.raises(peers.UsageError, match="found 2"):
        peers.learning_seconds(ours_out=str(tmp_path))
