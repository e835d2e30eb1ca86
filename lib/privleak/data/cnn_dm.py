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
    with_duplicates,
    word_count,
)

# Word pools for the news templates' slots that no fact fills.
_POOLS = POOLS | {
    "sector": "housing|energy|retail|logistics|health care|software|tourism|farming".split("|"),
    "trend": "rose|fell|climbed|slipped|jumped|dropped".split("|"),
    "trait": "hard-working|private|outspoken|generous|stubborn|funny|careful|driven".split("|"),
    "trait2": "loyal|curious|patient|demanding|modest|ambitious|kind".split("|"),
    "years": "five|eight|ten|fifteen|twenty|twenty-five".split("|"),
}
_JOBS = (
    "software engineer|nurse|accountant|warehouse manager|teacher|architect|pharmacist|"
    "marketing director|civil engineer|chef|data analyst|sales manager|electrician"
).split("|")
_WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday".split("|")
_QUOTES = [
    "We did everything we could to get this right",
    "I never expected it to become this big",
    "This is about the people who work here every day",
    "We are going to keep fighting for what is fair",
    "It has been a long road, but we are finally here",
    "I just want people to know the truth",
]
_STATEMENTS = [
    "The company takes these matters seriously",
    "We are proud of what our team has achieved",
    "We will review the situation carefully and respond in due course",
    "Our focus remains on our customers and our employees",
]
# (what happened, for the lede; the matching highlight sentence)
_EVENTS = [
    (
        "unveiled a ${amount} million plan to build a new headquarters",
        "{company} plans a ${amount} million headquarters in {city}, says {name}.",
    ),
    (
        "filed a lawsuit accusing the company of hiding safety problems",
        "{name} has sued {company} over alleged safety problems.",
    ),
    (
        "was named the winner of a national innovation award",
        "{name} of {company} won a national innovation award.",
    ),
    (
        "resigned after an internal review of spending",
        "{name} left {company} after a review of spending.",
    ),
    (
        "launched a program to hire {jobs} local workers",
        "{name} launched a plan for {company} to hire {jobs} workers in {city}.",
    ),
]
_NEWS = [
    "Shares of {company} have {trend} {pct} percent since the start of the year.",
    "Analysts said the move could reshape the {sector} market in {city}.",
    "Friends of {name} describe {obj} as {trait} and {trait2}.",
    "{company} was founded in {city} in {year} and has grown steadily since.",
    "City officials in {city} said they were following the situation closely.",
    "Several former employees, who asked not to be named, said the business had struggled.",
    "{name} began {poss} career in {sector} more than {years} years ago.",
    "Neighbors in {city} said {name} was well known in the community.",
    "The company has faced questions about {reason} before.",
    "It was not immediately clear how the decision would affect workers in {place}.",
    "{Pron} declined to say whether {pron} had spoken with regulators.",
]
_CLOSINGS = [
    "{company} did not respond to further requests for comment on {weekday}.",
    "CNN has reached out to {company} for additional comment.",
]


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
            [
                fill(
                    "{CITY} (CNN) -- {name}, a {age}-year-old {job} at {company}, {event} on "
                    "{weekday}, according to people familiar with the matter.",
                    facts,
                )
            ],
            [
                fill(
                    "The news drew immediate attention in {city}, where {company} is based.", facts
                ),
                sentence(rng, next(news), facts, _POOLS),
            ],
            [
                fill('"{quote}," {name} told CNN in an interview.', facts),
                fill("{Pron} said the past year had been difficult for {poss} family.", facts),
            ],
            [fill('"{statement}," said {spokesperson}, a spokesperson for {company}.', facts)],
            [
                fill("{name}, who lives at {address}, said {pron} would keep speaking.", facts),
                fill("{Pron} asked readers to write to {email} or call {phone}.", facts),
            ],
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
        extra = [
            facts["event_highlight"],
            '"{quote}," says {name}.',
            "{spokesperson} says {company} will respond to the concerns.",
            "The story has drawn wide attention across {city}.",
        ]
        chosen = ["{name}, {age}, is a {job} at {company} in {city}."]
        chosen += rng.sample(extra, rng.randint(1, 3))
        highlights = join([fill(t, facts) for t in chosen], "\n")
        record_id = f"cnn_dm-{index:06d}"
        records.append({"id": record_id, "article": article[0], "highlights": highlights[0]})
        rows += secret_rows(record_id, "article", article[1])
        rows += secret_rows(record_id, "highlights", highlights[1])
    return records, with_duplicates(rows)
