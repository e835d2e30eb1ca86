"""Verdicts adjusted for each paper's number of claims (privleak.claims.multiplicity): the p-value
a claim's interval implies, Holm's and Benjamini-Yekutieli's adjustments by hand, and which claims
form a family."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privleak.claims import multiplicity as mu
from privleak.errors import PrivleakError


def test_an_interval_whose_bound_touches_the_null_has_p_alpha():
    # effect 1, 95 % interval [0, 2]: the standard error is 1 / z_0.975, so z = z_0.975
    assert mu.interval_p_value(1.0, 0.0, 2.0, 0.0, 0.05) == pytest.approx(0.05)
    assert mu.interval_p_value(-1.0, -2.0, 0.0, 0.0, 0.05) == pytest.approx(0.05)
    assert mu.interval_p_value(1.0, 0.0, 2.0, 0.0, 0.10) == pytest.approx(0.10)


def test_the_null_sides_half_width_sets_the_standard_error():
    z = stats.norm.ppf(0.975)
    # effect 2, [1, 5], null 0: half-width 1 on the null's side, z-score 2 z
    assert mu.interval_p_value(2.0, 1.0, 5.0, 0.0, 0.05) == pytest.approx(2 * stats.norm.sf(2 * z))
    # the same interval against a null above it: the upper half-width 3, |2 - 8| / 3 = 2
    assert mu.interval_p_value(2.0, 1.0, 5.0, 8.0, 0.05) == pytest.approx(2 * stats.norm.sf(2 * z))
    # an effect beyond its null-side bound: the midpoint 2 and half-width 0.5 stand in, 2 / 0.5 = 4
    assert mu.interval_p_value(1.0, 1.5, 2.5, 0.0, 0.05) == pytest.approx(2 * stats.norm.sf(4 * z))
    # a one-sided resampled bound [1, inf): the lower half-width 1 on the null's side
    assert mu.interval_p_value(2.0, 1.0, math.inf, 0.0, 0.05) == pytest.approx(
        2 * stats.norm.sf(2 * z)
    )
    # an effect beyond the far bound, the null between: [-1, 1], effect 3, null 2 -> midpoint 0
    assert mu.interval_p_value(3.0, -1.0, 1.0, 2.0, 0.05) == pytest.approx(2 * stats.norm.sf(2 * z))


def test_p_below_alpha_exactly_when_the_interval_excludes_the_null():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        low, high = np.sort(rng.normal(0, 1, 2))
        effect = rng.uniform(low - 1, high + 1)  # inside, or beyond either bound
        null = rng.normal(0, 1)
        excluded = low > null or high < null
        assert (mu.interval_p_value(effect, low, high, null, 0.05) < 0.05) == excluded


@pytest.mark.parametrize(
    "effect, low, high",
    [(0.3, 0.3, 0.3), (math.inf, 0.5, math.inf), (0.3, math.nan, math.nan), (0.2, 0.5, math.inf)],
)
def test_point_intervals_infinite_effects_and_no_interval_have_no_p_value(effect, low, high):
    assert math.isnan(mu.interval_p_value(effect, low, high, 0.0, 0.05))


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max
    adjusted = mu.adjusted_p_values(np.array([0.01, 0.04, 0.03, 0.005]), "holm")
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert mu.adjusted_p_values(np.array([0.4, 0.9]), "holm") == pytest.approx([0.8, 0.9])


def test_benjamini_yekutieli_by_hand():
    # BH: min over j >= i of p_(j) m / j = 0.03 for all three; BY multiplies by 1 + 1/2 + 1/3
    adjusted = mu.adjusted_p_values(np.array([0.02, 0.01, 0.03]), "fdr_by")
    assert adjusted == pytest.approx([0.03 * 11 / 6] * 3)


def test_an_unknown_adjustment_is_one_line():
    with pytest.raises(PrivleakError, match=r"adjustment 'bonferroni' is unknown; allowed: "):
        mu.adjusted_p_values(np.array([0.1]), "bonferroni")


def _frame(rows):
    columns = ["id", "effect", "ci_low", "ci_high", "null", "verdict", "adjustable"]
    return pd.DataFrame([r if len(r) == 7 else (*r, True) for r in rows], columns=columns)


def test_each_paper_is_one_family_and_guarantees_stay_outside():
    z = stats.norm.ppf(0.975)
    sd = 1 / z  # intervals effect +- 1: p = 2 sf(effect z)
    rows = [
        # s2: p 0.01, 0.03 (2 claims in the family; the guarantee is not counted)
        ("s2.a", 2.5758 * sd, 2.5758 * sd - 1, 2.5758 * sd + 1, 0.0, "reproduced"),
        ("s2.b", -2.1701 * sd, -2.1701 * sd - 1, -2.1701 * sd + 1, 0.0, "contradicted"),
        ("s2.guarantee", 0.2, 0.2, 0.2, 0.0, "reproduced", False),
        ("s2.audit", -0.5, -math.inf, -0.5, 0.0, "contradicted", False),
        # ruled inconclusive by missing training runs: its small p must not count
        ("s2.missing", 9.0, 8.0, 10.0, 0.0, "inconclusive", False),
        # s3: p 0.03 alone in its family: nothing to adjust
        ("s3.a", 2.1701 * sd, 2.1701 * sd - 1, 2.1701 * sd + 1, 0.0, "reproduced"),
    ]
    out = mu.adjusted(_frame(rows), 0.05).set_index("id")
    assert out.loc["s2.a", "p_value"] == pytest.approx(0.01, abs=1e-5)
    assert out.loc["s2.b", "p_value"] == pytest.approx(0.03, abs=1e-5)
    assert out["p_value"].loc[["s2.guarantee", "s2.audit", "s2.missing"]].isna().all()
    # Holm: 0.02 and 0.03 -> both stay decided; BH 0.02, 0.03, BY (x 1.5) 0.03, 0.045: both stay
    assert list(out.loc[["s2.a", "s2.b"], "holm"]) == ["reproduced", "contradicted"]
    assert list(out.loc[["s2.a", "s2.b"], "fdr_by"]) == ["reproduced", "contradicted"]
    assert out.loc["s2.guarantee", "holm"] == "reproduced"
    assert out.loc["s2.audit", "fdr_by"] == "contradicted"
    assert out.loc["s3.a", "holm"] == "reproduced"


def test_a_third_claim_in_the_family_undecides_the_weaker_verdict():
    z = stats.norm.ppf(0.975)
    sd = 1 / z
    rows = [
        ("s2.a", 2.5758 * sd, 2.5758 * sd - 1, 2.5758 * sd + 1, 0.0, "reproduced"),  # p 0.01
        ("s2.b", -2.1701 * sd, -2.1701 * sd - 1, -2.1701 * sd + 1, 0.0, "contradicted"),  # 0.03
        ("s2.c", 0.1 * sd, 0.1 * sd - 1, 0.1 * sd + 1, 0.0, "inconclusive"),  # p 0.92
    ]
    out = mu.adjusted(_frame(rows), 0.05).set_index("id")
    # Holm: 0.01 * 3 = 0.03 stays, 0.03 * 2 = 0.06 does not
    assert list(out["holm"]) == ["reproduced", "inconclusive", "inconclusive"]
    # BY: c(3) = 11/6; BH 0.03, 0.045, 0.92 -> 0.055, 0.0825: neither stays
    assert list(out["fdr_by"]) == ["inconclusive", "inconclusive", "inconclusive"]
    counts = mu.adjusted_counts(out.reset_index())
    assert counts["holm"]["s2"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 2}


def test_a_decided_claim_without_a_p_value_is_inconclusive_once_adjusted():
    rows = [("s3.ratio", math.inf, 2.0, math.inf, 1.0, "reproduced")]
    out = mu.adjusted(_frame(rows), 0.05)
    assert math.isnan(out.loc[0, "p_value"])
    assert (out.loc[0, "holm"], out.loc[0, "fdr_by"]) == ("inconclusive", "inconclusive")
