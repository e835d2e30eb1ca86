"""The audit's statistics and accountants on hand-computable fixtures."""

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution
from scipy.optimize import brentq
from scipy.stats import binom, norm

from privleak.audit.accountants import (
    gaussian_mu,
    gaussian_pld_epsilon,
    gaussian_prv_epsilon,
    gaussian_rdp_epsilon,
)
from privleak.audit.bounds import (
    LN2,
    blackbox_audit,
    blackbox_epsilon,
    clopper_pearson,
    hockey_stick,
    loss_epsilon_bound,
)
from privleak.audit.table import statistical_tests
from privleak.errors import PrivleakError


def test_clopper_pearson_matches_the_closed_forms_at_the_edges():
    # 0 of n: the upper end solves (1 - p)^n = alpha / 2; n of n: the lower end p^n = alpha / 2.
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** (1 / 10)), 1.0)
    low, high = clopper_pearson(5, 10)
    # Each end leaves alpha / 2 in its binomial tail.
    assert binom.sf(4, 10, low) == pytest.approx(0.025)
    assert binom.cdf(5, 10, high) == pytest.approx(0.025)


def test_clopper_pearson_rejects_bad_counts():
    with pytest.raises(PrivleakError, match="need 0 <= 11 <= 10"):
        clopper_pearson(11, 10)
    with pytest.raises(PrivleakError, match="alpha"):
        clopper_pearson(1, 10, alpha=1.5)


def test_loss_epsilon_bound_takes_the_order_statistic_the_binomial_tail_allows():
    losses = np.arange(100, dtype=float)  # L_(k) = 100 - k
    # delta 0: the top loss already has P(L >= L_(1)) > 0 at any confidence.
    assert loss_epsilon_bound(losses, 0.0) == pytest.approx(99 - LN2)
    # delta 0.01: the smallest k with P(Binom(100, 2 delta) >= k) < alpha (the Beta quantile of
    # the k-th order statistic exceeds 2 delta exactly then).
    k = next(k for k in range(1, 101) if binom.sf(k - 1, 100, 0.02) < 0.05)
    assert loss_epsilon_bound(losses, 0.01) == pytest.approx(100 - k - LN2)


def test_loss_epsilon_bound_is_nan_when_too_few_samples_can_say_anything():
    assert math.isnan(loss_epsilon_bound([5.0], 0.1))


def test_loss_epsilon_bound_holds_for_a_mechanism_with_known_epsilon():
    # Randomized response at epsilon 1: L is +1 with probability e/(1+e), -1 otherwise; no
    # sample can push the bound above the true epsilon.
    rng = np.random.default_rng(0)
    for _ in range(20):
        losses = np.where(rng.random(200) < math.e / (1 + math.e), 1.0, -1.0)
        assert loss_epsilon_bound(losses, 1e-3) <= 1.0


def test_hockey_stick_estimate_and_its_interval_by_hand():
    losses = [0.0, 1.0, 2.0, 3.0]
    h = hockey_stick(losses, 1.0)
    assert h.estimate == pytest.approx(((1 - math.exp(-1)) + (1 - math.exp(-2))) / 4)
    # two of four losses exceed 1 + ln 2 and two exceed 1
    assert h.low == pytest.approx(clopper_pearson(2, 4)[0] / 2)
    assert h.high == pytest.approx(clopper_pearson(2, 4)[1])


def test_blackbox_epsilon_by_hand():
    # A test that always fires with the canary and never without it, 50 trials a side.
    tpr_low, fpr_high = 0.025 ** (1 / 50), 1 - 0.025 ** (1 / 50)
    assert blackbox_epsilon(50, 50, 0, 50, 0.0, 0.05) == pytest.approx(math.log(tpr_low / fpr_high))
    # With delta subtracted from the lower TPR.
    assert blackbox_epsilon(50, 50, 0, 50, 0.1, 0.05) == pytest.approx(
        math.log((tpr_low - 0.1) / fpr_high)
    )
    # A test that cannot tell the sides apart proves nothing positive.
    assert blackbox_epsilon(25, 50, 25, 50, 0.0, 0.05) < 0


def test_blackbox_epsilon_reads_each_event_each_way_round():
    # A test that fires only without the canary is as telling as one that fires only with it,
    # read the other way round (D over D') or through its silence (D' over D).
    forward = blackbox_epsilon(50, 50, 0, 50, 0.0, 0.05)
    assert blackbox_epsilon(0, 50, 50, 50, 0.0, 0.05, combination=1) == pytest.approx(forward)
    assert blackbox_epsilon(0, 50, 50, 50, 0.0, 0.05, combination=2) == pytest.approx(forward)
    assert blackbox_epsilon(0, 50, 50, 50, 0.0, 0.05) == -math.inf


