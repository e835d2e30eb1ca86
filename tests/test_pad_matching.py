"""privleak.pad_matching: Static's σ at PAD's nominal ε, pinned on hand-computable accountants."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privleak.errors import PrivleakError
from privleak.pad import optimal_response_budget
from privleak.pad_matching import (
    epsilon_floor,
    matched_static,
    matched_static_sigma,
    static_epsilon,
)

# One Rényi order 2 and δ = e^-1: ε = 2 * steps / (2 σ^2) + ln(1/δ) / (2 - 1) = steps / σ^2 + 1.
ORDER_2 = (2.0,)
DELTA_E = math.exp(-1)


def test_static_epsilon_is_the_accountant_of_every_step_at_unit_sensitivity():
    assert static_epsilon(1.0, 2, DELTA_E, orders=ORDER_2) == pytest.approx(3.0)
    assert static_epsilon(2.0, 8, DELTA_E, orders=ORDER_2) == pytest.approx(3.0)
    full = optimal_response_budget([0.7] * 5, [1.0] * 5, [True] * 5, 1e-5)
    assert static_epsilon(0.7, 5, 1e-5) == pytest.approx(full.epsilon_all_steps)


def test_the_matched_sigma_solves_the_hand_computed_accountant():
    # steps / σ^2 + 1 = 3 at 2 steps: σ = 1; at 8 steps: σ = 2
    assert matched_static_sigma(3.0, 2, DELTA_E, orders=ORDER_2) == pytest.approx(1.0, rel=1e-9)
    assert matched_static_sigma(3.0, 8, DELTA_E, orders=ORDER_2) == pytest.approx(2.0, rel=1e-9)
    sigma = matched_static_sigma(40.0, 40, 1e-5)  # the optimised α: round trip
    assert static_epsilon(sigma, 40, 1e-5) == pytest.approx(40.0, rel=1e-9)


def test_a_smaller_charge_per_step_needs_less_noise_for_the_same_epsilon():
    # steps * charge / σ^2 + 1 = 3 at 8 steps and Δ^2 = 0.25: σ^2 = 1
    assert matched_static_sigma(3.0, 8, DELTA_E, 0.25, ORDER_2) == pytest.approx(1.0, rel=1e-9)
    assert static_epsilon(1.0, 8, DELTA_E, 0.25, ORDER_2) == pytest.approx(3.0)


def test_a_tiny_slope_keeps_its_relative_precision():
    sigma = matched_static_sigma(1.0 + 1e-9, 1, DELTA_E, orders=ORDER_2)  # slope 5e-10
    assert sigma == pytest.approx(math.sqrt(1 / 1e-9), rel=1e-6)


def test_a_larger_budget_buys_less_noise():
    sigmas = [matched_static_sigma(eps, 40, 1e-5) for eps in (5.0, 20.0, 80.0)]
    assert sigmas[0] > sigmas[1] > sigmas[2]


@pytest.mark.parametrize("target", [1.0, 0.5, float("nan"), float("inf")])
def test_a_target_at_or_below_the_floor_of_infinite_noise_is_refused(target):
    # the floor at order 2 and δ = e^-1 is ln(1/δ) / (2 - 1) = 1
    with pytest.raises(PrivleakError, match="target ε must be a finite number above 1"):
        matched_static_sigma(target, 2, DELTA_E, orders=ORDER_2)


@pytest.mark.parametrize(
    ("steps", "charge", "match"),
    [(0, 1.0, "steps"), (2.5, 1.0, "steps"), (2, 0.0, "charge"), (2, 1.5, "charge")],
)
def test_bad_steps_and_charges_are_refused(steps, charge, match):
    with pytest.raises(PrivleakError, match=match):
        matched_static_sigma(3.0, steps, DELTA_E, charge, ORDER_2)
    with pytest.raises(PrivleakError, match=match):
        static_epsilon(1.0, steps, DELTA_E, charge, ORDER_2)


def pad_row(corpus, sigma, protected=(1.0, 1.0, 0.0)):
    """3 PAD steps at Δ 1, 0.5, 1; the unprotected ones screened (not charged under γ-relaxed ε)."""
    return {"corpus": corpus, "sigma": [sigma, sigma, 0.01], "sensitivity": [1.0, 0.5, 1.0],
            "protected": list(protected)}  # fmt: skip


def test_matched_static_targets_the_median_of_pads_relaxed_epsilons_per_corpus():
    rows = pd.DataFrame([pad_row("a", s) for s in (0.5, 1.0, 2.0)] + [pad_row("b", 1.0)])
    table = matched_static(rows, steps=4, delta=1e-5).set_index("corpus")
    # the median response of a is the one at σ 1: slope (1 + 0.25) / 2 = 0.625
    middle = optimal_response_budget([1.0, 1.0, 0.01], [1.0, 0.5, 1.0], [True, True, False], 1e-5)
    assert table.loc["a", "target_epsilon"] == pytest.approx(middle.epsilon_relaxed)
    assert table.loc["a", "target_epsilon"] == pytest.approx(table.loc["b", "target_epsilon"])
    assert table.loc["a", "responses"] == 3 and table.loc["b", "responses"] == 1
    # 4 Static steps at Δ = 1 spend the same slope 0.625 = 4 / (2 σ^2): σ = sqrt(3.2)
    assert table.loc["a", "sigma"] == pytest.approx(np.sqrt(3.2), rel=1e-6)
    assert table.loc["a", "static_epsilon"] == pytest.approx(table.loc["a", "target_epsilon"])
    # PAD's mean Δ^2 over every recorded step, screened ones included: (1 + 0.25 + 1) / 3 = 0.75,
    # so 4 * 0.75 / (2 σ^2) = 0.625: σ = sqrt(2.4)
    assert table.loc["a", "pad_charge"] == pytest.approx(0.75)
    assert table.loc["a", "sigma_pad_sensitivity"] == pytest.approx(np.sqrt(2.4), rel=1e-6)


def test_an_even_number_of_responses_targets_the_mean_of_the_middle_two():
    rows = pd.DataFrame([pad_row("a", s) for s in (0.5, 1.0, 2.0, 4.0)])
    table = matched_static(rows, steps=4, delta=1e-5)
    middle = [optimal_response_budget([s, s, 0.01], [1.0, 0.5, 1.0], [True, True, False], 1e-5)
              for s in (1.0, 2.0)]  # fmt: skip
    expected = (middle[0].epsilon_relaxed + middle[1].epsilon_relaxed) / 2
    assert table.loc[0, "target_epsilon"] == pytest.approx(expected)


def test_a_corpus_whose_median_response_is_all_screened_gets_no_sigma():
    rows = pd.DataFrame([pad_row("a", 1.0, protected=(0.0, 0.0, 0.0))] * 3 + [pad_row("b", 1.0)])
    table = matched_static(rows, steps=4, delta=1e-5).set_index("corpus")
    assert table.loc["a", "target_epsilon"] == pytest.approx(epsilon_floor(1e-5))
    assert np.isnan(table.loc["a", ["sigma", "sigma_pad_sensitivity", "static_epsilon"]]).all()
    assert np.isfinite(table.loc["b", "sigma"])


def test_matching_needs_a_pad_response():
    with pytest.raises(PrivleakError, match="no PAD response"):
        matched_static(pd.DataFrame(columns=["corpus", "sigma", "sensitivity", "protected"]), 4,
                       1e-5)  # fmt: skip
