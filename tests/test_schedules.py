"""Redaction schedules p(step) and the mixed redacted/original fine-tune (S3's Redaction
Schedule target)."""

from __future__ import annotations

import math

import pytest
import torch

from privleak.errors import PrivleakError
from privleak.training.finetune import finetune_causal_lm, shuffled_batches
from privleak.training.schedules import (
    plain_steps,
    private_schedule_finetune,
    redaction_draw,
    redaction_probability,
    schedule_finetune,
    step_draw,
)
from tests.conftest import family_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SCHEDULES = ["step", "linear", "exp_concave"]
T = 100


def curve(schedule: str, **options) -> list[float]:
    return [redaction_probability(schedule, t, T, **options) for t in range(T + 1)]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_schedule_starts_redacted_ends_original_and_never_increases(schedule):
    p = curve(schedule)
    assert p[0] == 1.0 and p[-1] == 0.0
    assert all(later <= earlier for earlier, later in zip(p, p[1:], strict=False))
    assert all(0.0 <= value <= 1.0 for value in p)


def test_linear_is_one_minus_progress():
    assert redaction_probability("linear", 1, 4) == 0.75
    assert redaction_probability("linear", 3, 4) == 0.25


def test_step_switches_at_the_given_fraction():
    # switch 0.3 over 10 steps: steps 0, 1, 2 (progress < 0.3) redacted, step 3 on original.
    p = [redaction_probability("step", t, 10, switch=0.3) for t in range(11)]
    assert p == [1.0] * 3 + [0.0] * 8
    assert curve("step")[49:51] == [1.0, 0.0]  # default switch 0.5: step 50 is the first original
    assert redaction_probability("step", 9, 10, switch=1.0) == 1.0


def test_exp_concave_is_concave_above_linear_and_tends_to_linear():
    p = curve("exp_concave")
    second_differences = [a - 2 * b + c for a, b, c in zip(p, p[1:], p[2:], strict=False)]
    assert max(second_differences) <= 1e-12
    assert all(value >= 1 - t / T for t, value in enumerate(p))
    # k = 5 at mid-training: (1 - e^-2.5) / (1 - e^-5) = 0.91792 / 0.99326 = 0.92414.
    assert redaction_probability("exp_concave", 1, 2, sharpness=5.0) == pytest.approx(
        0.92414, abs=1e-5
    )
    # The default is the official scale 15: p(0.8) = (1 - e^-3) / (1 - e^-15) = 0.95021.
    assert redaction_probability("exp_concave", 4, 5) == pytest.approx(0.95021, abs=1e-5)
    assert redaction_probability("exp_concave", 1, 4, sharpness=1e-6) == pytest.approx(0.75)
    assert redaction_probability("exp_concave", 1, 2, sharpness=20.0) > 0.9999


def test_unknown_schedule_lists_the_known_ones():
    with pytest.raises(PrivleakError, match="step, linear, exp_concave.*'cosine'"):
        redaction_probability("cosine", 0, 10)


@pytest.mark.parametrize(
    ("schedule", "step", "total", "options", "match"),
    [
        ("linear", 0, 10, {"switch": 0.5}, r"takes options \[\].*'switch'"),
        ("step", 0, 10, {"switch": 0.0}, "switch must be in"),
        ("step", 0, 10, {"switch": 1.5}, "switch must be in"),
        ("exp_concave", 0, 10, {"sharpness": 0.0}, "sharpness must be > 0"),
        ("linear", 11, 10, {}, "step must be in"),
        ("linear", -1, 10, {}, "step must be in"),
        ("linear", 0, 0, {}, "total_steps must be >= 1"),
    ],
)
def test_bad_schedule_arguments_name_the_argument(schedule, step, total, options, match):
    with pytest.raises(PrivleakError, match=match):
        redaction_probability(schedule, step, total, **options)


def test_redaction_draws_follow_p_over_many_examples():
    # 4000 examples at p = 0.3: the redacted count is Binomial(4000, 0.3), sd ~ 29.
    p, n = 0.3, 4000
    redacted = sum(redaction_draw(7, 12, i) < p for i in range(n))
    assert abs(redacted - p * n) < 4 * math.sqrt(n * p * (1 - p))
    assert redaction_draw(7, 12, 5) == redaction_draw(7, 12, 5) != redaction_draw(7, 13, 5)


# 48 one-row document pairs: the redaction masks the middle of each dialog with token 3.
ORIGINAL = [[4 + (i % 7), 10, 11, 12, 13, 14, 15, 16 + (i % 5)] for i in range(48)]
REDACTED = [[doc[0], 10, 3, 3, 3, 3, 15, doc[-1]] for doc in ORIGINAL]
SETTINGS = {"epochs": 2, "batch_size": 16, "seq_len": 8, "learning_rate": 1e-2, "pad_id": 0}


def test_realised_share_follows_p_and_matches_the_seeded_draws():
    result = schedule_finetune(
        family_llama(), REDACTED, ORIGINAL, schedule="linear", seed=3, **SETTINGS
    )
    steps = len(result.losses)
    assert steps == 6 == len(result.redacted_share) == len(result.probabilities)
    assert result.probabilities == pytest.approx([1 - t / 5 for t in range(6)])
    assert result.redacted_share[0] == 1.0 and result.redacted_share[-1] == 0.0
    batches = shuffled_batches(48, epochs=2, batch_size=16, seed=3)
    assert result.redacted_share == [
        sum(redaction_draw(3, t, i) < p for i in batch) / 16
        for t, (batch, p) in enumerate(zip(batches, result.probabilities, strict=True))
    ]
    # Over all 96 draws the redacted count is a sum of Bernoulli(p_t): mean 48, sd ~ 3.5.
    count = sum(16 * share for share in result.redacted_share)
    variance = sum(16 * p * (1 - p) for p in result.probabilities)
    assert abs(count - 16 * sum(result.probabilities)) < 4 * math.sqrt(variance)


