"""synthetic:healthcaremagic, icliniq and enron: S2's private RAG corpora. Every planted value is
a ground-truth span, corpora are deterministic, and no two documents share a 20-word run."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from privleak.data.rag_private import DISTINCT_RUN
from privleak.data.synthetic import generate
from privleak.errors import PrivleakError

STYLES = {
    "healthcaremagic": ({"name", "email", "phone", "diagnosis"}, (120, 220), "Patient: "),
    "icliniq": ({"name", "email", "phone", "diagnosis"}, (80, 160), "Hello doctor, "),
    "enron": ({"name", "email", "phone", "project"}, (100, 200), "From: "),
}
N = 60


@pytest.fixture(scope="module", params=sorted(STYLES))
def corpus(request):
    records, secrets = generate(request.param, N, 0)
    return request.param, records, secrets


def test_records_have_the_style_and_length(corpus):
    name, records, _ = corpus
    _, (low, high), opening = STYLES[name]
    assert [r["id"] for r in records] == [f"{name}-{i:06d}" for i in range(N)]
    for record in records:
        assert set(record) == {"id", "text", "topic"}
        assert record["text"].startswith(opening)
        assert low <= len(record["text"].split()) <= high
    assert len({r["topic"] for r in records}) > 5


def test_spans_point_at_their_text_and_count_duplicates(corpus):
    name, records, secrets = corpus
    kinds, _, _ = STYLES[name]
    by_id = {r["id"]: r for r in records}
    assert {row["kind"] for row in secrets} == kinds
    counts = Counter(row["text"] for row in secrets)
    for row in secrets:
        assert row["field"] == "text"
        assert by_id[row["record_id"]]["text"][row["start"] : row["end"]] == row["text"]
        assert row["duplicates"] == counts[row["text"]]
    # Every record has each kind, and every occurrence of a planted value is a row.
    for record in records:
        rows = [row for row in secrets if row["record_id"] == record["id"]]
        assert {row["kind"] for row in rows} == kinds
        for text in {row["text"] for row in rows}:
            found = len(re.findall(rf"(?<!\w){re.escape(text)}(?!\w)", record["text"]))
            assert found == sum(row["text"] == text for row in rows), text


def test_topic_is_planted_where_it_is_a_secret(corpus):
    name, records, secrets = corpus
    for record in records:
        assert record["topic"] in record["text"]
        if name != "enron":  # the condition is the diagnosis
            assert any(
                row["record_id"] == record["id"] and row["text"] == record["topic"]
                for row in secrets
                if row["kind"] == "diagnosis"
            )


def test_no_two_documents_share_a_long_run(corpus):
    _, records, _ = corpus
    owner: dict[tuple[str, ...], str] = {}
    for record in records:
        words = re.findall(r"\w+", record["text"].lower())
        for i in range(len(words) - DISTINCT_RUN + 1):
            run = tuple(words[i : i + DISTINCT_RUN])
            assert owner.setdefault(run, record["id"]) == record["id"], " ".join(run)


@pytest.mark.parametrize("name", sorted(STYLES))
def test_same_seed_same_corpus(name):
    assert generate(name, 5, 3) == generate(name, 5, 3)
    assert generate(name, 5, 3)[0] != generate(name, 5, 4)[0]
    # A longer corpus starts with the shorter one.
    assert generate(name, 8, 3)[0][:5] == generate(name, 5, 3)[0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: generate("enron", 0, 0), "synthetic:enron n must be an integer >= 1; got 0"),
        (
            lambda: generate("icliniq", 2, 0, {"min_words": 5}),
            "synthetic:icliniq has no option 'min_words'; allowed: none",
        ),
    ],
)
def test_bad_input_is_one_line(call, message):
    with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
        call()
    assert "\n" not in str(caught.value)
