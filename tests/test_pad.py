"""PAD (privleak.pad): the step quantities on hand-computable 5-token fixtures, the hashed noise,
the decoder mix (noise that belongs to the group, a fresh accountant per response) and the
accountant against dp_accounting's Gaussian RDP."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from dp_accounting import dp_event, rdp

from privleak.decoding import Temperature, decode
from privleak.errors import PrivleakError
from privleak.pad import (
    RDP_ORDERS,
    SIGMA_MAX,
    SIGMA_MIN,
    UNIFORM_BITS,
    LogitNoise,
    OptimalBudget,
    PADSettings,
    StaticNoise,
    bits_to_normals,
    calibration,
    check_accounting,
    hashed_normals,
    margin_sensitivity,
    noise_seeds,
    noise_std,
    noisy_target_logprobs,
    normalized_entropy,
    optimal_epsilon,
    optimal_response_budget,
    response_budget,
    settings_table,
    step_keys,
)
from tests.conftest import tiny_llama


def _log_softmax(values) -> torch.Tensor:
    return torch.log_softmax(torch.tensor(values, dtype=torch.float32), -1)


def test_pad_settings_defaults_are_the_papers_or_the_official_codes():
    got = PADSettings()
    expected = {
        "epsilon": 0.2,  # App. E: eps_base
        "amplification": 3.0,  # App. E: lambda_amp
        "min_sensitivity": 0.4,  # App. E: Delta_min (the official run's value too)
        "weight_entropy": 0.3,  # App. E: w_entropy
        "weight_position": 0.2,  # App. E: w_pos
        "weight_confidence": 0.3,  # official code: the paper gives no w_conf
        "tau_conf": 0.9,  # official code: Algorithm 1 names tau_conf without a value
        "tau_margin": 2.0,  # official code: Algorithm 1 names tau_margin without a value
        "screening": True,  # the full PAD: False is the "No Screening" ablation
        "calibration": True,  # the full PAD: False is the "No Calib." ablation
        "sensitivity": True,  # the full PAD: False is the "No Sens." ablation
    }
    assert {name: getattr(got, name) for name in expected} == expected
    assert set(expected) == set(PADSettings.__dataclass_fields__)


def test_sensitivity_follows_eq4_and_its_clip():
    margins = torch.tensor([0.0, math.e - 1, math.e**3 - 1, 1e6])
    got = margin_sensitivity(margins, 0.4)
    # f(0) = 1; f(e - 1) = 1/2; f(e^3 - 1) = 1/4 -> clipped up to Delta_min 0.4.
    assert torch.allclose(got, torch.tensor([1.0, 0.5, 0.4, 0.4]))


def test_entropy_is_normalised_by_the_emittable_vocabulary():
    uniform = _log_softmax([0.0] * 5)
    one_hot = torch.tensor([[0.0] + [float("-inf")] * 4])
    padded = torch.tensor([[math.log(0.25)] * 4 + [float("-inf")]])
    got = normalized_entropy(torch.cat([uniform[None], one_hot, padded]))
    assert torch.allclose(got, torch.tensor([1.0, 0.0, 1.0]), atol=1e-6)


def test_calibration_by_hand():
    logprobs = torch.log(torch.tensor([[0.5, 0.25, 0.125, 0.0625, 0.0625]]))
    entropy = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25) + 0.125 * math.log(0.125)
                + 2 * 0.0625 * math.log(0.0625)) / math.log(5)  # fmt: skip
    weights = torch.tensor([[0.3, 0.2, 0.3]])
    expected = 0.7 + 0.3 * entropy + 0.2 / (1 + 0.1 * 4) + 0.3 * 0.5
    assert calibration(logprobs, 4, weights).item() == pytest.approx(expected, rel=1e-6)


def test_pad_sigma_screens_confident_steps_and_scales_the_rest_by_hand():
    confident = _log_softmax([10.0, 0.0, 0.0, 0.0, 0.0])  # p_max ~ 0.9998, margin 10
    unsure = _log_softmax([1.0, 0.5, 0.0, 0.0, 0.0])  # margin 0.5
    settings = PADSettings(epsilon=0.2, amplification=3.0, min_sensitivity=0.4)
    table = settings_table([settings, settings])
    sigma, delta, protected = noise_std(torch.stack([confident, unsure]), 1, table)
    assert protected.tolist() == [False, True]
    assert sigma[0].item() == pytest.approx(SIGMA_MIN)
    delta_unsure = 1 / (1 + math.log(1.5))
    calibrate = calibration(unsure[None], 1, torch.tensor([[0.3, 0.2, 0.3]])).item()
    # sigma_base = 0.01 / 0.2, times calibrate, lambda_amp, Delta / epsilon.
    expected = 0.05 * calibrate * 3.0 * delta_unsure / 0.2
    assert delta[1].item() == pytest.approx(delta_unsure, rel=1e-6)
    assert sigma[1].item() == pytest.approx(expected, rel=1e-5)


def test_ablations_and_kinds():
    unsure = _log_softmax([1.0, 0.5, 0.0, 0.0, 0.0])[None].expand(5, 5)
    noises = [
        PADSettings(),
        PADSettings(calibration=False),
        PADSettings(sensitivity=False),
        StaticNoise(0.7),
        None,
    ]
    sigma, delta, protected = noise_std(unsure, 1, settings_table(noises))
    calibrate = calibration(unsure[:1], 1, torch.tensor([[0.3, 0.2, 0.3]])).item()
    assert sigma[1].item() == pytest.approx(sigma[0].item() / calibrate, rel=1e-5)
    assert delta[2].item() == 1.0 and sigma[2].item() == pytest.approx(
        sigma[0].item() / delta[0].item(), rel=1e-5
    )
    assert sigma[3:].tolist() == pytest.approx([0.7, 0.0])
    assert protected.tolist() == [True, True, True, True, False]


def test_sigma_is_clipped_at_small_epsilon():
    unsure = _log_softmax([1.0, 0.5, 0.0, 0.0, 0.0])[None]
    sigma, _, _ = noise_std(unsure, 1, settings_table([PADSettings(epsilon=0.01)]))
    assert sigma.item() == SIGMA_MAX


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"epsilon": 0.0}, "PAD epsilon must be a finite number > 0"),
        ({"amplification": -1.0}, "PAD amplification must be a finite number >= 0"),
        ({"min_sensitivity": 0.0}, r"min_sensitivity \(Delta_min\) must be in \(0, 1\]"),
        ({"tau_conf": 1.5}, r"tau_conf must be in \[0, 1\]"),
    ],
)
def test_bad_settings_fail_with_one_line(kwargs, message):
    with pytest.raises(PrivleakError, match=message):
        PADSettings(**kwargs)


@pytest.mark.parametrize(
    "alpha, delta, message",
    [(1.0, 1e-5, "alpha must be a finite number > 1"), (10.0, 1.0, r"delta must be in \(0, 1\)")],
)
def test_bad_accounting_fails_with_one_line(alpha, delta, message):
    with pytest.raises(PrivleakError, match=message):
        check_accounting(alpha, delta)


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("inf"), 1e300])
def test_static_sigma_must_be_positive_and_fit_float32_logits(sigma):
    with pytest.raises(
        PrivleakError, match=re.escape("static noise sigma must be a number in (0, 1e+30]")
    ):
        StaticNoise(sigma)
    StaticNoise(1e30)  # the bound itself is allowed


def test_extreme_hash_values_give_finite_normals():
    """The largest hash must not round its uniform up to 1 (an infinite normal: noise inf, logits
    nan); with 24 bits in float32 it did, at ~1 element in 2^24, i.e. every few decode steps."""
    edges = torch.tensor([0, 1, (1 << UNIFORM_BITS) - 2, (1 << UNIFORM_BITS) - 1])
    z = bits_to_normals(edges)
    assert torch.isfinite(z).all()
    assert z[0] < -5 and z[-1] > 5 and torch.allclose(z[:2], -z.flip(0)[:2])


def test_hashed_normals_are_standard_deterministic_and_keyed():
    keys = step_keys(noise_seeds(0, list(range(8))), 3)
    z = hashed_normals(keys, 50_000).double()
    assert torch.equal(z, hashed_normals(keys, 50_000).double())
    assert abs(z.mean().item()) < 5 / math.sqrt(z.numel())
    assert abs(z.std().item() - 1) < 0.01
    # Kolmogorov distance to N(0, 1) of one row of 50,000: the 1 % critical value is ~0.0073.
    row = torch.sort(z[0]).values
    cdf = 0.5 * (1 + torch.erf(row / math.sqrt(2)))
    grid = torch.arange(1, len(row) + 1, dtype=torch.float64) / len(row)
    assert (grid - cdf).abs().max().item() < 0.0073
    # Rows with different keys are uncorrelated; another step gives other noise.
    assert abs(torch.corrcoef(z[:2])[0, 1].item()) < 0.02
    other = hashed_normals(step_keys(noise_seeds(0, list(range(8))), 4), 50_000)
    assert not torch.equal(other.double(), z)


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=24, window=96)


PROMPTS = [[1, 5, 6, 7], [1, 8, 9], [1, 10, 11, 12, 13]]
NOISES = [None, StaticNoise(1.0), PADSettings(epsilon=0.05)]


def _decode(model, prompts, noises, keys, budget=None):
    mix = LogitNoise(noises, noise_seeds(7, keys))
    return decode(
        model, prompts, max_new_tokens=12, transforms=[Temperature(0.5)], mix=mix, seed=7,
        group_keys=keys, max_batch_streams=budget,
    )  # fmt: skip


def _grid():
    prompts, noises, keys = [], [], []
    for p, prompt in enumerate(PROMPTS):
        for n, noise in enumerate(NOISES):
            prompts.append(prompt)
            noises.append(noise)
            keys.append((p, n))
    return prompts, noises, keys


def test_noise_belongs_to_the_group_not_the_batch(model):
    prompts, noises, keys = _grid()
    whole = _decode(model, prompts, noises, keys)
    chunked = _decode(model, prompts, noises, keys, budget=2)
    assert torch.equal(whole.tokens, chunked.tokens)
    assert torch.allclose(whole.records["sigma"], chunked.records["sigma"])
    alone = _decode(model, prompts[4:5], noises[4:5], keys[4:5])
    assert alone.token_lists()[0] == whole.token_lists()[4]
    assert torch.allclose(alone.records["sigma"][0], whole.records["sigma"][4, : alone.lengths[0]])


def test_each_response_gets_its_own_accountant(model):
    """The official code shared one noise processor across prompts: the position factor and the
    budget kept counting. Here a prompt's records are the same whether or not others ran first."""
    prompts, noises, keys = _grid()
    first = _decode(model, prompts[2:3], noises[2:3], keys[2:3])
    after = _decode(model, prompts, noises, keys)
    steps = int(first.lengths[0])
    for name in ("sigma", "sensitivity", "protected"):
        assert torch.allclose(first.records[name][0, :steps], after.records[name][2, :steps])


