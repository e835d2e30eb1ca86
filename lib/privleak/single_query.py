"""Attention for one new token a stream: the decode step of the DP-ICL decoder (S4).

At a decode step each stream's query is one token, and its keys and values are the stream's
cache. HF's SDPA path packs the grouped-query heads and calls PyTorch's CPU flash kernel, which
for a single query costs about twice the plain computation below (3.5 against 1.9 ms a layer for
154 streams of 207 cached tokens in bfloat16; benchmarks/README.md, "S4 in the official layout").
`single_query` computes softmax(q k^T * scale + mask) v directly (q k^T in the model's dtype, its
scaling, mask and softmax in float32) for the forwards made through `SingleQueryModel`; any other
forward (a prefill, a 2-D mask) goes to SDPA. The results equal SDPA's up to float rounding. The
DP-ICL decoder uses it on CPU only; on CUDA SDPA's kernels are the fast path.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "privleak_single_query"


def single_query(
    module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """query [B, H, 1, d] against key and value [B, KV, L, d] (H a multiple of KV) under an
    additive mask [B, 1, 1, L]: the attention output [B, 1, H, d], as HF's attention functions
    return it. Other shapes, dropout or attention options go to `sdpa_attention_forward`."""
    plain = (
        query.shape[2] == 1
        and attention_mask is not None
        and attention_mask.dim() == 4
        and attention_mask.shape[1:3] == (1, 1)
        and attention_mask.dtype != torch.bool
        and dropout == 0.0
        and not kwargs.get("softcap")
        and kwargs.get("position_bias") is None
        and query.shape[1] % key.shape[1] == 0
    )
    if not plain:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    batch, heads, _, dim = query.shape
    groups = key.shape[1]
    scale = dim**-0.5 if scaling is None else scaling
    grouped = query.reshape(batch, groups, heads // groups, dim)  # a KV head's query heads
    scores = torch.matmul(grouped, key.transpose(-1, -2)).float() * scale
    scores = scores + attention_mask.float()  # [B, 1, 1, L] over [B, KV, H / KV, L]
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # [B, KV, H / KV, d]
    return out.reshape(batch, 1, heads, dim), None


AttentionInterface.register(NAME, single_query)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)


class SingleQueryModel:
    """The model with its attention switched to `single_query` for the forwards made through
    this wrapper, and back to its own implementation after each one."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, *args, **kwargs):
        config = self.model.config
        own = config._attn_implementation
        config._attn_implementation = NAME
        try:
            return self.model(*args, **kwargs)
        finally:
            config._attn_implementation = own
