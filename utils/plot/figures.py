"""Figures like the paper's: mean returns with a band per method, and optionally the sharing weights under them."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .curves import Group
from .stats import mean_band, nan_mean, smooth

# by a group's method and variant; other variants (graphs other than a method's default) take the colour cycle
COLORS = {"DASE": "tab:red", "DPD": "tab:green", "": "tab:blue", "DASE_matched": "tab:purple", "DIFF_ring": "tab:orange",
          "DIFF_none": "tab:gray", "DIFF_DASE_ring": "tab:brown"}
# the methods COLORS does not name (other graphs, replay flags: "DASE --n_step 3"), in order of appearance
SPARE_COLORS = ["tab:cyan", "tab:pink", "tab:olive", "black", "gold", "navy", "lime", "maroon"]


def line_colors(groups: list[Group]) -> dict[int, str | None]:
    """Colour of each group, keyed by id(group): a method's colour (COLORS) goes to its first group, and another
    group of the same method (TD3, SAC and ACER are all plain, method "") takes a spare colour; a reference (drawn
    dashed) takes the colour of our group of the same label, else its method's; per-agent groups take the cycle."""
    chosen, owner, spare = {}, {}, iter(SPARE_COLORS * len(groups))
    for g in groups:
        if g.reference or "agent" in g.label:
            continue
        fixed = COLORS.get(g.method)
        chosen[id(g)] = fixed if fixed and owner.setdefault(g.method, g.label) == g.label else next(spare)
    ours = {g.label: chosen[id(g)] for g in groups if id(g) in chosen}
    for g in groups:
        if g.reference and "agent" not in g.label:
            chosen[id(g)] = ours.get(g.label) or COLORS.get(g.method) or next(spare)
    return {id(g): chosen.get(id(g)) for g in groups}


def draw_returns(ax, groups: list[Group], eval_freq: int, ci: bool, window: int, xlabel: bool = True) -> dict[int, str]:
    """Returns and their bands; returns the colour of each group's line, keyed by id(group)."""
    colors, chosen = {}, line_colors(groups)
    for g in groups:
        m = smooth(g.matrix(), window)
        steps = np.arange(m.shape[1]) * eval_freq
        mean, lo, hi = mean_band(m, ci)
        color = chosen[id(g)]
        style = "--" if g.reference else "-"
        line, = ax.plot(steps, mean, style, color=color, lw=1.4,  # None (agents' lines): matplotlib's cycle
                        label=legend_label(g, ci))
        ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.10 if g.reference else 0.2, lw=0)
        colors[id(g)] = line.get_color()
    if xlabel:
        ax.set_xlabel("Time steps")
    ax.set_ylabel("Average return")
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return colors


def wants_log(means: list[np.ndarray]) -> bool:
    """A log axis for weights that span more than 2 decades or lie mostly (the median of the drawn points) below
    0.05: on a linear 0-1 axis those are a flat line at zero (the paper's v gives about 0.01 after a short start
    near 0.2, the matched v 1e-18)."""
    values = np.concatenate([m[np.isfinite(m) & (m > 0)] for m in means]) if means else np.array([])
    return values.size > 0 and (values.max() / values.min() > 100 or float(np.median(values)) < 0.05)


def draw_weights(ax, groups: list[Group], eval_freq: int, colors: dict[int, str] | None = None,
                 log: bool | None = None) -> list:
    """The weight of shared samples: per group with weight files, the NaN-ignoring mean over runs
    (NaN steps leave gaps). ``log``: True forces a log axis, None picks one when ``wants_log``. Returns the
    lines drawn."""
    lines, means = [], []
    for g in groups:
        w = g.weight_matrix()
        if w is None or g.reference:
            continue
        steps = np.arange(w.shape[1]) * eval_freq
        color = (colors or {}).get(id(g), COLORS.get(g.method))
        means.append(nan_mean(w))
        line, = ax.plot(steps, means[-1], "-", color=color, lw=1.2, label=legend_label(g))
        lines.append(line)
    if not lines:
        ax.text(0.5, 0.5, "no weight files", transform=ax.transAxes, ha="center", va="center", fontsize=7,
                color="0.5")
    if log or (log is None and wants_log(means)):
        ax.set_yscale("log")
        positive = np.concatenate([m[np.isfinite(m) & (m > 0)] for m in means]) if means else np.array([])
        if positive.size:  # whole decades around the data, at most up to 2 (weights are at most 1)
            low = 10.0 ** math.floor(math.log10(positive.min()))
            ax.set_ylim(low, min(2.0, max(10.0 ** math.ceil(math.log10(positive.max())), 10 * low)))
        else:
            ax.set_ylim(1e-20, 2.0)
    else:
        ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("Time steps")
    ax.set_ylabel("Weight of shared samples", fontsize=7)
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return lines


