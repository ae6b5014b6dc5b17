"""How the report and README's table of claims print numbers and verdicts: decimals per task and unit, the verdict
as the rule says it, p as found, and the planner's seeds."""
from __future__ import annotations

import math
from types import SimpleNamespace


def digits_for(task) -> int:
    """Decimals of a task's returns in the tables: one for returns of tens and more (CartPole, LunarLander), more for
    a task whose random-to-target range is small (Level-Based Foraging's 0.055 to 0.5: three)."""
    scale = abs(task.target - task.random)
    return max(1, 2 - math.floor(math.log10(scale))) if scale > 0 else 1


def steps_label(step: int) -> str:
    """A step as the report's columns name it: 300k, 1M, 1.5M, 500."""
    return f"{step / 1e6:g}M" if step >= 1_000_000 and step % 100_000 == 0 else \
        f"{step / 1000:g}k" if step >= 1000 else str(step)


def claim_digits(c: dict, r: dict) -> int:
    """Decimals of a claim's numbers: its task's for returns, 3 for normalised scores and fractions, 0 for steps."""
    if c["unit"] == "steps":
        return 0
    if c["unit"] == "returns":
        t = r["tasks"][c["tasks"][0]]
        return digits_for(SimpleNamespace(random=t["random"], target=t["target"]))
    return 3


def verdict_words(c: dict) -> str:
    """The verdict as the rule says it: its word, and "published size refuted" beside it when the interval excludes
    the published effect and the test of it rejects it."""
    return c["verdict"] + ("; published size refuted" if c["published_refuted"] else "")


def p_words(c: dict) -> str:
    """p as found (exact, or sampled with its number of patterns) and Holm-adjusted over the suite's claims; an
    equivalence's test against it and the test of the published size, each with its Bonferroni-adjusted p."""
    out = f"{c['p']:.4g} ({c['p_words']}); Holm {c['p_holm']:.4g}"
    return out + "".join(f"; {what} {p:.4g} (adjusted {adjusted:.4g})" for what, p, adjusted in side_tests(c))


def side_tests(c: dict) -> list[tuple[str, float, float]]:
    """The claim's tests beside its main p, each with its Bonferroni-adjusted value: an equivalence's test beyond its
    margin (what "contradicted" rests on) and the test at the published size (what "published size refuted" rests on),
    those the claim has."""
    return [(what, c[key], c[f"{key}_adjusted"]) for what, key in (("beyond the margin", "p_outside"),
                                                                   ("at the published size", "p_published"))
            if c.get(key) is not None]


def plan_words(c: dict) -> str:
    """The planner's seeds for 80 % power, for the published effect and the observed one."""
    w = c["plan"].get("words")
    if not isinstance(w, dict):
        return c["plan"]["words"]
    what = "a true difference of 0" if c["kind"] == "equivalence" else "the published effect"
    observed = f"{w['observed']} for the observed one"
    return observed if w["published"] == "—" else f"{w['published']} for {what}, {observed}"
