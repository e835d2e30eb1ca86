"""CID (Def. 3.4), bounded CID (Alg. 1) and the CID sweep generator, on hand-computable
5-token distributions and tiny random models."""

from __future__ import annotations

import math

import pytest
import torch

from privleak.batching import ForwardCounter
from privleak.cid import (
    CIDMix,
    bounded_lambda,
    cid_generate,
    cid_logprobs,
    generation_rows,
)
from privleak.decoding import prefill, temperature
from privleak.errors import PrivleakError
from privleak.metrics.influence import (
    bounded_cid_mechanism,
    ngram_logprobs,
    response_logprobs,
    token_influence,
)
from privleak.prompts import QUESTION, TASKS, ContextPrompt, no_context_prompt, s0_prompt
from tests.conftest import tiny_llama, word_tokenizer

PROBS = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
CONTEXT = PROBS.log()
UNIFORM = torch.zeros(5)  # a uniform prior: p̄ ∝ p_context^(λ/T)


def powered(power: float) -> list[float]:
    weights = PROBS**power
    return (weights / weights.sum()).tolist()


@pytest.mark.parametrize(("lam", "temp"), [(1.0, 1.0), (2.0, 1.0), (1.5, 0.8), (0.5, 0.5)])
def test_cid_against_uniform_prior_is_a_power_of_the_context_distribution(lam, temp):
    got = cid_logprobs(CONTEXT, UNIFORM, lam, temp).exp().tolist()
    assert got == pytest.approx(powered(lam / temp), abs=1e-6)


def test_lambda_zero_is_the_prior_and_one_is_the_context_model():
    prior = torch.tensor([0.1, 0.2, 0.3, 0.25, 0.15]).log()
    assert cid_logprobs(CONTEXT, prior, 0.0, 1.0).exp().tolist() == pytest.approx(
        [0.1, 0.2, 0.3, 0.25, 0.15], abs=1e-6
    )
    assert cid_logprobs(CONTEXT, prior, 1.0, 1.0).exp().tolist() == pytest.approx(
        PROBS.tolist(), abs=1e-6
    )


def test_blocked_token_stays_excluded_without_nan_for_any_lambda():
    context = CONTEXT.clone()
    prior = UNIFORM.clone()
    context[4] = prior[4] = float("-inf")  # EOS blocked in both streams
    for lam in (0.0, 0.5, 1.0, 1.5, 2.0):
        probs = cid_logprobs(context, prior, lam, 0.8).exp()
        assert torch.isfinite(probs).all() and probs[4] == 0
        assert float(probs.sum()) == pytest.approx(1.0, abs=1e-6)


def test_mix_then_temperature_transform_equals_temperature_inside_the_mix():
    logits = torch.randn(3, 2, 7, generator=torch.Generator().manual_seed(0))
    groups = torch.arange(3)
    outside = torch.log_softmax(temperature(0.7)(CIDMix(1.5)(logits, groups, 0)[0]), dim=-1)
    inside = torch.log_softmax(CIDMix(1.5, 0.7)(logits, groups, 0)[0], dim=-1)
    assert torch.allclose(outside, inside, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"lams": -0.5}, "lam"), ({"lams": 1.0, "temperatures": 0.0}, "temperature")],
)
def test_bad_lambda_and_temperature_name_the_param(kwargs, param):
    with pytest.raises(PrivleakError, match=param):
        CIDMix(**kwargs)


def test_cid_generate_rejects_negative_lambda_and_zero_temperature():
    model = tiny_llama()
    prompt = ContextPrompt([1], [5, 6], [7])
    with pytest.raises(PrivleakError, match="lam"):
        cid_generate(model, [prompt], [(-1.0, 0.8)], max_new_tokens=2)
    with pytest.raises(PrivleakError, match="temperature"):
        cid_generate(model, [prompt], [(1.0, 0.0)], max_new_tokens=2)


