"""Logit transforms on a hand-computable 5-token vocabulary, and the N-stream sampler loop."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from privleak.decoding import (
    decode,
    greedy,
    sampling_logprobs,
    standard_transforms,
    temperature,
    top_k,
    top_p,
)
from privleak.errors import PrivleakError
from privleak.scoring import continuation_logprobs

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


PROMPTS = [[5, 9, 4, 17], [8, 3], [30, 31, 12, 6, 7, 22]]


def test_seeded_sampling_is_deterministic(tiny_lm):
    chain = standard_transforms(temperature_value=1.5)
    runs = [
        decode(tiny_lm, PROMPTS, max_new_tokens=12, transforms=chain, seed=s) for s in (7, 7, 8)
    ]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert not torch.equal(runs[0].tokens, runs[2].tokens)


def test_greedy_matches_hf_generate(tiny_lm):
    decoded = decode(tiny_lm, PROMPTS, max_new_tokens=10, transforms=[greedy()], eos_token_id=2)
    for prompt, ours in zip(PROMPTS, decoded.token_lists(), strict=True):
        hf = tiny_lm.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=10,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )[0, len(prompt) :].tolist()
        assert ours == hf[: len(ours)]
        assert len(ours) == len(hf) or hf[len(ours) :] == [0] * (len(hf) - len(ours))


def test_recorded_logprobs_equal_teacher_forced_scores(tiny_lm):
    decoded = decode(
        tiny_lm, PROMPTS, max_new_tokens=8, transforms=standard_transforms(top_k_value=4), seed=3
    )
    generated = decoded.token_lists()
    scored = continuation_logprobs(tiny_lm, PROMPTS, generated)
    for i, scores in enumerate(scored):
        assert torch.allclose(decoded.stream_logprobs[i, : len(scores)], scores, atol=1e-4)


def test_min_new_tokens_blocks_eos(tiny_lm):
    # With EOS = the model's greedy first token, greedy decoding stops at once unless blocked.
    first = decode(tiny_lm, PROMPTS[:1], max_new_tokens=1, transforms=[greedy()]).tokens[0, 0]
    eos = int(first)
    stopped = decode(
        tiny_lm, PROMPTS[:1], max_new_tokens=6, transforms=[greedy()], eos_token_id=eos
    )
    assert stopped.lengths.tolist() == [1]
    blocked = decode(
        tiny_lm,
        PROMPTS[:1],
        max_new_tokens=6,
        transforms=[greedy()],
        eos_token_id=eos,
        min_new_tokens=3,
    )
    assert eos not in blocked.tokens[0, :3].tolist()
    assert blocked.lengths.item() >= 3


def test_mix_hook_feeds_the_group_token_to_every_stream(tiny_lm):
    """A mix that follows stream 2 of each group decodes exactly like stream 2 alone, and stream
    1 is teacher-forced on those tokens."""
    pairs = [PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[0]]
    follow_second = decode(
        tiny_lm,
        pairs,
        max_new_tokens=8,
        transforms=[greedy()],
        streams_per_group=2,
        mix=lambda grouped: grouped[:, 1],
    )
    alone = decode(tiny_lm, [PROMPTS[1], PROMPTS[0]], max_new_tokens=8, transforms=[greedy()])
    assert torch.equal(follow_second.tokens, alone.tokens)
    first_streams = continuation_logprobs(tiny_lm, [PROMPTS[0], PROMPTS[2]], alone.token_lists())
    assert torch.allclose(follow_second.stream_logprobs[0], first_streams[0], atol=1e-4)
    assert torch.allclose(follow_second.stream_logprobs[2], first_streams[1], atol=1e-4)


def test_lambda_mix_of_two_streams_is_the_weighted_logit_sum(tiny_lm):
    lam = 1.5
    mixed = decode(
        tiny_lm,
        PROMPTS[:2],
        max_new_tokens=3,
        streams_per_group=2,
        keep_distributions=True,
        mix=lambda g: lam * g[:, 0] + (1 - lam) * g[:, 1],
        transforms=[temperature(0.8)],
    )
    raw = mixed.stream_distributions[:, 0]  # [2 streams, V] log-softmax at the first step
    expected = torch.log_softmax((lam * raw[0] + (1 - lam) * raw[1]) / 0.8, dim=-1)
    assert torch.allclose(mixed.distributions[0, 0], expected, atol=1e-5)
    assert math.isclose(float(mixed.distributions[0, 0].exp().sum()), 1.0, rel_tol=1e-5)
