"""Private RAG corpora for S2 (Wang et al.), in the styles of the corpora Zeng et al. (2024) attack:
synthetic:healthcaremagic and synthetic:icliniq (doctor-patient dialogues) and synthetic:enron
(business emails). Records are {id, text, topic}; the topic (the patient's condition, the email's
subject keyword) is what a targeted attack prompt asks about.

Planted in every record: names, an email address and a phone number, plus the diagnosis (health
styles) or a deal/project codename (enron). Every occurrence of a planted value is a secret row.

No two documents of one corpus share a run of DISTINCT_RUN words (lower-cased `\\w+` tokens, as
the Repeat metric counts them): a leaked run that long points at exactly one document. A document
that would share one is drawn again: at n = 10,000 a healthcaremagic dialogue takes about three
draws (20 s on one core), fewer for the other styles and for smaller corpora.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from faker import Faker

from privleak.data.templating import (
    Piece,
    check_int,
    deck,
    join,
    named_pools,
    person,
    secret_rows,
    seeded,
    sentence,
    templates,
    with_duplicates,
    word_count,
)
from privleak.errors import require

DISTINCT_RUN = 20
_REDRAWS = 100  # far more than corpora of tens of thousands need

# Slots planted on top of templating.SECRET_SLOTS (patient, clinician, name, email, phone).
_PLANTED = {
    "diagnosis": "diagnosis",
    "project": "project",
    "sender": "name",
    "recipient": "name",
    "sender_email": "email",
    "recipient_email": "email",
}
_PLANTED_SLOT = re.compile(r"\{(" + "|".join(_PLANTED) + r")\}")
_WORD = re.compile(r"\w+")
_EPOCH = datetime(1999, 1, 1)
# Mail-header names spelled out, so the Date line does not depend on the locale.
_DAYS = "Mon|Tue|Wed|Thu|Fri|Sat|Sun".split("|")
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec".split("|")

_TEMPLATES = templates("rag_private")
# name|body area|specialist|symptoms|tests|treatments (lists split on ';'); the name is the topic.
_CONDITIONS: list[str] = _TEMPLATES["conditions"]

_COUNTS = [str(k) for k in range(2, 13)]
_MONTH_NAMES: list[str] = _TEMPLATES["month_names"]
# The pools a template file names instead of listing: numbers and dates built by rule.
_GENERATED = {
    # Numbers give every sentence enough variety that documents rarely share a long run.
    "durations": [f"for {k} {unit}" for k in range(2, 21) for unit in ("days", "weeks", "months")],
    "times_ago": [f"{k} {unit} ago" for k in range(2, 13) for unit in ("days", "weeks", "months")],
    "counts": _COUNTS,
    "clock_times": [f"{h} {half}" for h in range(1, 13) for half in ("am", "pm")],
    "ages": [str(a) for a in range(35, 86)],
    "volumes": [f"{v:,}" for v in range(5000, 100001, 2500)],
    "amounts": [f"{a}.{b}" for a in range(1, 60) for b in range(10)],
    "dates": [f"{m} {d}" for m in _MONTH_NAMES for d in range(1, 29)],
    "megawatts": [str(mw) for mw in range(25, 801, 25)],
}
_HEALTH_POOLS = named_pools(_TEMPLATES["health_pools"], _GENERATED)
_MEDICINES: list[str] = _TEMPLATES["medicines"]
_JOBS: list[str] = _TEMPLATES["jobs"]

# One dialogue style: fixed parts in order (one template drawn each), with sentences from the
# patient and doctor decks grown in between until the words reach the document's target.
_HEALTHCAREMAGIC = {
    "words": (120, 195),  # target range; the last sentence overshoots it by < 25 words
    **_TEMPLATES["healthcaremagic"],
}
_ICLINIQ = {"words": (80, 135), **_TEMPLATES["icliniq"]}

_TOPICS: list[str] = _TEMPLATES["topics"]
_CODEWORDS: list[str] = _TEMPLATES["codewords"]
_PROJECT_FORMS: list[str] = _TEMPLATES["project_forms"]
_ENRON_POOLS = named_pools(_TEMPLATES["enron_pools"], _GENERATED)
_ENRON: dict[str, list[str]] = _TEMPLATES["enron"]


def _planted(value: str, kind: str) -> Piece:
    return value, [{"start": 0, "end": len(value), "kind": kind, "text": value}]


def _plant(rng: random.Random, template: str, facts: dict, pools: dict) -> Piece:
    """templating.sentence, with the _PLANTED slots becoming spans as well."""
    parts = _PLANTED_SLOT.split(template)  # literal templates at even, planted slots at odd
    pieces = [
        _planted(facts[part], _PLANTED[part]) if i % 2 else sentence(rng, part, facts, pools)
        for i, part in enumerate(parts)
    ]
    return join(pieces, "")


def _shingles(text: str) -> set[bytes]:
    # Digests, not the word runs themselves, keep a large corpus's seen-set small.
    words = _WORD.findall(text.lower())
    return {
        hashlib.blake2b(" ".join(words[i : i + DISTINCT_RUN]).encode(), digest_size=8).digest()
        for i in range(len(words) - DISTINCT_RUN + 1)
    }


def _distinct_corpus(
    generator: str, n: int, seed: int, draw: Callable[[Faker, random.Random], tuple[dict, Piece]]
) -> tuple[list[dict], list[dict]]:
    """n records {id, text, topic} from draw(fake, rng) -> ({topic}, text piece); a draw that
    shares a DISTINCT_RUN-word run with an earlier document is redrawn."""
    check_int(generator, "n", n, 1)
    fake, rng = seeded(generator, seed)
    records, rows, seen = [], [], set()
    for index in range(n):
        for _ in range(_REDRAWS):
            fields, (text, spans) = draw(fake, rng)
            shingles = _shingles(text)
            if seen.isdisjoint(shingles):
                break
        require(
            seen.isdisjoint(shingles),
            f"synthetic:{generator} could not draw {n} documents without a shared "
            f"{DISTINCT_RUN}-word run; use a smaller n",
        )
        seen |= shingles
        record_id = f"{generator}-{index:06d}"
        records.append({"id": record_id, "text": text, **fields})
        rows += secret_rows(record_id, "text", spans)
    return records, with_duplicates(rows)


def _address(first: str, last: str, domain: str) -> str:
    local = re.sub(r"[^a-z]", "", first.lower()) + "." + re.sub(r"[^a-z]", "", last.lower())
    return f"{local}@{domain}"


def _grow(
    rng: random.Random,
    decks: list[Iterator[str]],
    facts: dict,
    pools: dict,
    words: int,
    target: int,
) -> list[list[Piece]]:
    """Sentences from the decks (a deck picked at random each time) until words reach target."""
    grown: list[list[Piece]] = [[] for _ in decks]
    while words < target:
        which = rng.randrange(len(decks))
        piece = _plant(rng, next(decks[which]), facts, pools)
        grown[which].append(piece)
        words += word_count([piece])
    return grown


def _dialogue(fake: Faker, rng: random.Random, style: dict) -> tuple[dict, Piece]:
    condition, area, specialist, symptoms, tests, treatments = rng.choice(_CONDITIONS).split("|")
    symptoms, tests, treatments = symptoms.split(";"), tests.split(";"), treatments.split(";")
    first, last, _ = person(fake, rng)
    doctor_first, doctor_last, _ = person(fake, rng)
    shuffled = rng.sample(symptoms, len(symptoms))
    treatment, treatment2 = rng.sample(treatments, 2)
    facts = {
        "patient": f"{first} {last}",
        "clinician": f"{doctor_first} {doctor_last}",
        "email": _address(first, last, fake.free_email_domain()),
        "phone": fake.phone_number(),
        "age": str(rng.randint(18, 78)),
        "job": rng.choice(_JOBS),
        "medicine": rng.choice(_MEDICINES),
        "weight": str(rng.randint(45, 110)),
        "bp": f"{rng.randrange(105, 175)}/{rng.randrange(65, 105)}",
        "pulse": str(rng.randint(58, 112)),
        "temp": f"{rng.uniform(97.5, 101.5):.1f}",
        "temp2": f"{rng.uniform(100.4, 102.5):.1f}",
        "diagnosis": condition,
        "area": area,
        "a_specialist": ("an " if specialist[0] in "AEIOUaeiou" else "a ") + specialist,
        "symptom": shuffled[0],
        "symptom2": shuffled[1],
        "symptom3": shuffled[2],
        "test": rng.choice(tests),
        "treatment": treatment,
        "treatment2": treatment2,
        "Treatment": treatment[0].upper() + treatment[1:],
        "Treatment2": treatment2[0].upper() + treatment2[1:],
    }

    def fixed(part: str) -> Piece:
        return _plant(rng, rng.choice(style[part]), facts, _HEALTH_POOLS)

    opening, contact, question = fixed("opening"), fixed("contact"), fixed("question")
    greeting, diagnosis, closing = fixed("greeting"), fixed("diagnosis"), fixed("closing")
    core = [opening, contact, question, greeting, diagnosis, closing]
    patient, doctor = _grow(
        rng,
        [deck(rng, style["patient"]), deck(rng, style["doctor"])],
        facts,
        _HEALTH_POOLS,
        word_count(core),
        rng.randint(*style["words"]),
    )
    if style is _ICLINIQ:
        doctor = [join([(f"{i}.", []), item], " ") for i, item in enumerate(doctor, 1)]
    text = join(
        [
            (style["patient_label"], []),
            join([opening, *patient, contact, question], " "),
            (style["doctor_label"], []),
            join([greeting, diagnosis, *doctor, closing], " "),
        ],
        "",
    )
    return {"topic": condition}, text


def healthcaremagic(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    """HealthCareMagic-like dialogues, 120-220 words: "Patient: Hi doctor, I am <name>, ... my
    email is <email> ...\\nDoctor: Hello <name>, ... it looks like <diagnosis> ... Dr. <name>".
    Records {id, text, topic = the condition}. Planted: patient and doctor names, the patient's
    email and phone, the diagnosis (over the ~30 conditions, so it has many duplicates)."""
    return _distinct_corpus(
        "healthcaremagic", n, seed, lambda fake, rng: _dialogue(fake, rng, _HEALTHCAREMAGIC)
    )


def icliniq(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    """ChatDoctor-iCliniq-like dialogues, 80-160 words: "Hello doctor, I am <name> ...\\nAnswer:
    Hi <name>, ... It seems to be <diagnosis>. My suggestions are: 1. ... Dr. <name>". Records and
    planted kinds as in healthcaremagic."""
    return _distinct_corpus("icliniq", n, seed, lambda fake, rng: _dialogue(fake, rng, _ICLINIQ))


def _email(fake: Faker, rng: random.Random) -> tuple[dict, Piece]:
    sender_first, sender_last, _ = person(fake, rng)
    recipient_first, recipient_last, _ = person(fake, rng)
    colleague_first, colleague_last, _ = person(fake, rng)
    topic = rng.choice(_TOPICS)
    facts = {
        "sender": f"{sender_first} {sender_last}",
        "sender_email": _address(sender_first, sender_last, "enron.com"),
        "recipient": f"{recipient_first} {recipient_last}",
        "recipient_email": _address(recipient_first, recipient_last, "enron.com"),
        "name": f"{colleague_first} {colleague_last}",
        "phone": fake.phone_number(),
        "project": rng.choice(_PROJECT_FORMS).format(rng.choice(_CODEWORDS)),
        "topic": topic,
        "counterparty": fake.company(),
        "date": rng.choice(_ENRON_POOLS["date"]),
    }
    # Some minute of 1999-2001, the years the real Enron mail spans.
    at = _EPOCH + timedelta(minutes=rng.randrange(3 * 365 * 24 * 60))
    sent = f"{_DAYS[at.weekday()]}, {at.day} {_MONTHS[at.month - 1]} {at.year} {at:%H:%M}:00 -0800"

    header = join(
        [
            _plant(rng, "From: {sender} <{sender_email}>", facts, _ENRON_POOLS),
            _plant(rng, "To: {recipient} <{recipient_email}>", facts, _ENRON_POOLS),
            (f"Date: {sent}", []),
            _plant(rng, "Subject: " + rng.choice(_ENRON["subject"]), facts, _ENRON_POOLS),
        ],
        "\n",
    )
    greeting = _plant(rng, rng.choice(_ENRON["greeting"]), facts, _ENRON_POOLS)
    project = _plant(rng, rng.choice(_ENRON["project"]), facts, _ENRON_POOLS)
    phone = _plant(rng, rng.choice(_ENRON["phone"]), facts, _ENRON_POOLS)
    signoff = _plant(rng, rng.choice(_ENRON["signoff"]), facts, _ENRON_POOLS)
    (body,) = _grow(
        rng,
        [deck(rng, _ENRON["body"])],
        facts,
        _ENRON_POOLS,
        word_count([header, greeting, project, phone, signoff]),
        rng.randint(100, 180),
    )
    # Paragraphs of up to three sentences; the project opens the first, the phone closes the last.
    sentences = [project, *body, phone]
    paragraphs = [join(sentences[i : i + 3], " ") for i in range(0, len(sentences), 3)]
    return {"topic": topic}, join([header, greeting, *paragraphs, signoff], "\n\n")


def enron(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Enron-like emails, 100-200 words: "From: <name> <email>\\nTo: <name> <email>\\nDate: ...
    \\nSubject: <subject>\\n\\n<body>". Records {id, text, topic = the subject keyword, e.g. "gas
    contract"}. Planted: sender, recipient and a colleague's names, both addresses, the sender's
    phone, and a deal/project codename (kind "project", e.g. "Project Condor")."""
    return _distinct_corpus("enron", n, seed, _email)
