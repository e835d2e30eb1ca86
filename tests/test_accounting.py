"""Exponential mechanism over intervals and pure-DP composition (privleak.accounting)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privleak import accounting as acc
from privleak.errors import PrivleakError


def test_interval_masses_and_density_by_hand():
    edges, utilities = [0.0, 0.2, 0.5, 0.8, 1.0], [-2.0, -1.0, 0.0, -1.0]
    # epsilon 2, sensitivity 1: mass ∝ width * exp(U).
    raw = np.array([0.2 * math.exp(-2), 0.3 * math.exp(-1), 0.3, 0.2 * math.exp(-1)])
    masses = np.exp(acc.interval_log_masses(edges, utilities, 2.0))
    np.testing.assert_allclose(masses, raw / raw.sum(), rtol=1e-12)
    density = acc.interval_density(edges, utilities, 2.0)
    np.testing.assert_allclose(density, raw / raw.sum() / np.diff(edges), rtol=1e-12)
    assert np.sum(density * np.diff(edges)) == pytest.approx(1.0)


def test_sensitivity_divides_epsilon():
    edges, utilities = [0.0, 0.5, 1.0], [0.0, -2.0]
    np.testing.assert_allclose(
        acc.interval_log_masses(edges, utilities, 4.0, sensitivity=2.0),
        acc.interval_log_masses(edges, utilities, 2.0),
    )


def test_empty_intervals_get_no_mass():
    masses = np.exp(acc.interval_log_masses([0.0, 0.5, 0.5, 1.0], [0.0, 5.0, 0.0], 1.0))
    assert masses[1] == 0 and masses.sum() == pytest.approx(1.0)


def test_samples_follow_the_density():
    rng = np.random.default_rng(0)
    edges = np.concatenate([[0.0], np.sort(rng.uniform(0, 1, 29)), [1.0]])
    utilities = -np.abs(np.arange(30) - 20.0)
    masses = np.exp(acc.interval_log_masses(edges, utilities, 1.0))
    draws = np.array([acc.sample_from_intervals(edges, utilities, 1.0, rng) for _ in range(20_000)])
    assert ((draws >= 0) & (draws <= 1)).all()
    frequencies = np.histogram(draws, bins=edges)[0] / len(draws)
    # Each interval's count is binomial: 5 standard deviations apart would be a bug, not luck.
    spread = 5 * np.sqrt(masses * (1 - masses) / len(draws)) + 1e-4
    assert (np.abs(frequencies - masses) <= spread).all()


def optimal_delta(epsilon: float, count: int, target: float) -> float:
    """delta(target) of `count`-fold epsilon-DP under its worst-case loss distribution:
    E[max(0, 1 - exp(target - L))], L = epsilon * (count - 2i) with i ~ Binomial(count, q),
    q = 1 / (1 + e^epsilon) (the exact optimal composition of pure DP)."""
    q = 1 / (1 + math.exp(epsilon))
    return sum(
        math.comb(count, i)
        * (1 - q) ** (count - i)
        * q**i
        * max(0.0, 1 - math.exp(target - epsilon * (count - 2 * i)))
        for i in range(count + 1)
    )


def test_one_step_matches_the_closed_form():
    # One epsilon-DP step: delta(e') = (e^eps - e^e') / (1 + e^eps),
    # so e' = ln(e^eps - delta (1 + e^eps)).
    expected = math.log(math.e - 1e-3 * (1 + math.e))
    assert acc.composed_epsilon([(1.0, 1)], 1e-3) == pytest.approx(expected, abs=3e-4)


@pytest.mark.parametrize(
    ("epsilon", "count", "delta"), [(0.5, 3, 1e-5), (0.2, 10, 1e-3), (3.0, 16, 1e-5)]
)
def test_composition_matches_the_optimal_composition_theorem(epsilon, count, delta):
    composed = acc.composed_epsilon([(epsilon, count)], delta)
    assert optimal_delta(epsilon, count, composed) <= delta * (1 + 1e-6)
    assert optimal_delta(epsilon, count, composed - 2e-3) > delta


def test_sparse_composition_equals_dp_accountings_self_composition(monkeypatch):
    settings = [(0.3, 1e-5, 40), (6.25, 1e-5, 16)]
    sparse = [acc.composed_epsilon([(eps, count)], delta) for eps, delta, count in settings]
    monkeypatch.setattr(acc, "SPARSE_COMPOSITIONS", 0)
    dense = [acc.composed_epsilon([(eps, count)], delta) for eps, delta, count in settings]
    assert sparse == pytest.approx(dense, rel=1e-9)


def test_many_small_steps_compose_below_their_sum_and_the_advanced_bound():
    composed = acc.composed_epsilon([(0.1, 100)], 1e-6)
    advanced = math.sqrt(2 * 100 * math.log(1e6)) * 0.1 + 100 * 0.1 * (math.exp(0.1) - 1)
    assert composed < advanced < 100 * 0.1


def test_mixed_steps_compose_in_any_order():
    a = acc.composed_epsilon([(1.0, 1), (0.05, 40)], 1e-5)
    b = acc.composed_epsilon([(0.05, 40), (1.0, 1)], 1e-5)
    assert a == pytest.approx(b, abs=1e-3)


def test_per_step_epsilon_spends_the_budget_left_by_the_fixed_steps():
    step = acc.per_step_epsilon(5.0, 1e-5, 30, fixed=[(1.0, 1)])
    assert acc.composed_epsilon([(1.0, 1), (step, 30)], 1e-5) <= 5.0
    assert acc.composed_epsilon([(1.0, 1), (step + 2e-3, 30)], 1e-5) > 5.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: acc.composed_epsilon([(0.0, 1)], 1e-5), "epsilon must be a finite number > 0"),
        (lambda: acc.composed_epsilon([(-1.0, 1)], 1e-5), "epsilon must be a finite number > 0"),
        (lambda: acc.composed_epsilon([(1.0, 1)], 0.0), r"delta must be in \(0, 1\)"),
        (lambda: acc.composed_epsilon([(1.0, 1)], 1.0), r"delta must be in \(0, 1\)"),
        (lambda: acc.composed_epsilon([(1.0, 0)], 1e-5), "step count must be >= 1"),
        (lambda: acc.per_step_epsilon(1.0, 1e-5, 5, fixed=[(2.0, 1)]), "already spend"),
        (lambda: acc.interval_log_masses([0, 1], [0, 0], 1.0), "one utility per interval"),
        (lambda: acc.interval_log_masses([1, 0], [0], 1.0), "non-decreasing"),
        (lambda: acc.interval_log_masses([0, 1], [0], 0.0), "epsilon must be"),
    ],
)
def test_bad_parameters_fail_with_one_line(call, message):
    with pytest.raises(PrivleakError, match=message):
        call()
