"""privleak.claims.verdicts: verdict edges (docs/design.md §8), judged claims, the claim files."""

from __future__ import annotations

import json

import pytest

from privleak import claims as cl
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


@pytest.mark.parametrize(
    "effect, low, high, units, null, expected",
    [
        # half-width 0.2 on the null's side, effect 0.1: beyond n (0.2 / 0.1)^2 = 4 n
        (0.1, -0.1, 0.4, 10, 0.0, 41),
        (-0.1, -0.4, 0.1, 10, 0.0, 41),  # the other side: its upper half-width counts
        (1.5, 1.0, 2.0, 25, 1.25, 101),  # a ratio against 1.25: (0.5 / 0.25)^2 = 4
        (0.3, -0.01, 0.5, 9, 0.0, 10),  # (0.31 / 0.3)^2 * 9 = 9.61: the next integer
        (0.1, 0.0, 0.2, 10, 0.0, 11),  # touching the null at n: one more unit, at least
        (0.0, -0.1, 0.1, 10, 0.0, None),  # no observed effect
        (0.1, NAN, NAN, 10, 0.0, None),  # no interval
        (0.1, 0.1, 0.1, 10, 0.0, None),  # a degenerate interval
        (0.1, -0.1, 0.3, 1, 0.0, None),  # one unit
    ],
)
def test_units_to_decide_scales_the_half_width_as_one_over_root_n(
    effect, low, high, units, null, expected
):
    estimate = cl.Estimate(effect, low, high, units)
    assert cl.units_to_decide(estimate, null) == expected


def test_an_inconclusive_claim_says_how_many_units_would_decide_it():
    judged = claim("a", -0.1, 0.4, effect=0.1)
    assert judged.verdict == cl.INCONCLUSIVE
    assert judged.note == (
        "about 33 contexts would decide it at the observed effect (the interval narrows as "
        "1/sqrt(n); 8 now)"
    )
    assert "would decide" not in claim("b", 0.1, 0.3).note  # decided: no power note
    assert "would decide" not in claim("c", 0.1, 0.3, missing="runs").note
    assert claim("d", -0.1, 0.1, effect=0.0).note.startswith("no effect observed")


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
    assert body["claims"]["s0.c"] == {"effect": 2.0, "ci": [None, None], "verdict": "inconclusive",
                                      "holm": "inconclusive", "fdr_by": "inconclusive",
                                      "stable": ""}  # fmt: skip
    assert body["adjusted"]["holm"]["s1"] == {"reproduced": 0, "contradicted": 1, "inconclusive": 0}
    assert cl.metrics_json(found, 0.05) == cl.metrics_json(list(reversed(found)), 0.05)
    page = cl.markdown(found, alpha=0.05)
    assert "3 claims: 1 reproduced, 1 contradicted, 1 inconclusive" in page
    row = "| s0.c | §1 | “q \\| pipe” | + 0 | 2 [n/a, n/a] | **inconclusive** | inconclusive |"
    assert row in page
    assert "| s1 | 0 / 1 / 0 | 0 / 1 / 0 | 0 / 1 / 0 |" in page
    assert page == cl.markdown(list(reversed(found)), alpha=0.05)
    with pytest.raises(PrivleakError, match="claim ids must be unique"):
        cl.claims_frame(found + [claim("s0.a", 0.1, 0.2)])
