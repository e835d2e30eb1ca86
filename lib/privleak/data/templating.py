"""What every synthetic generator builds on: templates whose secret slots become ground-truth
spans, filler prose, seeded randomness, and the secret rows a generator returns.

A Piece is a text with the secrets planted in it: (text, [span]), each span
{"start", "end", "kind", "text"} with text[start:end] == span["text"]. fill makes a Piece from a
template, join concatenates Pieces and shifts their spans, so offsets stay exact however a
document is assembled. The template texts and word pools live in the package data files
templates/<name>.yaml, read by templates.
"""

from __future__ import annotations

import functools
import importlib.resources
import random
import string
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import yaml
from faker import Faker

from privleak.errors import require

Span = dict[str, Any]
Piece = tuple[str, list[Span]]  # a text and the secrets planted in it, offsets into that text

# Template slots whose values are planted secrets, and the kind their ground-truth row gets.
SECRET_SLOTS = {
    "name": "name",
    "spokesperson": "name",
    "patient": "name",
    "clinician": "name",
    "email": "email",
    "phone": "phone",
    "address": "address",
    "mrn": "id",
}
_FORMATTER = string.Formatter()


@functools.cache
def templates(name: str) -> dict:
    """The templates and word pools in the package data file templates/<name>.yaml."""
    path = importlib.resources.files("privleak.data") / "templates" / f"{name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def named_pools(pools: dict[str, list[str] | str], generated: dict[str, list[str]]) -> dict:
    """A template file's pools, where a pool given as a name is generated[name]: lists built
    from numbers (dates, amounts, seats) stay in code."""
    return {slot: generated[p] if isinstance(p, str) else p for slot, p in pools.items()}


# Word pools for filler prose and for the slots several generators share; a template slot named
# like a key draws from that pool. Each generator adds its own pools to these.
POOLS: dict[str, list[str]] = templates("prose")["pools"]
# Filler prose templates; every slot draws from POOLS.
PROSE: list[str] = templates("prose")["prose"]


def _slots(template: str) -> list[str]:
    return [slot for _, slot, _, _ in _FORMATTER.parse(template) if slot]


def fill(template: str, values: dict[str, str]) -> Piece:
    """Fill a template's {slots}; values of SECRET_SLOTS become spans in the filled text."""
    parts: list[str] = []
    spans: list[Span] = []
    length = 0
    for literal, slot, _, _ in _FORMATTER.parse(template):
        parts.append(literal)
        length += len(literal)
        if not slot:
            continue
        value = values[slot]
        if slot in SECRET_SLOTS:
            kind = SECRET_SLOTS[slot]
            spans.append({"start": length, "end": length + len(value), "kind": kind, "text": value})
        parts.append(value)
        length += len(value)
    return "".join(parts), spans


def join(pieces: Iterable[Piece], sep: str) -> Piece:
    """Concatenate pieces with sep, shifting each span by where its piece lands."""
    texts: list[str] = []
    spans: list[Span] = []
    offset = 0
    for index, (text, piece_spans) in enumerate(pieces):
        offset += len(sep) if index else 0
        spans += [
            {**s, "start": s["start"] + offset, "end": s["end"] + offset} for s in piece_spans
        ]
        texts.append(text)
        offset += len(text)
    return sep.join(texts), spans


def word_count(pieces: Iterable[Piece]) -> int:
    # Pieces are joined by whitespace, so their word counts add up.
    return sum(len(text.split()) for text, _ in pieces)


def deck(rng: random.Random, templates: list[str]) -> Iterator[str]:
    """Templates in shuffled rounds: a text repeats a template only after using all of them."""
    while True:
        yield from rng.sample(templates, len(templates))


def sentence(
    rng: random.Random, template: str, facts: dict[str, str], pools: dict[str, list[str]]
) -> Piece:
    """Fill template; slots not given in facts draw from pools."""
    values = {s: facts[s] if s in facts else rng.choice(pools[s]) for s in _slots(template)}
    return fill(template, values)


def prose_words(rng: random.Random, count: int) -> list[str]:
    """Exactly count words of filler prose, ending on a full stop."""
    words: list[str] = []
    templates = deck(rng, PROSE)
    while len(words) < count:
        words += sentence(rng, next(templates), {}, POOLS)[0].split()
    words = words[:count]
    if words and not words[-1].endswith("."):
        words[-1] = words[-1].rstrip(",;") + "."
    return words


def seeded(generator: str, seed: int) -> tuple[Faker, random.Random]:
    """A local Faker and a local Random, never the shared global state. The generator's name
    is part of the seed, so corpora of different generators never share planted names."""
    fake = Faker("en_US")
    fake.seed_instance(f"{generator}:{seed}")
    return fake, random.Random(f"{generator}:{seed}")


def check_int(generator: str, name: str, value: Any, minimum: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    require(ok, f"synthetic:{generator} {name} must be an integer >= {minimum}; got {value!r}")


def secret_rows(record_id: str, field: str, spans: list[Span]) -> list[dict]:
    return [{"record_id": record_id, "field": field, **span} for span in spans]


def with_duplicates(rows: list[dict]) -> list[dict]:
    """Add to each row how many times its exact secret text was planted corpus-wide."""
    counts = Counter(row["text"] for row in rows)
    return [{**row, "duplicates": counts[row["text"]]} for row in rows]


def person(fake: Faker, rng: random.Random) -> tuple[str, str, bool]:
    male = rng.random() < 0.5
    first = fake.first_name_male() if male else fake.first_name_female()
    return first, fake.last_name(), male
