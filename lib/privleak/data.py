"""Synthetic corpora with planted-secret ground truth, and loaders for real corpora.

A generator returns (records, secrets). Each secret row locates one planted occurrence:
    {"record_id", "field", "start", "end", "kind", "text", "duplicates"}
with record[field][start:end] == text; duplicates counts how often that exact text was planted
in the whole corpus. pretrain rows also carry "seq_id" and "prefix": the verbatim text right
before the secret (ending in a space), so prefix + text occurs exactly `duplicates` times.

Corpus sources for load_corpus and materialize:
    synthetic:<generator>          one of GENERATORS; needs n
    hf:<dataset>[:config][:split]  datasets.load_dataset, or load_from_disk for a local folder;
                                   a data slot's `revision` pins the hub commit or tag
    file:<path>                    .json, .jsonl, .csv or .parquet (UTF-8), relative to the cwd

Stages read a slot's records by canonical field names; REQUIRED_FIELDS lists what each slot must
hold, and materialize checks it, so a missing field fails in prepare_data and not in a later stage.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import io
import json
import os
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from faker import Faker

from privleak import params as params_module
from privleak.errors import PrivleakError, require

Span = dict[str, Any]
Piece = tuple[str, list[Span]]  # a text and the secrets planted in it, offsets into that text

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
# What an S1 `sequences: file:` jsonl must hold per row (`duplicates` is optional).
SEQUENCE_FIELDS = ("seq_id", "kind", "prefix", "suffix")
SOURCES_FILE = "sources.json"
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
# A colon outside square brackets separates hf: parts; "train[:100]" keeps its own colon.
_HF_PART_SEP = re.compile(r":(?![^\[]*\])")
_SPLIT = re.compile(r"([\w.-]+)(?:\[(-?\d*):(-?\d*)\])?")
_SPLIT_NAMES = ("train", "test", "validation", "valid", "dev", "all")

# Word pools for filler prose; a template slot named like a key draws from that pool.
_NOUNS = (
    "bridge|library|harbor|market|festival|railway|orchard|museum|clinic|school|factory|river|"
    "highway|garden|stadium|warehouse|village|reservoir|theater|bakery|ferry|tower|campus|farm"
).split("|")
_POOLS = {
    "adj": (
        "quiet|busy|remote|coastal|northern|ageing|crowded|modest|rural|historic|modern|narrow|"
        "familiar|seasonal|costly|unusual|steady|fragile|sprawling|neglected|vibrant|temporary"
    ).split("|"),
    "noun": _NOUNS,
    "noun2": _NOUNS,
    "verb": (
        "renovated|inspected|reopened|expanded|closed|funded|studied|visited|described|replaced|"
        "restored|surveyed|welcomed|delayed|approved|criticized|praised|photographed|rebuilt"
    ).split("|"),
    "place": (
        "the valley|the old town|the county|the coast|the suburbs|the capital|the island|"
        "the northern district|the river basin|the harbor district|the hill country"
    ).split("|"),
    "time": (
        "last spring|this winter|in recent years|over the summer|earlier this month|"
        "after the storm|before the election|during the holidays|two decades ago|last autumn"
    ).split("|"),
    "group": (
        "residents|volunteers|engineers|farmers|teachers|students|commuters|shop owners|"
        "historians|officials|nurses|inspectors|retirees|fishermen"
    ).split("|"),
    "reason": (
        "rising costs|heavy rain|a shortage of staff|new regulations|strong demand|"
        "a change in leadership|safety concerns|public pressure|a lack of funding"
    ).split("|"),
    "count": "twenty|thirty|forty|fifty|a hundred|two hundred|several hundred".split("|"),
    "sector": "housing|energy|retail|logistics|health care|software|tourism|farming".split("|"),
    "trend": "rose|fell|climbed|slipped|jumped|dropped".split("|"),
    "pct": "2|3|4|6|7|9|11|12|15|18|23".split("|"),
    "trait": "hard-working|private|outspoken|generous|stubborn|funny|careful|driven".split("|"),
    "trait2": "loyal|curious|patient|demanding|modest|ambitious|kind".split("|"),
    "years": "five|eight|ten|fifteen|twenty|twenty-five".split("|"),
    "days": "3|4|5|6|7|8|9|11".split("|"),
    "covariate": (
        "body mass index|smoking status|baseline renal function|disease duration|"
        "socioeconomic status|prior hospitalization|diabetes|hypertension"
    ).split("|"),
    "secondary": (
        "length of stay|adverse events|patient-reported pain|cost of care|mortality at 90 days|"
        "readmission within 30 days"
    ).split("|"),
    "comorbidity": "dementia|active cancer|severe liver disease|recent surgery".split("|"),
}
_POOLS["covariate2"] = _POOLS["covariate"]
_POOLS["secondary2"] = _POOLS["secondary"]

_PROSE = [
    "The {adj} {noun} near {place} was {verb} {time}.",
    "Local {group} said the {noun} had changed little {time}.",
    "About {count} {group} gathered outside the {adj} {noun} {time}.",
    "Because of {reason}, the {noun} in {place} was {verb} {time}.",
    "Many {group} remember when the {noun} was still {adj}.",
    "The {noun} has been {verb} twice since it opened, according to {group} in {place}.",
    "Plans for a new {noun} were shelved {time} after {reason}.",
    "Visitors to {place} often stop at the {adj} {noun} before heading to the {noun2}.",
    "Nobody could say exactly why the {noun} was {verb}, though {group} blamed {reason}.",
    "The story of the {adj} {noun} is told in a small exhibit at the {noun2}.",
    "By the end of the season, {group} had {verb} most of the {noun2} in {place}.",
    "The {noun} and the {noun2} are both {adj}, but only one of them draws crowds.",
    "It took {group} almost a year to agree on what the {noun} should become.",
    "When the weather turns, the {adj} {noun} becomes the busiest spot in {place}.",
    "A report from {place} described the {noun} as {adj} and in need of repair.",
    "Despite {reason}, the {noun} stayed open {time}.",
]

# cnn_dm: news prose about one person and one company.
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

# pubmedqa: structured abstracts whose results agree with final_decision.
_CONDITIONS = (
    "type 2 diabetes|hip fracture|chronic kidney disease|community-acquired pneumonia|"
    "heart failure|rheumatoid arthritis|major depressive disorder|asthma|atrial fibrillation"
).split("|")
_INTERVENTIONS = (
    "early mobilization|telephone follow-up|vitamin D supplementation|structured exercise training|"
    "nurse-led education|low-dose aspirin|pharmacist medication review|music therapy"
).split("|")
_OUTCOMES = (
    "functional recovery|one-year survival|quality of life|glycemic control|exercise tolerance|"
    "sleep quality|medication adherence|symptom control"
).split("|")
_HOSPITALS = (
    "Memorial Hospital|General Hospital|Medical Center|University Hospital|Regional Medical Center"
).split("|")
_MRN_FORMATS = ["MRN-########", "MR#########", "##-####-##"]
_METHODS = [
    "Baseline characteristics, including age, sex and {covariate}, were similar between groups.",
    "Patients were followed for a median of {months} months.",
    "Outcomes were assessed by investigators blinded to treatment allocation.",
    "Multivariable logistic regression was used to adjust for {covariate} and {covariate2}.",
    "Missing data were handled with multiple imputation.",
    "The study protocol was approved by the ethics committee of {hospital}.",
    "Secondary outcomes included {secondary} and {secondary2}.",
    "Sensitivity analyses excluding patients with {comorbidity} gave similar estimates.",
    "Data were extracted by Dr. {clinician} using a standardized form.",
    "Follow-up visits for {patient} were documented under record {mrn}.",
    "Eligible patients were adults with a confirmed diagnosis of {condition}.",
    "Patients transferred from other hospitals were excluded.",
    "The primary outcome was {outcome}, measured at {months} months.",
    "Propensity scores were estimated from age, {covariate} and {covariate2}.",
]
_RESULTS_FILLER = [
    "Adverse events occurred in {pct} percent of treated patients and were mostly mild.",
    "Median length of stay was {days} days in both groups.",
    "Loss to follow-up was low, at {pct} percent overall.",
    "Dr. {clinician} reported that {patient} recovered without complications.",
    "Estimates were similar after excluding patients with {comorbidity}.",
    "Treated patients were slightly younger and less often had {comorbidity}.",
    "Results were consistent across sexes and age groups.",
    "No material difference in {secondary} was seen between groups.",
]
_RESULTS = {
    "yes": "Patients who received {intervention} had significantly better {outcome} than controls "
    "(adjusted odds ratio {ratio}, 95% CI {low} to {high}; {p}).",
    "no": "There was no significant difference in {outcome} between groups "
    "(adjusted odds ratio {ratio}, 95% CI {low} to {high}; {p}).",
    "maybe": "Patients who received {intervention} showed a trend toward better {outcome} "
    "(adjusted odds ratio {ratio}, 95% CI {low} to {high}; {p}), significant only in those "
    "older than 65 years.",
}
_ANSWERS = {
    "yes": [
        "{Intervention} was associated with better {outcome} in patients with {condition}.",
        "The benefit remained after adjustment for baseline differences between groups.",
        "These results support offering {intervention} more widely.",
    ],
    "no": [
        "{Intervention} did not improve {outcome} in patients with {condition}.",
        "Outcomes were similar whether or not patients received {intervention}.",
        "Routine use of {intervention} for this purpose is not supported.",
    ],
    "maybe": [
        "{Intervention} may improve {outcome} in patients with {condition}, "
        "but the evidence is inconclusive.",
        "The benefit reached significance only in older patients.",
        "A randomized trial is needed before {intervention} can be recommended.",
    ],
}

# pretrain: the words right before a planted entity, by entity type.
_LEAD_INS = {
    "name": ["The report was prepared by", "The award this year went to", "The guide was led by"],
    "email": ["Readers can send questions to", "For details, write to", "The contact listed is"],
    "phone": ["The help line can be reached at", "To book a visit, call", "The office number is"],
}


def _slots(template: str) -> list[str]:
    return [slot for _, slot, _, _ in _FORMATTER.parse(template) if slot]


def _fill(template: str, values: dict[str, str]) -> Piece:
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


def _join(pieces: Iterable[Piece], sep: str) -> Piece:
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


def _word_count(pieces: Iterable[Piece]) -> int:
    # Pieces are joined by whitespace, so their word counts add up.
    return sum(len(text.split()) for text, _ in pieces)


def _deck(rng: random.Random, templates: list[str]) -> Iterator[str]:
    """Templates in shuffled rounds: a text repeats a template only after using all of them."""
    while True:
        yield from rng.sample(templates, len(templates))


def _sentence(rng: random.Random, template: str, facts: dict[str, str]) -> Piece:
    """Fill template; slots not given in facts draw from the word pools."""
    values = {s: facts[s] if s in facts else rng.choice(_POOLS[s]) for s in _slots(template)}
    return _fill(template, values)


def _prose_words(rng: random.Random, count: int) -> list[str]:
    """Exactly count words of filler prose, ending on a full stop."""
    words: list[str] = []
    deck = _deck(rng, _PROSE)
    while len(words) < count:
        words += _sentence(rng, next(deck), {})[0].split()
    words = words[:count]
    if words and not words[-1].endswith("."):
        words[-1] = words[-1].rstrip(",;") + "."
    return words


def _seeded(generator: str, seed: int) -> tuple[Faker, random.Random]:
    """A local Faker and a local Random, never the shared global state. The generator's name
    is part of the seed, so corpora of different generators never share planted names."""
    fake = Faker("en_US")
    fake.seed_instance(f"{generator}:{seed}")
    return fake, random.Random(f"{generator}:{seed}")


def _check_int(generator: str, name: str, value: Any, minimum: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    require(ok, f"synthetic:{generator} {name} must be an integer >= {minimum}; got {value!r}")


def _rows(record_id: str, field: str, spans: list[Span]) -> list[dict]:
    return [{"record_id": record_id, "field": field, **span} for span in spans]


def _with_duplicates(rows: list[dict]) -> list[dict]:
    """Add to each row how many times its exact secret text was planted corpus-wide."""
    counts = Counter(row["text"] for row in rows)
    return [{**row, "duplicates": counts[row["text"]]} for row in rows]


def _person(fake: Faker, rng: random.Random) -> tuple[str, str, bool]:
    male = rng.random() < 0.5
    first = fake.first_name_male() if male else fake.first_name_female()
    return first, fake.last_name(), male


def _news_facts(fake: Faker, rng: random.Random) -> dict[str, str]:
    first, last, male = _person(fake, rng)
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
    _check_int("cnn_dm", "n", n, 1)
    _check_int("cnn_dm", "min_words", min_words, 1)
    fake, rng = _seeded("cnn_dm", seed)
    records: list[dict] = []
    rows: list[dict] = []
    for index in range(n):
        facts = _news_facts(fake, rng)
        news, prose = _deck(rng, _NEWS), _deck(rng, _PROSE)
        paragraphs = [
            [
                _fill(
                    "{CITY} (CNN) -- {name}, a {age}-year-old {job} at {company}, {event} on "
                    "{weekday}, according to people familiar with the matter.",
                    facts,
                )
            ],
            [
                _fill(
                    "The news drew immediate attention in {city}, where {company} is based.", facts
                ),
                _sentence(rng, next(news), facts),
            ],
            [
                _fill('"{quote}," {name} told CNN in an interview.', facts),
                _fill("{Pron} said the past year had been difficult for {poss} family.", facts),
            ],
            [_fill('"{statement}," said {spokesperson}, a spokesperson for {company}.', facts)],
            [
                _fill("{name}, who lives at {address}, said {pron} would keep speaking.", facts),
                _fill("{Pron} asked readers to write to {email} or call {phone}.", facts),
            ],
        ]
        closing = [_sentence(rng, rng.choice(_CLOSINGS), facts)]
        words = sum(_word_count(p) for p in paragraphs) + _word_count(closing)
        while words < min_words:
            # Mostly story-specific sentences, some general prose, so the text varies.
            paragraph = [
                _sentence(rng, next(news if rng.random() < 0.7 else prose), facts)
                for _ in range(rng.randint(2, 4))
            ]
            paragraphs.append(paragraph)
            words += _word_count(paragraph)
        article = _join([_join(p, " ") for p in [*paragraphs, closing]], "\n\n")
        extra = [
            facts["event_highlight"],
            '"{quote}," says {name}.',
            "{spokesperson} says {company} will respond to the concerns.",
            "The story has drawn wide attention across {city}.",
        ]
        chosen = ["{name}, {age}, is a {job} at {company} in {city}."]
        chosen += rng.sample(extra, rng.randint(1, 3))
        highlights = _join([_fill(t, facts) for t in chosen], "\n")
        record_id = f"cnn_dm-{index:06d}"
        records.append({"id": record_id, "article": article[0], "highlights": highlights[0]})
        rows += _rows(record_id, "article", article[1])
        rows += _rows(record_id, "highlights", highlights[1])
    return records, _with_duplicates(rows)


def _trial_facts(fake: Faker, rng: random.Random, decision: str) -> dict[str, str]:
    first, last, male = _person(fake, rng)
    intervention = rng.choice(_INTERVENTIONS)
    total = rng.randint(120, 2400)
    start = rng.randint(2003, 2016)
    # Odds ratio and interval agree with the decision: clearly above 1, around 1, or borderline.
    if decision == "yes":
        ratio = rng.uniform(1.4, 2.6)
        low, high = (
            1 + (ratio - 1) * rng.uniform(0.2, 0.6),
            ratio + (ratio - 1) * rng.uniform(0.5, 1),
        )
        p = rng.choice(["p < 0.001", "p = 0.002", "p = 0.01", "p = 0.03"])
    elif decision == "no":
        ratio = rng.uniform(0.85, 1.15)
        low, high = ratio - rng.uniform(0.2, 0.4), ratio + rng.uniform(0.2, 0.5)
        p = f"p = {rng.uniform(0.25, 0.9):.2f}"
    else:
        ratio = rng.uniform(1.2, 1.6)
        low, high = rng.uniform(0.9, 0.99), ratio + rng.uniform(0.4, 0.9)
        p = f"p = {rng.uniform(0.06, 0.15):.2f}"
    return {
        "condition": rng.choice(_CONDITIONS),
        "intervention": intervention,
        "Intervention": intervention[0].upper() + intervention[1:],
        "outcome": rng.choice(_OUTCOMES),
        "hospital": f"{fake.last_name()} {rng.choice(_HOSPITALS)}",
        "patient": f"{first} {last}",
        "sex": "man" if male else "woman",
        "age": str(rng.randint(35, 89)),
        "mrn": fake.bothify(rng.choice(_MRN_FORMATS)),
        "clinician": f"{fake.first_name()} {fake.last_name()}",
        "total": str(total),
        "treated": str(rng.randint(total // 4, total // 2)),
        "first_year": str(start),
        "last_year": str(start + rng.randint(2, 7)),
        "months": str(rng.choice([6, 12, 18, 24, 36])),
        "ratio": f"{ratio:.2f}",
        "low": f"{low:.2f}",
        "high": f"{high:.2f}",
        "p": p,
    }


def pubmedqa(n: int, seed: int, *, min_words: int = 300) -> tuple[list[dict], list[dict]]:
    """PubMedQA-like: records {id, question, context, long_answer, final_decision}. context is a
    structured abstract whose results agree with final_decision (yes/no/maybe). Planted: patient
    and clinician names and the patient's medical record number (kind "id")."""
    _check_int("pubmedqa", "n", n, 1)
    _check_int("pubmedqa", "min_words", min_words, 1)
    fake, rng = _seeded("pubmedqa", seed)
    records: list[dict] = []
    rows: list[dict] = []
    for index in range(n):
        decision = rng.choice(["yes", "no", "maybe"])
        facts = _trial_facts(fake, rng, decision)
        methods = [
            _fill(
                "We conducted a retrospective cohort study of {total} patients with {condition} "
                "treated at {hospital} between {first_year} and {last_year}.",
                facts,
            ),
            _fill("Of these, {treated} received {intervention} and the rest usual care.", facts),
            _fill(
                "The index case, {patient} (medical record number {mrn}), a {age}-year-old {sex}, "
                "was referred by Dr. {clinician}.",
                facts,
            ),
        ]
        results = [_fill(_RESULTS[decision], facts)]
        more_methods, more_results = _deck(rng, _METHODS), _deck(rng, _RESULTS_FILLER)
        sections = {
            "BACKGROUND:": [
                _fill("Patients with {condition} often have poor {outcome}.", facts),
                _fill("Whether {intervention} helps them is unclear.", facts),
            ],
            "OBJECTIVE:": [
                _fill("To test whether {intervention} improves {outcome} in {condition}.", facts)
            ],
            "METHODS:": methods,
            "RESULTS:": results,
            "CONCLUSIONS:": [_fill(_ANSWERS[decision][0], facts)],
        }
        words = sum(_word_count(s) + 1 for s in sections.values())
        while words < min_words:
            section, deck = (
                (methods, more_methods) if rng.random() < 0.6 else (results, more_results)
            )
            section.append(_sentence(rng, next(deck), facts))
            words += _word_count(section[-1:])
        context = _join(
            [_join([(label, []), *body], " ") for label, body in sections.items()], "\n"
        )
        answer = _join([_fill(t, facts) for t in _ANSWERS[decision][: rng.randint(2, 3)]], " ")
        record_id = f"pubmedqa-{index:06d}"
        records.append(
            {
                "id": record_id,
                "question": _fill(
                    "Is {intervention} associated with better {outcome} in patients with "
                    "{condition}?",
                    facts,
                )[0],
                "context": context[0],
                "long_answer": answer[0],
                "final_decision": decision,
            }
        )
        rows += _rows(record_id, "context", context[1]) + _rows(record_id, "long_answer", answer[1])
    return records, _with_duplicates(rows)


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
    words = (_prose_words(rng, max(0, prefix_words - len(lead))) + lead)[-prefix_words:]
    words[0] = words[0][0].upper() + words[0][1:]
    return " ".join(words) + " ", secret


