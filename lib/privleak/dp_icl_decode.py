"""DP-ICL decoding from one shared prefix per question (S4, DP-RAG).

A question's DP-ICL streams (the public one and one per document) agree on their first tokens:
the template and the question come before the document. `prefill_forked` forwards that head once,
copies its cache to every distinct tail (the public stream's end of turn, or one document and its
end of turn, then the answer prefix) and forwards the tails together, so a question with k
documents costs |head| + sum |tail| prefill tokens instead of (1 + k) * |head| + sum |tail|. Every
group that asks the question (under one setting, with some of its documents) then decodes from
copies of its streams' rows (`decode_forked`): the same draws as `decoding.decode` on the full
prompts (the uniforms of (seed, key)), up to float rounding in the attention sums.

Rows are laid out [head | hole | tail]: each tail is left-padded inside its own segment, so every
row ends at the same column, the hole is masked, and position ids count real tokens only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from privleak.batching import ForwardCounter, check_fits, pad_rows, position_ids, repeat_cache
from privleak.decoding import group_uniforms, sample_inverse_cdf
from privleak.dp_icl import DPICLMix
from privleak.errors import require
from privleak.graphs import SlotStep, supports_slot_step
from privleak.models import real_logits


def shared_head(rows: Sequence[Sequence[int]]) -> int:
    """The length of the longest common token prefix of rows, leaving every row >= 1 tail token."""
    require(len(rows) >= 1 and all(len(r) >= 1 for r in rows), "give non-empty token rows")
    shortest = min(len(r) for r in rows) - 1
    length = 0
    while length < shortest and len({r[length] for r in rows}) == 1:
        length += 1
    return length


@dataclass
class Forked:
    """The prefilled rows of one head: keys and values per layer [R, H, W, d], the mask [R, W]
    and the next-token logits [R, V] after each row."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    logits: torch.Tensor


@torch.inference_mode()
def prefill_forked(
    model,
    head: Sequence[int],
    tails: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter,
    *,
    batch_rows: int = 64,
) -> Forked:
    """The rows head + tails[i] (each tail >= 1 token; an empty head forwards the tails alone),
    the head forwarded once and the tails `batch_rows` at a time on copies of its cache."""
    require(len(tails) >= 1 and all(len(t) >= 1 for t in tails), "every tail needs >= 1 token")
    device, width = model.device, max(len(t) for t in tails)
    check_fits(model, [len(head) + width], "head + tail")
    head_cache = None
    if head:
        out = model(input_ids=torch.tensor([list(head)], device=device), use_cache=True,
                    logits_to_keep=1)  # fmt: skip
        counter.add(1, len(head))
        head_cache = out.past_key_values
    keys: list[list[torch.Tensor]] = []
    values: list[list[torch.Tensor]] = []
    masks, logits = [], []
    for start in range(0, len(tails), batch_rows):
        part = tails[start : start + batch_rows]
        ids, tail_mask = pad_rows(part, pad_id, "left")
        hole = width - ids.shape[1]
        mask = torch.cat([torch.ones(len(part), len(head), dtype=tail_mask.dtype), tail_mask], 1)
        mask = mask.to(device)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=position_ids(mask)[:, len(head) :],
            past_key_values=repeat_cache(head_cache, len(part)) if head_cache else None,
            use_cache=True,
            logits_to_keep=1,
        )
        counter.add(*ids.shape)
        logits.append(out.logits[:, -1])
        masks.append(_with_hole(mask, len(head), hole))
        for index, layer in enumerate(out.past_key_values.layers):
            if index == len(keys):
                keys.append([])
                values.append([])
            keys[index].append(_with_hole(layer.keys, len(head), hole, axis=2))
            values[index].append(_with_hole(layer.values, len(head), hole, axis=2))
    return Forked(
        [torch.cat(k) for k in keys],
        [torch.cat(v) for v in values],
        torch.cat(masks),
        torch.cat(logits),
    )


