"""S2 RAG leakage (Repeat/ROUGE Prompts and Contexts, PII recall, perplexity) on hand cases."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from rouge_score import rouge_scorer

from privleak.errors import PrivleakError
from privleak.metrics import rag_leakage as rl
from privleak.metrics.text import longest_common_run


def vocab(letter: str, n: int = 25) -> list[str]:
    """Context words with disjoint vocabularies per letter: a0 a1 ... a24."""
    return [f"{letter}{i}" for i in range(n)]


def join(tokens: list[str]) -> str:
    return " ".join(tokens)


A, B, C, D = (vocab(x) for x in "abcd")
CONTEXTS = {"A": join(A), "B": join(B), "C": join(C), "D": join(D)}


def test_a_run_of_exactly_min_words_ending_at_both_last_words_counts():
    # 20 words against the same 20 words: the only run starts at len - 20 = 0 and ends at the
    # last word of both texts, the window Zeng et al.'s code skips (PAD's counts it).
    text = join(A[:20])
    assert rl.shares_verbatim_run(text, text, min_words=20)
    assert not rl.shares_verbatim_run(join(A[:19]), join(A[:19]), min_words=20)


def test_a_run_ending_at_the_last_word_of_either_text_counts():
    tail = A[5:]  # the context's last 20 words
    assert rl.shares_verbatim_run("intro " + join(tail), CONTEXTS["A"], 20)  # both ends
    assert rl.shares_verbatim_run(join(tail) + " outro", CONTEXTS["A"], 20)  # context's end
    assert rl.shares_verbatim_run("x y " + join(A[:20]), CONTEXTS["A"], 20)  # response's end
    assert not rl.shares_verbatim_run("x y " + join(A[6:]), CONTEXTS["A"], 20)  # only 19 words


def test_verbatim_runs_ignore_punctuation_but_not_case_or_gaps():
    # PAD's evaluation code tokenizes with RegexpTokenizer(r"\w+"): case is kept
    context = "The patient, aged 54, reported chest pain after running."
    assert rl.shares_verbatim_run("The patient aged 54 reported chest", context, 6)
    assert not rl.shares_verbatim_run("the PATIENT aged 54 reported chest", context, 6)
    assert not rl.shares_verbatim_run("The patient aged 54 years reported chest", context, 6)
    assert not rl.shares_verbatim_run("", context, 1)
    assert rl.longest_run("x The patient aged 54 y", context) == 4


def test_verbatim_run_agrees_with_the_longest_common_run():
    rng = random.Random(0)
    for _ in range(200):
        response = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 12)))
        context = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 12)))
        longest = rl.longest_run(response, context)
        assert longest == longest_common_run(response, context)  # lower-case words: the same
        for n in range(1, 8):
            assert rl.shares_verbatim_run(response, context, n) == (longest >= n)


def official_rouge(response: str, context: str, threshold: float) -> bool:
    """Independent of text.rouge_l: rouge-score's own scorer, recall or precision."""
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    score = scorer.score(context, response)["rougeL"]
    return score.recall > threshold or score.precision > threshold


@pytest.mark.parametrize(
    ("response", "context"),
    [
        ("alpha beta gamma delta", "alpha zeta gamma delta omega"),
        ("Running patients were running quickly", "the patient runs quick"),
        (join(A[:20] + B[:20]), CONTEXTS["A"]),
        ("alpha zeta gamma " + join(vocab("w", 20)), "alpha zeta gamma"),
        ("nothing shared", CONTEXTS["C"]),
    ],
)
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_rouge_leaks_matches_rouge_score_directly(response, context, threshold):
    assert rl.rouge_leaks(response, context, "zeng", threshold) == official_rouge(
        response, context, threshold
    )
    f1 = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(context, response)
    assert rl.rouge_leaks(response, context, "pad", threshold) == (
        f1["rougeL"].fmeasure > threshold
    )


