"""The policies as measured instruments (privleak.policy_quality) on hand-computable inputs: turn
flags of a keyword policy, its recall, precision and false-positive rates, and the Rogan-Gladen
corrected rate with its bootstrap interval."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import privleak.policy_quality as quality
from privleak.errors import PrivleakError
from privleak.policies import KeywordPolicy

KEYWORDS = {"AIRLINE": ["flight", "seat"], "MEDIA": ["cable", "channel"]}
# Flagged turns per dialog, for AIRLINE | MEDIA: a1 2/3 | 0/3, a2 1/2 | 0/2 (the blank line is no
# turn), m1 1/2 ("seat") | 1/2, m2 0/3 | 1/3.
DIALOGS = {
    "a1": ("AIRLINE", "USER: I need a flight\nAGENT: Which seat?\nUSER: thanks"),
    "a2": ("AIRLINE", "USER: hello\n\nAGENT: your flight is booked"),
    "m1": ("MEDIA", "USER: my cable is down\nAGENT: take a seat and wait"),
    "m2": ("MEDIA", "USER: change the channel\nAGENT: done\nUSER: bye"),
}
BOOT = {"n_boot": 400, "seed": 0, "alpha": 0.1}


class CountingPolicy(KeywordPolicy):
    """A KeywordPolicy that records the texts of each flags_by_domain call."""

    def __init__(self, keywords):
        super().__init__(keywords)
        self.calls: list[list[str]] = []

    def flags_by_domain(self, texts, domains=None):
        self.calls.append(list(texts))
        return super().flags_by_domain(texts, domains)


def keyword_turn_flags(policy=None) -> pd.DataFrame:
    domains, texts = zip(*DIALOGS.values(), strict=True)
    policy = KeywordPolicy(KEYWORDS) if policy is None else policy
    return quality.turn_flags(policy, texts, domains, list(DIALOGS), ["AIRLINE", "MEDIA"])


def test_turn_flags_count_flagged_turns_per_dialog_in_one_policy_call():
    policy = CountingPolicy(KEYWORDS)
    frame = keyword_turn_flags(policy)
    assert len(policy.calls) == 1 and len(policy.calls[0]) == 10  # 3 + 2 + 2 + 3 turns
    assert policy.calls[0][:3] == ["USER: I need a flight", "AGENT: Which seat?", "USER: thanks"]
    assert list(frame.columns) == list(quality.TURN_FLAG_COLUMNS)
    assert frame.to_dict("list") == {
        "dialog": ["a1", "a2", "m1", "m2"] * 2,
        "dialog_domain": ["AIRLINE", "AIRLINE", "MEDIA", "MEDIA"] * 2,
        "flagged_for": ["AIRLINE"] * 4 + ["MEDIA"] * 4,
        "flagged_turns": [2, 1, 1, 0, 0, 0, 1, 1],
        "turns": [3, 2, 2, 3] * 2,
    }


def test_turn_flags_reject_bad_dialogs():
    policy = KeywordPolicy(KEYWORDS)
    with pytest.raises(PrivleakError, match="dialog_ids must be distinct"):
        quality.turn_flags(policy, ["USER: a", "USER: b"], ["MEDIA"] * 2, ["x", "x"], ["MEDIA"])
    with pytest.raises(PrivleakError, match=r"dialogs \['y'\] have no non-blank line"):
        quality.turn_flags(policy, ["USER: a", " \n"], ["MEDIA"] * 2, ["x", "y"], ["MEDIA"])
    with pytest.raises(PrivleakError, match="2 dialogs, 1 dialog_domains and 2 dialog_ids"):
        quality.turn_flags(policy, ["USER: a", "USER: b"], ["MEDIA"], ["x", "y"], ["MEDIA"])


def test_quality_table_gives_recall_precision_and_false_positive_rates():
    table = quality.policy_quality_table(keyword_turn_flags(), **BOOT)
    assert list(table.columns) == [
        "flagged_for", "measure", "dialog_domain", "estimate", "low", "high", "count", "total",
        "dialogs",
    ]  # fmt: skip
    keyed = table.set_index(["flagged_for", "measure", "dialog_domain"])
    expected = {
        # AIRLINE: 3 of 5 AIRLINE turns, 1 of 5 MEDIA turns; 3 of the 4 flagged turns are AIRLINE's.
        ("AIRLINE", "recall", "AIRLINE"): (0.6, 3, 5, 2),
        ("AIRLINE", "precision", quality.ALL_DOMAINS): (0.75, 3, 4, 4),
        ("AIRLINE", "false_positive_rate", "MEDIA"): (0.2, 1, 5, 2),
        # MEDIA: 2 of 5 MEDIA turns, none of AIRLINE's.
        ("MEDIA", "recall", "MEDIA"): (0.4, 2, 5, 2),
        ("MEDIA", "precision", quality.ALL_DOMAINS): (1.0, 2, 2, 4),
        ("MEDIA", "false_positive_rate", "AIRLINE"): (0.0, 0, 5, 2),
    }
    assert list(keyed.index) == list(expected)
    got = keyed[["estimate", "count", "total", "dialogs"]].itertuples(index=False, name=None)
    assert list(got) == list(expected.values())
    assert (keyed["low"] <= keyed["estimate"]).all() and (keyed["estimate"] <= keyed["high"]).all()
    # Every resample of MEDIA's precision and of its false positives reads the same.
    assert keyed.loc[("MEDIA", "precision", "all"), ["low", "high"]].tolist() == [1.0, 1.0]
    assert keyed.loc[("MEDIA", "false_positive_rate", "AIRLINE"), ["low", "high"]].tolist() == [
        0.0, 0.0,
    ]  # fmt: skip
    # AIRLINE's recall resamples its 2 dialogs (2/3 and 1/2): from 1/2 to 2/3.
    recall = keyed.loc[("AIRLINE", "recall", "AIRLINE")]
    assert (recall["low"], recall["high"]) == (0.5, pytest.approx(2 / 3))


def test_quality_table_needs_dialogs_of_the_flagged_domain():
    frame = keyword_turn_flags()
    airline_only = frame[frame["dialog_domain"] == "AIRLINE"]
    with pytest.raises(PrivleakError, match="no held-out dialog of domain 'MEDIA'"):
        quality.policy_quality_table(airline_only, **BOOT)
    with pytest.raises(PrivleakError, match="several rows for one flagged_for domain"):
        quality.policy_quality_table(pd.concat([frame, frame.head(1)]), **BOOT)
    with pytest.raises(PrivleakError, match="lacks columns"):
        quality.policy_quality_table(frame.drop(columns="turns"), **BOOT)
    with pytest.raises(PrivleakError, match="n_boot must be an int >= 100"):
        quality.policy_quality_table(frame, n_boot=10, seed=0, alpha=0.1)


def test_corrected_rate_inverts_the_flag_rate_of_a_mixture():
    # 0.3 = pi * 0.8 + (1 - pi) * 0.1  =>  pi = 0.2 / 0.7 = 2/7.
    assert quality.corrected_rate(0.3, 0.8, 0.1) == pytest.approx(2 / 7)
    assert quality.corrected_rate(0.05, 0.8, 0.1) == 0.0  # below the false positives: clipped
    assert quality.corrected_rate(0.9, 0.8, 0.1) == 1.0  # above the sensitivity: clipped
    assert math.isnan(quality.corrected_rate(0.3, 0.1, 0.1))  # flags say nothing about j
    assert math.isnan(quality.corrected_rate(math.nan, 0.8, 0.1))
    with pytest.raises(PrivleakError, match="sensitivity must be in"):
        quality.corrected_rate(0.3, 1.5, 0.1)


def test_corrected_interval_degenerates_to_the_point_when_all_units_are_equal():
    got = quality.corrected_rate_interval([[3, 10]] * 5, [[8, 10]] * 4, [[1, 10]] * 6, **BOOT)
    assert got == (pytest.approx(2 / 7), got.estimate, got.estimate, "")


def test_corrected_interval_resamples_the_three_samples_around_the_ratio_of_sums():
    # Observed (1 + 5) / 20 = 0.3, sensitivity (7 + 9) / 20 = 0.8, fpr (0 + 2) / 20 = 0.1.
    got = quality.corrected_rate_interval(
        [[1, 10], [5, 10]], [[7, 10], [9, 10]], [[0, 10], [2, 10]], **BOOT
    )
    assert got.estimate == pytest.approx(2 / 7) and got.note == ""
    assert 0 <= got.low < got.estimate < got.high <= 1
    again = quality.corrected_rate_interval(
        [[1, 10], [5, 10]], [[7, 10], [9, 10]], [[0, 10], [2, 10]], **BOOT
    )
    assert again == got  # seeded


def test_corrected_interval_without_a_usable_policy():
    # Sensitivity 0.05 = fpr 0.05: no estimate at all.
    none = quality.corrected_rate_interval(
        [[3, 10]], [[1, 10], [0, 10]], [[0, 10], [1, 10]], **BOOT
    )
    assert math.isnan(none.estimate) and math.isnan(none.low) and "sensitivity 0.05" in none.note
    # Observed 0.075, sensitivity 0.1 > fpr 0.05, but a resample has sensitivity 0 (1/4) or both
    # at 0.1 (1/8): 3/8 of the resamples drop, more than alpha/2 = 0.05, so no interval.
    few = quality.corrected_rate_interval([[3, 40]], [[2, 10], [0, 10]], [[0, 10], [1, 10]], **BOOT)
    assert few.estimate == pytest.approx((0.075 - 0.05) / (0.1 - 0.05)) == pytest.approx(0.5)
    assert math.isnan(few.low) and math.isnan(few.high) and "no interval" in few.note


@pytest.mark.parametrize(
    "rows, message",
    [
        ([[1, 2, 3]], r"count_rows must be \[units, 2\] rows"),
        ([[3, 2]], "count_rows: every row needs 0 <= count <= total"),
        ([[0, 0]], "count_rows: the totals sum to 0"),
    ],
)
def test_corrected_interval_rejects_bad_rows(rows, message):
    with pytest.raises(PrivleakError, match=message):
        quality.corrected_rate_interval(rows, [[8, 10]], [[1, 10]], **BOOT)