def _with_hole(tensor: torch.Tensor, at: int, size: int, axis: int = 1) -> torch.Tensor:
    """tensor with `size` zeros inserted along `axis` before index `at` (masked columns)."""
    if not size:
        return tensor
    shape = list(tensor.shape)
    shape[axis] = size
    before, after = tensor.split([at, tensor.shape[axis] - at], dim=axis)
    return torch.cat([before, tensor.new_zeros(shape), after], dim=axis)


@dataclass
class ForkedDecoded:
    """Per group: tokens [G, T] (pad after EOS), lengths [G], sample_logprobs [G, T] (the
    mixed distribution's log-prob of each sampled token) and public_logprobs [G, T] (its log-prob
    under the group's first stream, the public one)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    sample_logprobs: torch.Tensor
    public_logprobs: torch.Tensor

    def token_lists(self) -> list[list[int]]:
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths, strict=True)]


@torch.inference_mode()
def decode_forked(
    model,
    forked: Forked,
    streams: Sequence[Sequence[int]],
    mix: DPICLMix,
    *,
    keys: Sequence[Hashable],
    seed: int,
    max_new_tokens: int,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
    pad_id: int = 0,
    max_batch_streams: int | None = None,
    counter: ForwardCounter | None = None,
) -> ForkedDecoded:
    """Decode G groups whose streams are rows of `forked`: streams[g] = [public row, document
    rows...], all groups with the same slot count (the mix's `documents` says how many count).
    Group g samples with the uniforms of (seed, keys[g]); at most `max_batch_streams` streams
    (default: all, and never fewer than one group) decode at once; EOS is blocked for the first
    `min_new_tokens` steps and a group that emits it leaves the batch."""
    require(len(streams) >= 1, "decode_forked needs at least one group")
    slots = {len(s) for s in streams}
    require(len(slots) == 1, "every group of one decode_forked call has the same stream count")
    per_group = slots.pop()
    require(max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {max_new_tokens}")
    mix.check_slots(per_group - 1)
    width = forked.mask.shape[1]
    check_fits(model, [width + max_new_tokens], "prompt + max_new_tokens")
    counter = counter if counter is not None else ForwardCounter()
    n_groups, device = len(streams), model.device
    uniforms = group_uniforms(seed, list(keys), max_new_tokens).to(device)
    tokens = torch.full((n_groups, max_new_tokens), pad_id, dtype=torch.long, device=device)
    sample = torch.zeros(n_groups, max_new_tokens, device=device)
    public = torch.zeros(n_groups, max_new_tokens, device=device)
    lengths = torch.zeros(n_groups, dtype=torch.long, device=device)
    rows = torch.tensor([list(s) for s in streams], device=device)
    per_chunk = max(1, (max_batch_streams or per_group * n_groups) // per_group)
    for first in range(0, n_groups, per_chunk):
        groups = torch.arange(first, min(first + per_chunk, n_groups), device=device)
        picked = rows[groups].flatten()
        stepper = _stepper(model, forked, picked, max_new_tokens - 1)
        logits = forked.logits[picked]
        live = torch.arange(len(picked), device=device)  # live streams' rows in the batch
        feed = torch.full((len(picked),), pad_id, dtype=torch.long, device=device)
        for step in range(max_new_tokens):
            grouped = real_logits(model, logits.float()).view(len(groups), per_group, -1)
            # the mix reads documents' logits as they are; only the public stream is normalised
            grouped[:, 0] = torch.log_softmax(grouped[:, 0], dim=-1)
            mixed, _ = mix(grouped, groups, step)
            if eos_token_id is not None and step < min_new_tokens:
                mixed = mixed.clone()
                mixed[:, eos_token_id] = float("-inf")
            logprobs = torch.log_softmax(mixed.float(), dim=-1)
            drawn = sample_inverse_cdf(logprobs, uniforms[groups, step])
            tokens[groups, step] = drawn
            sample[groups, step] = logprobs.gather(-1, drawn[:, None])[:, 0]
            public[groups, step] = grouped[:, 0].gather(-1, drawn[:, None])[:, 0]
            lengths[groups] += 1
            if eos_token_id is not None and step >= min_new_tokens:
                going_on = torch.nonzero(drawn != eos_token_id)[:, 0]
                if not len(going_on):
                    break
                if len(going_on) < len(groups):
                    offsets = torch.arange(per_group, device=device)
                    kept = (going_on[:, None] * per_group + offsets).flatten()
                    groups, drawn, live = groups[going_on], drawn[going_on], live[kept]
                    feed.fill_(pad_id)  # finished streams are fed padding until dropped
                    if 2 * len(live) <= len(feed):  # half the batch is done: drop its rows
                        stepper = stepper.keep(live)
                        live = torch.arange(len(live), device=device)
                        feed = feed[: len(live)].clone()
            if step == max_new_tokens - 1:
                break
            feed[live] = drawn.repeat_interleave(per_group)
            logits = stepper.step(feed)
            logits = logits if len(live) == len(feed) else logits[live]
            counter.add(len(feed), 1)
    steps = int(lengths.max())
    return ForkedDecoded(
        tokens[:, :steps].cpu(),
        lengths.cpu(),
        sample[:, :steps].cpu(),
        public[:, :steps].cpu(),
    )


def _stepper(model, forked: Forked, picked: torch.Tensor, steps: int):
    """The decode state of the forked rows `picked`: `SlotStep` buffers with room for `steps`
    more tokens where the architecture allows it (no copy of the cache a step; a CUDA graph on
    CUDA), else a growing cache behind the same interface."""
    mask = forked.mask[picked]
    if supports_slot_step(model):
        keys = [_with_room(k, picked, steps) for k in forked.keys]
        values = [_with_room(v, picked, steps) for v in forked.values]
        return SlotStep(model, keys, values, mask, graph=model.device.type == "cuda")
    cache = DynamicCache()
    for index, (k, v) in enumerate(zip(forked.keys, forked.values, strict=True)):
        cache.update(k[picked], v[picked], index)
    return _GrowingStep(model, cache, mask)


def _with_room(tensor: torch.Tensor, rows: torch.Tensor, steps: int) -> torch.Tensor:
    """[len(rows), H, W + steps, d]: the rows of a [R, H, W, d] cache, then `steps` free columns."""
    width = tensor.shape[2]
    out = tensor.new_empty(len(rows), tensor.shape[1], width + steps, tensor.shape[3])
    out[:, :, :width] = tensor[rows]
    out[:, :, width:] = 0  # masked until written, but never uninitialised memory
    return out


class _GrowingStep:
    """`SlotStep`'s interface (step, keep) over a growing DynamicCache."""

    def __init__(self, model, cache, mask: torch.Tensor):
        self.model, self.cache, self.mask = model, cache, mask
        self.positions = mask.sum(-1, keepdim=True)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.cache,
            use_cache=True,
        )
        self.cache, self.positions = out.past_key_values, self.positions + 1
        return out.logits[:, -1]

    def keep(self, rows: torch.Tensor) -> _GrowingStep:
        self.cache.reorder_cache(rows)
        self.mask, self.positions = self.mask[rows], self.positions[rows]
        return self


