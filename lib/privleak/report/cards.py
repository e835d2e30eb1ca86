"""Cards: each artifact of a paper file joined with our files, our values beside the paper's
numbers, and the judged claims it tests. Pure functions over paths and frames; no rendering."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from privleak.claims.spec import (
    CHECK,
    CHECK_OUTCOMES,
    CONTRADICTED,
    DECIDED_MARKS,
    PRIMARY,
    REPRODUCED,
    VERDICTS,
)
from privleak.errors import require
from privleak.report.papers import Card, Number, Paper

# What stands in "ours" when there is no value: the paper number has no selector (no csv of ours
# holds the same quantity), the profile's csv has no such row (or no such file), or several rows
# (a selector that a profile with several models cannot narrow).
NOT_COMPARABLE = "no comparable value"
NOT_RUN = "not run on this profile"
SEVERAL = "several rows on this profile"
# A card agrees with the paper when its claims reproduce and none is contradicted (`agreement`).
AGREEMENTS = ("agrees", "mixed", "disagrees", "undecided", "no claim")


def stem(paper: str, file: str) -> Path:
    """The path, without suffix, of a card file relative to figures/: `file` under the paper's
    folder, or as given when it holds a '/'."""
    return Path(file) if "/" in file else Path(paper) / file


def written(path: Path, figures: Path) -> list[str]:
    """The suffixes (without dot, sorted) of the files figures/`path`.* a render stage wrote."""
    return sorted(p.suffix[1:] for p in figures.glob(f"{path.as_posix()}.*"))


def check_files(papers: Mapping[str, Paper], figures: Path, every_file: bool) -> None:
    """Every figure or table under `figures` is on a card, and (every_file) every card file was
    written; PrivleakError naming the first stray or missing file. A profile may skip files (the
    paper profile fine-tunes nothing), so the report stage checks strays only."""
    placed = set()
    for key, paper in papers.items():
        for card in paper.cards:
            for file in card.files:
                path = stem(key, file)
                require(
                    not every_file or bool(written(path, figures)),
                    f"data/papers/{key}.yaml: card {card.id!r} names {file!r}, but figures/"
                    f"{path} has no file; allowed: stems the render stages write",
                )
                placed.add(path)
    on_disk = {
        p.relative_to(figures).with_suffix("")
        for p in figures.rglob("*")
        if p.is_file() and not p.name.startswith(".")  # DVC's .gitignore files
    }
    stray = sorted(p for p in on_disk - placed if p.parts[0] != "claims")
    require(
        not stray,
        f"figures/{stray[0] if stray else ''}: on no card of data/papers/*.yaml; every artifact "
        "needs a card",
    )


def _plain(value):
    """A csv cell as a Python float or str (numpy scalars included)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return str(value)


