"""The results pages quote the committed run, and cannot drift from it.

docs/results/s2.md writes every number it quotes in one of three checked forms:
- a claim: `` `s2.<id>`: <effect> [<low>, <high>], <verdict> `` against figures/claims/claims.csv;
- a tally: ``S2 claims: <n> rows: <r> reproduced, <c> contradicted, <i> inconclusive`` against
  the s2.* rows of the same file;
- a Table 1 cell: `` `<corpus>/<method>/<column>` = <value> `` against figures/s2/s2_table1.csv.
Each value must equal the file's, rounded to the decimals the page shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results" / "s2.md"
NUMBER = r"[+\-−]?\d*\.?\d+(?:e[+\-]?\d+)?"
CLAIM = re.compile(
    rf"`(?P<id>s2\.[\w.=\-]+)`:\s+(?P<effect>{NUMBER})\s+"
    rf"\[(?P<low>{NUMBER}|-inf),\s+(?P<high>{NUMBER})\],\s+"
    r"(?P<verdict>reproduced|contradicted|inconclusive)"
)
TALLY = re.compile(
    r"S2 claims:\s+(?P<n>\d+)\s+rows:\s+(?P<r>\d+)\s+reproduced,\s+(?P<c>\d+)\s+contradicted,"
    r"\s+(?P<i>\d+)\s+inconclusive"
)
CELL = re.compile(
    rf"`(?P<corpus>\w+)/(?P<method>[\w.]+)/(?P<column>\w+)`\s+=\s+(?P<value>{NUMBER})"
)


def _value(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    digits = text.replace("−", "").lstrip("+-").split("e")[0]
    return len(digits.split(".")[1]) if "." in digits else 0


def _matches(written: str, actual: float) -> bool:
    if written == "-inf":
        return actual == float("-inf")
    return round(actual, _decimals(written)) == pytest.approx(_value(written), abs=1e-12)


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text()


@pytest.fixture(scope="module")
def claims() -> pd.DataFrame:
    return pd.read_csv(ROOT / "figures" / "claims" / "claims.csv", index_col="id")


def test_the_page_quotes_numbers_only_in_checked_forms(page):
    """Every quoted claim, tally and Table 1 cell is found, so none is checked by accident."""
    assert len(CLAIM.findall(page)) >= 10
    assert len(TALLY.findall(page)) >= 1
    assert len(CELL.findall(page)) >= 6


def test_every_claim_the_page_names_is_quoted_in_the_checked_form(page, claims):
    """A claim id named with its numbers in another form would escape the checks below."""
    named = {i for i in re.findall(r"`(s2\.[\w.=\-]+)`", page) if i in claims.index}
    checked = {m["id"] for m in CLAIM.finditer(page)}
    assert not named - checked, sorted(named - checked)


def test_every_quoted_claim_is_the_committed_runs(page, claims):
    wrong = []
    for m in CLAIM.finditer(page):
        row = claims.loc[m["id"]]
        checks = [
            _matches(m["effect"], row["effect"]),
            _matches(m["low"], row["ci_low"]),
            _matches(m["high"], row["ci_high"]),
            m["verdict"] == row["verdict"],
        ]
        if not all(checks):
            run = f"{row['effect']:.4g} [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"
            wrong.append(f"{m['id']}: page {m[0]!r}, run {run}, {row['verdict']}")
    assert not wrong, "\n".join(wrong)


def test_the_tally_is_the_committed_runs(page, claims):
    s2 = claims[claims.index.str.startswith("s2.")]
    counts = s2["verdict"].value_counts()
    for m in TALLY.finditer(page):
        assert int(m["n"]) == len(s2)
        assert (int(m["r"]), int(m["c"]), int(m["i"])) == tuple(
            int(counts.get(v, 0)) for v in ("reproduced", "contradicted", "inconclusive")
        )


def test_every_quoted_table1_cell_is_the_committed_runs(page):
    table = pd.read_csv(ROOT / "figures" / "s2" / "s2_table1.csv")
    for m in CELL.finditer(page):
        row = table[(table["corpus"] == m["corpus"]) & (table["method"] == m["method"])]
        assert len(row) == 1, m[0]
        assert _matches(m["value"], float(row[m["column"]].iloc[0])), (
            f"{m[0]}: the run has {float(row[m['column']].iloc[0]):.4g}"
        )