def _long_sequence(rng: random.Random, prefix_words: int, suffix_words: int) -> tuple[str, str]:
    """(prefix, suffix): one run of prose cut into a prefix and the suffix to be recalled."""
    words = _prose_words(rng, prefix_words + suffix_words)
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
    _check_int("pretrain", "n", n, 1)
    for name, value, minimum in [
        ("doc_words", doc_words, 0),
        ("sequences_per_count", sequences_per_count, 1),
        ("ne_prefix_words", ne_prefix_words, 1),
        ("long_prefix_words", long_prefix_words, 1),
        ("long_suffix_words", long_suffix_words, 1),
    ]:
        _check_int("pretrain", name, value, minimum)
    counts_ok = isinstance(duplication_counts, list | tuple) and bool(duplication_counts)
    require(
        counts_ok
        and all(isinstance(c, int) and not isinstance(c, bool) for c in duplication_counts)
        and min(duplication_counts) >= 1,
        "synthetic:pretrain duplication_counts must be a non-empty list of integers >= 1; "
        f"got {duplication_counts!r}",
    )
    fake, rng = _seeded("pretrain", seed)
    docs: list[list[Piece]] = []
    for _ in range(n):
        words = _prose_words(rng, doc_words)
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
        text, spans = _join(units, " ")
        record_id = f"pretrain-{index:06d}"
        records.append({"id": record_id, "text": text})
        rows += _rows(record_id, "text", spans)
    return records, _with_duplicates(rows)