def _same(cell, wanted) -> bool:
    if isinstance(wanted, list):
        return any(_same(cell, one) for one in wanted)
    if isinstance(wanted, bool) or isinstance(cell, bool):
        return str(cell).lower() == str(wanted).lower()
    if isinstance(wanted, numbers.Real):
        try:
            return math.isclose(float(cell), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return str(cell) == str(wanted)


@dataclass(frozen=True)
class Row:
    """One line of a card's paper-vs-ours table: ours is a value, or NOT_COMPARABLE, NOT_RUN or
    SEVERAL; of: the count our value is out of (Ours.of), when given."""

    number: Number
    ours: float | str
    of: float | None = None

    @property
    def measured(self) -> bool:
        """Whether the row holds a number of ours (not a missing-value marker, not NaN)."""
        return isinstance(self.ours, float) and not math.isnan(self.ours)


def our_row(number: Number, paper_key: str, figures: Path) -> Row:
    """`number` with our value: the one csv row its selector picks, else NOT_COMPARABLE, NOT_RUN
    or SEVERAL. A column the csv lacks is a typo in the paper file: PrivleakError."""
    ours = number.ours
    if ours is None:
        return Row(number, NOT_COMPARABLE)
    path = figures / f"{stem(paper_key, ours.file)}.csv"
    if not path.is_file():
        return Row(number, NOT_RUN)
    frame = pd.read_csv(path)
    unknown = sorted({ours.column, *ours.where, *([ours.of] if ours.of else [])} - set(frame))
    require(
        not unknown,
        f"data/papers/{paper_key}.yaml: the selector of {number.ref} {number.row!r} / "
        f"{number.column!r} names column {unknown[0] if unknown else ''!r}, which {path.name} "
        f"lacks; allowed: {', '.join(map(str, frame.columns))}",
    )
    picked = pd.Series(True, index=frame.index)
    for column, wanted in ours.where.items():
        picked &= frame[column].map(lambda cell, w=wanted: _same(cell, w)).astype(bool)
    rows = frame[picked]
    if len(rows) != 1:
        return Row(number, NOT_RUN if rows.empty else SEVERAL)
    row = rows.iloc[0]
    return Row(number, _plain(row[ours.column]), float(row[ours.of]) if ours.of else None)


@dataclass(frozen=True)
class Built:
    """A card ready to render: its files (path -> suffixes written; [] when this profile wrote
    none), paper-vs-ours rows, claims (claims.csv records), producing stage and agreement."""

    card: Card
    files: dict[Path, list[str]]
    rows: list[Row]
    claims: list[dict]
    stage: str
    agreement: str


def agreement(verdicts: Sequence[str]) -> str:
    """'agrees' when some claim is reproduced and none contradicted, 'disagrees' the reverse,
    'mixed' with both, 'undecided' when every claim is inconclusive, 'no claim' without any."""
    if not verdicts:
        return "no claim"
    up, down = REPRODUCED in verdicts, CONTRADICTED in verdicts
    if up and down:
        return "mixed"
    return "agrees" if up else "disagrees" if down else "undecided"


def producing_stage(path: Path, outs: Mapping[str, str]) -> str:
    """The dvc.yaml stage whose declared output holds figures/`path` (outs: output -> stage)."""
    target = (Path("figures") / path).as_posix()
    for out, stage in outs.items():
        if target == out or target.startswith(out.rstrip("/") + "/"):
            return stage
    require(False, f"figures/{path}: no dvc.yaml stage declares it as an output")
    return ""


def build(
    papers: Mapping[str, Paper],
    claims: pd.DataFrame,
    figures: Path,
    outs: Mapping[str, str],
) -> dict[str, list[Built]]:
    """Every card of every paper, in the papers' order. `claims`: claims.csv (one row per claim,
    with its catalogue `spec`). Every claim must land on exactly one card."""
    check_files(papers, figures, every_file=False)
    on_a_card = {spec for paper in papers.values() for card in paper.cards for spec in card.claims}
    homeless = sorted(set(claims["spec"]) - on_a_card)
    require(
        not homeless,
        f"claim spec {homeless[0] if homeless else ''!r} is on no card of data/papers/*.yaml; "
        "every claim needs one",
    )
    built: dict[str, list[Built]] = {}
    for key, paper in papers.items():
        built[key] = []
        for card in paper.cards:
            mine = claims[claims["spec"].isin(card.claims)].sort_values("id")
            mine = mine.fillna({"note": ""})
            paths = [stem(key, f) for f in card.files]
            built[key].append(
                Built(
                    card=card,
                    files={path: written(path, figures) for path in paths},
                    rows=[our_row(n, key, figures) for n in card.numbers],
                    claims=mine.to_dict("records"),
                    stage=producing_stage(paths[0], outs),
                    agreement=agreement(list(mine.loc[mine["role"] != CHECK, "verdict"])),
                )
            )
    return built


def verdict_counts(
    built: Built, column: str = "verdict", role: str | None = None
) -> dict[str, int]:
    """{verdict: number of the card's claims}, zeros included, checks left out: per claim
    (`verdict`) or adjusted in its family (`adjusted`: privleak.claims.multiplicity); only the
    claims of one role (primary, secondary) when `role` is given."""
    verdicts = [
        claim[column]
        for claim in built.claims
        if claim.get("role") != CHECK and (role is None or claim.get("role") == role)
    ]
    return {v: verdicts.count(v) for v in VERDICTS}


def summary(built: Sequence[Built]) -> dict[str, int]:
    """One paper's counts: cards, paper numbers, those with a value of ours, claims per verdict
    (zeros included, checks left out), its primary claims after Holm ("primary reproduced",
    ...), every claim adjusted in its family ("adjusted reproduced", ...), checks passed and
    failed, decided verdicts by stability under other floats (stable, fragile, unmeasured) and
    cards per agreement."""
    claims = [claim for b in built for claim in b.claims]
    return {
        "cards": len(built),
        "paper numbers": sum(len(b.card.numbers) for b in built),
        "with ours": sum(row.measured for b in built for row in b.rows),
        **{v: sum(verdict_counts(b)[v] for b in built) for v in VERDICTS},
        **{f"primary {v}": sum(verdict_counts(b, "adjusted", PRIMARY)[v] for b in built)
           for v in VERDICTS},
        **{f"adjusted {v}": sum(verdict_counts(b, "adjusted")[v] for b in built)
           for v in VERDICTS},
        **{f"checks {o}": sum(claim.get("role") == CHECK and CHECK_OUTCOMES[claim["verdict"]] == o
                              for claim in claims) for o in CHECK_OUTCOMES.values()},
        **{
            mark: sum(c.get("role") != CHECK and c.get("stable") == mark for c in claims)
            for mark in DECIDED_MARKS
        },
        **{a: sum(b.agreement == a for b in built) for a in AGREEMENTS},
    }  # fmt: skip
