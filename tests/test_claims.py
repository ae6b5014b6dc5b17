"""Claims and their verdicts (docs/compare.md, "The rule"): the exact sign-flip test against a plain enumeration of
every labelling, Holm's correction against its definition, each verdict word at its boundaries, the planner's power
against simulated t-tests, each metric of a claim from curves written by hand, and bad claims (one line, exit 2,
nothing run)."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.test_compare import ROOT, call, fake_runs, hand_suite
from utils.compare import verdict
from utils.compare.suite import Claim
from utils.plot.stats import EXACT_SEEDS, PERMUTATIONS, sign_flip_test


def every_labelling(d: np.ndarray) -> np.ndarray:
    """The sums of d under all 2^n sign labellings, by a plain loop."""
    return np.array([sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1.0, -1.0), repeat=len(d))])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 9, 13, 16])
def test_the_sign_flip_test_is_exact_against_every_labelling(n):
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.4, 1.0, size=n), 2)  # rounded: ties between labellings happen and must count
    for shift in (0.0, -0.3, 0.25):
        sums, observed = every_labelling(d - shift), float((d - shift).sum())
        expected = {"two-sided": np.mean(np.abs(sums) >= abs(observed) - 1e-9),
                    "greater": np.mean(sums >= observed - 1e-9), "less": np.mean(sums <= observed + 1e-9)}
        for alternative, p in expected.items():
            t = sign_flip_test(d, alternative, shift=shift)
            assert t.exact and t.patterns == 2 ** n and t.words() == "exact"
            assert t.p == pytest.approx(p, abs=1e-12), (alternative, shift)


def test_the_smallest_p_of_5_seeds_is_0_0625_and_of_6_is_below_0_05():
    assert sign_flip_test(np.arange(1.0, 6.0)).p == pytest.approx(2 / 32)
    assert sign_flip_test(np.arange(1.0, 7.0)).p == pytest.approx(2 / 64)
    assert sign_flip_test(np.arange(1.0, 6.0), "greater").p == pytest.approx(1 / 32)


def test_the_sign_flip_test_is_exact_up_to_its_limit_and_says_sampled_past_it():
    """30 seeds: exact (the counts of a reflected labelling agree: p of d and of -d are the same); past
    EXACT_SEEDS: sampled, with the number of patterns in its words, and close to a normal approximation."""
    rng = np.random.default_rng(3)
    d = rng.normal(0.5, 1.0, size=30)
    t = sign_flip_test(d)
    assert t.exact and t.patterns == 2 ** 30 and t.p == sign_flip_test(-d).p
    # the greater and less tails of the same labellings add up to 1 plus the share of ties with the observed sum
    assert sign_flip_test(d, "greater").p + sign_flip_test(d, "less").p == pytest.approx(1.0 + 2 ** -30, abs=1e-12)
    big = rng.normal(0.2, 1.0, size=EXACT_SEEDS + 1)
    s = sign_flip_test(big)
    assert not s.exact and s.patterns == PERMUTATIONS + 1 and s.words() == f"sampled ({PERMUTATIONS + 1:,} patterns)"
    from scipy import stats
    z = big.sum() / np.sqrt((big ** 2).sum())  # the sign-flip statistic's normal approximation
    assert abs(s.p - 2 * stats.norm.sf(abs(z))) < 0.02


def test_holm_against_its_definition():
    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    order = np.argsort(p)
    expected = np.empty(len(p))
    for rank, i in enumerate(order):  # max over the smaller ones of (m - j) p_(j), capped at 1
        expected[i] = min(1.0, max((len(p) - j) * p[order[j]] for j in range(rank + 1)))
    assert verdict.holm(p) == pytest.approx(expected.tolist())
    assert verdict.holm([0.03]) == [0.03]


def claim(**change) -> Claim:
    return Claim(**{"name": "c", "statement": "A beats B", "source": "a paper", "a": "A", "b": "B",
                    "tasks": ("t",), "metric": "final", "value": None, **change})


def judged(c: Claim, d, others: int = 0) -> dict:
    """The rule on differences d (B all zeros), with ``others`` claims of p 1 beside it in the family."""
    d = np.asarray(d, dtype=np.float64)
    claims = [c] + [claim(name=f"x{i}") for i in range(others)]
    values = {c.name: (list(range(len(d))), d, np.zeros(len(d)))}
    values.update({f"x{i}": (list(range(len(d))), np.array([1.0, -1.0] * (len(d) // 2) + [0.0] * (len(d) % 2)),
                             np.zeros(len(d))) for i in range(others)})
    return verdict.judge(claims, values, reps=500, seed=0)[0]


def test_shown_needs_the_interval_and_p_below_0_05():
    up = [3.0, 2.5, 4.0, 3.2, 2.8, 3.9]
    r = judged(claim(), up)
    assert r["difference"]["ci"][0] > 0 and r["p"] == pytest.approx(2 / 64) and r["verdict"] == "shown"
    five = judged(claim(), up[:5])  # every seed above, yet p >= 0.0625: not shown, whatever the interval
    assert five["difference"]["ci"][0] > 0 and five["p"] == pytest.approx(0.0625)
    assert five["verdict"] == "not shown" and five["plan"]["min_seeds"] == 6
    assert judged(claim(direction="less"), up)["verdict"] == "contradicted"
    assert judged(claim(direction="less"), [-x for x in up])["verdict"] == "shown"
    # Holm: the same differences beside two claims of p 1: 3 x 0.03125 > 0.05
    held = judged(claim(), up, others=2)
    assert held["p_holm"] == pytest.approx(3 / 32) and held["verdict"] == "not shown"
    # contradicted is the mirror of shown: the same Holm-adjusted p
    assert judged(claim(direction="less"), up, others=2)["verdict"] == "not shown"


def test_contradicted_and_refuted_need_the_test_as_shown_does():
    down = [-2.0, -3.0, -2.5, -1.5, -2.2, -2.7]
    six = judged(claim(published=3.0), down)
    assert six["difference"]["ci"][1] < 0 and six["p_holm"] == pytest.approx(2 / 64)
    assert six["verdict"] == "contradicted" and six["published_refuted"]
    shifted = np.array(down) - 3.0  # the published size against an enumeration of every labelling
    assert six["p_published"] == pytest.approx(np.mean(np.abs(every_labelling(shifted)) >= abs(shifted.sum()) - 1e-9))
    # a published size the differences straddle: the test at it, against an enumeration
    straddled = judged(claim(published=-2.6), down)
    at = np.array(down) + 2.6
    expected = np.mean(np.abs(every_labelling(at)) >= abs(at.sum()) - 1e-9)
    assert 2 / 64 < expected < 1 and straddled["p_published"] == pytest.approx(expected)
    # 5 seeds: the interval lies wholly below 0 and far below +3, yet no p of 5 seeds is below 0.0625
    five = judged(claim(published=3.0), down[:5])
    assert five["difference"]["ci"][1] < 0 and not five["difference"]["ci"][0] <= 3.0 <= five["difference"]["ci"][1]
    assert five["p"] == pytest.approx(0.0625) and five["p_published"] == pytest.approx(0.0625)
    assert five["verdict"] == "not shown" and not five["published_refuted"]
    # the published size's test is Bonferroni-adjusted over the suite's claims: 2 x 0.03125 > 0.05
    beside = judged(claim(published=3.0), down, others=1)
    assert beside["p_published_adjusted"] == pytest.approx(2 * 2 / 64) and not beside["published_refuted"]
    mixed = judged(claim(published=0.5), [1.0, -0.5, 2.0, -1.0, 0.5, 0.3])
    assert mixed["verdict"] == "not shown" and not mixed["published_refuted"]
    small = judged(claim(published=10.0), [3.0, 2.5, 4.0, 3.2, 2.8, 3.9])  # shown, and far below the paper's size
    assert small["verdict"] == "shown" and small["published_refuted"]
    assert judged(claim(), [3.0, 2.5, 4.0])["p_published"] is None  # no published size: no test of it


def test_equivalence_is_two_one_sided_tests_inside_the_margin():
    d = [0.1, -0.2, 0.05, 0.15, -0.1, 0.0, 0.12, -0.05]
    r = judged(claim(kind="equivalence", margin=1.0), d)
    lower = np.mean(every_labelling(np.array(d) + 1.0) >= np.sum(np.array(d) + 1.0) - 1e-9)
    upper = np.mean(every_labelling(np.array(d) - 1.0) <= np.sum(np.array(d) - 1.0) + 1e-9)
    assert (r["p_lower"], r["p_upper"]) == pytest.approx((lower, upper)) and r["p"] == max(lower, upper)
    assert r["verdict"] == "equivalent"
    assert judged(claim(kind="equivalence", margin=0.05), d)["verdict"] == "not shown"  # the margin is too tight
    far = judged(claim(kind="equivalence", margin=1.0), [x + 5 for x in d])
    assert far["p_outside"] == pytest.approx(2 / 256) and far["verdict"] == "contradicted"
    below = judged(claim(kind="equivalence", margin=1.0), [x - 5 for x in d])
    assert below["p_outside"] == pytest.approx(2 / 256) and below["verdict"] == "contradicted"
    # just past the margin, some seeds inside it: twice the smaller one-sided p, each against an enumeration
    near = np.array([1.6, 2.1, 0.8, 1.9, 1.4, 2.3, 0.9, 1.7])
    r = judged(claim(kind="equivalence", margin=1.0), near)
    above = np.mean(every_labelling(near - 1.0) >= np.sum(near - 1.0) - 1e-9)
    under = np.mean(every_labelling(near + 1.0) <= np.sum(near + 1.0) + 1e-9)
    assert 1 / 256 < above < 0.05 and under == 1.0 and r["p_outside"] == pytest.approx(2 * above)
    # 4 seeds far outside: the interval is, but a one-sided p of 4 seeds is at least 1 / 16
    few = judged(claim(kind="equivalence", margin=1.0), [x + 5 for x in d[:4]])
    assert few["difference"]["ci"][0] > 1.0 and few["p_outside"] == pytest.approx(2 / 16)
    assert few["verdict"] == "not shown"


def test_the_planner_power_against_simulated_t_tests():
    """Power of the paired t-test at level 0.05 for normal differences (effect 0.8, sd 1, 12 seeds), against
    20,000 simulated experiments with scipy's t-test; the seeds needed: the first count reaching 80 %."""
    from scipy import stats

    c = claim()
    rng = np.random.default_rng(0)
    x = rng.normal(0.8, 1.0, size=(20_000, 12))
    res = stats.ttest_1samp(x, 0.0, axis=1)
    simulated = np.mean((res.pvalue < 0.05) & (res.statistic > 0))
    assert verdict.power(c, 0.8, 1.0, 12, family=1) == pytest.approx(simulated, abs=0.01)
    n = verdict.seeds_needed(c, 0.8, 1.0, family=1)
    assert verdict.power(c, 0.8, 1.0, n, 1) >= 0.8 > verdict.power(c, 0.8, 1.0, n - 1, 1)
    assert verdict.power(c, 5.0, 1.0, 5, 1) == 0.0  # below the sign-flip test's fewest seeds, no power at all
    assert verdict.seeds_needed(c, -0.8, 1.0, 1) is None  # an effect against the claim is never detected
    assert verdict.min_seeds("superiority", 1) == 6 and verdict.min_seeds("superiority", 2) == 7
    assert verdict.min_seeds("equivalence", 1) == 5