def test_empty_context_is_rejected():
    with pytest.raises(PrivleakError, match="context is empty"):
        cid_generate(tiny_llama(), [ContextPrompt([1], [], [7])], [(1.0, 0.8)], max_new_tokens=2)
    with pytest.raises(PrivleakError, match="context is empty"):
        s0_prompt(word_tokenizer(False), {"article": "  "}, "cnn_dm", "plain", None)


def test_context_over_the_window_without_truncation_names_context_tokens():
    model = tiny_llama(window=16)
    long = ContextPrompt([1], list(range(4, 20)), [7])
    with pytest.raises(PrivleakError, match="context_tokens"):
        cid_generate(model, [long], [(1.0, 0.8)], max_new_tokens=4)


def test_bounded_lambda_matches_the_closed_form_on_two_tokens():
    # p(·|D) = (0.8, 0.2), uniform prior, T = 1: p̄_λ(y1) = σ(λ ln 4); the worst token is y2 with
    # |log(2(1 − σ))| = ε/2, so σ(λ ln 4) = 1 − e^{−ε/2}/2.
    context, prior = torch.tensor([0.8, 0.2]).log(), torch.zeros(2)
    for eps in (0.1, 0.5, 1.0):
        sigma = 1 - math.exp(-eps / 2) / 2
        expected = math.log(sigma / (1 - sigma)) / math.log(4)
        got = float(bounded_lambda(context, prior, eps, lam_max=10.0, temperature=1.0))
        assert got == pytest.approx(expected, abs=1e-5)
    assert float(bounded_lambda(context, prior, 100.0, lam_max=1.5, temperature=1.0)) == 1.5


def test_bounded_lambda_rejects_non_positive_eps():
    with pytest.raises(PrivleakError, match="eps"):
        bounded_lambda(CONTEXT, UNIFORM, 0.0, 1.0, 1.0)


def _prompts():
    return [
        ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11], [12]),
        ContextPrompt([1], [13, 14], [12]),
    ]


def test_prefill_forwards_each_distinct_prompt_once_and_matches_plain_forwards(tiny_lm):
    settings = [(0.5, 0.8), (1.0, 0.8), (1.5, 1.0)]
    prompts = _prompts()
    streams = [ids for p in prompts for _ in settings for ids in (p.ids, p.with_context([]).ids)]
    counter = ForwardCounter()
    cache, mask, logits = prefill(tiny_lm, streams, 0, counter)
    distinct = {tuple(ids) for ids in streams}
    assert counter.tokens <= 1.25 * sum(len(ids) for ids in distinct)
    assert mask.shape == (len(streams), max(len(ids) for ids in streams))
    for row, ids in enumerate(streams):
        alone = tiny_lm(input_ids=torch.tensor([ids])).logits[0, -1]
        assert torch.allclose(logits[row], alone, atol=1e-4)
        assert mask[row].sum() == len(ids)


def test_responses_depend_on_example_and_setting_only(tiny_lm):
    prompts, settings = _prompts(), [(0.5, 0.8), (1.5, 1.0)]
    kwargs = {"max_new_tokens": 6, "min_new_tokens": 2, "eos_token_id": 2, "seed": 3}
    both = cid_generate(tiny_lm, prompts, settings, example_ids=["x", "y"], **kwargs)
    alone = cid_generate(
        tiny_lm, prompts[1:], settings[1:], example_ids=["y"], max_batch_streams=2, **kwargs
    )
    assert both.token_lists()[3] == alone.token_lists()[0]
    assert torch.allclose(both.tau[3, : alone.tau.shape[1]], alone.tau[0], atol=1e-5)


