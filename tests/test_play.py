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
    # noisy networks play their means; normalised observations the statistics saved with the model
    "DASE_main_noisy_norm": (DASE_main, "DASE_TD3", "Pendulum-v1", ["--max_time_steps", "600", "--start_time_steps",
                                                                    "300", "--noisy", "--normalize_obs"]),
    "sac_main_discrete_norm": (sac_main, "SAC", "CartPole-v1", ["--num_steps", "600", "--start_steps", "300",
                                                                "--normalize_obs"]),
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
    "sac_main_pixels": (sac_main, "SAC", "PixelPendulum-v1", ["--num_steps", "600", "--start_steps", "500",
                                                             "--batch_size", "8", "--image_features", "8",
                                                             "--hidden_size", "16", "--buffer_size", "1000"]),
    "td3_sensors": (DASE_main, "TD3", "SensorPendulum-v1", ["--max_time_steps", "600", "--start_time_steps",
                                                                  "500", "--batch_size", "8", "--image_features", "8",
                                                                  "--hidden_sizes", "16", "16", "--buffer_size",
                                                                  "1000"]),
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
    variant += "_noisy" if "--noisy" in steps else ""
    variant += "_norm" if "--normalize_obs" in steps else ""
    stem = f"{policy}{variant}_{env}_4"
    return tmp_path / "r" / f"{stem}.json", stem


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_saved_model_plays_its_runs_evaluation_exactly(name, tmp_path):
    """--save_model is enough: the record plays the run's evaluation episodes of the last model, so the mean of
    the returns is the curve's last value, bit for bit (same environment, reset seeds and batch shapes)."""
    record, stem = train(name, tmp_path, "--save_model")
    agents = 2 if name.startswith("DASE_main") else 1
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
    gif = tmp_path / "films" / "new" / "film.gif"  # its folders are made
    assert play.main([str(record), "--episodes", "2", "--gif", str(gif), "--every", "5", "--scale", "2"]) == 0
    out = capsys.readouterr().out
    lengths = [int(line.split("(")[1].split()[0]) for line in out.splitlines() if line.startswith("episode ")]
    frames = iio.imread(gif, index=None)
    expected = sum(len(range(0, n + 1, 5)) for n in lengths)  # the reset's frame and one per step, every 5th
    assert lengths == [200, 200] and frames.shape == (expected, 250, 250, 3), (lengths, frames.shape)
    assert frames.std() > 0  # something was drawn
    assert sorted(p.name for p in gif.parent.iterdir()) == ["film.gif"]  # no temporary file left
    mp4 = tmp_path / "film.mp4"
    assert play.main([str(record), "--episodes", "1", "--mp4", str(mp4), "--every", "10"]) == 0
    assert mp4.read_bytes()[4:8] == b"ftyp" and "WARNING" not in capsys.readouterr().err
    # a film that exists is kept: refused in one line before anything plays, replaced only with --overwrite
    kept = gif.read_bytes()
    with pytest.raises(SystemExit) as e:
        play.main([str(record), "--episodes", "1", "--gif", str(gif), "--every", "10"])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "exists; --overwrite replaces it" in err, err
    assert gif.read_bytes() == kept
    assert play.main([str(record), "--episodes", "1", "--gif", str(gif), "--every", "10", "--overwrite"]) == 0
    assert gif.read_bytes() != kept and len(iio.imread(gif, index=None)) == len(range(0, 201, 10))
    assert sorted(p.name for p in gif.parent.iterdir()) == ["film.gif"]


def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys):
    record, stem = train("DASE_main", tmp_path)  # no --save_model: a finished run without models or checkpoint
    (tmp_path / "junk.json").write_text("[1, 2]")
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "a3c.json").write_text(json.dumps({"config": {"policy": "A3C", "env": "CartPole-v1"}}))
    two = tmp_path / "two"  # two runs of seed 4 in one folder
    two.mkdir()
    for name in ("a.json", "b.json"):
        (two / name).write_text(record.read_text())
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
        ([str(two)], "2 runs here (a.json, b.json); give one record, or --seed"),
        ([str(two), "--seed", "4"], "2 runs of seed 4 here (a.json, b.json); give one record"),
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


# ---- saved models: each run keeps its own, and plays it -----------------------------------------------------------
ROUND_TRIPS = {  # every policy of every script: script, policy, environment, the script's step flags
    "TD3": (DASE_main, "Pendulum-v1", ["--max_time_steps", "400", "--start_time_steps", "200"]),
    "DDPG": (DASE_main, "Pendulum-v1", ["--max_time_steps", "400", "--start_time_steps", "200"]),
    "DASE_TD3": (DASE_main, "Pendulum-v1", ["--max_time_steps", "400", "--start_time_steps", "200"]),
    "DPD_TD3": (DASE_main, "Pendulum-v1", ["--max_time_steps", "400", "--start_time_steps", "200"]),
    "SAC": (sac_main, "Pendulum-v1", ["--num_steps", "400", "--start_steps", "200"]),
    "DASE_SAC": (sac_main, "Pendulum-v1", ["--num_steps", "400", "--start_steps", "200"]),
    "A2C": (ac_main, "CartPole-v1", ["--max_time_steps", "400"]),
    "DIFF_A2C": (ac_main, "CartPole-v1", ["--max_time_steps", "400"]),
    "ACER": (ac_main, "CartPole-v1", ["--max_time_steps", "400", "--replay_start", "100"]),
    "A3C": (ac_main, "CartPole-v1", ["--max_time_steps", "400", "--num_processes", "1"]),
}


