"""One suite's report: the numbers (``compute``), then ``report.json``, the figures and ``report.md`` (``write``)."""
from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

import numpy as np

from ..io import written_together
from ..plot.stats import METRICS, bootstrap_ci, efficiency, mean_band, paired_difference, sign_flip_test, statistics
from ..plot.tables import has_markers, markdown, write_between_markers
from ..sweep.experiment import flag_args, seed_tokens
from . import figures
from .claims import judged
from .entry import Entry
from .scores import Curves, final_k, load_curves, load_reference, score_arrays, trained_fractions, weight_traces
from .suite import Suite
from .words import claim_digits, digits_for, p_words, plan_words, steps_label, verdict_words

SEEDS_BLOCK = "_seeds"  # <!-- {marker}_seeds -->: where --write_docs puts seeds_table, where the page has it
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
            "a method of N agents sees N times the data of a single learner in total (the table's total steps); the "
            "curves' x axes and IQM against steps count one agent's steps.")


def so_far_words(suite: Suite) -> str:
    """--so_far: the sentence that says the runs are not finished and where they are read."""
    read = "; ".join(f"{name} at {step:,} of its budget of {budget:,}" for name, (step, budget) in suite.so_far.items())
    return (f"**Read so far** (`--so_far`): runs under way, each task read up to the furthest step every seed of every "
            f"method on it has reached ({read}); the final score is the mean of the evaluations ending there, not at "
            "the budget.")


def columns(suite: Suite) -> list[tuple[str, int | None]]:
    """The steps the report reads every method at (label, step in the budget's units): the suite's ``at_steps``, then
    the budget (the final score; its step None where tasks' budgets differ) unless at_steps ends there."""
    budgets = {t.budget for t in suite.tasks}
    budget = next(iter(budgets)) if len(budgets) == 1 else None
    out = [(steps_label(x), x) for x in suite.at_steps if x != budget]
    return out + [(steps_label(budget) if budget else "final", budget)]


def _cell(values: np.ndarray | None, evaluations: int, seeds: tuple[int, ...], reps: int, seed: int) -> dict | None:
    """Seeds' values at one step: their mean with its 95 % percentile bootstrap interval over seeds, and how many
    evaluations each averages."""
    if values is None:
        return None
    ci = list(bootstrap_ci(values, np.mean, reps, seed)) if len(values) > 1 else [float(values[0])] * 2
    return {"seeds": list(seeds), "values": values.tolist(), "mean": float(values.mean()), "ci": ci,
            "evaluations": evaluations}


def _windows(c: Curves, task, suite: Suite, k: int) -> list[tuple[np.ndarray | None, int]]:
    """A method's (or reference's) per-seed scores at each column and how many evaluations they average: the k
    ending at the step, none made before training started ((None, 0) where there are none)."""
    if c.entry is not None:
        ends: list[int | None] = list(_ends(c, task, suite))
    else:  # a reference: on the suite's grid; where tasks' budgets differ, no final score
        ends = [None if step is None else step // (c.agents if suite.budget_rule == "total" else 1) // c.eval_freq
                for _, step in columns(suite)]
    return [(None, 0) if end is None else (c.window(end, k), c.window_size(end, k)) for end in ends]


def _ends(c: Curves, task, suite: Suite) -> list[int]:
    """The index of the evaluation each column of a method's row ends at (the last where tasks' budgets differ)."""
    return [c.last if step is None else c.end_at(step / task.budget) for _, step in columns(suite)]


def external_weights(c: Curves, task, suite: Suite) -> dict | None:
    """A sharing method's mean weight of the other agents' samples in each column's span: the evaluation periods
    after the previous column (the first: after the warm-up) up to the column's step; per seed the mean over its
    agents of their traces' means there, then the mean, lowest and highest over seeds. None where the method writes
    no weight traces (or one is missing); a span with no update: None."""
    traces = weight_traces(c.entry, c.matrix.shape[1]) if c.entry is not None else None
    if traces is None:
        return None
    out, start = {}, c.trained - 1
    for (label, _), end in zip(columns(suite), _ends(c, task, suite)):
        span = traces[:, :, start + 1:end + 1]
        if span.size == 0 or np.isnan(span).all(axis=2).any():
            out[label] = None
        else:
            values = np.nanmean(span, axis=2).mean(axis=1)
            out[label] = {"seeds": list(c.seeds), "values": values.tolist(), "mean": float(values.mean()),
                          "lowest": float(values.min()), "highest": float(values.max())}
        start = max(start, end)
    return out


