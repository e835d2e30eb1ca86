"""The papers' own numbers as data: one YAML file per paper under data/papers/, validated here.

A file lists the paper's artifacts in the paper's order as cards. A card names our files under
figures/<dir>/ that show the artifact, the paper's setup, the catalogue Specs it tests, and the
numbers the paper prints (or the direction it states where it prints none), each with an optional
selector of the comparable value in our csv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import yaml
from pydantic import ValidationError, model_validator

from privleak.errors import PrivleakError, require
from privleak.pipeline import paths
from privleak.pipeline.schema.base import Strict, error_line, fail

PAPERS_DIR = paths.DATA / "papers"
PAPERS = ("s0", "s1", "s2", "s3", "s4")  # file stems, in the report's order
Cell = str | int | float | bool


class Ours(Strict):
    """Where our comparable value sits: the row of figures/<paper>/<file>.csv whose columns equal
    `where` (exactly one row; a list allows any of its values, e.g. the model each profile
    runs), column `column`; `of`: the column of that row that counts what the value is a count
    of (shown as "4 of 24 prompts")."""

    file: str
    column: str
    where: dict[str, Cell | list[Cell]] = {}
    of: str | None = None


class Number(Strict):
    """One number of the paper (value, as printed) or one direction it states (no value)."""

    ref: str
    row: str
    column: str
    value: float | None = None
    direction: str | None = None
    unit: str = ""
    quote: str = ""
    ours: Ours | None = None
    note: str = ""

    @model_validator(mode="after")
    def _value_or_direction(self) -> Self:
        if (self.value is None) == (self.direction is None):
            raise fail("needs exactly one of value and direction", "value")
        return self


class Setup(Strict):
    model: str
    dataset: str
    n: str


class Card(Strict):
    """One artifact: `files` are stems under figures/<paper>/, or paths under figures/ where they
    hold a '/' (the first is the main one and names the card); `paper_ref` is the paper's table or
    figure id, None for an artifact of privleak only."""

    id: str
    files: list[str]
    title: str
    paper_ref: str | None
    caption: str
    setup: Setup
    claims: list[str] = []
    note: str = ""
    numbers: list[Number] = []

    @model_validator(mode="after")
    def _main_file(self) -> Self:
        if not self.files or self.files[0].rsplit("/", 1)[-1] != self.id:
            raise fail("must start with the card's id (its main file)", "files")
        return self


class Paper(Strict):
    paper: str
    title: str
    authors: str
    cards: list[Card]

    @model_validator(mode="after")
    def _unique(self) -> Self:
        for what, items in (
            ("card id", [c.id for c in self.cards]),
            ("file", [f for c in self.cards for f in c.files]),
            ("claim spec", [s for c in self.cards for s in c.claims]),
        ):
            repeated = sorted({i for i in items if items.count(i) > 1})
            if repeated:
                raise fail(f"{what} {repeated[0]!r} is on more than one card", "cards")
        return self


def load(path: Path) -> Paper:
    """The validated paper file; PrivleakError naming the file and the first bad key."""
    require(path.is_file(), f"{path}: missing; one YAML file per paper under {PAPERS_DIR}")
    try:
        return Paper.model_validate(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0]
        raise PrivleakError(f"{path}: not YAML ({first})") from None
    except ValidationError as error:
        raise PrivleakError(f"{path}: {error_line(error)}") from None


def load_all(folder: Path = PAPERS_DIR) -> dict[str, Paper]:
    """Every paper file, keyed by stem in PAPERS order."""
    papers = {stem: load(folder / f"{stem}.yaml") for stem in PAPERS}
    for stem, paper in papers.items():
        require(
            paper.paper == stem.upper(),
            f"{folder / stem}.yaml: paper = {paper.paper!r}; allowed: {stem.upper()!r}",
        )
    return papers