def test_blackbox_audit_chooses_on_even_samples_and_counts_odd_ones():
    inside = [1.0, 0.0] * 20  # even samples all 1, odd samples all 0
    outside = [0.0] * 40
    test = blackbox_audit(inside, outside, 0.0)
    assert test.threshold == 1.0 and test.combination == "fires, D' over D"
    assert (test.hits_in, test.trials_in, test.hits_out, test.trials_out) == (0, 20, 0, 20)
    assert test.epsilon_low < 0  # the held-out half shows no signal


def test_blackbox_audit_stays_below_a_known_epsilon():
    # Randomized response at epsilon 1 with exactly its expected counts.
    n, p = 2000, math.e / (1 + math.e)
    inside = [1.0] * round(n * p) + [0.0] * round(n * (1 - p))
    outside = [1.0] * round(n * (1 - p)) + [0.0] * round(n * p)
    rng = np.random.default_rng(1)
    test = blackbox_audit(rng.permutation(inside), rng.permutation(outside), 0.0)
    assert 0.5 < test.epsilon_low <= 1.0


def _analytic_gaussian_epsilon(mu: float, delta: float) -> float:
    """Balle & Wang's exact delta(epsilon) of the Gaussian mechanism, solved for epsilon."""

    def gap(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(gap, 0.0, 100.0)


def test_gaussian_mu_composes_steps():
    assert gaussian_mu([1.0, 2.0], [1.0, 1.0]) == pytest.approx(math.sqrt(5))
    assert gaussian_mu([0.5], [0.25]) == pytest.approx(2.0)
    with pytest.raises(PrivleakError, match="sigma > 0"):
        gaussian_mu([1.0], [0.0])


def test_the_accountants_agree_with_the_exact_gaussian_and_rdp_is_an_upper_bound():
    mu, delta = 2.0, 1e-5
    exact = _analytic_gaussian_epsilon(mu, delta)
    assert gaussian_pld_epsilon(mu, delta) == pytest.approx(exact, rel=1e-2)
    assert gaussian_prv_epsilon(mu, delta) == pytest.approx(exact, rel=1e-2)
    assert gaussian_pld_epsilon(mu, delta) >= exact - 1e-9  # pessimistic discretisation
    assert gaussian_rdp_epsilon(mu, delta) > exact


def test_one_gaussian_of_mu_equals_composing_the_steps_one_by_one():
    sensitivity, sigma, delta = [1.0, 0.5, 0.8], [1.5, 0.7, 2.0], 1e-5
    composed = None
    for d, s in zip(sensitivity, sigma, strict=True):
        step = privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=s, sensitivity=d, value_discretization_interval=1e-3
        )
        composed = step if composed is None else composed.compose(step)
    mu = gaussian_mu(sensitivity, sigma)
    assert gaussian_pld_epsilon(mu, delta) == pytest.approx(
        composed.get_epsilon_for_delta(delta), rel=1e-2
    )


@pytest.mark.parametrize(
    ("inside", "outside", "sampled", "relaxed", "tests"),
    [
        (6, 6, True, False, 5),  # DP-RAG: 2 directions x (loss bound, hockey-stick) + black-box
        (6, 6, True, True, 7),  # PAD: + the γ-relaxed loss bound in each direction
        (6, 6, False, False, 1),  # a pure per-token claim (bounded CID): the black-box test only
        (1, 6, True, False, 4),  # one sample inside: no black-box test
        (0, 6, True, True, 3),  # one direction sampled
        (0, 0, True, True, 0),
    ],
)
def test_the_flag_shares_alpha_over_every_statistical_test_it_takes(
    inside, outside, sampled, relaxed, tests
):
    assert statistical_tests(inside, outside, sampled, relaxed) == tests


def test_bonferroni_keeps_the_flag_of_a_correct_gaussian_at_alpha():
    """A correct Gaussian mechanism audited by two one-sided sampled-loss bounds, each at
    alpha / 2: the flag (either bound above the true ε) fires in at most alpha of the trials."""
    mu, delta, alpha, m, trials = 1.0, 1e-3, 0.05, 400, 400
    true_eps = brentq(
        lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta,
        0.0,
        20.0,
    )
    rng = np.random.default_rng(0)
    flags = 0
    for _ in range(trials):
        bounds = [loss_epsilon_bound(rng.normal(mu**2 / 2, mu, m), delta, alpha / 2)
                  for _ in range(2)]  # fmt: skip
        flags += any(b > true_eps for b in bounds if not math.isnan(b))
    assert flags / trials <= alpha