def test_count_eos_false_stops_before_eos_and_drops_only_its_influence(tiny_lm):
    prompts, settings = _prompts(), [(0.5, 2.0), (1.5, 2.0)]
    kwargs = {"max_new_tokens": 12, "min_new_tokens": 1, "eos_token_id": 2, "seed": 4}
    counted = cid_generate(tiny_lm, prompts, settings, **kwargs)
    stopped = cid_generate(tiny_lm, prompts, settings, count_eos=False, **kwargs)
    ended = [g for g, ids in enumerate(counted.token_lists()) if ids and ids[-1] == 2]
    assert ended, "the fixture must produce at least one response that ends with EOS"
    for g, ids in enumerate(counted.token_lists()):
        cut = len(ids) - (g in ended)
        assert stopped.token_lists()[g] == ids[:cut]
        assert torch.equal(stopped.tau[g, :cut], counted.tau[g, :cut])
        assert float(stopped.tau[g, cut:].abs().sum()) == 0.0


def test_recorded_influence_equals_a_teacher_forced_recomputation(tiny_lm):
    prompts, settings = _prompts(), [(1.5, 0.8), (0.5, 1.2)]
    gen = cid_generate(
        tiny_lm, prompts, settings, max_new_tokens=7, min_new_tokens=3, eos_token_id=2, seed=1
    )
    for g in range(gen.tokens.shape[0]):
        prompt, (lam, temp) = prompts[g // 2], settings[g % 2]
        length = int(gen.lengths[g])
        response = gen.tokens[g, :length].tolist()
        with_ctx = response_logprobs(tiny_lm, prompt.ids, response).clone()
        without = response_logprobs(tiny_lm, prompt.with_context([]).ids, response).clone()
        blocked = torch.arange(length) < 3
        with_ctx[blocked, 2] = without[blocked, 2] = float("-inf")
        targets = torch.tensor(response)[:, None]
        full = cid_logprobs(with_ctx, without, lam, temp).gather(1, targets).squeeze(1)
        prior = cid_logprobs(with_ctx, without, 0.0, temp).gather(1, targets).squeeze(1)
        assert torch.allclose(gen.logp_context[g, :length], full, atol=1e-4)
        assert torch.allclose(gen.logp_prior[g, :length], prior, atol=1e-4)
        assert torch.allclose(gen.tau[g, :length], (full - prior).abs(), atol=1e-4)


def test_at_lambda_one_and_t_one_influence_is_the_absolute_pmi():
    gen = cid_generate(tiny_llama(), _prompts(), [(1.0, 1.0)], max_new_tokens=6, seed=2)
    pmi = gen.stream_logp[:, 0] - gen.stream_logp[:, 1]
    assert torch.allclose(gen.tau, pmi.abs(), atol=1e-5)


def test_theorem_31_influence_is_lambda_times_the_pmi_gap_when_normalisers_match():
    # Uniform prior, T = 1: log p̄_λ(y|D) − log p̄_λ(y|D') = λ·Δpmi − Δlog Z. With D = (0.7, 0.3)
    # and D' = (0.3, 0.7) both normalisers are 0.7^λ + 0.3^λ, so τ = λ·log(7/3) exactly.
    d, d_ablated = torch.tensor([0.7, 0.3]).log(), torch.tensor([0.3, 0.7]).log()
    prior = torch.tensor([0.5, 0.5]).log()
    for lam in (0.5, 1.0, 1.5, 2.0):
        tau = (cid_logprobs(d, prior, lam, 1.0) - cid_logprobs(d_ablated, prior, lam, 1.0)).abs()
        assert float(tau[0]) == pytest.approx(lam * math.log(7 / 3), abs=1e-5)


@pytest.mark.parametrize("eps", [0.2, 1.0])
def test_bounded_cid_keeps_every_measured_influence_within_eps(tiny_lm, eps):
    prompt = ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11, 13], [12])
    gen = cid_generate(
        tiny_lm,
        [prompt],
        [(2.0, 0.8)],
        max_new_tokens=6,
        min_new_tokens=2,
        eos_token_id=2,
        eps=eps,
    )
    length = int(gen.lengths[0])
    response = gen.tokens[0, :length].tolist()
    assert float(gen.tau[0].max()) <= eps / 2 + 1e-5
    prior = response_logprobs(tiny_lm, prompt.with_context([]).ids, response)
    mechanism = bounded_cid_mechanism(prior, eps, 2.0, 0.8, eos_token_id=2, min_new_tokens=2)
    for n in (1, 3):
        ablated = ngram_logprobs(tiny_lm, prompt, response, n, mechanism)
        assert float(token_influence(gen.logp_context[0, :length], ablated).max()) <= eps + 1e-5
    assert float(gen.lam_used.max()) <= 2.0


