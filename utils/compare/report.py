"""One suite's report: the numbers (``compute``), then ``report.json``, the figures and ``report.md`` (``write``)."""
from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np

from ..plot.stats import bootstrap_ci, mean_band
from ..plot.tables import markdown
from ..sweep.experiment import flag_args
from . import figures
from .plan import Entry
from .scores import final_k, load_curves, score_arrays
from .stats import METRICS, efficiency, paired_difference, statistics
from .suite import Suite

PACKAGES = ("numpy", "torch", "rliable", "scipy", "matplotlib", "gymnasium")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def budget_words(suite: Suite) -> tuple[str, str]:
    """The x axis of a curve under the suite's rule, and the sentence the report says of its budget."""
    if suite.budget_rule == "total":
        return ("Total steps (all agents of a run together)",
                "**Equal total budget** (`budget_rule: total`): a method's agents share the budget, each training "
                "budget // agents steps, so every method sees the same data in total; the curves' x axes and IQM "
                "against steps count all agents' steps together.")
    return ("Steps per agent",
            "**Equal budget per agent** (`budget_rule: per_agent`): every agent of every method trains the budget, so "
            "a method of N agents sees N times the data of a single learner in total (the table's last column); the "
            "curves' x axes and IQM against steps count one agent's steps.")


def compute(suite: Suite, entries: list[Entry]) -> tuple[dict, dict]:
    """The report's numbers (JSON-ready) and, for the figures, the curves by (task, method)."""
    curves = {(e.task.name, e.method.name): load_curves(e, suite.budget_rule) for e in entries}
    k = final_k(suite, list(curves.values()))
    fractions = np.arange(1, suite.efficiency_points + 1) / suite.efficiency_points
    raw, normalised, at_fractions = score_arrays(suite, curves, k, fractions)
    reps, seed = suite.bootstrap_reps, suite.bootstrap_seed
    budgets = {t.budget for t in suite.tasks}
    tasks = {}
    for j, t in enumerate(suite.tasks):
        rows = {}
        for m in suite.methods:
            c, final = curves[t.name, m], raw[m][:, j]
            mean, lo, hi = mean_band(c.matrix, ci=True)
            rows[m] = {"agents": c.entry.agents, "steps_per_agent": c.entry.steps_per_agent,
                       "total_steps": c.entry.total_steps, "final": final.tolist(),
                       "final_mean": float(final.mean()), "final_ci": list(bootstrap_ci(final, np.mean, reps, seed)),
                       "normalised": normalised[m][:, j].tolist(),
                       "normalised_mean": float(normalised[m][:, j].mean()),
                       "curve": {"steps": c.budget_steps.tolist(), "mean": mean.tolist(), "lower": lo.tolist(),
                                 "upper": hi.tolist()}}
        tasks[t.name] = {"env": t.env, "random": t.random, "target": t.target, "budget": t.budget,
                         "flags": t.flags, "methods": rows}
    paired = []
    for a, b in suite.pairs:
        per_task = {t.name: paired_difference(raw[a][:, [j]], raw[b][:, [j]], reps, seed)
                    for j, t in enumerate(suite.tasks)}
        paired.append({"a": a, "b": b, "tasks": per_task,
                       "all_tasks_normalised": paired_difference(normalised[a], normalised[b], reps, seed)})
    report = {
        "suite": {"name": suite.name, "file": str(suite.path), "description": suite.description,
                  "seeds": suite.seeds, "budget_rule": suite.budget_rule, "baseline": suite.baseline,
                  "final_evaluations": k, "eval_freq": suite.eval_freq, "eval_episodes": suite.eval_episodes,
                  "start_steps": suite.start_steps, "bootstrap_reps": reps, "bootstrap_seed": seed,
                  "efficiency_points": suite.efficiency_points, "text": suite.text},
        "methods": {m.name: {"policy": m.policy, "flags": m.flags, "results_dir": m.results_dir,
                             "description": m.description} for m in suite.methods.values()},
        "tasks": tasks,
        **statistics(normalised, suite.baseline, reps, seed),
        "sample_efficiency": {"fractions": fractions.tolist(),
                              "steps": (fractions * budgets.pop()).tolist() if len(budgets) == 1 else None,
                              "methods": efficiency(at_fractions, reps, seed)},
        "paired_differences": paired,
        "versions": versions(),
    }
    return report, curves


def _ci(v: dict, digits: int) -> str:
    return f"{v['estimate']:.{digits}f} [{v['ci'][0]:.{digits}f}, {v['ci'][1]:.{digits}f}]"