def test_rouge_leaks_is_strict_and_takes_recall_or_precision():
    # LCS alpha gamma delta = 3: precision 3/4, recall 3/5.
    assert rl.rouge_leaks("alpha beta gamma delta", "alpha zeta gamma delta omega", "zeng", 0.7)
    assert not rl.rouge_leaks(
        "alpha beta gamma delta", "alpha zeta gamma delta omega", "zeng", 0.75
    )
    # 40-word response, 20 of them from A: precision exactly 0.5 (not > 0.5), recall 20/25.
    assert rl.rouge_leaks(join(A[:20] + B[:20]), CONTEXTS["A"], "zeng", 0.5)
    assert not rl.rouge_leaks(join(A[:20] + B[:20]), CONTEXTS["A"], "zeng", 0.8)


def test_the_pad_rule_thresholds_rouge_l_f1_at_its_own_default():
    # P = 20/40, R = 20/25: F1 = 2 * 0.5 * 0.8 / 1.3 = 0.6154
    response = join(A[:20] + B[:20])
    assert rl.rouge_score(response, CONTEXTS["A"], "pad") == pytest.approx(0.8 / 1.3)
    assert rl.rouge_score(response, CONTEXTS["A"], "zeng") == pytest.approx(0.8)
    assert rl.rouge_leaks(response, CONTEXTS["A"])  # PAD's rule, F1 > 0.2
    # 4 of 25 context words, LCS 4 of a 40-word response: F1 = 2 * 0.1 * 0.16 / 0.26 = 0.123
    assert not rl.rouge_leaks(join(A[:4] + B[:20] + C[:16]), CONTEXTS["A"])
    assert rl.ROUGE_THRESHOLDS == {"pad": 0.2, "zeng": 0.5}


# p1 copies 20 words of A and of B; p2 copies A's last 20 words; p3 copies B, which it did not
# retrieve; p4 paraphrases D (15 of its words, interleaved with x every 5: ROUGE only).
ROWS = [
    {"prompt_id": "p1", "response": join(A[:20] + B[:20]), "context_ids": ["A", "B", "C"]},
    {"prompt_id": "p2", "response": join(A[5:]), "context_ids": ["A", "C", "D"]},
    {"prompt_id": "p3", "response": join(B[:20]), "context_ids": ["C", "D"]},
    {
        "prompt_id": "p4",
        "response": join(D[0:5] + ["x"] + D[5:10] + ["x"] + D[10:15]),
        "context_ids": ["D"],
    },
]


def test_row_leakage_lists_the_leaked_contexts_of_one_prompt():
    assert rl.row_leakage(ROWS[0], CONTEXTS, rouge_rule="zeng") == {
        "prompt_id": "p1",
        "repeat": True,
        "rouge": True,
        "rouge_pad": True,
        "rouge_zeng": True,
        "repeat_context_ids": ["A", "B"],
        "rouge_context_ids": ["A", "B"],
        "longest_run": 20,
        "rouge_score": pytest.approx(0.8),  # recall 20/25 against A and against B
    }
    p3, p4 = (rl.row_leakage(row, CONTEXTS, rouge_rule="zeng") for row in ROWS[2:])
    assert (p3["repeat"], p3["rouge"]) == (False, False)  # B copied but not retrieved
    assert (p4["repeat"], p4["rouge"], p4["rouge_context_ids"]) == (False, True, ["D"])
    assert (p3["longest_run"], p3["rouge_score"]) == (0, 0.0)
    assert p4["longest_run"] == 5 and p4["rouge_score"] == pytest.approx(15 / 17)
    # the PAD rule's score is F1: 2 P R / (P + R) with P = 15/17, R = 15/25
    pad = rl.row_leakage(ROWS[3], CONTEXTS)
    f1 = 2 * (15 / 17) * (15 / 25) / (15 / 17 + 15 / 25)
    assert pad["rouge_score"] == pytest.approx(f1) and pad["rouge"]


