"""privleak.claims.verdicts and tables: verdict edges (docs/design.md §8), judged claims with
their procedure's p-value, power and borderline marks, the claim files."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from privleak import claims as cl
from privleak.claims.procedures import CROSSED_T, WELCH, Test
from privleak.claims.spec import Primary
from privleak.claims.tables import judged_frame
from privleak.errors import PrivleakError

NAN = float("nan")


# ---------------------------------------------------------------- verdict


@pytest.mark.parametrize(
    "low, high, direction, null, expected",
    [
        (0.1, 0.5, "+", 0.0, cl.REPRODUCED),
        (-0.5, -0.1, "+", 0.0, cl.CONTRADICTED),
        (-0.1, 0.5, "+", 0.0, cl.INCONCLUSIVE),
        (0.0, 0.5, "+", 0.0, cl.INCONCLUSIVE),  # touching the null is not excluding it
        (-0.5, 0.0, "+", 0.0, cl.INCONCLUSIVE),
        (-0.5, -0.1, "-", 0.0, cl.REPRODUCED),
        (0.1, 0.5, "-", 0.0, cl.CONTRADICTED),
        (-0.5, 0.0, "-", 0.0, cl.INCONCLUSIVE),
        (0.0, 0.5, "-", 0.0, cl.INCONCLUSIVE),
        (1.01, 1.3, "+", 1.0, cl.REPRODUCED),  # a ratio against 1
        (0.6, 1.0, "+", 1.0, cl.INCONCLUSIVE),
        (0.2, 0.45, "-", 0.5, cl.REPRODUCED),  # a share below one half
        (0.55, 0.9, "-", 0.5, cl.CONTRADICTED),
        (NAN, NAN, "+", 0.0, cl.INCONCLUSIVE),
        (0.1, NAN, "+", 0.0, cl.INCONCLUSIVE),
    ],
)
def test_verdict_excludes_the_null_on_the_papers_side(low, high, direction, null, expected):
    assert cl.verdict(low, high, direction, null) == expected


def test_verdict_rejects_an_unknown_direction():
    with pytest.raises(PrivleakError, match="direction must be one of"):
        cl.verdict(0.1, 0.2, "up")


# ---------------------------------------------------------------- claims and files


def claim(claim_id, low, high, **fields):
    estimate = cl.Estimate(fields.pop("effect", (low + high) / 2), low, high, 8)
    base = {"paper": "S0", "quote": "q | pipe", "where": "§1", "effect_name": "e",
            "direction": "+", "unit": "contexts"}  # fmt: skip
    return cl.judge(claim_id, estimate=estimate, **(base | fields))


def test_missing_data_forces_inconclusive_and_says_what_the_interval_reads():
    judged = claim("a", 0.1, 0.3, missing="training seeds", note="a proxy")
    assert judged.verdict == cl.INCONCLUSIVE
    assert not judged.adjustable and claim("b", 0.1, 0.3).adjustable  # outside multiplicity
    assert judged.note == "a proxy; needs training seeds; the interval alone reads reproduced"
    assert judged.units == "8 contexts"
    assert claim("b", 0.1, 0.3).verdict == cl.REPRODUCED


def t_claim(claim_id, effect, se, n=8, **fields):
    test = Test(WELCH, effect, se=se, df=n - 1)  # a t-type procedure the coverage rule keeps
    low, high = test.interval(0.05)
    estimate = cl.Estimate(effect, low, high, n, test=test)
    base = {"paper": "S0", "quote": "q | pipe", "where": "§1", "effect_name": "e",
            "direction": "+", "unit": "contexts"}  # fmt: skip
    return cl.judge(claim_id, estimate=estimate, **(base | fields))


def test_a_claims_p_value_comes_from_its_procedure_and_matches_its_interval():
    judged = t_claim("s0.a", 0.3, 0.1)
    assert judged.method == WELCH
    assert judged.p_value == pytest.approx(2 * stats.t.sf(3.0, 7))
    assert judged.verdict == cl.REPRODUCED and judged.p_value < 0.05
    assert math.isnan(t_claim("s0.b", 0.3, 0.1, missing="runs").p_value)  # not its test


def test_an_undecided_claim_says_how_many_units_would_decide_it_at_80_percent_power():
    found = [t_claim("s0.a", 0.1, 0.1), t_claim("s0.b", 0.4, 0.1), t_claim("s0.c", 0.0, 0.1)]
    frame = judged_frame(found, 0.05).set_index("id")
    # a secondary family of 3 claims (BY): level 0.05 / (3 x 11/6) = 0.00909;
    # 8 ((2.609 + 0.8416) 0.1 / 0.1)^2 = 95.3
    assert frame.loc["s0.a", "note"] == (
        "about 96 contexts would decide it at 80 % power at its family's level 0.0091 (the "
        "standard error shrinking as 1/sqrt(n); 8 now)"
    )
    assert "would decide" not in frame.loc["s0.b", "note"]  # decided
    assert frame.loc["s0.c", "note"].startswith("no effect observed")


def test_a_bootstrap_verdict_within_three_monte_carlo_errors_of_the_null_is_borderline():
    # a crossed bootstrap-SE t (over 21 runs here), a procedure the coverage rule keeps at 21
    test = Test(CROSSED_T, 0.2, se=0.1, df=20, resamples=200)
    low, high = test.interval(0.05)  # low = 0.2 - 2.086 * 0.1 < 0: move the effect up a hair
    near = Test(CROSSED_T, 0.2 - low + 1e-3, se=0.1, df=20, resamples=200)
    estimate = cl.Estimate(near.effect, *near.interval(0.05), 21, test=near)
    judged = cl.judge("s0.x", paper="S0", quote="q", where="w", effect_name="e", direction="+",
                      estimate=estimate, unit="contexts")  # fmt: skip
    # its lower end 1e-3 above 0; the endpoint's Monte-Carlo error 0.2086 / sqrt(398) = 0.0105
    assert judged.verdict == cl.REPRODUCED and judged.borderline
    assert "borderline" in judged.note
    assert not cl.judge(
        "s0.y",
        paper="S0",
        quote="q",
        where="w",
        effect_name="e",
        direction="+",
        estimate=cl.Estimate(0.5, 0.3, 0.7, 21),
        unit="contexts",
    ).borderline


def test_claim_files_are_sorted_rounded_and_deterministic():
    found = [
        claim("s1.b", -0.3, -0.1),
        claim("s0.a", 0.123456789, 0.3),
        claim("s0.c", NAN, NAN, effect=2.0),
    ]
    frame = cl.claims_frame(found)
    assert list(frame["id"]) == ["s0.a", "s0.c", "s1.b"]
    assert frame.loc[0, "ci_low"] == 0.123457
    body = json.loads(cl.metrics_json(found, 0.05))
    assert body["counts"] == {"reproduced": 1, "contradicted": 1, "inconclusive": 1}
    assert body["total"] == 3
    assert body["claims"]["s0.c"] == {
        "effect": 2.0, "ci": [None, None], "method": "none", "p_value": None,
        "role": "secondary", "family": "s0 secondary", "verdict": "inconclusive",
        "adjusted": "inconclusive", "units_to_decide": None, "also": "",
        "stable": "",
    }  # fmt: skip
    # decided without a procedure's p-value: inconclusive once adjusted
    assert body["adjusted"]["s1 secondary"] == {
        "reproduced": 0, "contradicted": 0, "inconclusive": 1
    }  # fmt: skip
    assert body["primary"]["s1"] == {"reproduced": 0, "contradicted": 0, "inconclusive": 0}
    assert cl.metrics_json(found, 0.05) == cl.metrics_json(list(reversed(found)), 0.05)
    page = cl.markdown(found, alpha=0.05)
    assert "3 claims: 1 reproduced, 1 contradicted, 1 inconclusive; and 0 checks" in page
    row = ("| s0.c | secondary | §1 | “q \\| pipe” | + 0 | 2 [n/a, n/a] | none | n/a | "
           "**inconclusive** | inconclusive |  |  |")  # fmt: skip
    assert row in page
    assert "| s1 secondary | Benjamini-Yekutieli | 1 | 0 / 1 / 0 | 0 / 0 / 1 |" in page
    assert page == cl.markdown(list(reversed(found)), alpha=0.05)
    with pytest.raises(PrivleakError, match="claim ids must be unique"):
        cl.claims_frame(found + [claim("s0.a", 0.1, 0.2)])


def test_primary_claims_lead_the_page_and_checks_stand_apart():
    found = [
        t_claim("s2.a", 0.3, 0.1, role="primary",
                primary=Primary("PAD substantially reduces leakage", "Abstract")),
        t_claim("s2.b", 0.3, 0.1, role="check"),
    ]  # fmt: skip
    body = json.loads(cl.metrics_json(found, 0.05))
    assert body["primary"]["s2"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 0}
    assert body["checks"] == {"pass": 1, "fail": 0, "undecided": 0}
    assert body["total"] == 1 and body["counts"]["reproduced"] == 1  # the check is not a claim
    page = cl.markdown(found, alpha=0.05)
    assert page.index("## Primary claims") < page.index("## Every family")
    assert "| s2 | 1 | 1 | 0 | 0 |" in page
    assert "| s2.a | “PAD substantially reduces leakage” | Abstract |" in page
    assert "| s2.b | e (+ 0) | 0.3 [" in page and "| **pass** |" in page
