"""Forced decoding of many candidate outputs after a few prompts: the prompts are prefilled once
(what they share once, `dp_icl_decode.prefill_rows`) and every (prompt, candidate) pair is
forwarded from a copy of its prompt's cache, `batch_rows` pairs at a time.

`forced_loop` is the per-candidate reference a user would write: one full forward of prompt +
candidate for each pair (`benchmarks/bench_audit_forced.py` compares the two).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from transformers import DynamicCache

from privleak.batching import ForwardCounter, position_ids
from privleak.dp_icl_decode import Forked, prefill_rows
from privleak.dp_rag import forced_logprobs
from privleak.errors import require
from privleak.models import real_logits


def prefill(
    model, prompts: Sequence[Sequence[int]], pad_id: int, counter: ForwardCounter
) -> Forked:
    """The prompts prefilled with their longest common start, or end, forwarded once."""
    return prefill_rows(model, prompts, pad_id, counter)


@torch.inference_mode()
def forced_rows(
    model,
    forked: Forked,
    rows: Sequence[int],
    targets: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """[n, L, V] next-token log-probs (temperature 1, real vocabulary) at the positions that predict
    targets[i][0..], targets[i] forced after the prefilled row rows[i]; L is the longest target
    and positions past a target's end are padding (their values mean nothing)."""
    require(len(rows) == len(targets) >= 1, "give one target per row, at least one")
    require(all(len(t) >= 1 for t in targets), "every forced target needs at least one token")
    device = model.device
    picked = torch.tensor(list(rows), device=device)
    first = forked.logits[picked][:, None]
    longest = max(len(t) for t in targets)
    if longest == 1:
        return torch.log_softmax(real_logits(model, first.float()), dim=-1)
    cache = DynamicCache()
    for index, (k, v) in enumerate(zip(forked.keys, forked.values, strict=True)):
        cache.update(k[picked], v[picked], index)
    inputs = [list(t[:-1]) + [pad_id] * (longest - len(t)) for t in targets]
    typed = forked.mask.dtype
    fed = torch.tensor([[1] * (len(t) - 1) + [0] * (longest - len(t)) for t in targets],
                       dtype=typed, device=device)  # fmt: skip
    mask = torch.cat([forked.mask[picked], fed], dim=1)
    out = model(input_ids=torch.tensor(inputs, device=device), attention_mask=mask,
                position_ids=position_ids(mask)[:, forked.mask.shape[1] :], past_key_values=cache,
                use_cache=True)  # fmt: skip
    if counter is not None:
        counter.add(len(inputs), longest - 1)
    logits = torch.cat([first, out.logits], dim=1).float()
    return torch.log_softmax(real_logits(model, logits), dim=-1)


def forced_all(
    model,
    forked: Forked,
    candidates: Sequence[Sequence[int]],
    pad_id: int,
    counter: ForwardCounter | None = None,
) -> torch.Tensor:
    """[R, c, L, V] log-probs of each of c candidates forced after each of the R prefilled rows
    (`forced_rows`, one forward)."""
    prompts = forked.mask.shape[0]
    rows = [r for _ in candidates for r in range(prompts)]
    targets = [c for c in candidates for _ in range(prompts)]
    logprobs = forced_rows(model, forked, rows, targets, pad_id, counter)
    return logprobs.view(len(candidates), prompts, *logprobs.shape[1:]).transpose(0, 1)


def chunks(count: int, rows: int, batch_rows: int) -> Iterator[range]:
    """Ranges of candidate indices so that rows * len(range) <= batch_rows (at least one)."""
    step = max(1, batch_rows // rows)
    for start in range(0, count, step):
        yield range(start, min(count, start + step))


def forced_loop(
    model, prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]], pad_id: int
) -> list[torch.Tensor]:
    """The per-candidate reference: for each candidate, [R, T, V] log-probs from one full
    forward of every prompt + the candidate."""
    return [forced_logprobs(model, prompts, candidate, pad_id) for candidate in candidates]
