"""Context Influence Decoding (CID, Flemings et al. Def. 3.4) and bounded CID (Alg. 1, App. B).

CID samples from p̄ = softmax((λ·logit(y|D,x,y<t) + (1−λ)·logit(y|x,y<t)) / T). Each group of the
decoder holds two streams, the prompt with the context and the same template with an empty
context; both are fed the sampled token. `CIDMix` is the decoder's `mix`: it mixes the raw stream
logits with a per-group λ and divides by a per-group T (so one decode call can sweep λ and T;
`CIDMix(λ)` followed by the decoder's `temperature(T)` transform gives the same distribution). It
records, per step, the log-normaliser of the no-context distribution softmax(logit(y|x,y<t)/T),
which is p̄ with the whole context removed (λ·o + (1−λ)·o = o), so the whole-context influence is
read from the generation records without another forward pass.

Bounded CID picks, per step and group, the largest λ ≤ λ_max whose p̄ stays within ε/2 of the
prior p̄_{λ=0} for every vocabulary token (bisection); then any two contexts (e.g. D and D∖D_{i,n})
give distributions within ε of each other (triangle inequality, App. B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from privleak.batching import ForwardCounter, UnitCache
from privleak.decoding import GroupSettings, decode
from privleak.decoding.mix import one_or_per_group
from privleak.errors import require
from privleak.models import context_window
from privleak.prompts import ContextPrompt

NEG_INF = float("-inf")


def check_lam(lam: float, name: str = "lam") -> float:
    require(math.isfinite(lam) and lam >= 0, f"{name} (CID λ) must be finite and >= 0, got {lam}")
    return float(lam)


def check_temperature(value: float, name: str = "temperature") -> float:
    require(
        math.isfinite(value) and value > 0, f"{name} (CID T) must be finite and > 0, got {value}"
    )
    return float(value)


def block_eos(logits: torch.Tensor, eos_token_id: int | None, blocked: torch.Tensor | bool):
    """logits [..., V] with EOS set to -inf where `blocked` ([...] bool or a scalar bool) holds.
    A Python bool is decided on the host, so the decode loop never waits for the device here."""
    if eos_token_id is None or blocked is False:
        return logits
    logits = logits.clone()
    if blocked is True:
        logits[..., eos_token_id] = NEG_INF
        return logits
    blocked = torch.as_tensor(blocked, device=logits.device).expand(logits.shape[:-1])
    logits[..., eos_token_id] = logits[..., eos_token_id].masked_fill(blocked, NEG_INF)
    return logits


def cid_logprobs(
    context_logits: torch.Tensor,
    prior_logits: torch.Tensor,
    lam: torch.Tensor | float,
    temperature: torch.Tensor | float,
) -> torch.Tensor:
    """log p̄ [..., V] = log_softmax((λ·c + (1−λ)·o) / T); λ and T broadcast over [...].

    Raw logits or log-probs may be passed: a per-row constant shift cancels in the softmax.
    """
    lam = torch.as_tensor(lam, dtype=torch.float32, device=context_logits.device)[..., None]
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=context_logits.device)[
        ..., None
    ]
    # A token excluded by either stream (blocked EOS, -inf) stays excluded; mixing the infinities
    # directly would give nan for λ > 1 (−inf + inf) and λ = 0 (0·−inf).
    excluded = torch.isinf(context_logits) | torch.isinf(prior_logits)
    context = context_logits.float().masked_fill(excluded, 0.0)
    prior = prior_logits.float().masked_fill(excluded, 0.0)
    mixed = (lam * context + (1 - lam) * prior) / temp
    return torch.log_softmax(mixed.masked_fill(excluded, NEG_INF), dim=-1)


def bounded_lambda(
    context_logits: torch.Tensor,
    prior_logits: torch.Tensor,
    eps: torch.Tensor | float,
    lam_max: torch.Tensor | float,
    temperature: torch.Tensor | float,
    iterations: int = 25,
    check: bool = True,
) -> torch.Tensor:
    """Largest λ ∈ [0, λ_max] with max_y |log p̄_λ(y) − log p̄_0(y)| ≤ ε/2, per row of [..., V].

    ε, λ_max and T are scalars or [...] tensors. Bisection keeps the lower end, which always
    satisfies the bound (λ = 0 gives divergence 0), so the returned λ is feasible even where the
    divergence is not monotone in λ; it is within λ_max / 2^iterations of the largest feasible λ
    when the divergence is monotone. `check=False` skips the argument checks (each waits for
    the device), for callers that validated once up front.
    """
    shape = context_logits.shape[:-1]
    device = context_logits.device
    eps = torch.as_tensor(eps, dtype=torch.float32, device=device).expand(shape)
    high = torch.as_tensor(lam_max, dtype=torch.float32, device=device).expand(shape).clone()
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=device).expand(shape)
    if check:
        require(bool((eps > 0).all()), "eps (bounded CID ε) must be > 0")
        require(bool((high >= 0).all()), "lam_max (bounded CID λ limit) must be >= 0")
        require(bool((temp > 0).all()), "temperature (CID T) must be > 0")
    # log p̄_λ(y) − log p̄_0(y) = λ·d_y/T − K(λ) with d = c − o and
    # K(λ) = logsumexp((o + λd)/T) − logsumexp(o/T), so the largest |·| over the vocabulary is
    # max(λ·max d/T − K, K − λ·min d/T): one logsumexp per bisection step. Tokens excluded by
    # either stream (blocked EOS) are excluded from both distributions and from the bound.
    excluded = torch.isinf(context_logits) | torch.isinf(prior_logits)
    prior = prior_logits.float().masked_fill(excluded, 0.0)
    gap = context_logits.float().masked_fill(excluded, 0.0) - prior
    prior = prior.masked_fill(excluded, NEG_INF)
    gap_max = gap.masked_fill(excluded, NEG_INF).amax(dim=-1)
    gap_min = gap.masked_fill(excluded, float("inf")).amin(dim=-1)
    base = torch.logsumexp(prior / temp[..., None], dim=-1)

    def feasible(lam: torch.Tensor) -> torch.Tensor:
        shift = torch.logsumexp((prior + lam[..., None] * gap) / temp[..., None], dim=-1) - base
        worst = torch.maximum(lam * gap_max / temp - shift, shift - lam * gap_min / temp)
        return worst <= eps / 2

    limit = high.clone()
    at_max = feasible(limit)
    low = torch.zeros(shape, device=device)
    for _ in range(iterations):
        middle = (low + high) / 2
        ok = feasible(middle)
        low = torch.where(ok, middle, low)
        high = torch.where(ok, high, middle)
    return torch.where(at_max, limit, low)


@dataclass
class CIDMix:
    """The decoder's `mix` for CID: stream log-probs [g, 2, V] (with, without context) -> [g, V].

    lams, temperatures: one value each, or one per group. With `eps` (one value or one per
    group), each λ is the upper limit of bounded CID. EOS is blocked here for the first
    `min_new_tokens` steps (as the decoder does afterwards) so the recorded prior normaliser and
    the bounded λ see the distribution that is sampled.
    Records per step: prior_lse [g] = logsumexp of the no-context log-probs / T, and lam_used [g].
    """

    lams: Sequence[float] | float
    temperatures: Sequence[float] | float = 1.0
    eps: Sequence[float] | float | None = None
    eos_token_id: int | None = None
    min_new_tokens: int = 0

    def __post_init__(self) -> None:
        lams, temps = one_or_per_group(self.lams), one_or_per_group(self.temperatures)
        for lam in lams:
            check_lam(lam)
        for temp in temps:
            check_temperature(temp)
        columns = {
            "lams": torch.tensor(lams, dtype=torch.float32),
            "temps": torch.tensor(temps, dtype=torch.float32),
        }
        if self.eps is not None:
            eps = one_or_per_group(self.eps)
            for value in eps:
                require(value > 0, f"eps (bounded CID ε) must be > 0, got {value}")
            columns["eps"] = torch.tensor(eps, dtype=torch.float32)
        self._settings = GroupSettings(columns)

    def __call__(self, stream_logprobs: torch.Tensor, groups: torch.Tensor, step: int):
        lams = self._settings.rows("lams", groups)
        temps = self._settings.rows("temps", groups)
        blocked = step < self.min_new_tokens
        with_ctx = block_eos(stream_logprobs[:, 0], self.eos_token_id, blocked)
        prior = block_eos(stream_logprobs[:, 1], self.eos_token_id, blocked)
        if self.eps is not None:
            eps = self._settings.rows("eps", groups)
            lams = bounded_lambda(with_ctx, prior, eps, lams, temps, check=False)
        records = {
            "prior_lse": torch.logsumexp(prior / temps[:, None], dim=-1),
            "lam_used": lams,
        }
        # log p̄ is a valid logit vector; the decoder's own transforms must then be empty.
        return cid_logprobs(with_ctx, prior, lams, temps), records


@dataclass
class CIDGeneration:
    """Records of one CID sweep, G = contexts × settings groups (context-major), T steps.

    tokens [G, T]; lengths [G]; logp_context [G, T] = log p̄(y_t | D) (the sampled distribution);
    logp_prior [G, T] = log p̄(y_t | ∅) = log softmax(logit(y|x,y<t)/T) (EOS blocked alike);
    stream_logp [G, 2, T] raw (T = 1) log-probs of y_t with / without context; lam_used [G, T].
    tau [G, T] = |logp_context − logp_prior| (Def. 3.1, n = |D|), 0 after a group's end.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    logp_context: torch.Tensor
    logp_prior: torch.Tensor
    stream_logp: torch.Tensor
    lam_used: torch.Tensor
    tau: torch.Tensor
    prefill_counter: ForwardCounter
    step_counter: ForwardCounter

    def token_lists(self) -> list[list[int]]:
        """The response ids of each group, cut at its length."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths, strict=True)]


def cid_generate(
    model,
    prompts: Sequence[ContextPrompt],
    settings: Sequence[tuple[float, float]],
    *,
    max_new_tokens: int = 50,
    min_new_tokens: int = 10,
    eos_token_id: int | None = None,
    pad_id: int = 0,
    seed: int = 0,
    eps: Sequence[float] | float | None = None,
    example_ids: Sequence | None = None,
    max_batch_streams: int | None = None,
    count_eos: bool = True,
    cache: UnitCache | None = None,
    forward_mode: str = "auto",
) -> CIDGeneration:
    """Sample a CID response for every (prompt, (λ, T)) pair in one decode call.

    The no-context stream is the same template with an empty context. T is applied inside the
    mix, so the decoder runs without transforms. Each distinct prompt is prefilled once for all
    settings. With `eps` (one value, or one per setting), λ is the upper limit of bounded CID.
    The response to (example_ids[i], λ, T, ε) depends only on those and `seed` (default ids:
    prompt positions), never on the other prompts or on `max_batch_streams` (the memory budget:
    streams decoded at once, two per response). With a `cache`, each decoder chunk is one
    checkpoint unit (its group keys carry λ, T and ε). `forward_mode` is the decoder's.

    `count_eos` decides whether a response that ends with EOS keeps that token: True counts its
    influence in τ (EOS is a sampled token like any other); False stops before it, as the
    official decoder does. The sampled tokens are the same either way.
    """
    require(len(prompts) >= 1, "cid_generate needs at least one prompt")
    require(len(settings) >= 1, "cid_generate needs at least one (lam, temperature) setting")
    examples = list(range(len(prompts))) if example_ids is None else list(example_ids)
    require(len(examples) == len(prompts), "example_ids needs one id per prompt")
    window = context_window(model)
    for prompt in prompts:
        require(len(prompt.context) >= 1, "the context is empty; every example needs context")
        require(
            len(prompt.ids) + max_new_tokens <= window,
            f"a prompt of {len(prompt.ids)} tokens (context {len(prompt.context)}) + "
            f"max_new_tokens {max_new_tokens} exceeds the model window {window}; set "
            "context_tokens (context truncation) to keep fewer context tokens",
        )
    lams = [check_lam(lam) for lam, _ in settings] * len(prompts)
    temps = [check_temperature(temp) for _, temp in settings] * len(prompts)
    streams = [
        ids
        for prompt in prompts
        for _ in settings
        for ids in (prompt.ids, prompt.with_context([]).ids)
    ]
    eps_per_setting = [eps] * len(settings)
    if eps is not None and not isinstance(eps, int | float):
        require(len(eps) == len(settings), "eps needs one value per setting")
        eps_per_setting = list(eps)
    keys = [
        (example, float(lam), float(temp), None if e is None else float(e))
        for example in examples
        for (lam, temp), e in zip(settings, eps_per_setting, strict=True)
    ]
    mix = CIDMix(
        lams,
        temps,
        eps=None if eps is None else eps_per_setting * len(prompts),
        eos_token_id=eos_token_id,
        min_new_tokens=min_new_tokens,
    )
    out = decode(
        model,
        streams,
        max_new_tokens=max_new_tokens,
        streams_per_group=2,
        mix=mix,
        seed=seed,
        group_keys=keys,
        eos_token_id=eos_token_id,
        min_new_tokens=min_new_tokens,
        pad_id=pad_id,
        max_batch_streams=max_batch_streams,
        cache=cache,
        forward_mode=forward_mode,
    )
    steps = out.tokens.shape[1]
    temps_t = torch.tensor(temps)[:, None]
    stream_logp = out.stream_logprobs.view(-1, 2, steps)
    # log softmax(o/T)_y = (log p_raw(y|∅))/T − logsumexp(log p_raw(·|∅)/T); EOS blocking enters
    # through the recorded normaliser.
    logp_prior = stream_logp[:, 1] / temps_t - out.records["prior_lse"]
    lengths, tokens = out.lengths, out.tokens
    if not count_eos and eos_token_id is not None:
        last = tokens.gather(1, (lengths - 1).clamp(min=0)[:, None])[:, 0]
        ended = (lengths > 0) & (last == eos_token_id)
        lengths = lengths - ended.long()
        tokens = tokens.masked_fill(torch.arange(steps)[None, :] >= lengths[:, None], pad_id)
    alive = torch.arange(steps)[None, :] < lengths[:, None]
    tau = torch.where(alive, (out.sample_logprobs - logp_prior).abs(), torch.zeros(()))
    return CIDGeneration(
        tokens=tokens,
        lengths=lengths,
        logp_context=out.sample_logprobs,
        logp_prior=torch.where(alive, logp_prior, torch.zeros(())),
        stream_logp=stream_logp,
        lam_used=out.records["lam_used"],
        tau=tau,
        prefill_counter=out.prefill_counter,
        step_counter=out.step_counter,
    )


def pmi(stream_logp: torch.Tensor) -> torch.Tensor:
    """pmi(y_t; D) = log p(y_t|D,x,y<t) − log p(y_t|x,y<t) at T = 1; stream_logp [..., 2, T]."""
    return stream_logp[..., 0, :] - stream_logp[..., 1, :]


def generation_rows(
    generation: CIDGeneration,
    tokenizer,
    examples: Sequence[dict],
    settings: Sequence[tuple[float, float]],
) -> list[dict]:
    """One tidy row per (example, setting) of a `cid_generate` call (same order of examples and
    settings). Each row carries the example's metadata, λ, T, the response (ids and text) and the
    per-token records cut at the response length: tau_tokens, logp_context, logp_prior, pmi
    (T = 1) and lam_used; `tau` is their sum (Def. 3.2)."""
    require(
        len(examples) * len(settings) == generation.tokens.shape[0],
        "generation_rows: examples x settings does not match the generation's groups",
    )
    rows = []
    pmis = pmi(generation.stream_logp)
    for g in range(generation.tokens.shape[0]):
        example, (lam, temp) = examples[g // len(settings)], settings[g % len(settings)]
        length = int(generation.lengths[g])
        ids = generation.tokens[g, :length].tolist()
        tau = generation.tau[g, :length]
        require(bool(torch.isfinite(tau).all()), f"non-finite influence for {example}")
        rows.append(
            {
                **example,
                "lam": float(lam),
                "temperature": float(temp),
                "response_ids": ids,
                "response": tokenizer.decode(ids, skip_special_tokens=True),
                "length": length,
                "tau": float(tau.sum()),
                "tau_tokens": tau.tolist(),
                "logp_context": generation.logp_context[g, :length].tolist(),
                "logp_prior": generation.logp_prior[g, :length].tolist(),
                "pmi": pmis[g, :length].tolist(),
                "lam_used": generation.lam_used[g, :length].tolist(),
            }
        )
    return rows
