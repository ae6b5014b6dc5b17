"""python -m utils.play: a saved model of each entry script plays exactly its run's evaluation episodes, films
them, and bad input is one line, exit 2, nothing written."""
import json

import imageio.v3 as iio
import numpy as np
import pytest

import ac_main
import DASE_main
import sac_main
from utils import play
from utils.cli import main_guard
from utils.run import Trainer

RUNS = {  # script, policy, environment, the script's step flags
    "DASE_main": (DASE_main, "DASE_TD3", "Pendulum-v1", ["--max_time_steps", "600", "--start_time_steps", "300"]),
    "sac_main": (sac_main, "SAC", "Pendulum-v1", ["--num_steps", "600", "--start_steps", "300"]),
    "ac_main": (ac_main, "ACER", "CartPole-v1", ["--max_time_steps", "1600", "--envs_per_agent", "2",
                                                 "--replay_start", "100"]),
    "ac_main_lstm": (ac_main, "A2C", "Pendulum-v1", ["--max_time_steps", "1600", "--envs_per_agent", "2",
                                                     "--recurrent"]),
    "ac_main_a3c": (ac_main, "A3C", "CartPole-v1", ["--max_time_steps", "1600", "--num_processes", "1"]),
    "ac_main_a3c_lstm": (ac_main, "A3C", "Pendulum-v1", ["--max_time_steps", "1600", "--num_processes", "1",
                                                         "--recurrent"]),
    "sac_main_gru": (sac_main, "SAC", "VelocityMaskedPendulum-v1", ["--num_steps", "600", "--start_steps", "300",
                                                                    "--seq_encoder", "gru", "--batch_size", "4",
                                                                    "--seq_len", "6", "--seq_hidden", "32"]),
    "sac_main_gru_prev": (sac_main, "SAC", "VelocityMaskedCartPole-v1", ["--num_steps", "600", "--start_steps", "300",
                                                                         "--seq_encoder", "gru", "--batch_size", "4",
                                                                         "--seq_len", "6", "--seq_hidden", "32",
                                                                         "--prev_action"]),
}


def train(name, tmp_path, *more):
    module, policy, env, steps = RUNS[name]
    eval_freq = "800" if name.startswith("ac_main") else "300"
    args = ["--policy", policy, "--env", env, *steps, "--eval_freq", eval_freq, "--eval_episodes", "3",
            "--threads", "1", "--quiet", "--results_dir", str(tmp_path / "r"), "--models_dir", str(tmp_path / "m"),
            "--seed", "4", *more]
    assert main_guard(module.run, args) == 0
    variant = "_lstm" if "--recurrent" in steps else "_gru" if "--seq_encoder" in steps else ""
    variant += "_prev" if "--prev_action" in steps else ""
    stem = f"{policy}{variant}_{env}_4"
    return tmp_path / "r" / f"{stem}.json", stem


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_saved_model_plays_its_runs_evaluation_exactly(name, tmp_path):
    """--save_model is enough: the record plays the run's evaluation episodes of the last model, so the mean of
    the returns is the curve's last value, bit for bit (same environment, reset seeds and batch shapes)."""
    record, stem = train(name, tmp_path, "--save_model")
    agents = 2 if name == "DASE_main" else 1
    agent = agents - 1
    curve = np.load(tmp_path / "r" / (f"{stem}_Agent_{agent}.npy" if agents > 1 else f"{stem}.npy"))
    out = play.watch(play.parse([str(record), "--episodes", "3", "--agent", str(agent)]))
    assert len(out["returns"]) == 3 and out["frames"] == [[], [], []]
    assert np.mean(out["returns"]) == curve[-1]
    # the folder alone names the same run
    again = play.watch(play.parse([str(tmp_path / "r"), "--episodes", "3", "--agent", str(agent)]))
    assert again["returns"] == out["returns"]


