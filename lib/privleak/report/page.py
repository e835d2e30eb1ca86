"""reports/index.html from built cards: a Jinja2 template, figures embedded as data URIs so the
page needs no file to show them; links (tables, PDFs, notebooks) are relative to reports/."""

from __future__ import annotations

import base64
import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from privleak.claims.tables import NO_SENTENCE
from privleak.pipeline import params as params_module
from privleak.report import cards, ours
from privleak.report.papers import Paper

TEMPLATES = Path(__file__).parent / "templates"
TABLE_ROWS = 15  # rows of a table shown on its card; the csv link holds the rest
FIGURES_HREF = "../figures"  # reports/index.html sits beside figures/


def data_uri(png: Path) -> str:
    """The PNG as a data: URI (the page then needs no file to show it)."""
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def shown(value) -> str:
    """A number of ours: whole numbers as integers, others to 4 significant digits, NaN as
    'n/a'; text unchanged."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "" if value is None else str(value)
    if not math.isfinite(value):
        return "n/a"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def printed(number) -> str:
    """A paper number as transcribed (value and unit), or the direction it states."""
    if number.value is None:
        return number.direction
    return f"{number.value:g} {number.unit}".strip()


def table(csv: Path, rows: int = TABLE_ROWS) -> dict:
    """The first `rows` rows of a csv as {columns, rows (shown cells), more (rows left out)}."""
    frame = pd.read_csv(csv)
    head = frame.head(rows)
    return {
        "columns": [str(c) for c in frame.columns],
        "rows": [[shown(v) for v in record] for record in head.itertuples(index=False)],
        "more": len(frame) - len(head),
    }


def environment() -> jinja2.Environment:
    """Jinja2 over templates/, autoescaping every value, failing on an undefined name."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shown"] = shown
    env.globals["NO_SENTENCE"] = NO_SENTENCE
    return env


def render(context: Mapping) -> str:
    """The page for `context` (page.context)."""
    return environment().get_template("report.html.j2").render(**context)


def _ours(row: cards.Row) -> str:
    if row.of is None or not row.measured:
        return shown(row.ours)
    return f"{shown(row.ours)} of {shown(row.of)} {row.number.ours.of.replace('_', ' ')}"


def card_view(built: cards.Built, figures: Path, params_text: str) -> dict:
    """What the template shows of one built card."""
    card = built.card
    files = []
    for path, suffixes in built.files.items():
        png, csv = figures / f"{path.as_posix()}.png", figures / f"{path.as_posix()}.csv"
        files.append(
            {
                "name": path.name,
                "image": data_uri(png) if "png" in suffixes else None,
                "table": table(csv) if "png" not in suffixes and "csv" in suffixes else None,
                "links": [
                    {"href": f"{FIGURES_HREF}/{path.as_posix()}.{s}", "fmt": s} for s in suffixes
                ],
            }
        )
    rows = [
        {
            "ref": r.number.ref,
            "row": r.number.row,
            "column": r.number.column,
            "paper": printed(r.number),
            "ours": _ours(r),
            "note": "; ".join(
                text for text in (r.number.quote and f"“{r.number.quote}”", r.number.note) if text
            ),
        }
        for r in built.rows
    ]
    return {
        "id": card.id,
        "title": card.title,
        "paper_ref": card.paper_ref,
        "caption": card.caption,
        "note": card.note,
        "setup": card.setup,
        "files": files,
        "rows": rows,
        "claims": built.claims,
        "counts": cards.verdict_counts(built),
        "agreement": built.agreement,
        "stage": built.stage,
        "notebook": f"{built.stage}/{built.stage}.html",
        "params": params_text,
    }


def _yaml(value) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True).strip()


def context(
    papers: Mapping[str, Paper],
    built: Mapping[str, Sequence[cards.Built]],
    params: Mapping,
    figures: Path,
    run: Mapping,
) -> dict:
    """The template's context: per paper its setup under the run's profile, params block, summary
    and card views; the run (profile, commit, changes: run.changes, outputs: run.outputs); the
    claims' interval level; the executed notebook of every stage."""
    profile = run["profile"]

    def stage_params(stage: str) -> str:
        return _yaml(params_module.stage_params(stage, params))

    return {
        "profile": profile,
        "commit": run["commit"],
        "changes": run["changes"],
        "level": f"{100 * (1 - params['claims'][profile]['alpha']):g} %",
        "papers": [
            {
                "key": key,
                "title": paper.title,
                "authors": paper.authors,
                "ours": ours.setup(key, params, profile),
                "params": _yaml(params[key][profile]),
                "summary": cards.summary(built[key]),
                "cards": [card_view(b, figures, stage_params(b.stage)) for b in built[key]],
            }
            for key, paper in papers.items()
        ],
        "notebooks": [
            {"href": f"{stage}/{stage}.html", "name": stage}
            for out, stage in run["outputs"].items()
            if out == f"reports/{stage}" and stage != "report"
        ],
    }
