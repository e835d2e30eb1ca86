"""A medical_dirichlet-like corpus for DP-RAG (S4, Grislain): one document per patient.

Fictitious diseases (invented names, so no model knows them beforehand), each with its own set of
symptoms and a treatment, get Dirichlet-distributed frequencies; every patient draws one disease,
asks about their symptoms in their own name, and a doctor's response names the diagnosis and the
treatment. A patient is the privacy unit: each record is one patient's document, keyed by `id`.

Planted for measured privacy: `rare_details` patients also mention a detail that occurs in exactly
one document (a named implant with a serial number), so a response that reproduces it can only
have read that one document.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from privleak.data.templating import (
    check_int,
    fill,
    join,
    person,
    secret_rows,
    seeded,
    templates,
    with_duplicates,
)
from privleak.errors import require

CORPUS_FIELDS = ("id", "unit", "disease", "question", "request", "response")
"""What a DP-RAG corpus record needs: `unit` is the privacy unit (one document each)."""

_TEMPLATES = templates("medical")
# A disease name is onset + middle + ending, its treatment onset + middle + treatment form.
_ONSETS: list[str] = _TEMPLATES["onsets"]
_MIDDLES: list[str] = _TEMPLATES["middles"]
_ENDINGS: list[str] = _TEMPLATES["endings"]
_TREATMENT_FORMS: list[str] = _TEMPLATES["treatment_forms"]
_SYMPTOMS: list[str] = _TEMPLATES["symptoms"]
_IMPLANTS: list[str] = _TEMPLATES["implants"]
_REQUESTS: list[str] = _TEMPLATES["requests"]
_RESPONSES: list[str] = _TEMPLATES["responses"]


def disease_table(count: int, rng: random.Random) -> list[dict]:
    """`count` invented diseases [{name, symptoms (3-5, the set unique per disease),
    treatment}] with distinct names."""
    require(
        count <= len(_ONSETS) * len(_MIDDLES) * len(_ENDINGS),
        f"synthetic:medical_dirichlet supports at most "
        f"{len(_ONSETS) * len(_MIDDLES) * len(_ENDINGS)} diseases; got {count}",
    )
    names, symptom_sets, diseases = set(), set(), []
    while len(diseases) < count:
        onset, middle = rng.choice(_ONSETS), rng.choice(_MIDDLES)
        name = onset + middle + rng.choice(_ENDINGS)
        symptoms = tuple(sorted(rng.sample(_SYMPTOMS, rng.randint(3, 5))))
        if name in names or symptoms in symptom_sets:
            continue
        names.add(name)
        symptom_sets.add(symptoms)
        treatment = onset + middle + rng.choice(_TREATMENT_FORMS)
        diseases.append({"name": name, "symptoms": list(symptoms), "treatment": treatment})
    return diseases


def dirichlet(count: int, concentration: float, rng: random.Random) -> list[float]:
    """One draw of Dirichlet(concentration, ..., concentration) over `count` outcomes
    (normalised Gamma(concentration, 1) variates)."""
    draws = [rng.gammavariate(concentration, 1.0) for _ in range(count)]
    total = sum(draws)
    return [d / total for d in draws]


def symptom_question(symptoms: list[str]) -> str:
    """The public query about a disease: the paper's 'I am experiencing the following
    symptoms: ... What is my disease?'."""
    listed = ", ".join(s[0].upper() + s[1:] for s in symptoms)
    return f"I am experiencing the following symptoms: {listed}. What is my disease?"


SERIAL = " with serial number "


def rare_detail_question(patient: str, detail: str) -> dict:
    """The question that asks for a planted rare detail ('<implant> with serial number XX-1234'
    of `patient`): {question, answer_prefix, fact}, where fact (the serial, with its leading
    space) is what only that patient's document holds and answer_prefix is forced before it."""
    require(SERIAL in detail, f"not a planted rare detail: {detail!r}")
    implant, serial = detail.split(SERIAL)
    return {
        "question": f"What is the serial number of {patient}'s {implant}?",
        "answer_prefix": f"The serial number of {patient}'s {implant} is",
        "fact": f" {serial}",
    }


def _listed(symptoms: list[str]) -> str:
    return ", ".join(symptoms[:-1]) + f", and {symptoms[-1]}"


