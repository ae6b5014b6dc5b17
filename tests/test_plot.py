"""utils.plot: reading curve trees, exact summary numbers, figures, and bad input."""
import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from utils import plot

PAPER = Path(__file__).resolve().parent.parent / "Learning Curves" / "paper" / "Unlimited_Buffer"  # committed


def write(path: Path, values, dtype=np.float64):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.asarray(values, dtype=dtype))


def synthetic_tree(root: Path) -> None:
    """TD3 on Pendulum-v1: 4 seeds, run s is the constant-slope line s + 10 * k over 21 evaluations;
    DASE_TD3: 2 seeds x 2 agents, constants 100, 200, 300, 400."""
    for s in range(4):
        write(root / f"TD3_Pendulum-v1_{s}.npy", s + 10.0 * np.arange(21))
    for s in range(2):
        for a in range(2):
            write(root / f"DASE_TD3_Pendulum-v1_{s}_Agent_{a}.npy", np.full(21, 100.0 * (1 + 2 * s + a)))


def read_summary(out: Path) -> dict:
    with open(out / "summary.csv") as f:
        return {r["method"]: r for r in csv.DictReader(f)}


def test_summary_numbers_are_exact(tmp_path):
    synthetic_tree(tmp_path / "runs")
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--at", "5000", "20000", "99000"]) == 0
    rows = read_summary(tmp_path / "out")
    td3, dase = rows["TD3"], rows["DASE_TD3"]
    assert td3["runs"] == "4" and dase["runs"] == "4" and td3["evaluations"] == "21"  # curve files
    assert td3["seeds"] == "4" and dase["seeds"] == "2"  # runs: DASE_TD3's are 2 seeds of 2 agents
    # final = mean of the last tenth of the 21 evaluations, 19 and 20, of run s = s + 195; across runs 0..3: mean
    # 196.5, population std sqrt(1.25)
    assert td3["final_evaluations"] == "2"
    assert float(td3["final_mean"]) == pytest.approx(196.5, abs=1e-12)
    assert float(td3["final_std"]) == pytest.approx(math.sqrt(1.25), abs=1e-12)
    assert float(td3["at_5000_mean"]) == pytest.approx(51.5, abs=1e-12)  # evaluation 5: s + 50
    assert float(td3["at_20000_mean"]) == pytest.approx(201.5, abs=1e-12)
    assert math.isnan(float(td3["at_99000_mean"]))  # beyond the runs
    # AUC = trapezoid area / 20000 steps = mean of the straight line = s + 100
    assert float(td3["auc_mean"]) == pytest.approx(101.5, abs=1e-9)
    assert float(td3["auc_std"]) == pytest.approx(math.sqrt(1.25), abs=1e-9)
    # IQM of finals 195..198 (drop one each end) = 196.5; DASE pools 4 agents: 100..400 -> IQM 250
    assert float(td3["iqm_final"]) == pytest.approx(196.5, abs=1e-12)
    assert float(dase["iqm_final"]) == pytest.approx(250.0, abs=1e-12)
    assert float(dase["final_mean"]) == pytest.approx(250.0) and float(dase["final_std"]) == pytest.approx(math.sqrt(12500))
    lo, hi = float(dase["iqm_ci_low"]), float(dase["iqm_ci_high"])
    assert 100.0 <= lo <= 250.0 <= hi <= 400.0
    md = (tmp_path / "out" / "summary.md").read_text()
    assert md.startswith("| environment | method | runs | final return (last 2 evaluations) | return at 5,000 |")
    assert "| Pendulum-v1 | TD3 | 4 | 196.5 ± 1.1 |" in md
    assert "| Pendulum-v1 | DASE_TD3 | 2 (4 agents) | 250.0 ± 111.8 |" in md


@pytest.mark.parametrize("evaluations,window", [(1, 1), (11, 1), (16, 1), (21, 2), (53, 5), (99, 9), (100, 10),
                                                (101, 10), (301, 10), (1001, 10)])
def test_the_final_return_averages_the_last_tenth_of_the_evaluations_at_most_ten(evaluations, window):
    """Runs of 100 evaluations or more (the published tables': 100k, 300k and 1M steps) keep the last 10."""
    from utils.plot.tables import final_window
    assert final_window(evaluations) == window


def test_the_final_return_of_readmes_first_run_is_its_last_evaluation(tmp_path):
    """README's first run: 11 evaluations, the first two the warm-up's (-1219.9, -1260.9 again at step 1000), the
    last -125.6 and -111.0. Its "final return" is -118.3, what the run printed last; it was the mean of the last 10
    of the 11 evaluations, warm-up included (-677.9 there), under a header that did not say so."""
    last = {0: -125.6, 1: -111.0}
    warm = {0: -1219.9, 1: -1260.9}
    for a in range(2):
        curve = np.linspace(warm[a], last[a], 11)
        curve[1] = warm[a]
        write(tmp_path / "first_run" / f"DASE_TD3_Pendulum-v1_0_Agent_{a}.npy", curve)
    assert plot.main([str(tmp_path / "first_run"), "--out", str(tmp_path / "out")]) == 0
    row = read_summary(tmp_path / "out")["DASE_TD3"]
    assert row["final_evaluations"] == "1" and float(row["final_mean"]) == pytest.approx(-118.3)
    md = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert md[0] == "| environment | method | runs | final return (last 1 evaluation) | AUC | IQM final [95% CI] |"
    assert md[2].startswith("| Pendulum-v1 | DASE_TD3 | 1 (2 agents) | -118.3 ± 7.3 |")  # one run, not 2


