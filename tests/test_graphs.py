"""Fixed step buffers (`privleak.graphs.SlotStep`) decode exactly as the dynamic KV cache does.

The CUDA graph replays these buffers; on a CPU they run eagerly, so these tests cover every line
of the graph path except the capture (tests/test_cuda.py covers that where a GPU is present)."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from privleak.cid import cid_generate
from privleak.decoding import decode, resolve_forward_mode, standard_transforms
from privleak.errors import PrivleakError
from privleak.prompts import ContextPrompt
from tests.conftest import tiny_llama, tiny_opt

PROMPTS = [[5, 9, 4, 17], [8, 3], [30, 31, 12, 6, 7, 22], [1], [4, 4, 4]] * 3


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
@pytest.mark.parametrize("budget", [None, 4])
def test_slots_sample_what_the_dynamic_cache_samples(build, budget):
    chain = standard_transforms(temperature_value=1.3, top_p_value=0.95)
    kwargs = {"max_new_tokens": 12, "transforms": chain, "seed": 3, "eos_token_id": 2,
              "min_new_tokens": 2, "max_batch_streams": budget}  # fmt: skip
    dynamic = decode(build(), PROMPTS, forward_mode="dynamic", **kwargs)
    slots = decode(build(), PROMPTS, forward_mode="slots", **kwargs)
    # Some groups stop early, so the slot path's fixed batch carries finished rows.
    assert dynamic.lengths.min() < 12 and dynamic.lengths.max() == 12
    assert torch.equal(dynamic.tokens, slots.tokens)
    assert torch.equal(dynamic.lengths, slots.lengths)
    assert torch.allclose(dynamic.sample_logprobs, slots.sample_logprobs, atol=1e-5)
    assert torch.allclose(dynamic.stream_logprobs, slots.stream_logprobs, atol=1e-5)
    # Finished rows stay in the slot batch, so it forwards at least as many positions.
    assert slots.step_counter.tokens >= dynamic.step_counter.tokens


def test_cid_records_agree_between_slots_and_dynamic_cache():
    prompts = [ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11], [12]), ContextPrompt([1], [13], [12])]
    settings = [(0.5, 0.8), (1.5, 1.0)]
    kwargs = {"max_new_tokens": 8, "min_new_tokens": 3, "eos_token_id": 2, "seed": 1}
    dynamic = cid_generate(tiny_llama(), prompts, settings, forward_mode="dynamic", **kwargs)
    slots = cid_generate(tiny_llama(), prompts, settings, forward_mode="slots", **kwargs)
    assert torch.equal(dynamic.tokens, slots.tokens)
    assert torch.allclose(dynamic.tau, slots.tau, atol=1e-5)
    assert torch.allclose(dynamic.logp_prior, slots.logp_prior, atol=1e-5)


def test_one_step_needs_no_step_buffers():
    one = decode(tiny_llama(), PROMPTS, max_new_tokens=1, forward_mode="slots")
    assert one.step_counter.calls == 0 and one.tokens.shape == (len(PROMPTS), 1)


def tiny_gpt2():
    config = GPT2Config(vocab_size=32, n_positions=64, n_embd=32, n_layer=1, n_head=2)
    return GPT2LMHeadModel(config).eval()


def test_forward_mode_resolution_on_a_cpu():
    assert resolve_forward_mode(tiny_llama(), "auto") == "dynamic"
    assert resolve_forward_mode(tiny_opt(), "slots") == "slots"
    assert resolve_forward_mode(tiny_gpt2(), "auto") == "dynamic"


@pytest.mark.parametrize(
    ("build", "mode", "message"),
    [
        (tiny_llama, "graph", "needs a CUDA model"),
        (tiny_gpt2, "slots", "not 'gpt2'"),
        (tiny_llama, "static", "forward_mode must be one of"),
    ],
)
def test_unavailable_forward_modes_fail_with_one_line(build, mode, message):
    with pytest.raises(PrivleakError, match=message):
        decode(build(), [[1, 2]], max_new_tokens=2, forward_mode=mode)


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_finished_groups_leave_the_slot_batch_once_half_of_it_is_done(build):
    steps = 12
    free = decode(build(), PROMPTS, max_new_tokens=steps, seed=5)
    # EOS changes no draw before it, so the token found in the most rows (before the last step)
    # as EOS makes the most groups stop early.
    early = free.tokens[:, : steps - 1]
    eos = max(range(32), key=lambda token: int((early == token).any(1).sum()))
    kwargs = {"max_new_tokens": steps, "seed": 5, "eos_token_id": eos}
    dynamic = decode(build(), PROMPTS, forward_mode="dynamic", **kwargs)
    slots = decode(build(), PROMPTS, forward_mode="slots", **kwargs)
    assert (dynamic.lengths < steps).sum() * 2 >= len(PROMPTS)
    assert torch.equal(dynamic.tokens, slots.tokens)
    assert torch.allclose(dynamic.sample_logprobs, slots.sample_logprobs, atol=1e-5)
    # Without compaction every step would forward all rows.
    assert slots.step_counter.tokens < len(PROMPTS) * (int(slots.lengths.max()) - 1)
    assert slots.step_counter.tokens <= 2 * dynamic.step_counter.tokens