def _rare_detail(fake, rng: random.Random, seen: set[str]) -> tuple[str, list[dict]]:
    """'I also have a(n) <implant> with serial number XX-1234.' with the detail as a span; serials
    never repeat, so the detail occurs in exactly one document."""
    while (detail := f"{rng.choice(_IMPLANTS)}{SERIAL}{fake.bothify('??-####').upper()}") in seen:
        pass
    seen.add(detail)
    lead = "I also have an " if detail[0] in "aeiou" else "I also have a "
    span = {
        "start": len(lead),
        "end": len(lead) + len(detail),
        "kind": "rare_detail",
        "text": detail,
    }
    return f"{lead}{detail}.", [span]


def medical_dirichlet(
    n: int,
    seed: int,
    *,
    diseases: int = 100,
    concentration: float = 0.5,
    rare_details: int = 20,
) -> tuple[list[dict], list[dict]]:
    """n patient documents: records {id, unit, patient, disease, question, request, response}
    where `unit` is the privacy unit (one per patient: names can repeat, units cannot) and
    `question` is the disease's public symptom query. Disease frequencies ~ Dirichlet(concentration)
    over `diseases` invented diseases. Planted: the patient's name in request and response (kind
    "name"), and for the first `rare_details` patients a one-document detail in the request (kind
    "rare_detail", duplicates 1)."""
    check_int("medical_dirichlet", "n", n, 1)
    check_int("medical_dirichlet", "diseases", diseases, 1)
    check_int("medical_dirichlet", "rare_details", rare_details, 0)
    require(
        concentration > 0,
        f"synthetic:medical_dirichlet concentration must be > 0; got {concentration!r}",
    )
    require(rare_details <= n, f"rare_details ({rare_details}) cannot exceed n ({n})")
    fake, rng = seeded("medical_dirichlet", seed)
    table = disease_table(diseases, rng)
    weights = dirichlet(diseases, concentration, rng)
    records, rows, seen = [], [], set()
    for index in range(n):
        disease = rng.choices(table, weights)[0]
        first, last, _ = person(fake, rng)
        facts = {
            "patient": f"{first} {last}",
            "symptom_list": _listed(rng.sample(disease["symptoms"], len(disease["symptoms"]))),
            "disease": disease["name"],
            "treatment": disease["treatment"],
        }
        parts = [fill(rng.choice(_REQUESTS), facts)]
        if index < rare_details:
            parts.append(_rare_detail(fake, rng, seen))
        request = join(parts, " ")
        response = fill(rng.choice(_RESPONSES), facts)
        record_id = f"medical-{index:06d}"
        records.append(
            {
                "id": record_id,
                "unit": f"patient-{index:06d}",
                "patient": facts["patient"],
                "disease": disease["name"],
                "question": symptom_question(disease["symptoms"]),
                "request": request[0],
                "response": response[0],
            }
        )
        rows += secret_rows(record_id, "request", request[1])
        rows += secret_rows(record_id, "response", response[1])
    return records, with_duplicates(rows)


def check_units(records: Sequence[dict], source: str = "the DP-RAG corpus") -> None:
    """One line when a record has no privacy unit or a unit owns two documents: DP-RAG's
    guarantee is per document, so it is per unit only when every unit has exactly one."""
    require(len(records) >= 1, f"{source} is empty")
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        unit = record.get("unit")
        require(
            unit is not None and str(unit).strip() != "",
            f"{source}: record {index} (id {record.get('id')!r}) has no privacy-unit id in "
            "field 'unit'; map the column naming the person (patient, user) to 'unit'",
        )
        first = seen.setdefault(str(unit), index)
        require(
            first == index,
            f"{source}: privacy unit {unit!r} owns records {first} and {index}; DP-RAG needs one "
            "document per unit (merge each unit's records into one document)",
        )


def document_text(record: dict) -> str:
    """The retrievable document of one record: the request, then the response."""
    return f"{record['request'].strip()} {record['response'].strip()}"


def names_disease(response: str, disease: str) -> bool:
    """The accuracy rule: the response names the disease when the disease's name, lower-cased
    with everything but letters and digits removed, is a substring of the response treated the
    same way (so 'Flumplenaxism.' and 'flumplenaxism' match; a misspelling does not)."""
    squash = lambda text: re.sub(r"[^a-z0-9]", "", text.lower())  # noqa: E731
    name = squash(disease)
    require(name != "", f"disease name {disease!r} has no letters or digits")
    return name in squash(response)
