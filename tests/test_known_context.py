"""privleak.metrics.known_context: one model state's CID rows and context log-likelihoods, the
same as calling cid_generate and continuation_logprobs by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privleak.cid import cid_generate, generation_rows
from privleak.metrics.known_context import drawn_response_rows, known_context_rows
from privleak.prompts import ContextPrompt
from privleak.scoring import continuation_logprobs
from tests.conftest import tiny_llama, word_tokenizer


def test_rows_and_knowledge_equal_the_calls_they_stand_for():
    model, tokenizer = tiny_llama(), word_tokenizer(False)
    prompts = [ContextPrompt([1, 4], [5, 6, 7, 8], [12]), ContextPrompt([1], [13, 14, 15], [12])]
    examples = [{"example": "a", "seen": True}, {"example": "b", "seen": False}]
    settings = [(0.5, 0.8), (1.0, 0.8)]
    decoding = {"max_new_tokens": 4, "min_new_tokens": 1, "seed": 3}
    rows, knowledge, seconds = known_context_rows(
        model, tokenizer, prompts, examples, settings, "base", **decoding
    )
    generation = cid_generate(
        model, prompts, settings, eos_token_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id, example_ids=["a", "b"], **decoding,
    )  # fmt: skip
    tagged = [{"model": "base", **e} for e in examples]
    assert rows == generation_rows(generation, tokenizer, tagged, settings)
    scores = continuation_logprobs(model, [[5], [13]], [[6, 7, 8], [14, 15]])
    assert [k["mean_logprob"] for k in knowledge] == pytest.approx(
        [float(s.mean()) for s in scores]
    )
    assert knowledge[1] == {"model": "base", "example": "b", "seen": False,
                            "mean_logprob": knowledge[1]["mean_logprob"]}  # fmt: skip
    assert seconds >= 0


def test_drawn_responses_take_the_rows_the_same_streams_draw_here(tmp_path):
    """Responses drawn elsewhere on the same keys (and read back from parquet, arrays for lists)
    are the rows this model state would draw: the known-context base reuses s0_generate's."""
    model, tokenizer = tiny_llama(), word_tokenizer(False)
    prompts = [ContextPrompt([1, 4], [5, 6, 7, 8], [12]), ContextPrompt([1], [13, 14, 15], [12])]
    examples = [{"example": "a", "seen": True}, {"example": "b", "seen": False}]
    settings, keys = [(0.5, 0.8), (1.0, 0.8)], [("a", 4), ("b", 4)]
    decoding = {"max_new_tokens": 4, "min_new_tokens": 1, "seed": 3}
    rows, _, _ = known_context_rows(
        model, tokenizer, prompts, examples, settings, "base", stream_keys=keys, **decoding
    )
    elsewhere = cid_generate(
        model, prompts, settings, eos_token_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id, example_ids=keys, **decoding,
    )  # fmt: skip
    tagged = [{"experiment": "main", "model": "lm", "example": e["example"]} for e in examples]
    pd.DataFrame(generation_rows(elsewhere, tokenizer, tagged, settings)).to_parquet(
        tmp_path / "main.parquet"
    )
    main = pd.read_parquet(tmp_path / "main.parquet").to_dict("records")  # lists come as arrays
    assert isinstance(main[0]["tau_tokens"], np.ndarray)
    drawn = {s: [r for r in main if (r["lam"], r["temperature"]) == s] for s in settings}
    assert drawn_response_rows(drawn, examples, settings, "base") == rows
    by_id, _, _ = known_context_rows(model, tokenizer, prompts, examples, settings, "x", **decoding)
    assert [r["response_ids"] for r in by_id] != [r["response_ids"] for r in rows]
