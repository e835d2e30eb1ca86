"""The shared-prefix DP-ICL path (privleak.dp_icl_decode): the same draws and log-probs as the
shared decoder on the full prompts, fewer prefill tokens, and forced log-probs that equal a full
forward."""

from __future__ import annotations

import pytest
import torch

from privleak import dp_icl_decode
from privleak.batching import ForwardCounter
from privleak.decoding import decode
from privleak.dp_icl_decode import (
    decode_forked,
    forced_forked,
    prefill_forked,
    shared_head,
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


@pytest.mark.parametrize("buffers", ["slots", "growing"])
def test_forked_decode_equals_the_shared_decoder_on_full_prompts(lm, buffers, monkeypatch):
    """Two groups of one question (different document subsets and settings) decoded from one
    forked prefill draw the decoder's tokens, with sample log-probs within 1e-5, and the forked
    prefill forwards fewer tokens; with slot buffers and with a growing cache (architectures
    SlotStep does not drive)."""
    model, tokenizer = lm
    if buffers == "growing":
        monkeypatch.setattr(dp_icl_decode, "supports_slot_step", lambda model: False)
    settings = [DPICLSettings(2.0, clip=0.4, theta=0.5), DPICLSettings(6.0, clip=0.4, theta=0.1)]
    subsets = [DOCS[:3], DOCS[1:4]]
    streams = [stream_prompts(tokenizer, "the cat ran", docs, "plain", "it is") for docs in subsets]
    keys = [("a", 0), ("b", 1)]
    options = {"max_new_tokens": 6, "seed": 5, "eos_token_id": tokenizer.eos_token_id,
               "min_new_tokens": 2, "pad_id": tokenizer.pad_token_id}  # fmt: skip
    reference = decode(model, [row for rows in streams for row in rows], streams_per_group=4,
                       mix=_mix(settings, [3, 3]), group_keys=keys, **options)  # fmt: skip
    distinct = list(dict.fromkeys(tuple(row) for rows in streams for row in rows))
    head = shared_head(distinct)
    assert head > 0
    counter = ForwardCounter()
    forked = prefill_forked(model, distinct[0][:head], [r[head:] for r in distinct],
                            tokenizer.pad_token_id, counter, batch_rows=2)  # fmt: skip
    index = {row: i for i, row in enumerate(distinct)}
    rows = [[index[tuple(r)] for r in group] for group in streams]
    ours = decode_forked(model, forked, rows, _mix(settings, [3, 3]), keys=keys, **options)
    assert ours.token_lists() == reference.token_lists()
    torch.testing.assert_close(ours.sample_logprobs, reference.sample_logprobs, atol=1e-5, rtol=0)
    public = reference.stream_logprobs[[0, 4]]  # each group's first stream
    torch.testing.assert_close(ours.public_logprobs, public, atol=1e-5, rtol=0)
    assert counter.tokens < reference.prefill_counter.tokens


def test_forced_forked_equals_one_full_forward(lm):
    model, tokenizer = lm
    streams = stream_prompts(tokenizer, "a dog sat", DOCS[:3], "plain", "it is")
    head = shared_head(streams)
    forked = prefill_forked(model, streams[0][:head], [s[head:] for s in streams],
                            tokenizer.pad_token_id, ForwardCounter())  # fmt: skip
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
    head = shared_head(streams)
    forked = prefill_forked(model, streams[0][:head], [s[head:] for s in streams],
                            tokenizer.pad_token_id, ForwardCounter())  # fmt: skip
    ours = decode_forked(model, forked, [[0, 1, 2]] * len(settings), mix, keys=keys, **options)
    assert ours.token_lists() == reference.token_lists()
    assert len(set(ours.lengths.tolist())) > 1  # some groups stopped before others