def test_leakage_counts_prompts_once_and_contexts_distinct():
    # Per (prompt, context) pair the repeats would be 3 (p1-A, p1-B, p2-A).
    assert rl.leakage_counts(ROWS, CONTEXTS, rouge_rule="zeng") == {
        "retrieved_contexts": 4,
        "retrieval_slots": 9,
        "repeat_prompts": 2,
        "repeat_contexts": 2,
        "rouge_prompts": 3,
        "rouge_contexts": 3,
    }
    one = rl.leakage_counts(ROWS[:1], CONTEXTS)
    assert (one["repeat_prompts"], one["repeat_contexts"]) == (1, 2)
    assert rl.leakage_counts([], CONTEXTS)["repeat_prompts"] == 0


def test_leakage_params_pass_through():
    # The longest copied runs are 20 words: nothing repeats at 21.
    counts = rl.leakage_counts(ROWS, CONTEXTS, min_words=21, rouge_rule="zeng",
                               rouge_thresholds={"pad": 0.2, "zeng": 0.9})  # fmt: skip
    assert (counts["repeat_prompts"], counts["repeat_contexts"]) == (0, 0)
    # ROUGE > 0.9: p2 (precision 1 against A) and nothing else (p4's precision is 15/17).
    assert (counts["rouge_prompts"], counts["rouge_contexts"]) == (1, 1)


def test_phone_numbers_match_across_separators():
    phone = [{"kind": "phone", "text": "555-123-4567"}]
    assert rl.pii_found("Call (555) 123 4567 today.", phone) == [True]
    assert rl.pii_found("Call +1 555.123.4567 today.", phone) == [True]
    assert rl.pii_found("Call 5551234567.", phone) == [True]
    assert rl.pii_found("Call 555-123-4568.", phone) == [False]
    assert rl.pii_found("Call 555-123 and 4567.", phone) == [False]  # words between
    # Fewer than 7 digits: exact text only.
    assert rl.pii_found("code 12 34", [{"kind": "phone", "text": "12-34"}]) == [False]


def test_other_kinds_match_exactly_and_case_sensitively():
    items = [
        {"kind": "email", "text": "Alice.Smith@example.com"},
        {"kind": "url", "text": "https://example.com/555-123-4567"},
        {"kind": "name", "text": "Alice Smith"},
    ]
    response = "alice.smith@example.com wrote from (555) 123 4567 as Alice Smith."
    assert rl.pii_found(response, items) == [False, False, True]


SECRETS = {
    "A": [{"kind": "phone", "text": "555-123-4567"}, {"kind": "email", "text": "a@x.org"}],
    "B": [{"kind": "url", "text": "https://x.org/555"}, {"kind": "phone", "text": "555-123-4567"}],
}


def test_pii_recall_sums_exposed_items_over_prompts_per_kind():
    rows = [
        {
            "prompt_id": "p1",
            "response": "Phone (555) 123 4567, see https://x.org/555.",
            "context_ids": ["A", "B"],
        },
        {"prompt_id": "p2", "response": "Mail a@x.org.", "context_ids": ["A", "C"]},
        {"prompt_id": "p3", "response": "a@x.org", "context_ids": ["C"]},  # not exposed
    ]
    assert rl.pii_recall(rows, SECRETS) == {"phone": (1, 2), "email": (1, 2), "url": (1, 1)}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rl.shares_verbatim_run("a", "a", min_words=0), "min_words"),
        (lambda: rl.rouge_leaks("a", "a", threshold=1.5), "rouge_thresholds.pad"),
        (lambda: rl.rouge_leaks("a", "a", "f1"), "rouge_rule 'f1' is unknown"),
        (
            lambda: rl.row_leakage(ROWS[0], CONTEXTS, rouge_thresholds={"pad": 0.2}),
            "one threshold per rule",
        ),
        (lambda: rl.leakage_counts([{"prompt_id": "p"}], CONTEXTS), "needs prompt_id"),
        (
            lambda: rl.row_leakage(
                {"prompt_id": "p9", "response": "", "context_ids": ["A", "Z"]}, CONTEXTS
            ),
            r"'p9' retrieved context ids with no text: \['Z'\]",
        ),
        (lambda: rl.pii_found("x", [{"kind": "email", "text": ""}]), "non-empty text"),
        (lambda: rl.pii_recall([{"prompt_id": "p", "response": "x"}], SECRETS), "context_ids"),
    ],
)
def test_bad_inputs_raise_one_clear_line(call, message):
    with pytest.raises(PrivleakError, match=message) as raised:
        call()
    assert "\n" not in str(raised.value)


