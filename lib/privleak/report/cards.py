"""Cards: each artifact of a paper file joined with our files, our values beside the paper's
numbers, and the judged claims it tests. Pure functions over paths and frames; no rendering."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from privleak.claims.verdicts import CONTRADICTED, REPRODUCED, VERDICTS
from privleak.errors import require
from privleak.report.papers import Card, Number, Ours, Paper

NOT_HERE = "no comparable value on this profile"
# A card agrees with the paper when its claims reproduce and none is contradicted (see `agreement`).
AGREEMENTS = ("agrees", "mixed", "disagrees", "undecided", "no claim")


def stem(paper: str, file: str) -> Path:
    """The path, without suffix, of a card file relative to figures/: `file` under the paper's
    folder, or as given when it holds a '/'."""
    return Path(file) if "/" in file else Path(paper) / file


def check_files(papers: Mapping[str, Paper], figures: Path) -> None:
    """Every card file exists under `figures` (some suffix), and every figure or table there is on
    exactly one card; PrivleakError naming the first stray or missing file otherwise."""
    placed: dict[Path, str] = {}
    for key, paper in papers.items():
        for card in paper.cards:
            for file in card.files:
                path = stem(key, file)
                require(
                    any(figures.glob(f"{path.as_posix()}.*")),
                    f"data/papers/{key}.yaml: card {card.id!r} names {file!r}, but figures/"
                    f"{path} has no file; allowed: stems the render stages write",
                )
                placed[path] = key
    written = {
        p.relative_to(figures).with_suffix("")
        for p in figures.rglob("*")
        if p.is_file() and not p.name.startswith(".")  # DVC's .gitignore files
    }
    stray = sorted(p for p in written if p not in placed and p.parts[0] != "claims")
    require(
        not stray,
        f"figures/{stray[0] if stray else ''}: on no card of data/papers/*.yaml; every artifact "
        "needs a card",
    )


def our_value(number: Number, paper_key: str, figures: Path) -> float | str:
    """Our value for `number`: the one csv row its selector picks, or NOT_HERE (no selector, or
    no such row or column on this profile). A selector that picks several rows is an error."""
    ours: Ours | None = number.ours
    if ours is None:
        return NOT_HERE
    path = figures / f"{stem(paper_key, ours.file)}.csv"
    if not path.is_file():
        return NOT_HERE
    frame = pd.read_csv(path)
    if ours.column not in frame or any(k not in frame for k in ours.where):
        return NOT_HERE
    rows = frame
    for column, wanted in ours.where.items():
        rows = rows[rows[column].map(lambda cell, w=wanted: _same(cell, w))]
    require(
        len(rows) <= 1,
        f"data/papers/{paper_key}.yaml: the selector of {number.ref} {number.row!r} / "
        f"{number.column!r} picks {len(rows)} rows of {path.name}; allowed: one",
    )
    if rows.empty:
        return NOT_HERE
    value = rows[ours.column].iloc[0]
    return float(value) if isinstance(value, int | float) else str(value)


def _same(cell, wanted) -> bool:
    if isinstance(wanted, bool) or isinstance(cell, bool):
        return str(cell).lower() == str(wanted).lower()
    if isinstance(wanted, int | float):
        try:
            return math.isclose(float(cell), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return str(cell) == str(wanted)


@dataclass(frozen=True)
class Row:
    """One line of a card's paper-vs-ours table."""

    number: Number
    ours: float | str


@dataclass(frozen=True)
class Built:
    """A card ready to render: its files, paper-vs-ours rows, claims and producing stage."""

    paper: str
    card: Card
    files: list[Path]
    rows: list[Row]
    claims: list[dict]
    stage: str
    agreement: str
    formats: dict[Path, list[str]] = field(default_factory=dict)


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
    check_files(papers, figures)
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
            files = [stem(key, f) for f in card.files]
            built[key].append(
                Built(
                    paper=key,
                    card=card,
                    files=files,
                    rows=[Row(n, our_value(n, key, figures)) for n in card.numbers],
                    claims=mine.to_dict("records"),
                    stage=producing_stage(files[0], outs),
                    agreement=agreement(list(mine["verdict"])),
                    formats={
                        f: sorted(p.suffix[1:] for p in figures.glob(f"{f.as_posix()}.*"))
                        for f in files
                    },
                )
            )
    return built


def summary(built: Sequence[Built], paper: Paper) -> dict[str, object]:
    """One paper's counts: cards, paper numbers, those with our value, claims per verdict
    (zeros included) and cards per agreement."""
    verdicts = [claim["verdict"] for b in built for claim in b.claims]
    return {
        "cards": len(built),
        "paper numbers": sum(len(card.numbers) for card in paper.cards),
        "with ours": sum(row.ours != NOT_HERE for b in built for row in b.rows),
        **{v: verdicts.count(v) for v in VERDICTS},
        **{a: sum(b.agreement == a for b in built) for a in AGREEMENTS},
    }
