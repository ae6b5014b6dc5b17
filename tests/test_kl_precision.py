"""--kl_precision float32: the paper's code's float32 weighting as a switch, end to end."""
import json

import numpy as np
import pytest

import DASE_main
from algorithms.sharing import weights as sharing
from utils.cli import main_guard
from utils.errors import UsageError
from utils.run.names import CURVE_NAME

RUN = ["--env", "Pendulum-v1", "--policy", "DASE_TD3", "--max_time_steps", "400", "--start_time_steps", "200",
       "--eval_freq", "200", "--eval_episodes", "1", "--quiet", "--threads", "1"]


def test_float32_run_is_named_recorded_and_weighs_in_float32(tmp_path, monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    original = sharing._float32_weights
    monkeypatch.setattr(sharing, "_float32_weights", counted)
    assert main_guard(DASE_main.run, [*RUN, "--kl_precision", "float32", "--results_dir", str(tmp_path)]) == 0
    stem = "DASE_TD3_float32_Pendulum-v1_0"
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    assert record["config"]["sharing"]["kl_precision"] == "float32"
    for i in range(2):
        assert np.load(tmp_path / f"{stem}_Agent_{i}.npy").shape == (3,)
        assert CURVE_NAME.match(f"{stem}_Agent_{i}").group("variant") == "float32"
    assert len(calls) == 200  # one batch of weights per update: steps 200..399


def test_default_runs_record_float64_and_older_records_still_match(tmp_path, monkeypatch):
    """A run at the default records float64 and never calls the float32 rule; a record written before the setting
    existed (no kl_precision) is the same experiment."""
    from utils.run.checkpoint import check_compatible

    monkeypatch.setattr(sharing, "_float32_weights", None)  # calling it would fail the run
    assert main_guard(DASE_main.run, [*RUN, "--results_dir", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "DASE_TD3_Pendulum-v1_0.json").read_text())["config"]
    assert config["sharing"]["kl_precision"] == "float64"
    older = {**config, "sharing": {"similarity": "js", "kl_div_var": 0.1}}
    check_compatible(older, config, tmp_path / "x.pt")  # no error
    with pytest.raises(UsageError, match="kl_precision"):
        check_compatible(older, {**config, "sharing": {**config["sharing"], "kl_precision": "float32"}}, tmp_path)