def test_rows_of_other_final_windows_name_theirs(tmp_path):
    """Runs of 101 and of 21 evaluations in one table: the header names the rule, each cell its window."""
    write(tmp_path / "TD3_Hopper-v5_0.npy", np.arange(101.0))
    write(tmp_path / "TD3_Pendulum-v1_0.npy", np.arange(21.0))
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert md[0].startswith("| environment | method | runs | final return (last 10 % of evaluations, at most 10) |")
    assert md[2].startswith("| Hopper-v5 | TD3 | 1 | 95.5 ± 0.0 (last 10) |")
    assert md[3].startswith("| Pendulum-v1 | TD3 | 1 | 19.5 ± 0.0 (last 2) |")


def test_iqm_matches_the_definition():
    x = np.array([5.0, 1.0, 9.0, 3.0, 7.0, 100.0, -50.0, 2.0])  # n = 8: drop 2 at each end
    assert plot.iqm(x) == pytest.approx(np.mean([2.0, 3.0, 5.0, 7.0]))


def test_bootstrap_ci_agrees_with_rliable_and_repeats_itself():
    """Our interval (a percentile bootstrap of 2000 resamples, vectorised over a curve's evaluations) against rliable's
    (Agarwal et al. 2021; its stratified bootstrap through arch, 20,000 resamples, the percentile method), the field's
    library for these intervals: each bound within 10 % of the interval's width (Monte Carlo error of 2000 resamples
    is about 2 %), for a statistic over 1-D runs and for every evaluation of curves. And the same call gives the same
    bits; another seed other resamples."""
    from rliable.library import get_interval_estimates
    rng = np.random.default_rng(7)
    final = rng.normal(100.0, 60.0, size=8)
    curves = rng.normal(0.0, 1.0, size=(6, 40)).cumsum(axis=1)  # [runs, evaluations]
    for x, stat in ((final, np.mean), (final, plot.iqm), (curves, np.mean)):
        lo, hi = (np.atleast_1d(b) for b in plot.bootstrap_ci(x, stat))
        scores = x[:, None] if x.ndim == 1 else x
        outer = np.random.get_state()
        np.random.seed(0)  # rliable 1.2 draws from NumPy's global generator
        _, ci = get_interval_estimates({"x": scores}, lambda s: np.atleast_1d(stat(s, axis=0)), reps=20_000)
        np.random.set_state(outer)
        width = ci["x"][1] - ci["x"][0]
        assert np.all(np.abs(lo - ci["x"][0]) <= 0.1 * width) and np.all(np.abs(hi - ci["x"][1]) <= 0.1 * width)
    assert plot.bootstrap_ci(final, np.mean) == plot.bootstrap_ci(final, np.mean)
    assert plot.bootstrap_ci(final, np.mean, seed=1) != plot.bootstrap_ci(final, np.mean)


