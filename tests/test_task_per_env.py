"""ac_main.py --task_per_env N: one learner whose environment k plays the task of agent k mod N of its seed."""
import json
from dataclasses import replace

import numpy as np
import pytest

import ac_main
from utils.cli import main_guard
from utils.run import RunConfig, Trainer, train
from utils.run.files import RunFiles
from utils.run.plan import seed_plan

ALGO = dict(lr=7e-4, gamma=0.99, gae_lambda=1.0, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, hidden_size=16,
            n_steps=5, envs_per_agent=6, rms_alpha=0.99, rms_eps=1e-5)
KW = dict(env="RandomExtremeAcrobot-v1", seed=2, max_time_steps=600, eval_freq=300, eval_episodes=1, quiet=True,
          env_workers=0)

PARAMS = ("LINK_LENGTH_1", "LINK_LENGTH_2", "LINK_MASS_1", "LINK_MASS_2", "LINK_COM_POS_1", "LINK_COM_POS_2",
          "LINK_MOI")


def physics(env):
    return tuple(getattr(env.unwrapped, p) for p in PARAMS)


def test_environment_k_plays_agent_k_mod_n_tasks(tmp_path):
    # what the agents of a diffusing ring of 3 play, each its own task (one environment each)
    ring = Trainer(RunConfig(policy="DIFF_A2C", num_agents=3, results_dir=str(tmp_path / "ring"),
                             algo={**ALGO, "envs_per_agent": 1}, **KW))
    agent_physics = [physics(env) for env in ring.envs.envs]
    assert len(set(agent_physics)) == 3  # three different tasks
    central = Trainer(RunConfig(policy="A2C", num_agents=1, task_per_env=3, results_dir=str(tmp_path / "c"),
                                algo=ALGO, **KW))
    assert [physics(env) for env in central.envs.envs] == [agent_physics[k % 3] for k in range(6)]
    ring.close()
    central.close()


def test_files_carry_the_setting_and_score_every_task(tmp_path):
    cfg = RunConfig(policy="A2C", num_agents=1, task_per_env=3, eval_tasks="all", results_dir=str(tmp_path),
                    algo=ALGO, **KW)
    train(cfg)
    stem = "A2C_tasks3_RandomExtremeAcrobot-v1_2"
    assert cfg.stem == stem
    scores = np.load(tmp_path / f"{stem}_tasks.npy")
    curve = np.load(tmp_path / f"{stem}.npy")
    assert scores.shape == (3, 3)  # 3 evaluations x the 3 agents' tasks
    np.testing.assert_array_equal(scores[:, 0], curve)  # its curve: agent 0's task, the seed's own
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    assert len(record["tasks"]) == 1 and len(record["tasks"][0]) == 3
    # the finished run is found finished (its task scores are [evaluations x 3], not x 1): --resume leaves it alone
    # (it was started over from step 0, its curves replaced, when a sweep came back to it)
    before = {p.name: p.read_bytes() for p in tmp_path.glob(f"{stem}*")}
    again = replace(cfg, resume=True)
    assert seed_plan(RunFiles(again))[0] == "finished"
    train(again)
    assert {p.name: p.read_bytes() for p in tmp_path.glob(f"{stem}*")} == before


@pytest.mark.parametrize("args,needle", [
    (["--task_per_env", "3", "--env", "Acrobot-v1"], "no task per agent"),
    (["--task_per_env", "3", "--env", "RandomNormalAcrobot-v1"], "no task per agent"),
    (["--task_per_env", "1"], "at least 2"),
    (["--task_per_env", "-2"], "0: off"),
    (["--task_per_env", "8", "--envs_per_agent", "4"], "--envs_per_agent >= 8"),
    (["--task_per_env", "3", "--policy", "DIFF_A2C"], "single-agent policy"),
    (["--task_per_env", "3", "--policy", "A3C"], "A3C"),
])
def test_bad_task_per_env_is_one_line_exit_2(tmp_path, capsys, args, needle):
    code = main_guard(ac_main.run, ["--env", "RandomExtremeAcrobot-v1", *args, "--max_time_steps", "800",
                                    "--eval_freq", "400", "--quiet", "--results_dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
