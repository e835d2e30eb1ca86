"""synthetic:dialogs, task-oriented customer-service dialogs from several domains (MultiDoGo
style), the pooled corpus of S3's domain privacy. Records are {id, domain, task, text}; text is
lines "USER: ..." and "AGENT: ...".

Every domain has its own tasks and vocabulary, so a keyword list (DOMAIN_KEYWORDS) and a
classifier can both tell domains apart. The private domains AIRLINE, MEDIA and INSURANCE carry
the secrets a domain-private model must not leak into other domains: AIRLINE confirmation codes,
MEDIA account emails, INSURANCE policy numbers. Every domain plants its customers' names, and a
phone number (AIRLINE, INSURANCE, FASTFOOD) or a card's last four digits (MEDIA, FINANCE) where a
real dialog would ask for one; SOFTWARE plants the email a licence is registered to. Every
occurrence of a planted value is a secret row.

A share of INSURANCE dialogs are travel-insurance claims about flights: the AIRLINE/INSURANCE
overlap the paper names as the reason its reference model leaves one domain out.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence

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
)
from privleak.errors import require

PRIVATE_DOMAINS = ("AIRLINE", "MEDIA", "INSURANCE")
PUBLIC_DOMAINS = ("FASTFOOD", "FINANCE", "SOFTWARE")
DOMAINS = PRIVATE_DOMAINS + PUBLIC_DOMAINS
TRAVEL_TASK = "travel_claim"
MIN_TURNS = 3  # the opening, the customer identifying themselves, the goodbye

_TEMPLATES = templates("dialogs")

# Hand-crafted keyword lists: each is the distinctive vocabulary of its domain's templates and
# occurs in no other domain's templates, except the AIRLINE words of INSURANCE's travel claims.
# Matching is by whole lower-cased words, so a list names each word form the templates use.
DOMAIN_KEYWORDS: dict[str, tuple[str, ...]] = {
    domain: tuple(words) for domain, words in _TEMPLATES["domain_keywords"].items()
}

# Slots whose values are planted secrets, and the kind their ground-truth row gets.
_PLANTED = {
    "customer": "name",
    "code": "confirmation_code",
    "email": "email",
    "policy": "policy_number",
    "card": "card_tail",
    "phone": "phone",
}
_PLANTED_SLOT = re.compile(r"\{(" + "|".join(_PLANTED) + r")\}")
# Confirmation codes skip 0/O and 1/I, as airlines do, so a code reads back unambiguously.
_CODE_LETTERS = string.ascii_uppercase.replace("O", "").replace("I", "")
_CODE_CHARS = _CODE_LETTERS + "23456789"

# Shared by every domain: domain-neutral, so the opening and goodbye never name a domain.
_HELLO: list[str] = _TEMPLATES["hello"]
_WELCOME: list[str] = _TEMPLATES["welcome"]
_BYE: list[str] = _TEMPLATES["bye"]

_CITIES: list[str] = _TEMPLATES["cities"]
_MONTHS: list[str] = _TEMPLATES["months"]
_DATES = [f"{month} {day}" for month in _MONTHS for day in range(1, 29)]
_TIMES = [
    f"{h}:{m:02d} {half}" for h in range(1, 13) for m in (0, 15, 30, 45) for half in ("am", "pm")
]
_FEW: list[str] = _TEMPLATES["few"]
_PRICES = [f"${d}.{c}" for d in range(6, 25) for c in ("49", "99")]
# The pools a domain names instead of listing: numbers, times and codes built by rule.
_GENERATED = {
    "dates": _DATES,
    "times": _TIMES,
    "prices": _PRICES,
    "seats": [f"{row}{letter}" for row in range(3, 39) for letter in "ABCDEF"],
    "flight_numbers": [f"{prefix} {k}" for prefix in ("NW", "SK") for k in range(101, 990, 7)],
    "gates": [f"{c}{k}" for c in "ABCDE" for k in range(1, 40)],
    "miles": [f"{k},{h}00" for k in range(2, 40) for h in (0, 5)],
    "seasons": [str(k) for k in range(2, 9)],
    "episodes": [str(k) for k in range(1, 13)],
    "premiums": [f"${k}" for k in range(68, 240, 7)],
    "claim_amounts": [f"${k},{h}00" for k in range(1, 20) for h in (0, 2, 5, 7)],
    "calories": [str(k) for k in range(390, 990, 30)],
    "charges": [f"${d}.{c:02d}" for d in range(14, 900, 37) for c in (5, 20, 75)],
    "balances": [f"${k},{h}00" for k in range(1, 9) for h in (1, 4, 6, 8)],
    "versions": [f"{a}.{b}.{c}" for a in (3, 4, 5) for b in range(0, 6) for c in (0, 1, 3)],
    "new_versions": [f"{a}.{b}.{c}" for a in (5, 6) for b in range(0, 6) for c in (2, 4)],
    "error_codes": [f"E-{k}" for k in range(101, 999, 23)],
}

# Per domain: brands, pools (one value each per dialog, so a dialog stays consistent), how the
# agent asks the customer to identify themselves, how they answer, how the agent confirms, and
# tasks: opening requests plus "USER line || AGENT line" exchanges drawn in shuffled rounds.
_DOMAINS: dict[str, dict] = {
    domain: {**style, "pools": named_pools(style["pools"], _GENERATED)}
    for domain, style in _TEMPLATES["domains"].items()
}


def _check_options(domains, turns, travel_insurance_share) -> None:
    allowed = ", ".join(DOMAINS)
    require(
        isinstance(domains, list | tuple)
        and bool(domains)
        and all(isinstance(d, str) for d in domains),
        f"synthetic:dialogs domains must be a non-empty list of names from {allowed}; "
        f"got {domains!r}",
    )
    for domain in domains:
        require(
            domain in DOMAINS,
            f"synthetic:dialogs domains: '{domain}' is unknown; allowed: {allowed}",
        )
    require(
        len(set(domains)) == len(domains),
        f"synthetic:dialogs domains must not repeat a name; got {list(domains)}",
    )
    turns_ok = (
        isinstance(turns, list | tuple)
        and len(turns) == 2
        and all(isinstance(t, int) and not isinstance(t, bool) for t in turns)
        and MIN_TURNS <= turns[0] <= turns[1]
    )
    require(
        turns_ok,
        f"synthetic:dialogs turns must be [low, high] with integers {MIN_TURNS} <= low <= high "
        f"(exchanges of a USER and an AGENT line); got {turns!r}",
    )
    share = travel_insurance_share
    require(
        isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1,
        f"synthetic:dialogs travel_insurance_share must be a number in [0, 1]; got {share!r}",
    )


def _planted(value: str, kind: str) -> Piece:
    return value, [{"start": 0, "end": len(value), "kind": kind, "text": value}]


def _fill(rng: random.Random, template: str, facts: dict[str, str]) -> Piece:
    """Fill template from facts; the _PLANTED slots become secret spans."""
    parts = _PLANTED_SLOT.split(template)  # literal templates at even, planted slots at odd
    pieces = [
        _planted(facts[part], _PLANTED[part]) if i % 2 else sentence(rng, part, facts, {})
        for i, part in enumerate(parts)
    ]
    return join(pieces, "")


def _address(first: str, last: str, fake: Faker) -> str:
    local = re.sub(r"[^a-z]", "", first.lower()) + "." + re.sub(r"[^a-z]", "", last.lower())
    return f"{local}@{fake.free_email_domain()}"


def _facts(fake: Faker, rng: random.Random, style: dict) -> dict[str, str]:
    """One dialog's customer, secrets and pool values (fixed for the whole dialog)."""
    first, last, _ = person(fake, rng)
    facts = {key: rng.choice(pool) for key, pool in style["pools"].items()}
    city, city2, city3 = rng.sample(_CITIES, 3)  # a trip's cities differ
    return facts | {
        "city": city,
        "city2": city2,
        "city3": city3,
        "brand": rng.choice(style["brands"]),
        "customer": f"{first} {last}",
        "email": _address(first, last, fake),
        "phone": fake.phone_number(),
        # A letter first, so a code never reads as a number.
        "code": rng.choice(_CODE_LETTERS) + "".join(rng.choices(_CODE_CHARS, k=5)),
        "policy": "POL-" + "".join(rng.choices(string.digits, k=8)),
        "card": f"{rng.randrange(10_000):04d}",
    }