def paired(a: Curves, b: Curves, va: np.ndarray, vb: np.ndarray, reps: int, seed: int) -> dict | None:
    """A minus B on the seeds both ran: the project's paired bootstrap (``paired_difference``), the two-sided
    sign-flip p over seeds (exact up to EXACT_SEEDS seeds; ``sign_flip`` says which) and the seeds themselves; None
    without two common seeds."""
    both = sorted(set(a.seeds) & set(b.seeds))
    if len(both) < 2:
        return None
    x = np.array([va[a.seeds.index(s)] for s in both])
    y = np.array([vb[b.seeds.index(s)] for s in both])
    out = paired_difference(x[:, None] if x.ndim == 1 else x, y[:, None] if y.ndim == 1 else y, reps, seed)
    d = x - y
    test = sign_flip_test(d.mean(axis=1) if d.ndim == 2 else d, seed=seed)
    out.update(seeds=both, sign_flip_p=test.p, sign_flip=test.words())
    return out


def compute(suite: Suite, entries: list[Entry]) -> tuple[dict, dict]:
    """The report's numbers (JSON-ready) and, for the figures, the curves by (task, method) and by (task, reference):
    ``per_task``'s, then rliable's across tasks."""
    report, curves, normalised, at_fractions = per_task(suite, entries)
    reps, seed = suite.bootstrap_reps, suite.bootstrap_seed
    budgets = {t.budget for t in suite.tasks}
    fractions = np.array(report["suite"].pop("fractions"))
    report.update({
        **statistics(normalised, suite.baseline, reps, seed,
                     {m: [t.name for t in suite.tasks_of(m)] for m in suite.methods}),
        "sample_efficiency": {"fractions": fractions.tolist(),
                              "steps": (fractions * budgets.pop()).tolist() if len(budgets) == 1 else None,
                              "methods": efficiency(at_fractions, reps, seed)},
        "paired_differences": report.pop("paired_differences"),
        "versions": versions()})
    report["claims"] = judged(suite, curves, report["suite"]["final_evaluations"])
    return report, curves