def curves_of(folder, stem):
    """A run's curves, agent by agent."""
    one = folder / f"{stem}.npy"
    return [np.load(one)] if one.exists() else [np.load(p) for p in sorted(folder.glob(f"{stem}_Agent_?.npy"))]


@pytest.mark.parametrize("policy", sorted(ROUND_TRIPS))
def test_save_load_and_play_round_trip_of_every_policy(policy, tmp_path):
    """--save_model, then --load_model default into a second run: its step-0 evaluation is the first run's last one,
    agent by agent (the same model on the same evaluation episodes); utils.play of either record plays that run's
    last model exactly (--load_model in ac_main.py crashed for A2C and ACER, and A3C ignored it)."""
    module, env, steps = ROUND_TRIPS[policy]
    common = ["--policy", policy, "--env", env, *steps, "--eval_freq", "200", "--eval_episodes", "2", "--threads", "1",
              "--quiet", "--seed", "4", "--save_model"]
    assert main_guard(module.run, [*common, "--results_dir", str(tmp_path / "r1"),
                                   "--models_dir", str(tmp_path / "m1")]) == 0
    # the second run loads copies of the first run's files (named from_...) and saves its own beside them: one
    # --models_dir serves --load_model and --save_model
    (tmp_path / "m2").mkdir()
    for f in (tmp_path / "m1").iterdir():
        (tmp_path / "m2" / f"from_{f.name}").write_bytes(f.read_bytes())
    stem = next((tmp_path / "r1").glob("*.json")).stem  # DIFF_A2C's names its graph: DIFF_A2C_ring_...
    assert main_guard(module.run, [*common, "--results_dir", str(tmp_path / "r2"), "--models_dir",
                                   str(tmp_path / "m2"), "--load_model", f"from_{stem}"]) == 0
    first, second = curves_of(tmp_path / "r1", stem), curves_of(tmp_path / "r2", stem)
    assert len(first) == len(second) == (1 if policy in ("TD3", "DDPG", "SAC", "A2C", "ACER", "A3C") else
                                         4 if policy == "DIFF_A2C" else 2)
    for a, b in zip(first, second):
        assert b[0] == a[-1], (a, b)
    for run, curves in (("r1", first), ("r2", second)):
        for agent, curve in enumerate(curves):
            out = play.watch(play.parse([str(tmp_path / run), "--episodes", "2", "--agent", str(agent)]))
            assert np.mean(out["returns"]) == curve[-1], (run, agent)


