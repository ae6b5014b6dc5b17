"""utils.plot --reference: the comparison table against a reference tree (comparison.csv / .md)."""
import csv
import math
from pathlib import Path

import numpy as np
import pytest

from utils import plot

PAPER = Path(__file__).resolve().parent.parent / "Learning Curves" / "paper" / "Unlimited_Buffer"  # committed


def write(path: Path, values) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.asarray(values, dtype=np.float64))


def ci_of_mean(x) -> tuple[float, float]:
    """The 95 % percentile bootstrap CI of the mean, computed here from the same fixed-seed generator."""
    x = np.asarray(x, dtype=np.float64)
    idx = np.random.default_rng(0).integers(0, len(x), size=(2000, len(x)))
    means = x[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


# Values at every evaluation (constant curves, so the value at any step is known):
OURS_TD3 = [1000.0, 1010.0, 990.0]  # 3 seeds; the reference's TD3 is ~0: "above"
REF_TD3 = [0.0, 5.0, -5.0, 2.0]
OURS_DASE = [[0.0, 10.0], [20.0, 30.0]]  # [seed][agent]; the reference's DASE is ~1000: "below"
REF_DASE = [[1000.0, 1010.0], [990.0, 1005.0]]
OURS_DPD = [[240.0, 260.0], [250.0, 250.0]]  # ours per agent (4 runs), mean 250
REF_DPD = [100.0, 200.0, 300.0, 400.0]  # the paper's: per seed (4 runs), mean 250: "inside"


def trees(root: Path, ours_len: int = 11, ref_len: int = 6) -> tuple[Path, Path]:
    """Ours on Hopper-v5 (11 evaluations: steps 0..10,000), the reference on Hopper-v2 (6: 0..5,000),
    plus a method only we have (SAC) and an environment only the reference has (Walker2d)."""
    ours, ref = root / "ours", root / "ref"
    for s, v in enumerate(OURS_TD3):
        write(ours / f"TD3_Hopper-v5_{s}.npy", np.full(ours_len, v))
    for s, agents in enumerate(OURS_DASE):
        for a, v in enumerate(agents):
            write(ours / f"DASE_TD3_Hopper-v5_{s}_Agent_{a}.npy", np.full(ours_len, v))
    for s, agents in enumerate(OURS_DPD):
        for a, v in enumerate(agents):
            write(ours / f"DPD_TD3_Hopper-v5_{s}_Agent_{a}.npy", np.full(ours_len, v))
    write(ours / "SAC_Hopper-v5_0.npy", np.full(ours_len, 5.0))
    for s, v in enumerate(REF_TD3):
        write(ref / f"TD3_Hopper-v2_{s}.npy", np.full(ref_len, v))
        write(ref / f"TD3_Walker2d-v2_{s}.npy", np.full(ref_len, v))
    for s, agents in enumerate(REF_DASE):
        for a, v in enumerate(agents):
            write(ref / f"DASE_TD3_Hopper-v2_{s}_Agent_{a}.npy", np.full(ref_len, v))
    for s, v in enumerate(REF_DPD):
        write(ref / f"DPD_TD3_Hopper-v2_{s}.npy", np.full(ref_len, v))
    return ours, ref


def read_rows(out: Path) -> dict[tuple[str, int], dict]:
    with open(out / "comparison.csv") as f:
        return {(r["method"], int(r["step"])): r for r in csv.DictReader(f)}


def check_side(row: dict, side: str, values) -> None:
    values = np.ravel(values)
    lo, hi = ci_of_mean(values)
    assert float(row[f"{side}_mean"]) == pytest.approx(values.mean(), rel=1e-12)
    assert float(row[f"{side}_ci_low"]) == pytest.approx(lo, rel=1e-12)
    assert float(row[f"{side}_ci_high"]) == pytest.approx(hi, rel=1e-12)
    assert int(row[f"{side}_runs"]) == len(values)


def check_missing(row: dict, side: str) -> None:
    assert all(math.isnan(float(row[f"{side}_{k}"])) for k in ("mean", "ci_low", "ci_high"))
    assert row[f"{side}_runs"] == "0"


def test_verdicts_and_numbers(tmp_path, capsys):
    ours, ref = trees(tmp_path)
    out = tmp_path / "out"
    assert plot.main([str(ours), "--out", str(out), "--reference", str(ref), "--at", "3000", "8000", "20000"]) == 0
    rows = read_rows(out)
    # only methods both sides have (no SAC), only environments both have (no Walker2d), every --at step
    assert set(rows) == {(m, s) for m in ("TD3", "DASE_TD3", "DPD_TD3") for s in (3000, 8000, 20000)}
    expected = {"TD3": (OURS_TD3, REF_TD3, "above"), "DASE_TD3": (OURS_DASE, REF_DASE, "below"),
                "DPD_TD3": (OURS_DPD, REF_DPD, "inside")}
    for method, (our_values, ref_values, verdict) in expected.items():
        row = rows[(method, 3000)]
        assert (row["environment"], row["reference_environment"]) == ("Hopper-v5", "Hopper-v2")
        check_side(row, "ours", our_values)
        check_side(row, "reference", ref_values)
        # the verdict by hand from the reference's CI
        mean, (lo, hi) = np.mean(our_values), ci_of_mean(np.ravel(ref_values))
        assert verdict == ("above" if mean > hi else "below" if mean < lo else "inside")
        assert row["verdict"] == verdict
        # 8,000: only ours reaches it (the reference stops at 5,000); 20,000: neither
        check_side(rows[(method, 8000)], "ours", our_values)
        check_missing(rows[(method, 8000)], "reference")
        check_missing(rows[(method, 20000)], "ours")
        check_missing(rows[(method, 20000)], "reference")
        assert rows[(method, 8000)]["verdict"] == rows[(method, 20000)]["verdict"] == "n/a"
    md = (out / "comparison.md").read_text()
    lo, hi = ci_of_mean(OURS_TD3)
    rlo, rhi = ci_of_mean(REF_TD3)
    assert (f"| Hopper-v5 vs Hopper-v2 | TD3 | 3,000 | 1000.0 | [{lo:.1f}, {hi:.1f}] | 3 | 0.5 | "
            f"[{rlo:.1f}, {rhi:.1f}] | 4 | above |") in md
    assert "| Hopper-v5 vs Hopper-v2 | DPD_TD3 | 8,000 | 250.0 | [" in md
    assert "| 4 | n/a | n/a | n/a | n/a |" in md
    assert "runs = curve files" in md  # what a run is, said under the table
    assert md in capsys.readouterr().out  # also printed


def test_default_step_is_the_last_both_have(tmp_path):
    ours, ref = trees(tmp_path, ours_len=11, ref_len=6)
    assert plot.main([str(ours), "--out", str(tmp_path / "a"), "--reference", str(ref)]) == 0
    assert {step for _, step in read_rows(tmp_path / "a")} == {5000}
    ours, ref = trees(tmp_path / "b", ours_len=4, ref_len=6)
    assert plot.main([str(ours), "--out", str(tmp_path / "b" / "out"), "--reference", str(ref)]) == 0
    rows = read_rows(tmp_path / "b" / "out")
    assert {step for _, step in rows} == {3000}
    assert rows[("TD3", 3000)]["verdict"] == "above"


def test_comparison_pools_methods_also_per_agent(tmp_path):
    """With --per_agent the figures split DASE agents, but the comparison pools every method's files, so our
    DPD per agent still meets the paper's DPD per seed."""
    ours, ref = trees(tmp_path)
    assert plot.main([str(ours), "--out", str(tmp_path / "out"), "--reference", str(ref), "--per_agent",
                      "--at", "3000"]) == 0
    rows = read_rows(tmp_path / "out")
    assert set(rows) == {("TD3", 3000), ("DASE_TD3", 3000), ("DPD_TD3", 3000)}
    check_side(rows[("DPD_TD3", 3000)], "ours", OURS_DPD)
    check_side(rows[("DASE_TD3", 3000)], "reference", REF_DASE)


def test_steps_between_evaluations_are_na(tmp_path):
    ours, ref = trees(tmp_path)
    assert plot.main([str(ours), "--out", str(tmp_path / "out"), "--reference", str(ref), "--at", "2500"]) == 0
    row = read_rows(tmp_path / "out")[("TD3", 2500)]
    check_missing(row, "ours")
    check_missing(row, "reference")
    assert row["verdict"] == "n/a"


def test_verdict_boundaries():
    assert plot.verdict(5.0, 1.0, 5.0) == "inside" and plot.verdict(1.0, 1.0, 5.0) == "inside"
    assert plot.verdict(5.0 + 1e-9, 1.0, 5.0) == "above" and plot.verdict(1.0 - 1e-9, 1.0, 5.0) == "below"
    assert plot.verdict(math.nan, 1.0, 5.0) == plot.verdict(3.0, math.nan, math.nan) == "n/a"


def test_no_reference_no_comparison(tmp_path, capsys):
    ours, _ = trees(tmp_path)
    assert plot.main([str(ours), "--out", str(tmp_path / "out"), "--at", "3000"]) == 0
    assert (tmp_path / "out" / "summary.csv").is_file()
    assert not (tmp_path / "out" / "comparison.csv").exists() and not (tmp_path / "out" / "comparison.md").exists()
    assert "verdict" not in capsys.readouterr().out


def test_nothing_in_common_gives_an_empty_table_and_a_note(tmp_path, capsys):
    write(tmp_path / "ours" / "SAC_Hopper-v5_0.npy", np.zeros(5))
    write(tmp_path / "ref" / "TD3_Hopper-v2_0.npy", np.zeros(5))
    assert plot.main([str(tmp_path / "ours"), "--out", str(tmp_path / "out"), "--reference",
                      str(tmp_path / "ref")]) == 0
    assert "the comparison is empty" in capsys.readouterr().err
    assert read_rows(tmp_path / "out") == {}


def test_against_the_papers_curves(tmp_path):
    for s in range(3):
        write(tmp_path / "runs" / f"TD3_Hopper-v5_{s}.npy", np.full(301, 1e5))  # far above anything published
        for a in range(2):
            write(tmp_path / "runs" / f"DPD_TD3_Hopper-v5_{s}_Agent_{a}.npy", np.full(301, -1e5))
    out = tmp_path / "out"
    assert plot.main([str(tmp_path / "runs"), "--out", str(out), "--reference", str(PAPER / "TD3"),
                      "--at", "100000", "300000", "500000"]) == 0
    rows = read_rows(out)
    assert set(rows) == {(m, s) for m in ("TD3", "DPD_TD3") for s in (100000, 300000, 500000)}
    for method in ("TD3", "DPD_TD3"):
        paper = [np.load(p)[100] for p in sorted((PAPER / "TD3" / "Hopper-v2").glob(f"{method}_Hopper-v2_*.npy"))]
        assert len(paper) == 10  # the paper's DPD: one file per seed
        check_side(rows[(method, 100000)], "reference", paper)
        assert int(rows[(method, 100000)]["ours_runs"]) == (3 if method == "TD3" else 6)
        assert rows[(method, 100000)]["verdict"] == ("above" if method == "TD3" else "below")
        assert rows[(method, 500000)]["verdict"] == "n/a"  # our runs stop at 300,000


def test_max_steps_cuts_ours_and_the_reference(tmp_path):
    """--max_steps S: every run (ours, reference) keeps the evaluations up to S, in figures and tables."""
    from utils import plot

    ours, ref = tmp_path / "ours", tmp_path / "ref"
    ours.mkdir()
    ref.mkdir()
    for s in range(3):
        np.save(ours / f"TD3_Hopper-v5_{s}.npy", np.arange(21, dtype=np.float64) + s)
        np.save(ref / f"TD3_Hopper-v2_{s}.npy", np.arange(101, dtype=np.float64) * 10)
    out = tmp_path / "out"
    assert plot.main([str(ours), "--reference", str(ref), "--out", str(out), "--max_steps", "10000"]) == 0
    rows = {r["method"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert int(rows["TD3"]["evaluations"]) == 11 and int(rows["TD3 (reference)"]["evaluations"]) == 11
    # final = mean of the last tenth of the 11 evaluations kept: the one at step 10000 (not 1000..10000)
    assert rows["TD3"]["final_evaluations"] == rows["TD3 (reference)"]["final_evaluations"] == "1"
    assert float(rows["TD3 (reference)"]["final_mean"]) == pytest.approx(100.0)
    assert float(rows["TD3"]["final_mean"]) == pytest.approx(10.0 + 1)


@pytest.mark.parametrize("per_agent", [False, True])
def test_max_steps_cuts_the_comparison_with_and_without_per_agent(tmp_path, per_agent):
    """With 20k-step curves and --max_steps 10000, the comparison's default row is at 10,000 whether or not
    --per_agent splits the figures (it once regrouped the uncut curves for the comparison: 20,000)."""
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    for s in range(2):
        for a in range(2):
            write(ours / f"DASE_TD3_Hopper-v5_{s}_Agent_{a}.npy", np.arange(21, dtype=np.float64))
        write(ref / f"DASE_TD3_Hopper-v2_{s}_Agent_0.npy", np.arange(101, dtype=np.float64))
    out = tmp_path / "out"
    argv = [str(ours), "--reference", str(ref), "--out", str(out), "--max_steps", "10000"]
    assert plot.main(argv + (["--per_agent"] if per_agent else [])) == 0
    rows = list(csv.DictReader(open(out / "comparison.csv")))
    assert [int(r["step"]) for r in rows] == [10000]
    assert float(rows[0]["ours_mean"]) == 10.0 and float(rows[0]["reference_mean"]) == 10.0


def test_the_time_axis_comes_from_the_runs_records(tmp_path):
    """Runs evaluated every 500 steps (their JSON says so): --at 5000 reads index 10 without --eval_freq; runs of
    two periods in one folder are refused in one line."""
    import json

    ours = tmp_path / "ours"
    for s in range(2):
        write(ours / f"TD3_Hopper-v5_{s}.npy", np.arange(21, dtype=np.float64))
        (ours / f"TD3_Hopper-v5_{s}.json").write_text(json.dumps({"config": {"eval_freq": 500}}))
    out = tmp_path / "out"
    assert plot.main([str(ours), "--out", str(out), "--at", "5000"]) == 0
    rows = {r["method"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert float(rows["TD3"]["at_5000_mean"]) == 10.0
    write(ours / "TD3_Hopper-v5_7.npy", np.arange(21, dtype=np.float64))
    (ours / "TD3_Hopper-v5_7.json").write_text(json.dumps({"config": {"eval_freq": 1000}}))
    assert plot.main([str(ours), "--out", str(out)]) == 2
