"""Verdicts adjusted in their families (privleak.claims.multiplicity): Holm's and
Benjamini-Yekutieli's adjustments by hand, which claims form a family (each paper's primary claims
under Holm, the rest under BY, checks outside), and the units that would decide a claim at 80 %
power."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privleak.claims import multiplicity as mu
from privleak.claims.spec import FRONTIER, MIA, S2, S3
from privleak.errors import PrivleakError


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


COLUMNS = ["id", "paper", "role", "effect", "se", "n", "null", "verdict", "adjustable", "p_value"]


def _frame(rows):
    """Rows (id, paper, role, p, verdict[, adjustable])."""
    return pd.DataFrame(
        [(i, paper, role, 1.0, 0.5, 10, 0.0, verdict, *rest, p) if rest
         else (i, paper, role, 1.0, 0.5, 10, 0.0, verdict, True, p)
         for i, paper, role, p, verdict, *rest in rows],
        columns=COLUMNS,
    )  # fmt: skip


def test_families_are_a_papers_primary_claims_its_others_the_mia_and_the_frontier():
    assert mu.family("s2.pad_over_dist", S2, "primary") == "s2 primary"
    assert mu.family("s2.static_beats_dist", S2, "secondary") == "s2 secondary"
    assert mu.family("s1.mia.size.loss", MIA, "secondary") == "mia"
    assert mu.family("s4.frontier.pad_over_refusal", FRONTIER, "secondary") == "frontier"
    assert mu.family("s2.audit.response.eps1", S2, "check") == ""
    assert mu.adjustment("s2 primary") == "holm" and mu.adjustment("mia") == "fdr_by"


def test_holm_over_primary_claims_and_by_over_the_rest_checks_outside():
    rows = [
        ("s2.a", S2, "primary", 0.01, "reproduced"),
        ("s2.b", S2, "primary", 0.03, "contradicted"),
        ("s2.c", S2, "primary", 0.92, "inconclusive"),
        ("s2.d", S2, "secondary", 0.02, "reproduced"),
        ("s2.e", S2, "secondary", 0.01, "reproduced"),
        ("s2.f", S2, "secondary", 0.03, "reproduced"),
        ("s2.guarantee", S2, "check", 0.0001, "reproduced"),
        ("s2.missing", S2, "secondary", 0.0001, "inconclusive", False),
        ("s3.a", S3, "primary", 0.03, "reproduced"),
    ]
    out = mu.adjusted(_frame(rows), 0.05).set_index("id")
    # Holm over the 3 primary: 0.01 * 3 = 0.03 stays, 0.03 * 2 = 0.06 does not
    assert list(out.loc[["s2.a", "s2.b", "s2.c"], "adjusted"]) == [
        "reproduced", "inconclusive", "inconclusive"
    ]  # fmt: skip
    # BY over the 3 secondary: BH 0.03 for all three, times c(3) = 11/6 = 0.055: none stays
    assert set(out.loc[["s2.d", "s2.e", "s2.f"], "adjusted"]) == {"inconclusive"}
    assert out.loc["s2.d", "adjustment"] == "fdr_by" and out.loc["s2.a", "adjustment"] == "holm"
    # the check and the claim overruled by missing data keep their verdicts, with no p-value
    assert out.loc["s2.guarantee", "adjusted"] == "reproduced"
    assert out["p_value"].loc[["s2.guarantee", "s2.missing"]].isna().all()
    assert out.loc["s3.a", "adjusted"] == "reproduced"  # alone in its family
    assert out.loc["s2.a", "level"] == pytest.approx(0.05 / 3)
    counts = mu.adjusted_counts(out.reset_index())
    assert counts["s2 primary"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 2}
    assert "" not in counts


def test_a_decided_claim_without_a_p_value_is_inconclusive_once_adjusted():
    rows = [("s3.ratio", S3, "secondary", math.nan, "reproduced")]
    out = mu.adjusted(_frame(rows), 0.05)
    assert out.loc[0, "adjusted"] == "inconclusive"


@pytest.mark.parametrize(
    "effect, null, se, n, level, expected",
    [
        # n ((z_{1 - level/2} + z_0.8) se / gap)^2: (1.95996 + 0.84162) 0.1 / 0.1 -> 10 * 7.849
        (0.1, 0.0, 0.1, 10, 0.05, 79),
        (-0.1, 0.0, 0.1, 10, 0.05, 79),  # the sign does not matter
        (1.5, 1.25, 0.05, 25, 0.05, 25),  # already powered: at least the n there are
        (0.1, 0.0, 0.1, 10, 0.005, 134),  # a stricter level: z 2.80703 + 0.84162
        (0.0, 0.0, 0.1, 10, 0.05, None),  # the effect sits at the null
        (0.1, 0.0, math.nan, 10, 0.05, None),  # no standard error
        (0.1, 0.0, 0.1, 1, 0.05, None),  # one unit
    ],
)
def test_units_to_decide_at_80_percent_power(effect, null, se, n, level, expected):
    assert mu.units_to_decide(effect, null, se, n, level) == expected
    if expected:
        z = stats.norm.isf(level / 2) + stats.norm.ppf(0.8)
        assert expected == max(n, math.ceil(n * (z * se / abs(effect - null)) ** 2))


def test_the_strictest_level_is_holms_first_step_or_bys():
    assert mu.strictest(0.05, 4, "holm") == pytest.approx(0.0125)
    assert mu.strictest(0.05, 3, "fdr_by") == pytest.approx(0.05 / (3 * 11 / 6))


def test_power_is_at_the_familys_strictest_level():
    rows = [("s2.a", S2, "primary", 0.2, "inconclusive"), ("s2.b", S2, "primary", 0.3,
            "inconclusive")]  # fmt: skip
    out = mu.adjusted(_frame(rows), 0.05)
    # effect 1, se 0.5, n 10 at 0.025: 10 ((2.2414 + 0.8416) 0.5)^2 = 23.77 -> 24
    assert list(out["units_to_decide"]) == [24, 24]