def test_smoothing_is_a_trailing_mean():
    y = np.array([0.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(plot.smooth(y, 2), [0.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(plot.smooth(y, 1), y)


def test_figures_written(tmp_path):
    synthetic_tree(tmp_path / "runs")
    write(tmp_path / "runs" / "SAC_Hopper-v5_0.npy", np.linspace(0, 1000, 11))
    out = tmp_path / "out"
    assert plot.main([str(tmp_path / "runs"), "--out", str(out), "--ci", "--smooth", "3", "--per_agent"]) == 0
    for name in ["Pendulum-v1.png", "Hopper-v5.png", "all_environments.png"]:
        assert (out / name).stat().st_size > 10_000, name
    assert set(read_summary(out)) == {"TD3", "DASE_TD3 agent 0", "DASE_TD3 agent 1", "SAC"}
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "pdf"), "--pdf"]) == 0
    assert (tmp_path / "pdf" / "all_environments.pdf").read_bytes()[:4] == b"%PDF"


def test_mismatched_lengths_use_the_common_prefix(tmp_path, capsys):
    write(tmp_path / "TD3_Hopper-v5_0.npy", np.arange(10.0))
    write(tmp_path / "TD3_Hopper-v5_1.npy", np.arange(4.0))
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    assert "using the common first 4" in capsys.readouterr().err
    assert read_summary(tmp_path / "out")["TD3"]["evaluations"] == "4"


def test_broken_files_are_skipped_with_a_warning(tmp_path, capsys):
    write(tmp_path / "TD3_Hopper-v5_0.npy", np.arange(10.0))
    (tmp_path / "TD3_Hopper-v5_1.npy").write_bytes(b"\x93NUMPY garbage")  # truncated / corrupt
    (tmp_path / "TD3_Hopper-v5_2.npy").write_bytes(b"")  # empty file
    write(tmp_path / "TD3_Hopper-v5_3.npy", np.zeros((3, 3)))  # wrong shape
    write(tmp_path / "TD3_Hopper-v5_4.npy", np.array(["a", "b"]), dtype=None)  # wrong dtype
    write(tmp_path / "TD3_Hopper-v5_5.npy", np.array([]))  # no evaluations
    write(tmp_path / "notes_about_runs.npy", np.arange(3.0))  # not a curve name
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    for i in range(1, 6):
        assert f"TD3_Hopper-v5_{i}.npy" in err
    assert "notes_about_runs.npy" in err
    assert read_summary(tmp_path / "out")["TD3"]["runs"] == "1"


def test_no_curves_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert plot.main([str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m utils.plot: error: no curve files") and len(err.splitlines()) == 1
    assert plot.main([str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2


@pytest.mark.parametrize("tool", ["plot", "windows"])
def test_a_folder_of_unrelated_arrays_is_one_line(tool, tmp_path, capsys):
    """.npy files that are no curves (other names, or a curve's name on a 2-D array): one line, exit code 2, no warning
    per file before it (there were 4); it says how many files it skipped and why the first."""
    from utils.plot import windows

    for name in ("embeddings", "labels", "notes"):
        write(tmp_path / "junk" / f"{name}.npy", np.arange(3.0))
    write(tmp_path / "junk" / "TD3_Hopper-v5_0.npy", np.zeros((3, 3)))
    capsys.readouterr()
    if tool == "plot":
        assert plot.main([str(tmp_path / "junk"), "--out", str(tmp_path / "out")]) == 2
    else:
        assert windows.main([str(tmp_path / "junk"), "--at", "1000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"python -m utils.{'plot' if tool == 'plot' else 'plot.windows'}: error: "
                                               "no curve files"), err
    assert "4 .npy files skipped; the first: " in err[0] and "TD3_Hopper-v5_0.npy" in err[0]  # sorted: T < e
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where,needle", [("a_file", "a_file is a file, not a folder"),
                                          ("a_file/sub", "a_file is a file, not a folder"),
                                          ("/proc/forbidden", "cannot write there"),
                                          ("", "an empty path")])
def test_an_out_that_cannot_be_a_folder_is_one_line(where, needle, tmp_path, capsys, monkeypatch):
    """--out on a file, under a file, where nothing can be written, or empty (the current folder): one line,
    exit code 2, nothing written."""
    synthetic_tree(tmp_path / "runs")
    (tmp_path / "a_file").write_text("in the way")
    monkeypatch.chdir(tmp_path)
    assert plot.main(["runs", "--out", where]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("python -m utils.plot: error: --out") and needle in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "runs"]
    assert (tmp_path / "a_file").read_text() == "in the way"


def test_reads_the_papers_curves():
    groups = {(g.env, g.label): g for g in plot.group_curves(plot.find_curves([PAPER / "TD3"]))}
    assert set(groups) == {(e, m) for e in ("HalfCheetah-v2", "Hopper-v2", "LunarLanderContinuous-v2")
                           for m in ("TD3", "DASE_TD3", "DPD_TD3")}
    for (_env, label), g in groups.items():
        assert g.matrix().shape == ((20 if label == "DASE_TD3" else 10), 1001)


def test_reference_overlay_matches_versions(tmp_path):
    write(tmp_path / "runs" / "TD3_Hopper-v5_0.npy", np.linspace(0, 3000, 1001))
    out = tmp_path / "out"
    assert plot.main([str(tmp_path / "runs"), "--out", str(out), "--reference", str(PAPER / "TD3")]) == 0
    rows = read_summary(out)
    assert rows["TD3 (reference)"]["environment"] == "Hopper-v2" and rows["TD3 (reference)"]["runs"] == "10"
    assert (out / "Hopper-v5.png").is_file() and not (out / "HalfCheetah-v2.png").exists()


def test_a_walk_leaves_reference_folders_out_unless_they_are_named(tmp_path, capsys):
    """A folder holding a .reference file (the paper's curves, committed under 'Learning Curves/paper') is not read as
    our runs when a folder above it is plotted, with a note; named as --reference (or as a folder to plot) it is."""
    write(tmp_path / "runs" / "TD3_Hopper-v5_0.npy", np.linspace(0, 3000, 11))
    write(tmp_path / "runs" / "paper" / "TD3" / "TD3_Hopper-v2_0.npy", np.linspace(0, 2000, 11))
    (tmp_path / "runs" / "paper" / ".reference").write_text("reference curves\n")
    assert [c.env for c in plot.find_curves([tmp_path / "runs"])] == ["Hopper-v5"]
    capsys.readouterr()
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "a")]) == 0
    assert set(read_summary(tmp_path / "a")) == {"TD3"}
    notes = [line for line in capsys.readouterr().err.splitlines() if "paper" in line]
    assert len(notes) == 1 and notes[0].startswith("note: not reading") and "--reference" in notes[0], notes
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "b"), "--reference",
                      str(tmp_path / "runs" / "paper" / "TD3")]) == 0
    assert set(read_summary(tmp_path / "b")) == {"TD3", "TD3 (reference)"}
    assert "not reading" not in capsys.readouterr().err
    assert [c.env for c in plot.find_curves([tmp_path / "runs" / "paper"])] == ["Hopper-v2"]  # named: read


