"""``python -m utils.compare``: methods compared on a suite of tasks, in one report a researcher can trust.

The package: ``suite`` (reading and checking the suite file), ``plan`` (the suite as ``utils.sweep`` runs, checked
by the sweep's own checks), ``scores`` (curve files to final and normalised scores), ``stats`` (rliable's interval
estimates, seeded; paired differences by seed), ``figures``, ``report`` (report.json, report.md) and ``cli`` (the
command line; its docstring is the user's description). docs/compare.md describes the suite and the report.
"""
from ..plot.stats import METRICS, global_seed, paired_difference, statistics
from .cli import main, parse_args
from .suite import Method, Suite, SuiteError, Task, load_suite

__all__ = ["main", "parse_args", "METRICS", "global_seed", "paired_difference", "statistics", "Method", "Suite",
           "SuiteError", "Task", "load_suite"]
