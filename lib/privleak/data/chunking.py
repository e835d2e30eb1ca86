"""Retrieval units: documents cut at word boundaries into chunks, planted secrets moved along."""

from __future__ import annotations

import re
from collections.abc import Sequence

from privleak.errors import require


def chunk_spans(text: str, max_words: int) -> list[tuple[int, int]]:
    """(start, end) character spans of consecutive runs of at most max_words whitespace-separated
    words of text, from the first word's start to each run's last word's end."""
    require(max_words >= 1, f"chunk_words must be >= 1, got {max_words}")
    words = [match.span() for match in re.finditer(r"\S+", text)]
    return [
        (words[i][0], words[min(i + max_words, len(words)) - 1][1])
        for i in range(0, len(words), max_words)
    ]


def chunk_records(
    records: Sequence[dict], secrets: Sequence[dict], max_words: int
) -> tuple[list[dict], list[dict]]:
    """(chunks, secrets): each record's "text" cut by `chunk_spans` into retrieval units {id,
    record_id, text, other fields of the record}; a record of one chunk keeps its id, others get
    "<id>#<i>". Secret rows (privleak.data.synthetic's, field "text") move to the chunk that holds
    them whole, with chunk_id and start/end inside it; a secret cut by a boundary is dropped.
    A record without an id is numbered by its position."""
    chunks, moved = [], []
    by_record: dict[str, list[dict]] = {}
    for secret in secrets:
        if secret.get("field", "text") == "text":
            by_record.setdefault(str(secret["record_id"]), []).append(secret)
    for index, record in enumerate(records):
        record_id = record.get("id", index)
        text = record["text"]
        spans = chunk_spans(text, max_words)
        extra = {k: v for k, v in record.items() if k not in ("id", "text")}
        for i, (start, end) in enumerate(spans):
            chunk_id = str(record_id) if len(spans) == 1 else f"{record_id}#{i}"
            chunks.append({"id": chunk_id, "record_id": str(record_id),
                           "text": text[start:end], **extra})  # fmt: skip
            for secret in by_record.get(str(record_id), []):
                if start <= secret["start"] and secret["end"] <= end:
                    moved.append({**secret, "chunk_id": chunk_id,
                                  "start": secret["start"] - start,
                                  "end": secret["end"] - start})  # fmt: skip
    return chunks, moved
