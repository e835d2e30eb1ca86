"""Context influence of token n-grams (Defs. 3.1-3.2): block and sliding spans, the cached
batched ablations against a naive re-encoding loop, and the official code's bugs
(docs/design.md §7)."""

from __future__ import annotations

import math

import pytest
import torch

from privleak.batching import ForwardCounter
from privleak.cid import cid_generate
from privleak.errors import PrivleakError
from privleak.metrics.influence import (
    ablate,
    bounded_cid_mechanism,
    cid_mechanism,
    ngram_influence,
    ngram_logprobs,
    ngram_logprobs_naive,
    response_logprobs,
    token_influence,
)
from privleak.ngrams import Window, ngram_spans
from privleak.prompts import ContextPrompt
from tests.conftest import PeakForward, tiny_llama


def test_block_spans_are_non_overlapping_and_cover_the_context():
    assert ngram_spans(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert ngram_spans(10, 1) == [(i, i + 1) for i in range(10)]
    assert ngram_spans(10, 10) == [(0, 10)]  # n = |D|: the whole context


def test_hand_computed_block_and_sliding_spans():
    # |D| = 7, n = 3: blocks end with the 1-token remainder; sliding windows never pass |D|.
    assert ngram_spans(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert ngram_spans(7, 3, Window("sliding")) == [(0, 3), (1, 4), (2, 5), (3, 6), (4, 7)]
    assert ngram_spans(7, 3, Window("sliding", 2)) == [(0, 3), (2, 5), (4, 7)]
    # A stride that misses |D| - n = 4 leaves token 6 in no window.
    assert ngram_spans(7, 3, Window("sliding", 3)) == [(0, 3), (3, 6)]
    assert ngram_spans(7, 7, Window("sliding")) == [(0, 7)]
    assert ngram_spans(7, 1, Window("sliding")) == ngram_spans(7, 1)


def test_window_reads_its_params_block_and_describes_itself():
    assert Window.of({"window": "block", "ns": [4]}) == Window("block", 1)
    assert Window.of({"window": "sliding", "stride": 2}) == Window("sliding", 2)
    assert Window("block").describe() == "disjoint n-token blocks"
    assert Window("sliding", 2).describe() == "sliding n-token windows, stride 2"
    assert Window("block").formula() == "[i·n, (i+1)·n)"
    assert Window("sliding").formula() == "[i, i+n)"
    assert Window("sliding", 3).formula() == "[3·i, 3·i+n)"


@pytest.mark.parametrize(
    ("kind", "stride", "match"),
    [
        ("slide", 1, "window must be block \\| sliding, got 'slide'"),
        ("sliding", 0, "stride must be an integer >= 1, got 0"),
        ("block", 2, "stride applies to sliding windows only"),
    ],
)
def test_bad_window_raises_one_line_errors(kind, stride, match):
    with pytest.raises(PrivleakError, match=match):
        Window(kind, stride)


@pytest.mark.parametrize(
    ("tokens", "n", "match"),
    [
        (10, 0, "n \\(n-gram size\\) must be an integer >= 1"),
        (10, 11, "n \\(n-gram size\\) must be <= \\|D\\| = 10"),
        (0, 1, "context is empty"),  # the official partition_n_gram silently returned []
    ],
)
def test_bad_n_and_empty_context_raise_one_line_errors(tokens, n, match):
    with pytest.raises(PrivleakError, match=match):
        ngram_spans(tokens, n)


def test_ablate_removes_exactly_the_span_and_keeps_the_template():
    prompt = ContextPrompt([1, 2], [10, 11, 12, 13, 14], [3])
    assert ablate(prompt, (1, 3)).ids == [1, 2, 10, 13, 14, 3]
    assert ablate(prompt, (0, 5)).ids == [1, 2, 3]


def test_token_influence_reads_the_sampled_token_of_the_full_distribution():
    # Hand case on a 5-token vocabulary. The official code indexed a filtered array
    # (p[ids][idx]); here τ_t = |log p̄(y_t|D) − log p̄(y_t|D∖D_i)| at the sampled id y_t.
    full = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05], [0.1, 0.1, 0.1, 0.1, 0.6]]).log()
    ablated = torch.tensor([[0.25, 0.25, 0.25, 0.15, 0.1], [0.2, 0.2, 0.2, 0.2, 0.2]]).log()
    response = torch.tensor([3, 4])
    pick = lambda logp: logp.gather(1, response[:, None]).squeeze(1)  # noqa: E731
    tau = token_influence(pick(full), pick(ablated)[None])
    assert tau[0].tolist() == pytest.approx([math.log(0.15 / 0.1), math.log(0.6 / 0.2)], abs=1e-6)
    assert token_influence(pick(full), pick(ablated)[None], length=1)[0].tolist() == pytest.approx(
        [math.log(0.15 / 0.1), 0.0], abs=1e-6
    )


