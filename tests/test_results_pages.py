"""The results pages quote the committed run, and cannot drift from it.

docs/results/s0.md, s1.md, s2.md, s3.md, s4.md, audit.md, frontier.md and mia.md write every number
of the run they quote in checked forms:
- a claim: `` `<paper>.<id>`: <effect> [<low>, <high>], <verdict> `` against metrics/claims.json;
- a tally: ``S<k> claims: <n> rows: <r> reproduced, <c> contradicted, <i> inconclusive`` against
  the s<k>.* claims of the same file (checks of privleak's own mechanisms left out);
- a primary tally: ``S<k> primary claims: <r> reproduced, <c> contradicted, <i> inconclusive of
  <n>`` against the file's `primary` counts (after Holm);
- a Table 1 cell: `` `<corpus>/<method>/<column>` = <value> `` against metrics/s2.json's table1
  (the committed copy of figures/s2/s2_table1);
- any other metric: `` `<name>.json[<key>][<key>]...` = <value> `` against metrics/<name>.json
  (s0.json, s1.json, s2.json, s3.json, s4.json, audit.json, frontier.json, mia.json, claims.json;
  an integer key indexes a list).
Each value must equal the committed one, rounded to the decimals the page shows. The metrics files
are committed with every run (`dvc.yaml`: cache false), so a fresh clone checks them too.

Any other number on a results page, prose included, is marked for what it is:
- `` `paper: <text>` `` a number the paper (or its official code or published evaluation) reports,
  e.g. `` `paper: 67.8 %` ``;
- `` `set: <text>` `` a constant of our setup: a params.yaml value, a design choice, a size fixed
  by construction, a constant of a formula, e.g. `` `set: 20 samples` ``, `` `set: λ = 0.5` ``.
A number of the run that no metrics file holds is not written at all. The check strips the checked
and the marked forms, the other code spans (identifiers, paths, params keys) and link targets, and
fails on every standalone number left. Not standalone, and so not numbers of the page:
- digits inside a word or glued to one: h128, s0, eps5, AVX2, bfloat16, x_0, 135M, a commit hash
  (421800d), and a number hyphenated onto a name (Llama-2, Phi-3.5, Apache-2.0); a number that
  leads a hyphenated word is a quantity and is checked (50-token, 3-gram, 60-minute);
- references into a paper or a page: §4.2, Fig. 6, Figs. 3–4, Table 1, Eq. 3, Theorem 3.1,
  Def. 3.1, App. C.3, Appendix A, Alg. 1, Algorithm 1;
- citation years: "et al. 2022", "(2021)";
- ordered-list markers ("1. " at a line's start, where Markdown reads a list item: not "110. "
  continuing a paragraph) and heading numbers ("## 2. ").
Superscripts and subscripts (σ², ‖·‖₂) are not decimal digits and are not read.

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
PRIMARY = re.compile(
    r"S(?P<paper>\d) primary claims:\s+(?P<r>\d+)\s+reproduced,\s+(?P<c>\d+)\s+contradicted,"
    r"\s+(?P<i>\d+)\s+inconclusive\s+of\s+(?P<n>\d+)"
)
CELL = re.compile(
    rf"`(?P<corpus>\w+)/(?P<method>[\w.]+)/(?P<column>\w+)`\s+=\s+(?P<value>{NUMBER})"
)

METRIC = re.compile(rf"`(?P<file>\w+)\.json(?P<keys>(?:\[[^\]`]+\])+)`\s+=\s+(?P<value>{NUMBER})")
MARKED = re.compile(r"`(?:paper|set): [^`]+`")
CODE = re.compile(r"```.*?```|`[^`]+`", re.S)
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
REF_NUMBER = r"(?:[A-Z]\.)?\d+(?:\.\d+)*"
REFERENCE = re.compile(
    r"(?:§\s*|\b(?:Figs?\.|Figures?|Tables?|Eqs?\.|Equations?|Theorems?|Lemmas?|Defs?\.|App\.|"
    rf"Appendix|Alg\.|Algorithm)\s+){REF_NUMBER}(?:\s*[–-]\s*{REF_NUMBER})?"
)
CITATION = re.compile(r"\bet al\.,?\s+\d{4}[a-z]?\b|\((?:19|20)\d{2}[a-z]?\)")
ORDERED_ITEM = re.compile(r"^[ \t]*(\d+)\.[ \t]")
HEADING_NUMBER = re.compile(r"^#+[ \t]+\d+(?:\.\d+)*\.?[ \t]")
# Not after a word character or a dot (h128, C.3), nor hyphenated onto a name (Llama-2); not
# followed by a word character (135M, 2C).
STANDALONE = re.compile(
    r"(?<![\w.])(?<![^\W\d_]-)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+\-−]?\d+)?(?![\w])(?!\.\d)"
)


def _blank(match: re.Match) -> str:
    """The match's characters as spaces (lines kept), so positions in the page stay put."""
    return re.sub(r"[^\n]", " ", match[0])


