"""``python -m utils.compare SUITE.yaml --plan``: per claim, the power of the seeds run so far and the seeds 80 %
power needs (``verdict.plan``), from the curves as far as they go, before any compute is spent. Nothing is run or
written; no rliable, no figures: seconds."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..sweep.runs import run_state
from .claims import claim_values
from .entry import Entry
from .scores import cut_so_far, final_k, load_curves, load_reference
from .suite import Suite, SuiteError
from .verdict import ALPHA, POWER, plan, seeds_needed


def finished_seeds(entries: list[Entry]) -> list[int]:
    """The seeds whose runs every method of the suite has finished (each of that seed's files complete), sorted."""
    common: set[int] | None = None
    for e in entries:
        done = {s for s in e.run.seeds if run_state(replace(e.run, seeds=[s])) == "finished"}
        common = done if common is None else common & done
    return sorted(common or ())


def read(suite: Suite, entries: list[Entry], finished: bool, where: str | None = None
         ) -> tuple[Suite, dict, int, str]:
    """The suite's curves for the planner: at the budget when every run finished, else as far as every run has gone
    (``cut_so_far``); (suite as read, curves by (task, method), K, where they were read in words: ``where`` when
    given)."""
    where = where or "at the budget"
    if not finished:
        suite, entries = cut_so_far(suite, entries)
        where = "so far (runs under way): " + ", ".join(f"{name} at step {step:,} of {budget:,}"
                                                        for name, (step, budget) in suite.so_far.items())
    curves = {(e.task.name, e.method.name): load_curves(e, suite.budget_rule, suite.score, suite.start_steps)
              for e in entries}
    return suite, curves, final_k(suite, list(curves.values())), where


def plan_text(suite: Suite, entries: list[Entry], finished: bool, where: str | None = None) -> str:
    """The planner's answer for every claim of the suite, as printed (``where``: how its curves were chosen, when
    not all of them)."""
    if not suite.claims:
        return f"{suite.name}: the suite declares no claims (claims: in docs/compare.md); nothing to plan"
    family = len(suite.claims)
    lines = [f"{suite.name}: {family} claim(s); each planned at level {ALPHA} / {family} (Holm's strictest step), "
             f"{POWER:.0%} power; model: the paired differences A - B normal with the observed spread (sample "
             "standard deviation over seeds), power of the paired t-test (noncentral t), never fewer seeds than the "
             "sign-flip test needs to reach that level"]
    try:
        read_suite, curves, k, where = read(suite, entries, finished, where)
        lines.append(f"curves read {where}")
    except SuiteError as e:
        read_suite, curves, k = None, None, None
        lines.append(f"no spread yet ({e})")
    for c in suite.claims:
        head = (f"- {c.name}: {c.a} vs {c.b}, {c.metric_words()} on {', '.join(c.tasks)}"
                + (f", published A - B {c.published:+g}" if c.published is not None else ", no published effect")
                + (f", equivalence within ±{c.margin:g}" if c.kind == "equivalence" else ""))
        d = None
        if curves is not None:
            try:
                _, a, b = claim_values(c, read_suite, curves, k)
                d = np.asarray(a) - np.asarray(b)
            except SuiteError as e:
                head += f" ({e})"
        p = plan(c, d, family)
        lines.append(head)
        if p["sd"] is None:
            lines.append(f"    {p['words']}")
            if (prior := published_spread(suite, c, family)) is not None:
                lines.append(f"    {prior}")
            continue
        effect = "a true difference of 0" if c.kind == "equivalence" else "the published effect"
        now = p["power"]
        power_now = ", ".join(f"{now[key]:.2f} for {what}" for key, what in
                              (("published", effect), ("observed", f"the observed one ({float(np.mean(d)):+.4g})"))
                              if now[key] is not None)
        lines.append(f"    {p['seeds']} seeds, standard deviation of A - B {p['sd']:.4g}; power now: {power_now}")
        lines.append(f"    seeds for {POWER:.0%} power: {p['words']['published']} ({effect}), "
                     f"{p['words']['observed']} (the observed one); at least {p['min_seeds']} whatever the spread")
    return "\n".join(lines)


def published_spread(suite: Suite, claim, family: int) -> str | None:
    """Before any run: the seeds the published effect would need if our runs spread as the source's published curves
    do (a task's references whose prefix is A's and B's policy, final scores at the budget). Those runs are not paired,
    so the spread of a difference is sqrt(var A + var B), an upper bound for paired runs that share their luck; None
    when the claim's one task lacks either reference or the claim has no published effect."""
    if claim.published is None or len(claim.tasks) != 1 or claim.metric not in ("final", "at_step"):
        return None
    task = next(t for t in suite.tasks if t.name == claim.tasks[0])
    found = {}
    for m in (claim.a, claim.b):
        ref = next((r for r in task.references if r.prefix == suite.methods[m].policy), None)
        if ref is None:
            return None
        c = load_reference(ref, task, suite)
        k = suite.final_evaluations or 5
        values = c.final(k) if claim.metric == "final" else c.window_at(claim.value, k)
        if values is None or len(values) < 2:
            return None
        found[m] = values
    sd = float(np.sqrt(sum(np.var(v, ddof=1) for v in found.values())))
    n = seeds_needed(claim, claim.published, sd, family)
    return (f"from the published curves ({', '.join(f'{m} {len(v)} files' for m, v in found.items())}, unpaired): "
            f"standard deviation of A - B about {sd:.4g}, so about {n if n is not None else '> 1000'} seeds for "
            f"{POWER:.0%} power to detect the published effect (paired runs spread less)")
