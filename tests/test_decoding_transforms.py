"""Logit transforms on a hand-computable 5-token vocabulary, against HF's warpers."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from privleak.decoding import (
    greedy,
    sampling_logprobs,
    standard_transforms,
    temperature,
    top_k,
    top_p,
)
from privleak.errors import PrivleakError

PROBS = [0.5, 0.2, 0.15, 0.1, 0.05]
LOGITS = torch.log(torch.tensor([PROBS], dtype=torch.float64))


def probs_after(*transforms):
    return sampling_logprobs(LOGITS, transforms).exp()[0].tolist()


def test_temperature_squares_probabilities_at_half():
    squared = [p * p for p in PROBS]
    assert probs_after(temperature(0.5)) == pytest.approx([q / sum(squared) for q in squared])


def test_top_k_keeps_and_renormalises_the_k_largest():
    assert probs_after(top_k(2)) == pytest.approx([5 / 7, 2 / 7, 0, 0, 0])
    assert probs_after(top_k(10)) == pytest.approx(PROBS)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.3, [1, 0, 0, 0, 0]),  # the top token alone reaches 0.3
        (0.5, [1, 0, 0, 0, 0]),  # exactly reached by the top token
        (0.65, [5 / 7, 2 / 7, 0, 0, 0]),
        (0.71, [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0]),
        (1.0, PROBS),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(p, expected):
    assert probs_after(top_p(p)) == pytest.approx(expected)


def test_greedy_is_an_indicator_on_the_first_argmax():
    assert probs_after(greedy()) == [1, 0, 0, 0, 0]
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0]])
    assert sampling_logprobs(ties, [greedy()]).exp()[0].tolist() == [0, 1, 0, 0, 0]


def test_temperature_then_top_k_then_top_p_composes_in_order():
    # T=0.5 gives q proportional to p^2; top-k 3 renormalises q0..q2 to [.8, .128, .072]; top-p
    # 0.85 then keeps the first two (mass before the third is .928).
    squared = [p * p for p in PROBS[:2]]
    expected = [q / sum(squared) for q in squared] + [0, 0, 0]
    chain = standard_transforms(temperature_value=0.5, top_k_value=3, top_p_value=0.85)
    assert probs_after(*chain) == pytest.approx(expected)


def test_transforms_match_hf_warpers_on_random_logits(rng):
    logits = torch.randn(6, 50, generator=rng) * 3
    pairs = [
        (temperature(0.7), TemperatureLogitsWarper(0.7)),
        (top_k(5), TopKLogitsWarper(5)),
        (top_p(0.6), TopPLogitsWarper(0.6)),
        (top_p(0.95), TopPLogitsWarper(0.95)),
    ]
    for ours, theirs in pairs:
        assert torch.equal(torch.isinf(ours(logits)), torch.isinf(theirs(None, logits.clone())))
        finite = torch.isfinite(ours(logits))
        assert torch.allclose(ours(logits)[finite], theirs(None, logits.clone())[finite])


def test_top_p_keeps_every_token_tied_with_the_last_one():
    logits = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]])  # q = 0.43, 0.16 x 3, 0.06
    # The top token and one 0.16 reach 0.5; the other two tied 0.16s stay as well.
    kept = torch.isfinite(top_p(0.5)(logits))
    assert kept.tolist() == [[True, True, True, True, False]]


def test_top_p_of_one_keeps_the_tail_whatever_float32_sums_to():
    logits = torch.randn(8, 50_000, generator=torch.Generator().manual_seed(3)) * 4
    assert torch.equal(top_p(1.0)(logits), logits)


@pytest.mark.parametrize(
    ("make", "bad", "message"),
    [
        (temperature, 0.0, "temperature must be > 0"),
        (temperature, -1.0, "temperature must be > 0"),
        (top_p, 0.0, r"top_p must be in \(0, 1\]"),
        (top_p, 1.5, r"top_p must be in \(0, 1\]"),
        (top_k, 0, "top_k must be an integer >= 1"),
    ],
)
def test_bad_decoder_params_are_one_line_errors(make, bad, message):
    with pytest.raises(PrivleakError, match=message) as info:
        make(bad)
    assert "\n" not in str(info.value)