def test_the_committed_learning_curves_never_pool_the_papers_curves_with_ours():
    """'Learning Curves' walked whole reads none of the paper's published curves nor the paper code's runs."""
    root = PAPER.parent.parent
    curves = plot.find_curves([root])
    assert curves and not [c.path for c in curves if {"paper", "paper_code"} & set(c.path.relative_to(root).parts)]
    assert len(plot.find_curves([PAPER / "TD3" / "Hopper-v2"])) == 40


# ---- sharing weights (--weights) -----------------------------------------------------------------

def weight_values(seed: int, agent: int, n: int = 21) -> np.ndarray:
    """Weights of one DASE run: NaN at step 0 and in the warm-up (evaluations 1-2), NaN for this run only at
    evaluation 3 + seed, otherwise values in [0, 1] that differ by run."""
    w = np.linspace(0.1 * (1 + seed), 0.2 * (1 + agent), n) % 1.0
    w[:3] = np.nan
    w[3 + seed] = np.nan
    return w


def weighted_tree(root: Path) -> dict[tuple[int, int], np.ndarray]:
    synthetic_tree(root)
    weights = {}
    for s in range(2):
        for a in range(2):
            weights[(s, a)] = weight_values(s, a)
            write(root / f"DASE_TD3_Pendulum-v1_{s}_Agent_{a}_weights.npy", weights[(s, a)])
    return weights


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def nanmean_over_runs(arrays) -> np.ndarray:
    """np.nanmean over runs (its 'Mean of empty slice' warning for all-NaN steps silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.stack(arrays), axis=0)


def test_weight_files_are_not_curves(tmp_path, capsys):
    synthetic_tree(tmp_path / "plain")
    weighted_tree(tmp_path / "weighted")
    assert len(plot.find_curves([tmp_path / "weighted"])) == 8  # 4 TD3 + 4 DASE curves, no weight file
    capsys.readouterr()
    assert plot.main([str(tmp_path / "plain"), "--out", str(tmp_path / "a")]) == 0
    assert plot.main([str(tmp_path / "weighted"), "--out", str(tmp_path / "b")]) == 0
    assert plot.main([str(tmp_path / "weighted"), "--out", str(tmp_path / "c"), "--weights"]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err and "note" not in err, err
    # the returns table does not change with weight files present, nor with --weights
    summary = (tmp_path / "a" / "summary.csv").read_text()
    assert (tmp_path / "b" / "summary.csv").read_text() == summary
    assert (tmp_path / "c" / "summary.csv").read_text() == summary
    # a *_weights.npy name whose curve part does not follow the naming is still warned about
    write(tmp_path / "weighted" / "notes_weights.npy", np.zeros(3))
    plot.find_curves([tmp_path / "weighted"])
    assert "notes_weights.npy" in capsys.readouterr().err


def test_weights_axis_is_the_nanmean_over_runs(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = weighted_tree(tmp_path / "runs")
    # a step where every run is NaN: not drawn
    for (s, a), w in weights.items():
        w[10] = np.nan
        write(tmp_path / "runs" / f"DASE_TD3_Pendulum-v1_{s}_Agent_{a}_weights.npy", w)

    # the figures: with --weights each is taller (the weight axis under the returns)
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "plain")]) == 0
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "w"), "--weights", "--ci", "--smooth", "3"]) == 0
    for name in ["Pendulum-v1.png", "all_environments.png"]:
        (w_width, w_height), (width, height) = png_size(tmp_path / "w" / name), png_size(tmp_path / "plain" / name)
        assert w_width == width and w_height > height * 1.15, name

    # the drawing itself: pooled (one DASE line, mean over the 4 agent runs) and per agent
    curves = plot.find_curves([tmp_path / "runs"])
    assert plot.attach_weights(curves, plot.find_weights([tmp_path / "runs"])) == 4
    for per_agent, expected in [
        (False, {"DASE_TD3": list(weights.values())}),
        (True, {f"DASE_TD3 agent {a}": [weights[(s, a)] for s in range(2)] for a in range(2)}),
    ]:
        groups = plot.group_curves(curves, per_agent)
        fig, (ax, wax) = plt.subplots(2, 1, sharex=True)
        colors = plot.draw_returns(ax, groups, 1000, ci=False, window=1)
        lines = plot.draw_weights(wax, groups, 1000, colors)
        assert sorted(line.get_label() for line in lines) == sorted(k.replace("_", "-") for k in expected)
        return_colors = {line.get_label().split(" (")[0]: line.get_color() for line in ax.get_lines()}
        for line in lines:
            label = line.get_label()
            runs = expected[label.replace("-", "_")]
            mean = nanmean_over_runs(runs)
            assert np.isnan(mean[:3]).all() and np.isnan(mean[10]) and np.isfinite(mean[3:10]).all()
            np.testing.assert_array_equal(line.get_xdata(), np.arange(21) * 1000)
            np.testing.assert_allclose(line.get_ydata(), mean, rtol=0, atol=1e-15)  # NaN where NaN
            assert line.get_color() == return_colors[label]
        assert wax.get_ylim() == (0.0, 1.05) and wax.get_ylabel() == "Weight of shared samples"
        plt.close(fig)


def test_bad_weight_files_are_warned_and_skipped(tmp_path, capsys):
    weights = weighted_tree(tmp_path)
    good = weights[(0, 0)]
    bad = {
        "DASE_TD3_Pendulum-v1_0_Agent_1_weights.npy": np.where(np.isnan(good), np.nan, 1.5),  # above 1
        "DASE_TD3_Pendulum-v1_1_Agent_0_weights.npy": np.zeros((21, 2)),  # not 1-D
        "DASE_TD3_Pendulum-v1_1_Agent_1_weights.npy": good[:20],  # not as long as its curve
        "TD3_Pendulum-v1_0_weights.npy": np.full(21, -np.inf),  # outside [0, 1]
        "DASE_TD3_Pendulum-v1_7_Agent_0_weights.npy": good,  # no curve beside it
    }
    for name, values in bad.items():
        write(tmp_path / name, values)
    (tmp_path / "TD3_Pendulum-v1_1_weights.npy").write_bytes(b"\x93NUMPY garbage")  # corrupt
    capsys.readouterr()
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "out"), "--weights"]) == 0
    err = capsys.readouterr().err
    for name in [*bad, "TD3_Pendulum-v1_1_weights.npy"]:
        assert f"{name}:" in err, name
    assert err.count("warning:") == len(bad) + 1
    curves = plot.find_curves([tmp_path])
    assert plot.attach_weights(curves, plot.find_weights([tmp_path])) == 1
    [dase] = [g for g in plot.group_curves(curves) if g.label == "DASE_TD3"]
    np.testing.assert_array_equal(dase.weight_matrix(), good[None])


def test_weights_without_weight_files_is_a_note(tmp_path, capsys):
    synthetic_tree(tmp_path / "runs")
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    assert plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "w"), "--weights"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("note: --weights: no usable weight files"), err
    assert png_size(tmp_path / "w" / "Pendulum-v1.png") == png_size(tmp_path / "plain" / "Pendulum-v1.png")


@pytest.mark.parametrize("ci,band", [(False, "±1 std"), (True, "95% CI")])
def test_legend_says_how_many_runs_and_what_the_band_is(ci, band, tmp_path):
    import matplotlib.pyplot as plt

    synthetic_tree(tmp_path)
    by_label = {g.label: g for g in plot.group_curves(plot.find_curves([tmp_path]))}
    fig = plot.env_figure("Pendulum-v1", list(by_label.values()), 1000, ci, 1)
    legend = sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    # runs are seeds: DASE_TD3's 2 seeds of 2 agents are 2 runs, not 4 (the band is over its 4 curves)
    assert legend == sorted([f"DASE-TD3 (2 runs of 2 agents, {band})", f"TD3 (4 runs, {band})"])
    plt.close(fig)


def test_the_legend_counts_a_run_of_two_agents_as_one_run(tmp_path):
    """README's first run (DASE_TD3, one seed, two agents) is '1 run of 2 agents' (it said '2 runs'); per agent, each
    line is 1 run; the same seed in two folders is two runs; a seed with fewer agents than the others is counted."""
    import matplotlib.pyplot as plt

    for a in range(2):
        write(tmp_path / "first_run" / f"DASE_TD3_Pendulum-v1_0_Agent_{a}.npy", np.arange(11.0))
    for per_agent, expected in ((False, ["DASE-TD3 (1 run of 2 agents, ±1 std)"]),
                                (True, ["DASE-TD3 agent 0 (1 run, no band)", "DASE-TD3 agent 1 (1 run, no band)"])):
        groups = plot.group_curves(plot.find_curves([tmp_path / "first_run"]), per_agent)
        fig = plot.env_figure("Pendulum-v1", groups, 1000, False, 1)
        assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == expected
        plt.close(fig)
    for a in range(2):
        write(tmp_path / "again" / f"DASE_TD3_Pendulum-v1_0_Agent_{a}.npy", np.arange(11.0))
    write(tmp_path / "again" / "DASE_TD3_Pendulum-v1_1_Agent_0.npy", np.arange(11.0))
    [g] = plot.group_curves(plot.find_curves([tmp_path / "first_run", tmp_path / "again"]))
    assert g.seeds() == 3 and "(3 runs, 5 agents, ±1 std)" in plot.figures.legend_label(g, False)


def test_every_plain_method_gets_its_own_colour_and_a_reference_keeps_its_methods(tmp_path):
    """TD3, SAC and ACER are all plain methods (no sharing prefix): they were drawn in one colour, so a figure of the
    three (Figures/acer_mujoco) could not be read; each now has its own, and the paper's TD3 (dashed) takes ours'."""
    import matplotlib.pyplot as plt

    for policy in ("ACER", "SAC", "TD3"):
        write(tmp_path / "runs" / f"{policy}_Hopper-v5_0.npy", np.linspace(0, 3000, 1001))
    groups = plot.group_curves(plot.find_curves([tmp_path / "runs"]))
    groups += plot.group_curves(plot.find_curves([PAPER / "TD3" / "Hopper-v2"]), reference=True)
    fig, ax = plt.subplots()
    colors = plot.draw_returns(ax, groups, 1000, ci=False, window=1)
    ours = {g.label: colors[id(g)] for g in groups if not g.reference}
    assert len({ours[p] for p in ("ACER", "SAC", "TD3")}) == 3
    papers = {g.label: colors[id(g)] for g in groups if g.reference}
    assert papers["TD3"] == ours["TD3"] and papers["DASE_TD3"] == "tab:red"  # no group of ours: its method's
    assert [line.get_linestyle() for line in ax.get_lines()] == ["-"] * 3 + ["--"] * 3
    plt.close(fig)


@pytest.mark.parametrize("scale,expected", [
    (0.012, "log"),  # the paper's v: about 0.01, a flat zero on a 0-1 axis
    (1e-18, "log"),  # the matched v
    ("spread", "log"),  # from 0.5 down to 1e-4: four decades
    (0.4, "linear"),  # weights a linear axis shows
])
def test_weight_axis_turns_logarithmic_for_small_or_spread_weights(scale, expected, tmp_path):
    import matplotlib.pyplot as plt

    synthetic_tree(tmp_path)
    for s in range(2):
        for a in range(2):
            w = np.geomspace(0.5, 1e-4, 21) if scale == "spread" else np.full(21, scale) * (1 + 0.1 * a)
            w[:3] = np.nan  # step 0 and the warm-up
            write(tmp_path / f"DASE_TD3_Pendulum-v1_{s}_Agent_{a}_weights.npy", w)
    curves = plot.find_curves([tmp_path])
    plot.attach_weights(curves, plot.find_weights([tmp_path]))
    groups = plot.group_curves(curves)
    for weights, scale_wanted in [(True, expected), ("log", "log")]:  # --weights_log forces it
        fig = plot.env_figure("Pendulum-v1", groups, 1000, False, 1, weights=weights)
        wax = fig.axes[1]
        assert wax.get_yscale() == scale_wanted, (weights, scale)
        lo, hi = wax.get_ylim()
        drawn = np.concatenate([line.get_ydata() for line in wax.get_lines()])
        drawn = drawn[np.isfinite(drawn)]
        assert lo <= drawn.min() and drawn.max() <= hi  # every weight drawn lies inside the axis
        plt.close(fig)


def test_window_table_is_exact(tmp_path, capsys):
    """python -m utils.plot.windows: per run the mean of the window ending at the step, the mean over runs; the
    weight column the median over runs of each run's mean weight after the step (NaN ignored)."""
    from utils.plot import windows

    weights = weighted_tree(tmp_path)
    assert windows.main([str(tmp_path), "--at", "10000", "20000", "--window", "5", "--weights_after", "5000"]) == 0
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]}
    # TD3 run s is s + 10 k: the window ending at evaluation 10 averages 80 + s; over the 4 runs 81.5
    assert rows["TD3"][1] == "4" and rows["TD3"][2].startswith("81.5 [") and rows["TD3"][3].startswith("181.5 [")
    assert rows["TD3"][4].strip(" |") == "-"
    # DASE_TD3 runs are constants 100..400: 250 at every step
    assert rows["DASE_TD3"][1] == "4" and rows["DASE_TD3"][2].startswith("250.0 [")
    per_run = [np.nanmean(weights[(s, a)][6:]) for s in range(2) for a in range(2)]
    assert rows["DASE_TD3"][4].strip(" |") == f"{np.median(per_run):.3g} [{min(per_run):.2g}, {max(per_run):.2g}]"
    # a window that does not fit: one line, exit code 2
    assert windows.main([str(tmp_path), "--at", "3000", "--window", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("python -m utils.plot.windows: error: --at 3000")


def test_consensus_files_are_read_per_run_and_drawn_on_a_log_axis(tmp_path, capsys):
    """--consensus: one {stem}_consensus.npy per run (seed), never read as a curve, shared by the run's agents,
    its mean over runs drawn under the returns on a log axis; a file of the wrong length is skipped."""
    import matplotlib.pyplot as plt

    synthetic_tree(tmp_path)
    for s in range(3):
        for a in range(4):
            write(tmp_path / f"DIFF_TD3_ring_Pendulum-v1_{s}_Agent_{a}.npy", np.full(21, -300.0 + a))
        write(tmp_path / f"DIFF_TD3_ring_Pendulum-v1_{s}_consensus.npy", np.geomspace(10.0, 1e-3, 21) * (s + 1))
    write(tmp_path / "DIFF_TD3_ring_Pendulum-v1_9_Agent_0.npy", np.full(21, -300.0))
    write(tmp_path / "DIFF_TD3_ring_Pendulum-v1_9_consensus.npy", np.ones(5))  # wrong length
    curves = plot.find_curves([tmp_path])
    assert not any("consensus" in c.path.name for c in curves)
    assert plot.attach_consensus(curves, plot.find_consensus([tmp_path])) == 12
    assert "DIFF_TD3_ring_Pendulum-v1_9_consensus.npy: 5 entries" in capsys.readouterr().err
    groups = {g.label: g for g in plot.group_curves(curves)}
    diff = groups["DIFF_TD3_ring"]  # a method of its own, beside TD3 and DASE_TD3
    assert set(groups) == {"TD3", "DASE_TD3", "DIFF_TD3_ring"} and len(diff.runs) == 13
    np.testing.assert_allclose(diff.consensus_matrix().mean(0), 2.0 * np.geomspace(10.0, 1e-3, 21))
    fig = plot.env_figure("Pendulum-v1", list(groups.values()), 1000, False, 1, consensus=True)
    cax = fig.axes[1]
    assert cax.get_yscale() == "log" and len(cax.get_lines()) == 1
    np.testing.assert_allclose(cax.get_lines()[0].get_ydata(), 2.0 * np.geomspace(10.0, 1e-3, 21))
    plt.close(fig)
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "out"), "--consensus", "--weights"]) == 0


