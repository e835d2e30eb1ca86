"""Exact per-decoder log-probs of given tokens: what `sampling_logprobs(...).gather(...)` gives,
without building any [R, V] distribution for the common decoders (none, Greedy, TopK, TopP).

Teacher-forced scoring asks each row for one token's log-prob under several decoders at once;
the decoders share one softmax, one argmax and one top-k pass. Top-p finds each row's nucleus
floor in three exact tiers (top candidates, a sorted bracket, a full sort) so flat rows of a 50k
vocabulary are not sorted whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import torch

from privleak.decoding.transforms import Greedy, TopK, TopP, Transform, sampling_logprobs

NUCLEUS_CANDIDATES = 1024
"""Top-p's fast path reads the nucleus off this many top candidates per row."""

BRACKET_STRIDE = 16
"""Flat rows estimate their nucleus floor from every BRACKET_STRIDE-th token's probability."""

BRACKET_MARGIN = 96
"""Sample ranks kept on either side of the estimate: the exact pass then sorts about
2 x BRACKET_MARGIN x BRACKET_STRIDE tokens per row instead of the whole vocabulary."""


def target_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, transforms: Sequence[Transform]
) -> torch.Tensor:
    """[R] log-prob of targets [R] under one decoder: `decoder_logprobs` for one chain."""
    return decoder_logprobs(logits, targets, [transforms])[0]


def decoder_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, chains: Sequence[Sequence[Transform]]
) -> torch.Tensor:
    """[C, R] log-prob of targets [R] under each decoder's modified distribution of logits [R, V]
    (float32, padded vocabulary already -inf): `sampling_logprobs(...).gather(-1, targets)` per
    chain, without building any [R, V] distribution when a chain is empty or one Greedy, TopK
    or TopP (other chains take the generic path).

    The decoders share one softmax, one argmax and one top-k pass (of the largest k), so six
    decoders cost little more than the most expensive one."""
    rows = _SharedRows(logits, targets, chains)
    return torch.stack([rows.score(tuple(chain)) for chain in chains])


class _SharedRows:
    """Per-row quantities of logits [R, V] that several decoders need, each computed once."""

    def __init__(self, logits: torch.Tensor, targets: torch.Tensor, chains):
        self.logits, self.targets = logits, targets
        ks = [c[0].k for c in map(tuple, chains) if len(c) == 1 and isinstance(c[0], TopK)]
        # One more than the largest k: the (k+1)-th value tells whether the k-th is tied.
        self.top_k = min(max(ks) + 1, logits.shape[-1]) if ks else 0

    @cached_property
    def target_logits(self) -> torch.Tensor:
        return self.logits.gather(-1, self.targets[:, None])[:, 0]

    @cached_property
    def argmax(self) -> torch.Tensor:
        return self.logits.argmax(-1, keepdim=True)

    @cached_property
    def probs(self) -> torch.Tensor:
        return torch.softmax(self.logits, dim=-1)

    @cached_property
    def top_prob(self) -> torch.Tensor:
        """[R] the largest probability, the argmax's (softmax is monotone)."""
        return self.probs.gather(-1, self.argmax)[:, 0]

    @cached_property
    def log_z(self) -> torch.Tensor:
        """[R] log of the softmax normaliser: the top logit minus the log of its probability."""
        return self.logits.gather(-1, self.argmax)[:, 0] - self.top_prob.log()

    @cached_property
    def top_values(self) -> torch.Tensor:
        return _largest(self.logits, self.top_k)

    def score(self, chain: tuple) -> torch.Tensor:
        transform = chain[0] if len(chain) == 1 else None
        if not chain or (isinstance(transform, TopP) and transform.p == 1):
            return self.target_logits - self.log_z
        if isinstance(transform, Greedy):
            return torch.where(self.argmax[:, 0] == self.targets, 0.0, float("-inf"))
        if isinstance(transform, TopK):
            return _top_k_target(self.logits, self.target_logits, transform.k, self.top_values)
        if isinstance(transform, TopP):
            return _top_p_target(self.probs, self.targets, transform.p, self.top_prob)
        return sampling_logprobs(self.logits, chain).gather(-1, self.targets[:, None])[:, 0]