def draw_consensus(ax, groups: list[Group], eval_freq: int, colors: dict[int, str] | None = None) -> list:
    """Diff-DAC's consensus measure of the groups that have one (mean over their runs), on a log axis: 0 would be
    identical agents, random initialisations sit near 1 and above. Returns the lines drawn."""
    lines, drawn = [], 0
    for g in groups:
        c = g.consensus_matrix()
        if c is None or g.reference:
            continue
        steps = np.arange(c.shape[1]) * eval_freq
        mean = nan_mean(c)
        y = np.where(mean > 0, mean, np.nan)  # 0 (identical agents) has no place on a log axis
        shown = np.isfinite(y)
        # a point whose neighbours are not drawn makes no line segment: a marker shows it (else one non-zero value
        # among zeros left the panel empty)
        alone = shown & ~np.r_[False, shown[:-1]] & ~np.r_[shown[1:], False]
        line, = ax.plot(steps, y, "-", color=(colors or {}).get(id(g)), lw=1.2, label=legend_label(g),
                        marker="o", ms=3, markevery=[bool(x) for x in alone])
        lines.append(line)
        drawn += int(shown.sum())
    if not lines or not drawn:
        ax.text(0.5, 0.5, "no consensus files" if not lines else "disagreement 0 throughout (identical agents)",
                transform=ax.transAxes, ha="center", va="center", fontsize=7, color="0.5")
    else:
        ax.set_yscale("log")
    ax.set_xlabel("Time steps")
    ax.set_ylabel("Parameter disagreement", fontsize=7)
    ax.grid(alpha=0.3)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return lines


def run_count(g: Group) -> str:
    """How many runs (seeds) a line is the mean of, and their agents where a run has several curves: 'TD3: 3 runs',
    'DASE-TD3: 3 runs of 2 agents' (6 curves), '1 run of 2 agents' (README's first run; it said '2 runs')."""
    runs, curves = g.seeds(), len(g.runs)
    text = f"{runs} run{'s' if runs != 1 else ''}"
    if curves == runs:
        return text
    return f"{text} of {curves // runs} agents" if curves % runs == 0 else f"{text}, {curves} agents"


def legend_label(g: Group, ci: bool | None = None) -> str:
    """The group's name; with ``ci`` given (the returns' legend) also how many runs the line is the mean of (and
    their agents) and what its band is: 'DASE-TD3 (3 runs of 2 agents, ±1 std)', 'TD3 (3 runs, 95% CI)'. The band
    is over the curves, a DASE run's agents each one."""
    head, _, flags = g.label.partition(" ")  # replay flags ("--n_step 3") keep their spelling
    name = head.replace("_", "-") + (f" {flags}" if flags else "")
    what = [f"reference, {g.env}"] if g.reference else []
    if ci is not None:
        what += [run_count(g), "no band" if len(g.runs) < 2 else "95% CI" if ci else "±1 std"]
    return f"{name} ({', '.join(what)})" if what else name


def _panel(fig, cell, groups: list[Group], eval_freq: int, ci: bool, window: int, weights: bool | str,
           fontsize: int, consensus: bool = False):
    """One environment in the gridspec cell ``cell``: returns, and under them (x shared) the weight axis with
    ``weights`` and the consensus axis with ``consensus``. Returns (returns axis, the axes under it)."""
    extras = (["weights"] if weights else []) + (["consensus"] if consensus else [])
    if not extras:
        ax = fig.add_subplot(cell)
        draw_returns(ax, groups, eval_freq, ci, window)
        ax.legend(fontsize=fontsize, loc="best")
        return ax, []
    inner = cell.subgridspec(1 + len(extras), 1, height_ratios=[3] + [1] * len(extras), hspace=0.08)
    ax = fig.add_subplot(inner[0])
    colors = draw_returns(ax, groups, eval_freq, ci, window, xlabel=False)
    ax.legend(fontsize=fontsize, loc="best")
    below = []
    for k, extra in enumerate(extras, start=1):
        for upper in [ax, *below]:  # only the lowest axis keeps its step labels
            upper.tick_params(labelbottom=False)
            upper.xaxis.get_offset_text().set_visible(False)
            upper.set_xlabel("")
        sub = fig.add_subplot(inner[k], sharex=ax)
        if extra == "weights":
            draw_weights(sub, groups, eval_freq, colors, log=True if weights == "log" else None)
        else:
            draw_consensus(sub, groups, eval_freq, colors)
        below.append(sub)
    return ax, below


def plot(groups_by_env: dict[str, list[Group]], out: Path, eval_freq: int, ci: bool, window: int,
         ext: str, weights: bool | str = False, consensus: bool = False) -> list[Path]:
    """One figure per environment and one grid of all environments; returns the written paths.
    With ``weights`` each environment gets the weight-of-shared-samples axis under its returns, with ``consensus``
    the agents' parameter disagreement."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for env, groups in groups_by_env.items():
        fig = env_figure(env, groups, eval_freq, ci, window, weights, consensus)
        written.append(save(plt, fig, out / f"{env}.{ext}"))
    n = len(groups_by_env)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    extra = bool(weights) + bool(consensus)
    fig = plt.figure(figsize=(4.6 * cols, (3.6 + 1.0 * extra) * rows))
    grid = fig.add_gridspec(rows, cols)
    for k, (env, groups) in enumerate(groups_by_env.items()):
        ax, _ = _panel(fig, grid[k // cols, k % cols], groups, eval_freq, ci, window, weights, 6, consensus)
        ax.set_title(env)
    written.append(save(plt, fig, out / f"all_environments.{ext}"))
    return written


def env_figure(env: str, groups: list[Group], eval_freq: int, ci: bool, window: int, weights: bool | str = False,
               consensus: bool = False):
    """The figure of one environment (returns, and under them the weight and consensus axes asked for), not
    saved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    extra = bool(weights) + bool(consensus)
    fig = plt.figure(figsize=(5.2, 3.9 + 1.1 * extra))
    ax, _ = _panel(fig, fig.add_gridspec(1, 1)[0], groups, eval_freq, ci, window, weights, 7, consensus)
    ax.set_title(env)
    return fig


def save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
