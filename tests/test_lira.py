"""The statistics of S3's LiRa attack and domain privacy (privleak.lira) on hand-computable inputs:
scores, selection, rates, the zero-success bound, the bootstrap unit and the per-target tables."""

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
SELECTED = {"MEDIA": [1, 0, 1, 0, 0, 1], "INSURANCE": [1, 1, 0, 1, 0, 0]}
LEAKED = {"MEDIA": [1, 1, 0, 0, 0, 1], "INSURANCE": [1, 1, 0, 0, 1, 0]}


def test_success_rate_counts_selected_flagged_nonempty_samples():
    # MEDIA: sample 0 (sample 5 is selected and flagged but empty); INSURANCE: samples 0 and 1.
    assert lira.lira_success_rate(SELECTED["MEDIA"], LEAKED["MEDIA"], NONEMPTY) == (0.2, 1, 5)
    insurance = lira.lira_success_rate(SELECTED["INSURANCE"], LEAKED["INSURANCE"], NONEMPTY)
    assert insurance == (0.4, 2, 5)
    # Overall: sample 0 succeeds for both domains and counts once.
    stacked = [np.stack(list(masks.values())) for masks in (SELECTED, LEAKED)]
    overall = lira.lira_success_rate(*stacked, NONEMPTY)
    assert overall == (0.4, 2, 5) and overall.rate == 0.4
    assert math.isnan(lira.lira_success_rate([1], [1], [0]).rate)


