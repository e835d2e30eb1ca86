"""privleak.claims.procedures on hand-computable cases: Tango's score test (McNemar's at 0),
Clopper-Pearson, t, the studentized bootstrap against a naive loop over the same draws, the
percentile test, Welch, a union whose members must all decide, the envelope of certified bounds;
that every procedure's p-value is below alpha exactly when its interval excludes the null; and
that `ruled_out` is what benchmarks/coverage.csv measured; the runs' correction of a crossed
bootstrap's standard error; intervals cut to the parameter space."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from privleak.claims import procedures as pr

ROOT = Path(__file__).resolve().parents[1]


def test_tangos_score_test_by_hand():
    # 5 pairs favour the second setting, 1 the first, 4 concordant: at 0 the score statistic is
    # McNemar's (b - c) / sqrt(b + c) = 4 / sqrt(6)
    test = pr.tango(np.array([1.0] * 5 + [-1.0] + [0.0] * 4))
    assert test.effect == pytest.approx(0.4)
    assert test.p_value(0.0) == pytest.approx(2 * stats.norm.sf(4 / math.sqrt(6)))
    # at the interval's ends the statistic is the normal quantile (Tango 1998, eq. 3)
    low, high = test.interval(0.05)
    for end, sign in ((low, 1), (high, -1)):
        b, c, n = 5, 1, 10
        big_b = -b - c + (2 * n - b + c) * end
        q = (-big_b + math.sqrt(big_b**2 + 8 * n * c * end * (1 - end))) / (4 * n)
        z = (b - c - n * end) / math.sqrt(n * (2 * q + end * (1 - end)))
        assert z == pytest.approx(sign * stats.norm.isf(0.025), abs=1e-6)
    assert -1 < low < 0.4 < high < 1
    assert pr.tango(np.zeros(5)) == "no discordant pair among 5: no interval"


def test_clopper_pearson_by_hand():
    # 0 of 10: [0, 1 - 0.025^(1/10)]; 10 of 10: [0.025^(1/10), 1]
    none = pr.binomial_exact(np.zeros(10))
    assert none.interval(0.05) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))
    every = pr.binomial_exact(np.ones(10))
    assert every.interval(0.05) == pytest.approx((0.025 ** (1 / 10), 1.0))
    # p at 0.5: 2 (1/2)^10
    assert every.p_value(0.5) == pytest.approx(2 / 1024)


def test_the_t_procedure_by_hand():
    # values 1, 2, 3, 6: mean 3, sd sqrt(14 / 3), se sqrt(14 / 12)
    test = pr.t_mean(np.array([1.0, 2.0, 3.0, 6.0]))
    se = math.sqrt(14 / 12)
    assert (test.effect, test.se, test.df) == pytest.approx((3.0, se, 3))
    q = stats.t.ppf(0.975, 3)
    assert test.interval(0.05) == pytest.approx((3 - q * se, 3 + q * se))
    assert test.p_value(0.0) == pytest.approx(2 * stats.t.sf(3 / se, 3))


def test_the_cluster_t_procedure_by_hand():
    # rows 1, 3 | 2 | 6, 8 in 3 units: mean 20 / 5 = 4; the units' residual sums -4, -2, 6;
    # CR1 variance 3 / 2 x (16 + 4 + 36) / 5^2 = 84 / 25, on 3 - 1 degrees of freedom
    test = pr.t_mean(np.array([1.0, 3.0, 2.0, 6.0, 8.0]), np.array([0, 0, 1, 2, 2]))
    assert test.method == pr.CLUSTER_T
    assert (test.effect, test.se, test.df) == pytest.approx((4.0, math.sqrt(84 / 25), 2))
    assert test.p_value(0.0) == pytest.approx(2 * stats.t.sf(4 / math.sqrt(84 / 25), 2))


def test_crossed_runs_scale_the_bootstrap_se_by_r_over_r_minus_1():
    # draws -1, 0, 1, 2: sd sqrt(5 / 3); over 6 crossed runs the se is sqrt(5 / 3 * 6 / 5) = sqrt(2)
    draws = np.array([-1.0, 0.0, 1.0, 2.0])
    units_only = pr.bootstrap_t(0.5, draws, 5)
    crossed = pr.bootstrap_t(0.5, draws, 5, runs=6)
    assert (units_only.method, units_only.se) == (pr.BOOTSTRAP_T, pytest.approx(math.sqrt(5 / 3)))
    assert (crossed.method, crossed.se) == (pr.CROSSED_T, pytest.approx(math.sqrt(2)))
    with pytest.raises(ValueError, match="one training run"):
        pr.bootstrap_t(0.5, draws, 5, runs=1)


def test_an_interval_is_cut_to_the_parameter_space_and_its_p_values_stay():
    # t on 0.9, 1.0, 1.0, 0.5 (a mean of correlations): mean 0.85, sd sqrt(0.17 / 3)
    test = pr.t_mean(np.array([0.9, 1.0, 1.0, 0.5]))
    uncut = test.interval(0.05)
    assert uncut[1] > 1
    bounded = pr.Test(**{**test.__dict__, "bounds": (-1.0, 1.0)})
    assert bounded.interval(0.05) == (uncut[0], 1.0)
    assert bounded.p_value(0.0) == test.p_value(0.0)
    assert bounded.negated().interval(0.05) == (-1.0, -uncut[0])
    # on the log scale the bounds are the ratio's, and its inverse has the inverse bounds
    ratio = pr.Test(pr.CROSSED_T, math.log(0.8), se=0.5, df=5, log_scale=True, bounds=(0.0, 1.0))
    assert ratio.interval(0.05)[1] == 1.0
    assert ratio.negated().bounds == (1.0, math.inf)


def test_the_studentized_bootstrap_matches_a_naive_loop_over_the_same_draws():
    values = np.array([0.1, 0.4, 0.2, 1.9, 0.3, 0.6, 0.2, 3.1])
    test = pr.studentized(values, None, 500, 7, 0.05)
    assert test.method == pr.STUDENTIZED
    drawn = np.random.default_rng(7).integers(0, 8, (500, 8))
    pivots = sorted(
        (values[d].mean() - values.mean()) / (values[d].std(ddof=1) / math.sqrt(8)) for d in drawn
    )
    assert test.pivots == pytest.approx(pivots)
    se = values.std(ddof=1) / math.sqrt(8)
    k = math.ceil(0.05 * 500 / 2)  # 13: the 13th pivot from each end
    assert test.interval(0.05) == pytest.approx(
        (values.mean() - pivots[-k] * se, values.mean() - pivots[k - 1] * se)
    )
    # a right-skewed sample: the interval reaches further above the mean than below it
    low, high = test.interval(0.05)
    assert high - values.mean() > values.mean() - low


def test_the_percentile_test_inverts_the_percentile_interval():
    draws = np.arange(1.0, 201.0)  # 200 draws: k = ceil(0.05 * 200 / 2) = 5
    test = pr.percentile(100.0, draws)
    assert test.interval(0.05) == (5.0, 196.0)
    assert test.p_value(4.5) == pytest.approx(2 * 4 / 200)  # 4 draws at or below 4.5


def test_a_union_decides_only_where_every_member_does():
    narrow = pr.Test(pr.T_MEAN, 1.0, se=0.2, df=20)
    wide = pr.Test(pr.T_MEAN, 1.0, se=0.6, df=20)
    union = pr.both(pr.MEAN_BOTH, narrow, wide)
    assert union.interval(0.05) == pytest.approx(wide.interval(0.05))
    assert union.p_value(0.0) == pytest.approx(wide.p_value(0.0))
    assert pr.both(pr.MEAN_BOTH, narrow, "no spread") == "no spread"


def test_a_union_far_from_its_null_keeps_its_members_largest_p_value():
    """t = 126.3 / 8.24 = 15.3 on 31 degrees of freedom: p about 5e-16, too small for the t
    quantile at that level to be read back (1 - p / 2 rounds to 1), so the union's side is read
    off each member's statistic; members excluding the null on opposite sides never decide."""
    t = pr.Test(pr.T_MEAN, 126.3, se=8.24, df=31)
    pivots = tuple(np.sort(np.random.default_rng(0).standard_t(31, 2000)))
    studentized = pr.Test(pr.STUDENTIZED, 126.3, se=8.24, pivots=pivots, resamples=2000)
    union = pr.both(pr.MEAN_BOTH, t, studentized)
    assert union.p_value(0.0) == pytest.approx(2 * stats.t.sf(126.3 / 8.24, 31))
    assert 0 < union.p_value(0.0) < 1e-14 and union.side(0.0) == 1 and union.side(200.0) == -1
    above = pr.Test(pr.T_MEAN, 1.0, se=0.1, df=20)
    below = pr.Test(pr.T_MEAN, -1.0, se=0.1, df=20)
    assert pr.both(pr.MEAN_BOTH, above, below).p_value(0.0) == 1.0


