"""One teacher-forced pass per model that feeds every membership attack (privleak.mia.attacks).

For each text, given its token ids x_1..x_T after a first token x_0 (BOS, or the text's own first
token when the tokenizer has none, which then goes unscored): per scored token t, logprob[t] =
log p(x_t | x_<t), and the mean mu[t] and standard deviation sigma[t] of log p(z | x_<t) for
z ~ p(. | x_<t), all from the same float32 log-softmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privleak import models as registry
from privleak.batching import ForwardCounter, check_fits, pad_rows, position_ids
from privleak.errors import require
from privleak.mia.texts import token_ids
from privleak.models import real_logits


@dataclass(frozen=True)
class TokenStats:
    """One text's per-token statistics, each [T] float64."""

    logprob: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray


def _moments(logprobs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of log p(z) under p, per row of [..., V] log-probs."""
    probs = logprobs.exp()
    # 0 * -inf is NaN: a token of probability 0 adds nothing to either moment.
    finite = torch.where(torch.isfinite(logprobs), logprobs, torch.zeros_like(logprobs))
    mu = (probs * finite).sum(-1)
    second = (probs * finite.square()).sum(-1)
    return mu, (second - mu.square()).clamp_min(0).sqrt()


@torch.inference_mode()
def token_stats(
    model,
    texts: Sequence[Sequence[int]],
    *,
    batch_size: int = 16,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> list[TokenStats]:
    """Per-token log-prob, mu and sigma of every text [x_0, x_1..x_T] (T >= 1), x_0 unscored.

    Texts are batched longest first (right padding; position ids follow the mask), so the result
    does not depend on batch_size.
    """
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(all(len(t) >= 2 for t in texts), "every scored text needs >= 2 tokens (x_0 and one)")
    check_fits(model, [len(t) for t in texts], "scored text")
    device = model.device
    out: list[TokenStats | None] = [None] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        ids, mask = pad_rows([list(texts[i]) for i in batch], pad_id, "right")
        logits = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=position_ids(mask).to(device),
            use_cache=False,
        ).logits
        if counter is not None:
            counter.add(*ids.shape)
        # One text at a time through the vocabulary: [T, V] float32 at most, not [B, T, V].
        for row, i in enumerate(batch):
            scored = len(texts[i]) - 1
            logprobs = torch.log_softmax(real_logits(model, logits[row, :scored].float()), -1)
            targets = ids[row, 1 : scored + 1].to(device)
            chosen = logprobs.gather(-1, targets[:, None])[:, 0]
            mu, sigma = _moments(logprobs)
            out[i] = TokenStats(*(v.double().cpu().numpy() for v in (chosen, mu, sigma)))
    return out


def score_model(
    where: str, texts: Sequence[str], *, device: str, dtype: str, batch_size: int
) -> tuple[list[TokenStats], ForwardCounter]:
    """`token_stats` of every text under the model at `where` (a folder or registry name), with
    its forward count: one job of a worker process (`privleak.pipeline.workers`)."""
    model, tokenizer = registry.load(where, device=device, dtype=dtype)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    counter = ForwardCounter()
    stats = token_stats(
        model, token_ids(tokenizer, texts), batch_size=batch_size, pad_id=pad, counter=counter
    )
    return stats, counter
