"""The model side of S3's LiRa attack (privleak.lira_sampling) on a tiny random Llama: NLLs and test
perplexity equal to direct forwards, shared prompt forwards, and samples that depend on (seed,
prompt id, sample) only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import privleak.lira_sampling as lira_sampling
from privleak.batching import ForwardCounter
from privleak.errors import PrivleakError
from privleak.scoring import continuation_logprobs
from tests.conftest import tiny_llama, word_tokenizer

PROMPTS = ["the cat sat on the mat", "a dog ran to the park", "alice sat"]
KEYS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def model():
    return tiny_llama(vocab_size=16, window=128)


@pytest.fixture(scope="module", params=[True, False], ids=["bos", "no-bos"])
def tokenizer(request):
    return word_tokenizer(add_bos=request.param)


def sample(model, tokenizer, prompts=PROMPTS, keys=KEYS, **settings):
    kwargs = dict(samples=3, top_k=40, max_new_tokens=6, seed=7, max_batch_streams=None)
    return lira_sampling.sample_continuations(
        model, tokenizer, prompts, keys, eos_token_id=None, **(kwargs | settings)
    )


@torch.no_grad()
def direct_logprobs(model, ids: list[int]) -> torch.Tensor:
    """[len(ids) - 1] log p(ids[t] | ids[:t]) from one unpadded forward."""
    logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    return logprobs[:-1].gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def test_sequence_nll_is_the_mean_token_nll_given_the_prompt(model, tokenizer):
    prompts = ["the cat sat", "the cat sat", "a dog", "a dog"]
    continuations = [[7, 4, 8], [12], [], [0]]  # [0] is <pad> only: no text, so empty
    got = lira_sampling.sequence_nll(model, tokenizer, prompts, continuations, batch_size=2)
    for i in (0, 1):
        prompt = tokenizer(prompts[i])["input_ids"]
        expected = -direct_logprobs(model, prompt + continuations[i])[len(prompt) - 1 :].mean()
        assert got[i] == pytest.approx(float(expected), abs=1e-5)
    assert np.isnan(got[2:]).all()
    with pytest.raises(PrivleakError, match="2 prompts for 1 continuations"):
        lira_sampling.sequence_nll(model, tokenizer, prompts[:2], continuations[:1], batch_size=2)


def test_grouped_scoring_equals_plain_batched_scoring_with_fewer_forwards(model):
    generator = torch.Generator().manual_seed(0)
    bases = [[1, 4, 5, 6, 7, 4, 8], [1, 9, 10, 11], [1, 12]]
    prompts = [bases[i % 3] for i in range(12)]
    conts = [torch.randint(4, 16, (1 + i % 5,), generator=generator).tolist() for i in range(12)]
    grouped_counter, plain_counter = ForwardCounter(), ForwardCounter()
    grouped = lira_sampling.grouped_continuation_logprobs(
        model, prompts, conts, batch_size=3, counter=grouped_counter
    )
    plain = continuation_logprobs(model, prompts, conts, batch_size=3, counter=plain_counter)
    for a, b in zip(grouped, plain, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert grouped_counter.tokens < plain_counter.tokens
    empty = lira_sampling.grouped_continuation_logprobs(
        model, [[1], [1, 4]], [[], [5]], batch_size=1
    )
    assert empty[0].numel() == 0 and empty[1].numel() == 1
    with pytest.raises(PrivleakError, match="2 prompts for 1 continuations"):
        lira_sampling.grouped_continuation_logprobs(model, [[1], [1]], [[5]], batch_size=1)


def test_a_prompts_samples_do_not_depend_on_other_prompts_or_batching(model, tokenizer):
    whole = sample(model, tokenizer)
    assert [(r["prompt_id"], r["sample"]) for r in whole] == [
        (k, s) for k in KEYS for s in (0, 1, 2)
    ]
    assert len({tuple(r["tokens"]) for r in whole}) > 3  # the samples differ
    chunked = sample(model, tokenizer, max_batch_streams=4)
    alone = sample(model, tokenizer, prompts=PROMPTS[1:2], keys=KEYS[1:2], max_batch_streams=3)
    assert [r["tokens"] for r in chunked] == [r["tokens"] for r in whole]
    assert [r["tokens"] for r in alone] == [r["tokens"] for r in whole[3:6]]
    assert [r["text"] for r in alone] == [
        tokenizer.decode(r["tokens"], skip_special_tokens=True) for r in whole[3:6]
    ]
    reseeded = sample(model, tokenizer, seed=8)
    assert [r["tokens"] for r in reseeded] != [r["tokens"] for r in whole]


class PrefillRows:
    """A model proxy counting the prompt rows of every prefill (forwards of > 1 position)."""

    def __init__(self, model):
        self.model, self.rows = model, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, **inputs):
        if inputs["input_ids"].shape[1] > 1:
            self.rows += inputs["input_ids"].shape[0]
        return self.model(**inputs)


def test_a_prompt_is_prefilled_once_for_all_of_its_samples(model, tokenizer):
    proxy = PrefillRows(model)
    # 7 streams would split a prompt's 3 samples over two chunks; the budget is rounded to 6.
    sample(proxy, tokenizer, max_batch_streams=7)
    assert proxy.rows == len(PROMPTS)
    with pytest.raises(PrivleakError, match="max_batch_streams must be >= samples"):
        sample(model, tokenizer, max_batch_streams=2)


@torch.no_grad()
def greedy_tokens(model, prompt: list[int], steps: int) -> list[int]:
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt) :]


def test_top_k_one_is_greedy_and_eos_ends_a_sample(model, tokenizer):
    prompt = tokenizer(PROMPTS[0])["input_ids"]
    expected = greedy_tokens(model, prompt, 6)
    rows = sample(model, tokenizer, prompts=PROMPTS[:1], keys=["a"], top_k=1)
    assert all(r["tokens"] == expected for r in rows)
    # Make the first token that is new at step >= 1 the EOS: the sample stops before it.
    stop = next(t for t in range(1, 6) if expected[t] not in expected[:t])
    rows = lira_sampling.sample_continuations(
        model, tokenizer, PROMPTS[:1], ["a"], samples=2, top_k=1, max_new_tokens=6, seed=0,
        max_batch_streams=None, eos_token_id=expected[stop],
    )  # fmt: skip
    assert [r["tokens"] for r in rows] == [expected[:stop]] * 2
    assert rows[0]["empty"] == (
        not tokenizer.decode(expected[:stop], skip_special_tokens=True).strip()
    )
    first = lira_sampling.sample_continuations(
        model, tokenizer, PROMPTS[:1], ["a"], samples=1, top_k=1, max_new_tokens=6, seed=0,
        max_batch_streams=None, eos_token_id=expected[0],
    )  # fmt: skip
    assert first[0]["tokens"] == [] and first[0]["text"] == "" and first[0]["empty"]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"samples": 0}, "samples must be an int >= 1"),
        ({"top_k": 0}, "top_k must be an int >= 1"),
        ({"keys": ["a", "b"]}, "3 prompts for 2 prompt_ids"),
        ({"keys": ["a", "a", "b"]}, "prompt_ids must be distinct"),
        ({"temperature": 0.0}, "temperature must be > 0"),
    ],
)
def test_sampling_rejects_bad_settings(model, settings, message):
    with pytest.raises(PrivleakError, match=message):
        sample(model, word_tokenizer(add_bos=True), **settings)


def test_a_forbidden_token_is_never_sampled_even_where_it_is_the_likeliest(tokenizer):
    # A model whose logits favour token 9 everywhere (+100 from a hook on lm_head): top-k 1
    # picks it at every step; forbidding it leaves every draw without it.
    favouring = tiny_llama(vocab_size=16, window=128)
    bias = torch.zeros(16)
    bias[9] = 100.0
    favouring.lm_head.register_forward_hook(lambda module, inputs, logits: logits + bias)
    free = sample(favouring, tokenizer, top_k=1)
    assert all(9 in row["tokens"] for row in free)
    forbidden = sample(favouring, tokenizer, top_k=1, forbidden_token_ids=[9])
    assert not any(9 in row["tokens"] for row in forbidden)
    assert all(row["tokens"] for row in forbidden)  # the draws go on without it


def test_held_out_perplexity_is_exp_of_the_token_weighted_nll(model, tokenizer):
    texts = ["the cat sat on the mat", "a dog ran", "bob"]
    seq_len = 4
    total, count = 0.0, 0
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        for start in range(0, len(ids), seq_len):
            piece = ids[start : start + seq_len]
            if len(piece) >= 2:
                nll = -direct_logprobs(model, piece)
                total, count = total + float(nll.sum()), count + len(nll)
    with_bos = tokenizer("bob")["input_ids"] == [1, 15]
    assert count == (3 + 2 + 3 + 1 if with_bos else 3 + 1 + 2)  # a piece's first token: context
    got = lira_sampling.held_out_perplexity(model, tokenizer, texts, batch_size=2, seq_len=seq_len)
    assert got == pytest.approx(math.exp(total / count), rel=1e-5)
    with pytest.raises(PrivleakError, match="nothing to score"):
        lira_sampling.held_out_perplexity(
            model, word_tokenizer(add_bos=False), ["bob"], batch_size=1, seq_len=4
        )


def test_held_out_nll_is_per_text_and_sums_to_the_perplexity(model, tokenizer):
    texts = ["the cat sat on the mat", "a dog ran", "bob"]
    nll, tokens = lira_sampling.held_out_nll(model, tokenizer, texts, batch_size=2, seq_len=4)
    for i, text in enumerate(texts):
        ids = tokenizer(text)["input_ids"]
        pieces = [ids[a : a + 4] for a in range(0, len(ids), 4) if len(ids[a : a + 4]) >= 2]
        direct = [-direct_logprobs(model, piece) for piece in pieces]
        assert tokens[i] == sum(len(d) for d in direct)
        assert nll[i] == pytest.approx(sum(float(d.sum()) for d in direct), rel=1e-5, abs=1e-6)
    ppl = lira_sampling.held_out_perplexity(model, tokenizer, texts, batch_size=2, seq_len=4)
    assert ppl == pytest.approx(math.exp(nll.sum() / tokens.sum()), rel=1e-12)
    # Without a BOS, the one-token text "bob" has nothing scored: 0 tokens, NLL 0.
    bare = word_tokenizer(add_bos=False)
    nll, tokens = lira_sampling.held_out_nll(
        model, bare, ["a dog ran", "bob"], batch_size=2, seq_len=4
    )
    assert tokens.tolist() == [2, 0] and nll[1] == 0.0 and nll[0] > 0


def test_attack_target_is_sampling_then_every_score_of_one_target(tmp_path, tokenizer, monkeypatch):
    target, reference = tiny_llama(vocab_size=16, window=128, seed=1), tiny_llama(16, 128, seed=2)
    for name, lm in (("target", target), ("reference", reference)):
        lm.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    folders = {name: str(tmp_path / name) for name in ("target", "reference")}
    loaded, load = [], lira_sampling.registry.load
    monkeypatch.setattr(lira_sampling.registry, "load",
                        lambda where, **kw: loaded.append(where) or load(where, **kw))  # fmt: skip
    lira_sampling._reference.cache_clear()
    settings = dict(samples=3, top_k=40, max_new_tokens=6, seed=7, max_batch_streams=None)
    result = lira_sampling.attack_target(
        folders["target"], {"J": folders["reference"], "K": folders["target"]},
        prompts=PROMPTS, prompt_ids=KEYS, test_texts=["the cat sat on the mat", "a dog ran"],
        forbidden_tokens=["</s>"], batch_size=2, seq_len=4, device="cpu", **settings,
    )  # fmt: skip
    rows = lira_sampling.sample_continuations(
        target, tokenizer, PROMPTS, KEYS, eos_token_id=tokenizer.eos_token_id,
        forbidden_token_ids=[tokenizer.eos_token_id], **settings,
    )  # fmt: skip
    assert [r["tokens"] for r in result["rows"]] == [r["tokens"] for r in rows]
    prompts = [dict(zip(KEYS, PROMPTS, strict=True))[r["prompt_id"]] for r in rows]
    tokens = [r["tokens"] for r in rows]
    for lm, column in ((target, "nll_self"), (reference, "nll_without_J")):
        want = lira_sampling.sequence_nll(lm, tokenizer, prompts, tokens, batch_size=2)
        np.testing.assert_allclose([r[column] for r in result["rows"]], want, rtol=1e-6)
    # The target is K's reference itself: its own scores, and each model loaded once.
    assert [r["nll_without_K"] for r in result["rows"]] == [r["nll_self"] for r in result["rows"]]
    assert sorted(loaded) == sorted(folders.values())
    nll, counted = lira_sampling.held_out_nll(
        target, tokenizer, ["the cat sat on the mat", "a dog ran"], batch_size=2, seq_len=4
    )
    np.testing.assert_allclose(result["test_nll"], nll, rtol=1e-6)
    assert result["test_tokens"].tolist() == counted.tolist()
