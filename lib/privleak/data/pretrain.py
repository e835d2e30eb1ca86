"""synthetic:pretrain, a pretraining corpus of filler-prose documents with planted sequences
(a named entity or a long suffix after a prefix), each inserted a chosen number of times."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from functools import partial

from faker import Faker

from privleak.data.templating import (
    Piece,
    check_int,
    join,
    prose_words,
    secret_rows,
    seeded,
    templates,
    with_duplicates,
)
from privleak.errors import PrivleakError, require

# The words right before a planted entity, by entity type.
_LEAD_INS: dict[str, list[str]] = templates("pretrain")["lead_ins"]


def _unique(draw: Callable[[], tuple[str, str]], seen: set[str], option: str) -> tuple[str, str]:
    """Redraw (prefix, secret) until the secret is new, so distinct sequences never coincide."""
    for _ in range(1000):
        prefix, secret = draw()
        if secret not in seen:
            seen.add(secret)
            return prefix, secret
    raise PrivleakError(f"synthetic:pretrain could not draw distinct secrets; raise {option}")


def _entity_sequence(
    fake: Faker, rng: random.Random, entity: str, prefix_words: int
) -> tuple[str, str]:
    """(prefix, entity): prose ending in a lead-in such as 'write to', then a fresh entity."""
    secret = {
        "name": lambda: f"{fake.first_name()} {fake.last_name()}",
        "email": fake.email,
        "phone": fake.phone_number,
    }[entity]()
    lead = rng.choice(_LEAD_INS[entity]).split()
    words = (prose_words(rng, max(0, prefix_words - len(lead))) + lead)[-prefix_words:]
    words[0] = words[0][0].upper() + words[0][1:]
    return " ".join(words) + " ", secret


def _long_sequence(rng: random.Random, prefix_words: int, suffix_words: int) -> tuple[str, str]:
    """(prefix, suffix): one run of prose cut into a prefix and the suffix to be recalled."""
    words = prose_words(rng, prefix_words + suffix_words)
    return " ".join(words[:prefix_words]) + " ", " ".join(words[prefix_words:])


def _pick_docs(rng: random.Random, n_docs: int, count: int) -> list[int]:
    """count document indices, all distinct while count <= n_docs, then cycling again."""
    picks: list[int] = []
    while len(picks) < count:
        picks += rng.sample(range(n_docs), min(n_docs, count - len(picks)))
    return picks


def pretrain(
    n: int,
    seed: int,
    *,
    doc_words: int = 200,
    duplication_counts: list[int] | tuple[int, ...] = (1, 2, 4, 8, 16, 32),
    sequences_per_count: int = 4,
    ne_prefix_words: int = 40,
    long_prefix_words: int = 40,
    long_suffix_words: int = 40,
) -> tuple[list[dict], list[dict]]:
    """A pretraining corpus of n documents {id, text}: doc_words words of filler prose each,
    plus planted sequences. For every count in duplication_counts, sequences_per_count
    "named_entity" sequences (prefix then a person name, email or phone number: the secret)
    and as many "long_sequence" ones (prefix then a suffix: the secret) are each inserted
    verbatim `count` times at sentence boundaries of distinct random documents (reusing
    documents only when count > n). Secret rows also carry seq_id and prefix."""
    check_int("pretrain", "n", n, 1)
    for name, value, minimum in [
        ("doc_words", doc_words, 0),
        ("sequences_per_count", sequences_per_count, 1),
        ("ne_prefix_words", ne_prefix_words, 1),
        ("long_prefix_words", long_prefix_words, 1),
        ("long_suffix_words", long_suffix_words, 1),
    ]:
        check_int("pretrain", name, value, minimum)
    counts_ok = isinstance(duplication_counts, list | tuple) and bool(duplication_counts)
    require(
        counts_ok
        and all(isinstance(c, int) and not isinstance(c, bool) for c in duplication_counts)
        and min(duplication_counts) >= 1,
        "synthetic:pretrain duplication_counts must be a non-empty list of integers >= 1; "
        f"got {duplication_counts!r}",
    )
    fake, rng = seeded("pretrain", seed)
    docs: list[list[Piece]] = []
    for _ in range(n):
        words = prose_words(rng, doc_words)
        sentences, current = [], []
        for word in words:
            current.append(word)
            if word.endswith("."):
                sentences.append((" ".join(current), []))
                current = []
        docs.append(sentences)
    seen: set[str] = set()
    number = 0
    for count in duplication_counts:
        for j in range(sequences_per_count):
            entity = ("name", "email", "phone")[j % 3]
            named = partial(_entity_sequence, fake, rng, entity, ne_prefix_words)
            long = partial(_long_sequence, rng, long_prefix_words, long_suffix_words)
            planted = [
                ("named_entity", _unique(named, seen, "sequences_per_count"), "."),
                ("long_sequence", _unique(long, seen, "long_suffix_words"), ""),
            ]
            for kind, (prefix, secret), tail in planted:
                seq_id = f"seq-{number:04d}"
                number += 1
                span = {
                    "start": len(prefix),
                    "end": len(prefix) + len(secret),
                    "kind": kind,
                    "text": secret,
                    "seq_id": seq_id,
                    "prefix": prefix,
                }
                for doc in _pick_docs(rng, n, count):
                    # Inserting whole sentence units keeps every span's offsets local and exact.
                    docs[doc].insert(
                        rng.randint(0, len(docs[doc])), (prefix + secret + tail, [span])
                    )
    records: list[dict] = []
    rows: list[dict] = []
    for index, units in enumerate(docs):
        text, spans = join(units, " ")
        record_id = f"pretrain-{index:06d}"
        records.append({"id": record_id, "text": text})
        rows += secret_rows(record_id, "text", spans)
    return records, with_duplicates(rows)


def held_out_sequences(
    seed: int,
    count: int,
    *,
    exclude: Iterable[str] = (),
    ne_prefix_words: int = 40,
    long_prefix_words: int = 40,
    long_suffix_words: int = 40,
) -> list[dict]:
    """`count` sequences drawn as `pretrain` draws its planted ones, and planted nowhere: for
    j = 0, 1, ... a named entity (name, email, phone in turn) then a long sequence, until `count`
    rows. Rows {seq_id "held-NNNN", kind, prefix, suffix}, the suffix of a named entity ending in
    the "." every planted one carries. Their own random stream (generator "pretrain-held-out"),
    and no secret equals one in `exclude` (the planted secrets) or another held-out one."""
    check_int("pretrain-held-out", "count", count, 1)
    for name, value in [
        ("ne_prefix_words", ne_prefix_words),
        ("long_prefix_words", long_prefix_words),
        ("long_suffix_words", long_suffix_words),
    ]:
        check_int("pretrain-held-out", name, value, 1)
    fake, rng = seeded("pretrain-held-out", seed)
    seen = set(exclude)
    rows: list[dict] = []
    for j in range(count):
        if j % 2 == 0:
            entity = ("name", "email", "phone")[(j // 2) % 3]
            draw = partial(_entity_sequence, fake, rng, entity, ne_prefix_words)
            kind, tail = "named_entity", "."
        else:
            draw = partial(_long_sequence, rng, long_prefix_words, long_suffix_words)
            kind, tail = "long_sequence", ""
        prefix, secret = _unique(draw, seen, "count")
        rows.append(
            {"seq_id": f"held-{j:04d}", "kind": kind, "prefix": prefix, "suffix": secret + tail}
        )
    return rows
