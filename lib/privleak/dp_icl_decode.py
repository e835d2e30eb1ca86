"""DP-ICL decoding from prefills shared across streams and questions (S4, DP-RAG).

A question's DP-ICL streams (the public one and one per document) hold the same question. Two
layouts share work:
- **document first** (the official DP-RAG's: the document in the system message, then the
  question): the streams end alike. `HeadStore` forwards each distinct head (the template and a
  document, or the public system turn) once, alone, and keeps its cache for every later question
  that retrieves the document; `prefill_tailed` lays copies of the heads side by side and forwards
  the shared tail (the question's turn and the answer prefix) on top, so a question with k
  documents costs (1 + k) * |tail| prefill tokens plus the heads not seen before;
- **question first**: the streams start alike. `prefill_forked` forwards that head once, copies
  its cache to every distinct tail and forwards the tails together.

`prefill_rows` takes whichever the rows share more of. Every group that asks the question (under
one setting, with some of its documents) then decodes from copies of its streams' rows
(`decode_forked`): the same draws as `decoding.decode` on the full prompts (the uniforms of
(seed, key)), up to float rounding in the attention sums.

Rows are padded inside: [head | hole | tail] (question first, each tail left-padded in its own
segment) or [hole | head | tail] (document first, each head right-aligned), so every row ends at
the same column, the hole is masked, and position ids count real tokens only.
"""

from __future__ import annotations

from collections import OrderedDict
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
from privleak.single_query import SingleQueryModel


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


def shared_tail(rows: Sequence[Sequence[int]]) -> int:
    """The length of the longest common token suffix of rows, leaving every row >= 1 head token."""
    require(len(rows) >= 1 and all(len(r) >= 1 for r in rows), "give non-empty token rows")
    shortest = min(len(r) for r in rows) - 1
    length = 0
    while length < shortest and len({r[len(r) - 1 - length] for r in rows}) == 1:
        length += 1
    return length