def _dialog(fake: Faker, rng: random.Random, domain: str, task: str, turns: int) -> Piece:
    style = _DOMAINS[domain]
    facts = _facts(fake, rng, style)

    def line(speaker: str, *templates: str) -> Piece:
        return join([(f"{speaker}:", [])] + [_fill(rng, t, facts) for t in templates], " ")

    lines = [
        line("USER", rng.choice(_HELLO), rng.choice(style["tasks"][task]["open"])),
        line("AGENT", rng.choice(_WELCOME), rng.choice(style["ask"])),
        line("USER", rng.choice(style["identify"])),
        line("AGENT", rng.choice(style["found"])),
    ]
    exchanges = deck(rng, style["tasks"][task]["exchanges"])
    for _ in range(turns - MIN_TURNS):
        user, agent = next(exchanges).split(" || ")
        lines += [line("USER", user), line("AGENT", agent)]
    lines.append(_fill(rng, rng.choice(_BYE), facts))
    return join(lines, "\n")


def dialogs(
    n: int,
    seed: int,
    *,
    domains: Sequence[str] = DOMAINS,
    turns: Sequence[int] = (4, 8),
    travel_insurance_share: float = 0.1,
) -> tuple[list[dict], list[dict]]:
    """n customer-service dialogs {id, domain, task, text}, dealt round-robin over `domains` (in
    the order given, so every domain gets n // len(domains) or one more). Each dialog has
    between turns[0] and turns[1] exchanges of a "USER: ..." and an "AGENT: ..." line: an
    opening with the request, the customer identifying themselves, task exchanges, a goodbye.
    Exactly round(travel_insurance_share x the INSURANCE dialogs) of them, chosen at random,
    are travel-insurance claims about flights (task TRAVEL_TASK).

    Planted (secret kinds): every customer's name ("name"); AIRLINE "confirmation_code"
    (6 upper-case letters and digits) and "phone"; MEDIA account "email" and "card_tail" (last
    four digits); INSURANCE "policy_number" ("POL-" + 8 digits) and "phone"; FASTFOOD "phone";
    FINANCE "card_tail"; SOFTWARE "email"."""
    check_int("dialogs", "n", n, 1)
    _check_options(domains, turns, travel_insurance_share)
    fake, rng = seeded("dialogs", seed)
    dealt = [domains[i % len(domains)] for i in range(n)]
    insurance = [i for i, domain in enumerate(dealt) if domain == "INSURANCE"]
    travel = set(rng.sample(insurance, round(travel_insurance_share * len(insurance))))
    records, rows = [], []
    for index, domain in enumerate(dealt):
        tasks = [t for t in _DOMAINS[domain]["tasks"] if t != TRAVEL_TASK]
        task = TRAVEL_TASK if index in travel else rng.choice(tasks)
        text, spans = _dialog(fake, rng, domain, task, rng.randint(*turns))
        record_id = f"dialogs-{index:06d}"
        records.append({"id": record_id, "domain": domain, "task": task, "text": text})
        rows += secret_rows(record_id, "text", spans)
    return records, with_duplicates(rows)
