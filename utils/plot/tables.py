"""Tables: summary.csv / summary.md per group, and comparison.csv / comparison.md against a reference tree."""
from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..formats import decimals
from ..io import atomic_write
from .curves import Group, env_key
from .stats import BOOTSTRAP, bootstrap_ci, iqm

FINAL_EVALS = 10  # "final return": the mean of a run's last evaluations, at most 10 of them (final_window)
FINAL_SHARE = 10  # ... and no more than a tenth of the run's evaluations


def final_window(evaluations: int) -> int:
    """How many of a run's last evaluations its "final return" averages: a tenth of them (rounded down), at least 1
    and at most 10. Runs of 100 evaluations or more (every published table's): the last 10, 91k-100k of a 100k run;
    README's first run (11 evaluations, 10k steps): the last one, the returns its last line printed (the last 10 of
    11 took in the warm-up's evaluations, -677.9 against the printed -125.6 and -111.0)."""
    return max(1, min(FINAL_EVALS, evaluations // FINAL_SHARE))


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    """Rows as CSV, floats at full precision (repr)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(float(v)) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()})


def has_markers(body: str, mark: str) -> bool:
    """Whether ``body`` holds a ``<!-- mark -->`` ... ``<!-- /mark -->`` block."""
    a, b = body.find(f"<!-- {mark} -->"), body.find(f"<!-- /{mark} -->")
    return 0 <= a < b


def between_markers(body: str, mark: str) -> str:
    """What lies between ``<!-- mark -->`` and ``<!-- /mark -->``, without the surrounding newlines."""
    return body.split(f"<!-- {mark} -->\n", 1)[1].split(f"<!-- /{mark} -->", 1)[0].strip("\n")


def write_between_markers(doc: Path, mark: str | dict[str, str], text: str = "") -> None:
    """Replace what lies between ``<!-- mark -->`` and ``<!-- /mark -->`` in ``doc`` by ``text`` (on lines of its
    own), or every block of a ``{mark: text}`` at once; a document without both markers of each is left untouched
    and raises ValueError."""
    body = doc.read_text()
    for name, block in (mark if isinstance(mark, dict) else {mark: text}).items():
        start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
        a, b = body.find(start), body.find(end)
        if a < 0 or b < a:
            raise ValueError(f"{doc}: no {start} ... {end} block")
        body = body[:a + len(start)] + "\n" + block + "\n" + body[b:]
    atomic_write(doc, lambda f: f.write(body), mode="w")  # whole or as it was (a full disk: DiskFull)


def markdown(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows]) + "\n"


def summarise(g: Group, eval_freq: int, at: list[int]) -> dict:
    """One row of the summary table: ``runs`` counts curve files (a DASE run's agents each one, as the comparison's
    runs), ``seeds`` the runs they come from; the statistics are over the curve files."""
    m = g.matrix()
    steps = np.arange(m.shape[1]) * eval_freq
    k = final_window(m.shape[1])
    final = m[:, -k:].mean(axis=1)
    span = steps[-1] - steps[0]
    auc = np.trapezoid(m, steps, axis=1) / span if span > 0 else m[:, 0]
    lo, hi = bootstrap_ci(final, iqm)
    row = {"environment": g.env, "method": g.label + (" (reference)" if g.reference else ""), "runs": len(m),
           "seeds": g.seeds(), "evaluations": m.shape[1], "final_evaluations": k, "final_mean": final.mean(),
           "final_std": final.std(),
           "auc_mean": auc.mean(), "auc_std": auc.std(), "iqm_final": float(iqm(final)), "iqm_ci_low": lo,
           "iqm_ci_high": hi}
    for step in at:
        i = step // eval_freq
        ok = step % eval_freq == 0 and i < m.shape[1]
        row[f"at_{step}_mean"] = m[:, i].mean() if ok else float("nan")
        row[f"at_{step}_std"] = m[:, i].std() if ok else float("nan")
    return row



def columns(at: list[int]) -> list[str]:
    cols = ["environment", "method", "runs", "seeds", "evaluations", "final_evaluations", "final_mean", "final_std"]
    for step in at:
        cols += [f"at_{step}_mean", f"at_{step}_std"]
    return cols + ["auc_mean", "auc_std", "iqm_final", "iqm_ci_low", "iqm_ci_high"]


def final_header(k: int | None) -> str:
    """The final return's column names its window: 'final return (last 10 evaluations)'; ``None`` where the rows'
    windows differ (each cell then names its own)."""
    if k is None:
        return f"final return (last {FINAL_SHARE} % of evaluations, at most {FINAL_EVALS})"
    return f"final return (last {k} evaluation{'s' if k != 1 else ''})"


def write_tables(rows: list[dict], at: list[int], out: Path) -> str:
    """summary.csv (full precision) and summary.md; returns the Markdown."""
    write_csv(out / "summary.csv", columns(at), rows)
    windows = {r["final_evaluations"] for r in rows}
    same = len(windows) == 1
    head = ["environment", "method", "runs", final_header(next(iter(windows)) if same else None)] + \
           [f"return at {s:,}" for s in at] + ["AUC", "IQM final [95% CI]"]
    table = []
    for r in rows:
        d = decimals(r["final_mean"], r["iqm_final"], *(r[f"at_{s}_mean"] for s in at))
        final = f"{r['final_mean']:.{d}f} ± {r['final_std']:.{d}f}" + \
            ("" if same else f" (last {r['final_evaluations']})")
        runs = str(r["seeds"]) + (f" ({r['runs']} agents)" if r["runs"] != r["seeds"] else "")  # a run: a seed
        cells = [r["environment"], r["method"], runs, final]
        for s in at:
            mean = r[f"at_{s}_mean"]
            cells.append("n/a" if math.isnan(mean) else f"{mean:.{d}f} ± {r[f'at_{s}_std']:.{d}f}")
        a = decimals(r["auc_mean"])
        cells += [f"{r['auc_mean']:.{a}f} ± {r['auc_std']:.{a}f}",
                  f"{r['iqm_final']:.{d}f} [{r['iqm_ci_low']:.{d}f}, {r['iqm_ci_high']:.{d}f}]"]
        table.append(cells)
    md = markdown(head, table)
    (out / "summary.md").write_text(md)
    return md


COMPARISON_COLUMNS = ["environment", "reference_environment", "method", "step", "ours_mean", "ours_ci_low",
                      "ours_ci_high", "ours_runs", "reference_mean", "reference_ci_low", "reference_ci_high",
                      "reference_runs", "verdict"]
RUNS_NOTE = ("Note: runs = curve files, pooled per method: one per seed for baselines and the paper's DPD, one per "
             "seed and agent for DASE and our DPD (each side's runs cut to their common length). 95% CI = "
             f"percentile bootstrap of the mean over runs ({BOOTSTRAP} resamples, seed 0). Verdict: our mean above, "
             "inside or below the reference's CI; n/a where a side has no evaluation at that step.")


def _at_step(m: np.ndarray, step: int, eval_freq: int) -> tuple[float, float, float, int]:
    """(mean, CI low, CI high, runs) of the evaluation at ``step`` over runs; NaNs and 0 runs if not reached."""
    i = step // eval_freq
    if step % eval_freq != 0 or i >= m.shape[1]:
        return math.nan, math.nan, math.nan, 0
    x = m[:, i]
    lo, hi = bootstrap_ci(x, np.mean)
    return float(x.mean()), lo, hi, len(x)


def verdict(mean: float, ref_lo: float, ref_hi: float) -> str:
    """Where our mean lies against the reference's CI: above, below, inside; n/a if either is missing."""
    if math.isnan(mean) or math.isnan(ref_lo) or math.isnan(ref_hi):
        return "n/a"
    if mean > ref_hi:
        return "above"
    if mean < ref_lo:
        return "below"
    return "inside"


def compare(own: list[Group], ref: list[Group], eval_freq: int, at: list[int]) -> list[dict]:
    """One row per (our environment, method, step) that the reference also has (environments matched by
    env_key, methods by label); steps ``at``, or the last step both have when ``at`` is empty."""
    refs: dict[tuple[str, str], list[Group]] = defaultdict(list)
    for r in ref:
        refs[(env_key(r.env), r.label)].append(r)
    rows = []
    for g in sorted(own, key=lambda g: (g.env, g.label)):
        for r in sorted(refs.get((env_key(g.env), g.label), []), key=lambda r: r.env):
            m, rm = g.matrix(), r.matrix()
            steps = at or [(min(m.shape[1], rm.shape[1]) - 1) * eval_freq]
            for step in steps:
                ours, theirs = _at_step(m, step, eval_freq), _at_step(rm, step, eval_freq)
                rows.append({"environment": g.env, "reference_environment": r.env, "method": g.label, "step": step,
                             "ours_mean": ours[0], "ours_ci_low": ours[1], "ours_ci_high": ours[2],
                             "ours_runs": ours[3], "reference_mean": theirs[0], "reference_ci_low": theirs[1],
                             "reference_ci_high": theirs[2], "reference_runs": theirs[3],
                             "verdict": verdict(ours[0], theirs[1], theirs[2])})
    return rows


def write_comparison(rows: list[dict], out: Path) -> str:
    """comparison.csv (full precision) and comparison.md; returns the Markdown."""
    write_csv(out / "comparison.csv", COMPARISON_COLUMNS, rows)

    def side(mean: float, lo: float, hi: float, runs: int) -> list[str]:
        if math.isnan(mean):
            return ["n/a", "n/a", "n/a"]
        return [f"{mean:.1f}", f"[{lo:.1f}, {hi:.1f}]", str(runs)]

    head = ["environment", "method", "step", "ours: mean", "ours: 95% CI", "ours: runs", "reference: mean",
            "reference: 95% CI", "reference: runs", "verdict"]
    table = []
    for r in rows:
        env = r["environment"] if r["environment"] == r["reference_environment"] else \
            f"{r['environment']} vs {r['reference_environment']}"
        cells = [env, r["method"], f"{r['step']:,}",
                 *side(r["ours_mean"], r["ours_ci_low"], r["ours_ci_high"], r["ours_runs"]),
                 *side(r["reference_mean"], r["reference_ci_low"], r["reference_ci_high"], r["reference_runs"]),
                 r["verdict"]]
        table.append(cells)
    md = markdown(head, table) + "\n" + RUNS_NOTE + "\n"
    (out / "comparison.md").write_text(md)
    return md