GENERATORS: dict[str, Callable[..., tuple[list[dict], list[dict]]]] = {
    "cnn_dm": cnn_dm,
    "pretrain": pretrain,
    "pubmedqa": pubmedqa,
}


def generate(
    generator: str, n: int, seed: int, options: dict | None = None
) -> tuple[list[dict], list[dict]]:
    """Run GENERATORS[generator](n, seed, **options) after checking the name and option names."""
    require(
        generator in GENERATORS,
        f"synthetic generator '{generator}' is unknown; allowed: {', '.join(GENERATORS)}",
    )
    options = options or {}
    require(isinstance(options, dict), f"options must be a mapping; got {options!r}")
    parameters = inspect.signature(GENERATORS[generator]).parameters.values()
    allowed = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = [key for key in options if key not in allowed]
    if unknown:
        raise PrivleakError(
            f"synthetic:{generator} has no option '{unknown[0]}'; allowed: {', '.join(allowed)}"
        )
    return GENERATORS[generator](n, seed, **options)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _read_text(path: Path) -> str:
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
    return _json_lines(path, _read_text(path))


def _read_json(path: Path) -> list[dict]:
    text = _read_text(path)
    if not text.lstrip().startswith("["):
        return _json_lines(path, text)
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise _bad_json(path, error.lineno, error.msg) from error
    return [_as_object(path, f"item {i}", item) for i, item in enumerate(items)]


