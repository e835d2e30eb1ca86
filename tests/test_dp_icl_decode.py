"""The shared-prefill DP-ICL path (privleak.dp_icl_decode): rows sharing a start or an end
decode the same draws and log-probs as the shared decoder on the full prompts with fewer prefill
tokens, heads are prefilled once across calls, and forced log-probs equal a full forward."""

from __future__ import annotations

import pytest
import torch

from privleak import dp_icl_decode
from privleak.batching import ForwardCounter
from privleak.decoding import decode
from privleak.dp_icl_decode import (
    HeadStore,
    decode_forked,
    forced_forked,
    prefill_rows,
    shared_head,
    shared_tail,
)
from privleak.dp_rag import DPICLSettings, _mix, forced_logprobs, stream_prompts
from tests.conftest import tiny_llama, word_tokenizer

DOCS = ["the cat sat on the mat", "a dog ran to the park", "alice sat on a mat", "bob ran"]


@pytest.fixture(scope="module")
def lm():
    return tiny_llama(vocab_size=16, window=128), word_tokenizer(add_bos=True)


def test_shared_head_is_the_longest_common_prefix_leaving_a_tail():
    assert shared_head([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert shared_head([[1, 2], [1, 2]]) == 1  # every row keeps one tail token
    assert shared_head([[7], [1, 2]]) == 0


def test_shared_tail_is_the_longest_common_suffix_leaving_a_head():
    assert shared_tail([[4, 3, 2, 1], [5, 2, 1], [3, 2, 1]]) == 2
    assert shared_tail([[1, 2], [1, 2]]) == 1  # every row keeps one head token
    assert shared_tail([[7], [1, 2]]) == 0


def _rows(tokenizer, docs, layout):
    """A question's streams: document first (DP-RAG's layout: they end alike) or the question
    first (they start alike)."""
    if layout == "document first":
        return stream_prompts(tokenizer, "the cat ran", docs, "plain", "it is")
    encode = tokenizer.encode
    return [encode("the cat ran it is")] + [encode(f"the cat ran {d} it is") for d in docs]


@pytest.mark.parametrize("layout", ["document first", "question first"])
@pytest.mark.parametrize("buffers", ["slots", "growing"])
def test_forked_decode_equals_the_shared_decoder_on_full_prompts(lm, buffers, layout, monkeypatch):
    """Two groups of one question (different document subsets and settings) decoded from one
    prefill of their distinct streams draw the decoder's tokens, with sample log-probs within
    1e-5, and the prefill forwards fewer tokens; in both layouts, with slot buffers and with a
    growing cache (architectures SlotStep does not drive)."""
    model, tokenizer = lm
    if buffers == "growing":
        monkeypatch.setattr(dp_icl_decode, "supports_slot_step", lambda model: False)
    settings = [DPICLSettings(2.0, clip=0.4, theta=0.5), DPICLSettings(6.0, clip=0.4, theta=0.1)]
    streams = [_rows(tokenizer, docs, layout) for docs in (DOCS[:3], DOCS[1:4])]
    keys = [("a", 0), ("b", 1)]
    options = {"max_new_tokens": 6, "seed": 5, "eos_token_id": tokenizer.eos_token_id,
               "min_new_tokens": 2, "pad_id": tokenizer.pad_token_id}  # fmt: skip
    reference = decode(model, [row for rows in streams for row in rows], streams_per_group=4,
                       mix=_mix(settings, [3, 3]), group_keys=keys, **options)  # fmt: skip
    distinct = list(dict.fromkeys(tuple(row) for rows in streams for row in rows))
    shares = shared_tail(distinct) > shared_head(distinct)
    assert shares == (layout == "document first")
    counter = ForwardCounter()
    forked = prefill_rows(model, distinct, tokenizer.pad_token_id, counter, batch_rows=2)
    index = {row: i for i, row in enumerate(distinct)}
    rows = [[index[tuple(r)] for r in group] for group in streams]
    ours = decode_forked(model, forked, rows, _mix(settings, [3, 3]), keys=keys, **options)
    assert ours.token_lists() == reference.token_lists()
    torch.testing.assert_close(ours.sample_logprobs, reference.sample_logprobs, atol=1e-5, rtol=0)
    public = reference.stream_logprobs[[0, 4]]  # each group's first stream
    torch.testing.assert_close(ours.public_logprobs, public, atol=1e-5, rtol=0)
    assert counter.tokens < reference.prefill_counter.tokens


def test_a_head_store_forwards_each_head_once_across_questions(lm):
    """Two questions retrieving overlapping documents: each distinct head (the public one and
    each document's) is forwarded once, the second question forwarding only its own turn; a
    store capped below its heads drops the least recently used and forwards it again."""
    model, tokenizer = lm
    first = stream_prompts(tokenizer, "the cat ran", DOCS[:3], "plain")
    second = stream_prompts(tokenizer, "a dog sat", DOCS[1:4], "plain")
    store, counter = HeadStore(model), ForwardCounter()
    prefill_rows(model, first, tokenizer.pad_token_id, counter, store=store)
    after_first = counter.tokens
    prefill_rows(model, second, tokenizer.pad_token_id, counter, store=store)
    heads = {tuple(r[: len(r) - shared_tail(first)]) for r in first}
    new_heads = {tuple(r[: len(r) - shared_tail(second)]) for r in second} - heads
    assert len(store) == len(heads) + len(new_heads) == 5
    tail = shared_tail(second)
    assert counter.tokens - after_first == sum(map(len, new_heads)) + len(second) * tail
    small = HeadStore(model, max_bytes=1)
    for _ in range(2):
        prefill_rows(model, first, tokenizer.pad_token_id, ForwardCounter(), store=small)
    assert len(small) == 1


def test_forced_forked_equals_one_full_forward(lm):
    model, tokenizer = lm
    for layout in ("document first", "question first"):
        streams = _rows(tokenizer, DOCS[:3], layout)
        forked = prefill_rows(model, streams, tokenizer.pad_token_id, ForwardCounter())
        for target in ([5], [5, 6, 7]):
            ours = forced_forked(model, forked, range(len(streams)), target, tokenizer.pad_token_id)
            full = forced_logprobs(model, streams, target, tokenizer.pad_token_id)
            torch.testing.assert_close(ours, full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("buffers", ["slots", "growing"])
def test_groups_that_end_early_leave_the_others_unchanged(lm, buffers, monkeypatch):
    """EOS allowed from the first step: every group's tokens equal the shared decoder's, also
    when some groups stop early and the batch drops their rows."""
    model, tokenizer = lm
    if buffers == "growing":
        monkeypatch.setattr(dp_icl_decode, "supports_slot_step", lambda model: False)
    settings = [DPICLSettings(e, clip=0.4, theta=0.0) for e in (0.05, 0.1, 0.2, 0.4, 8.0, 9.0)]
    streams = stream_prompts(tokenizer, "a dog sat", DOCS[:2], "plain")
    keys = [("q", i) for i in range(len(settings))]
    options = {"max_new_tokens": 12, "seed": 11, "eos_token_id": tokenizer.eos_token_id,
               "pad_id": tokenizer.pad_token_id}  # fmt: skip
    mix = _mix(settings, [2] * len(settings))
    reference = decode(model, streams * len(settings), streams_per_group=3, mix=mix,
                       group_keys=keys, **options)  # fmt: skip
    forked = prefill_rows(model, streams, tokenizer.pad_token_id, ForwardCounter())
    ours = decode_forked(model, forked, [[0, 1, 2]] * len(settings), mix, keys=keys, **options)
    assert ours.token_lists() == reference.token_lists()
    assert len(set(ours.lengths.tolist())) > 1  # some groups stopped before others


def test_heads_on_a_shared_start_forward_it_once_and_keep_their_cache(lm):
    """Heads that begin with the store's start forward only their rest, on a copy of the
    start's cache: the same keys and values as the whole head forwarded alone, the start counted
    once; a head without that start is forwarded whole."""
    model, tokenizer = lm
    start = tokenizer.encode("the cat")
    heads = [tokenizer.encode(f"the cat {rest}") for rest in ("sat on", "ran to the park")]
    other = tokenizer.encode("a dog ran")
    store, counter = HeadStore(model, start=start), ForwardCounter()
    for head in [*heads, other]:
        keys, values = store.get(head, counter)
        whole_keys, whole_values = HeadStore(model).get(head, ForwardCounter())
        torch.testing.assert_close(keys, whole_keys, atol=1e-5, rtol=0)
        torch.testing.assert_close(values, whole_values, atol=1e-5, rtol=0)
    assert counter.tokens == len(start) + sum(len(h) - len(start) for h in heads) + len(other)


def test_groups_that_agree_share_one_context_until_they_split(lm):
    """Four groups on one question's streams: two near-greedy ones that draw the same tokens are
    forwarded as one context, two near-uniform ones split from it; every group's tokens and
    log-probs equal the shared decoder's, which forwards each group's streams apart."""
    model, tokenizer = lm
    streams = stream_prompts(tokenizer, "a dog sat", DOCS[:2], "plain")
    settings = [DPICLSettings(e, clip=0.4, theta=1.0) for e in (500.0, 600.0, 0.01, 0.02)]
    keys = [("q", i) for i in range(len(settings))]
    options = {"max_new_tokens": 6, "seed": 2, "pad_id": tokenizer.pad_token_id}
    mix = _mix(settings, [2] * len(settings))
    reference = decode(model, streams * len(settings), streams_per_group=3, mix=mix,
                       group_keys=keys, **options)  # fmt: skip
    forked = prefill_rows(model, streams, tokenizer.pad_token_id, ForwardCounter())
    counter = ForwardCounter()
    ours = decode_forked(model, forked, [[0, 1, 2]] * len(settings), mix, keys=keys,
                         counter=counter, **options)  # fmt: skip
    assert ours.token_lists() == reference.token_lists()
    torch.testing.assert_close(ours.sample_logprobs, reference.sample_logprobs, atol=1e-5, rtol=0)
    greedy, uniform = ours.token_lists()[:2], ours.token_lists()[2:]
    assert greedy[0] == greedy[1] and uniform[0] != uniform[1] != greedy[0]
    # 5 forward steps of 3 contexts (the greedy pair's, each uniform group's), not 4
    assert counter.tokens == 5 * 3 * 3
