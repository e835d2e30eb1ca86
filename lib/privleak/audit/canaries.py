"""Canaries and neighbouring inputs.

A canary is one document holding a unique secret, a question that targets it, a public answer
prefix forced before the answer, and the other documents that make up the store or context D
without it. Two neighbouring relations:
- add: D = others, D' = others + [canary] (add/remove one document: DP-RAG, bounded CID);
- replace: D = others, D' = others[:-1] + [canary] (a fixed number of retrieved documents: PAD).
The canary always sits last, so D and D' share every token before it and a prefill of that
prefix serves both.

Sources (`audit.<profile>.canaries.source`):
- `synthetic:medical_dirichlet`: the generator's planted rare details (a serial number held by
  exactly one patient's document); D is the canary patient's disease's other documents, then any;
- `file:data/external/canaries/<name>.jsonl`: a user's own canaries, one JSON object per line
  with id, document, secret (a substring of document), question, answer_prefix (may be empty)
  and others (a list of >= 1 documents).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from privleak.data.medical import document_text, medical_dirichlet, rare_detail_question
from privleak.errors import PrivleakError, require

RELATIONS = ("add", "replace")
SOURCES = ("synthetic:medical_dirichlet", "file:")


class Canary(BaseModel):
    """One canary and the documents beside it (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    document: str
    secret: str
    question: str
    answer_prefix: str = ""
    others: tuple[str, ...]

    @field_validator("others")
    @classmethod
    def _some_others(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not text.strip() for text in value):
            raise ValueError("others needs at least one non-empty document")
        return value

    @model_validator(mode="after")
    def _secret_inside(self) -> Canary:
        if not self.secret.strip() or self.secret.strip() not in self.document:
            raise ValueError(f"secret {self.secret!r} is not in the canary's document")
        return self


def neighbours(canary: Canary, relation: str) -> tuple[list[str], list[str]]:
    """(D, D'): the documents without and with the canary, the canary last."""
    require(relation in RELATIONS, f"relation {relation!r} is unknown; allowed: add, replace")
    others = list(canary.others)
    if relation == "add":
        return others, others + [canary.document]
    return others, others[:-1] + [canary.document]


def synthetic_canaries(
    count: int, documents: int, *, n: int, seed: int, options: dict
) -> list[Canary]:
    """The first `count` planted rare details of synthetic:medical_dirichlet(n, seed, **options),
    each with `documents` others: its disease's other documents first, then the rest, in id
    order."""
    require(count >= 1, f"audit canaries.count must be >= 1, got {count}")
    require(documents >= 1, f"audit canaries.documents must be >= 1, got {documents}")
    records, secrets = medical_dirichlet(n, seed, **options)
    planted = [s for s in secrets if s["kind"] == "rare_detail"]
    require(
        len(planted) >= count,
        f"audit canaries.count ({count}) exceeds the {len(planted)} planted rare details "
        "(raise canaries.options.rare_details)",
    )
    require(documents < n, f"audit canaries.documents ({documents}) must be < n ({n})")
    by_id = {r["id"]: r for r in records}
    out = []
    for secret in planted[:count]:
        record = by_id[secret["record_id"]]
        rest = [r for r in records if r["id"] != record["id"]]
        rest.sort(key=lambda r: r["disease"] != record["disease"])  # stable: id order kept
        asked = rare_detail_question(record["patient"], secret["text"])
        out.append(
            Canary(
                id=record["id"],
                document=document_text(record),
                secret=asked["fact"].strip(),
                question=asked["question"],
                answer_prefix=asked["answer_prefix"],
                others=tuple(document_text(r) for r in rest[:documents]),
            )
        )
    return out


def file_canaries(path: Path) -> list[Canary]:
    """A user's canaries from a JSON-lines file (module docstring); one line per bad record."""
    require(path.is_file(), f"audit canaries file {path} does not exist")
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Canary.model_validate(json.loads(line)))
        except json.JSONDecodeError as error:
            raise PrivleakError(f"{path}:{number}: not JSON ({error.msg})") from None
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the record"
            raise PrivleakError(
                f"{path}:{number}: not a canary ({where}: {first['msg']})"
            ) from None
    require(out, f"audit canaries file {path} holds no canary")
    ids = [c.id for c in out]
    require(len(set(ids)) == len(ids), f"audit canaries file {path}: two canaries share an id")
    return out


def load_canaries(source: str, count: int, documents: int, **synthetic) -> list[Canary]:
    """The canaries of one `canaries.source` (module docstring); a file gives all its canaries
    up to `count`."""
    if source == "synthetic:medical_dirichlet":
        return synthetic_canaries(count, documents, **synthetic)
    require(
        source.startswith("file:"),
        f"audit canaries.source {source!r} is unknown; allowed: synthetic:medical_dirichlet, "
        "file:data/external/canaries/<name>.jsonl",
    )
    return file_canaries(Path(source.removeprefix("file:")))[:count]


def texts(canaries: Sequence[Canary]) -> list[dict]:
    """The canaries as plain records (for a JSON-lines artifact)."""
    return [c.model_dump(mode="json") for c in canaries]