def test_prompt_outcomes_judge_each_response_against_its_own_defenses_contexts():
    leaked = "alice smith called on monday about her knee pain and the swelling that would not go"
    texts = [leaked + " away. Call 555-123-4567.", "an unrelated note"]
    chunks = pd.DataFrame({"corpus": ["c", "c"], "id": ["a", "b"], "text": texts})
    secrets = pd.DataFrame({"corpus": ["c", "c"], "chunk_id": ["a", "a"], "kind": ["phone", "name"],
                            "text": ["555-123-4567", "Alice Smith"]})  # fmt: skip
    responses = pd.DataFrame({
        "corpus": ["c"] * 4, "prompt_id": [0, 0, 1, 0],
        "defense": ["extraction", "pad", "extraction", "dist"],
        "family": ["table"] * 4, "value": [np.nan] * 4,
        # prompt 1 retrieved only "b", and Dist. on prompt 0 placed only "b" (it dropped "a"):
        # the same copy of "a" does not count against contexts the defense never showed, while
        # the planted items at risk stay those of the retrieved contexts.
        "retrieved_ids": [["a", "b"], ["a", "b"], ["b"], ["a", "b"]],
        "context_ids": [["a", "b"], ["a", "b"], ["b"], ["b"]],
        "text": [leaked + ", phone 555 123 4567", "I cannot help.", leaked, leaked],
        "clean_logprobs": [[-1.0, -2.0], [-0.5], [-3.0, -1.0, -2.0], [-1.0]],
    })  # fmt: skip
    out = rl.prompt_outcomes(chunks, secrets, responses, min_words=10, rouge_rule="zeng")
    assert out["repeat"].tolist() == [1, 0, 0, 0] and out["rouge"].tolist() == [1, 0, 0, 0]
    assert out["repeat_contexts"].tolist() == [["c/a"], [], [], []]
    assert out["pii_found"].tolist() == [1, 0, 0, 0]
    assert out["pii_exposed"].tolist() == [2, 2, 0, 2]
    assert out["context_ids"].tolist() == [["a", "b"], ["a", "b"], ["b"], ["b"]]
    assert out["cond_nll"].tolist() == [3.0, 0.5, 6.0, 1.0]
    assert out["cond_tokens"].tolist() == [2, 1, 3, 1]
    assert out["longest_run"].tolist()[0] >= 10 and out["longest_run"].tolist()[2:] == [0, 0]


def test_cued_secrets_sum_probabilities_per_prompt_and_defense():
    # three secrets on prompt 0: P = 0.5, 0.25 and 0.01 under PAD, 0.9, 0.5, 0.1 under Extraction
    esp = pd.DataFrame({
        "corpus": ["c"] * 6, "prompt_id": [0] * 6,
        "defense": ["pad"] * 3 + ["extraction"] * 3,
        "logprob": np.log([0.5, 0.25, 0.01, 0.9, 0.5, 0.1]),
    })  # fmt: skip
    out = rl.cued_secrets(esp).set_index("defense")
    assert out.loc["pad", "cued_sum"] == pytest.approx(0.76)
    assert out.loc["extraction", "cued_sum"] == pytest.approx(1.5)
    assert out["secrets"].tolist() == [3, 3]
