"""synthetic:dialogs: multi-domain customer-service dialogs for S3. Deterministic, exact
ground truth for every planted secret, domains dealt evenly, and each domain's keyword list
occurs in its own dialogs and (travel insurance aside) in no other domain's."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from privleak.data.dialogs import (
    DOMAIN_KEYWORDS,
    DOMAINS,
    PRIVATE_DOMAINS,
    PUBLIC_DOMAINS,
    TRAVEL_TASK,
    dialogs,
)
from privleak.data.synthetic import generate
from privleak.errors import PrivleakError

KINDS = {
    "AIRLINE": {"name", "confirmation_code", "phone"},
    "MEDIA": {"name", "email", "card_tail"},
    "INSURANCE": {"name", "policy_number", "phone"},
    "FASTFOOD": {"name", "phone"},
    "FINANCE": {"name", "card_tail"},
    "SOFTWARE": {"name", "email"},
}
# The secret every dialog of a private domain names, and its shape.
SIGNATURE = {
    "AIRLINE": ("confirmation_code", r"[A-Z][A-Z0-9]{5}"),
    "MEDIA": ("email", r"[a-z]+\.[a-z]+@[a-z.]+"),
    "INSURANCE": ("policy_number", r"POL-\d{8}"),
}


@pytest.fixture(scope="module")
def corpus():
    return dialogs(300, 0)


def keyword_pattern(keywords) -> re.Pattern:
    # Whole words; the words of a phrase may be separated by any non-word run ("drive-thru").
    phrases = [r"\W+".join(map(re.escape, k.split())) for k in keywords]
    return re.compile(r"(?<!\w)(?:" + "|".join(phrases) + r")(?!\w)")


def test_domains_are_the_papers_three_private_plus_three_public():
    assert PRIVATE_DOMAINS == ("AIRLINE", "MEDIA", "INSURANCE")
    assert set(PUBLIC_DOMAINS) == {"FASTFOOD", "FINANCE", "SOFTWARE"}
    assert DOMAINS == PRIVATE_DOMAINS + PUBLIC_DOMAINS


def test_same_seed_same_bytes_and_another_seed_differs():
    def dumped(seed):
        return [json.dumps(part, sort_keys=True) for part in generate("dialogs", 12, seed)]

    first, again, other = dumped(0), dumped(0), dumped(1)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]


def test_records_are_user_agent_turns(corpus):
    records, _ = corpus
    assert [r["id"] for r in records] == [f"dialogs-{i:06d}" for i in range(300)]
    for record in records:
        assert set(record) == {"id", "domain", "task", "text"}
        lines = record["text"].split("\n")
        assert [line.split(":")[0] for line in lines] == ["USER", "AGENT"] * (len(lines) // 2)
        assert 4 <= len(lines) // 2 <= 8  # the default turns (4, 8)
    assert {len(r["text"].split("\n")) for r in records} == {8, 10, 12, 14, 16}
    three, _ = dialogs(6, 0, turns=[3, 3])
    assert {len(r["text"].split("\n")) for r in three} == {6}


def test_every_secret_span_points_at_its_text_and_counts_duplicates(corpus):
    records, secrets = corpus
    by_id = {r["id"]: r for r in records}
    counts = Counter(row["text"] for row in secrets)
    for row in secrets:
        assert row["field"] == "text"
        assert by_id[row["record_id"]]["text"][row["start"] : row["end"]] == row["text"]
        assert row["duplicates"] == counts[row["text"]]
    # Every occurrence of a planted value is a row: the customer's name repeats within a dialog.
    for record in records:
        rows = [row for row in secrets if row["record_id"] == record["id"]]
        for text in {row["text"] for row in rows}:
            found = len(re.findall(rf"(?<!\w){re.escape(text)}(?!\w)", record["text"]))
            assert found == sum(row["text"] == text for row in rows), text
    assert max(row["duplicates"] for row in secrets if row["kind"] == "name") > 1


def test_each_domain_plants_its_kinds_and_private_domains_their_signature(corpus):
    records, secrets = corpus
    kinds_by_record: dict[str, dict[str, list[str]]] = {r["id"]: {} for r in records}
    for row in secrets:
        kinds_by_record[row["record_id"]].setdefault(row["kind"], []).append(row["text"])
    for domain, kinds in KINDS.items():
        of_domain = [r for r in records if r["domain"] == domain]
        seen = set().union(*(kinds_by_record[r["id"]] for r in of_domain))
        assert seen == kinds, domain
        assert all("name" in kinds_by_record[r["id"]] for r in of_domain)
    for domain, (kind, shape) in SIGNATURE.items():
        for record in (r for r in records if r["domain"] == domain):
            values = kinds_by_record[record["id"]][kind]
            assert values and all(re.fullmatch(shape, v) for v in values), record["id"]
    tails = [row["text"] for row in secrets if row["kind"] == "card_tail"]
    assert tails and all(re.fullmatch(r"\d{4}", t) for t in tails)


def test_domains_are_dealt_round_robin():
    records, _ = dialogs(14, 0)
    assert [r["domain"] for r in records] == [DOMAINS[i % 6] for i in range(14)]
    assert Counter(r["domain"] for r in records) == {
        "AIRLINE": 3,
        "MEDIA": 3,
        "INSURANCE": 2,
        "FASTFOOD": 2,
        "FINANCE": 2,
        "SOFTWARE": 2,
    }
    records, _ = dialogs(5, 0, domains=["MEDIA", "AIRLINE"])
    assert [r["domain"] for r in records] == ["MEDIA", "AIRLINE"] * 2 + ["MEDIA"]


@pytest.mark.parametrize("share, expected", [(0.0, 0), (0.1, 10), (0.25, 25), (1.0, 100)])
def test_travel_insurance_share_is_exact(share, expected):
    records, _ = dialogs(600, 0, travel_insurance_share=share)  # 100 INSURANCE dialogs
    travel = [r for r in records if r["task"] == TRAVEL_TASK]
    assert len(travel) == expected
    assert all(r["domain"] == "INSURANCE" for r in travel)
    assert all(re.search(r"\bflight\b", r["text"]) for r in travel)


def test_keywords_are_readable_lists():
    assert set(DOMAIN_KEYWORDS) == set(DOMAINS)
    for domain, keywords in DOMAIN_KEYWORDS.items():
        assert 10 <= len(keywords) <= 25, domain
        assert len(set(keywords)) == len(keywords)
        assert all(k == k.lower().strip() and k for k in keywords)


def test_keywords_occur_in_their_own_domain_far_more_than_in_others(corpus):
    records, _ = corpus
    texts = {d: [r["text"].lower() for r in records if r["domain"] == d] for d in DOMAINS}
    travel = sum(r["task"] == TRAVEL_TASK for r in records) / len(texts["INSURANCE"])
    for keywords_of in DOMAINS:
        pattern = keyword_pattern(DOMAIN_KEYWORDS[keywords_of])
        for domain in DOMAINS:
            share = sum(bool(pattern.search(t)) for t in texts[domain]) / len(texts[domain])
            if domain == keywords_of:
                assert share == 1.0, domain
            elif (domain, keywords_of) == ("INSURANCE", "AIRLINE"):
                assert share == pytest.approx(travel)  # only the travel-insurance claims
            else:
                assert share == 0.0, (domain, keywords_of)
    # Every keyword is in use.
    for domain, keywords in DOMAIN_KEYWORDS.items():
        joined = "\n".join(texts[domain])
        unused = [k for k in keywords if not keyword_pattern([k]).search(joined)]
        assert not unused, domain


def test_three_thousand_dialogs_are_distinct():
    """Their generation time is recorded in benchmarks/README.md, not asserted here."""
    records, _ = dialogs(3000, 0)
    assert len(records) == 3000
    assert len({r["id"] for r in records}) == len({r["text"] for r in records}) == 3000


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"domains": ["AIRLINE", "HOTEL"]},
            "synthetic:dialogs domains: 'HOTEL' is unknown; allowed: AIRLINE, MEDIA, INSURANCE, "
            "FASTFOOD, FINANCE, SOFTWARE",
        ),
        ({"domains": "AIRLINE"}, "synthetic:dialogs domains must be a non-empty list of names"),
        ({"domains": []}, "synthetic:dialogs domains must be a non-empty list of names"),
        (
            {"domains": ["MEDIA", "MEDIA"]},
            "synthetic:dialogs domains must not repeat a name; got ['MEDIA', 'MEDIA']",
        ),
        ({"turns": [2, 5]}, "synthetic:dialogs turns must be [low, high] with integers 3 <= low"),
        ({"turns": [6, 5]}, "synthetic:dialogs turns must be [low, high]"),
        ({"turns": [4]}, "synthetic:dialogs turns must be [low, high]"),
        ({"turns": [4.0, 6]}, "synthetic:dialogs turns must be [low, high]"),
        (
            {"travel_insurance_share": 1.5},
            "synthetic:dialogs travel_insurance_share must be a number in [0, 1]; got 1.5",
        ),
        ({"travel_insurance_share": True}, "travel_insurance_share must be a number in [0, 1]"),
        (
            {"seed": 3},
            "synthetic:dialogs has no option 'seed'; allowed: domains, turns, "
            "travel_insurance_share",
        ),
    ],
)
def test_bad_options_are_one_line(options, message):
    with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
        generate("dialogs", 6, 0, options)
    assert "\n" not in str(caught.value)


def test_bad_n_is_one_line():
    message = r"^synthetic:dialogs n must be an integer >= 1; got 0$"
    with pytest.raises(PrivleakError, match=message):
        dialogs(0, 0)
