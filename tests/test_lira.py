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


def clean_reference():
    """A target whose prompts 0-18 of 20 have all 5 samples flagged and prompt 19 none, and a
    reference that flags none of the 5 samples of each of its 10 prompts."""
    target_prompts, reference_prompts = np.repeat(np.arange(20), 5), np.repeat(np.arange(10), 5)
    target = (target_prompts < 19).astype(int)
    return target, np.zeros(50, int), np.ones(100), np.ones(50), target_prompts, reference_prompts


def test_domain_privacy_bound_divides_the_target_lower_limit_by_the_exact_reference_limit():
    # Target: a resample of the 20 prompts holds K copies of the clean one, K ~ Bin(20, 1/20),
    # and reads 1 - K / 20; P(K <= 2) = 0.92 < 0.95 < P(K <= 3) = 0.98, so its 5th percentile
    # (alpha 0.1) is 1 - 3 / 20 = 0.85. Reference: 0 flagged of 10 prompts, exact upper limit
    # 1 - 0.05 ** (1 / 10) = 0.2588656. C >= 0.85 / 0.2588656 = 3.283558.
    bound = lira.domain_privacy_bound(*clean_reference(), n_boot=1000, seed=0, alpha=0.1)
    assert bound == pytest.approx(0.85 / (1 - 0.05 ** (1 / 10)))
    assert bound == pytest.approx(3.283558, abs=1e-6)
    # The reference's empty samples are no evidence: only prompts with a non-empty sample count.
    target, reference, target_nonempty, _, target_prompts, reference_prompts = clean_reference()
    half_empty = (reference_prompts < 5).astype(int)  # 5 prompts with non-empty samples
    fewer = lira.domain_privacy_bound(
        target, reference, target_nonempty, half_empty, target_prompts, reference_prompts,
        n_boot=1000, seed=0, alpha=0.1,
    )  # fmt: skip
    assert fewer == pytest.approx(0.85 / (1 - 0.05 ** (1 / 5)))
    # A target that never flags is bounded by 0 only.
    assert lira.domain_privacy_bound(
        np.zeros(100, int), reference, target_nonempty, np.ones(50), target_prompts,
        reference_prompts, n_boot=1000, seed=0,
    ) == 0.0  # fmt: skip
    with pytest.raises(PrivleakError, match="this one flags 1 non-empty samples"):
        lira.domain_privacy_bound(
            target, np.r_[1, reference[1:]], target_nonempty, np.ones(50), target_prompts,
            reference_prompts, n_boot=1000, seed=0,
        )  # fmt: skip


def test_domain_privacy_interval_gives_the_bound_when_the_reference_never_flags():
    args = clean_reference()
    kwargs = dict(n_boot=1000, seed=0, alpha=0.1)
    bounded = lira.domain_privacy_interval(*args, **kwargs, lower_bound_if_reference_clean=True)
    assert bounded.effect == bounded.high == math.inf and bounded.units == 20
    assert bounded.low == pytest.approx(3.283558, abs=1e-6) and "lower bound" in bounded.note
    assert math.isnan(lira.domain_privacy_interval(*args, **kwargs).low)  # default: no interval


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


def _frame(prompt_ids, leaks, empty=None) -> pd.DataFrame:
    """Samples with the columns domain_privacy_table reads, flags for leaked domain B."""
    empty = [False] * len(leaks) if empty is None else empty
    return pd.DataFrame({"prompt_id": prompt_ids, "empty": empty, "leak_keyword_B": leaks})


def test_privacy_table_reports_the_plain_ratio_of_flagged_rates():
    # 2 of 10 target samples flagged, 1 of 10 reference samples: C = 0.2 / 0.1 = 2, with no
    # pseudocount.
    prompts = np.repeat(np.arange(5), 2).tolist()
    drawn = _frame(prompts, [True, True] + [False] * 8)
    reference = _frame(prompts, [True] + [False] * 9)
    row = lira.domain_privacy_table(drawn, {"B": reference}, "keyword", **BOOT)["B"]
    assert list(row) == ["ratio", "low", "high", "bound", "target_rate", "reference_rate"]
    assert (row["ratio"], row["bound"]) == (2.0, "")
    assert (row["target_rate"], row["reference_rate"]) == (0.2, 0.1)
    # The reference's empty sample neither flags nor counts: 1 of 3 non-empty samples.
    small = _frame(["p1", "p1", "p2", "p2"], [True, True, False, False])
    reference = _frame(["p1", "p1", "p2", "p2"], [True, False, False, False],
                       [False, False, False, True])  # fmt: skip
    row = lira.domain_privacy_table(small, {"B": reference}, "keyword", **BOOT)["B"]
    assert row["ratio"] == pytest.approx(0.5 / (1 / 3)) == pytest.approx(1.5)


def test_privacy_table_bounds_a_ratio_the_reference_never_flags_and_leaves_none_open():
    target, reference, _, _, target_prompts, reference_prompts = clean_reference()
    drawn, clean = _frame(target_prompts, target), _frame(reference_prompts, reference)
    settings = {"n_boot": 1000, "seed": 0, "alpha": 0.1}
    row = lira.domain_privacy_table(drawn, {"B": clean}, "keyword", **settings)["B"]
    assert row == {
        "ratio": math.inf, "low": pytest.approx(3.283558, abs=1e-6), "high": math.inf,
        "bound": "lower", "target_rate": 0.95, "reference_rate": 0.0,
    }  # fmt: skip
    quiet = _frame(target_prompts, np.zeros(100, bool))
    row = lira.domain_privacy_table(quiet, {"B": clean}, "keyword", **settings)["B"]
    assert math.isnan(row["ratio"])
    assert (row["low"], row["high"], row["bound"]) == (0.0, math.inf, "none")


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


def test_c_hat_interval_is_the_inverse_of_the_swapped_ratios_where_the_reference_flags_less():
    # 12 prompts x 2 samples; the target flags 16 of 24, the reference 3 (a resample may draw
    # none of the reference's flags, where C = inf): the interval of C is computed as 1 / the
    # interval of reference / target, the same percentile interval, finite below.
    prompts = [f"p{i // 2}" for i in range(24)]
    target = np.array([i % 3 != 0 for i in range(24)])
    reference = np.zeros(24, bool)
    reference[[0, 9, 17]] = True
    every = np.ones(24, bool)
    settings = {"n_boot": 400, "seed": 1, "alpha": 0.1}
    c = lira.domain_privacy_interval(target, reference, every, every, prompts, prompts, **settings)
    swapped = lira.domain_privacy_interval(
        reference, target, every, every, prompts, prompts, **settings
    )
    assert c.effect == pytest.approx((16 / 24) / (3 / 24))
    assert swapped.effect == pytest.approx(3 / 16)
    assert c.low == pytest.approx(1 / swapped.high) and 1 < c.low < c.effect
    assert c.high == (math.inf if swapped.low == 0 else pytest.approx(1 / swapped.low))


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
