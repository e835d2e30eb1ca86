"""synthetic:cnn_dm, CNN/DailyMail-like news about one person and one company, with the
person's and a spokesperson's names and the person's email, phone and street address planted."""

from __future__ import annotations

import random
import re

from faker import Faker

from privleak.data.templating import (
    POOLS,
    PROSE,
    check_int,
    deck,
    fill,
    join,
    person,
    secret_rows,
    seeded,
    sentence,
    templates,
    with_duplicates,
    word_count,
)

_TEMPLATES = templates("cnn_dm")
# Word pools for the news templates' slots that no fact fills.
_POOLS = POOLS | _TEMPLATES["pools"]
_JOBS: list[str] = _TEMPLATES["jobs"]
_WEEKDAYS: list[str] = _TEMPLATES["weekdays"]
_QUOTES: list[str] = _TEMPLATES["quotes"]
_STATEMENTS: list[str] = _TEMPLATES["statements"]
# (what happened, for the lede; the matching highlight sentence)
_EVENTS = [tuple(event) for event in _TEMPLATES["events"]]
_ARTICLE: dict[str, str] = _TEMPLATES["article"]  # the fixed sentences, by role
_NEWS: list[str] = _TEMPLATES["news"]
_CLOSINGS: list[str] = _TEMPLATES["closings"]
_HIGHLIGHTS: dict = _TEMPLATES["highlights"]


def _news_facts(fake: Faker, rng: random.Random) -> dict[str, str]:
    first, last, male = person(fake, rng)
    city = fake.city()
    # An address-book style email built from the person's own name reads like a real one.
    user = re.sub(r"[^a-z]", "", first.lower()) + "." + re.sub(r"[^a-z]", "", last.lower())
    facts = {
        "name": f"{first} {last}",
        "pron": "he" if male else "she",
        "Pron": "He" if male else "She",
        "poss": "his" if male else "her",
        "obj": "him" if male else "her",
        "age": str(rng.randint(24, 71)),
        "job": rng.choice(_JOBS),
        "company": fake.company(),
        "city": city,
        "CITY": city.upper(),
        "spokesperson": f"{fake.first_name()} {fake.last_name()}",
        "email": f"{user}@{fake.free_email_domain()}",
        "phone": fake.phone_number(),
        "address": f"{fake.street_address()}, {city}",
        "weekday": rng.choice(_WEEKDAYS),
        "amount": str(rng.randint(2, 90)),
        "jobs": str(rng.randrange(50, 2000, 10)),
        "year": str(rng.randint(1950, 2015)),
        "quote": rng.choice(_QUOTES),
        "statement": rng.choice(_STATEMENTS),
    }
    lede, highlight = rng.choice(_EVENTS)
    return facts | {"event": lede.format(**facts), "event_highlight": highlight}


def cnn_dm(n: int, seed: int, *, min_words: int = 300) -> tuple[list[dict], list[dict]]:
    """CNN/DailyMail-like news: records {id, article, highlights}; highlights are 2-4
    newline-separated sentences. Planted: the subject's and a spokesperson's names, the
    subject's email, phone and street address (names recur, so they have duplicates > 1)."""
    check_int("cnn_dm", "n", n, 1)
    check_int("cnn_dm", "min_words", min_words, 1)
    fake, rng = seeded("cnn_dm", seed)
    records: list[dict] = []
    rows: list[dict] = []
    for index in range(n):
        facts = _news_facts(fake, rng)
        news, prose = deck(rng, _NEWS), deck(rng, PROSE)
        paragraphs = [
            [fill(_ARTICLE["lede"], facts)],
            [fill(_ARTICLE["attention"], facts), sentence(rng, next(news), facts, _POOLS)],
            [fill(_ARTICLE["quote"], facts), fill(_ARTICLE["family"], facts)],
            [fill(_ARTICLE["statement"], facts)],
            [fill(_ARTICLE["address"], facts), fill(_ARTICLE["contact"], facts)],
        ]
        closing = [sentence(rng, rng.choice(_CLOSINGS), facts, _POOLS)]
        words = sum(word_count(p) for p in paragraphs) + word_count(closing)
        while words < min_words:
            # Mostly story-specific sentences, some general prose, so the text varies.
            paragraph = [
                sentence(rng, next(news if rng.random() < 0.7 else prose), facts, _POOLS)
                for _ in range(rng.randint(2, 4))
            ]
            paragraphs.append(paragraph)
            words += word_count(paragraph)
        article = join([join(p, " ") for p in [*paragraphs, closing]], "\n\n")
        extra = [facts["event_highlight"], *_HIGHLIGHTS["extra"]]
        chosen = [_HIGHLIGHTS["first"], *rng.sample(extra, rng.randint(1, 3))]
        highlights = join([fill(t, facts) for t in chosen], "\n")
        record_id = f"cnn_dm-{index:06d}"
        records.append({"id": record_id, "article": article[0], "highlights": highlights[0]})
        rows += secret_rows(record_id, "article", article[1])
        rows += secret_rows(record_id, "highlights", highlights[1])
    return records, with_duplicates(rows)