def test_noise_changes_samples_and_noiseless_rows_are_plain_sampling(model):
    prompts, noises, keys = _grid()
    noisy = _decode(model, prompts, noises, keys)
    plain = decode(model, prompts[0::3], max_new_tokens=12, transforms=[Temperature(0.5)],
                   seed=7, group_keys=keys[0::3])  # fmt: skip
    assert noisy.token_lists()[0::3] == plain.token_lists()
    assert (noisy.records["sigma"][0::3] == 0).all()
    assert noisy.token_lists()[1::3] != plain.token_lists()


def test_noisy_target_logprobs_average_the_noisy_softmax():
    logprobs = _log_softmax([2.0, 1.0, 0.5, 0.0, -1.0])[None].expand(3, 5)
    targets = torch.tensor([0, 1, 3])
    noises = [None, StaticNoise(0.8), PADSettings(epsilon=0.1)]
    seeds = noise_seeds(3, ["a", "b", "c"])
    got = noisy_target_logprobs(logprobs, targets, torch.tensor([1, 1, 1]), noises, seeds,
                                [Temperature(0.5)], draws=4000)  # fmt: skip
    # Row 0 has no noise: the plain temperature-0.5 probability.
    assert got[0].item() == pytest.approx(torch.log_softmax(logprobs[0] / 0.5, -1)[0].item(), 1e-5)
    # Row 1: an independent Monte-Carlo estimate of E_z[softmax((s + 0.8 z) / 0.5)][1].
    z = torch.randn(200_000, 5, generator=torch.Generator().manual_seed(0))
    reference = torch.softmax((logprobs[1] + 0.8 * z) / 0.5, -1)[:, 1].mean().log().item()
    assert got[1].item() == pytest.approx(reference, abs=0.03)