TOPK_CHUNK = 64
"""`_largest` reads a row's top k off the k best of its chunks of this many columns."""


def _largest(logits: torch.Tensor, k: int) -> torch.Tensor:
    """[R, k] the k largest values of each row of logits [R, V], descending (= topk's values).

    Every one of them lies in a chunk whose maximum is among the k largest chunk maxima (the
    k-th largest maximum is itself one of k values at least that large), so one max pass over
    the row and a top-k over k chunks replace a top-k over the whole row; columns past the last
    whole chunk join the candidates as they are."""
    rows, width = logits.shape
    whole = width // TOPK_CHUNK * TOPK_CHUNK
    if whole // TOPK_CHUNK <= k:
        return logits.topk(k, dim=-1).values
    chunks = logits[:, :whole].view(rows, -1, TOPK_CHUNK)
    best = chunks.amax(-1).topk(k, dim=-1).indices  # [R, k] chunk ids
    candidates = chunks.gather(1, best[:, :, None].expand(-1, -1, TOPK_CHUNK)).flatten(1)
    candidates = torch.cat([candidates, logits[:, whole:]], dim=-1)
    return candidates.topk(k, dim=-1).values


def _top_k_target(
    logits: torch.Tensor, target: torch.Tensor, k: int, top: torch.Tensor
) -> torch.Tensor:
    """[R] target log-probs under TopK(k), from the row's largest values top [R, >= k]
    (descending): Z sums the top k and every further tie at the k-th. Only rows whose (k+1)-th
    value equals the k-th count their ties over the whole row (one host sync)."""
    k = min(k, logits.shape[-1])
    kth = top[:, k - 1]
    log_z = top[:, :k].logsumexp(-1)
    if top.shape[-1] > k:
        tied = torch.nonzero(top[:, k] == kth)[:, 0]
        if len(tied):
            extra = (logits[tied] == kth[tied, None]).sum(-1) - (
                top[tied, :k] == kth[tied, None]
            ).sum(-1)
            log_z[tied] = torch.logaddexp(log_z[tied], extra.float().log() + kth[tied])
    return torch.where(target >= kth, target - log_z, float("-inf"))


def _top_p_target(
    probs: torch.Tensor, targets: torch.Tensor, p: float, top_prob: torch.Tensor
) -> torch.Tensor:
    """[R] target log-probs under TopP(p): log q_t - log Z when q_t >= tau, else -inf, where tau
    is the probability of the last nucleus token and Z the mass of every token with q >= tau."""
    tau, z = _nucleus(probs, p, top_prob)
    q_t = probs.gather(-1, targets[:, None])[:, 0]
    return torch.where(q_t >= tau, q_t.log() - z.log().float(), float("-inf"))