# ---- claims in a suite ---------------------------------------------------------------------------------------
def runs_for_claims(tmp_path):
    """Two methods on Pendulum-v1, 8 seeds (4 claims of p 2 / 2^8 each stay below 0.05 after Holm), 7 evaluations every 100 steps (start_steps 100): solo's seed s scores
    10 e + s at evaluation e; shared (2 agents) 20 e + s + agent index."""
    results = tmp_path / "r"
    env = "Pendulum-v1"
    fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 10.0 * e + s, seeds=range(8))
    fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 2, 7, lambda s, i, e: 20.0 * e + s + i, seeds=range(8))
    return results


def claims_suite(tmp_path, claims, **change):
    return hand_suite(tmp_path, tasks=[{"env": "Pendulum-v1", "random": -1000, "target": 0}],
                      methods={"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3"}}, seeds="0-7",
                      claims=claims, **change)


def test_each_metric_of_a_claim_from_curves_written_by_hand(tmp_path, no_processes):
    results = runs_for_claims(tmp_path)
    claims = [{"name": "final", "statement": "s", "source": "p", "a": "shared", "b": "solo", "published": 100},
              {"name": "at", "statement": "s", "source": "p", "a": "shared", "b": "solo", "metric": {"at_step": 300}},
              {"name": "auc", "statement": "s", "source": "p", "a": "shared", "b": "solo", "metric": "auc"},
              {"name": "sooner", "statement": "s", "source": "p", "a": "shared", "b": "solo",
               "metric": {"steps_to": 45}, "direction": "less"}]
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--out",
                           str(tmp_path / "o")])
    assert code == 0, out + err
    r = {c["name"]: c for c in json.loads((tmp_path / "o" / "report.json").read_text())["claims"]}
    s = np.arange(8)
    # final: the last 2 evaluations (5, 6): solo 55 + s, shared 110 + s + 0.5
    assert r["final"]["a_values"] == pytest.approx((110.5 + s).tolist())
    assert r["final"]["b_values"] == pytest.approx((55 + s).tolist())
    assert r["final"]["difference"]["estimate"] == pytest.approx(55.5) and r["final"]["verdict"] == "shown"
    assert r["final"]["published_refuted"]  # +100 is far above an interval of exactly 55.5
    # at step 300: evaluations 2 and 3: solo 25 + s, shared 50.5 + s
    assert r["at"]["difference"]["estimate"] == pytest.approx(25.5)
    # auc: trapezoids over 0..6, over 6: the mean height of a line is its middle, 30 + s and 60.5 + s
    assert r["auc"]["b_values"] == pytest.approx((30 + s).tolist())
    assert r["auc"]["a_values"] == pytest.approx((60.5 + s).tolist())
    # steps to 45, the mean of 2 evaluations ending at e: solo 10 e - 5 + s, first at e = 5 for every seed (step 500)
    assert r["sooner"]["b_values"] == [500.0] * 8
    # shared: 20 e - 9.5 + s, first at e = 3 for every seed (step 300)
    assert r["sooner"]["a_values"] == [300.0] * 8 and r["sooner"]["verdict"] == "shown"
    text = (tmp_path / "o" / "report.md").read_text()
    assert "## Claims" in text and "`final`: s (p)" in text and "**shown; published size refuted**" in text


