"""Repeat/Rouge Prompts, ROUGE-L, BERTScore-style F1 and the faithfulness proxy on hand cases."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from privleak.errors import PrivleakError
from privleak.metrics import text

CONTEXT = (
    "Alice Smith lives at 12 Oak Street in Springfield. She works as a nurse at the city hospital."
)


def test_words_are_lowercased_word_tokens():
    assert text.words("Dr. Smith's MRN-123!") == ["dr", "smith", "s", "mrn", "123"]


def test_direct_share_counts_words_inside_copied_runs():
    # 8 words; "lives at 12 oak street" (5 words) is copied, "she" and "works" appear in the
    # context but not in a 4-word run with their neighbours here.
    response = "She lives at 12 Oak Street, works hard"
    assert text.direct_token_share(response, CONTEXT, min_run=4) == pytest.approx(5 / 8)
    assert text.direct_token_share(response, CONTEXT, min_run=6) == 0.0
    # min_run = 1 is "the word occurs in the context": 7 of 8 (not "hard").
    assert text.direct_token_share(response, CONTEXT, min_run=1) == pytest.approx(7 / 8)
    assert text.direct_token_share("", CONTEXT) == 0.0


def test_repeat_prompt_needs_at_least_half_direct_words():
    assert text.is_repeat("She lives at 12 Oak Street, works hard", CONTEXT, 4, 0.5)
    assert not text.is_repeat("She lives at 12 Oak Street, works hard", CONTEXT, 4, 0.7)
    assert not text.is_repeat("A nurse moved to a new town far away", CONTEXT, 4, 0.5)


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda: text.direct_token_share("a", "a", min_run=0), "min_run"),
        (lambda: text.is_repeat("a", "a", share=0.0), "share"),
    ],
)
def test_bad_repeat_params_name_the_param(call, param):
    with pytest.raises(PrivleakError, match=param):
        call()


def test_longest_common_run():
    assert text.longest_common_run("she works as a nurse at home", CONTEXT) == 6  # she…at
    assert text.longest_common_run("nothing here matches", CONTEXT) == 0


def test_rouge_l_matches_a_hand_lcs():
    # LCS("alpha beta gamma delta", "alpha zeta gamma delta omega") = alpha gamma delta = 3.
    precision, recall, f1 = text.rouge_l("alpha beta gamma delta", "alpha zeta gamma delta omega")
    assert (precision, recall) == pytest.approx((3 / 4, 3 / 5))
    assert f1 == pytest.approx(2 * 0.75 * 0.6 / 1.35)


def test_rouge_prompt_uses_precision_against_the_long_context():
    long_context = CONTEXT + " " + " ".join(f"filler{i}" for i in range(200))
    copied = "Alice Smith lives at 12 Oak Street in Springfield"
    assert text.rouge_l(copied, long_context)[2] < 0.5  # F1 is tiny against a long context
    assert text.is_rouge_prompt(copied, long_context, 0.5)
    assert not text.is_rouge_prompt("The weather was pleasant all week long", long_context, 0.5)


def test_official_repeat_rule_counts_shared_unique_words():
    # CONTEXT's distinct words shared with the response: alice, smith, lives, at, 12 = 5.
    response = "Alice Smith lives at 12 at 12 somewhere else"
    assert text.shared_unique_words(response, CONTEXT) == 5
    assert text.is_repeat_official(response, CONTEXT, min_shared=4)
    assert not text.is_repeat_official(response, CONTEXT, min_shared=5)  # "more than", not ">="


def test_official_rouge_rule_takes_recall_or_precision():
    # LCS 3: precision 3/4, recall 3/5 -> a Rouge Prompt at 0.7 through precision only ...
    assert text.is_rouge_prompt_official(
        "alpha beta gamma delta", "alpha zeta gamma delta omega", 0.7
    )
    # ... and a short context copied inside a long response passes through recall only.
    response = "alpha zeta gamma " + " ".join(f"word{i}" for i in range(20))
    precision, recall, _ = text.rouge_l(response, "alpha zeta gamma")
    assert precision < 0.5 < recall
    assert text.is_rouge_prompt_official(response, "alpha zeta gamma", 0.5)
    assert not text.is_rouge_prompt(response, "alpha zeta gamma", 0.5)


def test_greedy_matching_on_hand_vectors():
    candidate = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    reference = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6]])
    precision, recall, f1 = text.greedy_match_f1(candidate, reference)
    assert precision == pytest.approx((1.0 + 0.8) / 2)
    assert recall == pytest.approx((1.0 + 0.8 + 0.8) / 3)
    assert f1 == pytest.approx(2 * precision * recall / (precision + recall))
    assert text.greedy_match_f1(candidate[:0], reference) == (0.0, 0.0, 0.0)


class FakeEmbedder:
    """Bag-of-letters embeddings: token i of a text is the one-hot of its word's first letter."""

    def encode(
        self,
        texts,
        output_value=None,
        convert_to_numpy=True,
        convert_to_tensor=False,
        batch_size=32,
    ):
        def vector(word):
            v = torch.zeros(26)
            v[ord(word[0]) - 97] = 1.0
            return v

        if output_value == "token_embeddings":
            pad = torch.zeros(1, 26)  # stands for [CLS] / [SEP]
            return [
                torch.cat([pad, torch.stack([vector(w) for w in text.words(t)]), pad])
                for t in texts
            ]
        return torch.stack([sum(vector(w) for w in text.words(t)) for t in texts])