def per_task(suite: Suite, entries: list[Entry]):
    """The numbers of each task (every method's and reference's scores, final and at each step) and the paired
    differences by seed, with the curves, the normalised final scores and the normalised scores against steps that
    rliable's statistics take (seconds: the docs tests call this alone)."""
    curves = {(e.task.name, e.method.name): load_curves(e, suite.budget_rule, suite.score, suite.start_steps)
              for e in entries}
    k = final_k(suite, list(curves.values()))
    references = {(t.name, ref.name): load_reference(ref, t, suite) for t in suite.tasks for ref in t.references}
    fractions = trained_fractions(list(curves.values()),
                                  np.arange(1, suite.efficiency_points + 1) / suite.efficiency_points)
    raw, normalised, at_fractions = score_arrays(suite, curves, k, fractions)
    reps, seed = suite.bootstrap_reps, suite.bootstrap_seed
    labels = [label for label, _ in columns(suite)]
    tasks, windows = {}, {}
    column = {m: {t.name: j for j, t in enumerate(suite.tasks_of(m))} for m in suite.methods}
    for t in suite.tasks:
        rows = {}
        for m in suite.methods_on(t):
            j = column[m][t.name]
            c, final = curves[t.name, m], raw[m][:, j]
            mean, lo, hi = mean_band(c.matrix, ci=True)
            cells = _windows(c, t, suite, k)
            windows[t.name, m] = [v for v, _ in cells]
            rows[m] = {"agents": c.agents, "steps_per_agent": c.entry.steps_per_agent,
                       "total_steps": c.entry.total_steps, "seeds": list(c.seeds),
                       "final_evaluations": c.window_size(c.last, k), "final": final.tolist(),
                       "final_mean": float(final.mean()), "final_ci": list(bootstrap_ci(final, np.mean, reps, seed)),
                       "normalised": normalised[m][:, j].tolist(),
                       "normalised_mean": float(normalised[m][:, j].mean()),
                       "at_steps": {label: _cell(v, n, c.seeds, reps, seed) for label, (v, n) in zip(labels, cells)},
                       "curve": {"steps": c.budget_steps.tolist(), "mean": mean.tolist(), "lower": lo.tolist(),
                                 "upper": hi.tolist()}}
            if (weights := external_weights(c, t, suite)) is not None:
                rows[m]["external_weights"] = weights
        refs = {}
        for ref in t.references:
            c = references[t.name, ref.name]
            mean, lo, hi = mean_band(c.matrix, ci=True)
            refs[ref.name] = {"folder": ref.folder, "prefix": ref.prefix, "description": ref.description,
                              "agents": c.agents, "seeds": list(c.seeds),
                              "at_steps": {label: _cell(v, n, c.seeds, reps, seed)
                                           for label, (v, n) in zip(labels, _windows(c, t, suite, k))},
                              "curve": {"steps": c.budget_steps.tolist(), "mean": mean.tolist(),
                                        "lower": lo.tolist(), "upper": hi.tolist()}}
        tasks[t.name] = {"env": t.env, "random": t.random, "target": t.target, "budget": t.budget,
                         "flags": t.flags, "methods": rows, "references": refs}
    pairs = []
    for a, b in suite.pairs:
        shared = suite.shared_tasks(a, b)
        if not shared:  # methods of tasks apart (e.g. continuous and discrete actions): nothing to pair
            continue
        per_task = {}
        for t in shared:
            ca, cb = curves[t.name, a], curves[t.name, b]
            per_task[t.name] = {label: paired(ca, cb, va, vb, reps, seed) if va is not None and vb is not None
                                else None
                                for label, va, vb in zip(labels, windows[t.name, a], windows[t.name, b])}
            per_task[t.name]["final"] = paired(ca, cb, raw[a][:, column[a][t.name]], raw[b][:, column[b][t.name]],
                                               reps, seed)
        first = curves[shared[0].name, a], curves[shared[0].name, b]
        na = normalised[a][:, [column[a][t.name] for t in shared]]
        nb = normalised[b][:, [column[b][t.name] for t in shared]]
        pairs.append({"a": a, "b": b, "tasks": per_task, "shared_tasks": [t.name for t in shared],
                      "all_tasks_normalised": paired(*first, na, nb, reps, seed)})
    report = {
        "suite": {"name": suite.name, "file": str(suite.path), "description": suite.description,
                  "seeds": suite.seeds, "budget_rule": suite.budget_rule,
                  "so_far": {name: {"step": step, "budget": budget} for name, (step, budget) in suite.so_far.items()}
                  if suite.so_far else None, "baseline": suite.baseline,
                  "final_evaluations": k, "eval_freq": suite.eval_freq, "eval_episodes": suite.eval_episodes,
                  "start_steps": suite.start_steps, "bootstrap_reps": reps, "bootstrap_seed": seed,
                  "efficiency_points": suite.efficiency_points, "score": suite.score, "columns": labels,
                  "text": suite.text, "fractions": fractions.tolist()},
        "methods": {m.name: {"policy": m.policy, "flags": m.flags, "results_dir": m.results_dir,
                             "description": m.description, "seeds": list(m.seeds),
                             **({"seed_flags": {" ".join(seed_tokens(seeds)): flags for seeds, flags in m.seed_flags}}
                                if m.seed_flags else {})}
                    for m in suite.methods.values()},
        "tasks": tasks,
        "paired_differences": pairs,
    }
    return report, {**curves, **references}, normalised, at_fractions


def _final_cell(v: dict | None, digits: int = 1) -> str:
    if v is None:
        return "—"
    d = digits
    return f"{v['final_mean']:.{d}f} [{v['final_ci'][0]:.{d}f}, {v['final_ci'][1]:.{d}f}] ({v['normalised_mean']:.3f})"