@torch.inference_mode()
def forced_forked(
    model, forked: Forked, rows: Sequence[int], target: Sequence[int], pad_id: int
) -> torch.Tensor:
    """[len(rows), T, V] next-token log-probs (temperature 1, real vocabulary) at the T positions
    that predict target[0..T-1], the target forced after each of the forked `rows`."""
    require(len(target) >= 1, "the forced target needs at least one token")
    device = model.device
    picked = torch.tensor(list(rows), device=device)
    first = forked.logits[picked][:, None]
    if len(target) == 1:
        return torch.log_softmax(real_logits(model, first.float()), dim=-1)
    cache = DynamicCache()
    for index, (k, v) in enumerate(zip(forked.keys, forked.values, strict=True)):
        cache.update(k[picked], v[picked], index)
    mask = forked.mask[picked]
    forced = torch.tensor([list(target[:-1])] * len(picked), device=device)
    full = torch.cat([mask, torch.ones_like(forced)], dim=1)
    out = model(input_ids=forced, attention_mask=full,
                position_ids=position_ids(full)[:, mask.shape[1] :], past_key_values=cache,
                use_cache=True)  # fmt: skip
    logits = torch.cat([first, out.logits], dim=1).float()
    return torch.log_softmax(real_logits(model, logits), dim=-1)