def test_a_plot_says_which_files_of_an_earlier_call_it_replaced(tmp_path, capsys):
    """docs/usage.md's rule: figures and summaries are made again from the curves, so a second plot into the same
    --out replaces them, and its output says so; a file of another name there is left alone and not named."""
    synthetic_tree(tmp_path / "runs")
    out = tmp_path / "out"
    assert plot.main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert "replaced" not in capsys.readouterr().out
    (out / "notes.txt").write_text("mine")
    (out / "summary.md").unlink()
    assert plot.main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("wrote ") and "; replaced Pendulum-v1.png, all_environments.png, summary.csv (" in last
    assert "notes.txt" not in last and (out / "notes.txt").read_text() == "mine"
    assert plot.main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("; replaced all of them (written before, made again "
                                                             "from the curves)")


@pytest.mark.parametrize("values, points", [([0.0, 0.0, 0.3, 0.0, 0.0], 1), ([0.0] * 5, 0)],
                         ids=["one non-zero value", "all zero"])
def test_a_consensus_of_zeros_leaves_no_empty_log_panel(values, points, tmp_path):
    """Agents that start equal disagree by 0, which a log axis cannot show: a run with one non-zero value draws it
    as a marker (a lone point makes no line segment: the panel was empty); all zeros is said in words on a linear
    axis."""
    import matplotlib.pyplot as plt

    for a in range(2):
        write(tmp_path / f"DIFF_TD3_ring_Pendulum-v1_0_Agent_{a}.npy", np.full(5, -300.0))
    write(tmp_path / "DIFF_TD3_ring_Pendulum-v1_0_consensus.npy", np.array(values))
    curves = plot.find_curves([tmp_path])
    assert plot.attach_consensus(curves, plot.find_consensus([tmp_path])) == 2
    fig = plot.env_figure("Pendulum-v1", plot.group_curves(curves), 1000, False, 1, consensus=True)
    fig.canvas.draw()
    cax = fig.axes[1]
    (line,) = cax.get_lines()
    ys = np.asarray(line.get_ydata(), dtype=float)
    marked = [i for i, m in enumerate(line.get_markevery() or []) if m]
    if points:
        assert cax.get_yscale() == "log" and marked == [2] and ys[2] == 0.3 and line.get_marker() == "o"
    else:
        assert cax.get_yscale() == "linear" and not marked
        assert any("disagreement 0 throughout" in t.get_text() for t in cax.texts)
    plt.close(fig)