def test_budget_by_hand_and_gamma_is_the_protected_fraction():
    sigma, sensitivity = [0.5, 0.01, 1.0], [1.0, 0.5, 0.5]
    budget = response_budget(sigma, sensitivity, [True, False, True], alpha=10, delta=1e-5)
    per_step = [10 * 1 / (2 * 0.25), 10 * 0.25 / (2 * 1e-4), 10 * 0.25 / 2]
    conversion = math.log(1e5) / 9
    assert budget.gamma == pytest.approx(2 / 3)
    assert budget.epsilon_relaxed == pytest.approx(per_step[0] + per_step[2] + conversion)
    assert budget.epsilon_all_steps == pytest.approx(sum(per_step) + conversion)


def test_step_rdp_equals_dp_accounting_gaussian():
    sigma, sensitivity = np.array([0.3, 0.8, 2.0]), np.array([0.5, 1.0, 0.7])
    budget = response_budget(sigma, sensitivity, [True] * 3, alpha=7.0, delta=1e-5)
    accountant = rdp.RdpAccountant(orders=[7.0])
    for s, d in zip(sigma, sensitivity, strict=True):
        accountant.compose(dp_event.GaussianDpEvent(noise_multiplier=s / d))
    assert budget.rdp_protected == pytest.approx(float(accountant._rdp[0]), rel=1e-9)


