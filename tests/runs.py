"""What several tests of the command line do: run an entry script in this process, check that a run paused with
--stop_at and resumed equals the run in one go, check that bad input is refused in one line with nothing written."""
from __future__ import annotations

import numpy as np

from utils.cli import main_guard


def run(script, *args: str) -> int:
    """``script``'s exit code for ``args`` (its ``run`` under the command line's guard)."""
    try:
        return main_guard(script.run, list(args))
    except SystemExit as e:
        return e.code


def resumes_exactly(script, args: list[str], tmp_path, pattern: str, stop_at: int = 700,
                    every: int = 300) -> list[str]:
    """Runs ``args`` in one go into tmp_path/whole and, paused at ``stop_at`` with checkpoints every ``every``
    steps then resumed, into tmp_path/cut; every .npy file matching ``pattern`` is the same in both. Their names."""
    assert run(script, *args, "--results_dir", str(tmp_path / "whole"), "--checkpoint_freq", "0") == 0
    cut = str(tmp_path / "cut")
    assert run(script, *args, "--results_dir", cut, "--checkpoint_freq", str(every), "--stop_at", str(stop_at)) == 0
    assert run(script, *args, "--results_dir", cut, "--checkpoint_freq", str(every), "--resume") == 0
    names = sorted(p.name for p in (tmp_path / "whole").glob(pattern))
    assert names, f"no file {pattern}"
    for name in names:
        np.testing.assert_array_equal(np.load(tmp_path / "cut" / name), np.load(tmp_path / "whole" / name))
    return names


def refused_in_one_line(script, args: list[str], tmp_path, capsys, words: str) -> None:
    """``args`` exit with code 2 and one line on stderr holding ``words``, and write nothing."""
    assert run(script, *args, "--results_dir", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
