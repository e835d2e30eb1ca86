"""Corpus sources into data/raw/: load_corpus and materialize read a data slot's source.

Corpus sources:
    synthetic:<generator>          one of privleak.data.synthetic.GENERATORS; needs n
    hf:<dataset>[:config][:split]  datasets.load_dataset, or load_from_disk for a local folder;
                                   a data slot's `revision` pins the hub commit or tag
    file:<path>                    .json, .jsonl, .csv or .parquet (UTF-8), relative to the cwd

Stages read a slot's records by canonical field names; REQUIRED_FIELDS lists what each slot must
hold, and materialize checks it, so a missing field fails in prepare_data and not in a later stage.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privleak.data.records import (
    first_gap,
    first_line,
    gap_message,
    is_empty,
    read_json,
    read_jsonl,
    read_text,
    write_jsonl,
)
from privleak.data.synthetic import generate
from privleak.errors import PrivleakError, require
from privleak.pipeline import params as params_module

SCHEMES = ("synthetic", "hf", "file")
FILE_TYPES = (".csv", ".json", ".jsonl", ".parquet")
SPEC_KEYS = ("source", "n", "fields", "options", "revision")
# Canonical fields each consuming stage reads, per data slot (privleak.cid.TASKS for S0 and
# context_gain; train_family for pretrain). A slot not listed needs only non-empty records.
REQUIRED_FIELDS = {
    "cnn_dm": ("id", "article", "highlights"),
    "pubmedqa": ("id", "question", "context", "long_answer"),
    "pretrain": ("text",),
}
SOURCES_FILE = "sources.json"

# A colon outside square brackets separates hf: parts; "train[:100]" keeps its own colon.
_HF_PART_SEP = re.compile(r":(?![^\[]*\])")
_SPLIT = re.compile(r"([\w.-]+)(?:\[(-?\d*):(-?\d*)\])?")
_SPLIT_NAMES = ("train", "test", "validation", "valid", "dev", "all")


def _read_csv(path: Path) -> list[dict]:
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    records = []
    for row in reader:
        require(
            None not in row,
            f"'{path}' line {reader.line_num} has more values than the header has columns",
        )
        records.append(row)
    return records


def _read_parquet(path: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except pa.ArrowInvalid as error:
        raise PrivleakError(
            f"'{path}' is not a readable parquet file ({first_line(error)})"
        ) from error


_READERS = {".csv": _read_csv, ".json": read_json, ".jsonl": read_jsonl, ".parquet": _read_parquet}


def _read_file(path: Path) -> list[dict]:
    require(
        path.is_file(),
        f"corpus file '{path}' does not exist; give a file path (relative paths start at the cwd)",
    )
    suffix = path.suffix.lower()
    require(
        suffix in _READERS,
        f"corpus file '{path}' has unsupported type '{suffix}'; allowed: {', '.join(FILE_TYPES)}",
    )
    # A 0-byte file has no records; parquet would otherwise fail with a confusing error.
    return _READERS[suffix](path) if path.stat().st_size else []


def _parse_split(split: str, where: str) -> tuple[str, slice | None]:
    match = _SPLIT.fullmatch(split)
    require(
        match is not None,
        f"split '{split}' of '{where}' is not supported; allowed: NAME or NAME[start:end] "
        "with integer bounds, e.g. train[:1000]",
    )
    name, start, stop = match.groups()
    if "[" not in split:
        return name, None
    return name, slice(int(start) if start else None, int(stop) if stop else None)


def _pick_split(splits: Any, name: str | None, where: str) -> Any:
    """The named split of a DatasetDict; without a name, its only split, else "train"."""
    available = list(splits)
    if name is None:
        name = available[0] if len(available) == 1 else "train"
    require(
        name in splits,
        f"split '{name}' is not in '{where}'; available splits: {', '.join(available)}",
    )
    return splits[name]


def _from_disk(folder: str, split: str | None) -> Any:
    """A folder written by save_to_disk. A single saved Dataset ignores the split's name and
    only applies its [start:end] slice."""
    from datasets import DatasetDict, load_from_disk

    try:
        saved = load_from_disk(folder)
    except FileNotFoundError as error:
        raise PrivleakError(
            f"'{folder}' is not a dataset folder written by save_to_disk ({first_line(error)})"
        ) from error
    name, rows = _parse_split(split, folder) if split else (None, None)
    if isinstance(saved, DatasetDict):
        saved = _pick_split(saved, name, folder)
    return saved.select(range(len(saved))[rows]) if rows else saved


def _from_hub(name: str, rest: list[str], revision: str | None) -> Any:
    """load_dataset(name, config, split[, revision]); a lone second part that looks like a split
    is one."""
    from datasets import load_dataset

    if len(rest) == 2:
        config, split = rest
    elif rest and ("[" in rest[0] or rest[0] in _SPLIT_NAMES):
        config, split = None, rest[0]
    else:
        config, split = (rest[0] if rest else None), None
    pin = {"revision": revision} if revision else {}
    try:
        loaded = load_dataset(name, config, split=split, **pin)
    except Exception as error:  # hub, network and builder errors come in many types
        raise PrivleakError(
            f"hf dataset '{name}' could not be loaded: {first_line(error)}"
        ) from error
    return loaded if split else _pick_split(loaded, None, name)


def _read_hf(spec: str, n: int | None, revision: str | None) -> list[dict]:
    parts = _HF_PART_SEP.split(spec)
    require(
        bool(parts[0]) and len(parts) <= 3,
        f"source 'hf:{spec}' is malformed; allowed: hf:<dataset>[:config][:split]",
    )
    if Path(parts[0]).is_dir():
        require(
            len(parts) <= 2,
            f"source 'hf:{spec}' is a local folder, which has no configs; allowed: "
            "hf:<folder>[:split]",
        )
        require(
            revision is None,
            f"source 'hf:{spec}' is a local folder, which has no revisions; revision applies "
            "to hub datasets only",
        )
        dataset = _from_disk(parts[0], parts[1] if len(parts) == 2 else None)
    else:
        dataset = _from_hub(parts[0], parts[1:], revision)
    # Select before converting, so only the kept rows become Python objects.
    return dataset.select(range(min(n, len(dataset)))).to_list() if n else dataset.to_list()


def _map_fields(records: list[dict], fields: dict[str, str], source: str) -> list[dict]:
    """Rename source columns to canonical names; other columns stay as they are."""
    for index, record in enumerate(records):
        for canonical, column in fields.items():
            require(
                column in record,
                f"field '{canonical}' maps to column '{column}', which record {index} of "
                f"'{source}' lacks; available columns: {', '.join(record)}",
            )
    columns = set(fields.values())
    return [
        {**{k: v for k, v in r.items() if k not in columns}, **{c: r[s] for c, s in fields.items()}}
        for r in records
    ]


def _check_records(records: list[dict], source: str) -> None:
    require(bool(records), f"corpus '{source}' has no records; it must hold at least one")
    for index, record in enumerate(records):
        require(
            not all(is_empty(value) for value in record.values()),
            f"record {index} of corpus '{source}' is empty; every record needs a field with a "
            "value",
        )


def _load(
    source: str,
    fields: dict[str, str] | None,
    n: int | None,
    seed: int,
    options: dict | None,
    revision: str | None = None,
) -> tuple[list[dict], list[dict] | None]:
    """Records, and for synthetic sources the secret rows (else None)."""
    scheme, colon, rest = source.partition(":")
    require(
        bool(colon) and scheme in SCHEMES,
        f"corpus source '{source}' has an unknown scheme; allowed: synthetic:, hf:, file:",
    )
    ok = n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 1)
    require(ok, f"n must be an integer >= 1 (or omitted for all records); got {n!r}")
    require(
        fields is None
        or (isinstance(fields, dict) and all(isinstance(v, str) for v in fields.values())),
        f"fields must map canonical names to column names, e.g. {{'text': 'body'}}; got {fields!r}",
    )
    require(
        not options or scheme == "synthetic",
        f"options apply only to synthetic: sources, not to '{source}'",
    )
    require(
        revision is None or scheme == "hf",
        f"revision applies only to hf: sources (a hub commit, tag or branch), not to '{source}'",
    )
    require(
        revision is None or (isinstance(revision, str) and bool(revision.strip())),
        f"revision must be a hub commit hash, tag or branch name; got {revision!r}",
    )
    secrets = None
    if scheme == "synthetic":
        require(n is not None, f"source '{source}' needs n, the number of records to generate")
        records, secrets = generate(rest, n, seed, options)
    elif scheme == "hf":
        records = _read_hf(rest, n, revision)
    else:
        records = _read_file(Path(rest))[:n]
    _check_records(records, source)
    if not fields:
        return _string_ids(records, source), secrets
    if secrets is not None:
        renamed = {column: canonical for canonical, column in fields.items()}
        secrets = [{**s, "field": renamed.get(s["field"], s["field"])} for s in secrets]
    return _string_ids(_map_fields(records, fields, source), source), secrets


def _string_ids(records: list[dict], source: str) -> list[dict]:
    """Records with string ids (stages tabulate ids of several corpora in one column: PubMedQA's
    pubid is an int, CNN-DM's id a string); PrivleakError naming both records when two share
    an id, since stages key documents, and privacy units, by it."""
    records = [{**r, "id": str(r["id"])} if "id" in r else r for r in records]
    first: dict[str, int] = {}
    for index, record in enumerate(records):
        if "id" not in record:
            continue
        earlier = first.setdefault(record["id"], index)
        require(
            earlier == index,
            f"records {earlier} and {index} of corpus '{source}' share id '{record['id']}'; "
            "every record needs its own id (stages key documents and privacy units by it)",
        )
    return records


def load_corpus(
    source: str,
    *,
    fields: dict[str, str] | None = None,
    n: int | None = None,
    seed: int = 0,
    options: dict | None = None,
    revision: str | None = None,
) -> list[dict]:
    """The first n records of source (see the module docstring), with fields mapping canonical
    names to source columns, e.g. {"text": "body"}. seed and options apply to synthetic: only,
    revision (a hub commit, tag or branch) to hf: hub datasets only."""
    return _load(source, fields, n, seed, options, revision)[0]


def check_slot_fields(slot: str, records: Sequence[dict], spec: dict) -> None:
    """Raise naming slot, record and field when a record lacks a field REQUIRED_FIELDS[slot]
    lists (or holds an empty one), with the fields mapping that would fix it."""
    needed = REQUIRED_FIELDS.get(slot, ())
    gap = first_gap(records, needed)
    if gap is None:
        return
    key = params_module.profile_key(f"data.{slot}.fields")
    fields = spec.get("fields")
    fix = (
        f"{key} maps {fields}; map a source column to '{gap[1]}' there"
        if fields
        else f"map a source column to it with {key}, e.g. {{{gap[1]}: <column>}}"
    )
    where = f"data slot '{slot}' (source '{spec['source']}')"
    raise PrivleakError(f"{gap_message(where, records, gap, needed)}; {fix}")


def materialize(slot: str, spec: dict, out_dir: Path, seed: int) -> Path:
    """Load the corpus spec describes ({source, n, fields, options, revision}) into
    out_dir/<slot>.jsonl, plus out_dir/<slot>.secrets.jsonl for synthetic sources, after checking
    the slot's REQUIRED_FIELDS. Returns the records path."""
    require(isinstance(spec, dict), f"data slot '{slot}' must be a mapping; got {spec!r}")
    unknown = [key for key in spec if key not in SPEC_KEYS]
    if unknown:
        raise PrivleakError(
            f"data slot '{slot}' has unknown key '{unknown[0]}'; allowed: {', '.join(SPEC_KEYS)}"
        )
    require(
        "source" in spec,
        f"data slot '{slot}' needs a 'source'; allowed keys: {', '.join(SPEC_KEYS)}",
    )
    records, secrets = _load(
        spec["source"],
        spec.get("fields"),
        spec.get("n"),
        seed,
        spec.get("options"),
        spec.get("revision"),
    )
    check_slot_fields(slot, records, spec)
    out_dir = Path(out_dir)
    records_path = write_jsonl(records, out_dir / f"{slot}.jsonl")
    secrets_path = out_dir / f"{slot}.secrets.jsonl"
    if secrets is None:
        # A stale ground truth from an earlier synthetic run must never pair with a real corpus.
        secrets_path.unlink(missing_ok=True)
    else:
        write_jsonl(secrets, secrets_path)
    return records_path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def materialize_all(data: dict, out_dir: Path, seed: int) -> dict[str, dict]:
    """materialize every slot of `data` ({slot: spec}) into out_dir and write
    out_dir/sources.json: per slot {source, revision, records, sha256 of <slot>.jsonl}, so a
    rerun that fetched different hub data shows in `dvc diff` and in that readable file."""
    require(isinstance(data, dict) and bool(data), f"data must map slots to specs; got {data!r}")
    sources = {}
    for slot, spec in data.items():
        path = materialize(slot, spec, out_dir, seed)
        with path.open("rb") as handle:
            count = sum(1 for _ in handle)
        sources[slot] = {
            "source": spec["source"],
            "revision": spec.get("revision"),
            "records": count,
            "sha256": _sha256(path),
        }
    target = Path(out_dir) / SOURCES_FILE
    target.write_text(json.dumps(sources, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return sources