def test_generation_rows_cut_at_the_response_length():
    tokenizer = word_tokenizer(False)
    gen = cid_generate(tiny_llama(), _prompts(), [(1.0, 0.8)], max_new_tokens=5, eos_token_id=2)
    rows = generation_rows(gen, tokenizer, [{"example": "a"}, {"example": "b"}], [(1.0, 0.8)])
    for g, row in enumerate(rows):
        assert row["length"] == int(gen.lengths[g]) == len(row["tau_tokens"])
        assert row["tau"] == pytest.approx(float(gen.tau[g].sum()), abs=1e-5)


def test_s0_prompt_keeps_the_first_context_token_without_bos():
    # The official code re-tokenised with [:, 1:], dropping the first token when no BOS is added.
    tokenizer = word_tokenizer(False)
    record = {"context": "alice ran to the park", "question": "the dog", "long_answer": "a cat"}
    prompt, reference = s0_prompt(tokenizer, record, "pubmedqa", "plain", None)
    assert tokenizer.decode(prompt.context) == "alice ran to the park"
    assert prompt.ids == prompt.head + prompt.context + prompt.tail
    assert prompt.with_context([]).ids == prompt.head + prompt.tail
    assert reference == "a cat"
    short, _ = s0_prompt(tokenizer, record, "pubmedqa", "plain", 2)
    assert tokenizer.decode(short.context) == "alice ran"


class CharTokenizer:
    """One id per character, no special tokens: decoding ids gives back the exact text."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [ord(c) for c in text]}


@pytest.mark.parametrize("template", ["chat", "plain"])
@pytest.mark.parametrize("corpus", list(TASKS))
def test_no_context_prompt_is_the_text_of_the_emptied_prompt(corpus, template):
    record = {"article": "A b.", "context": "A b.", "question": "Why?", "highlights": "",
              "long_answer": ""}  # fmt: skip
    prompt, _ = s0_prompt(CharTokenizer(), record, corpus, template, None)
    emptied = "".join(map(chr, prompt.with_context([]).ids))
    assert emptied == no_context_prompt(corpus, template).replace(QUESTION, "Why?")


def test_no_context_prompt_drops_the_contexts_leading_space():
    # "Document:" then the query: the space before the context goes with the context.
    assert no_context_prompt("pubmedqa", "plain") == "Document:\n<question>\n"
    assert no_context_prompt("cnn_dm", "plain") == (
        "News article:\nSummary of the above news article:\n"
    )
    with pytest.raises(PrivleakError, match="template 'raw' is unknown"):
        no_context_prompt("pubmedqa", "raw")


def test_bounded_lambda_is_the_largest_feasible_lambda_by_brute_force():
    # The closed-form divergence inside the bisection agrees with a direct evaluation of
    # max_y |log p̄_λ(y) − log p̄_0(y)| on random rows with a blocked token.
    g = torch.Generator().manual_seed(4)
    context, prior = torch.randn(6, 40, generator=g) * 3, torch.randn(6, 40, generator=g) * 3
    context[:, 7] = prior[:, 7] = float("-inf")
    temp, eps = 0.8, 0.7
    lam = bounded_lambda(context, prior, eps, lam_max=3.0, temperature=temp)

    def divergence(value):
        gap = cid_logprobs(context, prior, value, temp) - cid_logprobs(context, prior, 0.0, temp)
        return gap.nan_to_num(0.0).abs().amax(dim=-1)

    assert (divergence(lam) <= eps / 2 + 1e-5).all()
    assert ((divergence(lam + 1e-3) > eps / 2) | (lam >= 3.0)).all()
