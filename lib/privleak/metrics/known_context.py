"""S0's known-context miniature (Flemings et al. §4.2): one model state's CID responses to the
PubMedQA-like contexts and how likely it finds each context as plain text, before and after
fine-tuning on half of them. The base model's responses can come from s0_generate, which drew
them with the same prompts and random streams."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from privleak.cid import cid_generate, generation_rows
from privleak.scoring import continuation_logprobs


def known_context_rows(
    model,
    tokenizer,
    prompts: Sequence,
    examples: Sequence[dict],
    settings: Sequence[tuple[float, float]],
    label: str,
    stream_keys: Sequence | None = None,
    **decoding,
) -> tuple[list[dict], list[dict], float]:
    """CID responses and context log-likelihoods of one model state.

    Args:
        model, tokenizer: the model in the state named `label` ("base" or "finetuned").
        prompts: one `prompts.ContextPrompt` per example (its `context` token ids).
        examples: per prompt, the example's fields (`example` is its id); they tag every row.
        settings: (λ, temperature) pairs, as `cid_generate` takes them.
        label: the model column of every row.
        stream_keys: per prompt, the key of its responses' random streams (default: its
            example id); the same key draws the same response from the same model.
        decoding: `cid_generate`'s keywords besides the token ids (max_new_tokens,
            min_new_tokens, seed, max_batch_streams, count_eos).

    Returns:
        (response rows as `cid.generation_rows`, one knowledge row per example {model, the
        example's fields, mean_logprob: the mean log-prob of the context's tokens given its
        first token}, seconds spent generating).
    """
    started = time.perf_counter()
    generation = cid_generate(
        model,
        prompts,
        settings,
        eos_token_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        example_ids=[e["example"] for e in examples] if stream_keys is None else stream_keys,
        **decoding,
    )
    seconds = time.perf_counter() - started
    tagged = [{"model": label, **example} for example in examples]
    rows = generation_rows(generation, tokenizer, tagged, settings)
    return rows, context_knowledge(model, prompts, examples, label), seconds


def context_knowledge(model, prompts: Sequence, examples: Sequence[dict], label: str) -> list[dict]:
    """One row per example {model: label, the example's fields, mean_logprob: the mean log-prob
    of its context's tokens given its first token}."""
    scores = continuation_logprobs(
        model, [p.context[:1] for p in prompts], [p.context[1:] for p in prompts]
    )
    return [
        {"model": label, **example, "mean_logprob": float(score.mean())}
        for example, score in zip(examples, scores, strict=True)
    ]


def drawn_response_rows(
    drawn: Mapping[tuple[float, float], Sequence[dict]],
    examples: Sequence[dict],
    settings: Sequence[tuple[float, float]],
    label: str,
) -> list[dict]:
    """`known_context_rows`' response rows for responses already drawn elsewhere.

    Args:
        drawn: per setting, one row per example (`influence_rows.drawn_rows`; list fields may
            come back from parquet as arrays).
        examples, settings, label: as `known_context_rows` takes them.

    Returns:
        One row per (example, setting): {model: label, the example's fields, the drawn row's
        response fields (λ, T, the response and its per-token records)}.
    """
    rows = []
    for index, example in enumerate(examples):
        for setting in settings:
            response = {
                key: value.tolist() if isinstance(value, np.ndarray) else value
                for key, value in drawn[setting][index].items()
                if key not in example and key not in ("experiment", "model")
            }
            rows.append({"model": label, **example, **response})
    return rows