def test_task_score_table_is_exact(tmp_path, capsys):
    """python -m utils.plot.tasks: per run the mean of the last evaluations on its own task, on the others' and on
    all; per method the mean over runs."""
    from utils.plot import tasks

    for a in range(3):  # 3 agents; agent a scores 100 * a on its own task, -50 on the others', before the last 2
        scores = np.full((6, 3), -50.0)
        scores[:, a] = 100.0 * a
        scores[:4] = -1000.0
        write(tmp_path / "r" / f"DIFF_TD3_ring_RandomExtremePendulum-v1_0_Agent_{a}_tasks.npy", scores)
        write(tmp_path / "r" / f"DIFF_TD3_ring_RandomExtremePendulum-v1_0_Agent_{a}.npy", scores[:, a])
    assert tasks.main([str(tmp_path / "r"), "--last", "2", "--out", str(tmp_path / "out")]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if "DIFF_TD3_ring" in line][0].split(" | ")
    assert row[2] == "3"
    assert row[3].startswith("100.0 [")  # own: 0, 100, 200
    assert row[4].startswith("-50.0 [-50.0, -50.0]")
    assert row[5].startswith(f"{np.mean([(100.0 * a - 100.0) / 3 for a in range(3)]):.1f} [")
    assert (tmp_path / "out" / "tasks.md").exists()
    assert tasks.main([str(tmp_path / "nothing_here")]) == 2
    assert tasks.main([str(tmp_path / "r"), "--last", "0"]) == 2


def test_runs_with_other_replay_flags_are_other_methods(tmp_path):
    """Plain, --n_step 3 and --prioritized runs of TD3 share their curve names; their JSON records tell them apart,
    so each is its own line and table row (they were pooled into one 'TD3' of 6 runs)."""
    import json

    def run(folder: str, seed: int, value: float, config: dict) -> None:
        write(tmp_path / folder / f"TD3_Pendulum-v1_{seed}.npy", np.full(5, value))
        (tmp_path / folder / f"TD3_Pendulum-v1_{seed}.json").write_text(json.dumps({"config": {"eval_freq": 1000,
                                                                                              **config}}))

    for s in range(2):
        run("plain", s, -100.0 - s, {"n_step": 1, "per": None})
        run("nstep", s, -50.0 - s, {"n_step": 3, "per": None})
        run("both", s, -20.0 - s, {"n_step": 3, "per": {"alpha": 0.6}})
        run("js", s, -10.0 - s, {"n_step": 1, "sharing": {"similarity": "js"}})  # the paper's: no flag to name
        run("plain_sharing", s, -5.0 - s, {"n_step": 1, "sharing": {"similarity": "none"}})
    folders = ("plain", "nstep", "both", "js", "plain_sharing")
    assert plot.main([str(tmp_path / d) for d in folders] + ["--out", str(tmp_path / "out")]) == 0
    rows = read_summary(tmp_path / "out")
    assert set(rows) == {"TD3", "TD3 --n_step 3", "TD3 --n_step 3 --prioritized", "TD3 --similarity none"}
    assert [rows[k]["runs"] for k in sorted(rows)] == ["4", "2", "2", "2"]
    assert float(rows["TD3 --similarity none"]["final_mean"]) == pytest.approx(-5.5)
    assert float(rows["TD3"]["final_mean"]) == pytest.approx((-100.5 - 10.5) / 2)
    assert float(rows["TD3 --n_step 3"]["final_mean"]) == pytest.approx(-50.5)
    assert float(rows["TD3 --n_step 3 --prioritized"]["final_mean"]) == pytest.approx(-20.5)