def _pair_cell(d: dict | None, digits: int) -> str:
    if d is None:
        return "— (fewer than 2 common seeds)"
    return f"{_ci(d, digits)} ({d['better']}/{d['pairs']}; p {_p(d)})"


def _p(d: dict) -> str:
    """A pair's sign-flip p, marked when it was sampled rather than exact."""
    sampled = d.get("sign_flip", "exact") != "exact"
    return p_text(d["sign_flip_p"]) + (f", {d['sign_flip']}" if sampled else "")


def p_text(p: float) -> str:
    """A p for a table: two decimals, or two significant digits below 0.01 (never "0.00")."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.2g}"


def seeds_text(suite_seeds: list[int], methods: dict) -> str:
    """The suite's seeds, then those of each method with seeds of its own (methods with the same seeds together)."""
    own: dict[str, list[str]] = {}
    for name, m in methods.items():
        if m.get("seeds") and list(m["seeds"]) != list(suite_seeds):
            own.setdefault(", ".join(seed_tokens(m["seeds"])), []).append(name)
    return ", ".join(seed_tokens(suite_seeds)) + "".join(f"; {', '.join(names)}: {text}" for text, names in own.items())


def _ci(v: dict, digits: int) -> str:
    return f"{v['estimate']:.{digits}f} [{v['ci'][0]:.{digits}f}, {v['ci'][1]:.{digits}f}]"


def write(suite: Suite, entries: list[Entry], out: Path, commands: list[str],
          docs: tuple[Path, str] | None = None) -> Path:
    """Compute and write report.json, the figures and report.md in ``out`` (and the table at each step into the docs
    page ``docs``, (page, marker)); returns report.md's path. The files are a set, written together
    (``utils.io.written_together``): a write that fails (a full disk: ``DiskFull``) leaves ``out`` and the docs page as
    they were, no file of the new report there."""
    report, curves = compute(suite, entries)
    report["commands"] = {"report": commands, "runs": [run.command_line() for e in entries for run in e.commands]}
    with written_together(out) as stage:
        _write(suite, report, curves, stage, docs)
    return out / "report.md"


def _write(suite: Suite, report: dict, curves: dict, out: Path, docs: tuple[Path, str] | None) -> None:
    """``write``'s files, into the temporary folder ``out``."""
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    colors = figures.method_colors(list(suite.methods) + sorted({r.name for t in suite.tasks for r in t.references}))
    xlabel, budget_text = budget_words(suite)
    if suite.so_far:
        budget_text += " " + so_far_words(suite)
    names = {t.name: figures.task_figure(out / f"curves_{t.name}.png", t,
                                         {m: curves[t.name, m] for m in suite.methods_on(t)},
                                         colors, xlabel, report["suite"]["final_evaluations"],
                                         {r.name: curves[t.name, r.name] for r in t.references})
             for t in suite.tasks}
    names["aggregates"] = figures.aggregates_figure(out / "aggregates.png", report, colors)
    names["improvement"] = figures.improvement_figure(out / "probability_of_improvement.png", report, suite.baseline,
                                                      colors)
    names["profile"] = figures.profile_figure(out / "performance_profile.png", report, colors)
    eff = report["sample_efficiency"]
    x = np.array(eff["steps"] if eff["steps"] is not None else eff["fractions"])
    names["efficiency"] = figures.efficiency_figure(out / "iqm_against_steps.png", eff["methods"], x,
                                                    xlabel if eff["steps"] is not None else "Fraction of the budget",
                                                    colors)
    (out / "report.md").write_text(markdown_report(suite, report, budget_text, names))
    if docs is not None:  # last: the docs page is replaced whole (atomically), once every file of the report is there
        write_between_markers(docs[0], docs_blocks(docs[0].read_text(), docs[1], suite, report))


