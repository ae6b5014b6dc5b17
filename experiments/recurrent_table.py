"""docs/recurrent.md's table: recurrent against feed-forward SAC on the velocity-masked Pendulum (issue 38).

    python experiments/recurrent_table.py [--write]

Per seed the mean of the last 3 evaluations up to a step (5 episodes each), then the mean over seeds with a 95 %
percentile bootstrap interval over seeds, and the first step at which a seed's last-3 mean reached -250 (the
issue's bar). Data: "Learning Curves/recurrent_pendulum/" from experiments/recurrent_pendulum.yaml. ``--write``
puts the table into docs/recurrent.md between its markers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from utils.plot.stats import bootstrap_ci  # noqa: E402
from utils.plot.tables import write_between_markers  # noqa: E402

DATA = ROOT / "Learning Curves" / "recurrent_pendulum"
ENV = "VelocityMaskedPendulum-v1"
RUNS = {"recurrent SAC (gru)": ("gru", "SAC_gru"), "feed-forward SAC": ("feed_forward", "SAC")}
STEPS, WINDOW, EVAL_FREQ, BAR = (10_000, 15_000, 20_000, 25_000, 50_000), 3, 1000, -250.0
MARK = "recurrent_table"


def curves(folder: str, stem: str) -> dict[int, np.ndarray]:
    """Seed -> curve, for the runs whose JSON says finished."""
    out = {}
    for path in sorted((DATA / folder / "SAC" / ENV).glob(f"{stem}_{ENV}_*.npy")):
        seed = path.stem.rsplit("_", 1)[-1]
        if seed.isdigit():
            out[int(seed)] = np.load(path)
    return out


def last3(curve: np.ndarray, step: int) -> float | None:
    i = step // EVAL_FREQ
    return float(curve[i - WINDOW + 1:i + 1].mean()) if len(curve) > i else None


def first_at_bar(curve: np.ndarray) -> int | None:
    """The first step whose last-3 mean is at least the bar (None: never)."""
    for i in range(WINDOW - 1, len(curve)):
        if curve[i - WINDOW + 1:i + 1].mean() >= BAR:
            return i * EVAL_FREQ
    return None


def table() -> str:
    head = "| mean of the last 3 evaluations, 95 % CI (seeds) | " + " | ".join(f"{s // 1000}k" for s in STEPS) \
        + " | first step at >= -250 (per seed) |"
    lines = [head, "|" + "---|" * (len(STEPS) + 2)]
    for name, (folder, stem) in RUNS.items():
        runs = curves(folder, stem)
        cells = []
        for step in STEPS:
            values = np.array([v for v in (last3(c, step) for c in runs.values()) if v is not None])
            if len(values) == 0:
                cells.append("—")
                continue
            lo, hi = bootstrap_ci(values, np.mean)
            cells.append(f"{values.mean():.1f} [{lo:.1f}, {hi:.1f}] ({len(values)})")
        reached = [first_at_bar(c) for c in runs.values()]
        shown = ", ".join("never" if r is None else f"{r // 1000}k" for r in reached) or "—"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {shown} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = table()
    print(text)
    if "--write" in argv:
        doc = ROOT / "docs" / "recurrent.md"
        write_between_markers(doc, MARK, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
