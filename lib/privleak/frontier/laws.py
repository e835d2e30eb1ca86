"""Every defense's exact probability of emitting a planted secret, from one forward of a prompt's
streams (docs/design.md §12).

The streams of one attack prompt (the RAG prompt, the public prompt with no document, each
document alone, each document left out, and the prompts Dist., Summ. and redaction leave) are
prefilled once, sharing what they share (`privleak.audit.forced.prefill`), and each secret's cue +
secret is forced after every stream that some law reads. A law then turns those next-token
log-probs into the defense's own sampling distribution at each of the secret's positions:

- `Plain(stream)`: softmax(l / T) of one stream (no defense, Dist., Summ., redaction);
- `Noisy(stream, noise)`: E_z softmax((l + σ z) / T) with σ as the decoder sets it, bounded from
  both sides by deterministic integration (`privleak.audit.pad_law`; Static and PAD);
- `Mixed(lam, eps)`: CID's softmax((λ c + (1 − λ) o) / T) of the RAG and public streams, λ the
  bounded λ under a per-token ε (`privleak.cid.bounded_lambda`);
- `Aggregated(setting, documents)`: DP-ICL's exp(ε U / (2 s C)) over the public and the document
  streams (`privleak.dp_icl.dp_icl_utility`).

A secret's log-probability is the sum over its tokens (the cue forced before it): exact for every
law but the noisy ones, which get certified lower and upper bounds. Every law reads the same
forward, so the defenses pair per secret. EOS is excluded on the positions the decoder excludes
it (the response's first min_new_tokens steps), on the defended logits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from privleak.audit.forced import chunks, forced_rows, prefill
from privleak.audit.pad_law import law_bounds
from privleak.batching import ForwardCounter
from privleak.cid import block_eos, bounded_lambda, cid_logprobs
from privleak.dp_icl import dp_icl_utility
from privleak.dp_rag import DPICLSettings
from privleak.errors import require
from privleak.pad import Noise, noise_std, settings_table


@dataclass(frozen=True)
class Plain:
    stream: str


@dataclass(frozen=True)
class Noisy:
    stream: str
    noise: Noise


@dataclass(frozen=True)
class Mixed:
    lam: float
    eps: float | None = None  # bounded CID's per-token ε; None: plain CID


@dataclass(frozen=True)
class Aggregated:
    setting: DPICLSettings
    documents: tuple[str, ...]  # the document streams' names


Law = Plain | Noisy | Mixed | Aggregated


def streams_read(law: Law) -> tuple[str, ...]:
    """The stream names a law reads ("rag" and "public" for CID; "public" and its documents for
    DP-ICL)."""
    if isinstance(law, Plain | Noisy):
        return (law.stream,)
    if isinstance(law, Mixed):
        return ("rag", "public")
    return ("public", *law.documents)


@torch.inference_mode()
def forced_secrets(
    model,
    streams: Mapping[str, Sequence[int]],
    requests: Sequence[tuple[str, int]],
    targets: Sequence[tuple[Sequence[int], Sequence[int]]],
    pad_id: int,
    *,
    batch_rows: int = 32,
    counter: ForwardCounter | None = None,
) -> dict[tuple[str, int], torch.Tensor]:
    """{(stream, j): [len(secret_j), V] next-token log-probs (T = 1) at secret j's positions, its
    cue forced before it} for each requested (stream, j). targets[j] = (cue ids, secret ids). Each
    distinct stream is prefilled once (two names may hold the same prompt), then `batch_rows`
    forced rows at a time."""
    require(len(requests) >= 1, "request at least one (stream, secret) pair")
    counter = counter if counter is not None else ForwardCounter()
    distinct = list(dict.fromkeys(tuple(ids) for ids in streams.values()))
    position = {name: distinct.index(tuple(ids)) for name, ids in streams.items()}
    forked = prefill(model, [list(ids) for ids in distinct], pad_id, counter)
    out = {}
    for part in chunks(len(requests), 1, batch_rows):
        chosen = [requests[i] for i in part]
        suffixes = [list(targets[j][0]) + list(targets[j][1]) for _, j in chosen]
        logprobs = forced_rows(model, forked, [position[s] for s, _ in chosen], suffixes, pad_id,
                               counter)  # fmt: skip
        for index, (stream, j) in enumerate(chosen):
            cue, secret = len(targets[j][0]), len(targets[j][1])
            out[(stream, j)] = logprobs[index, cue : cue + secret].float()
    return out


def noise_steps(
    law: Noisy, rows: Mapping[str, torch.Tensor], cue_length: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma, Delta, protected), each [S], of a noisy law at the secret's positions (its steps
    cue_length + 1 ..., 1-based), as the decoder computes them from the clean log-probs."""
    logprobs = rows[law.stream]
    steps = torch.arange(cue_length + 1, cue_length + 1 + logprobs.shape[0])
    table = {k: v.to(logprobs.device) for k, v in settings_table([law.noise] * len(steps)).items()}
    return noise_std(logprobs, steps.to(logprobs.device), table)


def secret_logprob(
    law: Law,
    rows: Mapping[str, torch.Tensor],
    secret: Sequence[int],
    cue_length: int,
    *,
    temperature: float,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
) -> tuple[float, float]:
    """(lower, upper) bounds on ln P(the defense emits `secret` after its cue), from the forced
    rows of the streams the law reads ({stream: [S, V]}, S = len(secret)). Exact laws give one
    value twice; a noisy law gives certified bounds (`privleak.audit.pad_law`: the noise
    integrated deterministically, no Monte-Carlo error), summed over the secret's tokens. EOS is
    excluded where the response is shorter than min_new_tokens (a secret with a short cue), on
    the defended logits, as the decoder excludes it."""
    target = torch.tensor(list(secret), device=next(iter(rows.values())).device)
    blocked = torch.arange(len(secret), device=target.device) < min_new_tokens - cue_length

    def block(logits: torch.Tensor) -> torch.Tensor:
        return block_eos(logits, eos_token_id, blocked)

    def taken(logprobs: torch.Tensor) -> tuple[float, float]:
        value = float(logprobs.gather(-1, target[:, None])[:, 0].double().sum())
        return value, value

    if isinstance(law, Plain):
        return taken(torch.log_softmax(block(rows[law.stream]) / temperature, -1))
    if isinstance(law, Noisy):
        sigma, _, _ = noise_steps(law, rows, cue_length)  # from the clean log-probs
        logprobs = block(rows[law.stream]).double().cpu().numpy()
        low, high = law_bounds(logprobs, target.cpu().numpy(), sigma.double().cpu().numpy(),
                               temperature)  # fmt: skip
        return float(low.sum()), float(high.sum())
    if isinstance(law, Mixed):
        context, prior = block(rows["rag"]), block(rows["public"])
        lam = torch.full((len(secret),), float(law.lam), device=context.device)
        if law.eps is not None:
            lam = bounded_lambda(context, prior, law.eps, lam, temperature)
        return taken(cid_logprobs(context, prior, lam, temperature))
    public = rows["public"]
    documents = torch.stack([rows[d] for d in law.documents], 1)  # [S, k, V]
    present = torch.ones(documents.shape[:2], dtype=torch.bool, device=public.device)
    setting = law.setting
    utility = dp_icl_utility(public, documents, present, setting.alpha, setting.clip,
                             setting.theta)  # fmt: skip
    logits = setting.epsilon / setting.sensitivity * utility / (2 * setting.clip)
    return taken(torch.log_softmax(block(logits), -1))