def _at(cell: dict | None, k: int, digits: int = 1) -> str:
    """mean [95 % CI] (seeds), with the evaluations each seed's value averages where they are fewer than k."""
    if cell is None:
        return "—"
    n = cell["evaluations"]
    fewer = f"; {n} evaluation{'s' if n > 1 else ''}" if n < k else ""
    return (f"{cell['mean']:.{digits}f} [{cell['ci'][0]:.{digits}f}, {cell['ci'][1]:.{digits}f}] "
            f"({len(cell['values'])}{fewer})")


def shortened(r: dict) -> bool:
    """Whether any window of the report averages fewer than K evaluations (K's would include one made before
    training started)."""
    k = r["suite"]["final_evaluations"]
    rows = [row for task in r["tasks"].values() for kind in ("methods", "references") for row in task[kind].values()]
    return any(row.get("final_evaluations", k) < k or any(c is not None and c["evaluations"] < k
                                                          for c in row["at_steps"].values()) for row in rows)


def _difference(d: dict | None, digits: int = 1) -> str:
    if d is None:
        return "—"
    return (f"{d['estimate']:+.{digits}f} [{d['ci'][0]:+.{digits}f}, {d['ci'][1]:+.{digits}f}] "
            f"(p {_p(d)}; {d['better']} of {d['pairs']} above)")


def claims_table(suite: Suite, r: dict) -> str:
    """One row per claim: the statement and its source, the metric, the published effect, both means, the paired
    difference [95 % CI] (pairs A won), p, the seeds, the verdict and the planner's seeds."""
    rows = []
    for c in r["claims"]:
        d = claim_digits(c, r)
        diff = c["difference"]
        published = "—" if c["published"] is None else f"{c['published']:+.{d}f}"
        kind = f"equivalence within ±{c['margin']:g}" if c["kind"] == "equivalence" else \
            f"{c['a']} {'above' if c['direction'] == 'greater' else 'below'} {c['b']}"
        rows.append([f"`{c['name']}`: {c['statement']} ({c['source']})",
                     f"{kind}; {c['metric_words']} ({c['unit']}) on {', '.join(c['tasks'])}", published,
                     f"{c['a_mean']:.{d}f} vs {c['b_mean']:.{d}f}",
                     f"{diff['estimate']:+.{d}f} [{diff['ci'][0]:+.{d}f}, {diff['ci'][1]:+.{d}f}] "
                     f"({diff['better']} of {diff['pairs']} above)", p_words(c), str(len(c["seeds"])),
                     f"**{verdict_words(c)}**", "—" if c["verdict"] in ("shown", "equivalent") else plan_words(c)])
    return markdown(["claim (source)", "kind; metric (unit)", "published A − B", "ours: A vs B",
                     "A − B, paired [95 % CI]", "p", "seeds", "verdict", "seeds for 80 % power"], rows)


def steps_table(suite: Suite, r: dict) -> str:
    """Every method and reference per task at each column step (mean [95 % CI] (seeds)), then each pair's paired
    difference by seed at each step (mean [95 % CI] (sign-flip p; pairs A is above)): the table a docs page holds
    (``--write_docs``)."""
    k, labels = r["suite"]["final_evaluations"], r["suite"]["columns"]
    several = len(suite.tasks) > 1
    fewer = " (fewer where a cell says so: none made before training started)" if shortened(r) else ""
    lines = [f"| mean of the {k} evaluations up to the step{fewer}, 95 % CI (seeds) | " + " | ".join(labels) + " |",
             "|" + "---|" * (len(labels) + 1)]
    for t in suite.tasks:
        task = r["tasks"][t.name]
        prefix = f"{t.name} " if several else ""
        d = digits_for(t)
        for m, row in task["methods"].items():
            lines.append(f"| {prefix}{m} | " + " | ".join(_at(row["at_steps"][c], k, d) for c in labels) + " |")
        for name, ref in task["references"].items():
            lines.append(f"| {prefix}{name} | " + " | ".join(_at(ref["at_steps"][c], k, d) for c in labels) + " |")
    for p in r["paired_differences"]:
        for t in suite.tasks:
            if t.name not in p["tasks"]:
                continue
            prefix = f"{t.name} " if several else ""
            lines.append(f"| {prefix}{p['a']} − {p['b']}, paired by seed | "
                         + " | ".join(_difference(p["tasks"][t.name][c], digits_for(t)) for c in labels) + " |")
    return "\n".join(lines)


