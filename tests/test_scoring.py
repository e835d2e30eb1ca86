"""Batched, padded and prefix-cached scoring must equal a naive per-example loop."""

from __future__ import annotations

import pytest
import torch

from privleak.batching import ForwardCounter
from privleak.errors import PrivleakError
from privleak.models import mark_real_vocab, real_logits
from privleak.scoring import continuation_logprobs, encode_pair, shared_prefix_logprobs
from tests.conftest import tiny_llama, tiny_opt, word_tokenizer


@torch.no_grad()
def naive_logprobs(model, prompt, continuation):
    """Reference: one unpadded forward per example, full logits."""
    ids = torch.tensor([list(prompt) + list(continuation)])
    logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return torch.stack(
        [logprobs[len(prompt) - 1 + j, token] for j, token in enumerate(continuation)]
    )


def ragged_examples(seed: int, n: int = 7, vocab: int = 32):
    generator = torch.Generator().manual_seed(seed)

    def draw(low, high):
        length = int(torch.randint(low, high, (1,), generator=generator))
        return torch.randint(3, vocab, (length,), generator=generator).tolist()

    return [draw(1, 12) for _ in range(n)], [draw(1, 9) for _ in range(n)]


def max_gap(left, right):
    return max(float((a - b).abs().max()) for a, b in zip(left, right, strict=True))


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_batched_scoring_matches_naive_loop(tiny_lm, padding_side, batch_size):
    prompts, continuations = ragged_examples(seed=0)
    naive = [naive_logprobs(tiny_lm, p, c) for p, c in zip(prompts, continuations, strict=True)]
    batched = continuation_logprobs(
        tiny_lm, prompts, continuations, batch_size=batch_size, padding_side=padding_side
    )
    assert [len(x) for x in batched] == [len(c) for c in continuations]
    assert max_gap(batched, naive) <= 1e-4


def test_scores_are_not_flat(tiny_lm):
    """Guards the comparison above: the toy model must tell tokens apart."""
    prompts, continuations = ragged_examples(seed=1)
    scores = torch.cat(continuation_logprobs(tiny_lm, prompts, continuations))
    assert float(scores.max() - scores.min()) > 1.0


def test_shared_prefix_reuse_matches_full_prompts(tiny_lm):
    prefix = [5, 9, 4, 17, 30, 8]
    suffixes = [[], [7], [11, 12, 13], [], [3, 3, 3, 3, 3]]
    continuations = [[20, 21, 22], [6], [4, 4], [9], [10, 11, 12, 13]]
    pairs = list(zip(suffixes, continuations, strict=True))
    naive = [naive_logprobs(tiny_lm, prefix + s, c) for s, c in pairs]
    counter = ForwardCounter()
    reused = shared_prefix_logprobs(
        tiny_lm, prefix, suffixes, continuations, batch_size=2, counter=counter
    )
    assert max_gap(reused, naive) <= 1e-4
    # The prefix is forwarded once, not once per variant.
    assert counter.tokens < sum(
        len(prefix) + len(s) + len(c) for s, c in zip(suffixes, continuations, strict=True)
    )


def test_shared_prefix_with_only_prefix_logits_needed(tiny_lm):
    """Empty suffixes with one-token continuations need no forward beyond the prefix."""
    prefix = [5, 9, 4]
    reused = shared_prefix_logprobs(tiny_lm, prefix, [[], []], [[7], [8]])
    assert (
        max_gap(
            reused, [naive_logprobs(tiny_lm, prefix, [7]), naive_logprobs(tiny_lm, prefix, [8])]
        )
        <= 1e-4
    )


@pytest.mark.parametrize("add_bos", [True, False])
def test_encode_pair_keeps_first_response_token(add_bos):
    tokenizer = word_tokenizer(add_bos)
    prompt, continuation = encode_pair(tokenizer, "the cat sat", "on a mat")
    assert tokenizer.convert_ids_to_tokens(continuation) == ["on", "a", "mat"]
    expected_prompt = (["<s>"] if add_bos else []) + ["the", "cat", "sat"]
    assert tokenizer.convert_ids_to_tokens(prompt) == expected_prompt


@pytest.mark.parametrize("add_bos", [True, False])
def test_scoring_counts_every_response_token_with_and_without_bos(tiny_lm, add_bos):
    tokenizer = word_tokenizer(add_bos)
    prompt, continuation = encode_pair(tokenizer, "alice ran to", "the park")
    (scores,) = continuation_logprobs(tiny_lm, [prompt], [continuation])
    assert len(scores) == 2
    assert max_gap([scores], [naive_logprobs(tiny_lm, prompt, continuation)]) <= 1e-4


def test_context_longer_than_window_is_one_line_error():
    model = tiny_llama(window=16)
    with pytest.raises(PrivleakError, match=r"has 20 tokens but the model window is 16") as info:
        continuation_logprobs(model, [[4] * 15], [[5] * 5])
    assert "\n" not in str(info.value)


def test_empty_prompt_is_rejected(tiny_lm):
    with pytest.raises(PrivleakError, match="prepend BOS"):
        continuation_logprobs(tiny_lm, [[]], [[4, 5]])


def test_padded_vocabulary_rows_carry_no_probability():
    """OPT-style checkpoints have more logit rows than tokens; scores renormalise over the real
    ones, so they equal a log-softmax of the real logits alone."""
    model = tiny_opt(vocab_size=40)
    mark_real_vocab(model, 30)
    prompts, continuations = [[5, 9, 4], [8, 3]], [[7, 12], [20, 6, 11]]
    scores = continuation_logprobs(model, prompts, continuations)
    shared = shared_prefix_logprobs(model, [5, 9], [[4], [3]], [[7, 12], [20, 6]])
    for prompt, continuation, score in zip(prompts, continuations, scores, strict=True):
        logits = model(input_ids=torch.tensor([prompt + continuation])).logits[0].detach()
        at = torch.arange(len(continuation)) + len(prompt) - 1
        expected = torch.log_softmax(logits[at, :30], dim=-1)[at - at[0], continuation]
        assert torch.allclose(score, expected, atol=1e-5)
    assert torch.allclose(shared[0], scores[0], atol=1e-5)


def test_real_logits_leaves_unmarked_models_alone():
    logits = torch.randn(2, 40)
    assert real_logits(tiny_opt(vocab_size=40), logits) is logits
