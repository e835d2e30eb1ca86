"""The results pages quote the committed run, and cannot drift from it.

docs/results/s0.md, s1.md, s2.md, s3.md, s4.md, audit.md, frontier.md and mia.md write every number
they quote in checked forms:
- a claim: `` `<paper>.<id>`: <effect> [<low>, <high>], <verdict> `` against metrics/claims.json;
- a tally: ``S<k> claims: <n> rows: <r> reproduced, <c> contradicted, <i> inconclusive`` against
  the s<k>.* claims of the same file;
- a Table 1 cell: `` `<corpus>/<method>/<column>` = <value> `` against metrics/s2.json's table1
  (the committed copy of figures/s2/s2_table1);
- any other metric: `` `<name>.json[<key>][<key>]...` = <value> `` against metrics/<name>.json
  (s0.json, s1.json, s2.json, s3.json, s4.json, audit.json, frontier.json, mia.json, claims.json;
  an integer key indexes a list).
Each value must equal the committed one, rounded to the decimals the page shows. The metrics files
are committed with every run (`dvc.yaml`: cache false), so a fresh clone checks them too.

README.md is no results page, but any number of the run it quotes (an effect, a verdict count, an
AUC, a timing) is in the claim, tally or metric form and checked the same way; numbers of the setup
(versions, budgets, cores) stay plain.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("s0.md", "s1.md", "s2.md", "s3.md", "s4.md", "audit.md", "frontier.md", "mia.md")
CLAIM_ID = r"(?:s[0-4]|mia)\.[\w.=\-]+"
NUMBER = r"[+\-−]?\d*\.?\d+(?:e[+\-]?\d+)?"
CLAIM = re.compile(
    rf"`(?P<id>{CLAIM_ID})`:\s+(?P<effect>{NUMBER})\s+"
    rf"\[(?P<low>{NUMBER}|-inf|nan),\s+(?P<high>{NUMBER}|nan)\],\s+"
    r"(?P<verdict>reproduced|contradicted|inconclusive)"
)
TALLY = re.compile(
    r"S(?P<paper>\d) claims:\s+(?P<n>\d+)\s+rows:\s+(?P<r>\d+)\s+reproduced,"
    r"\s+(?P<c>\d+)\s+contradicted,\s+(?P<i>\d+)\s+inconclusive"
)
CELL = re.compile(
    rf"`(?P<corpus>\w+)/(?P<method>[\w.]+)/(?P<column>\w+)`\s+=\s+(?P<value>{NUMBER})"
)

METRIC = re.compile(rf"`(?P<file>\w+)\.json(?P<keys>(?:\[[^\]`]+\])+)`\s+=\s+(?P<value>{NUMBER})")


def _value(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    digits = text.replace("−", "").lstrip("+-").split("e")[0]
    return len(digits.split(".")[1]) if "." in digits else 0


def _matches(written: str, actual: float) -> bool:
    """A bound the run does not have (null in claims.json) reads -inf as a lower bound, or nan
    where the claim has no interval at all."""
    if written == "-inf":
        return actual == float("-inf")
    if written == "nan":
        return math.isnan(actual)
    return round(actual, _decimals(written)) == pytest.approx(_value(written), abs=1e-12)


@pytest.fixture(scope="module", params=PAGES)
def page(request) -> str:
    return (ROOT / "docs" / "results" / request.param).read_text()


METHODS = {"Extraction": "extraction", "Summ.": "summ", "Dist.": "dist", "Static": "static",
           "PAD": "pad"}  # fmt: skip


@pytest.fixture(scope="module")
def claims() -> dict:
    """{claim id: {"effect", "ci": [low, high], "verdict"}} of the committed run."""
    return json.loads((ROOT / "metrics" / "claims.json").read_text())["claims"]


def test_the_page_quotes_numbers_only_in_checked_forms(page):
    """Every quoted claim and metric is found (and S2's tally and Table 1 cells), so none is
    checked by accident."""
    assert len(CLAIM.findall(page)) >= 4
    assert len(METRIC.findall(page)) >= 4
    if page.startswith("# S2"):
        assert len(TALLY.findall(page)) >= 1
        assert len(CELL.findall(page)) >= 6


def test_every_claim_the_page_names_is_quoted_in_the_checked_form(page, claims):
    """A claim id named with its numbers in another form would escape the checks below."""
    named = {i for i in re.findall(rf"`({CLAIM_ID})`", page) if i in claims}
    checked = {m["id"] for m in CLAIM.finditer(page)}
    assert not named - checked, sorted(named - checked)


def _wrong_claims(text: str, claims: dict) -> list[str]:
    wrong = []
    for m in CLAIM.finditer(text):
        row = claims[m["id"]]
        none = float("nan") if row["ci"] == [None, None] else float("-inf")
        low, high = (none if v is None else v for v in row["ci"])
        checks = [
            row["effect"] is not None and _matches(m["effect"], row["effect"]),
            _matches(m["low"], low),
            _matches(m["high"], high),
            m["verdict"] == row["verdict"],
        ]
        if not all(checks):
            effect = float("nan") if row["effect"] is None else row["effect"]
            run = f"{effect:.4g} [{low:.4g}, {high:.4g}]"
            wrong.append(f"{m['id']}: page {m[0]!r}, run {run}, {row['verdict']}")
    return wrong


def _wrong_tallies(text: str, claims: dict) -> list[str]:
    wrong = []
    for m in TALLY.finditer(text):
        verdicts = [c["verdict"] for i, c in claims.items() if i.startswith(f"s{m['paper']}.")]
        counts = [verdicts.count(v) for v in ("reproduced", "contradicted", "inconclusive")]
        run = (len(verdicts), *counts)
        if (int(m["n"]), int(m["r"]), int(m["c"]), int(m["i"])) != run:
            wrong.append(f"{m[0]!r}: the run has {run[0]} rows: {run[1]}/{run[2]}/{run[3]}")
    return wrong


def _wrong_metrics(text: str) -> list[str]:
    wrong = []
    for m in METRIC.finditer(text):
        value = json.loads((ROOT / "metrics" / f"{m['file']}.json").read_text())
        for key in re.findall(r"\[([^\]]+)\]", m["keys"]):
            value = value[int(key)] if isinstance(value, list) else value[key]
        if value is None or isinstance(value, bool) or not _matches(m["value"], value):
            wrong.append(f"{m[0]}: the run has {value}")
    return wrong


def test_every_quoted_claim_is_the_committed_runs(page, claims):
    wrong = _wrong_claims(page, claims)
    assert not wrong, "\n".join(wrong)


def test_the_tally_is_the_committed_runs(page, claims):
    wrong = _wrong_tallies(page, claims)
    assert not wrong, "\n".join(wrong)


def test_every_quoted_table1_cell_is_the_committed_runs(page):
    table = json.loads((ROOT / "metrics" / "s2.json").read_text())["table1"]
    for m in CELL.finditer(page):
        value = table[m["corpus"]][METHODS[m["method"]]][m["column"]]
        assert value is not None and _matches(m["value"], value), f"{m[0]}: the run has {value}"


def test_every_quoted_metric_is_the_committed_runs(page):
    wrong = _wrong_metrics(page)
    assert not wrong, "\n".join(wrong)


def test_the_readme_quotes_the_committed_run(claims):
    """README.md's claims, tallies and metrics are checked as a results page's are; a claim id
    it names in backticks is quoted in the claim form."""
    readme = (ROOT / "README.md").read_text()
    named = {i for i in re.findall(rf"`({CLAIM_ID})`", readme) if i in claims}
    unchecked = sorted(named - {m["id"] for m in CLAIM.finditer(readme)})
    wrong = _wrong_claims(readme, claims) + _wrong_tallies(readme, claims) + _wrong_metrics(readme)
    assert not unchecked and not wrong, "\n".join(unchecked + wrong)
