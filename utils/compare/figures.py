"""The report's figures: every method's curve per task (ours), and rliable's plots of the statistics across tasks."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plot.stats import METRICS, mean_band


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def method_colors(methods: list[str]) -> dict[str, tuple]:
    """One colour per method, the same in every figure (matplotlib's tab10, then tab20)."""
    plt = pyplot()
    cmap = plt.get_cmap("tab10" if len(methods) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def save(fig, path: Path) -> str:
    fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    return path.name


def task_figure(path: Path, task, curves: dict, colors: dict, xlabel: str, k: int, references: dict | None = None
                ) -> str:
    """Mean and 95 % bootstrap band over seeds (a seed's agents averaged first) of each method on one task, published
    reference curves dashed, and the task's reference scores as grey lines."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for group, style in ((curves, "-"), (references or {}, "--")):
        for m, c in group.items():
            mean, lo, hi = mean_band(c.matrix, ci=True)
            ax.plot(c.budget_steps, mean, color=colors[m], lw=1.5, ls=style, label=f"{m} ({c.agents} agent"
                    f"{'s' if c.agents > 1 else ''}, {len(c.matrix)} seeds)")
            ax.fill_between(c.budget_steps, lo, hi, color=colors[m], alpha=0.15 if style == "--" else 0.2, lw=0)
    for score, name in ((task.random, "random"), (task.target, "target")):
        ax.axhline(score, color="gray", ls="--", lw=0.8)
        ax.annotate(name, (0, score), textcoords="offset points", xytext=(2, 2), fontsize=8, color="gray")
    ax.set_title(f"{task.name}: mean over seeds, 95 % bootstrap CI (final score: last {k} evaluations, none before "
                 "training)", fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Average return")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def aggregates_figure(path: Path, stats: dict, colors: dict) -> str:
    from rliable import plot_utils

    pyplot()
    aggregates = stats["aggregates"]
    points = {m: np.array([a[name]["estimate"] for name in METRICS]) for m, a in aggregates.items()}
    intervals = {m: np.array([a[name]["ci"] for name in METRICS]).T for m, a in aggregates.items()}
    rows = len(aggregates)
    fig, _ = plot_utils.plot_interval_estimates(points, intervals, metric_names=list(METRICS),
                                                algorithms=list(aggregates), colors=colors, max_ticks=3,
                                                row_height=max(0.45, 1.8 / rows), wspace=0.25,
                                                xlabel_y_coordinate=-0.3 if rows < 4 else -0.1,
                                                xlabel="Normalised final score (95 % stratified bootstrap CI)")
    return save(fig, path)


def improvement_figure(path: Path, stats: dict, baseline: str, colors: dict) -> str:
    from rliable import plot_utils

    plt = pyplot()
    improvement = stats["probability_of_improvement"]
    if not improvement:  # no method shares a task with the baseline
        fig, ax = plt.subplots(figsize=(5, 1))
        ax.text(0.5, 0.5, f"no method shares a task with {baseline}", ha="center", va="center")
        ax.axis("off")
        return save(fig, path)
    points = {f"{m},{baseline}": np.array([v["estimate"]]) for m, v in improvement.items()}
    intervals = {f"{m},{baseline}": np.array(v["ci"])[:, None] for m, v in improvement.items()}
    fig, ax = plt.subplots(figsize=(5, 0.6 + 0.5 * len(points)))
    plot_utils.plot_probability_of_improvement(points, intervals, ax=ax, colors=[colors[m] for m in improvement],
                                               xlabel=f"P(X > {baseline})", left_ylabel="Method X",
                                               right_ylabel="Baseline")
    return save(fig, path)


def profile_figure(path: Path, stats: dict, colors: dict) -> str:
    from rliable import plot_utils

    plt = pyplot()
    profile = stats["performance_profile"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    curves = {m: np.array(v["fraction"]) for m, v in profile["methods"].items()}
    cis = {m: np.array(v["ci"]) for m, v in profile["methods"].items()}
    plot_utils.plot_performance_profiles(curves, np.array(profile["taus"]), performance_profile_cis=cis, ax=ax,
                                         colors=colors, xlabel=r"Normalised final score ($\tau$)",
                                         ylabel=r"Fraction of runs with score $> \tau$", labelsize="large",
                                         ticklabelsize="medium")
    ax.legend(fontsize=8)
    return save(fig, path)


def efficiency_figure(path: Path, efficiency: dict, x: np.ndarray, xlabel: str, colors: dict) -> str:
    from rliable import plot_utils

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = {m: np.array(v["iqm"]) for m, v in efficiency.items()}
    intervals = {m: np.array(v["ci"]) for m, v in efficiency.items()}
    plot_utils.plot_sample_efficiency_curve(x, points, intervals, algorithms=list(points), colors=colors, ax=ax,
                                            xlabel=xlabel, ylabel="IQM of normalised scores", labelsize="large",
                                            ticklabelsize="medium")
    ax.legend(fontsize=8)
    return save(fig, path)
