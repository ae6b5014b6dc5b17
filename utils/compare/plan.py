"""A suite as the sweep's runs: one sweep experiment per task, one setting per method (its own results folder,
policy, flags and steps per agent), expanded and checked by ``utils.sweep`` itself."""
from __future__ import annotations

import argparse

from ..naming import curve_length
from ..sweep.cli import plan
from ..sweep.experiment import ExperimentError, experiment_from_spec
from ..sweep.runs import Run, expand, joined
from .entry import Entry
from .suite import Method, Suite, SuiteError, Task


def sweep_spec(suite: Suite, task: Task, steps: dict[str, int], methods: list[Method] | None = None) -> dict:
    """The experiment file the sweep would read for ``task``: ``steps`` per agent for each method (``methods``: those
    of one seed list, by default all of them with the first one's seeds)."""
    methods = list(suite.methods.values()) if methods is None else methods
    settings = {m.name: {"results_dir": m.results_dir, "policies": [m.policy], "steps": steps[m.name],
                         "flags": {**suite.flags, **task.flags, **m.flags}} for m in methods}
    spec = {"envs": [task.env], "policies": [methods[0].policy], "seeds": list(methods[0].seeds),
            "steps": max(steps.values()), "start_steps": suite.start_steps, "eval_freq": suite.eval_freq,
            "gpus_per_run": suite.gpus_per_run, "settings": settings}
    for key in ("eval_episodes", "threads_per_run", "device", "seeds_per_run"):
        if getattr(suite, key) is not None:
            spec[key] = getattr(suite, key)
    return spec


def _in_suite_terms(error: ExperimentError) -> SuiteError:
    """A sweep's message about its settings, said of the suite's methods."""
    text = str(error).replace("settings.", "methods.").replace("top-level 'steps'", "suite's 'budget'")
    return SuiteError(text)


def plan_suite(suite: Suite, ray: str | None = None, workers: int | None = None
               ) -> tuple[list[Entry], int | None, int | None]:
    """Every (task, method) as a checked sweep run, the threads per run and the local workers (``utils.sweep``'s
    rules). Under the ``total`` budget rule a method's agents share the task's budget: each trains budget // agents.
    A method whose every evaluation comes before training starts (at steps up to start_steps) is refused."""
    entries: list[Entry] = []
    threads = local_workers = None
    args = argparse.Namespace(ray=ray, workers=workers, until=None)
    for task in suite.tasks:
        names = suite.methods_on(task)
        steps = {m: task.budget for m in names}
        try:
            if suite.budget_rule == "total":
                every = [suite.methods[m] for m in names]
                agents = {run.setting: run.num_agents
                          for run in expand(experiment_from_spec(sweep_spec(suite, task, steps, every), suite.path),
                                            None)}
                steps = {m: task.budget // agents[m] for m in names}
                for m, own in steps.items():
                    if own < suite.eval_freq:
                        raise SuiteError(f"methods.{m} on {task.name}: a total budget of {task.budget} over "
                                         f"{agents[m]} agents is {own} steps each, fewer than eval_freq "
                                         f"{suite.eval_freq}")
            elif task.budget < suite.eval_freq:
                raise SuiteError(f"{task.name}: budget {task.budget} is smaller than eval_freq {suite.eval_freq}")
            for m, own in steps.items():
                if own // suite.eval_freq * suite.eval_freq <= suite.start_steps:
                    raise SuiteError(f"methods.{m} on {task.name}: every evaluation of its {own} steps per agent is "
                                     f"made before training starts (start_steps {suite.start_steps}, eval_freq "
                                     f"{suite.eval_freq}): no final score")
            _final_fits(suite, task, steps)
            runs = []
            for group in seed_groups(suite, names):  # the sweep runs one seed list per experiment
                exp = experiment_from_spec(sweep_spec(suite, task, steps, group), suite.path)
                found, threads, local_workers = plan(args, exp)
                runs += found
                suite.notices.extend(n for n in exp.notices if n not in suite.notices)
        except SuiteError:
            raise
        except ExperimentError as e:
            raise _in_suite_terms(e) from None
        by_method: dict[str, list[Run]] = {}
        for run in sorted(runs, key=lambda r: r.seeds):  # per method: one run, or one per seeds_per_run of its seeds
            by_method.setdefault(run.setting, []).append(run)  # or of its seed_flags' parts, in the order of seeds
        entries += [Entry(task, suite.methods[m], joined(by_method[m]),
                          processes=tuple(by_method[m]) if len(by_method[m]) > 1 else ())
                    for m in suite.methods if m in by_method]
    return entries, threads, local_workers


def _final_fits(suite: Suite, task: Task, steps: dict[str, int]) -> None:
    """The suite's final_evaluations (K) fits every curve of ``task``: no more than the evaluations of each method's
    run (one at step 0, then one every eval_freq steps per agent) and of each reference, as the report reads them
    (``scores.final_k``); windows that would reach back before training started shrink, and the report says so."""
    k = suite.final_evaluations
    if k is None:
        return
    for m, own in steps.items():
        if k > curve_length(own, suite.eval_freq):
            raise SuiteError(f"final_evaluations: {k} is more than the {curve_length(own, suite.eval_freq)} "
                             f"evaluations of methods.{m} on {task.name} ({own} steps per agent, one evaluation "
                             f"every eval_freq {suite.eval_freq} from step 0)")
    if task.references:
        from .scores import load_reference  # numpy: only for a suite with published curves

        for ref in task.references:
            n = load_reference(ref, task, suite).matrix.shape[1]
            if k > n:
                raise SuiteError(f"final_evaluations: {k} is more than the {n} evaluations of "
                                 f"tasks ({task.name}).references.{ref.name} within the budget")


def seed_groups(suite: Suite, names: list[str]) -> list[list[Method]]:
    """The methods ``names`` grouped by their seed lists, in the suite's order of first appearance; a method with
    seed_flags as its parts (``Method.parts``), each in the group of its seeds, so that the sweep gives each part's
    processes its flags and no group holds a method twice."""
    groups: dict[tuple[int, ...], list[Method]] = {}
    for m in names:
        for part in suite.methods[m].parts():
            groups.setdefault(part.seeds, []).append(part)
    return list(groups.values())