# ---- alpha optimised (App. C.3) -------------------------------------------------------------

DELTA = 1e-5
LOG_INV_DELTA = math.log(1 / DELTA)


def test_rdp_orders_are_the_common_accountant_grid():
    from opacus.accountants import RDPAccountant

    assert RDP_ORDERS == tuple(float(order) for order in RDPAccountant.DEFAULT_ALPHAS)
    assert len(RDP_ORDERS) == 151 and all(isinstance(order, float) for order in RDP_ORDERS)


def test_optimal_epsilon_matches_the_closed_form():
    """One protected step with Delta = sigma = 1: slope S = 1/2, eps(alpha) = S alpha + L / (alpha
    - 1) with L = ln(1/delta), minimised at alpha* = 1 + sqrt(L / S) with eps* = S + 2 sqrt(S L)."""
    slope = 0.5
    alpha_star = 1 + math.sqrt(LOG_INV_DELTA / slope)
    epsilon_star = slope + 2 * math.sqrt(slope * LOG_INV_DELTA)
    fine = [1 + k / 1000 for k in range(1, 20_000)]
    epsilon, alpha = optimal_epsilon(slope, DELTA, fine)
    assert epsilon == pytest.approx(epsilon_star, abs=1e-3)
    assert alpha == pytest.approx(alpha_star, abs=1e-3)
    # On the coarse grid: no better than the optimum, no worse than the official alpha = 10.
    epsilon, alpha = optimal_epsilon(slope, DELTA)
    at_ten = response_budget([1.0], [1.0], [True], alpha=10, delta=DELTA).epsilon_relaxed
    assert epsilon_star <= epsilon <= at_ten
    assert alpha in RDP_ORDERS
    assert epsilon == pytest.approx(slope * alpha + LOG_INV_DELTA / (alpha - 1))