def test_success_rates_select_per_domain_and_combine():
    # Scores that make per_prompt=1 pick the SELECTED samples of each domain (prompts p, q, r).
    prompts = ["p", "p", "q", "q", "r", "r"]
    scores = {
        "MEDIA": np.array([2.0, 1.0, 5.0, 1.0, math.nan, math.nan]),
        "INSURANCE": np.array([1.0, 2.0, 1.0, 3.0, 1.0, 0.5]),
    }
    rates = lira.lira_success_rates(scores, LEAKED, NONEMPTY, prompts, per_prompt=1)
    assert rates == {
        "MEDIA": (0.2, 1, 5),  # selected 0, 2: sample 0 leaks
        "INSURANCE": (0.4, 2, 5),  # selected 1, 3, 4: samples 1 and 4 leak
        lira.OVERALL: (0.6, 3, 5),
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


def test_zero_success_interval_is_clopper_pearson_over_prompts_times_the_largest_rate():
    # 100 prompts, 2 picks each among 10 non-empty samples: the rate is at most 0.2, and q's
    # exact upper bound at 0/100 is 1 - 0.025 ** (1 / 100) = 0.036217.
    low, high = lira.zero_success_interval(100, 200, 1000, alpha=0.05)
    assert low == 0.0
    assert high == pytest.approx((1 - 0.025 ** (1 / 100)) * 0.2, rel=1e-9)
    assert high == pytest.approx(0.0072434, abs=1e-7)
    # One prompt, one pick of four samples: q <= 0.975, the rate <= 0.975 / 4.
    assert lira.zero_success_interval(1, 1, 4, alpha=0.05) == (0.0, pytest.approx(0.24375))
    # More prompts, a tighter bound; a smaller alpha, a wider one.
    assert lira.zero_success_interval(400, 400, 4000, alpha=0.05)[1] < high / 2
    assert lira.zero_success_interval(100, 200, 1000, alpha=0.01)[1] > high


@pytest.mark.parametrize(
    "counts, message",
    [
        ((0, 1, 1), "prompts must be an int >= 1, got 0"),
        ((2, 0, 5), "selected must be an int >= 1, got 0"),
        ((2, 6, 5), r"nonempty must be an int >= selected \(6\), got 5"),
    ],
)
def test_zero_success_interval_rejects_bad_counts(counts, message):
    with pytest.raises(PrivleakError, match=message):
        lira.zero_success_interval(*counts, alpha=0.05)


# ---------------------------------------------------------------- domain privacy


def test_domain_privacy_ratio_of_flagged_rates():
    # Target: 3 of 10 non-empty samples flagged (an 11th sample is flagged but empty).
    target_flagged, target_nonempty = [1] * 3 + [0] * 7 + [1], [1] * 10 + [0]
    reference_flagged, reference_nonempty = [1] + [0] * 7, [1] * 8
    got = lira.domain_privacy(
        target_flagged, reference_flagged, target_nonempty, reference_nonempty
    )
    assert got.ratio == pytest.approx(0.3 / 0.125)
    assert (got.target_flagged, got.target_nonempty) == (3, 10)
    assert (got.reference_flagged, got.reference_nonempty) == (1, 8)


def test_domain_privacy_zero_denominators():
    never = lira.domain_privacy([1, 0], [0, 0], [1, 1], [1, 1])
    assert never.ratio == math.inf and never.reference_flagged == 0
    assert math.isnan(lira.domain_privacy([0, 0], [0, 0], [1, 1], [1, 1]).ratio)
    assert math.isnan(lira.domain_privacy([1], [1], [0], [1]).ratio)
    smoothed = lira.domain_privacy([1, 0], [0, 0], [1, 1], [1, 1], pseudocount=0.5)
    assert smoothed.ratio == pytest.approx((1.5 / 3) / (0.5 / 3))
    with pytest.raises(PrivleakError, match="pseudocount must be >= 0"):
        lira.domain_privacy([1], [1], [1], [1], pseudocount=-1)
    with pytest.raises(PrivleakError, match="reference_flagged has shape"):
        lira.domain_privacy([1], [1, 0], [1], [1])


def homogeneous_prompts(n_prompts=10, samples=10):
    """Samples of a prompt all flagged or all clean: the target's prompts 0-4 and the reference's
    prompts 5-7 are flagged."""
    prompts = np.repeat(np.arange(n_prompts), samples)
    reference = ((prompts >= 5) & (prompts < 8)).astype(int)
    return prompts, (prompts < 5).astype(int), reference, np.ones(len(prompts))


def test_domain_privacy_bootstrap_resamples_prompts_not_samples():
    prompts, target, reference, nonempty = homogeneous_prompts()
    kwargs = dict(n_boot=400, seed=0, pseudocount=0.5)
    by_prompt = lira.domain_privacy_interval(
        target, reference, nonempty, nonempty, prompts, prompts, **kwargs
    )
    point = lira.domain_privacy(target, reference, nonempty, nonempty, pseudocount=0.5)
    assert by_prompt.effect == pytest.approx(point.ratio) and by_prompt.units == 10
    # The same samples as independent units (every sample its own prompt) look far surer.
    by_sample = lira.domain_privacy_interval(
        target, reference, nonempty, nonempty,
        [("t", i) for i in range(len(target))], [("r", i) for i in range(len(reference))],
        **kwargs,
    )  # fmt: skip
    assert by_sample.units == 200
    assert by_prompt.low < by_sample.low < by_sample.high < by_prompt.high
    assert (by_prompt.high - by_prompt.low) > 3 * (by_sample.high - by_sample.low)


def test_domain_privacy_bootstrap_takes_the_claims_settings():
    prompts, target, reference, nonempty = homogeneous_prompts()  # 10 prompts
    args = (target, reference, nonempty, nonempty, prompts, prompts)
    few = lira.domain_privacy_interval(*args, n_boot=200, seed=0, pseudocount=0.5, min_units=11)
    assert math.isnan(few.low) and few.note == "10 units < min_units 11: no interval"
    basic = lira.domain_privacy_interval(*args, n_boot=200, seed=0, pseudocount=0.5, method="basic")
    percentile = lira.domain_privacy_interval(*args, n_boot=200, seed=0, pseudocount=0.5)
    # basic reflects the percentile interval about the point estimate.
    assert basic.low == pytest.approx(2 * percentile.effect - percentile.high)


def test_domain_privacy_bootstrap_without_finite_ratio_gives_no_interval():
    prompts, target, _, nonempty = homogeneous_prompts()
    clean = np.zeros_like(target)
    got = lira.domain_privacy_interval(
        target, clean, nonempty, nonempty, prompts, prompts, n_boot=200, seed=0
    )
    assert got.effect == math.inf and math.isnan(got.low) and "not finite" in got.note
    with pytest.raises(PrivleakError, match="100 target samples for 3 target_prompt_ids"):
        lira.domain_privacy_interval(
            target, clean, nonempty, nonempty, [0, 1, 2], prompts, n_boot=200, seed=0
        )


def test_domain_privacy_bootstrap_crosses_training_runs_with_prompts():
    """Six runs of a target: run r flags r of the 5 samples of every prompt, the reference 2 of 5.
    Prompts then all look alike, so only the runs vary: pooling the runs as one model's samples
    leaves nothing to resample, crossing runs with prompts does, and both keep the ratio."""
    n_prompts, samples, n_runs = 10, 5, 6
    prompts = np.repeat(np.arange(n_prompts), samples)
    draw = np.tile(np.arange(samples), n_prompts)
    reference, nonempty = (draw < 2).astype(int), np.ones(len(prompts))
    target_prompts = np.tile(prompts, n_runs)
    run_of = np.repeat(np.arange(n_runs), len(prompts))
    flagged = (np.tile(draw, n_runs) < run_of).astype(int)
    ones = np.ones(len(flagged))
    kwargs = dict(n_boot=400, seed=0, pseudocount=0.5, min_units=6)
    crossed = lira.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts, target_runs=run_of, **kwargs
    )
    pooled = lira.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts, **kwargs
    )
    point = lira.domain_privacy(flagged, reference, ones, nonempty, pseudocount=0.5)
    assert crossed.effect == pytest.approx(point.ratio) == pytest.approx(pooled.effect)
    assert math.isnan(pooled.low) and "give the same effect" in pooled.note
    assert crossed.low < crossed.effect < crossed.high
    few = lira.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts,
        target_runs=run_of, **kwargs | {"min_units": 7},
    )  # fmt: skip
    assert math.isnan(few.low) and "runs" in few.note
    with pytest.raises(PrivleakError, match="300 target samples for 2 target_runs"):
        lira.domain_privacy_interval(
            flagged, reference, ones, nonempty, target_prompts, prompts, target_runs=[0, 1],
            **kwargs,
        )  # fmt: skip


