"""S0's tidy rows: CID examples per context limit and n-gram influence rows per response."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from privleak.metrics.influence import ngram_influence
from privleak.metrics.influence_rows import (
    bounded_example_row,
    context_examples,
    drawn_rows,
    family_example_rows,
    ngram_example_rows,
)
from privleak.ngrams import BLOCKS
from privleak.prompts import ContextPrompt
from tests.conftest import tiny_llama, word_tokenizer

PROMPT = ContextPrompt([1, 2], [10, 11, 12, 13, 14], [3])
DECODING = {"lam": 1.0, "temperature": 1.0, "eos_token_id": 0, "min_new_tokens": 0, "pad_id": 0}


def _generation() -> SimpleNamespace:
    """Two responses of length 3 and 2 (padded to 3)."""
    return SimpleNamespace(
        tokens=torch.tensor([[5, 6, 7], [8, 9, 0]]),
        lengths=torch.tensor([3, 2]),
        tau=torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.5, 9.0]]),
        logp_context=torch.tensor([[-1.0, -2.0, -3.0], [-1.5, -2.5, 0.0]]),
        lam_used=torch.tensor([[1.0, 0.5, 0.0], [0.2, 0.4, 9.0]]),
    )


def test_family_rows_sum_each_ngrams_influence_over_the_response():
    model = tiny_llama()
    describe = {"size": "h8", "parameters": 10, "example": "e1"}
    response, grams = family_example_rows(
        model, PROMPT, _generation(), 1, describe=describe, n=2, window=BLOCKS, decoding=DECODING
    )
    assert response == describe | {"context_tokens": 5, "length": 2, "tau": 1.0}
    tau = ngram_influence(model, PROMPT, [8, 9], torch.tensor([-1.5, -2.5]), 2, **DECODING)
    assert [(r["i"], r["start"]) for r in grams] == [(0, 0), (1, 2), (2, 4)]
    assert [r["tau"] for r in grams] == [float(t.sum()) for t in tau]
    assert list(grams[0]) == [*describe, "n", "window", "stride", "i", "start", "tau"]


def test_ngram_rows_cover_every_n_and_count_the_forwarded_tokens():
    model = tiny_llama()
    rows, counter = ngram_example_rows(
        model, PROMPT, _generation(), 0, example="e1", ns=[5, 2], window=BLOCKS, decoding=DECODING
    )
    assert [(r["n"], r["start"], r["end"]) for r in rows] == [
        (5, 0, 5), (2, 0, 2), (2, 2, 4), (2, 4, 5),
    ]  # fmt: skip
    whole = ngram_influence(model, PROMPT, [5, 6, 7], torch.tensor([-1.0, -2.0, -3.0]), 5,
                            **DECODING)  # fmt: skip
    assert rows[0]["tau_tokens"] == whole[0].tolist() and rows[0]["length"] == 3
    assert list(rows[0]) == ["example", "context_tokens", "n", "window", "stride", "i", "start",
                             "end", "length", "tau", "tau_tokens"]  # fmt: skip
    assert counter.tokens > 0


def test_context_examples_key_each_stream_by_record_and_limit():
    tokenizer = word_tokenizer(add_bos=False)
    records = [{"id": "r1", "question": "why", "context": "a b c d", "long_answer": "a"}]
    prompts, keys, examples = context_examples(
        tokenizer, records, corpus="pubmedqa", template="plain", limit=2,
        describe={"experiment": "main", "model": "m"},
    )  # fmt: skip
    assert keys == [("r1", 2)] and len(prompts[0].context) == 2
    columns = ["experiment", "model", "corpus", "example", "example_index", "context_limit",
               "context_tokens", "context", "reference"]  # fmt: skip
    assert list(examples[0]) == columns
    assert examples[0]["context_limit"] == 2 and examples[0]["example"] == "r1"


def test_bounded_row_reads_the_response_and_its_bounded_ablations():
    model, tokenizer = tiny_llama(), word_tokenizer(add_bos=False)
    row, counter = bounded_example_row(
        model, tokenizer, PROMPT, _generation(), 1, example="e1", eps=0.5, lam_max=0.8, n=2,
        decoding=DECODING,
    )  # fmt: skip
    tau = ngram_influence(
        model,
        PROMPT,
        [8, 9],
        torch.tensor([-1.5, -2.5]),
        2,
        **(DECODING | {"lam": 0.8, "eps": 0.5}),
    )
    assert row == {
        "example": "e1", "eps": 0.5, "lam_max": 0.8, "n": 2, "length": 2,
        "response": tokenizer.decode([8, 9], skip_special_tokens=True),
        "tau_whole": 1.0, "max_tau_whole_token": 0.5,
        "max_tau_ngram_token": float(tau.max()), "tau_ngram_mean": float(tau.sum(dim=1).mean()),
        "mean_lam_used": float(torch.tensor([0.2, 0.4]).mean()),
    }  # fmt: skip
    assert counter.tokens > 0


def _drawn(corpus: str, index: int, limit: int, lam: float, temperature: float) -> dict:
    return {"experiment": "main", "corpus": corpus, "example_index": index,
            "context_limit": limit, "lam": lam, "temperature": temperature,
            "tau": 10 * index + lam}  # fmt: skip


def test_drawn_rows_are_the_matching_responses_in_record_order():
    rows = [_drawn("pubmedqa", i, 256, lam, 0.8) for i in (2, 0, 1) for lam in (0.5, 1.0)]
    rows += [_drawn("cnn_dm", 0, 256, 1.0, 0.8), _drawn("pubmedqa", 0, 64, 1.0, 0.8)]
    rows += [_drawn("pubmedqa", 0, 256, 1.0, 0.5)]
    found = drawn_rows(rows, corpus="pubmedqa", examples=2, limit=256, setting=(1.0, 0.8))
    assert [
        (r["corpus"], r["example_index"], r["context_limit"], r["lam"], r["temperature"])
        for r in found
    ] == [("pubmedqa", 0, 256, 1.0, 0.8), ("pubmedqa", 1, 256, 1.0, 0.8)]
    assert [r["tau"] for r in found] == [1.0, 11.0]


def test_drawn_rows_is_none_unless_every_record_was_drawn():
    rows = [_drawn("pubmedqa", i, 256, 1.0, 0.8) for i in (0, 2)]
    first = {"corpus": "pubmedqa", "examples": 1}
    assert drawn_rows(rows, corpus="pubmedqa", examples=2, limit=256, setting=(1.0, 0.8)) is None
    assert drawn_rows(rows, **first, limit=256, setting=(1.0, 0.8)) == rows[:1]
    assert drawn_rows(rows, **first, limit=128, setting=(1.0, 0.8)) is None
    assert drawn_rows(rows, **first, limit=256, setting=(1.5, 0.8)) is None
