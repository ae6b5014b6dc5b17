"""A whole A2C run on an Atari game through ac_main.py: the DeepMind preprocessing, the batched CNN, the rollouts
and evaluation on whole games, end to end, for about 10k frames."""
import json

import numpy as np
import pytest

import ac_main
from utils.cli import main_guard
from utils.envs import atari


@pytest.mark.slow
@pytest.mark.skipif(not atari.available(), reason="ale-py is not installed")
@pytest.mark.parametrize("recurrent", [False, True])
def test_a2c_pong_10k_frames_writes_its_curve(tmp_path, recurrent):
    """2496 agent steps of 2 environments (frame skip 4: 9984 frames), evaluated at steps 0, 1248 and 2496 on one
    whole game each (an untrained agent loses 21-0: about 800 steps a game). Measured with --threads 1 on a 2-core
    machine whose other core was busy: 33 s (310 s before GrayResize stopped calling numpy's BLAS). Recurrent: the
    Nature CNN then an LSTM of 256."""
    stem = "A2C_lstm_ALE-Pong-v5_0" if recurrent else "A2C_ALE-Pong-v5_0"
    assert main_guard(ac_main.run, [*(["--recurrent"] if recurrent else []),
                                    "--policy", "A2C", "--env", "ALE/Pong-v5", "--max_time_steps", "2496",
                                    "--envs_per_agent", "2", "--eval_freq", "1248", "--eval_episodes", "1",
                                    "--threads", "1", "--env_workers", "0", "--checkpoint_freq", "0", "--quiet",
                                    "--results_dir", str(tmp_path)]) == 0
    curve = np.load(tmp_path / f"{stem}.npy", allow_pickle=False)
    assert curve.shape == (3,), curve
    assert np.isfinite(curve).all(), curve
    # a whole game's raw score, the agent's points minus the opponent's: a whole number in [-21, 21]
    assert ((curve >= -21) & (curve <= 21)).all(), curve
    assert (curve == np.round(curve)).all(), curve
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    assert record["finished_at_step"] == 2496 and record["curves"] == [f"{stem}.npy"]
    assert record["config"]["env"] == "ALE/Pong-v5" and record["config"]["algo"]["envs_per_agent"] == 2


@pytest.mark.slow
@pytest.mark.skipif(not atari.available(), reason="ale-py is not installed")
@pytest.mark.parametrize("encoder", ["nature", "a3c"])
def test_recurrent_a3c_plays_pong(tmp_path, encoder):
    """A3C with --recurrent on an Atari game: each worker's trunk (the Nature CNN, or the A3C references' smaller
    one) + LSTM of 256 on its own game, evaluated on whole games (raw scores, whole numbers in [-21, 21])."""
    extra = [] if encoder == "nature" else ["--encoder", encoder]
    assert main_guard(ac_main.run, ["--policy", "A3C", "--recurrent", "--env", "ALE/Pong-v5", "--max_time_steps",
                                    "400", "--eval_freq", "400", "--eval_episodes", "1", "--num_processes", "2",
                                    "--quiet", "--results_dir", str(tmp_path), *extra]) == 0
    curve = np.load(tmp_path / "A3C_lstm_ALE-Pong-v5_0.npy", allow_pickle=False)
    assert curve.shape == (2,) and ((curve >= -21) & (curve <= 21)).all() and (curve == np.round(curve)).all()
    record = json.loads((tmp_path / "A3C_lstm_ALE-Pong-v5_0.json").read_text())
    assert record["config"]["algo"]["recurrent"] is True
    assert record["config"]["algo"].get("encoder", "nature") == encoder
