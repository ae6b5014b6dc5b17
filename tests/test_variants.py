"""Task variants: each agent of a run plays its own physics (Diff-DAC's setting, sunblaze's variants)."""
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import DASE_main
from utils.cli import main_guard
from utils.envs.registry import make_env, resolve_env_id
from utils.envs.variants import extreme_factor, task_for
from utils.envs.workers import EnvWorkers, LocalEnvs
from utils.errors import UsageError
from utils.run import RunConfig, Trainer

CLASSIC_EXTREME = {"RandomExtremePendulum-v1": "Pendulum-v1", "RandomExtremeAcrobot-v1": "Acrobot-v1",
                   "RandomExtremeCartPole-v1": "CartPole-v1"}
CLASSIC_NORMAL = {"RandomNormalPendulum-v1": "Pendulum-v1", "RandomNormalAcrobot-v1": "Acrobot-v1",
                  "RandomNormalCartPole-v1": "CartPole-v1"}
MUJOCO = [f"{p}{b}-v5" for b in ("Hopper", "HalfCheetah") for p in ("RandomMass", "Windy", "AirWindMass")]
ENV = "RandomExtremePendulum-v1"


def factors(task: dict, base: str) -> np.ndarray:
    """Each parameter of a classic-control task as a multiple of the Gymnasium default."""
    env = gym.make(base).unwrapped
    return np.array([v / getattr(env, k) for k, v in task.items()])


def in_extreme(x) -> np.ndarray:
    x = np.asarray(x)
    return ((0.5 <= x) & (x < 0.75)) | ((1.25 < x) & (x <= 1.5))


# ---- the draws ------------------------------------------------------------------------------------

def test_extreme_factors_cover_both_ranges_and_never_the_middle():
    rng = np.random.default_rng(0)
    x = np.array([extreme_factor(rng) for _ in range(20_000)])
    assert in_extreme(x).all()
    assert 0.45 < (x < 1).mean() < 0.55  # both ranges, as often
    assert x.min() < 0.51 and x.max() > 1.49 and (x < 0.76).sum() and (x > 1.24).sum()


@pytest.mark.parametrize("env_id,base", CLASSIC_EXTREME.items())
def test_extreme_tasks_per_agent_seed(env_id, base):
    tasks = [task_for(env_id, s) for s in range(0, 4000, 100)]
    for task in tasks:
        f = factors(task, base)
        assert in_extreme(f).all(), task
        json.dumps(task)  # JSON-serialisable as it is
    assert task_for(env_id, 300) == tasks[3]  # the same agent seed, the same task
    assert len({json.dumps(t, sort_keys=True) for t in tasks}) == len(tasks)  # different agents, different tasks


def test_acrobot_and_cartpole_tasks_scale_whole_quantities():
    a = task_for("RandomExtremeAcrobot-v1", 7)
    assert a["LINK_MASS_1"] == a["LINK_MASS_2"] and a["LINK_LENGTH_1"] == a["LINK_LENGTH_2"]
    assert a["LINK_COM_POS_1"] == pytest.approx(a["LINK_LENGTH_1"] / 2)  # the centre of mass stays mid-link
    c = task_for("RandomExtremeCartPole-v1", 7)
    assert set(c) == {"masspole", "length", "masscart", "force_mag"}
    env = gym.make("RandomExtremeCartPole-v1", task=c).unwrapped
    assert env.total_mass == c["masspole"] + c["masscart"]  # CartPole's derived quantities follow
    assert env.polemass_length == c["masspole"] * c["length"]


