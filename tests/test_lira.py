"""The statistics of S3's LiRa attack (privleak.lira) on hand-computable inputs: scores,
selection, rates, the zero-success bound, the bootstrap unit and the per-target tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import privleak.lira as lira
from privleak.errors import PrivleakError

# ---------------------------------------------------------------- scores and selection


def test_lira_scores_are_the_ratio_of_log_perplexities_with_guards():
    target = [2.0, 1.0, 0.0, 0.0, math.nan, 4.0]
    reference = [4.0, 3.0, 2.0, 0.0, 1.0, math.nan]
    got = lira.lira_scores(target, reference)
    np.testing.assert_array_equal(got, [2.0, 3.0, math.inf, 1.0, math.nan, math.nan])
    ppl_target, ppl_reference = math.exp(1.5), math.exp(0.6)
    assert lira.lira_scores([math.log(ppl_target)], [math.log(ppl_reference)])[0] == (
        pytest.approx(0.4)
    )
    with pytest.raises(PrivleakError, match="NLLs must be >= 0"):
        lira.lira_scores([-0.1], [1.0])
    with pytest.raises(PrivleakError, match="target_nll has shape"):
        lira.lira_scores([1.0, 2.0], [1.0])


def test_per_prompt_selection_breaks_ties_by_order_and_skips_nan():
    scores = [1.0, 3.0, 3.0, math.nan, 2.0, math.nan, math.nan, 0.5]
    prompts = ["a", "a", "a", "a", "b", "b", "c", "b"]
    one = lira.select_candidates(scores, prompts, per_prompt=1)
    assert np.flatnonzero(one).tolist() == [1, 4]  # the tie 1 vs 2 goes to 1; c has no score
    two = lira.select_candidates(scores, prompts, per_prompt=2)
    assert np.flatnonzero(two).tolist() == [1, 2, 4, 7]  # b has only two scored samples
    many = lira.select_candidates(scores, prompts, per_prompt=10)
    assert many.tolist() == (~np.isnan(scores)).tolist()


def test_global_selection_ranks_across_prompts():
    scores = [1.0, 3.0, 3.0, math.nan, 2.0, math.inf]
    prompts = ["a", "a", "b", "b", "c", "c"]
    assert np.flatnonzero(lira.select_candidates(scores, prompts, top=2)).tolist() == [1, 5]
    assert np.flatnonzero(lira.select_candidates(scores, prompts, top=3)).tolist() == [1, 2, 5]
    assert lira.select_candidates(scores, prompts, top=99).sum() == 5


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, "exactly one of per_prompt, top"),
        ({"per_prompt": 1, "top": 1}, "exactly one of per_prompt, top"),
        ({"per_prompt": 0}, "per_prompt must be an int >= 1"),
        ({"top": 1.5}, "top must be an int >= 1"),
    ],
)
def test_selection_rejects_bad_counts(settings, message):
    with pytest.raises(PrivleakError, match=message):
        lira.select_candidates([1.0, 2.0], ["a", "b"], **settings)


def test_selection_rejects_mismatched_prompt_ids():
    with pytest.raises(PrivleakError, match="3 scores for 2 prompt_ids"):
        lira.select_candidates([1.0, 2.0, 3.0], ["a", "b"], per_prompt=1)


# ---------------------------------------------------------------- success rates

NONEMPTY = [1, 1, 1, 1, 1, 0]
LEAKED = {"MEDIA": [1, 1, 0, 0, 0, 1], "INSURANCE": [1, 1, 0, 0, 1, 0]}


def test_success_rate_divides_by_the_picks_and_per_generation_by_the_nonempty_samples():
    # 2 prompts x 3 samples (p: 0-2, q: 3-5; sample 5 is empty), domains A and B.
    nonempty = [1, 1, 1, 1, 1, 0]
    selected = {"A": [1, 0, 0, 0, 1, 0], "B": [0, 1, 0, 0, 0, 1]}
    leaked = {"A": [1, 1, 0, 0, 0, 0], "B": [0, 1, 0, 0, 0, 1]}
    # A: picks 0 and 4, sample 0 leaks: 1/2 of the picks, 1/5 of the non-empty samples.
    assert lira.lira_success_rate(selected["A"], leaked["A"], nonempty) == (0.5, 1, 2, 5, 0.2)
    # B: pick 5 is empty, so the one non-empty pick (1) leaks: 1/1, and 1/5 per generation.
    assert lira.lira_success_rate(selected["B"], leaked["B"], nonempty) == (1.0, 1, 1, 5, 0.2)
    # Overall: picks 0, 1, 4 (the union), successes 0 and 1: 2/3, and 2/5 per generation.
    stacked = [np.stack(list(masks.values())) for masks in (selected, leaked)]
    overall = lira.lira_success_rate(*stacked, nonempty)
    assert overall == (pytest.approx(2 / 3), 2, 3, 5, 0.4)
    assert overall.rate_per_generation == 0.4 and overall.selected == 3
    # A sample picked and leaked for both domains counts once in both counts.
    assert lira.lira_success_rate([[1, 0], [1, 0]], [[1, 0], [1, 0]], [1, 1]) == (1, 1, 1, 2, 0.5)
    without_pick = lira.lira_success_rate([0, 1], [0, 1], [1, 0])
    assert math.isnan(without_pick.rate) and without_pick.rate_per_generation == 0.0
    assert math.isnan(lira.lira_success_rate([1], [1], [0]).rate_per_generation)


def test_success_rates_select_per_domain_and_combine():
    # Scores that make per_prompt=1 pick the SELECTED samples of each domain (prompts p, q, r).
    prompts = ["p", "p", "q", "q", "r", "r"]
    scores = {
        "MEDIA": np.array([2.0, 1.0, 5.0, 1.0, math.nan, math.nan]),
        "INSURANCE": np.array([1.0, 2.0, 1.0, 3.0, 1.0, 0.5]),
    }
    rates = lira.lira_success_rates(scores, LEAKED, NONEMPTY, prompts, per_prompt=1)
    assert rates == {
        "MEDIA": (0.5, 1, 2, 5, 0.2),  # picks 0, 2: sample 0 leaks
        "INSURANCE": (pytest.approx(2 / 3), 2, 3, 5, 0.4),  # picks 1, 3, 4: 1 and 4 leak
        lira.OVERALL: (0.6, 3, 5, 5, 0.6),  # picks 0-4: 0, 1 and 4 leak
    }


def test_picks_are_the_samples_behind_the_rates():
    prompts = ["p", "p", "q", "q", "r", "r"]
    scores = {
        "MEDIA": np.array([2.0, 1.0, 5.0, 1.0, math.nan, math.nan]),
        "INSURANCE": np.array([1.0, 2.0, 1.0, 3.0, 1.0, 0.5]),
    }
    picks = lira.lira_picks(scores, LEAKED, NONEMPTY, prompts, per_prompt=1)
    assert picks["MEDIA"].selected.tolist() == [1, 0, 1, 0, 0, 0]
    assert picks["MEDIA"].success.tolist() == [1, 0, 0, 0, 0, 0]
    assert picks["INSURANCE"].selected.tolist() == [0, 1, 0, 1, 1, 0]
    assert picks["INSURANCE"].success.tolist() == [0, 1, 0, 0, 1, 0]
    assert picks[lira.OVERALL].selected.tolist() == [1, 1, 1, 1, 1, 0]
    assert picks[lira.OVERALL].success.tolist() == [1, 1, 0, 0, 1, 0]
    with pytest.raises(PrivleakError, match=r"leaked\['MEDIA'\] has shape \(2,\); expected"):
        lira.lira_picks(scores, LEAKED | {"MEDIA": [1, 0]}, NONEMPTY, prompts, per_prompt=1)


def test_success_rates_reject_unknown_or_missing_domains():
    scores = {"MEDIA": np.ones(6)}
    with pytest.raises(PrivleakError, match="unknown domain 'INSURANCE' in leaked"):
        lira.lira_success_rates(scores, LEAKED, NONEMPTY, list("aabbcc"), per_prompt=1)
    with pytest.raises(PrivleakError, match="'MEDIA' has scores but no leaked mask"):
        lira.lira_success_rates(scores, {}, NONEMPTY, list("aabbcc"), per_prompt=1)
    with pytest.raises(PrivleakError, match="reserved"):
        lira.lira_success_rates({"overall": np.ones(6)}, {}, NONEMPTY, list("aabbcc"), top=1)


def test_success_rate_rejects_mismatched_masks():
    with pytest.raises(PrivleakError, match="selected_mask has shape"):
        lira.lira_success_rate([1, 0], [1, 0, 0], [1, 1, 1])


def test_zero_success_interval_is_clopper_pearson_over_prompts_scaled_by_unequal_picks():
    # 100 prompts with one pick each: the rate is the share of leaking prompts, bounded by q's
    # exact upper limit at 0/100, 1 - 0.025 ** (1 / 100).
    low, high = lira.zero_success_interval([1] * 100, alpha=0.05)
    assert low == 0.0
    assert high == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-12)
    assert high == pytest.approx(0.0362167, abs=1e-7)
    # 40 prompts, 20 with one pick and 20 with two: q <= 1 - 0.025 ** (1 / 40) = 0.0880973, and
    # the rate <= q * max / mean picks = q * 2 / 1.5.
    unequal = lira.zero_success_interval([1] * 20 + [2] * 20, alpha=0.05)
    assert unequal == (0.0, pytest.approx(0.1174631, abs=1e-7))
    # One prompt, one pick: 0.975; a bound above 1 is capped (2 prompts: 0.842 * 3 / 2).
    assert lira.zero_success_interval([1], alpha=0.05) == (0.0, pytest.approx(0.975))
    assert lira.zero_success_interval([1, 3], alpha=0.05) == (0.0, 1.0)
    # More prompts, a tighter bound; a smaller alpha, a wider one.
    assert lira.zero_success_interval([1] * 400, alpha=0.05)[1] < high / 2
    assert lira.zero_success_interval([1] * 100, alpha=0.01)[1] > high


@pytest.mark.parametrize(
    "picks, message",
    [
        ([], r"picks_per_prompt must be \[prompts\] with at least one prompt"),
        ([1, 0], "picks_per_prompt must be ints >= 1"),
        ([1.5], "picks_per_prompt must be ints >= 1"),
    ],
)
def test_zero_success_interval_rejects_bad_counts(picks, message):
    with pytest.raises(PrivleakError, match=message):
        lira.zero_success_interval(picks, alpha=0.05)


# ---------------------------------------------------------------- domain privacy


def _samples(leaks: list[bool], empty: list[bool], nll_self, nll_b) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": ["p1", "p1", "p2", "p2"],
            "empty": empty,
            "nll_self": nll_self,
            "nll_without_B": nll_b,
            "leak_keyword_B": leaks,
        }
    )


BOOT = {"n_boot": 200, "seed": 0, "alpha": 0.1}


def test_success_table_picks_one_sample_per_prompt_and_reports_both_rates():
    # Per prompt the pick is the sample most likely under the target w.r.t. the reference
    # (scores 3, 1 | 1, 3): samples 0 and 3, both flagged.
    drawn = _samples(
        [True, False, False, True], [False] * 4, [1.0, 2.0, 2.0, 1.0], [3.0, 2.0, 2.0, 3.0]
    )
    table = lira.lira_success_table(drawn, "keyword", ["B"], **BOOT)
    assert list(table) == [lira.OVERALL, "B"]
    # Every pick leaks: the interval is the exact bound on the failures over 2 prompts,
    # 1 - (1 - 0.05 ** (1 / 2)) = 0.2236068.
    assert table["B"] == {
        "rate": 1.0, "low": pytest.approx(0.2236068, abs=1e-7), "high": 1.0, "successes": 2,
        "selected": 2, "nonempty": 4, "rate_per_generation": 0.5,
    }  # fmt: skip
    # One leaked domain: the overall rate is its rate; the official script's, no pick, 2 of 4.
    assert table[lira.OVERALL] == table["B"] | {"official_rate": 0.5}


def test_without_a_success_the_interval_is_the_exact_zero_success_bound():
    selected, ids = np.array([True, False, True, False]), ["p1", "p1", "p2", "p2"]
    low, high = lira.success_rate_interval(np.zeros(4, bool), selected, ids, **BOOT)
    # 0 of 2 prompts' single picks: (0, 1 - 0.05 ** (1 / 2)).
    assert (low, high) == (0.0, pytest.approx(0.7763932, abs=1e-7))
    assert lira.success_rate_interval(selected, selected, ids, **BOOT) == (
        pytest.approx(0.2236068, abs=1e-7), 1.0,
    )  # fmt: skip
    assert all(map(math.isnan, lira.success_rate_interval(np.zeros(4), np.zeros(4), ids, **BOOT)))
    with pytest.raises(PrivleakError, match="success must be a subset of selected"):
        lira.success_rate_interval(~selected, selected, ids, **BOOT)


def test_success_interval_resamples_the_prompts_with_a_pick():
    # 10 prompts x 2 samples, one pick each (the first sample); picks of prompts 0-3 leak.
    ids = np.repeat(np.arange(10), 2).tolist()
    selected = np.tile([True, False], 10)
    success = selected & (np.repeat(np.arange(10), 2) < 4)
    low, high = lira.success_rate_interval(success, selected, ids, **BOOT)
    assert 0 < low < 0.4 < high < 1


def test_prompt_successes_count_one_pick_per_prompt_and_the_nonempty_samples():
    # Prompt a: sample 0 scores 4 (reference 2 / self 0.5) and is flagged, so the pick succeeds;
    # prompt b: its best sample (score 3) is not flagged, and its empty sample is not counted.
    drawn = pd.DataFrame(
        {
            "prompt_id": ["a", "a", "b", "b", "b"],
            "empty": [False, False, False, False, True],
            "nll_self": [0.5, 1.0, 1.0, 1.0, np.nan],
            "nll_without_X": [2.0, 1.0, 3.0, 1.0, np.nan],
            "leak_keyword_X": [True, False, False, True, False],
        },
        index=[10, 11, 12, 13, 14],  # a caller's subset keeps its frame's index
    )
    table = lira.prompt_successes(drawn, "keyword", ["X"])
    assert table.to_dict("index") == {
        "a": {"successes": 1, "selected": 1, "nonempty": 2},
        "b": {"successes": 0, "selected": 1, "nonempty": 2},
    }


def test_the_official_rate_is_every_nonempty_samples_flagged_share_without_a_pick():
    # 2 prompts x 2 samples: the official script averages success over the 3 non-empty samples
    # (flagged for X or Y: 2 of them), whatever the attack picks.
    drawn = pd.DataFrame(
        {"prompt_id": [0, 0, 1, 1], "empty": [False, False, False, True],
         "nll_self": [1.0, 2.0, 1.0, np.nan], "nll_without_X": [2.0, 2.0, 2.0, np.nan],
         "nll_without_Y": [2.0, 2.0, 2.0, np.nan], "leak_keyword_X": [False, True, False, True],
         "leak_keyword_Y": [False, False, True, False]}
    )  # fmt: skip
    table = lira.lira_success_table(drawn, "keyword", ["X", "Y"], n_boot=100, seed=0, alpha=0.1)
    assert table[lira.OVERALL]["official_rate"] == pytest.approx(2 / 3)