def test_optimal_epsilon_takes_the_smallest_order_on_a_tie():
    # slope 1/2, L = ln(1/delta): alpha and 1 + L / (S (alpha - 1)) give the same epsilon.
    delta = math.exp(-2.0)  # L = 2: eps(2) = 1 + 2 = 3, eps(5) = 2.5 + 0.5 = 3
    assert optimal_epsilon(0.5, delta, [5.0, 2.0]) == (pytest.approx(3.0), 2.0)


def test_optimal_response_budget_beats_alpha_ten_and_charges_more_for_all_steps():
    sigma, sensitivity, protected = [0.5, 0.01, 1.0], [1.0, 0.5, 0.5], [True, False, True]
    fixed = response_budget(sigma, sensitivity, protected, alpha=10, delta=DELTA)
    best = optimal_response_budget(sigma, sensitivity, protected, delta=DELTA)
    assert isinstance(best, OptimalBudget)
    assert (best.steps, best.gamma) == (3, pytest.approx(2 / 3))
    assert best.epsilon_relaxed <= fixed.epsilon_relaxed
    assert best.epsilon_all_steps <= fixed.epsilon_all_steps
    assert best.epsilon_all_steps >= best.epsilon_relaxed
    # Slopes by hand: protected 1 / (2 * 0.25) + 0.25 / 2; all steps add 0.25 / (2 * 1e-4).
    relaxed_slope, all_slope = 2.125, 2.125 + 1250.0
    assert (best.epsilon_relaxed, best.alpha_relaxed) == pytest.approx(
        optimal_epsilon(relaxed_slope, DELTA)
    )
    assert (best.epsilon_all_steps, best.alpha_all_steps) == pytest.approx(
        optimal_epsilon(all_slope, DELTA)
    )
    # A huge all-steps slope pushes alpha to the smallest order.
    assert best.alpha_all_steps == RDP_ORDERS[0]


def test_a_response_with_no_protected_step_costs_only_the_conversion():
    best = optimal_response_budget([0.01, 0.01], [0.4, 1.0], [False, False], delta=DELTA)
    # rdp 0: epsilon = min over alpha of ln(1/delta) / (alpha - 1), at the largest order.
    assert best.gamma == 0.0
    assert best.alpha_relaxed == max(RDP_ORDERS) == 63.0
    assert best.epsilon_relaxed == pytest.approx(LOG_INV_DELTA / 62)
    assert best.epsilon_all_steps > best.epsilon_relaxed


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: optimal_epsilon(-0.1, DELTA), "rdp_per_order .* must be a finite number >= 0"),
        (lambda: optimal_epsilon(math.inf, DELTA), "rdp_per_order .* must be a finite number >= 0"),
        (lambda: optimal_epsilon(0.5, 0.0), r"delta must be in \(0, 1\)"),
        (lambda: optimal_epsilon(0.5, 1.0), r"delta must be in \(0, 1\)"),
        (lambda: optimal_epsilon(0.5, DELTA, []), "orders .* must be a non-empty list"),
        (lambda: optimal_epsilon(0.5, DELTA, [2.0, 1.0]), r"these are not: \[1.0\]"),
        (lambda: optimal_epsilon(0.5, DELTA, [2.0, math.nan]), "orders .* finite numbers > 1"),
        (
            lambda: optimal_response_budget([1.0], [1.0], [True], delta=2.0),
            r"delta must be in \(0, 1\)",
        ),
        (
            lambda: optimal_response_budget([1.0, 1.0], [1.0], [True], delta=DELTA),
            "sigma, sensitivity and protected need one value per step",
        ),
        (
            lambda: optimal_response_budget([], [], [], delta=DELTA),
            "a response needs at least one step",
        ),
        (
            lambda: optimal_response_budget([0.0], [1.0], [True], delta=DELTA),
            r"every accounted step needs noise \(sigma > 0\)",
        ),
        (
            lambda: optimal_response_budget([1.0], [1.0], [True], delta=DELTA, orders=[0.5]),
            "orders .* > 1",
        ),
    ],
)
def test_bad_optimal_accounting_fails_with_one_line(call, message):
    with pytest.raises(PrivleakError, match=message):
        call()