def docs_blocks(page: str, marker: str, suite: Suite, r: dict) -> dict[str, str]:
    """What ``--write_docs`` puts on the page: ``steps_table`` between ``<!-- marker -->`` and ``<!-- /marker -->``
    and, where the page holds a ``<!-- marker_seeds -->`` block, ``seeds_table`` there."""
    blocks = {marker: steps_table(suite, r)}
    if has_markers(page, marker + SEEDS_BLOCK):
        blocks[marker + SEEDS_BLOCK] = seeds_table(suite, r)
    return blocks


def weight_text(w: float) -> str:
    """0.025 as 0.025; a weight below 0.001 (matched variance's ~1e-10) in two significant digits, not as 0.000."""
    return f"{w:.3f}" if w >= 1e-3 else f"{w:.1e}"


def seeds_table(suite: Suite, r: dict) -> str:
    """Every seed's final score per method and task (a seed's agents averaged) and each pair's difference by seed;
    then, for the methods that write DASE weight traces, the mean weight of an external sample in each column's span
    (lowest and highest seed): the numbers a write-up reads seed by seed (``--write_docs``, the page's
    ``<!-- marker_seeds -->`` block)."""
    k, labels = r["suite"]["final_evaluations"], r["suite"]["columns"]
    several = len(suite.tasks) > 1
    seeds = sorted({s for task in r["tasks"].values() for row in task["methods"].values() for s in row["seeds"]})
    lines = [f"| final score by seed (the mean of its {k} evaluations ending at {labels[-1]}) | "
             + " | ".join(map(str, seeds)) + " |", "|" + "---|" * (len(seeds) + 1)]
    weights = []
    for t in suite.tasks:
        task, d = r["tasks"][t.name], digits_for(t)
        prefix = f"{t.name} " if several else ""
        finals = {m: dict(zip(row["seeds"], row["final"])) for m, row in task["methods"].items()}
        for m, row in task["methods"].items():
            averaged = f" (its {row['agents']} agents averaged)" if row["agents"] > 1 else ""
            lines.append(f"| {prefix}{m}{averaged} | "
                         + " | ".join(f"{finals[m][s]:.{d}f}" if s in finals[m] else "—" for s in seeds) + " |")
            if row.get("external_weights"):
                weights.append((f"{prefix}{m}", row["external_weights"]))
        for p in r["paired_differences"]:
            if t.name in p["tasks"]:
                a, b = finals[p["a"]], finals[p["b"]]
                lines.append(f"| {prefix}{p['a']} − {p['b']} | " + " | ".join(
                    f"{a[s] - b[s]:+.{d}f}" if s in a and s in b else "—" for s in seeds) + " |")
    if weights:  # each column a span: from the previous column's step (the first: the warm-up's end) to its own
        first = steps_label(suite.start_steps) if suite.budget_rule == "per_agent" else "warm-up"
        spans = [f"{a}-{b}" for a, b in zip([first] + labels[:-1], labels)]
        lines += ["", "| mean weight of an external sample over the span (its own agent's samples weigh 1), "
                  "lowest-highest seed | " + " | ".join(spans) + " |", "|" + "---|" * (len(labels) + 1)]
        for name, w in weights:
            lines.append(f"| {name} | " + " | ".join(
                "—" if w[c] is None else f"{weight_text(w[c]['mean'])} ({weight_text(w[c]['lowest'])}-"
                f"{weight_text(w[c]['highest'])})" for c in labels) + " |")
    return "\n".join(lines)


def untrained_words(r: dict) -> str:
    """What the final windows leave out (the evaluations made before training started), and each run whose window is
    shorter for it."""
    s, k = r["suite"], r["suite"]["final_evaluations"]
    which = (f"step 0's and the random warm-up's, up to step {s['start_steps']:,} per agent" if s["start_steps"]
             else "step 0's")
    fewer = [f"{m} on {t}: its last {row['final_evaluations']}" for t, task in r["tasks"].items()
             for m, row in task["methods"].items() if row["final_evaluations"] < k]
    return f"leaving out those made before training started ({'; '.join([which] + fewer)})"


