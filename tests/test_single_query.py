"""Single-query attention (privleak.single_query): SDPA's result for one new token a stream with
grouped-query heads and an additive padding mask; anything else is SDPA's own call."""

from __future__ import annotations

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from privleak.single_query import NAME, SingleQueryModel, single_query
from tests.conftest import tiny_llama


class Grouped(torch.nn.Module):
    num_key_value_groups = 3
    is_causal = True


def _inputs(queries: int, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(4, 6, queries, 8, generator=generator, dtype=dtype)
    key = torch.randn(4, 2, 11, 8, generator=generator, dtype=dtype)
    value = torch.randn(4, 2, 11, 8, generator=generator, dtype=dtype)
    mask = torch.zeros(4, 1, queries, 11, dtype=dtype)
    mask[0, ..., :5] = torch.finfo(dtype).min  # a left-padded row
    mask[2, ..., 3:7] = torch.finfo(dtype).min  # a hole inside a row
    return query, key, value, mask


def test_one_query_equals_sdpa_with_grouped_heads_and_a_padding_mask():
    query, key, value, mask = _inputs(1)
    ours, _ = single_query(Grouped(), query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(Grouped(), query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (4, 1, 6, 8)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    # by hand for one row and head: head 4 reads KV head 4 // 3 = 1
    scores = query[2, 4, 0] @ key[2, 1].T * 0.3 + mask[2, 0, 0]
    torch.testing.assert_close(ours[2, 0, 4], torch.softmax(scores, -1) @ value[2, 1])


def test_several_queries_go_to_sdpa():
    query, key, value, mask = _inputs(3)
    ours, _ = single_query(Grouped(), query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(Grouped(), query, key, value, mask, scaling=0.3)
    assert torch.equal(ours, theirs)


def test_the_wrapper_switches_attention_for_its_own_forwards_only():
    model = tiny_llama(vocab_size=16, window=64)
    own = model.config._attn_implementation
    seen = []
    model.register_forward_pre_hook(
        lambda module, args: seen.append(module.config._attn_implementation)
    )
    ids = torch.tensor([[1, 5, 6, 7]])
    wrapped = SingleQueryModel(model)(input_ids=ids).logits
    plain = model(input_ids=ids).logits
    assert seen == [NAME, own] and model.config._attn_implementation == own
    torch.testing.assert_close(wrapped, plain, atol=1e-6, rtol=0)
