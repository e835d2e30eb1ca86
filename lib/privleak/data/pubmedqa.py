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
    with_duplicates,
    word_count,
)

# Word pools for the abstract templates' slots that no fact fills.
_COVARIATES = (
    "body mass index|smoking status|baseline renal function|disease duration|"
    "socioeconomic status|prior hospitalization|diabetes|hypertension"
).split("|")
_SECONDARY = (
    "length of stay|adverse events|patient-reported pain|cost of care|mortality at 90 days|"
    "readmission within 30 days"
).split("|")
_POOLS = POOLS | {
    "days": "3|4|5|6|7|8|9|11".split("|"),
    "covariate": _COVARIATES,
    "covariate2": _COVARIATES,
    "secondary": _SECONDARY,
    "secondary2": _SECONDARY,
    "comorbidity": "dementia|active cancer|severe liver disease|recent surgery".split("|"),
}
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
        methods = [
            fill(
                "We conducted a retrospective cohort study of {total} patients with {condition} "
                "treated at {hospital} between {first_year} and {last_year}.",
                facts,
            ),
            fill("Of these, {treated} received {intervention} and the rest usual care.", facts),
            fill(
                "The index case, {patient} (medical record number {mrn}), a {age}-year-old {sex}, "
                "was referred by Dr. {clinician}.",
                facts,
            ),
        ]
        results = [fill(_RESULTS[decision], facts)]
        more_methods, more_results = deck(rng, _METHODS), deck(rng, _RESULTS_FILLER)
        sections = {
            "BACKGROUND:": [
                fill("Patients with {condition} often have poor {outcome}.", facts),
                fill("Whether {intervention} helps them is unclear.", facts),
            ],
            "OBJECTIVE:": [
                fill("To test whether {intervention} improves {outcome} in {condition}.", facts)
            ],
            "METHODS:": methods,
            "RESULTS:": results,
            "CONCLUSIONS:": [fill(_ANSWERS[decision][0], facts)],
        }
        words = sum(word_count(s) + 1 for s in sections.values())
        while words < min_words:
            section, templates = (
                (methods, more_methods) if rng.random() < 0.6 else (results, more_results)
            )
            section.append(sentence(rng, next(templates), facts, _POOLS))
            words += word_count(section[-1:])
        context = join([join([(label, []), *body], " ") for label, body in sections.items()], "\n")
        answer = join([fill(t, facts) for t in _ANSWERS[decision][: rng.randint(2, 3)]], " ")
        record_id = f"pubmedqa-{index:06d}"
        records.append(
            {
                "id": record_id,
                "question": fill(
                    "Is {intervention} associated with better {outcome} in patients with "
                    "{condition}?",
                    facts,
                )[0],
                "context": context[0],
                "long_answer": answer[0],
                "final_decision": decision,
            }
        )
        rows += secret_rows(record_id, "context", context[1]) + secret_rows(
            record_id, "long_answer", answer[1]
        )
    return records, with_duplicates(rows)