def write(suite: Suite, entries: list[Entry], out: Path, commands: list[str]) -> Path:
    """Compute and write report.json, the figures and report.md in ``out``; returns report.md's path."""
    report, curves = compute(suite, entries)
    report["commands"] = {"report": commands, "runs": [e.run.command_line() for e in entries]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    colors = figures.method_colors(list(suite.methods))
    xlabel, budget_text = budget_words(suite)
    names = {t.name: figures.task_figure(out / f"curves_{t.name}.png", t, {m: curves[t.name, m] for m in suite.methods},
                                         colors, xlabel, report["suite"]["final_evaluations"]) for t in suite.tasks}
    names["aggregates"] = figures.aggregates_figure(out / "aggregates.png", report, colors)
    names["improvement"] = figures.improvement_figure(out / "probability_of_improvement.png", report, suite.baseline,
                                                      colors)
    names["profile"] = figures.profile_figure(out / "performance_profile.png", report, colors)
    eff = report["sample_efficiency"]
    x = np.array(eff["steps"] if eff["steps"] is not None else eff["fractions"])
    names["efficiency"] = figures.efficiency_figure(out / "iqm_against_steps.png", eff["methods"], x,
                                                    xlabel if eff["steps"] is not None else "Fraction of the budget",
                                                    colors)
    path = out / "report.md"
    path.write_text(markdown_report(suite, report, budget_text, names))
    return path


def markdown_report(suite: Suite, r: dict, budget_text: str, names: dict) -> str:
    s, methods, k = r["suite"], list(r["methods"]), r["suite"]["final_evaluations"]
    lines = [f"# Comparison: {suite.name}", ""]
    if suite.description:
        lines += [suite.description, ""]
    lines += [f"Written by `utils.compare` from [{suite.path.name}](#the-suite). {len(suite.tasks)} task(s), "
              f"{len(methods)} methods, seeds {', '.join(map(str, s['seeds']))}. A run's **final score** is the mean "
              f"of its last {k} evaluations (every {s['eval_freq']} steps per agent), a seed's agents averaged first; "
              "scores are normalised per task as (score - random) / (target - random). Intervals are 95 % "
              f"percentile bootstrap intervals from {s['bootstrap_reps']} resamples (seed {s['bootstrap_seed']}).", "",
              "## Budget", "", budget_text, ""]
    rows = []
    for m, info in r["methods"].items():
        per_task = [r["tasks"][t.name]["methods"][m] for t in suite.tasks]
        steps = sorted({(v["steps_per_agent"], v["total_steps"]) for v in per_task})
        rows.append([m, info["policy"], f"`{' '.join(flag_args(info['flags']))}`" if info["flags"] else "",
                     str(per_task[0]["agents"]), ", ".join(f"{a:,}" for a, _ in steps),
                     ", ".join(f"{b:,}" for _, b in steps)])
    lines += [markdown(["method", "policy", "flags", "agents", "steps per agent", "total steps"], rows)]
    lines += ["## Final scores per task", "",
              f"Mean final return over seeds [95 % CI], and the normalised mean. Reference scores: "
              + "; ".join(f"{t.name} random {t.random:g}, target {t.target:g}" for t in suite.tasks) + ".", ""]
    head = ["task"] + methods
    rows = [[t.name] + [f"{v['final_mean']:.1f} [{v['final_ci'][0]:.1f}, {v['final_ci'][1]:.1f}] "
                        f"({v['normalised_mean']:.3f})" for v in r["tasks"][t.name]["methods"].values()]
            for t in suite.tasks]
    lines += [markdown(head, rows)]
    lines += [f"![{t.name}]({names[t.name]})" for t in suite.tasks] + [""]
    lines += ["## Across tasks (rliable)", "",
              "Normalised final scores of all runs and tasks; stratified bootstrap (runs resampled within each task), "
              "`rliable.library.get_interval_estimates` with `rliable.metrics`. Optimality gap: the mean shortfall "
              "below the target (1); lower is better.", ""]
    rows = [[m] + [_ci(r["aggregates"][m][name], 3) for name in METRICS] for m in methods]
    lines += [markdown(["method"] + list(METRICS), rows), f"![aggregates]({names['aggregates']})", ""]
    lines += [f"### Probability of improvement over {suite.baseline}", "",
              "P(X > baseline): the chance that a run of X beats a run of the baseline on a task, averaged over tasks "
              "(`rliable.metrics.probability_of_improvement`; runs of the two resampled independently).", ""]
    rows = [[m, _ci(v, 3)] for m, v in r["probability_of_improvement"].items()]
    lines += [markdown(["method X", f"P(X > {suite.baseline}) [95 % CI]"], rows),
              f"![improvement]({names['improvement']})", ""]
    lines += ["### Performance profile", "", "The fraction of runs (all tasks) whose normalised final score exceeds "
              "each threshold, with 95 % bands (`rliable.library.create_performance_profile`).", "",
              f"![performance profile]({names['profile']})", "", "### IQM against steps", "",
              f"The IQM of normalised scores at {s['efficiency_points']} points of the budget (at each, the mean of "
              f"the {k} evaluations ending there), with 95 % intervals.", "",
              f"![IQM against steps]({names['efficiency']})", ""]
    lines += ["## Paired differences by seed", "",
              "A minus B for the same seed and task (the same task variants: a seed draws them alike in every method): "
              "the mean over pairs [95 % CI] of the project's paired bootstrap (seeds resampled within each task, "
              f"{s['bootstrap_reps']} resamples, seed {s['bootstrap_seed']}), then (pairs A won / pairs). Per task in "
              "returns; all tasks together in normalised scores.", ""]
    head = ["A - B"] + [t.name for t in suite.tasks] + ["all tasks (normalised)"]
    rows = []
    for p in r["paired_differences"]:
        cells = [f"{_ci(p['tasks'][t.name], 1)} ({p['tasks'][t.name]['better']}/{p['tasks'][t.name]['pairs']})"
                 for t in suite.tasks]
        whole = p["all_tasks_normalised"]
        rows.append([f"{p['a']} - {p['b']}"] + cells + [f"{_ci(whole, 3)} ({whole['better']}/{whole['pairs']})"])
    lines += [markdown(head, rows)]
    lines += ["## The suite", "", f"`{suite.path}`:", "", "```yaml", suite.text.rstrip(), "```", "",
              "## Commands", "", "```", *r["commands"]["report"], "```", "", "The runs (each trains all seeds):", "",
              "```", *r["commands"]["runs"], "```", "", "## Versions", "",
              ", ".join(f"{name} {v}" for name, v in r["versions"].items()) + ".", "",
              "Every number of this page, and the curves, are in [report.json](report.json).", ""]
    return "\n".join(lines)
