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

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from privleak.decoding import decode
from privleak.errors import require
from privleak.models import context_window
from privleak.prompts import ContextPrompt, encode_context_prompt
from privleak.scoring import ForwardCounter

NEG_INF = float("-inf")


def check_lam(lam: float, name: str = "lam") -> float:
    require(lam >= 0, f"{name} (CID λ) must be >= 0, got {lam}")
    return float(lam)


def check_temperature(value: float, name: str = "temperature") -> float:
    require(value > 0, f"{name} (CID T) must be > 0, got {value}")
    return float(value)


def block_eos(logits: torch.Tensor, eos_token_id: int | None, blocked: torch.Tensor | bool):
    """logits [..., V] with EOS set to -inf where `blocked` ([...] bool or a scalar bool) holds."""
    if eos_token_id is None:
        return logits
    blocked = torch.as_tensor(blocked, device=logits.device).expand(logits.shape[:-1])
    if not bool(blocked.any()):
        return logits
    logits = logits.clone()
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
) -> torch.Tensor:
    """Largest λ ∈ [0, λ_max] with max_y |log p̄_λ(y) − log p̄_0(y)| ≤ ε/2, per row of [..., V].

    ε, λ_max and T are scalars or [...] tensors. Bisection keeps the lower end, which always
    satisfies the bound (λ = 0 gives divergence 0), so the returned λ is feasible even where the
    divergence is not monotone in λ; it is within λ_max / 2^iterations of the largest feasible λ
    when the divergence is monotone.
    """
    shape = context_logits.shape[:-1]
    device = context_logits.device
    eps = torch.as_tensor(eps, dtype=torch.float32, device=device).expand(shape)
    require(bool((eps > 0).all()), "eps (bounded CID ε) must be > 0")
    high = torch.as_tensor(lam_max, dtype=torch.float32, device=device).expand(shape).clone()
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=device).expand(shape)
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
    """The decoder's `mix` for CID: stream logits [G, 2, V] (with, without context) -> [G, V].

    lams, temperatures: one value each, or one per group. With `eps` (one value or one per
    group), each λ is the upper limit of bounded CID. EOS is blocked here for the first
    `min_new_tokens` steps (as the decoder does afterwards) so the recorded prior normaliser and
    the bounded λ see the distribution that is sampled. The decoder calls the mix once per step,
    which is how the step is known.
    Records per step: prior_lse [G] = logsumexp of the no-context log-probs / T, and lam_used [G].
    """

    lams: Sequence[float] | float
    temperatures: Sequence[float] | float = 1.0
    eps: Sequence[float] | float | None = None
    eos_token_id: int | None = None
    min_new_tokens: int = 0
    prior_lse: list[torch.Tensor] = field(default_factory=list)
    lam_used: list[torch.Tensor] = field(default_factory=list)

    def __post_init__(self) -> None:
        lams = [self.lams] if isinstance(self.lams, int | float) else list(self.lams)
        temps = (
            [self.temperatures]
            if isinstance(self.temperatures, int | float)
            else list(self.temperatures)
        )
        for lam in lams:
            check_lam(lam)
        for temp in temps:
            check_temperature(temp)
        self._eps = None
        if self.eps is not None:
            eps = [self.eps] if isinstance(self.eps, int | float) else list(self.eps)
            for value in eps:
                require(value > 0, f"eps (bounded CID ε) must be > 0, got {value}")
            self._eps = torch.tensor(eps, dtype=torch.float32)
        self._lams = torch.tensor(lams, dtype=torch.float32)
        self._temps = torch.tensor(temps, dtype=torch.float32)

    def __call__(self, stream_logits: torch.Tensor) -> torch.Tensor:
        n_groups = stream_logits.shape[0]
        step = len(self.prior_lse)
        lams = self._lams.to(stream_logits.device).expand(n_groups)
        temps = self._temps.to(stream_logits.device).expand(n_groups)
        with_ctx = torch.log_softmax(stream_logits[:, 0].float(), dim=-1)
        prior = torch.log_softmax(stream_logits[:, 1].float(), dim=-1)
        blocked = step < self.min_new_tokens
        with_ctx = block_eos(with_ctx, self.eos_token_id, blocked)
        prior = block_eos(prior, self.eos_token_id, blocked)
        if self._eps is not None:
            eps = self._eps.to(stream_logits.device).expand(n_groups)
            lams = bounded_lambda(with_ctx, prior, eps, lams, temps)
        self.prior_lse.append(torch.logsumexp(prior / temps[:, None], dim=-1).cpu())
        self.lam_used.append(lams.cpu())
        # log p̄ is a valid logit vector; the decoder's own transforms must then be empty.
        return cid_logprobs(with_ctx, prior, lams, temps)


