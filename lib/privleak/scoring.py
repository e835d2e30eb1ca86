"""Teacher-forced per-token log-probs of continuations given prompts.

Everything works on token ids, so the caller decides about BOS: the first continuation token is
always scored from the logits at the last prompt position, and a prompt must hold at least one
token (prepend BOS for an unconditional score). Batches are right-padded by default; left padding
is supported and gives the same numbers because position ids follow the attention mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch

from privleak.batching import (
    ForwardCounter,
    UnitCache,
    check_fits,
    pad_rows,
    position_ids,
    repeat_cache,
    through_cache,
)
from privleak.errors import require
from privleak.models import real_logits


@torch.inference_mode()
def continuation_logprobs(
    model,
    prompts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    *,
    batch_size: int = 8,
    pad_id: int = 0,
    padding_side: str = "right",
    counter: ForwardCounter | None = None,
    cache: UnitCache | None = None,
) -> list[torch.Tensor]:
    """log p(c_j | prompt, c_<j) for every continuation token.

    prompts[i], continuations[i]: token id lists (len(prompt) >= 1). Returns a list of float32
    tensors, the i-th of shape [len(continuations[i])]. Examples are batched by length to keep
    padding small; the result does not depend on batch_size or padding_side. With a `cache`,
    each batch is one checkpoint unit.
    """
    require(len(prompts) == len(continuations), "prompts and continuations differ in number")
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(padding_side in ("left", "right"), f"padding_side '{padding_side}': use left|right")
    require(all(len(p) >= 1 for p in prompts), "every prompt needs >= 1 token (prepend BOS)")
    check_fits(model, [len(p) + len(c) for p, c in zip(prompts, continuations, strict=True)])
    results: list[torch.Tensor | None] = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: -(len(prompts[i]) + len(continuations[i])))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        pairs = [(list(prompts[i]), list(continuations[i])) for i in batch]
        scores, batch_counter = through_cache(
            cache,
            partial(_continuation_batch, model, pairs, pad_id, padding_side),
            "continuation batch",
            pairs,
            pad_id,
            padding_side,
        )
        if counter is not None:
            counter.merge(batch_counter)
        for i, row in zip(batch, scores, strict=True):
            results[i] = row
    return results


def _continuation_batch(
    model, pairs: list[tuple[list[int], list[int]]], pad_id: int, padding_side: str
) -> tuple[list[torch.Tensor], ForwardCounter]:
    """One padded forward over (prompt, continuation) pairs: their continuation log-probs (host
    tensors) and the forward's count."""
    device = model.device
    rows = [prompt + continuation for prompt, continuation in pairs]
    ids, mask = pad_rows(rows, pad_id, padding_side)
    length = ids.shape[1]
    # Row k scores positions [first_k, first_k + len(cont_k)) of the padded row.
    firsts = [
        (length - len(row) if padding_side == "left" else 0) + len(prompt) - 1
        for row, (prompt, _) in zip(rows, pairs, strict=True)
    ]
    keep = length - min(firsts)  # only these trailing positions need vocabulary logits
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=position_ids(mask).to(device),
        logits_to_keep=keep,
        use_cache=False,
    )
    counter = ForwardCounter()
    counter.add(*ids.shape)
    logprobs = torch.log_softmax(real_logits(model, out.logits.float()), dim=-1)
    offset = length - keep
    scores = []
    for k, (_, continuation) in enumerate(pairs):
        targets = torch.tensor(continuation, dtype=torch.long, device=device)
        rows_at = torch.arange(len(targets), device=device) + firsts[k] - offset
        scores.append(logprobs[k, rows_at, targets].cpu())
    return scores, counter


@torch.inference_mode()
def shared_prefix_logprobs(
    model,
    prefix: Sequence[int],
    suffixes: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    *,
    batch_size: int = 8,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> list[torch.Tensor]:
    """log p(c_j | prefix + suffix_i, c_<j) for variants that share one prefix.

    The prefix is encoded once; its keys and values are reused for every variant, so only
    suffix + continuation tokens are forwarded. Equal to
    `continuation_logprobs(model, [prefix + s for s in suffixes], continuations)`.
    Returns a list of [len(continuations[i])] float32 tensors.
    """
    require(len(suffixes) == len(continuations), "suffixes and continuations differ in number")
    require(len(prefix) >= 1, "the shared prefix needs >= 1 token")
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    check_fits(
        model, [len(prefix) + len(s) + len(c) for s, c in zip(suffixes, continuations, strict=True)]
    )
    device = model.device
    n_prefix = len(prefix)
    prefix_out = model(input_ids=torch.tensor([list(prefix)], device=device), use_cache=True)
    if counter is not None:
        counter.add(1, n_prefix)
    prefix_last = torch.log_softmax(real_logits(model, prefix_out.logits[0, -1].float()), dim=-1)
    results: list[torch.Tensor] = []
    for start in range(0, len(suffixes), batch_size):
        rows = [
            list(suffixes[i]) + list(continuations[i])
            for i in range(start, min(start + batch_size, len(suffixes)))
        ]
        # Variants with nothing to forward (empty suffix, one-token continuation) are served by the
        # prefix logits alone; a zero-length batch cannot be forwarded.
        logprobs, offset = None, 0
        if max(len(row) for row in rows) > 0:
            ids, mask = pad_rows([row or [pad_id] for row in rows], pad_id, "right")
            mask = mask * torch.tensor([[bool(row)] for row in rows], dtype=torch.long)
            full_mask = torch.cat([torch.ones(len(rows), n_prefix, dtype=torch.long), mask], dim=1)
            offset = max(0, min(len(suffixes[i]) for i in range(start, start + len(rows))) - 1)
            out = model(
                input_ids=ids.to(device),
                attention_mask=full_mask.to(device),
                position_ids=(torch.arange(ids.shape[1]) + n_prefix).expand_as(ids).to(device),
                past_key_values=repeat_cache(prefix_out.past_key_values, len(rows)),
                logits_to_keep=ids.shape[1] - offset,
                use_cache=True,
            )
            if counter is not None:
                counter.add(*ids.shape)
            logprobs = torch.log_softmax(real_logits(model, out.logits.float()), dim=-1)
        for k, i in enumerate(range(start, start + len(rows))):
            targets = torch.tensor(list(continuations[i]), dtype=torch.long, device=device)
            # Row position whose logits predict continuation token j; -1 means the prefix's last.
            at = torch.arange(len(targets), device=device) + len(suffixes[i]) - 1
            scores = torch.empty(len(targets), device=device)
            from_prefix = at < 0
            scores[from_prefix] = prefix_last[targets[from_prefix]]
            if logprobs is not None:
                scores[~from_prefix] = logprobs[k, at[~from_prefix] - offset, targets[~from_prefix]]
            results.append(scores.cpu())
    return results


def encode_pair(tokenizer, prompt: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of (prompt, continuation), encoded separately.

    The prompt gets the tokenizer's special tokens (BOS if it adds one); the continuation gets
    none, so its first token is never mistaken for a BOS and dropped.
    """
    prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    continuation_ids = tokenizer(continuation, add_special_tokens=False)["input_ids"]
    require(len(continuation_ids) >= 1, "the continuation encodes to no tokens")
    return list(prompt_ids), list(continuation_ids)