@pytest.mark.parametrize("env_id", MUJOCO)
def test_mujoco_tasks(env_id):
    base = env_id.replace("RandomMass", "").replace("AirWindMass", "").replace("Windy", "")
    task = task_for(env_id, 5)
    assert task == task_for(env_id, 5) and task != task_for(env_id, 105)
    model0 = gym.make(base).unwrapped.model
    if "Mass" in env_id:
        ratio = np.array(task["body_mass"][1:]) / model0.body_mass[1:]
        assert ((0.05 <= ratio) & (ratio <= 1.95)).all() and not np.allclose(ratio, 1)
    if "Wind" in env_id:
        assert all(-15 <= w <= 15 for w in task["wind"][:2]) and task["wind"][2] == 0
        assert task["density"] == 1.2 and task["viscosity"] == 0.0002
    env = make_env(env_id, task)  # continuous actions: the trainers take them
    model = env.unwrapped.model
    if "Mass" in env_id:
        np.testing.assert_array_equal(model.body_mass, task["body_mass"])
    if "Wind" in env_id:
        np.testing.assert_array_equal(model.opt.wind, task["wind"])
        assert (model.opt.density, model.opt.viscosity) == (1.2, 0.0002)
    plain = make_env(base)
    a = np.full(env.action_space.shape, 0.5, dtype=np.float32)
    o1, o2 = env.reset(seed=3)[0], plain.reset(seed=3)[0]
    np.testing.assert_array_equal(o1, o2)  # the same start ...
    for _ in range(5):
        o1, *_ = env.step(a)
        o2, *_ = plain.step(a)
    assert not np.allclose(o1, o2)  # ... and other physics


def test_ordinary_ids_have_no_task_and_resolve_unchanged():
    assert task_for("Pendulum-v1", 0) is None and task_for("Hopper-v5", 100) is None
    assert resolve_env_id("RandomExtremePendulum") == (ENV, None)  # a bare name takes the newest version
    assert resolve_env_id(ENV) == (ENV, None)


# ---- the physics ------------------------------------------------------------------------------------

def test_a_heavier_longer_pendulum_steps_differently_and_the_nominal_task_does_not():
    action = np.array([1.5], dtype=np.float32)

    def step(env):
        env.reset(seed=0)
        env.unwrapped.state = np.array([0.3, -0.2])
        return env.step(action)[0]

    plain = step(make_env("Pendulum-v1"))
    np.testing.assert_array_equal(step(make_env(ENV, {"m": 1.0, "l": 1.0})), plain)  # applied, not rebuilt
    heavy = step(make_env(ENV, {"m": 1.4, "l": 1.3}))
    assert heavy[2] != plain[2]  # angular velocity after one step
    assert abs(heavy[2]) < abs(plain[2])  # more inertia, less acceleration from the same torque


@pytest.mark.parametrize("env_id,base", [("RandomExtremeAcrobot-v1", "Acrobot-v1"),
                                         ("RandomExtremeCartPole-v1", "CartPole-v1"),
                                         ("RandomNormalAcrobot-v1", "Acrobot-v1"),
                                         ("RandomNormalCartPole-v1", "CartPole-v1")])
def test_discrete_variants_construct_step_and_differ(env_id, base):
    with pytest.raises(UsageError, match="Discrete"):  # DDPG and TD3 refuse them (make_env's default: "box")
        make_env(env_id)
    env, plain = gym.make(env_id, task=task_for(env_id, 11)), gym.make(base)
    o1, info = env.reset(seed=2)
    o2, _ = plain.reset(seed=2)
    assert "task" in info
    differ = False
    for t in range(8):  # alternating pushes: no episode ends
        o1, *_ = env.step(t % 2)
        o2, *_ = plain.step(t % 2)
        differ |= not np.allclose(o1, o2)
    assert differ


@pytest.mark.parametrize("env_id,base", CLASSIC_NORMAL.items())
def test_normal_variants_redraw_at_every_reset_reproducibly(env_id, base):
    def draws(seed):
        env = gym.make(env_id, task=task_for(env_id, 0))  # the description is accepted
        out = [env.reset(seed=seed)[1]["task"]]
        out += [env.reset()[1]["task"] for _ in range(4)]
        return out

    a = draws(5)
    assert len({json.dumps(t, sort_keys=True) for t in a}) == 5  # new parameters at every reset
    for t in a:
        assert ((0.75 <= factors(t, base)) & (factors(t, base) <= 1.25)).all()
    assert draws(5) == a  # from the reset seed
    assert draws(6) != a
    assert task_for(env_id, 0) == task_for(env_id, 100)  # a distribution, the same for every agent
    with pytest.raises(ValueError, match="draws its parameters at every reset"):
        gym.make(env_id, task={"m": 1.0})  # not its task


