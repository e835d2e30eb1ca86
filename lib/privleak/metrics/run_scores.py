"""S1's scores of one retrained family member as a job for `privleak.pipeline.workers`: the
member is loaded where the job runs, so several members score at once, one process each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from privleak import models as registry
from privleak.metrics.sequence import decoder_table, prefix_length_rows
from privleak.training.family import check_family


def score_member(
    job: Mapping,
    *,
    sequences: Sequence[Mapping],
    prefix_lengths: Sequence[int],
    decoders: Sequence[Mapping],
    tp_prefix_len: int,
    batch_size: int,
    corpus: str | Path,
    device: str,
    dtype: str,
) -> tuple[list[dict], list[dict]]:
    """(esp_rows, tp_rows) of `prefix_length_rows` on job {run, rank, member: the member's
    folder}, after checking that its tokenizer is its family's; every row carries run, model
    (the folder's name), model_rank and parameters."""
    member = Path(job["member"])
    model, tokenizer = registry.load(str(member), device=device, dtype=dtype)
    check_family(member.parent, corpus, tokenizer)
    return prefix_length_rows(
        model,
        sequences,
        prefix_lengths,
        decoder_table(decoders),
        model_fields={
            "run": job["run"],
            "model": member.name,
            "model_rank": job["rank"],
            "parameters": sum(p.numel() for p in model.parameters()),
        },
        tp_prefix_len=tp_prefix_len,
        batch_size=batch_size,
        pad_id=tokenizer.pad_token_id,
    )