def test_a_checkpoint_of_an_unfinished_run_plays_the_model_of_its_step(tmp_path):
    _, policy, env, steps = RUNS["DASE_main"]
    args = ["--policy", policy, "--env", env, *steps, "--eval_freq", "300", "--eval_episodes", "2", "--threads", "1",
            "--quiet", "--results_dir", str(tmp_path), "--seed", "4", "--max_time_steps", "1200",
            "--checkpoint_freq", "300"]
    Trainer(DASE_main.build_config(DASE_main.parse(args))).run(stop_at=600)
    checkpoint = tmp_path / "checkpoints" / f"{policy}_{env}_4.pt"
    curve = np.load(tmp_path / f"{policy}_{env}_4_Agent_0.npy")
    assert len(curve) == 3  # steps 0, 300, 600
    out = play.watch(play.parse([str(checkpoint), "--episodes", "2"]))
    assert np.mean(out["returns"]) == curve[-1]
    assert "(step 600)" in out["loaded"]


def test_the_film_has_every_frame_of_every_episode(tmp_path, capsys):
    record, _ = train("DASE_main", tmp_path, "--save_model")
    gif = tmp_path / "film.gif"
    assert play.main([str(record), "--episodes", "2", "--gif", str(gif), "--every", "5", "--scale", "2"]) == 0
    out = capsys.readouterr().out
    lengths = [int(line.split("(")[1].split()[0]) for line in out.splitlines() if line.startswith("episode ")]
    frames = iio.imread(gif, index=None)
    expected = sum(len(range(0, n + 1, 5)) for n in lengths)  # the reset's frame and one per step, every 5th
    assert lengths == [200, 200] and frames.shape == (expected, 250, 250, 3), (lengths, frames.shape)
    assert frames.std() > 0  # something was drawn
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film.gif", "m", "r"]  # no temporary file left
    mp4 = tmp_path / "film.mp4"
    assert play.main([str(record), "--episodes", "1", "--mp4", str(mp4), "--every", "10"]) == 0
    assert mp4.read_bytes()[4:8] == b"ftyp" and "WARNING" not in capsys.readouterr().err


def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    record, stem = train("DASE_main", tmp_path)  # no --save_model: a finished run without models or checkpoint
    (tmp_path / "junk.json").write_text("[1, 2]")
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "a3c.json").write_text(json.dumps({"config": {"policy": "A3C", "env": "CartPole-v1"}}))
    gif = str(tmp_path / "out.gif")
    cases = [
        ([str(tmp_path / "nope")], "no such file or folder"),
        ([str(tmp_path / "junk.json")], "not a run record"),
        ([str(tmp_path / "broken.pt")], "cannot read checkpoint"),
        ([str(record), "--gif", gif], "--save_model"),
        ([str(record), "--agent", "2"], "the run has 2 agent(s)"),
        ([str(record), "--episodes", "0"], "--episodes 0"),
        ([str(record), "--gif", gif, "--mp4", str(tmp_path / "o.mp4")], "not both"),
        ([str(record), "--gif", str(record / "x.gif")], "--gif"),
        ([str(tmp_path / "r"), "--seed", "7"], "no run record"),
        ([str(tmp_path / "a3c.json")], "no model file"),
    ]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for argv, needle in cases:
        try:
            code = play.main(argv)
        except SystemExit as e:  # argparse's own errors, as in the other tools
            code = e.code
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and needle in err, (argv, err)
        assert err.startswith("python -m utils.play: error: "), err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    record_text = json.loads(record.read_text())
    assert record_text["config"]["save_model"] is False


def test_an_a3c_checkpoint_plays_the_model_of_its_step(tmp_path):
    """An unfinished A3C run's checkpoint (the shared model, workers idle at the gate) plays the evaluation of its
    step exactly."""
    from utils.run.onpolicy.asynchronous import AsyncTrainer

    args = ["--policy", "A3C", "--env", "CartPole-v1", "--max_time_steps", "1600", "--eval_freq", "800",
            "--eval_episodes", "3", "--num_processes", "1", "--checkpoint_freq", "800", "--quiet", "--seed", "4",
            "--results_dir", str(tmp_path)]
    AsyncTrainer(ac_main.build_config(ac_main.parse(args))).run(stop_at=800)
    curve = np.load(tmp_path / "A3C_CartPole-v1_4.npy")
    assert len(curve) == 2  # steps 0 and 800
    out = play.watch(play.parse([str(tmp_path / "checkpoints" / "A3C_CartPole-v1_4.pt"), "--episodes", "3"]))
    assert np.mean(out["returns"]) == curve[-1] and "(step 800)" in out["loaded"]
