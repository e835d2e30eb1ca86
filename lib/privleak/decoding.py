"""One sampler loop for N streams with per-stream KV caches and one batched forward per step.

Streams are grouped: every group samples one token per step and feeds it to all of its streams.
Plain decoding has one stream per group. A `mix` hook turns the logits of a group's streams into
the group's logits; CID mixes a with-context and a without-context stream, DP-ICL aggregates k+1
document streams. Logit transforms (temperature, top-k, top-p, greedy, ...) then shape the
distribution that is sampled. Each step records the token, its log-prob under the sampling
distribution and its log-prob under every stream's own model distribution, so metrics never need
a second forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from privleak.errors import require
from privleak.scoring import ForwardCounter, _pad, _positions, check_fits

Transform = Callable[[torch.Tensor], torch.Tensor]
"""Maps logits [G, V] to logits [G, V]; excluded tokens get -inf."""

Mix = Callable[[torch.Tensor], torch.Tensor]
"""Maps stream logits [G, S, V] (S streams per group) to group logits [G, V]."""


def temperature(value: float) -> Transform:
    """Divide logits by T > 0 (T < 1 sharpens, T > 1 flattens)."""
    require(value > 0, f"temperature must be > 0, got {value}")
    return lambda logits: logits / value


def top_k(k: int) -> Transform:
    """Keep the k largest logits (ties at the k-th value are all kept, as in HF)."""
    require(isinstance(k, int) and k >= 1, f"top_k must be an integer >= 1, got {k}")

    def keep_top_k(logits: torch.Tensor) -> torch.Tensor:
        k_eff = min(k, logits.shape[-1])
        threshold = logits.topk(k_eff, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < threshold, float("-inf"))

    return keep_top_k


def top_p(p: float) -> Transform:
    """Keep the smallest set of most likely tokens whose probability mass reaches p."""
    require(0 < p <= 1, f"top_p must be in (0, 1], got {p}")

    def keep_nucleus(logits: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits.float(), dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        # A token stays while the mass of the tokens ranked above it is still short of p; the top
        # token always stays.
        drop_sorted = mass_before >= p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        return logits.masked_fill(drop, float("-inf"))

    return keep_nucleus


def greedy() -> Transform:
    """Keep only the argmax (the lowest index on ties, as torch.argmax and HF generate do)."""

    def keep_argmax(logits: torch.Tensor) -> torch.Tensor:
        best = logits.argmax(dim=-1, keepdim=True)
        return torch.full_like(logits, float("-inf")).scatter(-1, best, logits.gather(-1, best))

    return keep_argmax


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
    """Log-probs [..., V] of the decoder's modified distribution (truncated, renormalised)."""
    for transform in transforms:
        logits = transform(logits)
    return torch.log_softmax(logits.float(), dim=-1)


@dataclass
class Decoded:
    """Per-step records of one decode call. G groups, N streams, T steps taken.

    tokens: [G, T] sampled ids (pad_id after a group's EOS).
    lengths: [G] generated tokens per group, EOS included.
    sample_logprobs: [G, T] log-prob of each token under the sampling distribution.
    stream_logprobs: [N, T] log-prob of each group's token under each stream's raw model
        distribution (temperature 1, no truncation).
    distributions: [G, T, V] sampling log-probs, kept only when asked (memory).
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    sample_logprobs: torch.Tensor
    stream_logprobs: torch.Tensor
    distributions: torch.Tensor | None = None
    stream_distributions: torch.Tensor | None = None
    counter: ForwardCounter = field(default_factory=ForwardCounter)

    def token_lists(self) -> list[list[int]]:
        """The generated ids of each group, cut at its length."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths, strict=True)]


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
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
    pad_id: int = 0,
    keep_distributions: bool = False,
) -> Decoded:
    """Decode len(prompts) // streams_per_group groups in one loop, one forward per step.

    prompts: N token-id lists; consecutive runs of `streams_per_group` form a group. Without a
    `mix`, a group's logits are its first stream's (use streams_per_group=1). EOS is blocked for
    the first `min_new_tokens` steps. Sampling uses a torch.Generator seeded with `seed`.
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
    check_fits(model, [len(p) + max_new_tokens for p in prompts], "prompt + max_new_tokens")
    device = model.device
    n_groups = n_streams // streams_per_group
    generator = torch.Generator(device="cpu").manual_seed(seed)
    counter = ForwardCounter()

    ids, mask = _pad(prompts, pad_id, "left")  # left padding keeps every stream's next slot aligned
    mask = mask.to(device)
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask,
        position_ids=_positions(mask),
        logits_to_keep=1,
        use_cache=True,
    )
    counter.add(*ids.shape)
    cache, next_position = out.past_key_values, mask.sum(-1, keepdim=True)
    stream_logits = out.logits[:, -1].float()

    steps: dict[str, list[torch.Tensor]] = {
        "tokens": [],
        "sample": [],
        "stream": [],
        "dist": [],
        "stream_dist": [],
    }
    finished = torch.zeros(n_groups, dtype=torch.bool, device=device)
    lengths = torch.zeros(n_groups, dtype=torch.long, device=device)
    for step in range(max_new_tokens):
        grouped = stream_logits.view(n_groups, streams_per_group, -1)
        group_logits = mix(grouped) if mix is not None else grouped[:, 0]
        if eos_token_id is not None and step < min_new_tokens:
            group_logits = group_logits.clone()
            group_logits[:, eos_token_id] = float("-inf")
        logprobs = sampling_logprobs(group_logits, transforms)
        tokens = torch.multinomial(logprobs.exp().cpu(), 1, generator=generator).squeeze(1)
        tokens = tokens.to(device).masked_fill(finished, pad_id)
        stream_raw = torch.log_softmax(stream_logits, dim=-1)
        stream_tokens = tokens.repeat_interleave(streams_per_group)
        steps["tokens"].append(tokens)
        steps["sample"].append(logprobs.gather(-1, tokens[:, None]).squeeze(1))
        steps["stream"].append(stream_raw.gather(-1, stream_tokens[:, None]).squeeze(1))
        if keep_distributions:
            steps["dist"].append(logprobs)
            steps["stream_dist"].append(stream_raw)
        lengths += (~finished).long()
        if eos_token_id is not None:
            finished |= tokens == eos_token_id
        if bool(finished.all()) or step == max_new_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        out = model(
            input_ids=stream_tokens[:, None],
            attention_mask=mask,
            position_ids=next_position,
            past_key_values=cache,
            use_cache=True,
        )
        counter.add(n_streams, 1)
        cache, next_position = out.past_key_values, next_position + 1
        stream_logits = out.logits[:, -1].float()

    def stacked(key: str, dim: int = 1) -> torch.Tensor | None:
        return torch.stack(steps[key], dim=dim).cpu() if steps[key] else None

    return Decoded(
        tokens=stacked("tokens"),
        lengths=lengths.cpu(),
        sample_logprobs=stacked("sample"),
        stream_logprobs=stacked("stream"),
        distributions=stacked("dist"),
        stream_distributions=stacked("stream_dist"),
        counter=counter,
    )
