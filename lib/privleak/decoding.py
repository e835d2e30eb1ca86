"""One sampler loop for N streams with per-stream KV caches and one batched forward per step.

Streams are grouped: every group samples one token per step and feeds it to all of its streams.
Plain decoding has one stream per group. A `mix` hook turns the log-probs of a group's streams into
the group's logits; CID mixes a with-context and a without-context stream, DP-ICL aggregates k+1
document streams. Logit transforms (temperature, top-k, top-p, greedy, ...) then shape the
distribution that is sampled; they are small frozen objects (Temperature, TopK, TopP, Greedy), so
`target_logprobs` can score one token per row without building the modified distribution. Each
step records the token, its log-prob under the sampling distribution and its log-prob under every
stream's own model distribution, so metrics never need a second forward pass.

Randomness belongs to the group, not the batch: group g draws its step-t token by inverse-CDF
sampling with the uniform u[g, t] of its own stream, seeded from (seed, group key), so batching,
chunking or adding groups changes no existing sample. The draw happens on the model's device; only
the [G, T] uniforms cross from the host, once. Memory is bounded by `max_batch_streams`: groups are
decoded in chunks of at most that many streams, and a group that emits EOS leaves the batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import torch
from tqdm import tqdm
from transformers import DynamicCache

from privleak.batching import (
    ForwardCounter,
    UnitCache,
    check_fits,
    pad_rows,
    position_ids,
    through_cache,
)
from privleak.errors import require
from privleak.graphs import GRAPH_MODEL_TYPES, SlotStep, supports_slot_step
from privleak.models import real_logits

Transform = Callable[[torch.Tensor], torch.Tensor]
"""Maps logits [G, V] to logits [G, V]; excluded tokens get -inf."""

Mix = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, dict[str, torch.Tensor]]]
"""(stream log-probs [g, S, V], the g groups' indices [g] into the call's groups, step) ->
(group logits [g, V], per-step records {name: [g] tensor}). The decoder may pass any subset of
groups (chunks, finished groups removed), so a mix looks its per-group settings up by index."""


@dataclass(frozen=True)
class Temperature:
    """Divide logits by T > 0 (T < 1 sharpens, T > 1 flattens)."""

    value: float

    def __post_init__(self):
        require(self.value > 0, f"temperature must be > 0, got {self.value}")

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return logits / self.value


@dataclass(frozen=True)
class TopK:
    """Keep the k largest logits (ties at the k-th value are all kept, as in HF)."""

    k: int

    def __post_init__(self):
        require(
            isinstance(self.k, int) and self.k >= 1, f"top_k must be an integer >= 1, got {self.k}"
        )

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        threshold = logits.topk(min(self.k, logits.shape[-1]), dim=-1).values[..., -1:]
        return logits.masked_fill(logits < threshold, float("-inf"))


@dataclass(frozen=True)
class TopP:
    """Keep the smallest set of most likely tokens whose probability mass reaches p."""

    p: float

    def __post_init__(self):
        require(0 < self.p <= 1, f"top_p must be in (0, 1], got {self.p}")

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if self.p == 1:  # everything: a float32 mass summing past 1 must not cut the tail
            return logits
        probs = torch.softmax(logits.float(), dim=-1)
        descending = probs.sort(dim=-1, descending=True).values
        # Mass accumulates in float64: a float32 running sum over a 50k vocabulary drifts by ~1e-5,
        # enough to move the nucleus boundary by a token between two summation orders.
        mass_before = descending.cumsum(dim=-1, dtype=torch.float64) - descending
        # A token stays while the mass ranked above it is short of p (the top token always
        # stays). Tokens tied with the last one kept all stay, so the set does not depend on how
        # the sort orders ties (frequent in bf16 logits).
        kept = (mass_before < self.p).sum(dim=-1, keepdim=True).clamp(min=1)
        return logits.masked_fill(probs < descending.gather(-1, kept - 1), float("-inf"))


@dataclass(frozen=True)
class Greedy:
    """Keep only the argmax (the lowest index on ties, as torch.argmax and HF generate do)."""

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        best = logits.argmax(dim=-1, keepdim=True)
        return torch.full_like(logits, float("-inf")).scatter(-1, best, logits.gather(-1, best))


def temperature(value: float) -> Transform:
    """Divide logits by T > 0 (T < 1 sharpens, T > 1 flattens)."""
    return Temperature(value)


def top_k(k: int) -> Transform:
    """Keep the k largest logits (ties at the k-th value are all kept, as in HF)."""
    return TopK(k)


def top_p(p: float) -> Transform:
    """Keep the smallest set of most likely tokens whose probability mass reaches p."""
    return TopP(p)


def greedy() -> Transform:
    """Keep only the argmax (the lowest index on ties, as torch.argmax and HF generate do)."""
    return Greedy()


def standard_transforms(
    *,
    do_greedy: bool = False,
    temperature_value: float | None = None,
    top_k_value: int | None = None,
    top_p_value: float | None = None,
) -> list[Transform]:
    """Transforms in HF's order: temperature, then top-k, then top-p; greedy overrides all."""
    if do_greedy:
        return [greedy()]
    chain: list[Transform] = []
    if temperature_value is not None:
        chain.append(temperature(temperature_value))
    if top_k_value is not None:
        chain.append(top_k(top_k_value))
    if top_p_value is not None:
        chain.append(top_p(top_p_value))
    return chain


