"""Fluency of a response as PAD's Table 1 reports it: its perplexity *alone* under one fixed
evaluator LM (Wang et al. §4.1 "Perplexity (PPL): generation fluency"; the paper names no formula,
so we follow its evaluation code: the response text tokenized with the evaluator tokenizer's own
special tokens, at most 512 tokens, every token after the first scored given the ones before it,
PPL = exp(mean NLL), and Table 1's PPL the mean of the responses' perplexities).

The prompt, the retrieved contexts and the defense's noise play no part: a copied context and a
fluent paraphrase are scored as text. A response that is blank, or has fewer than two tokens, has
no scored token: its perplexity is NaN and it stays out of the mean. The evaluation code skipped
blank answers too; a one-token answer gave it a NaN loss, which made its whole mean NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privleak.errors import require
from privleak.scoring import continuation_logprobs

MAX_TOKENS = 512
"""The evaluation code's truncation of each response."""


def response_ids(tokenizer, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    """The response's token ids as the evaluator sees them: the tokenizer's special tokens
    included (its BOS, where it adds one), truncated to max_tokens."""
    require(max_tokens >= 2, f"max_tokens must be >= 2 to score a token, got {max_tokens}")
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])[:max_tokens]


def response_nll(
    model, tokenizer, texts: Sequence[str], *, batch_size: int = 16, max_tokens: int = MAX_TOKENS
) -> tuple[np.ndarray, np.ndarray]:
    """([n] summed NLL in nats, [n] scored tokens) of each response alone under the evaluator:
    tokens 2..m of its `response_ids` given the ones before (0 and 0 for a blank response or
    one below two tokens)."""
    ids = [response_ids(tokenizer, text, max_tokens) if text.strip() else [] for text in texts]
    scored = [i for i, row in enumerate(ids) if len(row) >= 2]
    nll, tokens = np.zeros(len(texts)), np.zeros(len(texts), dtype=int)
    if scored:
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        logprobs = continuation_logprobs(
            model,
            [ids[i][:1] for i in scored],
            [ids[i][1:] for i in scored],
            batch_size=batch_size,
            pad_id=pad_id,
        )
        for i, row in zip(scored, logprobs, strict=True):
            nll[i], tokens[i] = -float(row.double().sum()), len(row)
    return nll, tokens


def perplexity(nll: float, tokens: int) -> float:
    """exp(nll / tokens); NaN for a response with no scored token."""
    require(math.isfinite(nll) and nll >= 0, f"nll must be a finite number >= 0, got {nll}")
    return math.exp(nll / tokens) if tokens > 0 else math.nan


def mean_perplexity(perplexities: Sequence[float]) -> float:
    """Table 1's PPL: the mean of the responses' perplexities, NaN ones (no scored token) left
    out; NaN when none is left."""
    values = np.asarray(perplexities, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan
