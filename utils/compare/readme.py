"""README's table of claims, written from the committed reports (``Figures/compare/<suite>/report.json``): one row
per claim of every suite's own report at its budget, its verdict word the rule's (``verdict``), never a hand's.

    python -m utils.compare.readme            # rewrite the table between README's <!-- claims_table --> markers
    python -m utils.compare.readme --check    # exit 1 when README's table differs from the reports'

A report written with ``--so_far`` (runs under way) or ``--seeds`` (a subset, in a folder of another name) has no
row: only a suite's own report at its budget speaks for its claims.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..plot.tables import between_markers, markdown, write_between_markers
from ..sweep.experiment import ROOT
from .words import claim_digits, plan_words, side_tests, steps_label, verdict_words

MARKER = "claims_table"
# the rows' order: the DASE paper's own claims first, then the other seed systems'; a suite not named here follows,
# by name
ORDER = ("lunar_300k", "paper_sac_lunar", "paper_ddpg_lunar", "paper_mujoco", "paper_sac_halfcheetah",
         "sac_noise_halfcheetah", "paper_mujoco_hopper", "compare_cpu", "diff_dac_tasks", "diff_dac", "seac_cpu", "seac_lbf",
         "sparse_mountaincar", "pixel_pendulum", "replay")
HEAD = ["published claim (source)", "published A − B", "ours: A vs B", "verdict", "A − B, paired [95 % CI]",
        "p (Holm-adjusted; at the published size or beyond the margin, Bonferroni-adjusted)", "seeds",
        "seeds for 80 % power", "report"]


def reports(root: Path = ROOT) -> list[tuple[str, dict]]:
    """(folder, report) of every suite's own report at its budget that declares claims, in ORDER."""
    found = []
    for path in sorted((root / "Figures" / "compare").glob("*/report.json")):
        r = json.loads(path.read_text())
        if r.get("claims") and r["suite"]["name"] == path.parent.name and not r["suite"].get("so_far"):
            found.append((path.parent.name, r))
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(found, key=lambda item: (rank.get(item[0], len(ORDER)), item[0]))


def published_means(c: dict, r: dict) -> tuple[float, float] | None:
    """The published curves' own A and B, as the report read them: on the claim's one task, the references whose
    prefix is A's and B's policy, each the mean over its files of the window the claim reads (the final score at the
    budget, or the claim's step where the report has that column); None where the claim spans tasks, is not in
    returns, has no published effect, or either reference is missing."""
    if c["published"] is None or len(c["tasks"]) != 1 or c["unit"] != "returns" or \
            c["metric"] not in ("final", "at_step"):
        return None
    refs = r["tasks"][c["tasks"][0]]["references"].values()
    means = []
    for m in (c["a"], c["b"]):
        ref = next((x for x in refs if x["prefix"] == r["methods"][m]["policy"]), None)
        if ref is None:
            return None
        cell = list(ref["at_steps"].values())[-1] if c["metric"] == "final" else \
            ref["at_steps"].get(steps_label(c["value"]))
        if cell is None:
            return None
        means.append(cell["mean"])
    return means[0], means[1]


def row(folder: str, r: dict, c: dict) -> list[str]:
    d, diff = claim_digits(c, r), c["difference"]
    statement = f"{c['statement']} ({c['source']}; {c['metric_words']}, {c['unit']})"
    if c["kind"] == "equivalence":
        statement += f"; equivalence within ±{c['margin']:g}"
    if c["note"]:
        statement += f". {c['note']}"
    p = f"{c['p']:.3g} {c['p_words']} ({c['p_holm']:.3g})"
    p += "".join(f"; {what} {side:.3g} ({adjusted:.3g})" for what, side, adjusted in side_tests(c))
    published = "—" if c["published"] is None else f"{c['published']:+.{d}f}"
    if (pair := published_means(c, r)) is not None:
        published += f" ({c['a']} {pair[0]:.{d}f} vs {c['b']} {pair[1]:.{d}f})"
    return [statement, published,
            f"{c['a']} {c['a_mean']:.{d}f} vs {c['b']} {c['b_mean']:.{d}f}", f"**{verdict_words(c)}**",
            f"{diff['estimate']:+.{d}f} [{diff['ci'][0]:+.{d}f}, {diff['ci'][1]:+.{d}f}] "
            f"({diff['better']} of {diff['pairs']} above)", p, str(len(c["seeds"])),
            "—" if c["verdict"] in ("shown", "equivalent") else plan_words(c),
            f"[{folder}](Figures/compare/{folder}/report.md)"]


def table(root: Path = ROOT) -> str:
    return markdown(HEAD, [row(folder, r, c) for folder, r in reports(root) for c in r["claims"]]).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m utils.compare.readme", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when README's table differs from the reports'")
    args = p.parse_args(argv)
    readme = ROOT / "README.md"
    text = table()
    if args.check:
        same = between_markers(readme.read_text(), MARKER) == text
        print("README's table of claims is the reports'" if same else
              "README's table of claims differs from the reports': python -m utils.compare.readme rewrites it",
              file=sys.stdout if same else sys.stderr)
        return 0 if same else 1
    write_between_markers(readme, MARKER, text)
    print(f"README.md: {text.count(chr(10)) - 1} claims from {len(reports())} reports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