def sampling_logprobs(logits: torch.Tensor, transforms: Sequence[Transform]) -> torch.Tensor:
    """Log-probs [..., V] of the decoder's modified distribution (truncated, renormalised), in
    float32, or float64 when the logits are float64."""
    for transform in transforms:
        logits = transform(logits)
    return torch.log_softmax(logits if logits.dtype == torch.float64 else logits.float(), dim=-1)


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


@dataclass
class Decoded:
    """Per-step records of one decode call. G groups, N streams, T = longest group's steps.

    tokens: [G, T] sampled ids (pad_id after a group's EOS).
    lengths: [G] generated tokens per group, EOS included.
    sample_logprobs: [G, T] log-prob of each token under the sampling distribution.
    stream_logprobs: [N, T] log-prob of each group's token under each stream's raw model
        distribution (temperature 1, no truncation).
    records: {name: [G, T]} per-step records returned by the mix (0 after a group's end).
    distributions: [G, T, V] sampling log-probs, kept only when asked (memory).
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    sample_logprobs: torch.Tensor
    stream_logprobs: torch.Tensor
    records: dict[str, torch.Tensor] = field(default_factory=dict)
    distributions: torch.Tensor | None = None
    stream_distributions: torch.Tensor | None = None
    prefill_counter: ForwardCounter = field(default_factory=ForwardCounter)
    step_counter: ForwardCounter = field(default_factory=ForwardCounter)

    @property
    def counter(self) -> ForwardCounter:
        """Every forwarded position, prefill and steps."""
        return ForwardCounter(
            self.prefill_counter.tokens + self.step_counter.tokens,
            self.prefill_counter.calls + self.step_counter.calls,
        )

    def token_lists(self) -> list[list[int]]:
        """The generated ids of each group, cut at its length."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths, strict=True)]


