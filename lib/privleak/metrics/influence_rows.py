"""S0's tidy rows: CID responses per (context, setting), the n-gram influence of one response per
context n-gram, and a bounded-CID response's row, as the s0 notebooks save them.

A generation is `privleak.cid.cid_generate`'s result; response g is generation.tokens[g,
:lengths[g]]. `decoding` holds `ngram_influence`'s scoring keywords (lam, temperature,
eos_token_id, min_new_tokens, pad_id, [batch_size, eps]).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from privleak.batching import ForwardCounter
from privleak.cid import cid_generate, generation_rows
from privleak.metrics.influence import ngram_influence
from privleak.ngrams import Window, ngram_spans
from privleak.prompts import s0_prompt


def context_examples(
    tokenizer, records: Sequence[dict], *, corpus: str, template: str, limit, describe: dict
) -> tuple[list, list[tuple], list[dict]]:
    """The S0 prompts of `records` with contexts cut to `limit` tokens, and their rows.

    Args:
        records: n corpus records.
        limit: context tokens kept (None: all).
        describe: leading fields of every row (experiment, model).

    Returns:
        (prompts, keys, examples): n ContextPrompts, n stream keys (record id, limit) and n rows
        {**describe, corpus, example, example_index, context_limit, context_tokens, context,
        reference}.
    """
    prompts, keys, examples = [], [], []
    for index, record in enumerate(records):
        prompt, reference = s0_prompt(tokenizer, record, corpus, template, limit)
        prompts.append(prompt)
        keys.append((record["id"], limit))  # the response's random stream
        examples.append(
            describe
            | {
                "corpus": corpus,
                "example": record["id"],
                "example_index": index,
                "context_limit": limit,
                "context_tokens": len(prompt.context),
                "context": tokenizer.decode(prompt.context),
                "reference": reference,
            }
        )
    return prompts, keys, examples


def cid_experiment(
    model, tokenizer, records, settings, *, limits, corpus, template, describe, **generate
) -> Iterator[tuple[int, object, float, list[dict]]]:
    """CID responses of `records` × `settings` at each context limit.

    Args:
        records: n corpus records; settings: s (lam, temperature) pairs; limits: context limits.
        describe: leading fields of every row (experiment, model).
        generate: `cid_generate`'s remaining keywords (max_new_tokens, seed, cache, ...).

    Yields:
        Per limit: (limit, the generation, its seconds, its n × s `generation_rows`).
    """
    for limit in limits:
        prompts, keys, examples = context_examples(
            tokenizer, records, corpus=corpus, template=template, limit=limit, describe=describe
        )
        started = time.perf_counter()
        generation = cid_generate(
            model,
            prompts,
            settings,
            eos_token_id=tokenizer.eos_token_id,
            pad_id=tokenizer.pad_token_id,
            example_ids=keys,
            **generate,
        )
        seconds = time.perf_counter() - started
        yield limit, generation, seconds, generation_rows(generation, tokenizer, examples, settings)


def drawn_rows(
    rows: Sequence[dict], *, corpus: str, examples: int, limit: int, setting: tuple[float, float]
) -> list[dict] | None:
    """The rows of responses already drawn for the first `examples` records of `corpus` at
    context limit `limit` and (λ, T) `setting`, in record order; None unless all are there.

    A response depends only on (record id, limit, λ, T) and the seed (`cid_generate`), so such a
    row is the response another experiment would draw again.
    """
    lam, temperature = setting
    found = {
        row["example_index"]: row
        for row in rows
        if row["corpus"] == corpus
        and row["context_limit"] == limit
        and row["lam"] == lam
        and row["temperature"] == temperature
        and row["example_index"] < examples
    }
    if len(found) < examples:
        return None
    return [found[index] for index in range(examples)]


def family_example_rows(
    model, prompt, generation, g: int, *, describe: dict, n: int, window: Window, decoding: dict
) -> tuple[dict, list[dict]]:
    """Response g's row and its n-gram rows under one family size.

    Args:
        prompt: the response's ContextPrompt; generation: one setting per prompt.
        describe: leading fields of every row (size, parameters, example).
        n, window: the n-gram size and layout.

    Returns:
        ({**describe, context_tokens, length, tau}, one row {**describe, n, window, stride, i,
        start, tau} per n-gram).
    """
    length = int(generation.lengths[g])
    response = generation.tokens[g, :length].tolist()
    response_row = describe | {
        "context_tokens": len(prompt.context),
        "length": length,
        "tau": float(generation.tau[g, :length].sum()),
    }
    tau = ngram_influence(
        model, prompt, response, generation.logp_context[g, :length], n, **decoding, window=window
    )
    gram_rows = [
        describe
        | {
            "n": n,
            "window": window.kind,
            "stride": window.stride,
            "i": i,
            "start": start,
            "tau": float(tau[i].sum()),
        }
        for i, (start, _end) in enumerate(ngram_spans(len(prompt.context), n, window))
    ]
    return response_row, gram_rows


def ngram_example_rows(
    model, prompt, generation, g: int, *, example, ns, window: Window, decoding: dict
) -> tuple[list[dict], ForwardCounter]:
    """Response g's rows for every n-gram size (F3) and the tokens its ablations forwarded.

    Args:
        prompt: the response's ContextPrompt; example: its record id.
        ns: n-gram sizes; window: their layout.

    Returns:
        (one row {example, context_tokens, n, window, stride, i, start, end, length, tau,
        tau_tokens} per n and n-gram, the ForwardCounter).
    """
    counter, rows = ForwardCounter(), []
    length = int(generation.lengths[g])
    response = generation.tokens[g, :length].tolist()
    for n in ns:
        tau = ngram_influence(
            model,
            prompt,
            response,
            generation.logp_context[g, :length],
            n,
            **decoding,
            window=window,
            counter=counter,
        )
        for i, (start, end) in enumerate(ngram_spans(len(prompt.context), n, window)):
            rows.append(
                {
                    "example": example,
                    "context_tokens": len(prompt.context),
                    "n": n,
                    "window": window.kind,
                    "stride": window.stride,
                    "i": i,
                    "start": start,
                    "end": end,
                    "length": length,
                    "tau": float(tau[i].sum()),
                    "tau_tokens": tau[i].tolist(),
                }
            )
    return rows, counter


def bounded_example_row(
    model,
    tokenizer,
    prompt,
    generation,
    g: int,
    *,
    example,
    eps: float,
    lam_max: float,
    n: int,
    decoding: dict,
) -> tuple[dict, ForwardCounter]:
    """Response g's row under bounded CID (λ <= lam_max, budget eps) and the tokens its
    ablations forwarded.

    Args:
        prompt: the response's ContextPrompt; example: its record id.
        eps, lam_max: the bounded-CID setting that generated the response.
        n: the n-gram size of the ablations (laid out in blocks).

    Returns:
        ({example, eps, lam_max, n, length, response, tau_whole, max_tau_whole_token,
        max_tau_ngram_token, tau_ngram_mean, mean_lam_used}, the ForwardCounter).
    """
    counter = ForwardCounter()
    length = int(generation.lengths[g])
    response = generation.tokens[g, :length].tolist()
    tau_ngram = ngram_influence(
        model,
        prompt,
        response,
        generation.logp_context[g, :length],
        n,
        **(decoding | {"lam": lam_max, "eps": eps}),
        counter=counter,
    )
    row = {
        "example": example,
        "eps": eps,
        "lam_max": lam_max,
        "n": n,
        "length": length,
        "response": tokenizer.decode(response, skip_special_tokens=True),
        "tau_whole": float(generation.tau[g, :length].sum()),
        "max_tau_whole_token": float(generation.tau[g, :length].max()),
        "max_tau_ngram_token": float(tau_ngram.max()),
        "tau_ngram_mean": float(tau_ngram.sum(dim=1).mean()),
        "mean_lam_used": float(generation.lam_used[g, :length].mean()),
    }
    return row, counter
