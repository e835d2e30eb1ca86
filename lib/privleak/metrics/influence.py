"""Context influence (Flemings et al. Defs. 3.1-3.3, Eq. 5) of token n-grams of the context.

τ_{i,n}(y_t) = |log p̄(y_t | D, x, y<t) − log p̄(y_t | D∖D_{i,n}, x, y<t)|, where p̄ is the decoding
distribution (CID: λ-mix of the with-context and no-context logits at temperature T) and D_{i,n}
is the i-th n-gram of the context, removed at the token level; a `privleak.ngrams.Window` lays the
n-grams out (disjoint blocks, or sliding windows as in the official code). n = |D| is the
whole-context case (D∖D = the empty context).

Per response τ sums over its tokens (Def. 3.2); τ̂ averages over (context, query) pairs (Eq. 5,
done by the notebooks on the tidy artifacts).

Fast path: the variant without the n-gram [start, end) agrees with the full prompt on head +
D[:start], so the keys/values of that prefix are computed once (one forward of head + D up to the
last n-gram's start) and every ablation reuses exactly its own prefix, forwarding only the
r = (|D| − end) + |tail| + |response| − 1 tokens after it: the analytic minimum Σ r over the
n-grams plus the one shared encode, for blocks and sliding windows alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.nn.functional import pad
from transformers import DynamicCache

from privleak.batching import ForwardCounter, check_fits, pad_rows, position_ids
from privleak.cid import block_eos, bounded_lambda, check_lam, check_temperature, cid_logprobs
from privleak.errors import require
from privleak.models import real_logits
from privleak.ngrams import BLOCKS, Window, ngram_spans
from privleak.prompts import ContextPrompt

Mechanism = Callable[[torch.Tensor], torch.Tensor]
"""Maps ablated-context log-probs [B, T, V] at the response positions to decoding log-probs."""


def ablate(prompt: ContextPrompt, span: tuple[int, int]) -> ContextPrompt:
    """The prompt with context tokens [start, end) removed (template kept)."""
    start, end = span
    return prompt.with_context(prompt.context[:start] + prompt.context[end:])


def cid_mechanism(
    prior_logprobs: torch.Tensor,
    lam: float,
    temperature: float,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
) -> Mechanism:
    """CID p̄ for ablated contexts: prior_logprobs [T, V] are the no-context stream's raw
    log-probs at the response positions; EOS is blocked at positions < min_new_tokens."""
    check_lam(lam)
    check_temperature(temperature)
    blocked = torch.arange(prior_logprobs.shape[0]) < min_new_tokens
    prior = block_eos(prior_logprobs, eos_token_id, blocked.to(prior_logprobs.device))

    def mechanism(context_logprobs: torch.Tensor) -> torch.Tensor:
        context = block_eos(context_logprobs, eos_token_id, blocked.to(context_logprobs.device))
        return cid_logprobs(context, prior.expand_as(context), lam, temperature)

    return mechanism


def bounded_cid_mechanism(
    prior_logprobs: torch.Tensor,
    eps: float,
    lam_max: float,
    temperature: float,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
) -> Mechanism:
    """Bounded CID (Alg. 1) for ablated contexts: λ is chosen per position on the ablated logits."""
    blocked = torch.arange(prior_logprobs.shape[0]) < min_new_tokens
    prior = block_eos(prior_logprobs, eos_token_id, blocked.to(prior_logprobs.device))

    def mechanism(context_logprobs: torch.Tensor) -> torch.Tensor:
        context = block_eos(context_logprobs, eos_token_id, blocked.to(context_logprobs.device))
        prior_b = prior.expand_as(context)
        lam = bounded_lambda(context, prior_b, eps, lam_max, temperature)
        return cid_logprobs(context, prior_b, lam, temperature)

    return mechanism


def _gather(logprobs: torch.Tensor, response: Sequence[int]) -> torch.Tensor:
    targets = torch.tensor(list(response), dtype=torch.long, device=logprobs.device)
    return logprobs.gather(-1, targets.expand(logprobs.shape[0], -1)[..., None]).squeeze(-1)


@torch.inference_mode()
def response_logprobs(
    model, prompt_ids: Sequence[int], response: Sequence[int], counter: ForwardCounter | None = None
) -> torch.Tensor:
    """Teacher-forced raw log-probs [len(response), V] at the positions predicting the response."""
    require(len(prompt_ids) >= 1, "every prompt needs >= 1 token")
    require(len(response) >= 1, "the response is empty")
    ids = list(prompt_ids) + list(response[:-1])
    check_fits(model, [len(ids)])
    out = model(input_ids=torch.tensor([ids], device=model.device), logits_to_keep=len(response))
    if counter is not None:
        counter.add(1, len(ids))
    return torch.log_softmax(real_logits(model, out.logits[0].float()), dim=-1)


PAD_WASTE = 0.05
"""Right padding a batch of ablations may add, as a share of its real forwarded tokens."""


def _buckets(
    prefixes: Sequence[int], suffixes: Sequence[int], batch_size: int, budget: int
) -> list[list[int]]:
    """Ablation rows (longest suffix first) in batches of <= batch_size rows whose padded forward
    rows × max suffix stays within (1 + PAD_WASTE) × their real suffix tokens and whose attended
    area rows × (max prefix + max suffix) stays within `budget` positions.

    prefixes[k]: cached tokens row k reuses; suffixes[k]: tokens it forwards.
    """
    order = sorted(range(len(suffixes)), key=lambda k: -suffixes[k])
    buckets: list[list[int]] = []
    for k in order:
        if buckets:
            bucket = buckets[-1] + [k]
            width = suffixes[bucket[0]]
            real = sum(suffixes[j] for j in bucket)
            attended = max(prefixes[j] for j in bucket) + width
            if (
                len(bucket) <= batch_size
                and width * len(bucket) <= (1 + PAD_WASTE) * real
                and attended * len(bucket) <= budget
            ):
                buckets[-1] = bucket
                continue
        buckets.append([k])
    return buckets


def _left_padded_cache(shared: DynamicCache, prefixes: Sequence[int]) -> DynamicCache:
    """A [B, H, max(prefixes), D] cache whose row k holds the first prefixes[k] slots of the
    one-row `shared` cache, left-padded with zeros so every row's cache ends at the same slot
    (the padding slots are masked by the caller)."""
    width = max(prefixes)
    cache = DynamicCache()
    for index, layer in enumerate(shared.layers):
        keys, values = (
            torch.cat([pad(states[:, :, :p], (0, 0, width - p, 0)) for p in prefixes])
            for states in (layer.keys, layer.values)
        )
        cache.update(keys, values, index)
    return cache


@torch.inference_mode()
def ngram_logprobs(
    model,
    prompt: ContextPrompt,
    response: Sequence[int],
    n: int,
    mechanism: Mechanism,
    *,
    window: Window = BLOCKS,
    batch_size: int = 8,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """log p̄(y_t | D∖D_{i,n}) [K, len(response)] for the K n-grams `ngram_spans(|D|, n, window)`.

    One forward encodes head + D up to the last n-gram's start with a cache. The ablation of
    [start, end) reuses exactly its shared prefix head + D[:start] of that cache and forwards only
    D[end:] + tail + response[:-1], the analytic minimum; sliding windows share the one cache too,
    their starts differ only in how much of it they read. Rows with different cached lengths
    share a batch: their cache slots are left-padded to one end slot and their new tokens
    right-padded, in batches of similar remaining length whose padding stays within PAD_WASTE of
    the real tokens (see `_buckets`); a forward holds <= batch_size rows and attends to
    <= batch_size × L positions, L = the longest ablated prompt + response. Equal to
    `ngram_logprobs_naive`.
    """
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(len(response) >= 1, "the response is empty")
    spans = ngram_spans(len(prompt.context), n, window)
    rows = [ablate(prompt, span).ids + list(response[:-1]) for span in spans]
    # Row k predicts y_0 from position firsts[k], its ablated prompt's last token.
    firsts = [len(row) - len(response) for row in rows]
    require(min(firsts) >= 0, "an ablated prompt is empty; the template needs >= 1 token")
    full = prompt.ids
    check_fits(model, [len(full) + len(response) - 1])
    # Cached: what row k shares with the full prompt, but never its first predicting position
    # (an empty tail puts it inside the shared prefix; its logits must be forwarded).
    head = len(prompt.head)
    prefixes = [min(head + start, first) for (start, _), first in zip(spans, firsts, strict=True)]
    suffixes = [len(row) - p for row, p in zip(rows, prefixes, strict=True)]
    device = model.device
    shared = max(prefixes)
    cache = None
    if shared >= 1:
        out = model(
            input_ids=torch.tensor([full[:shared]], device=device), logits_to_keep=1, use_cache=True
        )
        cache = out.past_key_values
        if counter is not None:
            counter.add(1, shared)
    results: list[torch.Tensor | None] = [None] * len(rows)
    budget = batch_size * max(len(row) for row in rows)
    for bucket in _buckets(prefixes, suffixes, batch_size, budget):
        cached = [prefixes[k] for k in bucket]
        ids, mask = pad_rows([rows[k][prefixes[k] :] for k in bucket], pad_id, "right")
        slots = max(cached)
        past = None
        if slots >= 1:  # mask layout [cache slots | new tokens]
            past = _left_padded_cache(cache, cached)
            in_cache = torch.arange(slots) >= slots - torch.tensor(cached)[:, None]
            mask = torch.cat([in_cache.long(), mask], dim=1)
        # Positions count real tokens only: row k's new tokens start at prefixes[k].
        positions = position_ids(mask)[:, slots:]
        starts = [firsts[k] - prefixes[k] for k in bucket]  # in the new tokens
        keep = ids.shape[1] - min(starts)  # logits only from the earliest predicting position
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            past_key_values=past,
            logits_to_keep=keep,
            use_cache=past is not None,
        )
        if counter is not None:
            counter.add(*ids.shape)
        logprobs = torch.log_softmax(real_logits(model, out.logits.float()), dim=-1)
        offset = ids.shape[1] - keep
        at = torch.stack([torch.arange(len(response)) + s - offset for s in starts]).to(
            device
        )  # [B, T] rows of `logprobs` that predict response token t
        picked = logprobs.gather(1, at[..., None].expand(-1, -1, logprobs.shape[-1]))
        for k, row in zip(bucket, _gather(mechanism(picked), response), strict=True):
            results[k] = row
    return torch.stack(results).cpu()


@torch.inference_mode()
def ngram_logprobs_naive(
    model,
    prompt: ContextPrompt,
    response: Sequence[int],
    n: int,
    mechanism: Mechanism,
    *,
    window: Window = BLOCKS,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """Reference for `ngram_logprobs`: re-encodes every ablated prompt + response on its own."""
    rows = []
    for span in ngram_spans(len(prompt.context), n, window):
        logprobs = response_logprobs(model, ablate(prompt, span).ids, response, counter)
        rows.append(_gather(mechanism(logprobs[None]), response)[0])
    return torch.stack(rows).cpu()


def token_influence(
    logp_context: torch.Tensor, logp_ablated: torch.Tensor, length: int | None = None
) -> torch.Tensor:
    """τ [..., T] = |log p̄(y_t|D) − log p̄(y_t|D∖D_{i,n})| (Def. 3.1), 0 for t >= length.

    logp_context [T] broadcasts against logp_ablated [..., T].
    """
    tau = (logp_context - logp_ablated).abs()
    if length is not None:
        tau = torch.where(torch.arange(tau.shape[-1]) < length, tau, torch.zeros(()))
    require(bool(torch.isfinite(tau).all()), "context influence is not finite (check EOS blocking)")
    return tau


def ngram_influence(
    model,
    prompt: ContextPrompt,
    response: Sequence[int],
    logp_context: torch.Tensor,
    n: int,
    *,
    lam: float,
    temperature: float,
    eps: float | None = None,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
    window: Window = BLOCKS,
    batch_size: int = 8,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """τ [K, len(response)] of each of the K n-grams of prompt's context (laid out by `window`)
    on a CID response (Def. 3.1): logp_context [len(response)] is the response's recorded
    log p̄(y_t | D); the ablated side is CID at λ = lam, or bounded CID with λ <= lam when eps is
    given (Alg. 1), with EOS blocked before min_new_tokens as during decoding."""
    prior = response_logprobs(model, prompt.with_context([]).ids, response, counter)
    if eps is None:
        mechanism = cid_mechanism(prior, lam, temperature, eos_token_id, min_new_tokens)
    else:
        mechanism = bounded_cid_mechanism(
            prior, eps, lam, temperature, eos_token_id, min_new_tokens
        )
    ablated = ngram_logprobs(
        model,
        prompt,
        response,
        n,
        mechanism,
        window=window,
        batch_size=batch_size,
        pad_id=pad_id,
        counter=counter,
    )
    return token_influence(logp_context, ablated)
