"""Figures like the paper's: mean returns with a band per method, and optionally the sharing weights under them."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .curves import Group
from .stats import mean_band, nan_mean, smooth

COLORS = {"DASE": "tab:red", "DPD": "tab:green", "": "tab:blue", "DASE_matched": "tab:purple"}


def draw_returns(ax, groups: list[Group], eval_freq: int, ci: bool, window: int, xlabel: bool = True) -> dict[int, str]:
    """Returns and their bands; returns the colour of each group's line, keyed by id(group)."""
    colors = {}
    for g in groups:
        m = smooth(g.matrix(), window)
        steps = np.arange(m.shape[1]) * eval_freq
        mean, lo, hi = mean_band(m, ci)
        color = COLORS.get(g.method, None)
        style = "--" if g.reference else "-"
        line, = ax.plot(steps, mean, style, color=color if "agent" not in g.label else None, lw=1.4,
                        label=legend_label(g))
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.10 if g.reference else 0.2, lw=0)
        colors[id(g)] = line.get_color()
    if xlabel:
        ax.set_xlabel("Time steps")
    ax.set_ylabel("Average return")
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return colors


def draw_weights(ax, groups: list[Group], eval_freq: int, colors: dict[int, str] | None = None,
                 log: bool = False) -> list:
    """The weight of shared samples: per group with weight files, the NaN-ignoring mean over runs
    (NaN steps leave gaps). Returns the lines drawn."""
    lines = []
    for g in groups:
        w = g.weight_matrix()
        if w is None or g.reference:
            continue
        steps = np.arange(w.shape[1]) * eval_freq
        color = (colors or {}).get(id(g), COLORS.get(g.method))
        line, = ax.plot(steps, nan_mean(w), "-", color=color, lw=1.2, label=legend_label(g))
        lines.append(line)
    if not lines:
        ax.text(0.5, 0.5, "no weight files", transform=ax.transAxes, ha="center", va="center", fontsize=7,
                color="0.5")
    if log:  # weights spanning many decades (--kl_div_var matched: 1e-18 and less)
        ax.set_yscale("log")
        ax.set_ylim(1e-20, 2.0)
    else:
        ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("Time steps")
    ax.set_ylabel("Weight of shared samples", fontsize=7)
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return lines


def legend_label(g: Group) -> str:
    name = g.label.replace("_", "-")
    if g.reference:
        return f"{name} (reference, {g.env})"
    return name


def _panel(fig, cell, groups: list[Group], eval_freq: int, ci: bool, window: int, weights: bool | str,
           fontsize: int):
    """One environment in the gridspec cell ``cell``: returns, and with ``weights`` the weight axis under
    them (x shared). Returns (returns axis, weight axis or None)."""
    if not weights:
        ax = fig.add_subplot(cell)
        draw_returns(ax, groups, eval_freq, ci, window)
        ax.legend(fontsize=fontsize, loc="best")
        return ax, None
    inner = cell.subgridspec(2, 1, height_ratios=[3, 1], hspace=0.08)
    ax = fig.add_subplot(inner[0])
    wax = fig.add_subplot(inner[1], sharex=ax)
    colors = draw_returns(ax, groups, eval_freq, ci, window, xlabel=False)
    ax.tick_params(labelbottom=False)
    ax.xaxis.get_offset_text().set_visible(False)
    ax.legend(fontsize=fontsize, loc="best")
    draw_weights(wax, groups, eval_freq, colors, log=weights == "log")
    return ax, wax


def plot(groups_by_env: dict[str, list[Group]], out: Path, eval_freq: int, ci: bool, window: int,
         ext: str, weights: bool | str = False) -> list[Path]:
    """One figure per environment and one grid of all environments; returns the written paths.
    With ``weights`` each environment gets the weight-of-shared-samples axis under its returns."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for env, groups in groups_by_env.items():
        fig = plt.figure(figsize=(5.2, 5.0 if weights else 3.9))
        ax, _ = _panel(fig, fig.add_gridspec(1, 1)[0], groups, eval_freq, ci, window, weights, 7)
        ax.set_title(env)
        written.append(save(plt, fig, out / f"{env}.{ext}"))
    n = len(groups_by_env)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = plt.figure(figsize=(4.6 * cols, (4.6 if weights else 3.6) * rows))
    grid = fig.add_gridspec(rows, cols)
    for k, (env, groups) in enumerate(groups_by_env.items()):
        ax, _ = _panel(fig, grid[k // cols, k % cols], groups, eval_freq, ci, window, weights, 6)
        ax.set_title(env)
    written.append(save(plt, fig, out / f"all_environments.{ext}"))
    return written


def save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
