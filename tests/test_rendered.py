"""What a run rendered, opened by real renderers.

The report in headless Chromium (from the system packages): opened from disk, every image has
loaded, every link points at a file, no console error, no network request, every paper section
and card is there and every claim is on exactly one card; a screenshot goes to reports/browser/.
The `dvc plots` of dvc.yaml: `dvc plots show --json` fills every declared plot and Vega-Lite
(vl-convert, offline) draws its marks.

These need what a `dvc repro` built. Without it (a fresh clone before the smoke run) they skip,
unless PRIVLEAK_BROWSER_TEST=1 (`make browser`, CI after `make smoke`), where a missing report,
figure or browser fails them."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pytest
import yaml

from privleak.pipeline import paths
from privleak.report import cards, papers

REPORT = paths.REPORTS / "index.html"
SCREENSHOT = paths.REPORTS / "browser" / "report.png"
LAPTOP = {"width": 1366, "height": 768}
REQUIRED = os.environ.get("PRIVLEAK_BROWSER_TEST") == "1"


def _chromium() -> str | None:
    return os.environ.get("PRIVLEAK_CHROMIUM") or shutil.which("chromium")


def _need(condition: bool, why: str) -> None:
    if not condition:
        if REQUIRED:
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def opened():
    """The report as Chromium shows it: {page, console errors, requests off disk}."""
    _need(REPORT.is_file(), f"{REPORT} is missing; run `dvc repro` (or `make smoke`) first")
    _need(_chromium() is not None, "no chromium on PATH; `make browser` installs it")
    sync_api = _module("playwright.sync_api")
    errors: list[str] = []
    off_disk: list[str] = []

    def refuse(route):
        off_disk.append(route.request.url)
        route.abort()

    with sync_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport=LAPTOP)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route(lambda url: not url.startswith(("file:", "data:")), refuse)
        page.goto(REPORT.as_uri(), wait_until="load")
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOT)
        yield {"page": page, "errors": errors, "off_disk": off_disk}
        browser.close()


def _module(name: str):
    """The module, or (skip / fail as above) when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        _need(False, f"{name} is not installed; `make setup` installs requirements.txt")


def _need_figures() -> None:
    _need((paths.FIGURES / "claims" / "claims.csv").is_file(), "no figures; run `dvc repro` first")


def test_every_artifact_the_paper_files_name_exists_and_every_artifact_has_a_card():
    _need_figures()
    cards.check_files(papers.load_all(), paths.FIGURES, every_file=True)


def test_every_selector_of_ours_picks_one_row_of_this_run():
    _need_figures()
    for key, paper in papers.load_all().items():
        for card in paper.cards:
            for number in card.numbers:
                row = cards.our_row(number, key, paths.FIGURES)
                assert row.ours not in (cards.NOT_RUN, cards.SEVERAL), (card.id, number.row)


def test_every_image_loaded(opened):
    images = opened["page"].evaluate(
        "Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])"
    )
    assert images, "the report shows no image"
    assert [alt for alt, loaded in images if not loaded] == []


def test_every_link_resolves_to_a_file_or_an_anchor(opened):
    page = opened["page"]
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    ids = set(page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
    assert hrefs
    broken = []
    for href in hrefs:
        url = urlparse(href)
        if url.scheme != "file":
            broken.append(href)
        elif url.fragment and Path(unquote(url.path)) == REPORT:
            broken += [] if url.fragment in ids else [href]
        elif not Path(unquote(url.path)).is_file():
            broken.append(href)
    assert broken == []


def test_no_console_error_and_no_network_request(opened):
    assert opened["errors"] == []
    assert opened["off_disk"] == []


def test_every_paper_section_and_card_is_there(opened):
    page = opened["page"]
    for key, paper in papers.load_all().items():
        assert page.locator(f"section#{key}").count() == 1, key
        for card in paper.cards:
            assert page.locator(f"section#{key} article.card#{card.id}").count() == 1, card.id


def test_every_claim_is_on_exactly_one_card(opened):
    shown = opened["page"].evaluate(
        "Array.from(document.querySelectorAll('article.card .claim-id')).map(e => e.textContent)"
    )
    claims = pd.read_csv(paths.FIGURES / "claims" / "claims.csv")["id"]
    assert sorted(shown) == sorted(claims)


def test_it_reads_on_a_laptop_screen(opened):
    # No sideways scrolling of the page at laptop width (wide tables scroll inside their box).
    width = opened["page"].evaluate("document.documentElement.scrollWidth")
    assert width <= LAPTOP["width"]
    assert SCREENSHOT.stat().st_size > 0


def test_dvc_plots_show_draws_every_declared_plot():
    _need_figures()
    vl_convert = _module("vl_convert")
    declared = [
        next(iter(p)) for p in yaml.safe_load((paths.ROOT / "dvc.yaml").read_text())["plots"]
    ]
    shown = subprocess.run(
        ["dvc", "plots", "show", "--json"], cwd=paths.ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    plots = json.loads(shown.stdout)
    assert "errors" not in plots
    assert sorted(plots["data"]) == sorted(declared)
    for name, (plot,) in plots["data"].items():
        assert plot["content"]["data"]["values"], name
        svg = vl_convert.vegalite_to_svg(plot["content"])
        lines = re.findall(r'aria-roledescription="line mark" d="M[^"]*L', svg)
        assert lines, f"{name}: Vega-Lite drew no line"
