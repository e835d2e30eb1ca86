"""One sampler loop for N streams with per-stream KV caches and one batched forward per step.

Streams are grouped: every group samples one token per step and feeds it to all of its streams.
Plain decoding has one stream per group. A `mix` hook (`privleak.decoding.mix`) turns the log-probs
of a group's streams into the group's logits; the logit transforms then shape the distribution that
is sampled, with the group's own uniforms (`privleak.decoding.rng`). Each step records the token,
its log-prob under the sampling distribution and its log-prob under every stream's own model
distribution, so metrics never need a second forward pass.

Memory is bounded by `max_batch_streams`: groups are decoded in chunks of at most that many
streams, and a group that emits EOS leaves the batch.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
from tqdm import tqdm
from transformers import DynamicCache

from privleak.batching import (
    ForwardCounter,
    UnitCache,
    check_fits,
    pad_rows,
    position_ids,
    through_cache,
)
from privleak.decoding.mix import Mix
from privleak.decoding.rng import group_uniforms, sample_inverse_cdf
from privleak.decoding.transforms import Transform, sampling_logprobs
from privleak.errors import require
from privleak.graphs import GRAPH_MODEL_TYPES, SlotStep, supports_slot_step
from privleak.models import real_logits


@dataclass
class Decoded:
    """Per-step records of one decode call. G groups, N streams, T = longest group's steps.

    tokens: [G, T] sampled ids (pad_id after a group's EOS).
    lengths: [G] generated tokens per group, EOS included.
    sample_logprobs: [G, T] log-prob of each token under the sampling distribution.
    stream_logprobs: [N, T] log-prob of each group's token under each stream's raw model
        distribution (temperature 1, no truncation).
    records: {name: [G, T]} per-step records returned by the mix (0 after a group's end).
    distributions: [G, T, V] sampling log-probs, kept only when asked (memory).
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    sample_logprobs: torch.Tensor
    stream_logprobs: torch.Tensor
    records: dict[str, torch.Tensor] = field(default_factory=dict)
    distributions: torch.Tensor | None = None
    stream_distributions: torch.Tensor | None = None
    prefill_counter: ForwardCounter = field(default_factory=ForwardCounter)
    step_counter: ForwardCounter = field(default_factory=ForwardCounter)

    @property
    def counter(self) -> ForwardCounter:
        """Every forwarded position, prefill and steps."""
        return ForwardCounter(
            self.prefill_counter.tokens + self.step_counter.tokens,
            self.prefill_counter.calls + self.step_counter.calls,
        )

    def token_lists(self) -> list[list[int]]:
        """The generated ids of each group, cut at its length."""
        return [row[:n].tolist() for row, n in zip(self.tokens, self.lengths, strict=True)]


FORWARD_MODES = ("auto", "dynamic", "slots", "graph")


def resolve_forward_mode(model, mode: str) -> str:
    """The concrete forward mode for `mode` on this model (see `decode`)."""
    require(mode in FORWARD_MODES, f"forward_mode must be one of {FORWARD_MODES}, got {mode!r}")
    graph_ok = model.device.type == "cuda" and supports_slot_step(model)
    if mode == "auto":
        return "graph" if graph_ok else "dynamic"
    require(
        mode != "graph" or graph_ok,
        f"forward_mode 'graph' needs a CUDA model of type {sorted(GRAPH_MODEL_TYPES)}; "
        f"this one is {model.config.model_type!r} on {model.device}",
    )
    require(
        mode != "slots" or supports_slot_step(model),
        f"forward_mode 'slots' supports model types {sorted(GRAPH_MODEL_TYPES)}, "
        f"not {model.config.model_type!r}",
    )
    return mode


def _bucket_by_length(rows: Sequence[Sequence[int]], waste: float = 0.25) -> list[list[int]]:
    """Indices of rows (longest first) in buckets whose left padding stays within `waste` of
    their real tokens, so a short prompt is not padded to a long one."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    buckets: list[list[int]] = []
    for i in order:
        if buckets:
            bucket = buckets[-1]
            width = len(rows[bucket[0]])
            real = sum(len(rows[k]) for k in bucket) + len(rows[i])
            if width * (len(bucket) + 1) <= (1 + waste) * real:
                bucket.append(i)
                continue
        buckets.append([i])
    return buckets


def prefill(
    model,
    rows: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter,
    *,
    slots: int = 0,
):
    """Forward each distinct row once and return (cache, mask [N, W], last logits [N, V]) for all
    N rows, left-padded to the longest (W): the cache the decoder extends.

    Distinct rows are forwarded in length buckets (little padding), keeping only the last
    position's logits; each bucket's keys/values are left-padded to W (padding slots hold zeros
    and are masked), and rows that repeat a prompt (a sweep's settings) share its entry.
    With `slots` > 0 the cache is instead a pair of per-layer lists of [N, H, W + slots, d]
    buffers (`SlotStep`'s), each bucket written straight into its rows, so no second copy of
    the cache ever exists.
    """
    device = model.device
    distinct = list(dict.fromkeys(tuple(row) for row in rows))
    width = len(max(distinct, key=len))
    users: dict[tuple, list[int]] = {}
    for n, row in enumerate(rows):
        users.setdefault(tuple(row), []).append(n)
    layers: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
    buffers: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
    logits, order = [], []
    for bucket in _bucket_by_length(distinct):
        ids, mask = pad_rows([distinct[i] for i in bucket], pad_id, "left")
        mask = mask.to(device)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=position_ids(mask),
            logits_to_keep=1,
            use_cache=True,
        )
        counter.add(*ids.shape)
        logits.append(out.logits[:, -1])
        order += bucket
        if slots:
            # Every row that uses one of this bucket's prompts, and its row in the bucket.
            targets = [(n, k) for k, i in enumerate(bucket) for n in users[distinct[i]]]
            into = torch.tensor([n for n, _ in targets], device=device)
            local = torch.tensor([k for _, k in targets], device=device)
            columns = slice(width - ids.shape[1], width)
            for index, layer in enumerate(out.past_key_values.layers):
                if index == len(buffers[0]):
                    for buffer, part in zip(buffers, (layer.keys, layer.values), strict=True):
                        shape = (len(rows), part.shape[1], width + slots, part.shape[3])
                        buffer.append(part.new_zeros(shape))
                buffers[0][index][into, :, columns] = layer.keys[local]
                buffers[1][index][into, :, columns] = layer.values[local]
            continue
        pad = (0, 0, width - ids.shape[1], 0)  # left-pad the sequence axis
        for index, layer in enumerate(out.past_key_values.layers):
            if index == len(layers):
                layers.append(([], []))
            layers[index][0].append(torch.nn.functional.pad(layer.keys, pad))
            layers[index][1].append(torch.nn.functional.pad(layer.values, pad))
    slot = {distinct[i]: k for k, i in enumerate(order)}  # row of the concatenated buckets
    pick = torch.tensor([slot[tuple(row)] for row in rows], device=device)
    _, mask = pad_rows([distinct[i] for i in order], pad_id, "left")
    if slots:
        return buffers, mask.to(device)[pick], torch.cat(logits)[pick]
    cache = DynamicCache()
    for index, (keys, values) in enumerate(layers):
        cache.update(torch.cat(keys)[pick], torch.cat(values)[pick], index)
    return cache, mask.to(device)[pick], torch.cat(logits)[pick]


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
    group_keys: Sequence[Hashable] | None = None,
    eos_token_id: int | None = None,
    min_new_tokens: int = 0,
    pad_id: int = 0,
    keep_distributions: bool = False,
    max_batch_streams: int | None = None,
    cache: UnitCache | None = None,
    forward_mode: str = "auto",
) -> Decoded:
    """Decode len(prompts) // streams_per_group groups, one batched forward per step.

    prompts: N token-id lists; consecutive runs of `streams_per_group` form a group. Without a
    `mix`, a group's logits are its first stream's (use streams_per_group=1). EOS is blocked for
    the first `min_new_tokens` steps. Group g samples with the random stream of
    (seed, group_keys[g]) (default key: g), so its tokens do not depend on the other groups.
    At most `max_batch_streams` streams (default: all) are decoded at once. With a `cache`, each
    such chunk is one checkpoint unit, keyed by its groups' keys and prompts, the seed and the
    lengths (a caller whose `mix` settings are not in the group keys must scope its cache).

    forward_mode: how the steps after the prefill are forwarded. "dynamic": a growing KV cache,
    finished groups leave the batch. "slots": fixed buffers (`privleak.graphs.SlotStep`), run
    eagerly. "graph": the same buffers replayed as a CUDA graph (CUDA, GRAPH_MODEL_TYPES only).
    "auto": "graph" where it is available, else "dynamic". All four give the same samples up to
    float rounding in the attention sums.
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
    n_groups = n_streams // streams_per_group
    keys = list(range(n_groups)) if group_keys is None else list(group_keys)
    require(len(keys) == n_groups, f"group_keys has {len(keys)} keys for {n_groups} groups")
    require(len(set(map(repr, keys))) == n_groups, "group_keys must be distinct")
    require(cache is None or not keep_distributions, "decode does not checkpoint distributions")
    budget = n_streams if max_batch_streams is None else max_batch_streams
    require(
        budget >= streams_per_group,
        f"max_batch_streams must be >= {streams_per_group} (one group), got {max_batch_streams}",
    )
    check_fits(model, [len(p) + max_new_tokens for p in prompts], "prompt + max_new_tokens")
    run = _Run(model, prompts, max_new_tokens, transforms, streams_per_group, mix, eos_token_id,
               min_new_tokens, pad_id, keep_distributions,
               group_uniforms(seed, keys, max_new_tokens),
               resolve_forward_mode(model, forward_mode))  # fmt: skip
    per_chunk = budget // streams_per_group
    # Longest prompts first, so a chunk's members pad little to one another.
    order = sorted(
        range(n_groups),
        key=lambda g: (
            -max(len(prompts[g * streams_per_group + s]) for s in range(streams_per_group))
        ),
    )
    starts = range(0, n_groups, per_chunk)
    for first in tqdm(starts, desc="decode chunks", disable=len(starts) < 2, mininterval=5):
        groups = order[first : first + per_chunk]
        if cache is None:
            run.chunk(groups, run.prefill_counter, run.step_counter)
            continue
        streams = [g * streams_per_group + s for g in groups for s in range(streams_per_group)]
        saved = through_cache(
            cache,
            partial(run.saved_chunk, groups),
            "decode chunk",
            [keys[g] for g in groups],
            [list(prompts[i]) for i in streams],
            (seed, max_new_tokens, min_new_tokens, eos_token_id, pad_id, list(transforms)),
        )
        run.restore(groups, saved)
    return run.result()


class _Run:
    """The buffers of one decode call and the loop that fills them, one chunk of groups at a time.
    Buffers live on the model's device and are written by index, so no step waits for the host
    except the EOS test."""

    def __init__(self, model, prompts, max_new_tokens, transforms, streams_per_group, mix,
                 eos_token_id, min_new_tokens, pad_id, keep_distributions, uniforms,
                 forward_mode="dynamic"):  # fmt: skip
        self.model, self.prompts, self.transforms, self.mix = model, prompts, transforms, mix
        self.steps, self.per_group = max_new_tokens, streams_per_group
        self.eos, self.min_new, self.pad_id = eos_token_id, min_new_tokens, pad_id
        self.keep, self.forward_mode = keep_distributions, forward_mode
        device = self.device = model.device
        self.uniforms = uniforms.to(device)
        n_groups, shape = uniforms.shape[0], uniforms.shape
        self.tokens = torch.full(shape, pad_id, dtype=torch.long, device=device)
        self.lengths = torch.zeros(n_groups, dtype=torch.long, device=device)
        self.sample = torch.zeros(shape, device=device)
        self.stream = torch.zeros(len(prompts), self.steps, device=device)
        self.records: dict[str, torch.Tensor] = {}
        self.dist: torch.Tensor | None = None
        self.stream_dist: torch.Tensor | None = None
        self.prefill_counter, self.step_counter = ForwardCounter(), ForwardCounter()

    def _streams(self, groups: torch.Tensor) -> torch.Tensor:
        offsets = torch.arange(self.per_group, device=groups.device)
        return (groups[:, None] * self.per_group + offsets).flatten()

    def saved_chunk(self, group_list: list[int]) -> dict:
        """Decode one chunk and return what `restore` needs: its rows of every buffer (host
        tensors) and its forward counts."""
        prefill_counter, step_counter = ForwardCounter(), ForwardCounter()
        self.chunk(group_list, prefill_counter, step_counter)
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        return {
            "tokens": self.tokens[groups].cpu(),
            "lengths": self.lengths[groups].cpu(),
            "sample": self.sample[groups].cpu(),
            "stream": self.stream[streams].cpu(),
            "records": {name: values[groups].cpu() for name, values in self.records.items()},
            "counters": (prefill_counter, step_counter),
        }

    def restore(self, group_list: list[int], saved: dict) -> None:
        """Write a chunk's `saved_chunk` rows back into the buffers and add its forward counts."""
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        self.tokens[groups] = saved["tokens"].to(self.device)
        self.lengths[groups] = saved["lengths"].to(self.device)
        self.sample[groups] = saved["sample"].to(self.device)
        self.stream[streams] = saved["stream"].to(self.device)
        for name, values in saved["records"].items():
            if name not in self.records:
                self.records[name] = torch.zeros(self.tokens.shape, device=self.device)
            self.records[name][groups] = values.to(self.device)
        self.prefill_counter.merge(saved["counters"][0])
        self.step_counter.merge(saved["counters"][1])

    def chunk(
        self, group_list: list[int], prefill_counter: ForwardCounter, step_counter: ForwardCounter
    ) -> None:
        """Decode one chunk of groups into the buffers, counting its forwards."""
        groups = torch.tensor(group_list, device=self.device)
        streams = self._streams(groups)
        slots = self.steps - 1 if self.forward_mode != "dynamic" else 0
        cache, mask, logits = prefill(
            self.model,
            [self.prompts[i] for i in streams.tolist()],
            self.pad_id,
            prefill_counter,
            slots=slots,
        )
        if slots:
            stepper = SlotStep(self.model, *cache, mask, graph=self.forward_mode == "graph")
            self._slot_chunk(stepper, groups, streams, logits, step_counter)
            return
        position = mask.sum(-1, keepdim=True)
        for step in range(self.steps):
            stream_logits = real_logits(self.model, logits.float())
            tokens = self._step(step, groups, streams, stream_logits)
            keep = self._going_on(step, tokens)
            if keep is not None:
                if not len(keep):
                    return
                kept_streams = self._streams(keep)
                cache.reorder_cache(kept_streams)
                groups, tokens = groups[keep], tokens[keep]
                streams, mask = streams[kept_streams], mask[kept_streams]
                position = position[kept_streams]
            if step == self.steps - 1:
                return
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            stream_tokens = tokens.repeat_interleave(self.per_group)
            out = self.model(
                input_ids=stream_tokens[:, None],
                attention_mask=mask,
                position_ids=position,
                past_key_values=cache,
                use_cache=True,
            )
            step_counter.add(len(stream_tokens), 1)
            cache, position, logits = out.past_key_values, position + 1, out.logits[:, -1]

    def _slot_chunk(self, stepper, groups, streams, logits, step_counter) -> None:
        """The chunk loop over fixed step buffers: finished groups stay in the forward batch, fed
        pad tokens, until half of it has finished (then the live rows move to a smaller step);
        only the live rows (`rows`, into the step's batch) are sampled."""
        rows = torch.arange(len(streams), device=self.device)
        feed = torch.full((len(streams),), self.pad_id, dtype=torch.long, device=self.device)
        for step in range(self.steps):
            tokens = self._step(step, groups, streams, real_logits(self.model, logits.float()))
            keep = self._going_on(step, tokens)
            if keep is not None:
                if not len(keep):
                    return
                kept_streams = self._streams(keep)
                groups, tokens = groups[keep], tokens[keep]
                streams, rows = streams[kept_streams], rows[kept_streams]
                feed.fill_(self.pad_id)
                if 2 * len(rows) <= len(feed):  # half the batch is done: drop its rows
                    stepper = stepper.keep(rows)
                    rows = torch.arange(len(rows), device=self.device)
                    feed = feed[: len(rows)].clone()
            if step == self.steps - 1:
                return
            feed[rows] = tokens.repeat_interleave(self.per_group)
            logits = stepper.step(feed)
            logits = logits if len(rows) == len(feed) else logits[rows]
            step_counter.add(len(feed), 1)

    def _going_on(self, step: int, tokens: torch.Tensor) -> torch.Tensor | None:
        """The stop test after step `step`: None when every group goes on, else the indices
        [g'] of the groups that did not just emit EOS (the one host sync a step)."""
        if self.eos is None or step < self.min_new:
            return None
        going_on = torch.nonzero(tokens != self.eos)[:, 0]
        return None if len(going_on) == len(tokens) else going_on

    def _step(self, step, groups, streams, stream_logits) -> torch.Tensor:
        """Sample one token per group, write every record of this step; returns tokens [g]."""
        stream_raw = torch.log_softmax(stream_logits, dim=-1)
        grouped = stream_raw.view(len(groups), self.per_group, -1)
        if self.mix is None:
            group_logits, records = grouped[:, 0], {}
        else:
            group_logits, records = self.mix(grouped, groups, step)
        if self.eos is not None and step < self.min_new:
            group_logits = group_logits.clone()
            group_logits[:, self.eos] = float("-inf")
        logprobs = sampling_logprobs(group_logits, self.transforms)
        tokens = sample_inverse_cdf(logprobs, self.uniforms[groups, step])
        self.tokens[groups, step] = tokens
        self.sample[groups, step] = logprobs.gather(-1, tokens[:, None]).squeeze(1)
        self.stream[streams, step] = stream_raw.gather(
            -1, tokens.repeat_interleave(self.per_group)[:, None]
        ).squeeze(1)
        self.lengths[groups] += 1
        for name, values in records.items():
            if name not in self.records:
                self.records[name] = torch.zeros(self.tokens.shape, device=self.device)
            self.records[name][groups, step] = values.float()
        if self.keep:
            if self.dist is None:
                vocab = logprobs.shape[-1]
                self.dist = torch.zeros(*self.tokens.shape, vocab, device=self.device)
                self.stream_dist = torch.zeros(len(self.prompts), self.steps, vocab,
                                               device=self.device)  # fmt: skip
            self.dist[groups, step] = logprobs
            self.stream_dist[streams, step] = stream_raw
        return tokens

    def result(self) -> Decoded:
        steps = int(self.lengths.max())
        cut = lambda x: None if x is None else x[:, :steps].cpu()  # noqa: E731
        return Decoded(
            tokens=cut(self.tokens),
            lengths=self.lengths.cpu(),
            sample_logprobs=cut(self.sample),
            stream_logprobs=cut(self.stream),
            records={name: cut(values) for name, values in self.records.items()},
            distributions=cut(self.dist),
            stream_distributions=cut(self.stream_dist),
            prefill_counter=self.prefill_counter,
            step_counter=self.step_counter,
        )