class SharedPrefill:
    """A model proxy whose prefill forwards each distinct prompt once, unpadded, and forks it.

    The decoder prefills all its streams in one left-padded batch. In a sweep (λ, T, ε) the same
    two prompts recur in every group, and the short no-context prompt is padded to the long one;
    this proxy forwards each distinct prompt on its own and assembles the left-padded cache the
    decoder expects (padding slots hold zeros and are masked). Decoding steps pass through.
    `counter` counts the positions actually forwarded.
    """

    def __init__(self, model) -> None:
        self.model = model
        self.counter = ForwardCounter()

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, *, input_ids, attention_mask, past_key_values=None, **kwargs):
        if past_key_values is not None:
            self.counter.add(*input_ids.shape)
            return self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
        rows = [
            tuple(ids[mask.bool()].tolist())
            for ids, mask in zip(input_ids, attention_mask, strict=True)
        ]
        distinct = list(dict.fromkeys(rows))
        width = input_ids.shape[1]
        layers: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
        last_logits = []
        for row in distinct:
            out = self.model(input_ids=torch.tensor([row], device=input_ids.device), use_cache=True)
            self.counter.add(1, len(row))
            last_logits.append(out.logits[0, -1])
            for index, layer in enumerate(out.past_key_values.layers):
                pad = (0, 0, width - len(row), 0)  # left-pad the sequence axis
                if index == len(layers):
                    layers.append(([], []))
                layers[index][0].append(torch.nn.functional.pad(layer.keys, pad))
                layers[index][1].append(torch.nn.functional.pad(layer.values, pad))
        pick = torch.tensor([distinct.index(row) for row in rows], device=input_ids.device)
        cache = DynamicCache()
        for index, (keys, values) in enumerate(layers):
            cache.update(torch.cat(keys)[pick], torch.cat(values)[pick], index)
        logits = torch.stack(last_logits)[pick][:, None]
        return CausalLMOutputWithPast(logits=logits, past_key_values=cache)


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
) -> CIDGeneration:
    """Sample a CID response for every (prompt, (λ, T)) pair in one decode call.

    The no-context stream is the same template with an empty context. T is applied inside the
    mix, so the decoder runs without transforms. The prefill of each
    distinct prompt is shared by all settings (SharedPrefill). With `eps` (one value, or one per
    setting), λ is the upper limit of bounded CID.
    """
    require(len(prompts) >= 1, "cid_generate needs at least one prompt")
    require(len(settings) >= 1, "cid_generate needs at least one (lam, temperature) setting")
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
    if eps is not None and not isinstance(eps, int | float):
        require(len(eps) == len(settings), "eps needs one value per setting")
        eps = list(eps) * len(prompts)
    mix = CIDMix(lams, temps, eps=eps, eos_token_id=eos_token_id, min_new_tokens=min_new_tokens)
    proxy = SharedPrefill(model)
    out = decode(
        proxy,
        streams,
        max_new_tokens=max_new_tokens,
        streams_per_group=2,
        mix=mix,
        seed=seed,
        eos_token_id=eos_token_id,
        min_new_tokens=min_new_tokens,
        pad_id=pad_id,
    )
    steps = out.tokens.shape[1]
    temps_t = torch.tensor(temps)[:, None]
    stream_logp = out.stream_logprobs.view(-1, 2, steps)
    prior_lse = torch.stack(mix.prior_lse[:steps], dim=1)
    # log softmax(o/T)_y = (log p_raw(y|∅))/T − logsumexp(log p_raw(·|∅)/T); EOS blocking enters
    # through the recorded normaliser.
    logp_prior = stream_logp[:, 1] / temps_t - prior_lse
    alive = torch.arange(steps)[None, :] < out.lengths[:, None]
    tau = torch.where(alive, (out.sample_logprobs - logp_prior).abs(), torch.zeros(()))
    return CIDGeneration(
        tokens=out.tokens,
        lengths=out.lengths,
        logp_context=out.sample_logprobs,
        logp_prior=torch.where(alive, logp_prior, torch.zeros(())),
        stream_logp=stream_logp,
        lam_used=torch.stack(mix.lam_used[:steps], dim=1),
        tau=tau,
        prefill_counter=proxy.counter,
        step_counter=out.counter,
    )


def pmi(stream_logp: torch.Tensor) -> torch.Tensor:
    """pmi(y_t; D) = log p(y_t|D,x,y<t) − log p(y_t|x,y<t) at T = 1; stream_logp [..., 2, T]."""
    return stream_logp[..., 0, :] - stream_logp[..., 1, :]


# S0 prompts (paper App. C, Figs. 5-6): the context, then the query. `chat` wraps them in the
# ChatML turns SmolLM2-Instruct was tuned on; `plain` is the paper's base-model layout.
TASKS = {
    "cnn_dm": {"label": "News article:", "context": "article", "reference": "highlights"},
    "pubmedqa": {"label": "Document:", "context": "context", "reference": "long_answer"},
}
CNN_QUERY = "Summary of the above news article:"
CHAT_SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"


def _text(value) -> str:
    # HF PubMedQA stores the abstract as {"contexts": [...], ...}.
    if isinstance(value, dict) and "contexts" in value:
        return " ".join(value["contexts"])
    return str(value)


def s0_prompt(
    tokenizer, record: dict, corpus: str, template: str, context_tokens: int | None
) -> tuple[ContextPrompt, str]:
    """(prompt, reference) for one CNN/DM or PubMedQA record; the context keeps its first
    `context_tokens` tokens (None: all of them)."""
    require(corpus in TASKS, f"corpus '{corpus}' has no S0 task; allowed: {', '.join(TASKS)}")
    require(template in ("chat", "plain"), f"template '{template}' is unknown; use chat|plain")
    task = TASKS[corpus]
    query = CNN_QUERY if corpus == "cnn_dm" else _text(record["question"])
    if template == "chat":
        head = CHAT_SYSTEM + task["label"]
        tail = f"\n\n{query}<|im_end|>\n<|im_start|>assistant\n"
    else:
        head, tail = task["label"], f"\n{query}\n"
    prompt = encode_context_prompt(
        tokenizer,
        head,
        " " + _text(record[task["context"]]).strip(),
        tail,
        max_context_tokens=context_tokens,
    )
    return prompt, _text(record[task["reference"]])


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