def test_write_between_markers_replaces_only_the_block(tmp_path):
    from utils.plot.tables import write_between_markers
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- t -->\nold | table\n<!-- /t -->\noutro <!-- u --> x <!-- /u -->\n")
    write_between_markers(doc, "t", "| new |")
    assert doc.read_text() == "intro\n<!-- t -->\n| new |\n<!-- /t -->\noutro <!-- u --> x <!-- /u -->\n"
    write_between_markers(doc, "t", "| newer |")  # idempotent shape: a second write replaces the first
    assert doc.read_text().count("| new") == 1 and "| newer |" in doc.read_text()
    before = doc.read_text()
    for mark in ("missing", "/t"):
        with pytest.raises(ValueError, match="no <!--"):
            write_between_markers(doc, mark, "x")
    assert doc.read_text() == before


def test_small_returns_keep_their_digits_in_tables_and_progress_lines(capsys):
    """Level-Based Foraging's per-agent returns (0 to about 1) would all read 0.0, 0.1 or 0.5 with one decimal: returns
    within +-2 get three, returns of tens and more keep one (every committed table and README's first run)."""
    from utils.formats import decimals
    from utils.run.progress import Progress

    assert decimals(0.471, 0.05) == 3 and decimals(-1219.9, -111.2) == 1 and decimals(1.99, 2.0) == 1
    assert decimals(float("nan"), 0.4) == 3 and decimals(float("nan")) == 1
    progress = Progress("SEAC_Foraging", 1000, [0], None, quiet=False)
    progress.start(0)
    progress.evaluation(500, np.array([0.4712, 0.05]), {}, 10.0)
    assert "return     0.471     0.050 |" in capsys.readouterr().out
