"""Ragged batches of token ids: padding, attention masks, position ids, window checks, and the
forward-token counter every fast path reports (the cost benchmarks compare).

Batched loops take an optional checkpoint cache (`UnitCache`), one unit per batch.

Position ids count only real tokens, so a left-padded row gets the same positions, and the same
log-probs, as the unpadded row.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from privleak.errors import require
from privleak.models import context_window


@dataclass
class ForwardCounter:
    """Counts the token positions fed through the model, padding included (that is the cost)."""

    tokens: int = 0
    calls: int = 0

    def add(self, batch: int, length: int) -> None:
        self.tokens += batch * length
        self.calls += 1

    def merge(self, other: ForwardCounter) -> None:
        """Add another counter's counts (a unit computed apart, or restored from a checkpoint)."""
        self.tokens += other.tokens
        self.calls += other.calls


def check_fits(model, lengths: Sequence[int], what: str = "prompt + continuation") -> None:
    """One-line error when any sequence exceeds the model window (callers truncate by param)."""
    window = context_window(model)
    longest = max(lengths, default=0)
    require(
        longest <= window,
        f"{what} has {longest} tokens but the model window is {window}; "
        "shorten the context or set a truncation param",
    )


def pad_rows(
    rows: Sequence[Sequence[int]], pad_id: int, side: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, L] ids and attention mask for ragged rows, padded on `side`."""
    length = max(len(row) for row in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(0, len(row)) if side == "right" else slice(length - len(row), length)
        ids[i, span] = torch.tensor(row, dtype=torch.long)
        mask[i, span] = 1
    return ids, mask


def position_ids(mask: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Position ids that count only real tokens, so left padding does not shift positions."""
    return (mask.cumsum(-1) - 1).clamp(min=0) + offset


def repeat_cache(cache, batch: int):
    """A fresh copy of a batch-1 KV cache, repeated along the batch (forwards extend in place)."""
    forked = copy.deepcopy(cache)
    forked.batch_repeat_interleave(batch)
    return forked


UnitCache = Callable[[Hashable, Callable[[], Any]], Any]
"""`cache(key, compute)`: the stored value of unit `key`, else `compute()`, stored. Batched loops
take one (`pipeline.checkpoint.StageStore.cache`), so a long stage resumes batch by batch; the
value holds the batch's outputs and forward counts, so a restored batch equals a computed one.
Keys digest a batch's inputs, not the model: scope a cache per model."""


def unit_key(*inputs) -> str:
    """A short digest of a unit's inputs (token-id lists, ids, settings; compared by repr, so no
    tensors): a batch stored for other inputs is never mistaken for this one."""
    return hashlib.blake2b(repr(inputs).encode(), digest_size=16).hexdigest()


def through_cache(cache: UnitCache | None, compute: Callable[[], Any], name: str, *inputs):
    """compute(), or with a cache the value of unit (name, digest of inputs), computed once."""
    if cache is None:
        return compute()
    return cache((name, unit_key(*inputs)), compute)
