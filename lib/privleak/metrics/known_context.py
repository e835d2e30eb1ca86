"""S0's known-context miniature (Flemings et al. §4.2): one model state's CID responses to the
PubMedQA-like contexts and how likely it finds each context as plain text, before and after
fine-tuning on half of them."""

from __future__ import annotations

import time
from collections.abc import Sequence

from privleak.cid import cid_generate, generation_rows
from privleak.scoring import continuation_logprobs


def known_context_rows(
    model,
    tokenizer,
    prompts: Sequence,
    examples: Sequence[dict],
    settings: Sequence[tuple[float, float]],
    label: str,
    **decoding,
) -> tuple[list[dict], list[dict], float]:
    """CID responses and context log-likelihoods of one model state.

    Args:
        model, tokenizer: the model in the state named `label` ("base" or "finetuned").
        prompts: one `prompts.ContextPrompt` per example (its `context` token ids).
        examples: per prompt, the example's fields (`example` is its id); they tag every row.
        settings: (λ, temperature) pairs, as `cid_generate` takes them.
        label: the model column of every row.
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
        example_ids=[e["example"] for e in examples],
        **decoding,
    )
    seconds = time.perf_counter() - started
    scores = continuation_logprobs(
        model, [p.context[:1] for p in prompts], [p.context[1:] for p in prompts]
    )
    knowledge = [
        {"model": label, **example, "mean_logprob": float(score.mean())}
        for example, score in zip(examples, scores, strict=True)
    ]
    tagged = [{"model": label, **example} for example in examples]
    return generation_rows(generation, tokenizer, tagged, settings), knowledge, seconds