def test_a_speed_claim_never_reached_counts_one_evaluation_past_the_budget(tmp_path, no_processes):
    results = runs_for_claims(tmp_path)
    claims = [{"name": "never", "statement": "s", "source": "p", "a": "shared", "b": "solo",
               "metric": {"steps_to": 1000}, "direction": "less"}]
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--out",
                           str(tmp_path / "o")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "o" / "report.json").read_text())["claims"][0]
    assert r["a_values"] == r["b_values"] == [700.0] * 8 and r["verdict"] == "not shown"


def test_the_planner_prints_every_claim_and_runs_nothing(tmp_path, no_processes):
    results = runs_for_claims(tmp_path)
    claims = [{"name": "final", "statement": "s", "source": "p", "a": "shared", "b": "solo", "published": 100}]
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--plan"])
    assert code == 0 and err == "", err
    assert "- final: shared vs solo, the final score on Pendulum-v1, published A - B +100" in out
    assert "8 seeds" in out and "curves read at the budget" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand.yaml", "r"]  # nothing written
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(tmp_path / "none"), "--plan"])
    assert code == 0 and "no spread yet" in out and "a pilot of 3 or more seeds" in out


def test_the_planner_reads_the_seeds_every_run_finished_while_others_go_on(tmp_path, no_processes):
    """One seed per process: seed 7 not started, seed 6 under way (a shorter curve) for one method; the planner reads
    seeds 0-5 at the budget, the same numbers as --seeds 0-5, not every seed cut to the slowest one's step."""
    results = runs_for_claims(tmp_path)
    folder = results / "shared/TD3/Pendulum-v1"
    for path in folder.glob("DASE_TD3_Pendulum-v1_7*"):
        path.unlink()
    for i in range(2):
        np.save(folder / f"DASE_TD3_Pendulum-v1_6_Agent_{i}.npy", np.zeros(4))
    claims = [{"name": "final", "statement": "s", "source": "p", "a": "shared", "b": "solo", "published": 100}]
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--plan"])
    assert code == 0 and err == "", err
    assert "curves read at the budget on the seeds every run has finished (0-5)" in out and "6 seeds" in out
    code, same, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--plan", "--seeds", "0-5"])
    assert code == 0 and same.splitlines()[2:] == out.splitlines()[2:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand.yaml", "r"]  # nothing written

GOOD = {"name": "c", "statement": "s", "source": "p", "a": "shared", "b": "solo"}
BAD_CLAIMS = [
    ({**GOOD, "kind": "equivalence"}, "claims.c: an equivalence claim needs its margin"),
    ({**GOOD, "a": "nobody"}, "claims.c.a: 'nobody' is not one of the methods (solo, shared)"),
    ({**GOOD, "metric": "steps_to"}, "claims.c.metric: steps_to needs a threshold"),
    ({**GOOD, "metric": {"steps_to": None}}, "claims.c.metric.steps_to: a speed claim needs its threshold"),
    ({**GOOD, "metric": {"at_step": 250}}, "claims.c.metric.at_step: 250 is not a multiple of eval_freq 100"),
    ({**GOOD, "metric": "best_step"}, "claims.c.metric: expected final, auc"),
    ({**GOOD, "b": "shared"}, "claims.c: a and b are both 'shared'"),
    ({**GOOD, "margin": 3}, "claims.c.margin: only an equivalence claim has a margin"),
    ({**GOOD, "direction": "up"}, "claims.c.direction: expected one of greater, less"),
    ({**GOOD, "tasks": ["Hopper-v5"]}, "claims.c.tasks: 'Hopper-v5' is not a task both shared and solo run"),
    ({k: v for k, v in GOOD.items() if k != "source"}, "claims.c: missing key(s) source"),
    ({**GOOD, "effect": 3}, "claims.c: unknown key(s) effect"),
]


@pytest.mark.parametrize("bad, message", BAD_CLAIMS, ids=[m for _, m in BAD_CLAIMS])
def test_bad_claims_exit_2_with_one_line_and_run_nothing(bad, message, tmp_path, no_processes):
    path = claims_suite(tmp_path, [bad])
    code, out, err = call([str(path), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand.yaml"]


# ---- the committed reports and README -------------------------------------------------------------------------
def committed_reports():
    from utils.compare import readme

    return readme.reports()


def test_readme_s_table_of_claims_is_written_from_the_reports():
    """README's rows are the reports' claims, word for word (python -m utils.compare.readme writes them); no row says
    a verdict outside the rule's words."""
    from utils.compare import readme
    from utils.plot.tables import between_markers

    block = between_markers((readme.ROOT / "README.md").read_text(), readme.MARKER)
    assert block == readme.table(), "README's table differs from the reports': python -m utils.compare.readme"
    rows = block.splitlines()[2:]
    assert len(rows) == sum(len(r["claims"]) for _, r in committed_reports()) > 0
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        word = cells[readme.HEAD.index("verdict")].strip("*")
        assert word.split("; ")[0] in verdict.WORDS and word.split("; ")[1:] in ([], [verdict.REFUTED])
    lowered = block.lower()
    assert "holds" not in lowered and "matches" not in lowered


def test_readme_s_p_column_gives_the_p_behind_a_refuted_mark_and_an_equivalence():
    """A row's p cell gives the test of the published size (what "published size refuted" rests on) and an
    equivalence's test beyond its margin (what "contradicted" rests on), each with its adjusted value, as report.md
    does; a claim without them gets neither."""
    from utils.compare.readme import row

    r, c = report_with_references()
    r["tasks"]["LunarLanderContinuous-v3"].update(random=-213.0, target=200.0)
    base = {**c, "statement": "s", "source": "src", "metric_words": "the final score", "kind": "superiority",
            "note": "", "p": 0.03125, "p_words": "exact", "p_holm": 0.0625, "a_mean": 150.0, "b_mean": 50.0,
            "difference": {"estimate": 100.0, "ci": [20.0, 180.0], "better": 5, "pairs": 6},
            "seeds": list(range(6)), "verdict": "not shown", "published_refuted": False,
            "plan": {"words": "7"}, "p_outside": None, "p_published": 0.09375, "p_published_adjusted": 0.1875}
    cell = row("x", r, base)[5]
    assert cell == "0.0312 exact (0.0625); at the published size 0.0938 (0.188)", cell
    cell = row("x", r, {**base, "published": None, "p_published": None})[5]
    assert cell == "0.0312 exact (0.0625)", cell
    cell = row("x", r, {**base, "published": None, "p_published": None, "kind": "equivalence", "margin": 10.0,
                        "p_outside": 0.5, "p_outside_adjusted": 1.0})[5]
    assert cell == "0.0312 exact (0.0625); beyond the margin 0.5 (1)", cell


def report_with_references(**claim_change) -> tuple[dict, dict]:
    """A report of one task whose references are a paper's "TD3" and "DASE_TD3" files (their final scores 6.0 and
    205.0; 100.0 at 100k), and a claim of it."""
    ref = lambda prefix, final, early: {"prefix": prefix, "at_steps": {"100k": {"mean": early},  # noqa: E731
                                                                       "300k": {"mean": final}}}
    r = {"methods": {"solo": {"policy": "TD3"}, "shared": {"policy": "DASE_TD3"}},
         "tasks": {"LunarLanderContinuous-v3": {"references": {"paper_TD3": ref("TD3", 6.0, -50.0),
                                                                "paper_DASE_TD3": ref("DASE_TD3", 205.0, 100.0)}}}}
    c = {"a": "shared", "b": "solo", "tasks": ["LunarLanderContinuous-v3"], "unit": "returns", "metric": "final",
         "value": None, "published": 199.0, **claim_change}
    return r, c


def test_readme_s_published_column_names_the_published_a_and_b_from_the_references():
    from utils.compare.readme import published_means

    r, c = report_with_references()
    assert published_means(c, r) == (205.0, 6.0)
    assert published_means({**c, "metric": "at_step", "value": 100_000}, r) == (100.0, -50.0)
    assert published_means({**c, "metric": "at_step", "value": 200_000}, r) is None  # no such column
    assert published_means({**c, "a": "solo", "b": "shared"}, r) == (6.0, 205.0)
    for change in ({"published": None}, {"unit": "normalised scores"}, {"metric": "auc"},
                   {"tasks": ["LunarLanderContinuous-v3", "HalfCheetah-v5"]}):
        assert published_means({**c, **change}, r) is None, change
    del r["tasks"]["LunarLanderContinuous-v3"]["references"]["paper_TD3"]
    assert published_means(c, r) is None


def test_every_published_effect_is_the_published_curves_difference():
    """A claim's declared published A - B (typed into its suite) equals the difference of the published curves' A and
    B as its report read them, to the last decimal it is written with (both terms were rounded to it)."""
    from utils.compare.readme import published_means

    checked = 0
    for folder, r in committed_reports():
        for c in r["claims"]:
            if (pair := published_means(c, r)) is None:
                continue
            decimals = len(repr(float(c["published"])).split(".")[1])
            assert abs(c["published"] - (pair[0] - pair[1])) <= 10.0 ** -decimals, (folder, c["name"], pair)
            checked += 1
    assert checked >= 3


def test_every_run_a_committed_claim_reads_is_finished_at_its_budget():
    """Nothing half-finished speaks for a claim: each seed's record of every run a committed report reads says the run
    finished, at the budget (its curves' length is load_curves' check). The only exception: records written before
    records said so (97a527e, 2026-11-23 05:01), which carry no finished_at_step."""
    from utils.compare.plan import plan_suite
    from utils.compare.suite import load_suite

    checked = 0
    for folder, r in committed_reports():
        entries, _, _ = plan_suite(load_suite(ROOT / r["suite"]["file"]))
        for e in entries:
            for stem in e.run.stems():
                record = json.loads((e.run.folder(ROOT) / f"{stem}.json").read_text())
                if "finished_at_step" not in record and record["started"] < "2026-11-23T05:01":
                    continue
                assert record["finished"] and record["finished_at_step"] == e.run.steps, (folder, stem)
                checked += 1
    assert checked > 100


def test_every_shown_claim_has_its_interval_off_zero_and_p_below_0_05():
    for folder, r in committed_reports():
        for c in r["claims"]:
            lo, hi = c["difference"]["ci"]
            if c["verdict"] == "shown":
                assert (lo > 0 if c["direction"] == "greater" else hi < 0) and c["p_holm"] < 0.05, (folder, c["name"])
            if c["verdict"] == "equivalent":
                assert c["kind"] == "equivalence" and c["p_holm"] < 0.05, (folder, c["name"])
            assert c["p_words"] == "exact" or c["p_words"].startswith("sampled"), (folder, c["name"])
            assert c["plan"] is not None


def test_the_committed_reports_claims_recompute_from_their_curves():
    """Each committed report's claims, judged again from the committed curves with the suite file as it is: the same
    values, intervals, p and words (a suite edited without rewriting its report fails here)."""
    from utils.compare.claims import judged
    from utils.compare.plan import plan_suite
    from utils.compare.report import per_task
    from utils.compare.suite import load_suite

    for folder, r in committed_reports():
        suite = load_suite(ROOT / r["suite"]["file"]) if not Path(r["suite"]["file"]).is_absolute() else \
            load_suite(r["suite"]["file"])
        entries, _, _ = plan_suite(suite)
        report, curves, _, _ = per_task(suite, entries)
        again = judged(suite, curves, report["suite"]["final_evaluations"])
        assert json.loads(json.dumps(again)) == r["claims"], folder


REPEATED = {"a method": ("methods:\n  TD3: {policy: TD3}\n  DASE_TD3: {policy: DASE_TD3}\n  DASE_TD3: {policy: DPD_TD3}\n"
                         "baseline: TD3\n", "key 'DASE_TD3' is repeated"),
            "the baseline": ("methods:\n  TD3: {policy: TD3}\n  DASE_TD3: {policy: DASE_TD3}\nbaseline: TD3\n"
                             "baseline: DASE_TD3\n", "key 'baseline' is repeated")}


@pytest.mark.parametrize("what", sorted(REPEATED))
def test_a_suite_that_repeats_a_key_exits_2_and_runs_nothing(what, tmp_path, no_processes):
    """YAML's safe loader keeps the last of two equal keys without a word: a second method would replace the first
    and the report would call one method by another's name."""
    body, message = REPEATED[what]
    path = tmp_path / "repeated.yaml"
    path.write_text("tasks: [{env: Pendulum-v1, random: -1200, target: -150}]\n" + body
                    + "seeds: 0\nbudget: 1000\nstart_steps: 100\n")
    code, out, err = call([str(path), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repeated.yaml"]


def test_an_experiment_file_that_repeats_a_key_is_refused(tmp_path):
    from utils import sweep

    path = tmp_path / "exp.yaml"
    path.write_text("envs: [Pendulum-v1]\npolicies: [TD3]\nseeds: 0\nsteps: 1000\nsteps: 2000\n")
    with pytest.raises(sweep.ExperimentError, match="key 'steps' is repeated"):
        sweep.load_experiment(path)


def test_a_speed_claim_never_counts_an_evaluation_made_before_training(tmp_path, no_processes):
    """Evaluations at steps 0 and 100 (start_steps 100) score 1e6: were they read, every seed would reach the
    threshold at once; read from step 200 on, solo reaches it at 500 and shared at 300 as by hand above."""
    results = tmp_path / "r"
    env = "Pendulum-v1"
    early = lambda f: (lambda s, i, e: 1e6 if e < 2 else f(s, i, e))  # noqa: E731
    fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, early(lambda s, i, e: 10.0 * e + s), seeds=range(8))
    fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 2, 7, early(lambda s, i, e: 20.0 * e + s + i),
              seeds=range(8))
    claims = [{"name": "sooner", "statement": "s", "source": "p", "a": "shared", "b": "solo",
               "metric": {"steps_to": 45}, "direction": "less"}]
    code, out, err = call([str(claims_suite(tmp_path, claims)), "--results", str(results), "--out",
                           str(tmp_path / "o")])
    assert code == 0, out + err
    r = json.loads((tmp_path / "o" / "report.json").read_text())["claims"][0]
    assert r["b_values"] == [500.0] * 8 and r["a_values"] == [300.0] * 8


def test_the_planner_reads_the_published_curves_spread_before_any_run(tmp_path):
    """Hopper's suite before its runs: the published DASE_TD3 and TD3 files' final scores (the mean of the 5
    evaluations ending at 300k, a seed's agents averaged) give the spread of an unpaired difference, computed here
    from the files with NumPy alone, and the seeds the published effect needs at that spread. The suite's methods
    read their runs from an empty folder here: the committed runs are the planner's other case."""
    import re

    import yaml

    folder = ROOT / "Learning Curves/paper/Unlimited_Buffer/TD3/Hopper-v2"
    finals = {}
    for prefix in ("DASE_TD3", "TD3"):
        seeds = {}
        for path in folder.glob(f"{prefix}_Hopper-v2_*.npy"):
            m = re.fullmatch(rf"{prefix}_Hopper-v2_(\d+)(?:_Agent_\d+)?\.npy", path.name)
            if m:
                seeds.setdefault(int(m[1]), []).append(np.load(path)[296:301].mean())
        finals[prefix] = np.array([np.mean(v) for v in seeds.values()])
    sd = np.sqrt(finals["DASE_TD3"].var(ddof=1) + finals["TD3"].var(ddof=1))
    spec = yaml.safe_load((ROOT / "experiments/paper_mujoco_hopper.yaml").read_text())
    for method in spec["methods"].values():
        method["results_dir"] = str(tmp_path / "runs")
    for reference in spec["tasks"][0]["references"].values():
        reference["folder"] = str(ROOT / reference["folder"])
    (tmp_path / "hopper.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, err = call([str(tmp_path / "hopper.yaml"), "--plan"])
    assert code == 0, err
    line = next(x for x in out.splitlines() if "from the published curves" in x)
    assert f"about {sd:.4g}," in line
    n = verdict.seeds_needed(claim(published=744.8), 744.8, float(f"{sd:.4g}"), 1)
    assert f"about {n} seeds" in line


def test_a_claim_on_methods_without_a_common_seed_is_one_line(tmp_path, no_processes):
    results = tmp_path / "r"
    env = "Pendulum-v1"
    fake_runs(results / "solo/TD3" / env, "TD3", env, 1, 7, lambda s, i, e: 1.0 * e, seeds=range(3))
    fake_runs(results / "shared/TD3" / env, "DASE_TD3", env, 2, 7, lambda s, i, e: 2.0 * e, seeds=range(3, 6))
    path = hand_suite(tmp_path, tasks=[{"env": env, "random": -1000, "target": 0}], seeds="0-5",
                      methods={"solo": {"policy": "TD3", "seeds": "0-2"}, "shared": {"policy": "DASE_TD3", "seeds": "3-5"}},
                      claims=[{"name": "c", "statement": "s", "source": "p", "a": "shared", "b": "solo"}])
    code, out, err = call([str(path), "--results", str(results), "--out", str(tmp_path / "o")])
    assert code == 1 and "claims.c: shared and solo ran no seed in common" in err and err.count("\n") == 1, err
    assert not (tmp_path / "o" / "report.md").exists()
