"""Corpus records as JSON lines: reading and writing them, finding a record's missing field,
S1 sequence lists, and taking a param-sized subset. What stages read data/raw/ with."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from privleak.errors import PrivleakError, require
from privleak.pipeline import params as params_module

# What an S1 `sequences: file:` jsonl must hold per row (`duplicates` is optional).
SEQUENCE_FIELDS = ("seq_id", "kind", "prefix", "suffix")


def first_line(error: BaseException) -> str:
    """The first line of an error's message, for one-line errors that wrap it."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_text(path: Path) -> str:
    """The file decoded as UTF-8 (a leading byte-order mark dropped); undecodable bytes are a
    one-line error naming the line and byte offset."""
    raw = path.read_bytes()
    try:
        # utf-8, not utf-8-sig: after a byte-order mark the latter reports shifted offsets.
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise PrivleakError(
            f"'{path}' line {line} (byte offset {error.start}) is not valid UTF-8 "
            f"(byte 0x{raw[error.start]:02x}); allowed: UTF-8 text, so re-save the file as UTF-8"
        ) from None


def _bad_json(path: Path, line: int, reason: str) -> PrivleakError:
    return PrivleakError(
        f"'{path}' line {line} is not valid JSON ({reason}); allowed: a JSON list of objects "
        "or one JSON object per line"
    )


def _as_object(path: Path, where: str, value: Any) -> dict:
    require(
        isinstance(value, dict),
        f"'{path}' {where} is a {type(value).__name__}; each record must be a JSON object",
    )
    return value


def _json_lines(path: Path, text: str) -> list[dict]:
    records = []
    # Split on "\n" only: str.splitlines would also break at U+2028 inside JSON strings.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            _reject_single_object(path, text)
            raise _bad_json(path, number, error.msg) from error
        records.append(_as_object(path, f"line {number}", value))
    return records


def _reject_single_object(path: Path, text: str) -> None:
    # A pretty-printed {"data": [...]} fails as JSON lines at line 1; say what it really is.
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return
    keys = f" with keys {', '.join(whole)}" if isinstance(whole, dict) else ""
    raise PrivleakError(
        f"'{path}' holds one JSON {type(whole).__name__}{keys}, not records; allowed: a JSON "
        "list of objects or one JSON object per line"
    )


def read_jsonl(path: str | Path) -> list[dict]:
    """One JSON object per line; blank lines are skipped."""
    path = Path(path)
    return _json_lines(path, read_text(path))


def read_json(path: Path) -> list[dict]:
    """A JSON list of objects, or else one JSON object per line."""
    text = read_text(path)
    if not text.lstrip().startswith("["):
        return _json_lines(path, text)
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise _bad_json(path, error.lineno, error.msg) from error
    return [_as_object(path, f"item {i}", item) for i, item in enumerate(items)]


def is_empty(value: Any) -> bool:
    """None, a blank string, or an empty list or mapping (0 and False are values)."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, list | dict) and not value)


def first_gap(records: Sequence[dict], required: Sequence[str]) -> tuple[int, str] | None:
    """(index, field) of the first record lacking a required field or holding an empty one."""
    for index, record in enumerate(records):
        for field in required:
            if field not in record or is_empty(record[field]):
                return index, field
    return None


def gap_message(
    where: str, records: Sequence[dict], gap: tuple[int, str], needed: Sequence[str]
) -> str:
    index, field = gap
    record = records[index]
    name = f" (id '{record['id']}')" if not is_empty(record.get("id")) else ""
    problem = "has no field" if field not in record else "has an empty field"
    return (
        f"{where}: record {index}{name} {problem} '{field}'; needed: {', '.join(needed)}; "
        f"available fields: {', '.join(record) or 'none'}"
    )


def read_sequences(source: str) -> list[dict]:
    """The rows of an S1 `sequences: file:<jsonl>` source, each holding SEQUENCE_FIELDS."""
    require(
        source.startswith("file:"),
        f"S1 sequences '{source}' is not supported; allowed: planted or file:<jsonl>",
    )
    path = Path(source.removeprefix("file:"))
    require(path.is_file(), f"S1 sequences file '{path}' does not exist")
    rows = read_jsonl(path)
    require(bool(rows), f"S1 sequences file '{path}' has no rows; it must hold at least one")
    gap = first_gap(rows, SEQUENCE_FIELDS)
    if gap is not None:
        raise PrivleakError(gap_message(f"S1 sequences file '{path}'", rows, gap, SEQUENCE_FIELDS))
    return rows


def take(records: Sequence, n: Any, *, key: str, corpus: str, minimum: int = 1) -> list:
    """The first n records, where n is the stage param `key` (written without the profile, e.g.
    "s0.n_examples"): an integer from `minimum` to len(records), else a one-line error naming
    the param, so a count never silently shrinks to what the corpus holds."""
    shown = params_module.profile_key(key)
    require(
        isinstance(n, int) and not isinstance(n, bool) and n >= minimum,
        f"params {shown} = {n!r}: must be an integer >= {minimum}",
    )
    require(
        n <= len(records),
        f"params {shown} = {n}: corpus '{corpus}' has only {len(records)} records; allowed: "
        f"{minimum} to {len(records)} (or give the corpus more records)",
    )
    return list(records[:n])


def write_jsonl(records: Iterable[dict], path: str | Path) -> Path:
    """Write records as sorted-key JSON lines: same records, same bytes. A temporary file is
    renamed into place, so a crash never leaves a partial file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8", newline="\n") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