# ---------------------------------------------------------------- tables of one target's samples


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


def test_success_table_picks_one_sample_per_prompt_and_counts_nonempty_samples():
    # Per prompt the pick is the sample most likely under the target w.r.t. the reference.
    drawn = _samples(
        [True, False, False, True], [False] * 4, [1.0, 2.0, 2.0, 1.0], [3.0, 2.0, 2.0, 3.0]
    )
    table = lira.lira_success_table(drawn, "keyword", ["B"], **BOOT)
    assert list(table) == [lira.OVERALL, "B"]
    assert table["B"] | {"low": 0, "high": 0} == {
        "rate": 0.5, "low": 0, "high": 0, "successes": 2, "nonempty": 4,
    }  # fmt: skip
    assert table[lira.OVERALL] == table["B"]  # one leaked domain: the overall rate is its rate


def test_without_a_success_the_interval_is_the_exact_zero_success_bound():
    success, selected = np.zeros(4, bool), np.array([True, False, True, False])
    nonempty, ids = np.ones(4, bool), ["p1", "p1", "p2", "p2"]
    low, high = lira.success_rate_interval(success, selected, nonempty, ids, **BOOT)
    assert (low, high) == lira.zero_success_interval(2, 2, 4, alpha=0.1)


def test_privacy_table_compares_target_and_reference_leak_rates():
    drawn = _samples([True, True, False, False], [False] * 4, [1.0] * 4, [1.0] * 4)
    reference = _samples([True, False, False, False], [False, False, False, True], [1.0] * 4,
                         [1.0] * 4)  # fmt: skip
    table = lira.domain_privacy_table(drawn, {"B": reference}, "keyword", **BOOT, pseudocount=0.0)
    point = lira.domain_privacy(
        np.array([True, True, False, False]), np.array([True, False, False, False]),
        np.ones(4, bool), np.array([True, True, True, False]), pseudocount=0.0,
    )  # fmt: skip
    assert list(table) == ["B"]
    assert table["B"]["ratio"] == point.ratio == pytest.approx(1.5)
    assert (table["B"]["target_rate"], table["B"]["reference_rate"]) == (0.5, pytest.approx(1 / 3))
    assert list(table["B"]) == ["ratio", "low", "high", "target_rate", "reference_rate"]


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
        "a": {"successes": 1, "nonempty": 2},
        "b": {"successes": 0, "nonempty": 2},
    }