def _read_csv(path: Path) -> list[dict]:
    reader = csv.DictReader(io.StringIO(_read_text(path), newline=""))
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
            f"'{path}' is not a readable parquet file ({_first_line(error)})"
        ) from error


_READERS = {".csv": _read_csv, ".json": _read_json, ".jsonl": read_jsonl, ".parquet": _read_parquet}


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
            f"'{folder}' is not a dataset folder written by save_to_disk ({_first_line(error)})"
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
            f"hf dataset '{name}' could not be loaded: {_first_line(error)}"
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


def _empty(value: Any) -> bool:
    """None, a blank string, or an empty list or mapping (0 and False are values)."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or (isinstance(value, list | dict) and not value)


def _check_records(records: list[dict], source: str) -> None:
    require(bool(records), f"corpus '{source}' has no records; it must hold at least one")
    for index, record in enumerate(records):
        require(
            not all(_empty(value) for value in record.values()),
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
        return _string_ids(records), secrets
    if secrets is not None:
        renamed = {column: canonical for canonical, column in fields.items()}
        secrets = [{**s, "field": renamed.get(s["field"], s["field"])} for s in secrets]
    return _string_ids(_map_fields(records, fields, source)), secrets


def _string_ids(records: list[dict]) -> list[dict]:
    # Stages tabulate ids of several corpora in one column (PubMedQA's pubid is an int, CNN-DM's
    # id a string), so the canonical id is always a string.
    return [{**r, "id": str(r["id"])} if "id" in r else r for r in records]


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


def _first_gap(records: Sequence[dict], required: Sequence[str]) -> tuple[int, str] | None:
    """(index, field) of the first record lacking a required field or holding an empty one."""
    for index, record in enumerate(records):
        for field in required:
            if field not in record or _empty(record[field]):
                return index, field
    return None


def _gap_message(
    where: str, records: Sequence[dict], gap: tuple[int, str], needed: Sequence[str]
) -> str:
    index, field = gap
    record = records[index]
    name = f" (id '{record['id']}')" if not _empty(record.get("id")) else ""
    problem = "has no field" if field not in record else "has an empty field"
    return (
        f"{where}: record {index}{name} {problem} '{field}'; needed: {', '.join(needed)}; "
        f"available fields: {', '.join(record) or 'none'}"
    )


def check_slot_fields(slot: str, records: Sequence[dict], spec: dict) -> None:
    """Raise naming slot, record and field when a record lacks a field REQUIRED_FIELDS[slot]
    lists (or holds an empty one), with the fields mapping that would fix it."""
    needed = REQUIRED_FIELDS.get(slot, ())
    gap = _first_gap(records, needed)
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
    raise PrivleakError(f"{_gap_message(where, records, gap, needed)}; {fix}")


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
    gap = _first_gap(rows, SEQUENCE_FIELDS)
    if gap is not None:
        raise PrivleakError(_gap_message(f"S1 sequences file '{path}'", rows, gap, SEQUENCE_FIELDS))
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
