"""Logit transforms: the decoder's temperature, top-k, top-p and greedy, and the distribution
they leave to sample.

Each transform maps logits [G, V] to logits [G, V] with excluded tokens at -inf. They are small
frozen objects rather than closures, so the exact kernels (`privleak.decoding.kernels`) can read
their parameter and score one token per row without building the modified distribution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from privleak.errors import require

Transform = Callable[[torch.Tensor], torch.Tensor]
"""Maps logits [G, V] to logits [G, V]; excluded tokens get -inf."""


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