def test_step_schedule_first_half_is_plain_finetuning_on_the_redacted_dialogs():
    # One loop and one shuffle for every AdamW target: while p = 1 the schedule run is exactly
    # finetune_causal_lm on the redacted documents (same seed, one row per document).
    schedule = schedule_finetune(
        family_llama(), REDACTED, ORIGINAL, schedule="step", seed=5, **SETTINGS
    )
    redacted_only = finetune_causal_lm(family_llama(), REDACTED, seed=5, **SETTINGS)
    assert schedule.probabilities == [1.0] * 3 + [0.0] * 3
    assert schedule.redacted_share == [1.0] * 3 + [0.0] * 3
    assert schedule.losses[:3] == redacted_only[:3]
    assert schedule.losses[3] != redacted_only[3]


def test_same_seed_same_run_other_seed_other_draws():
    def run(seed):
        model = family_llama()
        result = schedule_finetune(
            model, REDACTED, ORIGINAL, schedule="exp_concave", seed=seed, **SETTINGS
        )
        return result, model.lm_head.weight.detach().clone()

    (first, weights), (again, weights_again), (other, _) = run(11), run(11), run(12)
    assert first == again and torch.equal(weights, weights_again)
    assert other.losses != first.losses


@pytest.mark.parametrize(
    ("redacted", "original", "kwargs", "match"),
    [
        (REDACTED[:3], ORIGINAL[:2], {}, "must be aligned, got 3 and 2"),
        ([], [], {}, "at least one document pair"),
        ([[5]] + REDACTED[1:], ORIGINAL, {}, "document pair 0 is shorter than 2 tokens"),
        (REDACTED, ORIGINAL, {"seed": -1}, "seed must be >= 0"),
        (REDACTED, ORIGINAL, {"schedule": "cosine"}, "schedule must be one of"),
        (REDACTED, ORIGINAL, {"schedule_options": {"k": 2}}, "takes options"),
        (REDACTED, ORIGINAL, {"epochs": 0}, "epochs"),
    ],
)
def test_bad_schedule_finetune_inputs_are_one_line_errors(redacted, original, kwargs, match):
    args = {"schedule": "linear"} | SETTINGS | kwargs
    with pytest.raises(PrivleakError, match=match):
        schedule_finetune(family_llama(), redacted, original, **args)


PRIVATE = {
    "target_epsilon": 8.0,
    "delta": 1e-5,
    "max_grad_norm": 1.0,
    "batch_size": 16,
    "learning_rate": 1e-2,
}


def test_batch_draw_takes_dp_steps_on_originals_and_accounts_only_for_them():
    result = private_schedule_finetune(
        family_llama(), REDACTED, ORIGINAL, schedule="linear", seed=3, private=PRIVATE, **SETTINGS
    )
    # 2 epochs x 48 / 16 = 6 steps; p = 1 - t/5; step t plain iff its one draw < p(t).
    expected = [step_draw(3, t) < 1 - t / 5 for t in range(6)]
    assert result.plain == expected == plain_steps("linear", 6, 3)
    assert result.plain[0] and not result.plain[-1]  # p(0) = 1, p(5) = 0
    dp = expected.count(False)
    assert 1 <= dp < 6 and result.dp_steps == dp
    assert result.accounted_steps == dp  # the plain steps are never composed
    assert 0 < result.epsilon < PRIVATE["target_epsilon"]
    assert result.sample_rate == 1 / 3  # Poisson rate 1 / ceil(48 / 16)
    assert len(result.losses) == 6


def test_noise_is_set_for_every_step_and_the_dp_steps_spend_less_than_the_target():
    from opacus.accountants import RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    result = private_schedule_finetune(
        family_llama(), REDACTED, ORIGINAL, schedule="linear", seed=3, private=PRIVATE, **SETTINGS
    )
    # As the official code: sigma reaches epsilon 8 over all 6 steps at rate 1/3 ...
    every_step = get_noise_multiplier(
        target_epsilon=8.0, target_delta=1e-5, sample_rate=1 / 3, steps=6, accountant="rdp"
    )
    assert result.noise_multiplier == pytest.approx(every_step)
    # ... and the accountant composes the DP steps only, so the spent epsilon is below 8.
    accountant = RDPAccountant()
    accountant.history = [(every_step, 1 / 3, result.dp_steps)]
    assert result.epsilon == pytest.approx(accountant.get_epsilon(1e-5))
    assert result.epsilon < 8.0


@pytest.mark.parametrize(
    ("private", "seed", "match"),
    [
        ({k: v for k, v in PRIVATE.items() if k != "delta"}, 0, "missing \\['delta'\\]"),
        (PRIVATE, -1, "seed must be >= 0"),
    ],
)
def test_bad_private_schedule_inputs_are_one_line_errors(private, seed, match):
    with pytest.raises(PrivleakError, match=match):
        private_schedule_finetune(
            family_llama(), REDACTED, ORIGINAL, schedule="linear", seed=seed, private=private,
            **SETTINGS,
        )  # fmt: skip


def test_a_document_longer_than_seq_len_is_refused_as_a_dp_unit():
    longer = [doc + [20, 21] for doc in ORIGINAL]  # 10 tokens, seq_len 8
    with pytest.raises(PrivleakError, match="document 0 has 10 tokens; DP protects one document"):
        private_schedule_finetune(
            family_llama(), REDACTED, longer, schedule="linear", private=PRIVATE, **SETTINGS
        )