def test_welch_by_hand():
    first, second = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0, 8.0])
    test = pr.welch(first, second)
    v1, v2 = 1.0 / 3, 20 / 3 / 4
    df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 3)
    assert (test.effect, test.se, test.df) == pytest.approx((-3.0, math.sqrt(v1 + v2), df))


def test_an_envelope_spans_its_bounds_t_intervals_and_its_p_value_needs_all_of_them():
    test = pr.Test(pr.BOOTSTRAP_T, -1.0, se=0.2, df=8, envelope=((-1.5, 0.2), (-0.6, 0.25)))
    q = stats.t.ppf(0.975, 8)
    assert test.interval(0.05) == pytest.approx((-1.5 - q * 0.2, -0.6 + q * 0.25))
    # the interval excludes 0 once the nearest bound's does: -0.6 / 0.25
    assert test.p_value(0.0) == pytest.approx(2 * stats.t.sf(0.6 / 0.25, 8))
    assert test.p_value(-0.8) == 1.0  # between the bounds: no level excludes it


def _tests(rng) -> list[pr.Test]:
    skewed = rng.exponential(size=9)
    found = [
        pr.t_mean(skewed),
        pr.t_mean(rng.normal(size=12), np.repeat(np.arange(4), 3)),
        pr.studentized(skewed, None, 400, 1, 0.05),
        pr.mean_both(skewed, None, 400, 1, 0.05),
        pr.percentile(0.3, rng.normal(0.3, 0.1, 300)),
        pr.tango(rng.choice([-1.0, 0.0, 1.0], 20, p=[0.1, 0.5, 0.4])),
        pr.binomial_exact((rng.random(15) < 0.3).astype(float)),
        pr.welch(rng.normal(size=6), rng.normal(1, 2, size=8)),
        pr.bootstrap_t(0.3, rng.normal(0.3, 0.1, 300), 7),
    ]
    far = rng.normal(30.0, 1.0, size=9)  # t about 90: p far below any float's 1 - p
    found.append(pr.mean_both(far, None, 400, 1, 0.05))
    log = pr.bootstrap_t(math.log(2.0), rng.normal(math.log(2.0), 0.4, 300), 5, runs=6)
    found.append(pr.Test(**{**log.__dict__, "log_scale": True}))
    return found


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_p_is_below_alpha_exactly_when_the_interval_excludes_the_null(alpha):
    rng = np.random.default_rng(0)
    for test in _tests(rng):
        low, high = test.interval(alpha)
        nulls = np.r_[np.linspace(low - 1, high + 1, 41), low - 1e-9, high + 1e-9, 0.0]
        if test.method == pr.TANGO:
            nulls = nulls[(nulls > -1) & (nulls < 1)]
        if test.method == pr.BINOMIAL_EXACT:
            nulls = np.linspace(0.01, 0.99, 50)
        if test.log_scale:
            nulls = nulls[nulls > 0]
        for null in nulls:
            excluded = null < low or null > high
            assert (test.p_value(float(null)) < alpha) == excluded, (test.method, null, low, high)


