"""``python -m utils.plot``: figures like the paper's, summary tables and a comparison with a reference tree.

The package, section by section: ``curves`` (finding, checking and grouping curve and weight files),
``stats`` (smoothing, IQM, bootstrap), ``figures``, ``tables`` (summary and comparison) and ``cli`` (the
command line; its docstring is the user's description); ``windows`` is a command of its own
(``python -m utils.plot.windows``: returns averaged over a window of evaluations, with CIs, and the sharing weight).
"""
from .cli import main, parse
from .curves import (
                     Curve,
                     Group,
                     PlotError,
                     attach_consensus,
                     attach_weights,
                     cut_curves,
                     env_key,
                     find_consensus,
                     find_curves,
                     find_weights,
                     group_curves,
                     read_curve,
                     read_weights,
                     recorded_eval_freq,
)
from .figures import draw_consensus, draw_returns, draw_weights, env_figure, plot, wants_log
from .stats import bootstrap_ci, iqm, mean_band, nan_mean, smooth
from .tables import compare, summarise, verdict, write_comparison, write_tables

__all__ = ["main", "parse", "Curve", "Group", "PlotError", "attach_consensus", "attach_weights", "cut_curves", "env_key",
           "find_consensus", "find_curves", "find_weights", "draw_consensus", "group_curves", "read_curve", "read_weights", "recorded_eval_freq", "draw_returns",
           "draw_weights", "env_figure", "plot", "wants_log", "bootstrap_ci", "iqm", "mean_band", "nan_mean", "smooth", "compare", "summarise",
           "verdict", "write_comparison", "write_tables"]