class HeadStore:
    """Prefilled heads by their tokens, for rows that end alike (`prefill_tailed`). Each head is
    forwarded alone (batch 1, no padding), so its keys and values depend on its tokens only, never
    on the other rows or questions of a call: a question's responses stay a function of its own
    asks (what a checkpoint unit needs). Caches are kept up to `max_bytes` in all (default 4
    GiB: SmolLM2-135M's thousand S4 documents take about 2.6 GiB in bfloat16; a 3.8B LM's take
    about 100 times more, so with it most heads are forwarded again for each question), the
    least recently used dropped first and forwarded again if asked for (None: no limit). Heads
    that begin with `start` (the template before the document, the same in every document
    stream) forward only the rest, on a copy of the start's cache, itself forwarded once."""

    def __init__(self, model, max_bytes: int | None = 4 * 2**30, start: Sequence[int] = ()):
        require(max_bytes is None or max_bytes >= 1, "HeadStore max_bytes must be >= 1 or None")
        self.model, self.max_bytes, self.start = model, max_bytes, tuple(start)
        self._start_cache = None
        self._heads: OrderedDict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._heads)

    @torch.inference_mode()
    def get(
        self, head: Sequence[int], counter: ForwardCounter
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's keys and values, each [layers, H, len(head), d]; forwarded (and counted)
        only the first time."""
        key = tuple(head)
        if key in self._heads:
            self._heads.move_to_end(key)
            return self._heads[key]
        begun = len(key) > len(self.start) > 0 and key[: len(self.start)] == self.start
        if begun and self._start_cache is None:
            self._start_cache = self._forward(self.start, None, counter)
        rest = key[len(self.start) :] if begun else key
        cache = repeat_cache(self._start_cache, 1) if begun else None
        layers = self._forward(rest, cache, counter).layers
        cached = (
            torch.stack([layer.keys[0] for layer in layers]),
            torch.stack([layer.values[0] for layer in layers]),
        )
        self._heads[key] = cached
        self._bytes += sum(t.nbytes for t in cached)
        while self.max_bytes is not None and self._bytes > self.max_bytes and len(self) > 1:
            _, dropped = self._heads.popitem(last=False)
            self._bytes -= sum(t.nbytes for t in dropped)
        return cached

    def _forward(self, tokens: Sequence[int], cache, counter: ForwardCounter):
        """The cache after forwarding `tokens` (batch 1) on `cache` (None: from the start)."""
        out = self.model(input_ids=torch.tensor([list(tokens)], device=self.model.device),
                         past_key_values=cache, use_cache=True, logits_to_keep=1)  # fmt: skip
        counter.add(1, len(tokens))
        return out.past_key_values


@torch.inference_mode()
def prefill_tailed(
    model,
    heads: Sequence[Sequence[int]],
    tail: Sequence[int],
    counter: ForwardCounter,
    store: HeadStore,
    *,
    batch_rows: int = 64,
) -> Forked:
    """The rows heads[i] + tail (each head >= 1 token, the tail >= 1): each head's cache from
    `store`, right-aligned in [hole | head] columns, and the tail forwarded on top of those
    copies `batch_rows` rows at a time."""
    require(len(heads) >= 1 and all(len(h) >= 1 for h in heads), "every head needs >= 1 token")
    require(len(tail) >= 1, "the shared tail needs >= 1 token")
    device, width = model.device, max(len(h) for h in heads)
    check_fits(model, [width + len(tail)], "head + tail")
    tail_ids = torch.tensor([list(tail)], device=device)
    steps = torch.arange(len(tail), device=device)
    keys: list[list[torch.Tensor]] = []
    values: list[list[torch.Tensor]] = []
    masks, logits = [], []
    for start in range(0, len(heads), batch_rows):
        part = heads[start : start + batch_rows]
        cached = [store.get(head, counter) for head in part]
        first_keys, first_values = cached[0]
        layers, n_heads, _, dim = first_keys.shape
        shape = (layers, len(part), n_heads, width, dim)
        head_keys = first_keys.new_zeros(shape)  # the hole's columns stay zero and masked
        head_values = first_values.new_zeros(shape)
        mask = torch.zeros(len(part), width + len(tail), dtype=torch.long, device=device)
        for row, (head, (k, v)) in enumerate(zip(part, cached, strict=True)):
            head_keys[:, row, :, width - len(head) :] = k
            head_values[:, row, :, width - len(head) :] = v
            mask[row, width - len(head) :] = 1
        cache = DynamicCache()
        for layer in range(layers):
            cache.update(head_keys[layer], head_values[layer], layer)
        lengths = torch.tensor([len(h) for h in part], device=device)
        out = model(
            input_ids=tail_ids.expand(len(part), -1),
            attention_mask=mask,
            position_ids=lengths[:, None] + steps,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        counter.add(len(part), len(tail))
        logits.append(out.logits[:, -1])
        masks.append(mask)
        for index, layer in enumerate(out.past_key_values.layers):
            if index == len(keys):
                keys.append([])
                values.append([])
            keys[index].append(layer.keys)
            values[index].append(layer.values)
    return Forked(
        [torch.cat(k) for k in keys],
        [torch.cat(v) for v in values],
        torch.cat(masks),
        torch.cat(logits),
    )


def prefill_rows(
    model,
    rows: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter,
    *,
    store: HeadStore | None = None,
    batch_rows: int = 64,
) -> Forked:
    """The rows prefilled from what they share most of: a common end (`prefill_tailed`, heads
    from `store`, a fresh one by default) or a common start (`prefill_forked`)."""
    tail, head = shared_tail(rows), shared_head(rows)
    if tail > head:
        store = store if store is not None else HeadStore(model)
        return prefill_tailed(model, [r[: len(r) - tail] for r in rows], rows[0][-tail:], counter,
                              store, batch_rows=batch_rows)  # fmt: skip
    return prefill_forked(model, rows[0][:head], [r[head:] for r in rows], pad_id, counter,
                          batch_rows=batch_rows)  # fmt: skip


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
    `min_new_tokens` steps and a group that emits it leaves the batch. Groups with the same
    streams that have drawn the same tokens so far (one question under two epsilons whose answers
    agree) share one decode context: the model forwards it once and each group mixes its own
    copy of the logits; a context splits, its rows copied, when its groups draw different
    tokens."""
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
    vocab = forked.logits.shape[-1]
    per_chunk = max(1, (max_batch_streams or per_group * n_groups) // per_group)
    offsets = torch.arange(per_group, device=device)
    for first in range(0, n_groups, per_chunk):
        groups = torch.arange(first, min(first + per_chunk, n_groups), device=device)
        # A state is one decode context (stream rows + tokens drawn so far) shared by the groups
        # that point at it; its block holds its per_group rows in the stepper.
        distinct, state_of = torch.unique(rows[groups], dim=0, return_inverse=True)
        picked = distinct.flatten()
        stepper = _stepper(model, forked, picked, max_new_tokens - 1)
        block_logits = forked.logits[picked].view(len(distinct), per_group, -1)
        block_of_state = torch.arange(len(distinct), device=device)
        blocks = len(distinct)
        for step in range(max_new_tokens):
            states = real_logits(model, block_logits[block_of_state].float())
            grouped = states[state_of]  # [G, per_group, V]
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
                groups, drawn, state_of = groups[going_on], drawn[going_on], state_of[going_on]
            if not len(groups) or step == max_new_tokens - 1:
                break
            # the next states: one per distinct (state, token drawn) among the live groups
            pairs, state_of = torch.unique(state_of * vocab + drawn, return_inverse=True)
            parent, fed = block_of_state[pairs // vocab], pairs % vocab
            split = len(torch.unique(parent)) < len(parent)
            if split or 2 * len(parent) <= blocks:  # rows to copy, or half the blocks are done
                stepper = stepper.keep((parent[:, None] * per_group + offsets).flatten())
                block_of_state = torch.arange(len(parent), device=device)
                blocks = len(parent)
            else:  # each state goes on in its parent's block; finished blocks are fed padding
                block_of_state = parent
            feed = torch.full((blocks, per_group), pad_id, dtype=torch.long, device=device)
            feed[block_of_state] = fed[:, None]
            block_logits = stepper.step(feed.flatten()).view(blocks, per_group, -1)
            counter.add(blocks * per_group, 1)
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
        on_cpu = model.device.type == "cpu"  # one query a stream: plain attention beats SDPA's
        return SlotStep(SingleQueryModel(model) if on_cpu else model, keys, values, mask,
                        graph=model.device.type == "cuda")  # fmt: skip
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
