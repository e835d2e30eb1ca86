"""The medical_dirichlet-like corpus for DP-RAG (privleak.data.medical)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from privleak.data.medical import dirichlet, medical_dirichlet, symptom_question
from privleak.errors import PrivleakError


def test_same_seed_same_bytes_other_seed_other_corpus():
    assert medical_dirichlet(30, 1) == medical_dirichlet(30, 1)
    assert medical_dirichlet(30, 1)[0] != medical_dirichlet(30, 2)[0]


def test_one_document_per_patient_naming_its_diagnosis():
    records, _ = medical_dirichlet(200, 0, diseases=20)
    assert len({r["id"] for r in records}) == 200
    for record in records:
        assert record["patient"] in record["request"] and record["patient"] in record["response"]
        assert record["disease"] in record["response"]
        assert record["disease"] not in record["request"] + record["question"]


def test_questions_list_the_disease_symptoms_and_identify_it():
    records, _ = medical_dirichlet(300, 0, diseases=30)
    by_question = {}
    for record in records:
        by_question.setdefault(record["question"], set()).add(record["disease"])
        listed = record["question"].removeprefix("I am experiencing the following symptoms: ")
        for symptom in listed.removesuffix(". What is my disease?").split(", "):
            assert symptom.lower() in record["request"]
    assert all(len(diseases) == 1 for diseases in by_question.values())


def test_secret_spans_are_exact_and_rare_details_occur_once():
    records, secrets = medical_dirichlet(60, 3, rare_details=15)
    texts = {r["id"]: r for r in records}
    for row in secrets:
        assert texts[row["record_id"]][row["field"]][row["start"] : row["end"]] == row["text"]
    rare = [row for row in secrets if row["kind"] == "rare_detail"]
    assert len(rare) == 15 and all(row["duplicates"] == 1 for row in rare)
    corpus = " ".join(r["request"] + " " + r["response"] for r in records)
    assert all(corpus.count(row["text"]) == 1 for row in rare)
    assert {row["record_id"] for row in rare} == {f"medical-{i:06d}" for i in range(15)}


def test_disease_frequencies_follow_the_dirichlet_draw():
    weights = dirichlet(8, 0.5, random.Random(0))
    assert sum(weights) == pytest.approx(1.0) and min(weights) > 0
    records, _ = medical_dirichlet(4000, 5, diseases=8, rare_details=0)
    counts = Counter(r["disease"] for r in records)
    shares = sorted(c / 4000 for c in counts.values())
    # Concentration 0.5 over 8 diseases is far from uniform: the commonest holds many times the
    # rarest's share (a uniform corpus would give 1/8 each).
    assert shares[-1] > 3 * shares[0]


def test_symptom_question_capitalises_each_symptom():
    assert symptom_question(["bloating", "cold knees"]) == (
        "I am experiencing the following symptoms: Bloating, Cold knees. What is my disease?"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"diseases": 0}, "diseases must be an integer >= 1"),
        ({"concentration": 0.0}, "concentration must be > 0"),
        ({"rare_details": -1}, "rare_details must be an integer >= 0"),
        ({"rare_details": 50}, r"rare_details \(50\) cannot exceed n \(10\)"),
        ({"diseases": 10_000, "rare_details": 0}, "supports at most"),
    ],
)
def test_bad_options_fail_with_one_line(options, message):
    with pytest.raises(PrivleakError, match=message):
        medical_dirichlet(10, 0, **options)