def efficiency_words(r: dict) -> str:
    """The points of IQM against steps, and those left out for lying before some method's training started."""
    n, kept = r["suite"]["efficiency_points"], len(r["sample_efficiency"]["fractions"])
    if kept == n:
        return f"{n} points of the budget"
    first = "the first lies" if n - kept == 1 else f"the first {n - kept} lie"
    return f"{kept} of {n} points of the budget ({first} before some method's training started, left out)"


def markdown_report(suite: Suite, r: dict, budget_text: str, names: dict) -> str:
    s, methods, k = r["suite"], list(r["methods"]), r["suite"]["final_evaluations"]
    lines = [f"# Comparison: {suite.name}", ""]
    if suite.description:
        lines += [suite.description, ""]
    lines += [f"Written by `utils.compare` from [{suite.path.name}](#the-suite). {len(suite.tasks)} task(s), "
              f"{len(methods)} methods, seeds {seeds_text(s['seeds'], r['methods'])}. A run's **final score** is the mean "
              f"of its last {k} evaluations (every {s['eval_freq']} steps per agent), {untrained_words(r)}, a seed's "
              "agents averaged first; scores are normalised per task as (score - random) / (target - random). "
              "Intervals are 95 % "
              f"percentile bootstrap intervals from {s['bootstrap_reps']} resamples (seed {s['bootstrap_seed']}).", ""]
    if r.get("claims"):
        lines += ["## Claims", "",
                  f"Each claim of the suite judged by the rule of docs/compare.md (\"The rule\"): **shown** when the "
                  "paired 95 % percentile bootstrap interval excludes 0 on the claimed side and the two-sided "
                  "sign-flip p, Holm-adjusted over the suite's "
                  f"{len(r['claims'])} claim(s), is below 0.05; **equivalent** through two one-sided sign-flip tests "
                  "inside the declared margin; **contradicted**, the mirror of shown: the interval wholly on the other "
                  "side and the same Holm-adjusted p below 0.05 (an equivalence: the interval wholly outside the "
                  "margin and the one-sided test beyond it, Bonferroni-adjusted, below 0.05); otherwise **not "
                  "shown**, with the seeds the planner says 80 % power needs; **published size refuted** when the "
                  "interval excludes the source's effect and the two-sided sign-flip test of a mean difference equal "
                  "to it, Bonferroni-adjusted, is below 0.05.", "",
                  claims_table(suite, r), ""]
    lines += ["## Budget", "", budget_text, ""]
    rows = []
    for m, info in r["methods"].items():
        per_task = [r["tasks"][t.name]["methods"][m] for t in suite.tasks_of(m)]
        steps = sorted({(v["steps_per_agent"], v["total_steps"]) for v in per_task})
        flags = [f"`{' '.join(flag_args(info['flags']))}`"] if info["flags"] else []
        flags += [f"seeds {seeds}: `{' '.join(flag_args(own))}`" for seeds, own in info.get("seed_flags", {}).items()]
        rows.append([m, info["policy"], "; ".join(flags),
                     str(per_task[0]["agents"]), ", ".join(f"{a:,}" for a, _ in steps),
                     ", ".join(f"{b:,}" for _, b in steps), ", ".join(t.name for t in suite.tasks_of(m))])
    lines += [markdown(["method", "policy", "flags", "agents", "steps per agent", "total steps", "tasks"], rows)]
    lines += ["## Final scores per task", "",
              "Mean final return over seeds [95 % CI], and the normalised mean. Reference scores: "
              + "; ".join(f"{t.name} random {t.random:g}, target {t.target:g}" for t in suite.tasks) + ".", ""]
    head = ["task"] + methods
    rows = [[t.name] + [_final_cell(r["tasks"][t.name]["methods"].get(m), digits_for(t)) for m in methods]
            for t in suite.tasks]
    lines += [markdown(head, rows)]
    lines += [f"![{t.name}]({names[t.name]})" for t in suite.tasks] + [""]
    lines += ["## At each step", "",
              f"Per seed the mean of the {k} evaluations ending at the step (a seed's agents averaged first; none made "
              "before training started: a cell that averages fewer says how many), then the mean over seeds [95 % "
              "percentile bootstrap CI] (seeds)"
              + ("; references are published curves read on the same evaluation steps"
                 if any(t.references for t in suite.tasks) else "")
              + ". Paired differences: A minus B over the seeds both ran, the project's paired bootstrap interval, "
              "the two-sided sign-flip p over seeds (exact: every labelling counted, up to 40 seeds; else marked "
              "sampled) and how many seeds A is above.", "",
              steps_table(suite, r), ""]
    lines += ["## Across tasks (rliable)", "",
              "Normalised final scores of all runs and tasks; stratified bootstrap (runs resampled within each task), "
              "`rliable.library.get_interval_estimates` with `rliable.metrics`. Optimality gap: the mean shortfall "
              "below the target (1); lower is better. A method's numbers are over the tasks it runs (the budget "
              "table's last column): compare them only between methods of the same tasks.", ""]
    rows = [[m] + [_ci(r["aggregates"][m][name], 3) for name in METRICS] for m in methods]
    lines += [markdown(["method"] + list(METRICS), rows), f"![aggregates]({names['aggregates']})", ""]
    lines += [f"### Probability of improvement over {suite.baseline}", "",
              "P(X > baseline): the chance that a run of X beats a run of the baseline on a task, averaged over tasks "
              "(`rliable.metrics.probability_of_improvement`; runs of the two resampled independently), over the "
              "tasks both run; a method that shares no task with the baseline has none.", ""]
    rows = [[m, _ci(v, 3)] for m, v in r["probability_of_improvement"].items()]
    lines += [markdown(["method X", f"P(X > {suite.baseline}) [95 % CI]"], rows),
              f"![improvement]({names['improvement']})", ""]
    lines += ["### Performance profile", "", "The fraction of runs (all tasks) whose normalised final score exceeds "
              "each threshold, with 95 % bands (`rliable.library.create_performance_profile`).", "",
              f"![performance profile]({names['profile']})", "", "### IQM against steps", "",
              f"The IQM of normalised scores, with 95 % intervals, at {efficiency_words(r)}: at each the mean of the "
              f"{k} evaluations ending there, none made before training started.", "",
              f"![IQM against steps]({names['efficiency']})", ""]
    lines += ["## Paired differences by seed", "",
              "A minus B for the same seed and task (the same task variants: a seed draws them alike in every method): "
              "the mean over pairs [95 % CI] of the project's paired bootstrap (seeds resampled within each task, "
              f"{s['bootstrap_reps']} resamples, seed {s['bootstrap_seed']}), then (pairs A won / pairs; the "
              "two-sided sign-flip p over seeds, a seed's tasks averaged: exact up to 40 seeds, else marked sampled). Per task in returns; all tasks together in "
              "normalised scores. Methods with seeds of their own are paired on the seeds they share.", ""]
    head = ["A - B"] + [t.name for t in suite.tasks] + ["all tasks (normalised)"]
    rows = []
    for p in r["paired_differences"]:
        cells = [_pair_cell(p["tasks"][t.name]["final"], digits_for(t)) if t.name in p["tasks"] else ""
                 for t in suite.tasks]
        rows.append([f"{p['a']} - {p['b']}"] + cells + [_pair_cell(p["all_tasks_normalised"], 3)])
    lines += [markdown(head, rows)]
    lines += ["## The suite", "", f"`{suite.path}`:", "", "```yaml", suite.text.rstrip(), "```", "",
              "## Commands", "", "```", *r["commands"]["report"], "```", "", "The runs (each trains all seeds):", "",
              "```", *r["commands"]["runs"], "```", "", "## Versions", "",
              ", ".join(f"{name} {v}" for name, v in r["versions"].items()) + ".", "",
              "Every number of this page, and the curves, are in [report.json](report.json).", ""]
    return "\n".join(lines)