def test_bertscore_minilm_backend_uses_greedy_token_matching():
    scores = text.bertscore_f1(["abc def", "xyz"], ["abc def", "abc"], embedder=FakeEmbedder())
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(0.0)


def test_unknown_backends_raise_naming_the_param():
    with pytest.raises(PrivleakError, match="bertscore backend 'bleurt'"):
        text.bertscore_f1(["a"], ["a"], backend="bleurt")
    with pytest.raises(PrivleakError, match="faithfulness backend 'nli'"):
        text.faithfulness(["a"], ["a"], backend="nli")


@pytest.mark.skipif(importlib.util.find_spec("bert_score") is not None, reason="installed")
def test_bert_score_backend_without_the_package_says_how_to_install():
    with pytest.raises(PrivleakError, match="pip install bert-score"):
        text.bertscore_f1(["a"], ["a"], backend="bert-score", model="roberta-large")


def test_sentence_support_averages_the_best_match_per_response_sentence():
    # Response sentence 1 = context sentence 1 (cosine 1); sentence 2 shares no first letters.
    context = "apple banana. cherry date."
    response = "apple banana. xylophone zebra."
    scores = text.sentence_support(FakeEmbedder(), [response], [context])
    assert scores[0] == pytest.approx((1.0 + 0.0) / 2)
    assert text.sentence_support(FakeEmbedder(), [""], [context]) == [0.0]


def test_sentences_split_on_end_punctuation_and_newlines():
    assert text.sentences("One. Two!\nThree? ") == ["One.", "Two!", "Three?"]


def test_content_word_support_ignores_stopwords():
    # content words: nurse, hospital, paris -> 2 of 3 occur in the context
    assert text.content_word_support(
        "The nurse at the hospital in Paris", CONTEXT
    ) == pytest.approx(2 / 3)
    assert text.content_word_support("the of and", CONTEXT) == 0.0


def test_real_minilm_prefers_a_paraphrase_over_an_unrelated_text():
    from privleak.models import load_embedder

    embedder = load_embedder()
    reference = "The nurse resigned after an internal review of spending."
    same, paraphrase, unrelated = text.bertscore_f1(
        [reference, "A nurse quit following a spending review.", "Bananas grow in warm places."],
        [reference] * 3,
        embedder=embedder,
    )
    assert same == pytest.approx(1.0, abs=1e-4)
    assert paraphrase > unrelated
    support = text.sentence_support(embedder, [reference, "Bananas grow."], [CONTEXT, CONTEXT])
    assert all(-1.0 <= s <= 1.0 for s in support)


def test_factkb_backend_scores_pairs_with_a_local_classifier(tmp_path):
    # Paper-profile path: an HF sequence classifier folder; here a tiny random BERT.
    from tests.conftest import tiny_bert_classifier, word_tokenizer

    tiny_bert_classifier().save_pretrained(tmp_path)
    word_tokenizer(False).save_pretrained(tmp_path)
    scores = text.faithfulness(
        ["the cat sat", "a dog ran to the park"],
        ["the cat sat on the mat"] * 2,
        backend=f"factkb:{tmp_path}",
    )
    assert len(scores) == 2 and all(0.0 < s < 1.0 for s in scores)
    with pytest.raises(PrivleakError, match="faithfulness model"):
        text.faithfulness(["a"], ["a"], backend=f"factkb:{tmp_path / 'missing'}")
