"""privleak.claims.stats on constructed data: the procedure each effect gets, interval coverage,
resampling by unit, by stratum and by training run, determinism, degenerate inputs, and the effect
helpers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privleak import claims as cl
from privleak.errors import PrivleakError

NAN = float("nan")


def boot(values, statistic=np.mean, **options):
    return cl.bootstrap(values, statistic, **({"n_boot": 1000, "seed": 0} | options))


# ---------------------------------------------------------------- bootstrap


def test_a_mean_over_units_needs_t_and_the_studentized_bootstrap_to_agree():
    x = np.random.default_rng(2).exponential(1.0, 20)
    estimate = boot(x, n_boot=2000)
    assert estimate.test.method == "t and studentized bootstrap (both must decide)"
    t, pivoted = estimate.test.members
    assert (t.method, t.df) == ("t", 19) and pivoted.method == "studentized bootstrap"
    assert estimate.effect == pytest.approx(x.mean())
    half = stats.t.ppf(0.975, 19) * x.std(ddof=1) / math.sqrt(20)
    assert t.interval(0.05) == pytest.approx((x.mean() - half, x.mean() + half))
    assert t.p_value(0.0) == pytest.approx(stats.ttest_1samp(x, 0.0).pvalue)
    assert estimate.low == min(t.interval(0.05)[0], pivoted.interval(0.05)[0])
    assert estimate.test.p_value(0.5) == max(t.p_value(0.5), pivoted.p_value(0.5))


def test_a_mean_over_rows_of_units_gets_the_cluster_robust_t():
    # 4 units of 1, 2, 3 and 2 rows: the mean over rows is a ratio estimator; CR1 over 4 units.
    values = np.array([1.0, 2.0, 4.0, 0.0, 3.0, 5.0, 1.0, 1.0])
    groups = np.array([0, 1, 1, 2, 2, 2, 3, 3])
    estimate = boot(values, groups=groups)
    mean = values.mean()  # 17 / 8
    sums = np.bincount(groups, weights=values - mean)
    se = math.sqrt(4 / 3 * (sums**2).sum() / 8**2)
    t = estimate.test.members[0] if estimate.test.members else estimate.test
    assert t.method == "cluster t" and t.df == 3
    assert t.se == pytest.approx(se)
    assert estimate.units == 4


def test_skewed_small_samples_keep_their_coverage():
    rng = np.random.default_rng(3)
    covered = 0
    for i in range(400):  # skewed data, n = 12: the true mean is 1
        estimate = boot(rng.exponential(1.0, 12), seed=i)
        covered += estimate.low < 1.0 < estimate.high
    assert 0.91 <= covered / 400 <= 0.99  # the old percentile bootstrap: 0.87 (bench_coverage)


def test_paired_binary_outcomes_get_tangos_score_test():
    # 5 of 6 discordant pairs favour the second setting, 1 the first, 4 concordant.
    differences = np.array([1, 1, 1, 1, 1, -1, 0, 0, 0, 0.0])
    estimate = boot(differences, binary="paired")
    assert estimate.test.method == "Tango score (McNemar)"
    # at 0: McNemar's (b - c) / sqrt(b + c)
    assert estimate.test.p_value(0.0) == pytest.approx(2 * stats.norm.sf(4 / math.sqrt(6)))
    assert estimate.low < 0.4 < estimate.high


def test_a_share_of_binary_outcomes_gets_clopper_pearson():
    outcomes = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0.0])
    estimate = boot(outcomes, binary="share")
    assert estimate.test.method == "exact binomial (Clopper-Pearson)"
    exact = stats.binomtest(2, 10, 0.5)
    assert (estimate.low, estimate.high) == pytest.approx(tuple(exact.proportion_ci(0.95, "exact")))
    # central p: 2 P(X <= 2 | Bin(10, 1/2)) = 2 * 56 / 1024
    assert estimate.test.p_value(0.5) == pytest.approx(112 / 1024)
    with pytest.raises(PrivleakError, match="values in {0, 1}"):
        boot(np.array([0.0, 0.5, 1.0]), binary="share")


def test_a_two_sample_contrast_gets_welchs_t():
    first, second = np.array([3.0, 5.0, 4.0, 6.0]), np.array([1.0, 2.0, 1.5, 0.5, 2.5])
    rows, strata = cl.two_samples(first, second)
    estimate = boot(rows, cl.mean_contrast, strata=strata, min_units=2)
    welch = stats.ttest_ind(first, second, equal_var=False)
    assert estimate.test.method == "Welch t"
    assert estimate.test.p_value(0.0) == pytest.approx(welch.pvalue)
    low, high = welch.confidence_interval(0.95)
    assert (estimate.low, estimate.high) == pytest.approx((low, high))


def test_any_other_statistic_needs_the_bootstrap_se_t_and_the_percentile_to_agree():
    rows = np.random.default_rng(5).normal(size=(15, 2)) @ [[1.0, 0.6], [0.0, 0.8]]
    rho = boot(rows, lambda r: cl.spearman(r[:, 0], r[:, 1]), n_boot=500)
    assert rho.test.method == "percentile and bootstrap-SE t (both must decide)"
    t, percentile = rho.test.members
    assert (t.method, t.df, t.resamples) == ("bootstrap-SE t", 14, 500)
    half = stats.t.ppf(0.975, 14) * t.se
    assert t.interval(0.05) == pytest.approx((rho.effect - half, rho.effect + half))
    assert percentile.method == "percentile bootstrap"
    assert (rho.low, rho.high) == (
        min(t.interval(0.05)[0], percentile.interval(0.05)[0]),
        max(t.interval(0.05)[1], percentile.interval(0.05)[1]),
    )
    assert (rho.test.p_value(0.0) < 0.05) == (rho.low > 0 or rho.high < 0)


def test_bounds_cut_the_interval_to_the_parameter_space():
    # eight correlations near 1: t's upper end passes 1, the correlation's cannot
    values = np.array([0.95, 1.0, 0.6, 1.0, 0.9, 1.0, 0.7, 1.0])
    free, bounded = boot(values), boot(values, bounds=cl.PLUS_MINUS_ONE)
    assert free.high > 1 and bounded.high == 1.0 and bounded.low == free.low
    assert bounded.test.p_value(0.0) == free.test.p_value(0.0)


def test_groups_resample_whole_units_so_pairs_stay_together():
    rng = np.random.default_rng(0)
    units = np.repeat(np.arange(40), 2)
    setting = np.tile([0, 1], 40)
    level = rng.normal(0, 10, 40)  # large between-unit spread, small paired effect
    y = level[units] + 0.3 * setting + rng.normal(0, 0.1, 80)
    rows = np.c_[units, setting, y]
    balanced = []

    def paired_effect(sample):
        # every drawn unit brings both of its settings: per unit, as many 0s as 1s
        zeros = np.bincount(sample[sample[:, 1] == 0, 0].astype(int), minlength=40)
        ones = np.bincount(sample[sample[:, 1] == 1, 0].astype(int), minlength=40)
        balanced.append(bool((zeros == ones).all()))
        return sample[sample[:, 1] == 1, 2].mean() - sample[sample[:, 1] == 0, 2].mean()

    paired = boot(rows, paired_effect, groups=units)
    assert all(balanced) and len(balanced) >= 1000
    assert paired.units == 40
    assert paired.low > 0.2 and paired.high < 0.4
    unpaired = boot(rows, paired_effect)  # rows resampled one by one: pairs broken
    assert not all(balanced)
    assert unpaired.units == 80
    assert unpaired.high - unpaired.low > 10 * (paired.high - paired.low)


def test_strata_keep_each_sample_size_in_every_resample():
    rows, strata = cl.two_samples(np.arange(10.0) + 5, np.arange(7.0))
    sizes = []

    def contrast(sample):
        sizes.append(int((sample[:, 0] == 1).sum()))
        return cl.mean_contrast(sample)

    estimate = boot(rows, contrast, strata=strata)
    assert set(sizes) == {10}
    assert estimate.effect == pytest.approx(9.5 - 3.0)
    assert estimate.low > 0


def test_groups_and_strata_together_resample_units_within_strata():
    groups = np.repeat(np.arange(12), 3)
    strata = (groups >= 6).astype(int)
    values = np.c_[strata, groups + np.tile([0.0, 0.1, 0.2], 12)]
    estimate = boot(values, cl.mean_contrast, groups=groups, strata=strata)
    assert estimate.units == 12
    assert estimate.low > 0
    with pytest.raises(PrivleakError, match="strata must be constant within each unit"):
        boot(values, cl.mean_contrast, groups=groups, strata=np.arange(36) % 2)


def crossed(run_effects, unit_effects, settings=1):
    """Rows of a balanced runs x units design (value = run effect + unit effect, one row per
    setting): values, unit labels, run labels."""
    runs, units, _ = np.meshgrid(
        np.arange(len(run_effects)), np.arange(len(unit_effects)), np.arange(settings),
        indexing="ij",
    )  # fmt: skip
    values = np.asarray(run_effects)[runs] + np.asarray(unit_effects)[units]
    return values.ravel(), units.ravel(), runs.ravel()


def test_runs_carry_the_training_noise_that_units_alone_miss():
    # Units agree within a run; the runs disagree. Resampling units alone sees no spread at all;
    # the crossed bootstrap's interval is the one of the run means.
    run_effects = [0.1, 0.5, -0.2, 0.3, 0.9, 0.0, 0.4, -0.1]
    values, units, runs = crossed(run_effects, np.zeros(20), settings=2)
    alone = boot(values, groups=units)
    assert math.isnan(alone.low) and "give the same value" in alone.note
    both = boot(values, groups=units, runs=runs, n_boot=2000)
    over_runs = boot(np.asarray(run_effects)).test.members[0]  # t over the 8 run means
    assert both.effect == pytest.approx(np.mean(run_effects))
    assert both.test.method == "bootstrap-SE t, runs x units"
    assert both.units == 20 and both.test.df == 7  # the runs' degrees of freedom
    # the bootstrap's plug-in standard error, sqrt((R - 1) / R) of t's, scaled by sqrt(R / (R - 1))
    # over the R = 8 runs: t's over the run means
    assert both.test.se == pytest.approx(over_runs.se, rel=0.05)


def test_runs_and_units_are_both_resampled():
    # Both factors vary: the crossed interval is wider than either factor's alone.
    rng = np.random.default_rng(3)
    values, units, runs = crossed(rng.normal(size=8), rng.normal(size=30))
    se = {}
    for name, options in {
        "units": {"groups": units},
        "runs": {"groups": runs},
        "both": {"groups": units, "runs": runs},
    }.items():
        test = boot(values, **options).test
        se[name] = (test.members[0] if test.members else test).se  # t's, or the crossed one's
    assert se["both"] > max(se["units"], se["runs"])


def test_runs_cross_strata_and_drawn_cells_keep_their_rows():
    # Two samples of units (strata) under 6 runs; a run shifts both samples alike, so the
    # contrast does not depend on the run and stays near 10.
    rows, strata = cl.two_samples(np.arange(10.0) + 10, np.arange(10.0))
    values = np.tile(rows, (6, 1)) + np.repeat(np.arange(6.0), 20)[:, None] * [0.0, 1.0]
    units = np.tile(np.arange(20), 6)
    runs = np.repeat(np.arange(6), 20)
    sizes = []

    def contrast(sample):
        sizes.append(len(sample))
        return cl.mean_contrast(sample)

    estimate = boot(values, contrast, groups=units, strata=np.tile(strata, 6), runs=runs)
    assert set(sizes) == {120}
    assert estimate.effect == pytest.approx(10.0)
    assert 5 < estimate.low < 10 < estimate.high < 15


def test_too_few_runs_or_an_unbalanced_design_give_no_interval_or_one_line():
    values, units, runs = crossed([0.1, 0.4, 0.2], np.arange(10.0))
    few = boot(values, groups=units, runs=runs, min_units=6)
    assert math.isnan(few.low) and "3 training runs < min_units 6" in few.note
    with pytest.raises(PrivleakError, match="runs x groups must be balanced"):
        boot(values[:-1], groups=units[:-1], runs=runs[:-1])
    with pytest.raises(PrivleakError, match="runs needs groups"):
        boot(values, runs=runs)


def test_same_seed_same_interval_other_seed_other_draws():
    x = np.random.default_rng(1).normal(size=(50, 2))
    spread = lambda r: float(np.std(r[:, 0] - r[:, 1]))  # noqa: E731
    assert boot(x, spread, seed=11) == boot(x, spread, seed=11)
    assert boot(x, spread, seed=11).low != boot(x, spread, seed=12).low


@pytest.mark.parametrize(
    "values, note",
    [
        ([], "no units"),
        ([2.5], "1 units < min_units 2"),
        ([1.0] * 10, "all 10 units give the same value"),
        ([1.0, NAN, 2.0, 3.0], "1 non-finite values"),
        ([1.0, np.inf, 2.0, 3.0], "1 non-finite values"),
    ],
)
def test_degenerate_inputs_give_no_interval_and_a_note(values, note):
    estimate = boot(values)
    assert math.isnan(estimate.low) and math.isnan(estimate.high)
    assert note in estimate.note
    claim = cl.judge(
        "x", paper="P", quote="q", where="w", effect_name="e", direction="+", estimate=estimate,
        unit="units",
    )  # fmt: skip
    assert claim.verdict == cl.INCONCLUSIVE
    assert note in claim.note


def test_a_statistic_that_fails_on_some_resamples_gives_no_interval():
    x = np.arange(1.0, 11.0)
    estimate = boot(x, lambda s: s.mean() if 10 in s else NAN)  # NaN when 10 is not drawn
    assert estimate.effect == 5.5
    assert math.isnan(estimate.low) and "resamples give no finite effect" in estimate.note


def test_min_units_is_a_floor_per_stratum():
    x = np.arange(5.0) + 1
    assert "5 units < min_units 6" in boot(x, min_units=6).note
    assert boot(np.arange(6.0) + 1, min_units=6).low > 0
    rows, strata = cl.two_samples(np.arange(8.0), np.arange(3.0))
    assert (
        "3 units in a stratum < min_units 6"
        in boot(rows, cl.mean_contrast, strata=strata, min_units=6).note
    )


@pytest.mark.parametrize(
    "options, match",
    [
        ({"n_boot": 10}, "claims.n_boot must be an int >= 100; got 10"),
        ({"alpha": 0.7}, r"claims.alpha must be in \(0, 0.5\); got 0.7"),
        ({"min_units": 1}, "claims.min_units must be an int >= 2; got 1"),
        ({"binary": "counts"}, "binary must be one of"),
    ],
)
def test_bad_settings_are_one_line_errors(options, match):
    with pytest.raises(PrivleakError, match=match) as info:
        boot(np.arange(10.0), **options)
    assert "\n" not in str(info.value)


def test_groups_of_the_wrong_length_are_an_error():
    with pytest.raises(PrivleakError, match="groups has 3 labels for 4 rows"):
        boot(np.arange(4.0), groups=[0, 0, 1])


# ---------------------------------------------------------------- effect helpers


def test_spearman_and_slope():
    assert cl.spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    assert cl.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert cl.spearman([1, 2, 3], [5, 5, 5]) == 0.0  # constant: no monotone association
    assert cl.slope([0, 1, 2], [1, 3, 5]) == pytest.approx(2.0)
    with pytest.raises(PrivleakError, match="slope needs >= 2 distinct x"):
        cl.slope([1, 1], [0, 1])


def test_settings_matrix_paired_differences_and_unit_trends():
    frame = pd.DataFrame(
        {
            "unit": ["a", "a", "a", "b", "b", "c"],
            "lam": [0.5, 1.0, 1.5, 0.5, 1.5, 0.5],
            "tau": [1.0, 2.0, 4.0, 3.0, 2.0, 7.0],
        }
    )
    matrix = cl.settings_matrix(frame, "unit", "lam", "tau")
    assert list(matrix.columns) == [0.5, 1.0, 1.5]
    diffs = cl.paired_differences(matrix, 0.5, 1.5)
    assert diffs.to_dict() == {"a": 3.0, "b": -1.0}  # c lacks λ = 1.5: dropped
    trends = cl.unit_trends(matrix, cl.slope)
    assert trends.to_dict() == pytest.approx({"a": 3.0, "b": -1.0})  # c has one point: dropped
    logs = cl.unit_trends(matrix, cl.spearman, x=np.log([0.5, 1.0, 1.5]))
    assert logs.to_dict() == pytest.approx({"a": 1.0, "b": -1.0})


def test_two_samples_and_mean_contrast_give_a_difference_of_proportions():
    rows, strata = cl.two_samples([1, 1, 0, 1], [0, 0, 1, 0, 0])
    assert rows.shape == (9, 2) and list(strata) == [1] * 4 + [0] * 5
    assert cl.mean_contrast(rows) == pytest.approx(0.75 - 0.2)


def test_worst_case_checks_every_unit():
    held = cl.worst_case([0.3, 0.1, 0.2], "checks")
    assert (held.effect, held.low, held.high, held.units) == (0.1, 0.1, 0.1, 3)
    broken = cl.worst_case([0.3, -0.01] + [0.5] * 100, "checks")
    assert broken.low == -0.01 and "1 of 102 checks violate" in broken.note
    judged = [
        cl.judge("g", paper="P", quote="q", where="w", effect_name="e", direction="+",
                 estimate=e, unit="checks")
        for e in (held, broken)
    ]  # fmt: skip
    assert [c.verdict for c in judged] == [cl.REPRODUCED, cl.CONTRADICTED]
    assert not any(c.adjustable for c in judged)  # a guarantee: outside multiplicity adjustment
    assert math.isnan(cl.worst_case([], "checks").effect)
