"""``python -m utils.sweep``: a grid of training runs from a YAML experiment file, on a local pool or Ray.

The package: ``experiment`` (reading and checking the file), ``runs`` (one ``Run`` per setting, environment and
policy; its files and state on disk), ``execute`` (one run's process; shipped by value to Ray workers),
``results`` (what became of each run, the final table), ``local`` (the process pool), ``cluster`` (Ray) and
``cli`` (the command line; its docstring is the user's description).
"""
from .cli import main, parse_args
from .execute import files_complete
from .experiment import (
                         Experiment,
                         ExperimentError,
                         experiment_from_spec,
                         flag_args,
                         load_experiment,
                         parse_seeds,
                         seed_tokens,
)
from .runs import Run, check_flags, expand, run_state

__all__ = ["main", "parse_args", "files_complete", "Experiment", "ExperimentError", "experiment_from_spec", "flag_args",
           "load_experiment", "parse_seeds", "seed_tokens", "Run", "check_flags", "expand", "run_state"]