def _nucleus(
    probs: torch.Tensor, p: float, top_prob: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tau [R], Z [R] float64) of TopP(p) for probs [R, V] whose largest are top_prob [R],
    computed exactly three ways:
    - rows whose nucleus is in their top NUCLEUS_CANDIDATES read it off a top-K pass (rows whose
      top K cannot reach p, K x top probability < p, skip it);
    - the other (flat) rows sort only a bracket of tokens around an estimate (`_bracketed`);
    - rows whose bracket misses tau fall back to a full sort.
    Each tier costs one host sync to find its rows."""
    tau = torch.empty_like(probs[:, 0])
    z = torch.empty_like(tau, dtype=torch.float64)
    # What the bracket's estimate may take as known: the exact mass of a row's top candidates
    # and the value below which its tail starts (none for rows that skip the top-K pass).
    head, ceiling = torch.zeros_like(tau), torch.full_like(tau, float("inf"))
    flat = NUCLEUS_CANDIDATES * top_prob < p
    peaked = torch.nonzero(~flat)[:, 0]
    if len(peaked):
        top = probs[peaked].topk(min(NUCLEUS_CANDIDATES, probs.shape[-1]), dim=-1).values
        tau[peaked], z[peaked], fits = _nucleus_of_descending(top, p)
        if top.shape[-1] < probs.shape[-1]:  # ties of tau may go on past the last candidate
            fits &= top[:, -1] < tau[peaked]
        flat[peaked] = ~fits
        head[peaked], ceiling[peaked] = top.sum(-1), top[:, -1]
    rows = torch.nonzero(flat)[:, 0]
    if len(rows):
        subset = probs if len(rows) == len(probs) else probs[rows]  # no copy if every row is flat
        tau[rows], z[rows], found = _bracketed(subset, p, head[rows], ceiling[rows])
        rows = rows[~found]
    if len(rows):
        descending = probs[rows].sort(-1, descending=True).values
        tau[rows], z[rows], _ = _nucleus_of_descending(descending, p)
    return tau, z


def _bracketed(
    probs: torch.Tensor, p: float, head: torch.Tensor, ceiling: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """(tau [R], Z [R], found [R]) for rows of probs [R, V] without sorting them whole, given
    each row's `head` [R] mass above `ceiling` [R] (0 and inf when unknown).

    A strided sample of each row's tail (below the ceiling), sorted, estimates where the
    cumulative mass reaches p: a ratio estimate, the sample's share of its own mass, so the
    noisy total cancels, and a few dominant tokens in the head do not count BRACKET_STRIDE times.
    Sample values BRACKET_MARGIN ranks either side give a bracket [lo, hi]. The mass above hi is
    summed exactly, the tokens inside the bracket are sorted, and tau is where that mass plus
    their running sum reaches p. `found` is False where the estimate missed (the mass above hi
    already reaches p, or the bracket's tokens do not); tau and Z are then undefined."""
    sample = probs[:, ::BRACKET_STRIDE]
    sample = torch.where(sample < ceiling[:, None], sample, 0.0).sort(-1, descending=True).values
    cumulative = sample.cumsum(-1)
    still_needed = ((p - head) / (1 - head).clamp(min=1e-12))[:, None]
    estimate = (cumulative < still_needed * cumulative[:, -1:]).sum(-1, keepdim=True)
    last = sample.shape[-1] - 1
    hi = sample.gather(-1, (estimate - BRACKET_MARGIN).clamp(0, last))
    lo = sample.gather(-1, (estimate + BRACKET_MARGIN).clamp(0, last))
    over = probs > hi
    above = torch.where(over, probs, 0.0).sum(-1, dtype=torch.float64)
    # Each row's bracket tokens, left-aligned in a [R, widest] block of zeros, then sorted.
    # lo <= hi, so the tokens over hi are a subset of those >= lo: xor leaves the bracket.
    row, column = torch.nonzero((probs >= lo) ^ over, as_tuple=True)
    # nonzero lists rows in order, so a search finds where each starts (a bool sum over [R, V]
    # costs more).
    starts = torch.searchsorted(row, torch.arange(len(probs) + 1, device=row.device))
    block = probs.new_zeros(len(probs), int(starts.diff().max()))
    at = torch.arange(len(row), device=row.device) - starts[row]
    block[row, at] = probs[row, column]
    tau, z, reaches = _nucleus_of_descending(block.sort(-1, descending=True).values, p, above)
    return tau, z, reaches & (above < p)


def _nucleus_of_descending(
    top: torch.Tensor, p: float, before: torch.Tensor | float = 0.0
) -> tuple[torch.Tensor, ...]:
    """(tau [R], Z [R], fits [R]) from probabilities [R, K] in descending order that follow
    `before` [R] of mass: tau is the last token whose mass before is < p (as in TopP), Z the mass
    down to tau's last tie, and fits whether these K reach p at all."""
    cumulative = top.cumsum(-1, dtype=torch.float64)  # float64 as in TopP
    cumulative = cumulative + (before[:, None] if torch.is_tensor(before) else before)
    last = ((cumulative - top < p).sum(-1, keepdim=True) - 1).clamp(min=0)
    tau = top.gather(-1, last)
    through_ties = (top >= tau).sum(-1, keepdim=True) - 1
    return tau[:, 0], cumulative.gather(-1, through_ties)[:, 0], cumulative[:, -1] >= p