def group_seed(seed: int, key: Hashable) -> int:
    """A 63-bit seed for one group's random stream, a hash of (seed, key). Keys are compared by
    repr, so use ids, strings, ints, floats and tuples of them."""
    digest = hashlib.blake2b(repr((int(seed), key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def group_uniforms(seed: int, keys: Sequence[Hashable], steps: int) -> torch.Tensor:
    """[G, steps] float64 uniforms in [0, 1) on the host: row g is the stream of keys[g]."""
    return torch.stack(
        [
            torch.rand(
                steps,
                dtype=torch.float64,
                generator=torch.Generator().manual_seed(group_seed(seed, key)),
            )
            for key in keys
        ]
    )


def sample_inverse_cdf(logprobs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """[g] token ids drawn from log-probs [g, V] with one uniform [g] each, on their device.

    The token is the first whose cumulative probability exceeds u · total, so a token of zero
    probability is never drawn (its cumulative value equals its predecessor's). float64 keeps the
    CDF of a 50k vocabulary exact enough that CPU and CUDA agree except at float ties.
    """
    cdf = logprobs.double().exp().cumsum(-1)
    at = uniforms.to(cdf.device)[:, None] * cdf[:, -1:]
    drawn = torch.searchsorted(cdf, at, right=True).squeeze(1)
    # u · total can round up to total itself; fall back to the last token of non-zero mass.
    last = logprobs.shape[-1] - 1 - torch.isfinite(logprobs).flip(-1).long().argmax(-1)
    return torch.minimum(drawn, last)


FORWARD_MODES = ("auto", "dynamic", "slots", "graph")


def resolve_forward_mode(model, mode: str) -> str:
    """The concrete forward mode for `mode` on this model (see `decode`)."""
    require(mode in FORWARD_MODES, f"forward_mode must be one of {FORWARD_MODES}, got {mode!r}")
    graph_ok = model.device.type == "cuda" and supports_slot_step(model)
    if mode == "auto":
        return "graph" if graph_ok else "dynamic"
    require(
        mode != "graph" or graph_ok,
        f"forward_mode 'graph' needs a CUDA model of type {sorted(GRAPH_MODEL_TYPES)}; "
        f"this one is {model.config.model_type!r} on {model.device}",
    )
    require(
        mode != "slots" or supports_slot_step(model),
        f"forward_mode 'slots' supports model types {sorted(GRAPH_MODEL_TYPES)}, "
        f"not {model.config.model_type!r}",
    )
    return mode


def _bucket_by_length(rows: Sequence[Sequence[int]], waste: float = 0.25) -> list[list[int]]:
    """Indices of rows (longest first) in buckets whose left padding stays within `waste` of
    their real tokens, so a short prompt is not padded to a long one."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    buckets: list[list[int]] = []
    for i in order:
        if buckets:
            bucket = buckets[-1]
            width = len(rows[bucket[0]])
            real = sum(len(rows[k]) for k in bucket) + len(rows[i])
            if width * (len(bucket) + 1) <= (1 + waste) * real:
                bucket.append(i)
                continue
        buckets.append([i])
    return buckets


def prefill(
    model,
    rows: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter,
    *,
    slots: int = 0,
):
    """Forward each distinct row once and return (cache, mask [N, W], last logits [N, V]) for all
    N rows, left-padded to the longest (W): the cache the decoder extends.

    Distinct rows are forwarded in length buckets (little padding), keeping only the last
    position's logits; each bucket's keys/values are left-padded to W (padding slots hold zeros
    and are masked), and rows that repeat a prompt (a sweep's settings) share its entry.
    With `slots` > 0 the cache is instead a pair of per-layer lists of [N, H, W + slots, d]
    buffers (`SlotStep`'s), each bucket written straight into its rows, so no second copy of
    the cache ever exists.
    """
    device = model.device
    distinct = list(dict.fromkeys(tuple(row) for row in rows))
    width = len(max(distinct, key=len))
    users: dict[tuple, list[int]] = {}
    for n, row in enumerate(rows):
        users.setdefault(tuple(row), []).append(n)
    layers: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
    buffers: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
    logits, order = [], []
    for bucket in _bucket_by_length(distinct):
        ids, mask = pad_rows([distinct[i] for i in bucket], pad_id, "left")
        mask = mask.to(device)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=position_ids(mask),
            logits_to_keep=1,
            use_cache=True,
        )
        counter.add(*ids.shape)
        logits.append(out.logits[:, -1])
        order += bucket
        if slots:
            # Every row that uses one of this bucket's prompts, and its row in the bucket.
            targets = [(n, k) for k, i in enumerate(bucket) for n in users[distinct[i]]]
            into = torch.tensor([n for n, _ in targets], device=device)
            local = torch.tensor([k for _, k in targets], device=device)
            columns = slice(width - ids.shape[1], width)
            for index, layer in enumerate(out.past_key_values.layers):
                if index == len(buffers[0]):
                    for buffer, part in zip(buffers, (layer.keys, layer.values), strict=True):
                        shape = (len(rows), part.shape[1], width + slots, part.shape[3])
                        buffer.append(part.new_zeros(shape))
                buffers[0][index][into, :, columns] = layer.keys[local]
                buffers[1][index][into, :, columns] = layer.values[local]
            continue
        pad = (0, 0, width - ids.shape[1], 0)  # left-pad the sequence axis
        for index, layer in enumerate(out.past_key_values.layers):
            if index == len(layers):
                layers.append(([], []))
            layers[index][0].append(torch.nn.functional.pad(layer.keys, pad))
            layers[index][1].append(torch.nn.functional.pad(layer.values, pad))
    slot = {distinct[i]: k for k, i in enumerate(order)}  # row of the concatenated buckets
    pick = torch.tensor([slot[tuple(row)] for row in rows], device=device)
    _, mask = pad_rows([distinct[i] for i in order], pad_id, "left")
    if slots:
        return buffers, mask.to(device)[pick], torch.cat(logits)[pick]
    cache = DynamicCache()
    for index, (keys, values) in enumerate(layers):
        cache.update(torch.cat(keys)[pick], torch.cat(values)[pick], index)
    return cache, mask.to(device)[pick], torch.cat(logits)[pick]


@torch.inference_mode()
def decode(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    transforms: Sequence[Transform] = (),
    streams_per_group: int = 1,
    mix: Mix | None = None,
    seed: int = 0,
    group_keys: Sequence[Hashable] | None = None,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
    pad_id: int = 0,
    keep_distributions: bool = False,
    max_batch_streams: int | None = None,
    cache: UnitCache | None = None,
    forward_mode: str = "auto",
) -> Decoded:
    """Decode len(prompts) // streams_per_group groups, one batched forward per step.

    prompts: N token-id lists; consecutive runs of `streams_per_group` form a group. Without a
    `mix`, a group's logits are its first stream's (use streams_per_group=1). EOS is blocked for
    the first `min_new_tokens` steps. Group g samples with the random stream of
    (seed, group_keys[g]) (default key: g), so its tokens do not depend on the other groups.
    At most `max_batch_streams` streams (default: all) are decoded at once. With a `cache`, each
    such chunk is one checkpoint unit, keyed by its groups' keys and prompts, the seed and the
    lengths (a caller whose `mix` settings are not in the group keys must scope its cache).

    forward_mode: how the steps after the prefill are forwarded. "dynamic": a growing KV cache,
    finished groups leave the batch. "slots": fixed buffers (`privleak.graphs.SlotStep`), run
    eagerly. "graph": the same buffers replayed as a CUDA graph (CUDA, GRAPH_MODEL_TYPES only).
    "auto": "graph" where it is available, else "dynamic". All four give the same samples up to
    float rounding in the attention sums.
    """
    n_streams = len(prompts)
    require(n_streams >= 1, "decode needs at least one prompt")
    require(max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {max_new_tokens}")
    require(
        streams_per_group >= 1 and n_streams % streams_per_group == 0,
        f"{n_streams} prompts cannot form groups of {streams_per_group} streams",
    )
    require(mix is not None or streams_per_group == 1, "several streams per group need a mix")
    require(all(len(p) >= 1 for p in prompts), "every prompt needs >= 1 token (prepend BOS)")
    n_groups = n_streams // streams_per_group
    keys = list(range(n_groups)) if group_keys is None else list(group_keys)
    require(len(keys) == n_groups, f"group_keys has {len(keys)} keys for {n_groups} groups")
    require(len(set(map(repr, keys))) == n_groups, "group_keys must be distinct")
    require(cache is None or not keep_distributions, "decode does not checkpoint distributions")
    budget = n_streams if max_batch_streams is None else max_batch_streams
    require(
        budget >= streams_per_group,
        f"max_batch_streams must be >= {streams_per_group} (one group), got {max_batch_streams}",
    )
    check_fits(model, [len(p) + max_new_tokens for p in prompts], "prompt + max_new_tokens")
    run = _Run(model, prompts, max_new_tokens, transforms, streams_per_group, mix, eos_token_id,
               min_new_tokens, pad_id, keep_distributions,
               group_uniforms(seed, keys, max_new_tokens),
               resolve_forward_mode(model, forward_mode))  # fmt: skip
    per_chunk = budget // streams_per_group
    # Longest prompts first, so a chunk's members pad little to one another.
    order = sorted(
        range(n_groups),
        key=lambda g: (
            -max(len(prompts[g * streams_per_group + s]) for s in range(streams_per_group))
        ),
    )
    starts = range(0, n_groups, per_chunk)
    for first in tqdm(starts, desc="decode chunks", disable=len(starts) < 2, mininterval=5):
        groups = order[first : first + per_chunk]
        if cache is None:
            run.chunk(groups, run.prefill_counter, run.step_counter)
            continue
        streams = [g * streams_per_group + s for g in groups for s in range(streams_per_group)]
        saved = through_cache(
            cache,
            partial(run.saved_chunk, groups),
            "decode chunk",
            [keys[g] for g in groups],
            [list(prompts[i]) for i in streams],
            (seed, max_new_tokens, min_new_tokens, eos_token_id, pad_id, list(transforms)),
        )
        run.restore(groups, saved)
    return run.result()


class _Run:
    """The buffers of one decode call and the loop that fills them, one chunk of groups at a time.
    Buffers live on the model's device and are written by index, so no step waits for the host
    except the EOS test."""

    def __init__(self, model, prompts, max_new_tokens, transforms, streams_per_group, mix,
                 eos_token_id, min_new_tokens, pad_id, keep_distributions, uniforms,
                 forward_mode="dynamic"):  # fmt: skip
        self.model, self.prompts, self.transforms, self.mix = model, prompts, transforms, mix
        self.steps, self.per_group = max_new_tokens, streams_per_group
        self.eos, self.min_new, self.pad_id = eos_token_id, min_new_tokens, pad_id
        self.keep, self.forward_mode = keep_distributions, forward_mode
        device = self.device = model.device
        self.uniforms = uniforms.to(device)
        n_groups, shape = uniforms.shape[0], uniforms.shape
        self.tokens = torch.full(shape, pad_id, dtype=torch.long, device=device)
        self.lengths = torch.zeros(n_groups, dtype=torch.long, device=device)
        self.sample = torch.zeros(shape, device=device)
        self.stream = torch.zeros(len(prompts), self.steps, device=device)
        self.records: dict[str, torch.Tensor] = {}
        self.dist: torch.Tensor | None = None
        self.stream_dist: torch.Tensor | None = None
        self.prefill_counter, self.step_counter = ForwardCounter(), ForwardCounter()

    def _streams(self, groups: torch.Tensor) -> torch.Tensor:
        offsets = torch.arange(self.per_group, device=groups.device)
        return (groups[:, None] * self.per_group + offsets).flatten()

    def saved_chunk(self, group_list: list[int]) -> dict:
        """Decode one chunk and return what `restore` needs: its rows of every buffer (host
        tensors) and its forward counts."""
        prefill_counter, step_counter = ForwardCounter(), ForwardCounter()
        self.chunk(group_list, prefill_counter, step_counter)
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        return {
            "tokens": self.tokens[groups].cpu(),
            "lengths": self.lengths[groups].cpu(),
            "sample": self.sample[groups].cpu(),
            "stream": self.stream[streams].cpu(),
            "records": {name: values[groups].cpu() for name, values in self.records.items()},
            "counters": (prefill_counter, step_counter),
        }

    def restore(self, group_list: list[int], saved: dict) -> None:
        """Write a chunk's `saved_chunk` rows back into the buffers and add its forward counts."""
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        self.tokens[groups] = saved["tokens"].to(self.device)
        self.lengths[groups] = saved["lengths"].to(self.device)
        self.sample[groups] = saved["sample"].to(self.device)
        self.stream[streams] = saved["stream"].to(self.device)
        for name, values in saved["records"].items():
            if name not in self.records:
                self.records[name] = torch.zeros(self.tokens.shape, device=self.device)
            self.records[name][groups] = values.to(self.device)
        self.prefill_counter.merge(saved["counters"][0])
        self.step_counter.merge(saved["counters"][1])

    def chunk(
        self, group_list: list[int], prefill_counter: ForwardCounter, step_counter: ForwardCounter
    ) -> None:
        """Decode one chunk of groups into the buffers, counting its forwards."""
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        slots = self.steps - 1 if self.forward_mode != "dynamic" else 0
        cache, mask, logits = prefill(
            self.model,
            [self.prompts[i] for i in streams.tolist()],
            self.pad_id,
            prefill_counter,
            slots=slots,
        )
        if slots:
            stepper = SlotStep(self.model, *cache, mask, graph=self.forward_mode == "graph")
            self._slot_chunk(stepper, groups, streams, logits, step_counter)
            return
        position = mask.sum(-1, keepdim=True)
        for step in range(self.steps):
            stream_logits = real_logits(self.model, logits.float())
            tokens = self._step(step, groups, streams, stream_logits)
            keep = self._going_on(step, tokens)
            if keep is not None:
                if not len(keep):
                    return
                kept_streams = self._streams(keep)
                cache.reorder_cache(kept_streams)
                groups, tokens = groups[keep], tokens[keep]
                streams, mask = streams[kept_streams], mask[kept_streams]
                position = position[kept_streams]
            if step == self.steps - 1:
                return
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            stream_tokens = tokens.repeat_interleave(self.per_group)
            out = self.model(
                input_ids=stream_tokens[:, None],
                attention_mask=mask,
                position_ids=position,
                past_key_values=cache,
                use_cache=True,
            )
            step_counter.add(len(stream_tokens), 1)
            cache, position, logits = out.past_key_values, position + 1, out.logits[:, -1]

    def _slot_chunk(self, stepper, groups, streams, logits, step_counter) -> None:
        """The chunk loop over fixed step buffers: finished groups stay in the forward batch, fed
        pad tokens, until half of it has finished (then the live rows move to a smaller step);
        only the live rows (`rows`, into the step's batch) are sampled."""
        rows = torch.arange(len(streams), device=self.device)
        feed = torch.full((len(streams),), self.pad_id, dtype=torch.long, device=self.device)
        for step in range(self.steps):
            tokens = self._step(step, groups, streams, real_logits(self.model, logits.float()))
            keep = self._going_on(step, tokens)
            if keep is not None:
                if not len(keep):
                    return
                kept_streams = self._streams(keep)
                groups, tokens = groups[keep], tokens[keep]
                streams, rows = streams[kept_streams], rows[kept_streams]
                feed.fill_(self.pad_id)
                if 2 * len(rows) <= len(feed):  # half the batch is done: drop its rows
                    stepper = stepper.keep(rows)
                    rows = torch.arange(len(rows), device=self.device)
                    feed = feed[: len(rows)].clone()
            if step == self.steps - 1:
                return
            feed[rows] = tokens.repeat_interleave(self.per_group)
            logits = stepper.step(feed)
            logits = logits if len(rows) == len(feed) else logits[rows]
            step_counter.add(len(feed), 1)

    def _going_on(self, step: int, tokens: torch.Tensor) -> torch.Tensor | None:
        """The stop test after step `step`: None when every group goes on, else the indices
        [g'] of the groups that did not just emit EOS (the one host sync a step)."""
        if self.eos is None or step < self.min_new:
            return None
        going_on = torch.nonzero(tokens != self.eos)[:, 0]
        return None if len(going_on) == len(tokens) else going_on

    def _step(self, step, groups, streams, stream_logits) -> torch.Tensor:
        """Sample one token per group, write every record of this step; returns tokens [g]."""
        stream_raw = torch.log_softmax(stream_logits, dim=-1)
        grouped = stream_raw.view(len(groups), self.per_group, -1)
        if self.mix is None:
            group_logits, records = grouped[:, 0], {}
        else:
            group_logits, records = self.mix(grouped, groups, step)
        if self.eos is not None and step < self.min_new:
            group_logits = group_logits.clone()
            group_logits[:, self.eos] = float("-inf")
        logprobs = sampling_logprobs(group_logits, self.transforms)
        tokens = sample_inverse_cdf(logprobs, self.uniforms[groups, step])
        self.tokens[groups, step] = tokens
        self.sample[groups, step] = logprobs.gather(-1, tokens[:, None]).squeeze(1)
        self.stream[streams, step] = stream_raw.gather(
            -1, tokens.repeat_interleave(self.per_group)[:, None]
        ).squeeze(1)
        self.lengths[groups] += 1
        for name, values in records.items():
            if name not in self.records:
                self.records[name] = torch.zeros(self.tokens.shape, device=self.device)
            self.records[name][groups, step] = values.float()
        if self.keep:
            if self.dist is None:
                vocab = logprobs.shape[-1]
                self.dist = torch.zeros(*self.tokens.shape, vocab, device=self.device)
                self.stream_dist = torch.zeros(len(self.prompts), self.steps, vocab,
                                               device=self.device)  # fmt: skip
            self.dist[groups, step] = logprobs
            self.stream_dist[streams, step] = stream_raw
        return tokens

    def result(self) -> Decoded:
        steps = int(self.lengths.max())
        cut = lambda x: None if x is None else x[:, :steps].cpu()  # noqa: E731
        return Decoded(
            tokens=cut(self.tokens),
            lengths=self.lengths.cpu(),
            sample_logprobs=cut(self.sample),
            stream_logprobs=cut(self.stream),
            records={name: cut(values) for name, values in self.records.items()},
            distributions=cut(self.dist),
            stream_distributions=cut(self.stream_dist),
            prefill_counter=self.prefill_counter,
            step_counter=self.step_counter,
        )
