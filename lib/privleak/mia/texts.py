"""The texts a membership attack is scored on, with their ground truth.

One row per text {text_id, kind, duplicates, is_member, text}: `duplicates` is how many times a
member was planted (0 for a non-member, and for a member whose file gives no count); `kind` is the
generator's sequence kind, or "text" for a file's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from privleak.data.records import first_gap, gap_message, read_jsonl
from privleak.errors import PrivleakError, require

FILE_FIELDS = ("id", "text")
COLUMNS = ["text_id", "kind", "duplicates", "is_member", "text"]


def from_sequences(members: Sequence[dict], non_members: Sequence[dict]) -> pd.DataFrame:
    """Planted sequences (privleak.metrics.sequence.planted_sequences rows) and held-out ones
    (privleak.data.pretrain.held_out_sequences rows); each text is prefix + suffix."""
    rows = [
        {"text_id": s["seq_id"], "kind": s["kind"], "duplicates": int(s.get("duplicates", 0)),
         "is_member": is_member, "text": s["prefix"] + s["suffix"]}
        for group, is_member in ((members, True), (non_members, False)) for s in group
    ]  # fmt: skip
    return _checked(pd.DataFrame(rows, columns=COLUMNS), "the planted and held-out sequences")


def _read(source: str, what: str) -> list[dict]:
    path = Path(source.removeprefix("file:"))
    require(path.is_file(), f"mia {what} file '{path}' does not exist")
    rows = read_jsonl(path)
    require(bool(rows), f"mia {what} file '{path}' has no rows; it must hold at least one")
    gap = first_gap(rows, FILE_FIELDS)
    if gap is not None:
        raise PrivleakError(gap_message(f"mia {what} file '{path}'", rows, gap, FILE_FIELDS))
    return rows


def from_files(members: str, non_members: str, count: int | None) -> pd.DataFrame:
    """Rows {id, text[, duplicates]} of the two `file:` sources; the first `count` non-members
    (None: all)."""
    inside, outside = _read(members, "members"), _read(non_members, "non_members")
    if count is not None:
        require(count <= len(outside), f"mia non_members.count {count}: the file '{non_members}' "
                f"holds only {len(outside)} rows")  # fmt: skip
        outside = outside[:count]
    rows = [
        {"text_id": str(r["id"]), "kind": "text", "duplicates": int(r.get("duplicates") or 0),
         "is_member": is_member, "text": str(r["text"])}
        for group, is_member in ((inside, True), (outside, False)) for r in group
    ]  # fmt: skip
    return _checked(pd.DataFrame(rows, columns=COLUMNS), f"{members} and {non_members}")


def _checked(texts: pd.DataFrame, where: str) -> pd.DataFrame:
    repeated = texts["text_id"][texts["text_id"].duplicated()]
    require(repeated.empty, f"mia texts: id '{repeated.iloc[0] if len(repeated) else ''}' is "
            f"used twice in {where}; ids must be unique over members and non-members")  # fmt: skip
    require(bool(texts["is_member"].any()) and bool((~texts["is_member"]).any()),
            f"mia texts: {where} need at least one member and one non-member")  # fmt: skip
    return texts


def first_token(tokenizer) -> int | None:
    """x_0, the unscored token a text is scored after: the one that precedes a document in
    training. BOS where the tokenizer adds it on encode; else EOS, the document separator (the
    family packs its documents with EOS between them, GPT-NeoX models theirs with
    <|endoftext|>); None without either, and the text's own first token goes unscored."""
    probe = tokenizer("a")["input_ids"]
    if tokenizer.bos_token_id is not None and probe[:1] == [tokenizer.bos_token_id]:
        return tokenizer.bos_token_id
    return tokenizer.eos_token_id


def token_ids(tokenizer, texts: Iterable[str]) -> list[list[int]]:
    """Each text's ids after x_0 (`first_token`); without one, the text's own first token is x_0."""
    head = [] if (start := first_token(tokenizer)) is None else [start]
    out = [head + tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    short = next((i for i, ids in enumerate(out) if len(ids) < 2), None)
    require(short is None, f"mia text {short} has no token to score")
    return out
