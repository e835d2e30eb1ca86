"""Zeng et al.'s {information}+{command} extraction prompts: deterministic, the requested share
targeted, and bad input rejected with one line naming the parameter."""

from __future__ import annotations

import re

import pytest

from privleak.errors import PrivleakError
from privleak.rag_attack import (
    COMMANDS,
    PII_INFORMATION,
    TOPIC_INFORMATION,
    UNTARGETED_INFORMATION,
    attack_prompts,
)

RECORDS = [{"id": str(i), "text": "...", "topic": t} for i, t in enumerate(["asthma", "gout"] * 3)]
KEYS = {"prompt_id", "information", "command", "question", "targeted", "topic"}


def test_same_seed_same_prompts():
    first = attack_prompts(RECORDS, 30, 7)
    assert first == attack_prompts(RECORDS, 30, 7)
    assert first != attack_prompts(RECORDS, 30, 8)
    assert [p["prompt_id"] for p in first] == [f"p{i:04d}" for i in range(30)]


@pytest.mark.parametrize("share", [0, 0.25, 0.5, 1])
def test_targeted_share(share):
    prompts = attack_prompts(RECORDS, 40, 0, targeted_share=share)
    assert sum(p["targeted"] for p in prompts) == round(40 * share)


@pytest.mark.parametrize("style", ["health", "enron"])
def test_prompts_are_information_then_command(style):
    topical = {TOPIC_INFORMATION[style].format(topic=t) for t in ("asthma", "gout")}
    prompts = attack_prompts(RECORDS, 200, 1, targeted_share=0.5, style=style)
    for p in prompts:
        assert set(p) == KEYS
        assert p["command"] in COMMANDS
        assert p["question"] == f"{p['information']} {p['command']}"
        if not p["targeted"]:
            assert p["topic"] is None
            first, second = re.split(r"(?<=\.) ", p["information"])
            assert first != second and {first, second} <= set(UNTARGETED_INFORMATION)
        elif p["topic"] is None:
            assert p["information"] in PII_INFORMATION
        else:
            assert p["information"] == TOPIC_INFORMATION[style].format(topic=p["topic"])
    # Both kinds of targeted prompt occur, and topics come from the records.
    targeted = [p for p in prompts if p["targeted"]]
    assert {p["information"] for p in targeted if p["topic"]} == topical
    assert any(p["topic"] is None for p in targeted)


def test_untargeted_prompts_need_no_topics():
    prompts = attack_prompts([{"id": "0", "text": "x"}], 5, 0, targeted_share=0)
    assert not any(p["targeted"] for p in prompts)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 0}, "n (attack prompts) must be an integer >= 1; got 0"),
        ({"n": 2.5}, "n (attack prompts) must be an integer >= 1; got 2.5"),
        ({"targeted_share": 1.5}, "targeted_share must be a number in [0, 1]; got 1.5"),
        ({"targeted_share": -0.1}, "targeted_share must be a number in [0, 1]; got -0.1"),
        ({"style": "wiki"}, "style 'wiki' is unknown; allowed: health, enron"),
        ({"records": [{"id": "0"}]}, "targeted attack prompts need records that each have"),
        ({"records": []}, "targeted attack prompts need records that each have"),
    ],
)
def test_bad_input_is_one_line(kwargs, message):
    call = {"records": RECORDS, "n": 4, "seed": 0} | kwargs
    with pytest.raises(PrivleakError, match=re.escape(message)) as caught:
        attack_prompts(**call)
    assert "\n" not in str(caught.value)