def test_token_influence_rejects_non_finite_values():
    with pytest.raises(PrivleakError, match="not finite"):
        token_influence(torch.tensor([0.0]), torch.tensor([[float("-inf")]]))


def _case(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    context = torch.randint(4, 32, (23,), generator=g).tolist()
    response = torch.randint(3, 32, (9,), generator=g).tolist()
    return ContextPrompt([1, 4], context, [11, 12]), response


def _mechanism(model, prompt, response):
    prior = response_logprobs(model, prompt.with_context([]).ids, response)
    return cid_mechanism(prior, 1.5, 0.8, eos_token_id=2, min_new_tokens=3)


@pytest.mark.parametrize(("n", "batch_size"), [(1, 4), (1, 8), (2, 5), (4, 3), (5, 8), (23, 2)])
def test_cached_batched_ablations_match_naive_re_encoding(tiny_lm, n, batch_size):
    prompt, response = _case()
    mechanism = _mechanism(tiny_lm, prompt, response)
    fast_counter, naive_counter = ForwardCounter(), ForwardCounter()
    fast = ngram_logprobs(
        tiny_lm, prompt, response, n, mechanism, batch_size=batch_size, counter=fast_counter
    )
    naive = ngram_logprobs_naive(tiny_lm, prompt, response, n, mechanism, counter=naive_counter)
    spans = len(ngram_spans(23, n))
    assert fast.shape == (spans, len(response))
    assert float((fast - naive).abs().max()) <= 1e-4
    if n <= 2:  # some batch mixes rows with different cached lengths (left-padded cache slots)
        assert fast_counter.calls < 1 + spans
    if spans > 1:
        assert fast_counter.tokens < naive_counter.tokens


@pytest.mark.parametrize(
    ("n", "stride", "batch_size"), [(1, 1, 4), (3, 1, 8), (3, 2, 5), (5, 4, 3), (22, 1, 2)]
)
def test_sliding_windows_match_naive_re_encoding(tiny_lm, n, stride, batch_size):
    # Consecutive starts: every row reuses a different-length prefix of the one shared cache.
    prompt, response = _case()
    mechanism = _mechanism(tiny_lm, prompt, response)
    window = Window("sliding", stride)
    fast_counter, naive_counter = ForwardCounter(), ForwardCounter()
    fast = ngram_logprobs(
        tiny_lm,
        prompt,
        response,
        n,
        mechanism,
        window=window,
        batch_size=batch_size,
        counter=fast_counter,
    )
    naive = ngram_logprobs_naive(
        tiny_lm, prompt, response, n, mechanism, window=window, counter=naive_counter
    )
    spans = len(ngram_spans(23, n, window))
    assert fast.shape == (spans, len(response))
    assert float((fast - naive).abs().max()) <= 1e-4
    assert fast_counter.tokens < naive_counter.tokens


@pytest.mark.parametrize("window", [Window("block"), Window("sliding", 2)])
@pytest.mark.parametrize(("head", "tail"), [([], [11, 12]), ([1, 4], []), ([1], [])])
@pytest.mark.parametrize("n", [1, 3, 22])
def test_empty_head_or_tail_matches_naive(tiny_lm, head, tail, n, window):
    # An empty head leaves ablation 0 nothing cached; an empty tail puts the last ablation's first
    # predicting position inside the shared prefix, so it is forwarded again.
    context, response = _case(4)
    prompt = ContextPrompt(head, context.context, tail)
    mechanism = _mechanism(tiny_lm, prompt, response)
    fast = ngram_logprobs(
        tiny_lm, prompt, response, n, mechanism, window=window, batch_size=4, pad_id=5
    )
    naive = ngram_logprobs_naive(tiny_lm, prompt, response, n, mechanism, window=window)
    assert float((fast - naive).abs().max()) <= 1e-4


def _minimum(prompt, response, n, window):
    """Σ over spans of (|D| − end) + |tail| + |response| − 1, and the one shared prefix encode
    (head + the last span's start)."""
    spans = ngram_spans(len(prompt.context), n, window)
    rest = len(prompt.tail) + len(response) - 1
    forwarded = sum(len(prompt.context) - end + rest for _, end in spans)
    return forwarded, len(prompt.head) + spans[-1][0]


@pytest.mark.parametrize(
    ("tokens", "ns", "window"),
    [
        (256, [128, 32, 8, 4], Window("block")),
        (512, [64, 16, 2], Window("block")),
        (256, [128, 32, 4], Window("sliding")),
        (512, [64, 16], Window("sliding", 5)),
    ],
)
def test_forwarded_tokens_are_within_5_percent_of_the_analytic_minimum(tokens, ns, window):
    # The stage's sizes: a ~30-token chat head, ~20-token tail, ~50-token response.
    model = tiny_llama(window=640)
    g = torch.Generator().manual_seed(5)
    draw = lambda k: torch.randint(3, 32, (k,), generator=g).tolist()  # noqa: E731
    prompt, response = ContextPrompt(draw(30), draw(tokens), draw(20)), draw(50)
    mechanism = cid_mechanism(torch.zeros(len(response), 32).log_softmax(-1), 1.0, 1.0)
    for n in ns:
        counter = ForwardCounter()
        ngram_logprobs(
            model, prompt, response, n, mechanism, window=window, batch_size=8, counter=counter
        )
        minimum, prefix = _minimum(prompt, response, n, window)
        assert counter.tokens <= 1.05 * (minimum + prefix), n


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_peak_batch_is_bounded_by_the_budget_not_by_the_number_of_ngrams(tiny_lm, batch_size):
    prompt, response = _case(6)
    mechanism = _mechanism(tiny_lm, prompt, response)
    peak = PeakForward(tiny_lm)
    fast = ngram_logprobs(peak, prompt, response, 1, mechanism, batch_size=batch_size)
    longest = len(prompt.ids) + len(response) - 1  # every attended row is at most this long
    assert peak.rows <= batch_size < len(prompt.context)  # K = 23 ablations
    assert peak.area <= batch_size * longest
    naive = ngram_logprobs_naive(tiny_lm, prompt, response, 1, mechanism)
    assert float((fast - naive).abs().max()) <= 1e-4


def test_ragged_last_ngram_is_padded_with_a_mask(tiny_lm):
    # |D| = 23, n = 5: the last n-gram has 3 tokens, so its row is longer by 2 and the batch is
    # right-padded; the official code's left-padded batch had no attention mask.
    prompt, response = _case(1)
    prior = response_logprobs(tiny_lm, prompt.with_context([]).ids, response)
    mechanism = cid_mechanism(prior, 1.0, 1.0)
    fast = ngram_logprobs(tiny_lm, prompt, response, 5, mechanism, batch_size=5, pad_id=7)
    naive = ngram_logprobs_naive(tiny_lm, prompt, response, 5, mechanism)
    assert float((fast - naive).abs().max()) <= 1e-4


def test_whole_context_ablation_equals_the_recorded_generation_influence(tiny_lm):
    prompt, _ = _case(2)
    gen = cid_generate(
        tiny_lm, [prompt], [(1.5, 0.8)], max_new_tokens=8, min_new_tokens=3, eos_token_id=2
    )
    length = int(gen.lengths[0])
    response = gen.tokens[0, :length].tolist()
    prior = response_logprobs(tiny_lm, prompt.with_context([]).ids, response)
    mechanism = cid_mechanism(prior, 1.5, 0.8, eos_token_id=2, min_new_tokens=3)
    ablated = ngram_logprobs(tiny_lm, prompt, response, len(prompt.context), mechanism)
    tau = token_influence(gen.logp_context[0, :length], ablated)
    assert torch.allclose(tau[0], gen.tau[0, :length], atol=1e-4)


@pytest.mark.parametrize("eps", [None, 0.5])
def test_ngram_influence_is_cid_or_bounded_cid_ablation_influence(tiny_lm, eps):
    prompt, _ = _case(2)
    gen = cid_generate(
        tiny_lm, [prompt], [(1.5, 0.8)], max_new_tokens=8, min_new_tokens=3, eos_token_id=2, eps=eps
    )
    length = int(gen.lengths[0])
    response = gen.tokens[0, :length].tolist()
    prior = response_logprobs(tiny_lm, prompt.with_context([]).ids, response)
    if eps is None:
        mechanism = cid_mechanism(prior, 1.5, 0.8, eos_token_id=2, min_new_tokens=3)
    else:
        mechanism = bounded_cid_mechanism(prior, eps, 1.5, 0.8, eos_token_id=2, min_new_tokens=3)
    expected = token_influence(
        gen.logp_context[0, :length], ngram_logprobs(tiny_lm, prompt, response, 2, mechanism)
    )
    tau = ngram_influence(
        tiny_lm,
        prompt,
        response,
        gen.logp_context[0, :length],
        2,
        lam=1.5,
        temperature=0.8,
        eps=eps,
        eos_token_id=2,
        min_new_tokens=3,
    )
    assert torch.equal(tau, expected)
    assert tau.shape == (len(ngram_spans(len(prompt.context), 2)), length)


def test_removing_a_context_that_the_response_copies_has_influence():
    # A peaked random model; the influence of some uni-gram is strictly positive and every
    # uni-gram influence is finite and non-negative.
    model = tiny_llama(window=128)
    prompt, response = _case(3)
    prior = response_logprobs(model, prompt.with_context([]).ids, response)
    ablated = ngram_logprobs(model, prompt, response, 1, cid_mechanism(prior, 1.0, 1.0))
    full = response_logprobs(model, prompt.ids, response)
    full = full.gather(1, torch.tensor(response)[:, None]).squeeze(1)
    tau = token_influence(full, ablated)
    assert (tau >= 0).all() and float(tau.sum(1).max()) > 0


def test_ngram_logprobs_rejects_empty_response_and_bad_batch_size():
    prompt, response = _case()
    model = tiny_llama(window=128)
    prior = response_logprobs(model, prompt.with_context([]).ids, response)
    mechanism = cid_mechanism(prior, 1.0, 1.0)
    with pytest.raises(PrivleakError, match="response is empty"):
        ngram_logprobs(model, prompt, [], 2, mechanism)
    with pytest.raises(PrivleakError, match="batch_size"):
        ngram_logprobs(model, prompt, response, 2, mechanism, batch_size=0)
    with pytest.raises(PrivleakError, match="n \\(n-gram size\\)"):
        ngram_logprobs(model, prompt, response, 24, mechanism)
    with pytest.raises(PrivleakError, match="ablated prompt is empty"):
        ngram_logprobs(model, ContextPrompt([], prompt.context, []), response, 23, mechanism)
