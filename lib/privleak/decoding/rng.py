"""Randomness that belongs to the group, not the batch.

Group g draws its step-t token by inverse-CDF sampling with the uniform u[g, t] of its own
stream, seeded from (seed, group key), so batching, chunking or adding groups changes no existing
sample. The draw happens on the model's device; only the [G, T] uniforms cross from the host, once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

import torch


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
