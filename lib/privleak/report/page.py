"""reports/index.html from built cards: a Jinja2 template, figures embedded as data URIs so the
page is one file that opens offline, links relative to reports/ for the files beside it."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from privleak.pipeline import params as params_module
from privleak.pipeline import paths
from privleak.report import ours

TEMPLATES = Path(__file__).parent / "templates"
TABLE_ROWS = 15  # rows of a table shown on its card; the csv link holds the rest


def data_uri(png: Path) -> str:
    """The PNG as a data: URI (the page then needs no file to show it)."""
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def shown(value) -> str:
    """A number to 4 significant digits, NaN as 'n/a'; text unchanged."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    return f"{value:.4g}" if math.isfinite(value) else "n/a"


def table(csv: Path, rows: int = TABLE_ROWS) -> dict:
    """The first `rows` rows of a csv as {columns, rows (formatted cells), more (rows left out)}."""
    frame = pd.read_csv(csv)
    head = frame.head(rows)
    return {
        "columns": [str(c) for c in frame.columns],
        "rows": [[shown(v) for v in record] for record in head.itertuples(index=False)],
        "more": len(frame) - len(head),
    }


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["shown"] = shown
    return env


def render(context: Mapping) -> str:
    """The page for `context` (see notebooks/report.py for its keys)."""
    return environment().get_template("report.html.j2").render(**context)


def _links(path: Path, formats: list[str], figures_href: str) -> list[dict]:
    return [{"href": f"{figures_href}/{path.as_posix()}.{fmt}", "fmt": fmt} for fmt in formats]


def card_view(built, figures: Path, figures_href: str, params_text: str) -> dict:
    """What the template shows of one built card (privleak.report.cards.Built)."""
    card = built.card
    files = []
    for path in built.files:
        png, csv = figures / f"{path.as_posix()}.png", figures / f"{path.as_posix()}.csv"
        files.append(
            {
                "name": path.name,
                "image": data_uri(png) if png.is_file() else None,
                "table": table(csv) if not png.is_file() and csv.is_file() else None,
                "links": _links(path, built.formats[path], figures_href),
            }
        )
    rows = [
        {
            "ref": r.number.ref,
            "row": r.number.row,
            "column": r.number.column,
            "paper": (
                f"{shown(r.number.value)} {r.number.unit}".strip()
                if r.number.value is not None
                else r.number.direction
            ),
            "ours": shown(r.ours),
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
        "agreement": built.agreement,
        "stage": built.stage,
        "notebook": f"{built.stage}/{built.stage}.html",
        "params": params_text,
    }


def _yaml(value) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True).strip()


def context(
    papers, built, summary, params, profile: str, commit: str, changes: dict, outputs: dict
) -> dict:
    """The template's context: per paper (papers: key -> Paper, built: key -> [Built], summary:
    key -> cards.summary) its setup under `profile`, params block and card views; the run's
    commit and changes; the executed notebook of every stage (outputs: run.outputs())."""
    figures_href = "../figures"  # reports/index.html links to figures/ beside reports/

    def stage_params(stage: str) -> str:
        return _yaml(params_module.stage_params(stage, params))

    return {
        "profile": profile,
        "commit": commit,
        "changes": changes,
        "papers": [
            {
                "key": key,
                "title": paper.title,
                "authors": paper.authors,
                "ours": ours.setup(key, params, profile),
                "params": _yaml(params[key][profile]),
                "summary": summary[key],
                "cards": [
                    card_view(b, paths.FIGURES, figures_href, stage_params(b.stage))
                    for b in built[key]
                ],
            }
            for key, paper in papers.items()
        ],
        "notebooks": [
            {"href": f"{stage}/{stage}.html", "name": stage}
            for out, stage in outputs.items()
            if out == f"reports/{stage}" and stage != "report"
        ],
    }
