"""S2's PPL (privleak.metrics.fluency): a response's perplexity alone under a fixed evaluator, on a
bigram evaluator whose probabilities are written out by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from privleak.errors import PrivleakError
from privleak.metrics import fluency
from privleak.metrics.rag_leakage import table1_row, with_fluency
from tests.conftest import word_tokenizer

# p(next | previous) over a 4-token vocabulary; row = previous token id.
BIGRAM = torch.tensor(
    [
        [0.25, 0.25, 0.25, 0.25],
        [0.10, 0.20, 0.30, 0.40],
        [0.50, 0.125, 0.125, 0.25],
        [0.70, 0.10, 0.10, 0.10],
    ]
)


class BigramEvaluator(torch.nn.Module):
    """A fixed evaluator: next-token logits = log BIGRAM[previous token]."""

    config = SimpleNamespace(max_position_embeddings=64)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def forward(self, input_ids, logits_to_keep=0, **_):
        logits = BIGRAM.log()[input_ids]
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


class IdTokenizer:
    """Texts of digits 0-3 are their own ids; no special tokens."""

    pad_token_id = 0

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [int(c) for c in text.split()]}


def test_a_known_response_has_its_hand_computed_perplexity():
    # "1 3 0 2": scored tokens 3 | 1, 0 | 3, 2 | 0 -> p = 0.4, 0.7, 0.25 (the first is not scored)
    nll, tokens = fluency.response_nll(BigramEvaluator(), IdTokenizer(), ["1 3 0 2", "2 0"])
    expected = -(math.log(0.4) + math.log(0.7) + math.log(0.25))
    assert nll[0] == pytest.approx(expected) and tokens[0] == 3
    assert nll[1] == pytest.approx(-math.log(0.5)) and tokens[1] == 1
    assert fluency.perplexity(nll[0], tokens[0]) == pytest.approx((0.4 * 0.7 * 0.25) ** (-1 / 3))
    assert fluency.perplexity(nll[1], tokens[1]) == pytest.approx(2.0)


def test_batching_changes_nothing():
    texts = ["1 3 0 2", "0 0 0 0 0 0", "3 2 1"]
    together = fluency.response_nll(BigramEvaluator(), IdTokenizer(), texts, batch_size=8)
    apart = [fluency.response_nll(BigramEvaluator(), IdTokenizer(), [t]) for t in texts]
    assert together[0].tolist() == pytest.approx([nll[0] for nll, _ in apart])
    # uniform row 0: every scored token of "0 0 0 0 0 0" has p = 1/4, so PPL = 4
    assert fluency.perplexity(together[0][1], together[1][1]) == pytest.approx(4.0)


def test_responses_below_two_tokens_are_unscored_and_left_out_of_the_mean():
    texts = ["", "2", "2 0", "   "]
    nll, tokens = fluency.response_nll(BigramEvaluator(), IdTokenizer(), texts)
    assert tokens.tolist() == [0, 0, 1, 0] and nll.tolist()[:2] == [0.0, 0.0]
    ppl = [fluency.perplexity(n, t) for n, t in zip(nll, tokens, strict=True)]
    assert math.isnan(ppl[0]) and math.isnan(ppl[1]) and math.isnan(ppl[3])
    assert fluency.mean_perplexity(ppl) == pytest.approx(2.0)
    assert math.isnan(fluency.mean_perplexity([math.nan]))


def test_table_ppl_is_the_mean_of_per_response_perplexities_not_pooled():
    # PAD's evaluation code: np.mean of per-answer exp(loss). Two responses, 1 and 3 scored
    # tokens, NLL ln 2 and 3 ln 4: PPLs 2 and 4, so Table 1's PPL is 3; pooling would give
    # exp((ln 2 + 3 ln 4) / 4) = 2^(7/4) = 3.36.
    units = pd.DataFrame({
        "corpus": ["c", "c"], "prompt_id": [0, 1], "defense": ["pad", "pad"],
        "repeat": [0, 0], "rouge": [0, 0], "rouge_pad": [0, 0], "rouge_zeng": [0, 0],
        "repeat_contexts": [[], []], "rouge_contexts": [[], []], "pii_found": [0, 0],
        "pii_exposed": [0, 0], "cond_nll": [1.0, 1.0], "cond_tokens": [1, 1],
        "retrieved_ids": [["a"], ["a", "b"]], "context_ids": [["a"], ["a", "b"]],
    })  # fmt: skip
    scored = units[["corpus", "prompt_id", "defense"]].assign(
        nll=[math.log(2), 3 * math.log(4)], tokens=[1, 3]
    )
    row = table1_row(with_fluency(units, scored))
    assert row["ppl"] == pytest.approx(3.0)
    assert row["retrieval_slots"] == 3 and row["retrieved_contexts"] == 2
    assert row["placed_slots"] == 3 and row["no_context_share"] == 0.0
    emptied = units.assign(context_ids=[["a"], []])  # a filter left prompt 1 without context
    row = table1_row(with_fluency(emptied, scored))
    assert row["retrieval_slots"] == 3 and row["retrieved_contexts"] == 2  # the paper's column
    assert row["placed_slots"] == 1 and row["no_context_share"] == 0.5
    with pytest.raises(PrivleakError, match="1 responses have no evaluator score"):
        with_fluency(units, scored.iloc[:1])


def test_responses_are_truncated_and_keep_the_tokenizers_specials():
    tokenizer = word_tokenizer(add_bos=True)
    ids = fluency.response_ids(tokenizer, "the cat sat on the mat", max_tokens=3)
    assert len(ids) == 3 and ids[0] == tokenizer.bos_token_id
    with pytest.raises(PrivleakError, match="max_tokens must be >= 2"):
        fluency.response_ids(tokenizer, "the cat", max_tokens=1)
    with pytest.raises(PrivleakError, match="nll must be a finite number"):
        fluency.perplexity(float("nan"), 3)
