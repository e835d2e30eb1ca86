"""Context influence (Flemings et al. Defs. 3.1-3.3, Eq. 5) of token n-grams of the context.

τ_{i,n}(y_t) = |log p̄(y_t | D, x, y<t) − log p̄(y_t | D∖D_{i,n}, x, y<t)|, where p̄ is the decoding
distribution (CID: λ-mix of the with-context and no-context logits at temperature T) and
D_{i,n} = context tokens [i·n, (i+1)·n), removed at the token level. The n-grams do not overlap;
when n does not divide |D| the last n-gram is the shorter remainder, so every token belongs to
exactly one n-gram. n = |D| is the whole-context case (D∖D = the empty context).

Per response τ sums over its tokens (Def. 3.2); τ̂ averages over (context, query) pairs (Eq. 5,
done by the notebooks on the tidy artifacts).

Fast path: the variant without n-gram i agrees with the full prompt on head + D[:i·n], so the
keys/values of that prefix are computed once (one forward of the full prompt) and reused; a batch
of consecutive ablations shares the cached prefix of its first member and forwards the rest.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch

from privleak.cid import block_eos, bounded_lambda, check_lam, check_temperature, cid_logprobs
from privleak.errors import require
from privleak.prompts import ContextPrompt
from privleak.scoring import ForwardCounter, _pad, _positions, _repeat_cache, check_fits

Mechanism = Callable[[torch.Tensor], torch.Tensor]
"""Maps ablated-context log-probs [B, T, V] at the response positions to decoding log-probs."""


def ngram_spans(context_tokens: int, n: int) -> list[tuple[int, int]]:
    """Non-overlapping token n-grams [i·n, min((i+1)·n, |D|)) of a |D|-token context."""
    require(context_tokens >= 1, "the context is empty; context influence needs >= 1 token")
    require(isinstance(n, int) and n >= 1, f"n (n-gram size) must be an integer >= 1, got {n}")
    require(n <= context_tokens, f"n (n-gram size) must be <= |D| = {context_tokens}, got {n}")
    return [(start, min(start + n, context_tokens)) for start in range(0, context_tokens, n)]


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
    return torch.log_softmax(out.logits[0].float(), dim=-1)


@torch.inference_mode()
def ngram_logprobs(
    model,
    prompt: ContextPrompt,
    response: Sequence[int],
    n: int,
    mechanism: Mechanism,
    *,
    batch_size: int = 8,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """log p̄(y_t | D∖D_{i,n}) [K, len(response)] for the K non-overlapping n-grams of the context.

    One forward encodes head + D up to the last n-gram's start with a cache; each batch of
    consecutive ablations i0..i1 forks that cache cropped at head + D[:i0·n] and forwards only the
    remaining ablated context, the tail and the response. Equal to `ngram_logprobs_naive`.
    """
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(len(response) >= 1, "the response is empty")
    spans = ngram_spans(len(prompt.context), n)
    head = len(prompt.head)
    full = prompt.ids
    check_fits(model, [len(full) + len(response) - 1])
    device = model.device
    rows = [ablate(prompt, span).ids + list(response[:-1]) for span in spans]
    prompt_lengths = [len(full) - (end - start) for start, end in spans]
    shared = head + spans[-1][0]  # the longest prefix any ablation shares with the full prompt
    cache = None
    if shared >= 1:
        out = model(input_ids=torch.tensor([full[:shared]], device=device), use_cache=True)
        cache = out.past_key_values
        if counter is not None:
            counter.add(1, shared)
    results = []
    for first in range(0, len(spans), batch_size):
        batch = range(first, min(first + batch_size, len(spans)))
        prefix = head + spans[first][0]
        ids, mask = _pad([rows[k][prefix:] for k in batch], pad_id, "right")
        # Logits only from the earliest position that predicts a response token in the batch.
        starts = [prompt_lengths[k] - 1 - prefix for k in batch]
        keep = ids.shape[1] - min(starts)
        past = None
        if prefix >= 1:
            cropped = cache
            if prefix < shared:  # a negative crop drops that many trailing positions
                cropped = copy.deepcopy(cache)
                cropped.crop(prefix - shared)
            past = _repeat_cache(cropped, len(batch))
            mask = torch.cat([torch.ones(len(batch), prefix, dtype=torch.long), mask], dim=1)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=_positions(mask)[:, prefix:].to(device),
            past_key_values=past,
            logits_to_keep=keep,
            use_cache=past is not None,
        )
        if counter is not None:
            counter.add(*ids.shape)
        logprobs = torch.log_softmax(out.logits.float(), dim=-1)
        offset = ids.shape[1] - keep
        at = torch.stack([torch.arange(len(response)) + s - offset for s in starts]).to(
            device
        )  # [B, T] rows of `logprobs` that predict response token t
        picked = logprobs.gather(1, at[..., None].expand(-1, -1, logprobs.shape[-1]))
        results.append(_gather(mechanism(picked), response))
    return torch.cat(results).cpu()


@torch.inference_mode()
def ngram_logprobs_naive(
    model,
    prompt: ContextPrompt,
    response: Sequence[int],
    n: int,
    mechanism: Mechanism,
    *,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """Reference for `ngram_logprobs`: re-encodes every ablated prompt + response on its own."""
    rows = []
    for span in ngram_spans(len(prompt.context), n):
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