def _without_markers(text: str) -> str:
    """`text` with the ordered-list markers and heading numbers blanked. A line's "N. " is a marker
    where Markdown reads one: after a blank line, within an ordered list, or as "1. " (the one
    number that may interrupt a paragraph); "110. " continuing a paragraph is prose."""
    lines, blank, ordered = [], True, False
    for line in text.split("\n"):
        m = ORDERED_ITEM.match(line)
        if m and (blank or ordered or m[1] == "1"):
            line, ordered = " " * m.end() + line[m.end() :], True
        line = HEADING_NUMBER.sub(_blank, line)
        blank = not line.strip()
        ordered = ordered and not blank
        lines.append(line)
    return "\n".join(lines)


def _unmarked_numbers(text: str) -> list[str]:
    """Every standalone number of `text` outside the checked and marked forms, with its line and
    some context (see the module docstring for what is not standalone)."""
    stripped = text
    forms = (CLAIM, TALLY, PRIMARY, CELL, METRIC, MARKED, CODE, LINK_TARGET, REFERENCE, CITATION)
    for form in forms:
        stripped = form.sub(_blank, stripped)
    stripped = _without_markers(stripped)
    found = []
    for m in STANDALONE.finditer(stripped):
        line = text.count("\n", 0, m.start()) + 1
        context = " ".join(text[max(0, m.start() - 40) : m.end() + 40].split())
        found.append(f"line {line}: {m[0]!r} in ...{context}...")
    return found


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
        verdicts = [c["verdict"] for i, c in claims.items()
                    if i.startswith(f"s{m['paper']}.") and c["role"] != "check"]  # fmt: skip
        counts = [verdicts.count(v) for v in ("reproduced", "contradicted", "inconclusive")]
        run = (len(verdicts), *counts)
        if (int(m["n"]), int(m["r"]), int(m["c"]), int(m["i"])) != run:
            wrong.append(f"{m[0]!r}: the run has {run[0]} rows: {run[1]}/{run[2]}/{run[3]}")
    primary = json.loads((ROOT / "metrics" / "claims.json").read_text())["primary"]
    for m in PRIMARY.finditer(text):
        counted = primary[f"s{m['paper']}"]
        run = (*(counted[v] for v in ("reproduced", "contradicted", "inconclusive")),)
        if (int(m["r"]), int(m["c"]), int(m["i"]), int(m["n"])) != (*run, sum(run)):
            wrong.append(f"{m[0]!r}: the run has {run[0]}/{run[1]}/{run[2]} of {sum(run)}")
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


def test_every_number_on_the_page_is_checked_or_marked(page):
    """A number of the run in prose would drift unseen: each number is in a checked form, or marked
    as the paper's or a constant of the setup."""
    found = _unmarked_numbers(page)
    assert not found, "numbers neither checked nor marked:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    ["PAD leaks 12.5 % less.", "a 30-sample attacker", "between 29-36 steps", "1,000 documents",
     "at δ 1e-3", "(3 of them)", "Fig. 6 shows 0.4", "the stage took\n110. The rest"],
)  # fmt: skip
def test_an_unmarked_number_is_flagged(text):
    assert _unmarked_numbers(text)


@pytest.mark.parametrize(
    "text",
    ["PAD leaks `paper: 12.5 %` less.", "over `set: 20 samples`", "`set: λ = 0.5`",
     "`s2.json[static_sigmas][static=0.5][ppl]` = 34.11", "`icliniq/Summ./repeat_prompts` = 10",
     "`s2.frontier.pad_over_dist`: 0.166 [0.027, 0.384], contradicted",
     "S2 claims: 78 rows: 10 reproduced, 20 contradicted, 48 inconclusive",
     "h128 over h32 on SmolLM2-135M, eps5, AVX2, Llama-2, bfloat16, commit 421800d",
     "§4.2, Fig. 6, Figs. 3–4, Table 1, Eq. 3, Theorem 3.1, App. C.3, Alg. 1",
     "(Carlini et al. 2022) and (2021)", "1. first\n2. second", "text\n\n3. item",
     "a paragraph\n1. item", "## 3. A heading",
     "`figures/s2/s2_table1`", "[design §8](../design.md#8-claims-and-verdicts)"],
)  # fmt: skip
def test_a_checked_or_marked_or_excluded_number_is_not_flagged(text):
    assert not _unmarked_numbers(text)
