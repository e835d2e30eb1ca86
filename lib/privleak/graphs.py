"""The decoder's per-step forward over fixed buffers, replayed as one CUDA graph on a GPU.

A decode step forwards one token per stream. Eagerly that is ~40 kernel launches per layer, and at
the sizes the stages use the host cannot issue them as fast as a GPU runs them: a 135M model
decoding 192 streams spends more time launching than computing (measured in benchmarks/README.md). A
`SlotStep` keeps everything the step reads in buffers of fixed address and shape:

    keys/values  [B, H, L, d] per layer, L = prefill width W + steps (the prefill copied in);
    mask         [B, 1, 1, L] additive (0 = attend, dtype min = masked), one column opened a step;
    slot         [1], the cache column the step writes (W + step);
    ids, positions [B, 1].

so the whole forward can be captured once and replayed with one launch per step. On a CPU (and
with `graph=False`) the same buffers run eagerly; that path is what the tests compare with the
dynamic-cache decoder, token for token, so the captured graph differs from the tested code only
by the capture itself.

The slot cache implements what the supported models call: `update(keys, values, layer_idx, ...)`
and, for OPT, `get_seq_length()`; a 4D mask is passed through by transformers' mask
builders unchanged, and position ids are given, so no cache length is ever asked for.
Finished streams stay in the batch (fed pad tokens), since a fixed batch is what makes the graph
replayable, until half of the batch has finished: then `keep` copies the live rows into a smaller
step (captured anew), so finished streams never cost more forwards than live ones.
"""

from __future__ import annotations

import copy

import torch

GRAPH_MODEL_TYPES = frozenset({"llama", "opt"})
"""Architectures whose attention only calls `update` on the cache (checked by the tests)."""


def supports_slot_step(model) -> bool:
    """Whether `SlotStep` can drive this model (its architecture is in GRAPH_MODEL_TYPES)."""
    return getattr(model.config, "model_type", None) in GRAPH_MODEL_TYPES


class _SlotCache:
    """Per-layer KV buffers written at column `slot` by each forward (in place, fixed address)."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], slot: torch.Tensor):
        self.keys, self.values, self.slot = keys, values, slot
        self.seen = 0  # columns written before this forward (host side, never synced)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        # OPT asks for it but, given position ids and a 4D mask, uses it for nothing.
        return self.seen

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.keys[layer_idx].index_copy_(2, self.slot, key_states)
        self.values[layer_idx].index_copy_(2, self.slot, value_states)
        return self.keys[layer_idx], self.values[layer_idx]


class SlotStep:
    """Decode forwards for B streams after a prefill: `step(tokens [B])` -> logits [B, V].

    keys, values: per layer [B, H, L, d] buffers whose first W columns hold the prefill (rows
    left-padded; `decoding.prefill(..., slots=L - W)` writes them); mask: the prefill's [B, W]
    0/1 mask. The buffers take L - W more steps. With `graph=True` (CUDA only) the forward is
    captured on the first call and replayed afterwards."""

    def __init__(self, model, keys, values, mask: torch.Tensor, *, graph: bool):
        self.model, self.graph = model, graph
        device, (batch, width) = mask.device, mask.shape
        length = keys[0].shape[2]
        self.slot = torch.tensor([width], device=device)
        self.cache = _SlotCache(keys, values, self.slot)
        dtype = keys[0].dtype
        self.mask = torch.full((batch, 1, 1, length), torch.finfo(dtype).min, dtype=dtype,
                               device=device)  # fmt: skip
        self.mask[:, 0, 0, :width].masked_fill_(mask.bool(), 0.0)
        self.ids = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.positions = mask.sum(-1, keepdim=True)  # the next token's position, per stream
        self.width, self.done, self.logits = width, 0, None
        self._graph: torch.cuda.CUDAGraph | None = None

    def _forward(self) -> torch.Tensor:
        out = self.model(
            input_ids=self.ids,
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.cache,
            use_cache=True,
        )
        return out.logits[:, -1]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed tokens [B] (one per stream) and return the next logits [B, V] (a buffer that the
        next call overwrites: copy what must outlive it)."""
        column = self.width + self.done
        self.ids.copy_(tokens[:, None])
        self.slot.fill_(column)
        self.cache.seen = column
        self.mask[:, 0, 0, column] = 0.0
        if not self.graph:
            logits = self._forward()
        elif self._graph is None:
            logits = self._capture()
        else:
            self._graph.replay()
            logits = self.logits
        self.positions.add_(1)
        self.done += 1
        return logits

    def keep(self, rows: torch.Tensor) -> SlotStep:
        """The same decode state over the streams `rows` only (a copy of their buffer rows; the
        graph is captured anew on the next step). The decoder calls it once half of a batch has
        finished, so finished streams cost at most as many forwards as live ones."""
        kept = copy.copy(self)
        slot = self.slot.clone()
        kept.cache = _SlotCache([k[rows] for k in self.cache.keys],
                                [v[rows] for v in self.cache.values], slot)  # fmt: skip
        kept.cache.seen, kept.slot = self.cache.seen, slot
        kept.mask, kept.ids, kept.positions = self.mask[rows], self.ids[rows], self.positions[rows]
        kept.logits, kept._graph = None, None
        return kept

    def _capture(self) -> torch.Tensor:
        # Warm up on a side stream (library handles, autotuning), as capture requires; the
        # warm-up writes this step's column, which the captured replay then rewrites identically.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._forward()
        torch.cuda.current_stream().wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self.logits = self._forward()
        self._graph.replay()
        return self.logits