def _coverage() -> list[dict]:
    with (ROOT / "benchmarks" / "coverage.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_a_procedure_is_ruled_out_exactly_where_the_coverage_benchmark_fails():
    """ruled_out(p, n) says why wherever benchmarks/coverage.csv has procedure p failing at n on
    some shape of the rule (coverage < 0.93 or false decisions beyond 0.05), and only there; an n
    between measured ones takes the nearest measured below."""
    rows = [r for r in _coverage() if r["in_rule"] == "True" and r["procedure"] != "percentile"]
    fails: dict[tuple[str, int], bool] = {}
    for r in rows:
        key = (r["procedure"], int(r["n"]))
        fails[key] = fails.get(key, False) or r["passes"] != "True"
    for (procedure, n), failing in fails.items():
        assert bool(pr.ruled_out(procedure, n)) == failing, (procedure, n)
    t_cells = sorted(n for p, n in fails if p == pr.T_MEAN)
    between = next(n for n in range(t_cells[0], t_cells[-1]) if n not in t_cells)
    below = max(n for n in t_cells if n < between)
    assert bool(pr.ruled_out(pr.T_MEAN, between)) == fails[(pr.T_MEAN, below)]
    assert "from 6 units only" in pr.ruled_out(pr.T_MEAN, 3)
    assert pr.ruled_out("an exact procedure the table does not hold", 3) == ""


def test_every_procedure_the_claims_use_is_measured():
    measured = {r["procedure"] for r in _coverage()}
    claims = json.loads((ROOT / "metrics" / "claims.json").read_text())["claims"]
    used = {c["method"] for c in claims.values() if c["ci"][0] is not None}
    # certified bounds, and lower bounds with no procedure (S3's C where the reference never flags)
    assert used - measured <= {"certified (every unit)", "none"}, sorted(used - measured)
