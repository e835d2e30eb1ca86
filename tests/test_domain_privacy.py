"""Domain privacy C (privleak.domain_privacy) on hand-computable inputs: the ratio of flagged
rates, its zero denominators, the bootstrap over prompts (runs crossed), the bound where the
reference never flags, and the per-target table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privleak.domain_privacy as dp
from privleak.errors import PrivleakError

BOOT = {"n_boot": 200, "seed": 0, "alpha": 0.1}


def test_domain_privacy_ratio_of_flagged_rates():
    # Target: 3 of 10 non-empty samples flagged (an 11th sample is flagged but empty).
    target_flagged, target_nonempty = [1] * 3 + [0] * 7 + [1], [1] * 10 + [0]
    reference_flagged, reference_nonempty = [1] + [0] * 7, [1] * 8
    got = dp.domain_privacy(target_flagged, reference_flagged, target_nonempty, reference_nonempty)
    assert got.ratio == pytest.approx(0.3 / 0.125)
    assert (got.target_flagged, got.target_nonempty) == (3, 10)
    assert (got.reference_flagged, got.reference_nonempty) == (1, 8)


def test_domain_privacy_zero_denominators():
    never = dp.domain_privacy([1, 0], [0, 0], [1, 1], [1, 1])
    assert never.ratio == math.inf and never.reference_flagged == 0
    assert math.isnan(dp.domain_privacy([0, 0], [0, 0], [1, 1], [1, 1]).ratio)
    assert math.isnan(dp.domain_privacy([1], [1], [0], [1]).ratio)
    smoothed = dp.domain_privacy([1, 0], [0, 0], [1, 1], [1, 1], pseudocount=0.5)
    assert smoothed.ratio == pytest.approx((1.5 / 3) / (0.5 / 3))
    with pytest.raises(PrivleakError, match="pseudocount must be >= 0"):
        dp.domain_privacy([1], [1], [1], [1], pseudocount=-1)
    with pytest.raises(PrivleakError, match="reference_flagged has shape"):
        dp.domain_privacy([1], [1, 0], [1], [1])


def homogeneous_prompts(n_prompts=10, samples=10):
    """Samples of a prompt all flagged or all clean: the target's prompts 0-4 and the reference's
    prompts 5-7 are flagged."""
    prompts = np.repeat(np.arange(n_prompts), samples)
    reference = ((prompts >= 5) & (prompts < 8)).astype(int)
    return prompts, (prompts < 5).astype(int), reference, np.ones(len(prompts))


def test_domain_privacy_bootstrap_resamples_prompts_not_samples():
    prompts, target, reference, nonempty = homogeneous_prompts()
    kwargs = dict(n_boot=400, seed=0, pseudocount=0.5)
    by_prompt = dp.domain_privacy_interval(
        target, reference, nonempty, nonempty, prompts, prompts, **kwargs
    )
    point = dp.domain_privacy(target, reference, nonempty, nonempty, pseudocount=0.5)
    assert by_prompt.effect == pytest.approx(point.ratio) and by_prompt.units == 10
    # The same samples as independent units (every sample its own prompt) look far surer.
    by_sample = dp.domain_privacy_interval(
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
    few = dp.domain_privacy_interval(*args, n_boot=200, seed=0, pseudocount=0.5, min_units=11)
    assert math.isnan(few.low) and few.note == "10 units < min_units 11: no interval"
    interval = dp.domain_privacy_interval(*args, n_boot=200, seed=0, pseudocount=0.5)
    # the procedure runs on log C and its interval is exponentiated
    assert interval.low < interval.effect < interval.high
    assert interval.test.log_scale and interval.test.method.endswith("(log scale)")
    # C's null 1 is tested on log C: p < 0.05 exactly when the interval excludes 1
    assert (interval.test.p_value(1.0) < 0.05) == (interval.low > 1 or interval.high < 1)


def test_domain_privacy_bootstrap_without_finite_ratio_gives_no_interval():
    prompts, target, _, nonempty = homogeneous_prompts()
    clean = np.zeros_like(target)
    got = dp.domain_privacy_interval(
        target, clean, nonempty, nonempty, prompts, prompts, n_boot=200, seed=0
    )
    assert got.effect == math.inf and math.isnan(got.low) and "not finite" in got.note
    with pytest.raises(PrivleakError, match="100 target samples for 3 target_prompt_ids"):
        dp.domain_privacy_interval(
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
    crossed = dp.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts, target_runs=run_of, **kwargs
    )
    pooled = dp.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts, **kwargs
    )
    point = dp.domain_privacy(flagged, reference, ones, nonempty, pseudocount=0.5)
    assert crossed.effect == pytest.approx(point.ratio) == pytest.approx(pooled.effect)
    assert math.isnan(pooled.low) and "give the same effect" in pooled.note
    assert crossed.low < crossed.effect < crossed.high
    few = dp.domain_privacy_interval(
        flagged, reference, ones, nonempty, target_prompts, prompts,
        target_runs=run_of, **kwargs | {"min_units": 7},
    )  # fmt: skip
    assert math.isnan(few.low) and "runs" in few.note
    with pytest.raises(PrivleakError, match="300 target samples for 2 target_runs"):
        dp.domain_privacy_interval(
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
    # Target: 19 of 20 prompts flagged, rate 0.95; its lower limit (alpha 0.1) is the smaller of
    # the percentile's and the bootstrap-SE t's, both of which must decide. A resample of the 20
    # prompts holds K copies of the clean one, K ~ Bin(20, 1/20), and reads 1 - K / 20; P(K <= 2)
    # = 0.92 < 0.95 < P(K <= 3) = 0.98, so the 5th percentile is 1 - 3 / 20 = 0.85, below the t
    # limit 0.95 - t_19,0.95 x ~0.0487 = 0.866. Reference: 0 flagged of 10 prompts, exact upper
    # limit 1 - 0.05 ** (1 / 10) = 0.2588656. C >= 0.85 / 0.2588656 = 3.283558.
    bound = dp.domain_privacy_bound(*clean_reference(), n_boot=1000, seed=0, alpha=0.1)
    assert bound == pytest.approx(0.85 / (1 - 0.05 ** (1 / 10)))
    assert 0.95 - stats.t.ppf(0.95, 19) * math.sqrt(0.95 * 0.05 / 20) > 0.85
    # The reference's empty samples are no evidence: only prompts with a non-empty sample count.
    target, reference, target_nonempty, _, target_prompts, reference_prompts = clean_reference()
    half_empty = (reference_prompts < 5).astype(int)  # 5 prompts with non-empty samples
    fewer = dp.domain_privacy_bound(
        target, reference, target_nonempty, half_empty, target_prompts, reference_prompts,
        n_boot=1000, seed=0, alpha=0.1,
    )  # fmt: skip
    assert fewer == pytest.approx(bound * (1 - 0.05 ** (1 / 10)) / (1 - 0.05 ** (1 / 5)))
    # A target that never flags is bounded by 0 only.
    assert dp.domain_privacy_bound(
        np.zeros(100, int), reference, target_nonempty, np.ones(50), target_prompts,
        reference_prompts, n_boot=1000, seed=0,
    ) == 0.0  # fmt: skip
    with pytest.raises(PrivleakError, match="this one flags 1 non-empty samples"):
        dp.domain_privacy_bound(
            target, np.r_[1, reference[1:]], target_nonempty, np.ones(50), target_prompts,
            reference_prompts, n_boot=1000, seed=0,
        )  # fmt: skip


def test_domain_privacy_interval_gives_the_bound_when_the_reference_never_flags():
    args = clean_reference()
    kwargs = dict(n_boot=1000, seed=0, alpha=0.1)
    bounded = dp.domain_privacy_interval(*args, **kwargs, lower_bound_if_reference_clean=True)
    assert bounded.effect == bounded.high == math.inf and bounded.units == 20
    bound = dp.domain_privacy_bound(*args, **kwargs)
    assert bounded.low == pytest.approx(bound) and "lower bound" in bounded.note
    assert math.isnan(dp.domain_privacy_interval(*args, **kwargs).low)  # default: no interval


# ---------------------------------------------------------------- tables of one target's samples


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
    row = dp.domain_privacy_table(drawn, {"B": reference}, "keyword", **BOOT)["B"]
    assert list(row) == ["ratio", "low", "high", "bound", "target_rate", "reference_rate"]
    assert (row["ratio"], row["bound"]) == (2.0, "")
    assert (row["target_rate"], row["reference_rate"]) == (0.2, 0.1)
    # The reference's empty sample neither flags nor counts: 1 of 3 non-empty samples.
    small = _frame(["p1", "p1", "p2", "p2"], [True, True, False, False])
    reference = _frame(["p1", "p1", "p2", "p2"], [True, False, False, False],
                       [False, False, False, True])  # fmt: skip
    row = dp.domain_privacy_table(small, {"B": reference}, "keyword", **BOOT)["B"]
    assert row["ratio"] == pytest.approx(0.5 / (1 / 3)) == pytest.approx(1.5)


def test_privacy_table_bounds_a_ratio_the_reference_never_flags_and_leaves_none_open():
    target, reference, _, _, target_prompts, reference_prompts = clean_reference()
    drawn, clean = _frame(target_prompts, target), _frame(reference_prompts, reference)
    settings = {"n_boot": 1000, "seed": 0, "alpha": 0.1}
    row = dp.domain_privacy_table(drawn, {"B": clean}, "keyword", **settings)["B"]
    bound = dp.domain_privacy_bound(*clean_reference(), **settings)
    assert row == {
        "ratio": math.inf, "low": pytest.approx(bound), "high": math.inf,
        "bound": "lower", "target_rate": 0.95, "reference_rate": 0.0,
    }  # fmt: skip
    quiet = _frame(target_prompts, np.zeros(100, bool))
    row = dp.domain_privacy_table(quiet, {"B": clean}, "keyword", **settings)["B"]
    assert math.isnan(row["ratio"])
    assert (row["low"], row["high"], row["bound"]) == (0.0, math.inf, "none")


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
    c = dp.domain_privacy_interval(target, reference, every, every, prompts, prompts, **settings)
    swapped = dp.domain_privacy_interval(
        reference, target, every, every, prompts, prompts, **settings
    )
    assert c.effect == pytest.approx((16 / 24) / (3 / 24))
    assert swapped.effect == pytest.approx(3 / 16)
    assert c.low == pytest.approx(1 / swapped.high) and 1 < c.low < c.effect
    assert c.high == (math.inf if swapped.low == 0 else pytest.approx(1 / swapped.low))