def test_normal_variant_parameters_survive_a_checkpoint_across_episodes():
    """A RandomNormal episode begun after a reset from the generator's state (not a seed) replays with the
    same parameters."""
    env_id = "RandomNormalPendulum-v1"
    seeds = [1, 101]
    a = LocalEnvs(env_id, seeds, [101, 101], 1, [task_for(env_id, s) for s in seeds])
    for _ in range(250):  # past the 200-step episode: its second episode drew new parameters
        a.step(None)
    b = LocalEnvs(env_id, seeds, [101, 101], 1, [task_for(env_id, s) for s in seeds])
    b.load_state_dicts([a.state_dict()])
    for ea, eb in zip(a.envs, b.envs):
        assert (ea.unwrapped.m, ea.unwrapped.l) == (eb.unwrapped.m, eb.unwrapped.l) != (1.0, 1.0)
    actions = np.full((2, 1), 0.7, dtype=np.float32)
    for _ in range(20):
        np.testing.assert_array_equal(a.step(actions)[3], b.step(actions)[3])


def test_each_members_environments_play_its_task():
    seeds = [0, 100, 7, 107]
    tasks = [task_for(ENV, s) for s in seeds]
    rows = [tasks[:2], tasks[:2], tasks[2:], tasks[2:]]  # --eval_tasks all: every task of its seed
    envs = LocalEnvs(ENV, seeds, [100, 100, 107, 107], 3, tasks, rows)
    try:
        assert envs.eval_tasks_per_member == 2 and envs.eval_obs.shape == (4, 6, 3)
        for m, env in enumerate(envs.envs):
            assert env.unwrapped.m == tasks[m]["m"] and env.unwrapped.l == tasks[m]["l"]
            for j in range(2):
                for e in range(3):
                    assert envs.eval_envs[m][3 * j + e].unwrapped.m == rows[m][j]["m"]
            assert envs.eval_seeds[m][:3] == envs.eval_seeds[m][3:]  # the same episodes on every task
    finally:
        envs.close()


# ---- runs ---------------------------------------------------------------------------------------------

def config(folder, **kw) -> RunConfig:
    return RunConfig(**{**dict(policy="DASE_TD3", env=ENV, seed=3, num_agents=2, max_time_steps=600,
                               start_time_steps=200, eval_freq=200, eval_episodes=2, batch_size=32,
                               results_dir=str(folder), quiet=True, checkpoint_freq=0, env_workers=0,
                               algo={"hidden": (32, 32)}), **kw})


def files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.npy"))}


def record(folder, stem=f"DASE_TD3_{ENV}_3") -> dict:
    return json.loads((folder / f"{stem}.json").read_text())


def test_the_command_line_records_every_agents_task(tmp_path):
    args = ["--policy", "DASE_TD3", "--env", ENV, "--max_time_steps", "600", "--start_time_steps", "200",
            "--eval_freq", "200", "--eval_episodes", "2", "--threads", "1", "--batch_size", "32", "--quiet",
            "--results_dir", str(tmp_path)]
    assert main_guard(DASE_main.run, args) == 0
    rec = record(tmp_path, f"DASE_TD3_{ENV}_0")
    assert rec["tasks"] == [task_for(ENV, 0), task_for(ENV, 100)] and rec["config"]["eval_tasks"] == "own"
    assert not list(tmp_path.glob("*_tasks.npy"))  # only with --eval_tasks all


def test_eval_tasks_all_scores_every_task_and_leaves_the_curves_alone(tmp_path, capsys):
    Trainer(config(tmp_path / "own")).run()
    Trainer(config(tmp_path / "all", eval_tasks="all")).run()
    own, every = files(tmp_path / "own"), files(tmp_path / "all")
    assert {k: v for k, v in every.items() if not k.endswith("_tasks.npy")} == own  # curves and weights
    for i in range(2):
        curve = np.load(tmp_path / "all" / f"DASE_TD3_{ENV}_3_Agent_{i}.npy")
        scores = np.load(tmp_path / "all" / f"DASE_TD3_{ENV}_3_Agent_{i}_tasks.npy")
        assert scores.dtype == np.float64 and scores.shape == (4, 2)  # evaluations x agents
        np.testing.assert_array_equal(scores[:, i], curve)  # its own task's column is its curve
        assert not np.array_equal(scores[:, 1 - i], curve)  # the other task is another task
    assert record(tmp_path / "all")["tasks"] == [task_for(ENV, 3), task_for(ENV, 103)]
    from utils import plot

    capsys.readouterr()
    assert len(plot.find_curves([tmp_path / "all"])) == 2  # the plot tool passes the task scores over, silently
    assert "_tasks" not in capsys.readouterr().err


