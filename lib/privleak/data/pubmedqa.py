"""synthetic:pubmedqa, PubMedQA-like questions with structured abstracts whose results agree
with the final decision, with patient and clinician names and medical record numbers planted."""

from __future__ import annotations

import random

from faker import Faker

from privleak.data.templating import (
    POOLS,
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

_TEMPLATES = templates("pubmedqa")
# Word pools for the abstract templates' slots that no fact fills.
_POOLS = POOLS | _TEMPLATES["pools"]
_CONDITIONS: list[str] = _TEMPLATES["conditions"]
_INTERVENTIONS: list[str] = _TEMPLATES["interventions"]
_OUTCOMES: list[str] = _TEMPLATES["outcomes"]
_HOSPITALS: list[str] = _TEMPLATES["hospitals"]
_MRN_FORMATS: list[str] = _TEMPLATES["mrn_formats"]
_METHODS: list[str] = _TEMPLATES["more_methods"]
_RESULTS_FILLER: list[str] = _TEMPLATES["more_results"]
_RESULTS: dict[str, str] = _TEMPLATES["results"]  # by final decision
_ANSWERS: dict[str, list[str]] = _TEMPLATES["answers"]  # by final decision


def _trial_facts(fake: Faker, rng: random.Random, decision: str) -> dict[str, str]:
    first, last, male = person(fake, rng)
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
    check_int("pubmedqa", "n", n, 1)
    check_int("pubmedqa", "min_words", min_words, 1)
    fake, rng = seeded("pubmedqa", seed)
    records: list[dict] = []
    rows: list[dict] = []
    for index in range(n):
        decision = rng.choice(["yes", "no", "maybe"])
        facts = _trial_facts(fake, rng, decision)
        methods = [fill(t, facts) for t in _TEMPLATES["methods"]]
        results = [fill(_RESULTS[decision], facts)]
        more_methods, more_results = deck(rng, _METHODS), deck(rng, _RESULTS_FILLER)
        sections = {
            "BACKGROUND:": [fill(t, facts) for t in _TEMPLATES["background"]],
            "OBJECTIVE:": [fill(t, facts) for t in _TEMPLATES["objective"]],
            "METHODS:": methods,
            "RESULTS:": results,
            "CONCLUSIONS:": [fill(_ANSWERS[decision][0], facts)],
        }
        words = sum(word_count(s) + 1 for s in sections.values())
        while words < min_words:
            section, more = (
                (methods, more_methods) if rng.random() < 0.6 else (results, more_results)
            )
            section.append(sentence(rng, next(more), facts, _POOLS))
            words += word_count(section[-1:])
        context = join([join([(label, []), *body], " ") for label, body in sections.items()], "\n")
        answer = join([fill(t, facts) for t in _ANSWERS[decision][: rng.randint(2, 3)]], " ")
        record_id = f"pubmedqa-{index:06d}"
        records.append(
            {
                "id": record_id,
                "question": fill(_TEMPLATES["question"], facts)[0],
                "context": context[0],
                "long_answer": answer[0],
                "final_decision": decision,
            }
        )
        rows += secret_rows(record_id, "context", context[1]) + secret_rows(
            record_id, "long_answer", answer[1]
        )
    return records, with_duplicates(rows)
