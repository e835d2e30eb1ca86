"""DP-RAG end to end (privleak.dp_rag): units, the budget split, retrieval, prompts, generation
through the shared decoder, and the exact log-probs of forced continuations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privleak.accounting import composed_epsilon
from privleak.data.medical import check_units, names_disease
from privleak.dp_rag import (
    Ask,
    DPICLSettings,
    document_start,
    dp_icl_forced_logprobs,
    dp_rag_generate,
    forced_logprobs,
    lm_forced_distribution,
    prompt_ids,
    prompt_text,
    rag_fact_row,
    rag_generate,
    split_budget,
    stream_prompts,
    token_sensitivity,
)
from privleak.errors import PrivleakError
from privleak.retrieval import cosine_scores, retrieve
from tests.conftest import tiny_llama, word_tokenizer

DOCS = ["the cat sat on the mat", "a dog ran to the park", "alice sat on a mat", "bob ran"]
QUESTIONS = ["the cat ran", "a dog sat", "bob and alice"]


@pytest.fixture(scope="module")
def lm():
    return tiny_llama(vocab_size=16, window=128), word_tokenizer(add_bos=True)


def test_units_must_exist_and_own_one_document_each():
    check_units([{"id": "a", "unit": "p1"}, {"id": "b", "unit": "p2"}])
    with pytest.raises(PrivleakError, match="record 1 .*no privacy-unit id in field 'unit'"):
        check_units([{"id": "a", "unit": "p1"}, {"id": "b"}])
    with pytest.raises(PrivleakError, match="no privacy-unit id"):
        check_units([{"id": "a", "unit": "  "}])
    with pytest.raises(PrivleakError, match="unit 'p1' owns records 0 and 2"):
        check_units([{"id": i, "unit": unit} for i, unit in enumerate(["p1", "p2", "p1"])])
    with pytest.raises(PrivleakError, match="is empty"):
        check_units([])


def test_accuracy_rule_ignores_case_and_punctuation_not_spelling():
    assert names_disease("It may be FLUMPLENAXISM.", "Flumplenaxism")
    assert names_disease("a condition called Zorb-ilaxis", "Zorbilaxis")
    assert not names_disease("It may be Flumplenaxis.", "Flumplenaxism")
    assert not names_disease("", "Snurfluxias")


def test_budget_split_composes_to_the_total():
    budget = split_budget(5.0, 1e-3, 0.5, 20)
    assert budget.composed <= 5.0 + 1e-9
    # The split is tight: 1 % more per token overspends.
    over = composed_epsilon([(0.5, 1), (budget.token_epsilon * 1.01, 20)], 1e-3)
    assert over > 5.0
    # Composition beats adding epsilons: 20 tokens get more than (5 - 0.5) / 20 each.
    assert budget.token_epsilon > 4.5 / 20
    with pytest.raises(PrivleakError, match=r"retrieval_epsilon \(5.0\) must be < epsilon"):
        split_budget(5.0, 1e-3, 5.0, 20)
    with pytest.raises(PrivleakError, match=r"DP-RAG delta must be in \(0, 1\)"):
        split_budget(5.0, 1.0, 0.5, 20)
    with pytest.raises(PrivleakError, match="DP-RAG epsilon must be a finite number > 0"):
        split_budget(0.0, 1e-3, 0.5, 20)


def test_retrieve_is_seeded_by_key_and_capped_best_first():
    scores = np.linspace(0.1, 0.9, 40)
    first = retrieve(scores, epsilon=1.0, seed=3, key="q1", max_retrieve=5, k=10)
    again = retrieve(scores, epsilon=1.0, seed=3, key="q1", max_retrieve=5, k=10)
    assert first == again
    assert first.above == int((scores >= first.threshold).sum())
    assert len(first.chosen) == min(5, first.above)
    assert list(scores[first.chosen]) == sorted(scores[first.chosen], reverse=True)
    assert all(scores[i] >= first.threshold for i in first.chosen)
    draws = {retrieve(scores, epsilon=1.0, seed=3, key=f"q{i}", max_retrieve=5, k=10).threshold
             for i in range(5)}  # fmt: skip
    assert len(draws) == 5
    with pytest.raises(PrivleakError, match="max_retrieve must be >= 1"):
        retrieve(scores, epsilon=1.0, seed=3, key="q", max_retrieve=0, k=10)
    with pytest.raises(PrivleakError, match="k must be an integer >= 1"):
        retrieve(scores, epsilon=1.0, seed=3, key="q", max_retrieve=5, k=0)
    with pytest.raises(PrivleakError, match=r"p must be in \(0, 1\]"):
        retrieve(scores, epsilon=1.0, seed=3, key="q", max_retrieve=5, p=1.5)


def test_cosine_scores_of_normalised_vectors():
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(cosine_scores(vectors[:1], vectors), [[1.0, 0.6, 0.0]], atol=1e-7)


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_prompt_layouts():
    """The document first, as the official DP-RAG lays its streams out (its system messages
    verbatim), so every stream of a question ends with the same question turn."""
    tokenizer = word_tokenizer(add_bos=True)
    assert prompt_text(tokenizer, "q?", [], "plain") == "Question: q?\nAnswer:"
    one = prompt_text(tokenizer, "q?", ["d1"], "plain")
    assert one == 'Document:\n"d1"\n\nQuestion: q?\nAnswer:'
    several = prompt_text(tokenizer, "q?", ["d1", "d2"], "plain")
    assert several == 'Documents:\n"d1"\n"d2"\n\nQuestion: q?\nAnswer:'
    with pytest.raises(PrivleakError, match="'chat' needs a tokenizer with a chat template"):
        prompt_text(tokenizer, "q?", [], "chat")
    tokenizer.chat_template = CHATML
    chat = prompt_text(tokenizer, "q?", ["d1"], "chat")
    assert chat == (
        "<|im_start|>system\nYou give a short responses based on this document or a predefined "
        'set of similar documents.\nDocument:\n"d1"<|im_end|>\n<|im_start|>user\n'
        "q?<|im_end|>\n<|im_start|>assistant\n"
    )
    public = prompt_text(tokenizer, "q?", [], "chat")
    assert public == (
        "<|im_start|>system\nYou give a short response based on a predefined set documents."
        "<|im_end|>\n<|im_start|>user\nq?<|im_end|>\n<|im_start|>assistant\n"
    )
    # the template writes its own specials: no BOS added on top
    assert prompt_ids(tokenizer, "the cat", [], "chat")[0] != tokenizer.bos_token_id
    assert prompt_ids(tokenizer, "the cat", [], "plain")[0] == tokenizer.bos_token_id
    # a public answer prefix opens the answer in both layouts
    assert prompt_text(tokenizer, "q?", [], "plain", "It is") == "Question: q?\nAnswer: It is"
    assert prompt_text(tokenizer, "q?", ["d1"], "chat", "It is") == chat + "It is"
    with pytest.raises(PrivleakError, match="template 'xml' is unknown"):
        prompt_text(tokenizer, "q?", [], "xml")


def test_settings_reject_bad_mechanism_params():
    with pytest.raises(PrivleakError, match="DP-ICL epsilon per token must be a finite number > 0"):
        DPICLSettings(epsilon=-1.0)
    with pytest.raises(PrivleakError, match=r"C \(DP-ICL clipping\) must be > 0"):
        DPICLSettings(epsilon=1.0, clip=0.0)


def _asks(questions, documents, keys, settings, prefix=""):
    return [
        Ask(key, question, tuple(docs), setting, prefix)
        for question, docs, key in zip(questions, documents, keys, strict=True)
        for setting in settings
    ]


def _generate(lm, questions, documents, keys, **kwargs):
    model, tokenizer = lm
    options = {"template": "plain", "max_new_tokens": 6, "seed": 7, **kwargs}
    asks = _asks(questions, documents, keys, [DPICLSettings(epsilon=2.0)])
    return dp_rag_generate(model, tokenizer, asks, **options)


def test_responses_do_not_depend_on_batching_or_other_questions(lm):
    documents = [DOCS[:2], DOCS[1:4], []]
    together = _generate(lm, QUESTIONS, documents, ["a", "b", "c"])
    small_batches = _generate(lm, QUESTIONS, documents, ["a", "b", "c"], max_batch_streams=4)
    alone = _generate(lm, QUESTIONS[1:2], documents[1:2], ["b"])
    assert [r["tokens"] for r in together] == [r["tokens"] for r in small_batches]
    assert together[1]["tokens"] == alone[0]["tokens"]
    assert [r["documents"] for r in together] == [2, 3, 0]
    assert [r["public_only"] for r in together] == [False, False, True]


class PrefillTokens:
    """A model proxy summing the real (unpadded) tokens of its multi-token forwards: the
    prefills."""

    def __init__(self, model):
        self.model, self.tokens = model, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, **inputs):
        if inputs["input_ids"].shape[1] > 1:
            mask = inputs.get("attention_mask")
            self.tokens += int(inputs["input_ids"].numel() if mask is None else mask.sum())
        return self.model(**inputs)


def test_asks_of_one_question_share_one_prefill_and_keep_their_own_draws(lm):
    """Two epsilons and two thetas in one call: each setting's responses equal that setting
    decoded alone, and a question's streams are prefilled once for all of them, also when the
    batch budget splits them; asks with a subset of the documents reuse the same rows."""
    model, tokenizer = lm
    documents = [DOCS[:2], DOCS[1:3], DOCS[2:]]
    settings = [DPICLSettings(epsilon=0.5), DPICLSettings(epsilon=4.0, theta=0.01)]
    keys = ["a", "b", "c"]
    options = {"template": "plain", "max_new_tokens": 4, "seed": 3}
    counted = PrefillTokens(model)
    alone = [dp_rag_generate(counted, tokenizer, _asks(QUESTIONS, documents, keys, [s], "it is"),
                             **options) for s in settings]  # fmt: skip
    single = counted.tokens // 2
    subsets = [Ask(("sub", k), q, tuple(d[:1]), settings[0], "it is")
               for q, d, k in zip(QUESTIONS, documents, keys, strict=True)]  # fmt: skip
    for budget in (None, 3):
        counted.tokens = 0
        asks = _asks(QUESTIONS, documents, keys, settings, "it is") + subsets
        together = dp_rag_generate(counted, tokenizer, asks, max_batch_streams=budget, **options)
        assert [r["tokens"] for r in together[:6]] == [
            r["tokens"] for pair in zip(*alone, strict=True) for r in pair
        ]
        assert counted.tokens == single, budget
    assert [r["tokens"] for r in alone[0]] != [r["tokens"] for r in alone[1]]


def test_asks_of_one_call_share_alpha_and_clip(lm):
    model, tokenizer = lm
    with pytest.raises(PrivleakError, match="share alpha and C"):
        dp_rag_generate(
            model, tokenizer,
            _asks(QUESTIONS[:1], [DOCS[:1]], ["a"],
                  [DPICLSettings(epsilon=1.0), DPICLSettings(epsilon=1.0, clip=2.0)]),
            template="plain", max_new_tokens=2,
        )  # fmt: skip


def test_forced_log_probs_of_several_settings_equal_each_alone(lm):
    model, tokenizer = lm
    streams = stream_prompts(tokenizer, "the cat ran", DOCS[:3], "plain", "it is")
    settings = [DPICLSettings(epsilon=e, clip=0.4, theta=0.5) for e in (0.3, 3.0)]
    both = dp_icl_forced_logprobs(model, streams, [5, 6, 7], settings, pad_id=0)
    assert both.shape == (2, 3)
    for row, setting in zip(both, settings, strict=True):
        alone = dp_icl_forced_logprobs(model, streams, [5, 6, 7], [setting], pad_id=0)[0]
        torch.testing.assert_close(row, alone, atol=1e-6, rtol=0)
    assert not torch.allclose(both[0], both[1])


def test_decoder_log_probs_equal_the_exact_forced_ones(lm):
    """The log-prob the decoder recorded for each token it sampled equals the forced
    computation (one teacher-forced forward, the mix applied per position): the planted-fact
    measurement reads the very distribution DP-RAG samples from."""
    model, tokenizer = lm
    settings = DPICLSettings(epsilon=2.0, alpha=2.0, clip=0.4, theta=0.5)
    for docs in (DOCS[:3], []):
        (row,) = dp_rag_generate(
            model, tokenizer, [Ask("x", "the cat ran", tuple(docs), settings)], template="plain",
            max_new_tokens=5, min_new_tokens=2, seed=1,
        )  # fmt: skip
        streams = stream_prompts(tokenizer, "the cat ran", docs, "plain")
        (forced,) = dp_icl_forced_logprobs(
            model, streams, row["tokens"], [settings], pad_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id, blocked_steps=2,
        )  # fmt: skip
        torch.testing.assert_close(forced, torch.tensor(row["sample_logprobs"]), atol=1e-5, rtol=0)


def test_rag_baseline_is_greedy_over_one_prompt(lm):
    model, tokenizer = lm
    (row,) = rag_generate(
        model, tokenizer, ["a dog sat"], [DOCS[:2]], keys=["q"], template="plain", max_new_tokens=4
    )
    prompt = prompt_ids(tokenizer, "a dog sat", DOCS[:2], "plain")
    logprobs = forced_logprobs(model, [prompt], row["tokens"], tokenizer.pad_token_id)[0]
    assert logprobs.argmax(-1).tolist() == row["tokens"]
    forced = lm_forced_distribution(model, prompt, row["tokens"], pad_id=tokenizer.pad_token_id)
    torch.testing.assert_close(forced, logprobs, atol=1e-6, rtol=0)
    blocked = lm_forced_distribution(
        model, prompt, row["tokens"], pad_id=tokenizer.pad_token_id, eos_token_id=2,
        blocked_steps=2,
    )  # fmt: skip
    assert blocked[:2, 2].isinf().all() and blocked[2:, 2].isfinite().all()
    torch.testing.assert_close(blocked.exp().sum(-1), torch.ones(len(row["tokens"])))


def _mix_logprobs(settings: DPICLSettings, streams: torch.Tensor) -> torch.Tensor:
    logits, _ = settings.mix(streams.shape[0] - 1)(streams[None], torch.tensor([0]), 0)
    return torch.log_softmax(logits[0], -1)


def _peaked(top: int, vocabulary: int) -> torch.Tensor:
    """A document stream sure of `top`: l_clipped is +C there and -C everywhere else."""
    return torch.where(torch.arange(vocabulary) == top, 0.96, 0.04 / vocabulary).log()


def _largest_shift(before: torch.Tensor, after: torch.Tensor, settings: DPICLSettings) -> float:
    return float((_mix_logprobs(settings, after) - _mix_logprobs(settings, before)).abs().max())


def test_sensitivity_is_c_without_a_cap_and_2c_with_one():
    assert token_sensitivity(None) == 1
    assert token_sensitivity(20) == 2


def test_adding_a_document_realises_close_to_epsilon_with_the_papers_c():
    """No cap: neighbours differ by one added document. Hand-built worst case, vocabulary 200,
    C = 0.3: document A is sure of token 0, the added X of token 1; X adds +C to U(1) and -C to
    every other token, whose mass dominates the normaliser, so log P(1) rises by
    eps/2 + ln(Z / Z') = 0.5 + ln(122.35 / 74.85) = 0.99 of eps = 1: within eps, and close."""
    epsilon, vocabulary = 1.0, 200
    public = torch.full((vocabulary,), 1 / vocabulary).log()
    before = torch.stack([public, _peaked(0, vocabulary)])
    after = torch.stack([public, _peaked(0, vocabulary), _peaked(1, vocabulary)])
    settings = DPICLSettings(epsilon, clip=0.3, theta=1.0, sensitivity=token_sensitivity(None))
    shift = _largest_shift(before, after, settings)
    assert 0.95 * epsilon <= shift <= epsilon + 1e-6, shift
    twice = DPICLSettings(epsilon, clip=0.3, theta=1.0, sensitivity=2)
    assert _largest_shift(before, after, twice) <= 0.55 * epsilon  # 2C wastes half the budget


def test_a_swap_under_the_cap_needs_sensitivity_2c():
    """Cap: an added document X pushes C out of the kept set ({A, C} -> {A, X}). Vocabulary 2,
    A and C sure of token 0, X of token 1, eps = 10: with 2C, log P(1) rises by
    eps/2 + ln cosh(eps/2) = 9.31, within eps and close to it; with the paper's C it would rise
    by about 2 eps."""
    epsilon, vocabulary = 10.0, 2
    public = torch.full((vocabulary,), 0.5).log()
    before = torch.stack([public, _peaked(0, vocabulary), _peaked(0, vocabulary)])
    after = torch.stack([public, _peaked(0, vocabulary), _peaked(1, vocabulary)])
    capped = DPICLSettings(epsilon, clip=0.3, theta=1.0, sensitivity=token_sensitivity(2))
    shift = _largest_shift(before, after, capped)
    assert 0.9 * epsilon <= shift <= epsilon + 1e-6, shift
    paper = DPICLSettings(epsilon, clip=0.3, theta=1.0, sensitivity=1)
    assert _largest_shift(before, after, paper) > 1.5 * epsilon


def test_each_token_is_epsilon_dp_when_the_cap_swaps_a_document(lm):
    """The same neighbours through a real (tiny) model: adding document X pushes C out of the
    kept set ({A, C} -> {A, X}); every token's log-probability moves by at most epsilon."""
    model, tokenizer = lm
    question, epsilon = "the cat ran", 1.5
    a, c, x = "the cat sat on the mat", "bob ran to the park", "alice alice alice dog dog dog"
    before = stream_prompts(tokenizer, question, [a, c], "plain")
    after = stream_prompts(tokenizer, question, [a, x], "plain")

    def distribution(streams):
        # every token of the vocabulary as a one-token continuation
        settings = DPICLSettings(
            epsilon=epsilon, alpha=1.0, clip=0.5, theta=1.0, sensitivity=token_sensitivity(2)
        )
        return torch.stack([
            dp_icl_forced_logprobs(
                model, streams, [token], [settings], pad_id=tokenizer.pad_token_id
            )[0, 0]
            for token in range(16)
        ])  # fmt: skip

    shift = (distribution(before) - distribution(after)).abs().max()
    assert 0 < shift <= epsilon + 1e-5


def test_a_forced_target_reads_the_decoders_prefill(lm):
    """An ask's forced target gets the exact log-probs `dp_icl_forced_logprobs` computes alone,
    for each of its settings, and the non-private RAG row scores the fact in its one prompt."""
    model, tokenizer = lm
    fact = tokenizer("a mat", add_special_tokens=False)["input_ids"]
    settings = [DPICLSettings(e, clip=0.4) for e in (1.0, 8.0)]
    asks = [Ask("q1", "the cat ran", (DOCS[0], DOCS[2]), s, "it is", tuple(fact)) for s in settings]
    rows = dp_rag_generate(model, tokenizer, asks, template="plain", max_new_tokens=3,
                           min_new_tokens=1)  # fmt: skip
    streams = stream_prompts(tokenizer, "the cat ran", [DOCS[0], DOCS[2]], "plain", "it is")
    keywords = dict(pad_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                    blocked_steps=1)  # fmt: skip
    alone = dp_icl_forced_logprobs(model, streams, fact, settings, **keywords)
    scored_only = [Ask("q1", a.question, a.documents, a.setting, a.answer_prefix, a.forced,
                       sample=False) for a in asks]  # fmt: skip
    unsampled = dp_rag_generate(model, tokenizer, scored_only, template="plain", max_new_tokens=3,
                                min_new_tokens=1)  # fmt: skip
    assert [sorted(r) for r in unsampled] == [["documents", "forced_logprobs", "public_only"]] * 2
    assert [r["forced_logprobs"] for r in unsampled] == [r["forced_logprobs"] for r in rows]
    with pytest.raises(PrivleakError, match="draws no response needs forced"):
        dp_rag_generate(model, tokenizer, [Ask("x", "q", (), settings[0], sample=False)],
                        template="plain", max_new_tokens=1)  # fmt: skip
    for row, expected in zip(rows, alone, strict=True):
        torch.testing.assert_close(torch.tensor(row["forced_logprobs"]), expected, atol=1e-5,
                                   rtol=0)  # fmt: skip
    question = {"question_id": "q1", "question": "the cat ran", "fact": "a mat",
                "answer_prefix": "it is", "rag": ["d1"]}  # fmt: skip
    rag = rag_fact_row(model, tokenizer, question, {"d1": DOCS[1]}, template="plain",
                       blocked_steps=1)  # fmt: skip
    prompt = prompt_ids(tokenizer, "the cat ran", [DOCS[1]], "plain", "it is")
    distribution = lm_forced_distribution(model, prompt, fact, **keywords)
    assert rag == {"question_id": "q1", "fact_tokens": len(fact), "decoder": "rag",
                   "epsilon": math.inf,
                   "log_prob": float(distribution[range(len(fact)), fact].sum()),
                   "greedy_emits": distribution.argmax(-1).tolist() == fact}  # fmt: skip


def test_document_start_is_what_every_document_stream_begins_with():
    tokenizer = word_tokenizer(add_bos=True)
    tokenizer.chat_template = CHATML
    for template in ("plain", "chat"):
        start = document_start(tokenizer, template)
        assert len(start) >= 1
        for question, document in (("the cat", "a dog ran"), ("bob?", "alice sat")):
            assert prompt_ids(tokenizer, question, [document], template)[: len(start)] == start
