"""PAD's token law integrated with certified bounds (`privleak.audit.pad_law`), its premise check
(`pairs.logit_shift`, `table.premise`) and the audit bounds built on them."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from scipy.special import logsumexp

from privleak.audit.accountants import gaussian_pld_epsilon, gaussian_rdp_epsilon
from privleak.audit.bounds import hockey_stick
from privleak.audit.pad_law import law_bounds, token_log_bounds
from privleak.audit.pairs import logit_shift
from privleak.audit.table import event_epsilon, loss_bounds, pad_claim, pad_nominal, premise


def reference_log_probability(logprobs, target, sigma, temperature):
    """ln P(target) of softmax((s + sigma z) / T) sampling on 3 tokens, by the trapezoid rule in
    two dimensions (independent of the module's one-dimensional formula): the softmax reads z
    through W = (z_j - z_target) for the two others, W ~ N(0, [[2, 1], [1, 2]])."""
    s = np.asarray(logprobs, dtype=float)
    others = [j for j in range(3) if j != target]
    grid = np.arange(-9.0, 9.0 + 1e-9, min(0.02, temperature / max(sigma, 1e-9) / 10))
    u1, u2 = np.meshgrid(grid, grid, indexing="ij")
    w1, w2 = math.sqrt(2.0) * u1, (u1 + math.sqrt(3.0) * u2) / math.sqrt(2.0)
    exponents = np.stack([(s[others[0]] - s[target] + sigma * w1) / temperature,
                          (s[others[1]] - s[target] + sigma * w2) / temperature])  # fmt: skip
    log_softmax = -np.logaddexp(0.0, np.logaddexp(exponents[0], exponents[1]))
    log_weight = stats.norm.logpdf(u1) + stats.norm.logpdf(u2) + 2 * math.log(grid[1] - grid[0])
    return float(logsumexp(log_softmax + log_weight))


def test_the_bounds_hold_the_exact_law_of_a_tiny_vocabulary():
    # both regimes of the inner integral (rho <= 1 and > 1), a likely and an unlikely token
    rng = np.random.default_rng(3)
    for sigma, temperature in ((0.01, 0.2), (0.15, 0.2), (0.6, 0.2), (1.0, 1.0)):
        logprobs = np.log(rng.dirichlet(np.full(3, 0.6)))
        for target in (int(np.argmax(logprobs)), int(np.argmin(logprobs))):
            low, high = token_log_bounds(logprobs, target, sigma, temperature)
            truth = reference_log_probability(logprobs, target, sigma, temperature)
            assert low <= truth <= high, (sigma, temperature, target, low, truth, high)
            assert high - low < 0.05


def test_the_bounds_hold_the_mean_of_many_noise_draws():
    # the law is E_z softmax((s + sigma z) / T): 400,000 draws, within 5 standard errors
    logprobs = torch.log(torch.tensor([0.55, 0.3, 0.1, 0.05], dtype=torch.float64))
    sigma, temperature = 0.4, 0.2
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(400_000, 4, generator=generator, dtype=torch.float64)
    probs = torch.softmax((logprobs + sigma * noise) / temperature, -1)
    for target in range(4):
        mean, error = probs[:, target].mean().item(), probs[:, target].std().item() / 632.5
        low, high = token_log_bounds(logprobs.numpy(), target, sigma, temperature)
        assert math.exp(low) <= mean + 5 * error and mean - 5 * error <= math.exp(high)


def test_noiseless_steps_reduce_to_the_tempered_softmax():
    logprobs = np.log(np.array([0.7, 0.2, 0.1]))
    exact = torch.log_softmax(torch.tensor(logprobs) / 0.5, -1).numpy()
    low, high = law_bounds(np.tile(logprobs, (3, 1)), np.arange(3), np.zeros(3), 0.5)
    assert np.all(low <= exact) and np.all(exact <= high) and np.all(high - low < 0.02)


def test_an_excluded_token_has_probability_zero_and_bad_inputs_are_refused():
    logprobs = np.array([0.0, -np.inf, -np.inf])
    assert token_log_bounds(logprobs, 1, 0.5, 0.2) == (-math.inf, -math.inf)
    assert token_log_bounds(logprobs, 0, 0.5, 0.2) == (0.0, 0.0)  # the only token it can emit
    with pytest.raises(ValueError, match="temperature"):
        token_log_bounds(logprobs, 0, 0.5, 0.0)
    with pytest.raises(ValueError, match="sigma"):
        token_log_bounds(logprobs, 0, -1.0, 0.2)


def test_the_certified_loss_bound_never_exceeds_the_true_loss_in_repeated_trials():
    # random neighbouring PAD pairs on 3 tokens, 2 steps each: the audit's lower bound on the
    # privacy loss ln P_D'(y) - ln P_D(y) of a response y is at most its true loss, every time
    rng = np.random.default_rng(11)
    for _ in range(6):
        steps = []
        for _ in range(2):
            inside, outside = (np.log(rng.dirichlet(np.ones(3))) for _ in range(2))
            sigmas = rng.uniform(0.05, 1.5, size=2)
            steps.append((inside, outside, sigmas, int(rng.integers(3))))
        frame = pd.DataFrame([{
            "logp_in": [0.0, 0.0], "logp_out": [0.0, 0.0],
            **{f"logp_{side}_{end}": [] for side in ("in", "out") for end in ("low", "high")},
        }])  # fmt: skip
        truth = 0.0
        for inside, outside, sigmas, token in steps:
            for side, law, sigma in (("in", inside, sigmas[0]), ("out", outside, sigmas[1])):
                low, high = token_log_bounds(law, token, sigma, 0.2)
                frame.at[0, f"logp_{side}_low"].append(low)
                frame.at[0, f"logp_{side}_high"].append(high)
            truth += reference_log_probability(inside, token, sigmas[0], 0.2)
            truth -= reference_log_probability(outside, token, sigmas[1], 0.2)
        low, high = loss_bounds(frame)
        assert low[0] <= truth <= high[0]
        assert event_epsilon(frame, 0.0) <= abs(truth) + 1e-12


def test_the_premise_check_measures_the_shift_no_softmax_can_see_past():
    base = torch.log_softmax(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), -1)
    direction = torch.tensor([[1.0, -1.0, 1.0, -1.0]]) / 2  # unit l2 norm, mean 0
    moved = torch.log_softmax(base + 3.0 * direction, -1)  # a constant offset changes nothing
    assert logit_shift(moved, base).item() == pytest.approx(3.0, abs=1e-6)
    assert logit_shift(base, base).item() == 0.0
    frame = pd.DataFrame({
        "shift": [[3.0, 0.2, 5.0]], "premise_sensitivity": [[1.0, 0.4, 0.5]],
        "protected": [[1, 1, 0]],
    })  # fmt: skip
    checked = premise(frame)  # the third step is screened: not part of the premise
    assert checked["premise_steps"] == 2 and checked["premise_violated"] == 0.5
    assert checked["shift_ratio_max"] == 3.0 and checked["shift_ratio_median"] == 1.75


def test_pad_is_judged_on_each_neighbours_own_account_and_violates_only_beyond_both():
    """One output of two steps: step 1 moves from 0.1 (D) to 0.5 (D'), a loss of ln 5; step 2
    does not move. Each side's γ-relaxed claim composes its own protected steps, mu =
    sqrt(sum (Delta_t / sigma_t)^2), and is audited on the event over those steps only."""
    delta = 1e-5
    logs = {
        "logp_in": [[math.log(0.5), math.log(0.9)]],
        "logp_out": [[math.log(0.1), math.log(0.9)]],
    }
    d_prime = {"sigma": [[1.0, 1.0]], "sensitivity": [[0.05, 0.05]], "protected": [[1.0, 0.0]]}
    d = {"sigma_d": [[1.0, 1.0]], "sensitivity_d": [[1.0, 1.0]], "protected_d": [[0.0, 1.0]]}
    claimed, kept = pad_claim(pd.DataFrame(logs | d_prime | d), delta)
    # under D' alone the claim (mu 0.05) is below the proven ln((0.5 - delta) / 0.1): a violation
    assert pad_nominal(pd.DataFrame(d_prime), delta)["nominal_relaxed"] < math.log(4.9999)
    # under D the protected step is step 2, which does not move: no violation, so none is reported
    assert claimed["relaxed_side"] == "D" and list(kept["logp_in"]) == [[math.log(0.9)]]
    assert claimed["nominal_relaxed"] == pytest.approx(gaussian_pld_epsilon(1.0, delta))
    assert claimed["event_relaxed_low"] == pytest.approx(math.log((0.9 - delta) / 0.9))
    # all steps: the same loss against both accounts, the larger claim (D: mu = sqrt 2)
    assert claimed["nominal_pld"] == pytest.approx(gaussian_pld_epsilon(math.sqrt(2), delta))
    assert claimed["nominal_rdp"] == pytest.approx(gaussian_rdp_epsilon(math.sqrt(2), delta))
    # D protecting step 1 at D''s Delta too: violated under both, and the slack says so
    both = {"sigma_d": [[1.0, 1.0]], "sensitivity_d": [[0.05, 0.05]], "protected_d": [[1.0, 0.0]]}
    claimed, _ = pad_claim(pd.DataFrame(logs | d_prime | both), delta)
    assert claimed["event_relaxed_low"] == pytest.approx(math.log((0.5 - delta) / 0.1))
    assert claimed["nominal_relaxed"] - claimed["event_relaxed_low"] < 0


def test_the_hockey_stick_interval_reads_lower_bounds_low_and_upper_bounds_high():
    low, high = np.array([0.0, 2.0, 5.0]), np.array([0.5, 3.5, 5.0])
    h = hockey_stick(low, 1.0, 0.05, upper=high)
    # the low end counts lower bounds above 1 + ln 2 (2 of 3), the high end upper bounds above 1
    assert h.low == pytest.approx(hockey_stick(low, 1.0, 0.05).low)
    assert h.high == pytest.approx(hockey_stick(high, 1.0, 0.05).high)
    with pytest.raises(ValueError, match="upper"):
        hockey_stick(high, 1.0, 0.05, upper=low)


def two_token_log_probability(gap: float, rho: float) -> float:
    """ln P(the token behind by `gap` (in units of T) wins) with two tokens: rho (Z0 - Z1) plus a
    logistic (G0 - G1) must exceed the gap, a one-dimensional integral done on a fine grid."""
    w = np.arange(-60.0, 60.0, 1e-3)
    log_logistic = -np.logaddexp(0.0, gap - rho * math.sqrt(2.0) * w)
    return float(logsumexp(stats.norm.logpdf(w) + log_logistic) + math.log(1e-3))


def test_the_bounds_hold_far_in_the_tails_at_every_noise_scale():
    # rho = sigma / T from 0.05 to 3 and gaps up to 200 nats (in units of T): the grid's edges,
    # the Gumbel beyond its last node and Z far below its bulk all matter here
    for rho in (0.05, 0.5, 0.8, 1.0, 1.001, 1.2, 1.5, 2.0, 3.0):
        for gap in (0.0, 5.0, 30.0, 57.0, 65.0, 120.0, 200.0):
            logprobs = np.array([0.0, gap]) * 0.2  # T = 0.2: token 0 behind by `gap` / T units
            low, high = token_log_bounds(logprobs, 0, rho * 0.2, 0.2)
            truth = two_token_log_probability(gap, rho)
            assert low <= truth <= high, (rho, gap, low, truth, high)
            assert high - low < 0.1 * (1 + abs(truth) / 50), (rho, gap, low, truth, high)


def test_a_target_far_behind_gets_valid_simple_bounds_and_no_overflow():
    # beyond MAX_REACH units of T the bounds are (-inf, S(R/2) + F(-R/2)); just inside it the
    # integral runs where 1 - F would underflow (u ~ 760 at rho <= 1)
    for gap, rho in ((760.0, 0.5), (1200.0, 0.5), (1200.0, 3.0)):
        low, high = token_log_bounds(np.array([0.0, gap]) * 0.2, 0, rho * 0.2, 0.2)
        truth = two_token_log_probability(gap, rho)
        assert low <= truth <= high and math.isfinite(high), (gap, rho, low, truth, high)


def test_a_small_vocabulary_sums_its_offsets_directly_as_the_fft_would():
    """`_log_h` sums at most DIRECT_OFFSETS held offsets directly; beyond, by FFT. Both are the
    same correlation: on 5 held offsets and on 200 they agree with a plain loop."""
    from privleak.audit import pad_law

    rng = np.random.default_rng(0)
    table = np.cumsum(-rng.random(300))  # an increasing-then-capped ln F stand-in
    for held in (5, 200):
        counts = np.zeros(table.size + 41 + 1)  # K + 1 = 41 shifts
        counts[rng.choice(counts.size, held, replace=False)] = rng.integers(1, 4, held)
        got, error = pad_law._log_h(counts, table, -50.0, -0.1)
        extended = np.concatenate([np.full(41, -50.0), table, np.full(41, -0.1)])
        held_at = np.flatnonzero(counts)
        loop = [math.fsum(counts[b] * extended[k + b] for b in held_at) for k in range(41)]
        assert np.max(np.abs(got - loop)) <= error < 1e-6  # the stated bound covers the rounding
    assert 5 <= pad_law.DIRECT_OFFSETS < 200  # one case per path


def test_the_bounds_hold_at_a_large_vocabulary_where_the_correlation_is_an_fft():
    """V = 4,096 (thousands of distinct offsets: the FFT path): noiseless, the law is the tempered
    softmax exactly; with noise, the mean of 40,000 draws (V = 512), within 5 standard errors."""
    rng = np.random.default_rng(7)
    logprobs = np.log(rng.dirichlet(np.full(4096, 0.05)))
    logprobs = np.maximum(logprobs, -60.0)  # the model's floor: no token beyond MAX_REACH
    exact = torch.log_softmax(torch.tensor(logprobs) / 0.2, -1).numpy()
    order = np.argsort(logprobs)
    for target in (order[-1], order[-2], order[-40], order[2000]):
        low, high = token_log_bounds(logprobs, int(target), 0.0, 0.2)
        assert low <= exact[target] <= high and high - low < 0.05, (target, low, exact[target])
    small, sigma = logprobs[:512] - logsumexp(logprobs[:512]), 0.3
    generator = torch.Generator().manual_seed(1)
    picks = np.argsort(small)[[-1, -2, -5]]
    draws = torch.cat([
        torch.softmax((torch.tensor(small) + sigma * torch.randn(8000, 512, generator=generator,
                                                                  dtype=torch.float64)) / 0.2, -1)
        [:, picks] for _ in range(5)
    ])  # fmt: skip
    for column, target in enumerate(picks):
        mean, error = draws[:, column].mean().item(), draws[:, column].std().item() / 200.0
        low, high = token_log_bounds(small, int(target), sigma, 0.2)
        assert math.exp(low) <= mean + 5 * error and mean - 5 * error <= math.exp(high)
