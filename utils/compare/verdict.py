"""The rule every claim's verdict word comes from (docs/compare.md, "The rule"), and the seed planner beside it.

A claim's inputs are its paired differences A - B, one per seed (``claims.claim_values``). The rule, at ALPHA over
all the claims of one suite (Holm's step-down correction):

- **shown**: the paired 95 % percentile bootstrap interval excludes 0 on the claimed side and the exact two-sided
  sign-flip p, Holm-adjusted, is below ALPHA (superiority claims);
- **equivalent**: both one-sided sign-flip tests against the declared margin (TOST: the mean difference above -margin,
  and below +margin), the larger of their p Holm-adjusted, below ALPHA (equivalence claims);
- **contradicted**: the mirror of shown, as strict: the interval lies wholly on the other side of 0 and the same
  Holm-adjusted p is below ALPHA (superiority); or the interval lies wholly outside the margin and the test of a mean
  beyond the margin (twice the smaller of the two one-sided sign-flip p, above +margin and below -margin),
  Bonferroni-adjusted (Holm's strictest step), is below ALPHA (equivalence);
- **not shown**: anything else, with the seeds the planner says the claim needs;
- and, beside any of these, **published size refuted** when the interval excludes the source's effect size and the
  two-sided sign-flip test of a mean difference equal to it, Bonferroni-adjusted over the suite's claims, is below
  ALPHA. These marks are a second family, at ALPHA of their own.

A percentile interval is too narrow on few seeds, so no word that rejects a hypothesis rests on it alone: with 5
seeds no two-sided sign-flip p falls below 0.0625, so no superiority claim of 5 seeds is shown or contradicted and no
published size is refuted (a one-sided p of 5 seeds can reach 1 / 32: an equivalence alone in its suite can be
decided on 5).
"""
from __future__ import annotations

import math

import numpy as np

from ..plot.stats import paired_difference, sign_flip_test

ALPHA = 0.05  # the family-wise error rate of one suite's verdict words (and, apart, of its refuted marks)
POWER = 0.8  # the planner's goal
MAX_SEEDS = 1000  # the planner looks no further: "more than MAX_SEEDS"
SHOWN, EQUIVALENT, CONTRADICTED, NOT_SHOWN = "shown", "equivalent", "contradicted", "not shown"
REFUTED = "published size refuted"
WORDS = (SHOWN, EQUIVALENT, CONTRADICTED, NOT_SHOWN)


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control over all of them): the i-th smallest p times
    (m - i + 1), made non-decreasing along that order, at most 1."""
    order = np.argsort(p, kind="stable")
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def tests(claim, d: np.ndarray, seed: int) -> dict:
    """The claim's sign-flip test(s) on its paired differences ``d``: superiority the two-sided test of a zero mean;
    equivalence the two one-sided tests against -margin and +margin, p the larger."""
    if claim.kind == "equivalence":
        lower = sign_flip_test(d, "greater", shift=-claim.margin, seed=seed)
        upper = sign_flip_test(d, "less", shift=claim.margin, seed=seed)
        worst = lower if lower.p >= upper.p else upper
        return {"test": "two one-sided sign-flip tests against -margin and +margin (TOST)", "p": worst.p,
                "p_lower": lower.p, "p_upper": upper.p, "exact": lower.exact and upper.exact,
                "p_words": worst.words()}
    t = sign_flip_test(d, "two-sided", seed=seed)
    return {"test": "two-sided sign-flip test of a zero mean difference", "p": t.p, "exact": t.exact,
            "p_words": t.words()}


def bonferroni(p: float, family: int) -> float:
    """``p`` times the number of the suite's claims, at most 1 (Holm's strictest step)."""
    return min(1.0, p * family)


def outside_test(claim, d: np.ndarray, seed: int) -> float:
    """An equivalence claim's test against it, of a mean difference beyond the margin: twice the smaller of the
    one-sided sign-flip p above +margin and below -margin, at most 1 (the side is not chosen from the data)."""
    above = sign_flip_test(d, "greater", shift=claim.margin, seed=seed).p
    below = sign_flip_test(d, "less", shift=-claim.margin, seed=seed).p
    return min(1.0, 2 * min(above, below))


def word(claim, ci: list[float], p_holm: float, p_outside: float | None = None) -> str:
    """The verdict word of the rule (the module's docstring) from the interval, the Holm-adjusted p and, for an
    equivalence, the adjusted p of its test against (``outside_test``)."""
    lo, hi = ci
    if claim.kind == "equivalence":
        if p_holm < ALPHA:
            return EQUIVALENT
        if (lo >= claim.margin or hi <= -claim.margin) and p_outside is not None and p_outside < ALPHA:
            return CONTRADICTED
        return NOT_SHOWN
    claimed_side = lo > 0 if claim.direction == "greater" else hi < 0
    other_side = hi < 0 if claim.direction == "greater" else lo > 0
    if claimed_side and p_holm < ALPHA:
        return SHOWN
    if other_side and p_holm < ALPHA:
        return CONTRADICTED
    return NOT_SHOWN


def judge(claims: list, values: dict[str, tuple[list[int], np.ndarray, np.ndarray]], reps: int, seed: int) -> list[dict]:
    """Every claim of one suite judged by the rule: ``values`` maps a claim's name to (seeds, A's values, B's values)
    in the metric's unit. Per claim: the means, the paired difference with its interval, the test(s) with p and
    whether it is exact, the Holm-adjusted p over the suite's claims (an equivalence: also its test against, p_outside),
    the word, the test of the published size (p_published, Bonferroni-adjusted) and whether it is refuted, and the
    planner's answer."""
    out = []
    for c in claims:
        seeds, a, b = values[c.name]
        d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        diff = paired_difference(a[:, None], b[:, None], reps, seed)
        out.append({"name": c.name, "seeds": list(seeds), "a_mean": float(np.mean(a)), "b_mean": float(np.mean(b)),
                    "a_values": [float(x) for x in a], "b_values": [float(x) for x in b],
                    "difference": {"estimate": diff["estimate"], "ci": diff["ci"], "better": diff["better"],
                                   "worse": diff["worse"], "pairs": diff["pairs"]},
                    **tests(c, d, seed)})
    for c, row, p_holm in zip(claims, out, holm([r["p"] for r in out])):
        ci = row["difference"]["ci"]
        d = np.array(row["a_values"]) - np.array(row["b_values"])
        row["p_holm"] = p_holm
        if c.kind == "equivalence":
            row["p_outside"] = outside_test(c, d, seed)
            row["p_outside_adjusted"] = bonferroni(row["p_outside"], len(claims))
        row["verdict"] = word(c, ci, p_holm, row.get("p_outside_adjusted"))
        row["p_published"] = None if c.published is None else \
            sign_flip_test(d, "two-sided", shift=c.published, seed=seed).p
        row["p_published_adjusted"] = None if c.published is None else bonferroni(row["p_published"], len(claims))
        row["published_refuted"] = c.published is not None and not ci[0] <= c.published <= ci[1] and \
            row["p_published_adjusted"] < ALPHA
        row["plan"] = plan(c, d, len(claims))
    return out


def min_seeds(kind: str, family: int) -> int:
    """The fewest seeds whose smallest sign-flip p can fall below ALPHA / family (two-sided 2 / 2^n; each one-sided
    test of an equivalence 1 / 2^n): e.g. 6 for one superiority claim (5 seeds: p >= 0.0625)."""
    smallest = 1 if kind == "equivalence" else 2
    return max(2, math.floor(math.log2(smallest * family / ALPHA)) + 1)


def power(claim, effect: float, sd: float, n: int, family: int) -> float:
    """The chance that ``n`` seeds show the claim at level ALPHA / family (Holm's strictest step) when the paired
    differences are normal with mean ``effect`` and standard deviation ``sd``: the two-sided paired t-test's power
    (noncentral t) for superiority in the claimed direction, the two one-sided tests' for equivalence; 0 below the
    sign-flip test's fewest seeds (``min_seeds``)."""
    from scipy import stats

    if n < min_seeds(claim.kind, family):
        return 0.0
    alpha, df = ALPHA / family, n - 1
    if sd <= 0:  # every seed the same difference
        if claim.kind == "equivalence":
            return float(abs(effect) < claim.margin)
        return float(effect > 0 if claim.direction == "greater" else effect < 0)
    if claim.kind == "equivalence":
        t = stats.t.ppf(1 - alpha, df)
        upper = stats.nct.cdf(-t, df, (effect - claim.margin) * math.sqrt(n) / sd)
        lower = stats.nct.sf(t, df, (effect + claim.margin) * math.sqrt(n) / sd)
        return float(max(0.0, lower + upper - 1))
    t = stats.t.ppf(1 - alpha / 2, df)
    nc = effect * math.sqrt(n) / sd * (1 if claim.direction == "greater" else -1)
    return float(stats.nct.sf(t, df, nc))


def seeds_needed(claim, effect: float | None, sd: float, family: int) -> int | None:
    """The fewest seeds with ``power`` at least POWER (None: none up to MAX_SEEDS, or no effect to detect)."""
    if effect is None or (claim.kind == "superiority" and (effect > 0) != (claim.direction == "greater")):
        return None
    n = min_seeds(claim.kind, family)
    if power(claim, effect, sd, MAX_SEEDS, family) < POWER:
        return None
    hi = MAX_SEEDS
    while n < hi:  # power grows with n: bisect
        mid = (n + hi) // 2
        if power(claim, effect, sd, mid, family) >= POWER:
            hi = mid
        else:
            n = mid + 1
    return n


def plan(claim, d: np.ndarray | None, family: int) -> dict:
    """The seed planner for one claim: from the observed paired differences ``d`` (their standard deviation is the
    model's spread), the power of the seeds run so far and the seeds needed for POWER, to detect the published effect
    and the observed one (an equivalence: the observed difference, and a true difference of 0). No runs yet (``d``
    None, or fewer than 2 seeds): what a pilot must measure."""
    fewest = min_seeds(claim.kind, family)
    if d is None or len(d) < 2:
        return {"seeds": 0 if d is None else len(d), "min_seeds": fewest, "sd": None, "power": None,
                "needed_published": None, "needed_observed": None,
                "words": f"no spread yet: a pilot of 3 or more seeds measures it (this claim needs at least {fewest} "
                         "seeds whatever the spread)"}
    d = np.asarray(d, dtype=np.float64)
    sd, observed = float(d.std(ddof=1)), float(d.mean())
    targets = {"published": claim.published, "observed": observed}
    if claim.kind == "equivalence":
        targets = {"published": 0.0, "observed": observed}
    needed = {k: seeds_needed(claim, v, sd, family) for k, v in targets.items()}
    now = {k: (power(claim, v, sd, len(d), family) if v is not None else None) for k, v in targets.items()}
    return {"seeds": len(d), "min_seeds": fewest, "sd": sd, "power": now,
            "needed_published": needed["published"], "needed_observed": needed["observed"],
            "words": {k: needed_words(claim, needed[k], v) for k, v in targets.items()}}


def needed_words(claim, n: int | None, effect: float | None) -> str:
    """The planner's answer in words: a number of seeds, "> MAX_SEEDS", "never" (an effect on the other side of the
    claim), or "—" (no effect given)."""
    if effect is None:
        return "—"
    if claim.kind == "superiority" and (effect > 0) != (claim.direction == "greater"):
        return "never (the effect is on the other side)"
    return f"> {MAX_SEEDS}" if n is None else str(n)