def test_worker_processes_give_the_files_of_one_process(tmp_path):
    Trainer(config(tmp_path / "serial", eval_tasks="all", eval_freq=100)).run()
    pool = Trainer(config(tmp_path / "pool", eval_tasks="all", eval_freq=100, env_workers=2))
    assert isinstance(pool.envs, EnvWorkers)
    pool.run()
    a, b = files(tmp_path / "serial"), files(tmp_path / "pool")
    assert len(a) == 6 and a == b  # curves, weights and task scores of both agents


def test_resume_gives_the_same_curves_and_tasks(tmp_path):
    Trainer(config(tmp_path / "whole", eval_tasks="all", checkpoint_freq=300)).run()
    Trainer(config(tmp_path / "cut", eval_tasks="all", checkpoint_freq=300)).run(stop_at=300)
    state = torch.load(tmp_path / "cut" / "checkpoints" / f"DASE_TD3_{ENV}_3.pt", weights_only=True)
    assert len(state["task_curves"][0]) == 2  # evaluations at 0 and 200
    with pytest.raises(UsageError, match="eval_tasks"):  # not the same experiment
        Trainer(config(tmp_path / "cut", checkpoint_freq=300, resume=True)).run()
    Trainer(config(tmp_path / "cut", eval_tasks="all", checkpoint_freq=300, resume=True, env_workers=2)).run()
    assert files(tmp_path / "whole") == files(tmp_path / "cut")
    assert record(tmp_path / "cut")["tasks"] == record(tmp_path / "whole")["tasks"]
    assert record(tmp_path / "cut")["resumed_at_step"] == 300


def test_overwrite_clears_the_task_scores(tmp_path):
    Trainer(config(tmp_path, eval_tasks="all", max_time_steps=200)).run()
    assert len(list(tmp_path.glob("*_tasks.npy"))) == 2
    Trainer(config(tmp_path, max_time_steps=200, overwrite=True)).run()
    assert not list(tmp_path.glob("*_tasks.npy"))


@pytest.mark.parametrize("extra,needle", [
    (["--env", "Pendulum-v1", "--eval_tasks", "all"], "every agent plays the same Pendulum-v1"),
    (["--env", "RandomNormalPendulum-v1", "--eval_tasks", "all"], "at every reset"),
    (["--env", ENV, "--eval_tasks", "all", "--policy", "TD3"], "--num_agents 1"),
    (["--env", ENV, "--eval_tasks", "some"], "invalid choice"),
    (["--env", "RandomExtremeCartPole-v1"], "Discrete"),
])
def test_refusals_are_one_line_and_write_nothing(extra, needle, tmp_path, capsys):
    try:
        code = main_guard(DASE_main.run, ["--results_dir", str(tmp_path / "r"), "--max_time_steps", "200",
                                          "--eval_freq", "200", "--quiet", *extra])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_mujoco_loads_only_for_mujoco_tasks_and_its_variant_classes_pickle(tmp_path):
    """Importing the registry and building a Box2D or classic task leaves MuJoCo unimported (0.3 s of every
    start-up); a MuJoCo variant builds its class on demand, quiets MuJoCo's warnings first, and its class pickles
    by name (worker processes receive it so)."""
    import subprocess
    import sys

    from conftest import ROOT

    code = """
import pickle, sys
from utils.envs import registry
from utils.envs.variants import VARIANTS
registry.make_env("LunarLanderContinuous-v3").close()
registry.make_env("RandomExtremePendulum-v1").close()
assert "WindyHopper-v5" in VARIANTS and len(VARIANTS) == 12
before = "mujoco" in sys.modules
env = registry.make_env("WindyHopper-v5")
cls = type(env.unwrapped)
assert pickle.loads(pickle.dumps(cls)) is cls is VARIANTS["WindyHopper-v5"]
print(before, "mujoco" in sys.modules, registry._mujoco_hooked, cls.__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True", "WindyHopper"]
    assert "settotalmass" not in done.stderr