def test_a_run_never_replaces_a_model_another_run_saved(tmp_path, capsys):
    """Two runs of one policy, environment and seed with --save_model into one --models_dir: the second is refused
    in one line before it writes anything, the first's model stays byte for byte and plays the first run; in
    another --models_dir the second runs, and each record plays its own model. A model file of another run put
    where a record's models should be is refused by utils.play, never played in their place."""
    module, env, steps = ROUND_TRIPS["TD3"]
    common = ["--policy", "TD3", "--env", env, *steps, "--eval_freq", "200", "--eval_episodes", "2", "--threads", "1",
              "--quiet", "--seed", "4", "--save_model"]
    assert main_guard(module.run, [*common, "--results_dir", str(tmp_path / "mA"), "--models_dir",
                                   str(tmp_path / "models")]) == 0
    model = tmp_path / "models" / "TD3_Pendulum-v1_4.pt"
    saved = model.read_bytes()
    capsys.readouterr()
    for more in ([], ["--overwrite"], ["--resume"]):
        code = main_guard(module.run, [*common, "--expl_noise", "0.3", "--results_dir", str(tmp_path / "mB"),
                                       "--models_dir", str(tmp_path / "models"), *more])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and "holds the model of the run recorded in" in err, err
        assert str(tmp_path / "mA") in err and not (tmp_path / "mB").exists()
    assert model.read_bytes() == saved
    # the same run again (--overwrite) replaces its own model
    assert main_guard(module.run, [*common, "--results_dir", str(tmp_path / "mA"), "--models_dir",
                                   str(tmp_path / "models"), "--overwrite"]) == 0
    # the other run in a folder of its own; each record plays its own model
    assert main_guard(module.run, [*common, "--expl_noise", "0.3", "--results_dir", str(tmp_path / "mB"),
                                   "--models_dir", str(tmp_path / "modelsB")]) == 0
    a, b = curves_of(tmp_path / "mA", "TD3_Pendulum-v1_4")[0], curves_of(tmp_path / "mB", "TD3_Pendulum-v1_4")[0]
    assert a[-1] != b[-1]
    for run, curve in (("mA", a), ("mB", b)):
        assert np.mean(play.watch(play.parse([str(tmp_path / run), "--episodes", "2"]))["returns"]) == curve[-1]
    # B's model where A's record looks for A's: refused in one line, not played as A's
    model.write_bytes((tmp_path / "modelsB" / model.name).read_bytes())
    assert play.main([str(tmp_path / "mA"), "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "mB") in err and "not of" in err, err


def test_a_truncated_model_file_is_called_damaged_and_no_flag_is_blamed(tmp_path, capsys):
    """A record's --save_model file cut short (a full disk, a copy): utils.play says the file is damaged, in one
    line, and names no --load_model (nobody gave one); the training script's --load_model says the same of it."""
    module, env, steps = ROUND_TRIPS["TD3"]
    common = ["--policy", "TD3", "--env", env, *steps, "--eval_freq", "200", "--eval_episodes", "2", "--threads", "1",
              "--quiet", "--seed", "4", "--models_dir", str(tmp_path / "m")]
    assert main_guard(module.run, [*common, "--save_model", "--results_dir", str(tmp_path / "r")]) == 0
    model = tmp_path / "m" / "TD3_Pendulum-v1_4.pt"
    model.write_bytes(model.read_bytes()[:model.stat().st_size // 2])
    capsys.readouterr()
    assert play.main([str(tmp_path / "r"), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot read {model} (" in err and "the file is damaged" in err, err
    assert "--load_model" not in err
    assert main_guard(module.run, [*common, "--load_model", "default", "--results_dir", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--load_model: cannot read {model} (" in err and "damaged" in err, err


def test_a_paused_run_plays_from_its_checkpoint_and_no_hint_names_a_flag_play_lacks(tmp_path, capsys):
    """A run paused with --stop_at (no --save_model) plays the model of its checkpoint from its record or folder,
    exactly its last evaluation (utils.play used to blame --checkpoint_freq 0, a flag nobody gave); a damaged
    checkpoint's message names no flag of the training scripts (--overwrite)."""
    _, policy, env, steps = RUNS["DASE_main"]
    args = ["--policy", policy, "--env", env, *steps, "--eval_freq", "300", "--eval_episodes", "2", "--threads", "1",
            "--quiet", "--results_dir", str(tmp_path / "r"), "--seed", "4", "--max_time_steps", "1200",
            "--stop_at", "600"]
    assert main_guard(DASE_main.run, args) == 0
    curve = np.load(tmp_path / "r" / f"{policy}_{env}_4_Agent_1.npy")
    assert len(curve) == 3
    for run in (tmp_path / "r", tmp_path / "r" / f"{policy}_{env}_4.json"):
        out = play.watch(play.parse([str(run), "--episodes", "2", "--agent", "1"]))
        assert np.mean(out["returns"]) == curve[-1] and "(step 600)" in out["loaded"]
    broken = tmp_path / "broken.pt"
    broken.write_bytes((tmp_path / "r" / "checkpoints" / f"{policy}_{env}_4.pt").read_bytes()[:300])
    assert play.main([str(broken)]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "--overwrite" not in err and len(err.strip().splitlines()) == 1, err


def test_the_gif_message_counts_what_the_file_holds(tmp_path, capsys, monkeypatch):
    """A GIF merges identical consecutive frames (a lander at rest): the message says how many images the file
    stores, and the stored count is the file's own."""
    frame = np.zeros((8, 8, 3), dtype=np.uint8)
    other = frame + 200
    frames = [frame, frame, frame, other, other, frame]
    stored = play.write_film(str(tmp_path / "f.gif"), frames, 30, mp4=False)
    assert stored == play.gif_images(tmp_path / "f.gif") == 3
    monkeypatch.setattr(play, "watch", lambda args: {"cfg": type("C", (), {"policy": "TD3", "env": "E", "seed": 0}),
                                                     "returns": [1.0], "lengths": [5], "loaded": "x",
                                                     "frames": [frames]})
    assert play.main(["whatever", "--gif", str(tmp_path / "g.gif")]) == 0
    out = capsys.readouterr().out
    assert "(6 frames at 30 fps, 0.2 s; the GIF stores 3 images" in out, out
    # docs/usage.md's rule: a film is refused without --overwrite; with it, the output says it replaced the file
    with pytest.raises(SystemExit) as refused:
        play.main(["whatever", "--gif", str(tmp_path / "g.gif")])
    assert refused.value.code == 2 and "the file exists; --overwrite replaces it" in capsys.readouterr().err
    assert play.main(["whatever", "--gif", str(tmp_path / "g.gif"), "--overwrite"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"replaced {tmp_path / 'g.gif'} (6 frames")
