"""The report's parts on hand-made fixtures: the paper files' schema and coverage, our value
beside a paper number, a card's agreement, the file and claim checks, and the page template."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from privleak.claims.catalogue import CATALOGUE
from privleak.errors import PrivleakError
from privleak.pipeline import params as params_module
from privleak.pipeline import paths
from privleak.report import cards, ours, page, papers, run
from privleak.report.papers import Number, Ours

DVC = yaml.safe_load((paths.ROOT / "dvc.yaml").read_text())["stages"]


# ---------------------------------------------------------------- the committed paper files


@pytest.fixture(scope="module")
def committed() -> dict[str, papers.Paper]:
    return papers.load_all()


def test_every_catalogue_spec_is_on_exactly_one_card_of_its_paper(committed):
    for key, paper in committed.items():
        mine = sorted(s for s in CATALOGUE if s.split(".")[0] == key)
        placed = sorted(s for card in paper.cards for s in card.claims)
        assert placed == mine, key


def test_every_selector_reads_a_file_of_its_own_paper(committed):
    for key, paper in committed.items():
        files = {f for card in paper.cards for f in card.files}
        for card in paper.cards:
            for number in card.numbers:
                if number.ours is not None:
                    assert number.ours.file in files, (key, card.id, number.ours.file)


def test_the_papers_tables_and_figures_are_transcribed(committed):
    refs = {key: {n.ref for c in p.cards for n in c.numbers} for key, p in committed.items()}
    assert {"Table 1", "Table 2", "Table 3"} <= refs["s0"]
    assert "Table 1" in refs["s1"]
    s2_table1 = [n for c in committed["s2"].cards for n in c.numbers if n.ref == "Table 1"]
    assert len(s2_table1) >= 180  # 2 models x 3 corpora x 5 methods x 6 columns
    assert any(n.direction for c in committed["s3"].cards for n in c.numbers if c.id == "s3_fig1")
    assert any(c.paper_ref == "Fig. 6" for c in committed["s4"].cards)


# ---------------------------------------------------------------- the schema


CARD = {
    "id": "t_fig1",
    "files": ["t_fig1", "t_fig1_data"],
    "title": "A figure",
    "paper_ref": "Fig. 1",
    "caption": "What it shows.",
    "setup": {"model": "M", "dataset": "D", "n": "10"},
    "claims": ["s3.x"],
    "numbers": [{"ref": "Fig. 1", "row": "r", "column": "c", "value": 1.5}],
}


def _write(tmp_path: Path, cards_: list[dict]) -> Path:
    path = tmp_path / "s3.yaml"
    body = {"paper": "S3", "title": "T", "authors": "A", "cards": cards_}
    path.write_text(yaml.safe_dump(body))
    return path


def test_a_valid_paper_file_loads(tmp_path):
    paper = papers.load(_write(tmp_path, [CARD]))
    assert paper.cards[0].numbers[0].value == 1.5


@pytest.mark.parametrize(
    "change, words",
    [
        ({"colour": "red"}, "colour"),
        ({"files": ["other"]}, "must start with the card's id"),
        (
            {"numbers": [{"ref": "x", "row": "r", "column": "c", "value": 1, "direction": "up"}]},
            "exactly one of value and direction",
        ),
        ({"numbers": [{"ref": "x", "row": "r", "column": "c"}]}, "exactly one of value"),
        ({"setup": {"model": "M", "dataset": "D"}}, "setup.n"),
    ],
)
def test_a_bad_card_is_one_line_naming_the_file_and_key(tmp_path, change, words):
    path = _write(tmp_path, [CARD | change])
    with pytest.raises(PrivleakError) as error:
        papers.load(path)
    assert str(error.value).startswith(str(path))
    assert words in str(error.value)
    assert "\n" not in str(error.value)


def test_a_claim_or_file_on_two_cards_is_refused(tmp_path):
    twin = CARD | {"id": "t_fig2", "files": ["t_fig2"]}
    with pytest.raises(PrivleakError, match="claim spec 's3.x' is on more than one card"):
        papers.load(_write(tmp_path, [CARD, twin]))
    twin = CARD | {"id": "t_fig2", "files": ["t_fig2", "t_fig1_data"], "claims": []}
    with pytest.raises(PrivleakError, match="file 't_fig1_data' is on more than one card"):
        papers.load(_write(tmp_path, [CARD, twin]))


def test_a_file_that_is_not_yaml_is_one_line(tmp_path):
    path = tmp_path / "s3.yaml"
    path.write_text("cards: [unclosed")
    with pytest.raises(PrivleakError, match="not YAML"):
        papers.load(path)


# ---------------------------------------------------------------- our value, agreement


@pytest.fixture
def figures(tmp_path) -> Path:
    root = tmp_path / "figures"
    (root / "s3").mkdir(parents=True)
    pd.DataFrame(
        {
            "policy": ["keyword", "keyword", "classifier"],
            "eps": [1.0, 8.0, 1.0],
            "v": [0.1, 0.2, 0.3],
        }
    ).to_csv(root / "s3" / "t_fig1_data.csv", index=False)
    (root / "s3" / "t_fig1.png").write_bytes(b"\x89PNG")
    return root


def _number(**selector) -> Number:
    return Number(ref="Fig. 1", row="r", column="c", value=1.0, ours=Ours(**selector))


def test_our_value_is_the_one_row_the_selector_picks(figures):
    picked = _number(file="t_fig1_data", column="v", where={"policy": "keyword", "eps": 8})
    row = cards.our_row(picked, "s3", figures)
    assert row.ours == 0.2 and row.of is None and row.measured
    either = _number(file="t_fig1_data", column="v", where={"policy": ["classifier", "x"]})
    assert cards.our_row(either, "s3", figures).ours == 0.3  # a list allows any of its values
    counted = _number(file="t_fig1_data", column="v", where={"eps": 8}, of="eps")
    assert cards.our_row(counted, "s3", figures).of == 8.0
    assert page._ours(cards.our_row(counted, "s3", figures)) == "0.2 of 8 eps"


def test_a_missing_value_of_ours_says_why(figures):
    bare = Number(ref="Fig. 1", row="r", column="c", direction="up")
    assert cards.our_row(bare, "s3", figures).ours == cards.NOT_COMPARABLE
    # Every key is checked even after an earlier one has ruled out every row.
    absent = _number(file="t_fig1_data", column="v", where={"eps": 9, "policy": "keyword", "v": 1})
    assert cards.our_row(absent, "s3", figures).ours == cards.NOT_RUN
    no_file = _number(file="t_fig9_data", column="v")
    assert cards.our_row(no_file, "s3", figures).ours == cards.NOT_RUN
    two_rows = _number(file="t_fig1_data", column="v", where={"eps": 1})
    assert cards.our_row(two_rows, "s3", figures).ours == cards.SEVERAL
    assert not cards.our_row(two_rows, "s3", figures).measured


def test_a_selector_naming_a_column_the_csv_lacks_is_one_line(figures):
    typo = _number(file="t_fig1_data", column="v", where={"polcy": "keyword"})
    with pytest.raises(PrivleakError, match="names column 'polcy', which t_fig1_data.csv lacks"):
        cards.our_row(typo, "s3", figures)


@pytest.mark.parametrize(
    "value, text",
    [(4.0, "4"), (130.47, "130.5"), (1.066e5, "106600"), (0.0012345, "0.001234"),
     (float("nan"), "n/a"), ("keyword", "keyword"), (True, "True")],
)  # fmt: skip
def test_our_numbers_show_whole_numbers_whole_and_others_to_four_digits(value, text):
    assert page.shown(value) == text


def test_a_paper_number_shows_as_transcribed():
    assert page.printed(Number(ref="T", row="r", column="c", value=130.47, unit="%")) == "130.47 %"
    assert page.printed(Number(ref="T", row="r", column="c", value=1.18e-08)) == "1.18e-08"
    assert page.printed(Number(ref="T", row="r", column="c", direction="A > B")) == "A > B"


@pytest.mark.parametrize(
    "verdicts, expected",
    [
        ([], "no claim"),
        (["reproduced", "inconclusive"], "agrees"),
        (["contradicted"], "disagrees"),
        (["reproduced", "contradicted"], "mixed"),
        (["inconclusive", "inconclusive"], "undecided"),
    ],
)
def test_a_card_agrees_when_a_claim_reproduces_and_none_is_contradicted(verdicts, expected):
    assert cards.agreement(verdicts) == expected


# ---------------------------------------------------------------- files and claims on cards


def _paper(card: dict = CARD) -> dict[str, papers.Paper]:
    return {"s3": papers.Paper.model_validate({"paper": "S3", "title": "T", "authors": "A",
                                              "cards": [card]})}  # fmt: skip


CLAIMS = pd.DataFrame(
    {
        "id": ["s3.x.a", "s3.x.b", "s3.x.c"],
        "spec": ["s3.x", "s3.x", "s3.x"],
        "role": ["primary", "secondary", "check"],
        "verdict": ["reproduced", "inconclusive", "contradicted"],
        "adjusted": ["reproduced", "inconclusive", "contradicted"],
        "method": ["t", "t", "certified (every unit)"],
        "p_value": [0.01, 0.3, None],
        "stable": ["fragile", "not decided", "stable"],
        "note": ["", None, ""],
        "quote": "q",
        "where": "Fig. 1",
        "effect_name": "e",
        "units": "6 runs",
        "effect": [0.5, 0.1, -0.1],
        "ci_low": [0.2, -0.1, -0.1],
        "ci_high": [0.8, 0.3, -0.1],
    }  # fmt: skip
)
OUTS = {"figures/s3": "render_s3"}


def test_a_file_this_profile_did_not_write_is_absent_and_the_strict_check_names_it(figures):
    (figures / "s3" / "t_fig1_data.csv").unlink()
    built = cards.build(_paper(), CLAIMS, figures, OUTS)["s3"][0]
    assert built.files[Path("s3/t_fig1_data")] == []
    with pytest.raises(PrivleakError, match="card 't_fig1' names 't_fig1_data'"):
        cards.check_files(_paper(), figures, every_file=True)


def test_a_figure_on_no_card_is_named(figures):
    (figures / "s3" / "t_extra.png").write_bytes(b"\x89PNG")
    with pytest.raises(PrivleakError, match="figures/s3/t_extra: on no card"):
        cards.build(_paper(), CLAIMS, figures, OUTS)


def test_a_claim_whose_spec_is_on_no_card_is_named(figures):
    stray = pd.concat([CLAIMS, CLAIMS.assign(id="s3.y.a", spec="s3.y")])
    with pytest.raises(PrivleakError, match="claim spec 's3.y' is on no card"):
        cards.build(_paper(), stray, figures, OUTS)


def test_a_card_carries_its_claims_rows_and_stage(figures):
    built = cards.build(_paper(), CLAIMS, figures, OUTS)["s3"][0]
    assert [c["id"] for c in built.claims] == ["s3.x.a", "s3.x.b", "s3.x.c"]
    assert built.claims[1]["note"] == ""
    assert built.agreement == "agrees"  # the failed check is no claim of the paper
    assert built.stage == "render_s3"
    assert built.files[Path("s3/t_fig1")] == ["png"]
    assert cards.verdict_counts(built) == {"reproduced": 1, "contradicted": 0, "inconclusive": 1}
    summary = cards.summary([built])
    assert summary["reproduced"] == 1 and summary["inconclusive"] == 1
    assert summary["contradicted"] == 0  # the check is counted apart
    assert (summary["primary reproduced"], summary["primary inconclusive"]) == (1, 0)
    assert (summary["adjusted reproduced"], summary["adjusted inconclusive"]) == (1, 1)
    assert (summary["checks pass"], summary["checks fail"]) == (0, 1)
    assert (summary["stable"], summary["fragile"], summary["unmeasured"]) == (0, 1, 0)
    assert summary["paper numbers"] == 1 and summary["with ours"] == 0
    assert summary["agrees"] == 1 and summary["cards"] == 1


def test_a_file_no_stage_declares_is_refused():
    with pytest.raises(PrivleakError, match="figures/s9/x: no dvc.yaml stage"):
        cards.producing_stage(Path("s9/x"), OUTS)


def test_render_stages_own_the_figure_folders():
    outputs = run.outputs()
    assert outputs["figures/s2"] == "render_s2"
    assert outputs["figures/foundation"] == "render_context_gain"


# ---------------------------------------------------------------- the stage and the page


def test_the_report_stage_depends_on_every_figure_notebook_and_metric():
    deps = set(DVC["report"]["deps"])
    for name, stage in DVC.items():
        for out in stage.get("outs", []) + stage.get("metrics", []):
            out = next(iter(out)) if isinstance(out, dict) else out
            if (out.startswith("reports/") and name != "report") or out.startswith(
                ("figures/", "metrics/")
            ):
                assert out in deps, f"report does not depend on {out} ({name})"
    assert {"metrics/claims.json", "metrics/s2.json", "figures/claims"} <= deps


def test_the_smoke_profile_is_named_by_what_it_runs():
    params = params_module.load()
    smoke = {key: ours.setup(key, params, "smoke") for key in papers.PAPERS}
    family = "the tiny family LMs trained here (h8, h16, h24, h32)"
    assert smoke["s1"].model == family
    assert smoke["s2"].model == "smollm2-135m-instruct"
    assert smoke["s2"].n == "2 attack prompts per corpus"
    assert smoke["s3"].model == "data/family/h32 (a tiny family LM)"
    assert smoke["s3"].dataset == "synthetic:dialogs (60 records)"
    assert smoke["s4"].n == "2 questions per frequency bucket"


def test_the_paper_profile_is_named_by_what_it_runs():
    params = params_module.load()
    paper = {key: ours.setup(key, params, "paper") for key in papers.PAPERS}
    assert paper["s1"].model == ", ".join(params["s1"]["paper"]["scores"]["models"])
    assert paper["s3"].model == params["s3"]["paper"]["base"]
    assert paper["s4"].n == "every question"  # per_bucket: null asks them all
    assert paper["s4"].dataset.endswith("(every record)")
    with pytest.raises(PrivleakError, match="paper 's9' is unknown"):
        ours.setup("s9", params, "paper")


def test_the_page_escapes_text_and_embeds_figures(figures):
    tricky = _paper(CARD | {"caption": "<script>alert(1)</script>"})
    built = cards.build(tricky, CLAIMS, figures, OUTS)
    view = page.card_view(built["s3"][0], figures, "seed: 0")
    assert view["files"][0]["image"] == "data:image/png;base64,iVBORw=="
    assert view["files"][1]["table"]["rows"][0] == ["keyword", "1", "0.1"]
    run_ = {
        "profile": "smoke",
        "commit": "abc",
        "changes": {"headline": "h", "moved": []},
        "outputs": OUTS | {"reports/render_s3": "render_s3"},
    }
    context = page.context(tricky, built, params_module.load(), figures, run_)
    assert context["level"] == "95 %"
    assert context["notebooks"] == [{"href": "render_s3/render_s3.html", "name": "render_s3"}]
    html = page.render(context)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="../figures/s3/t_fig1_data.csv"' in html
    assert html.count('class="claim-id"') == 3  # the two claims and the check
    assert html.count("profile smoke · commit <code>abc</code>") == 1  # on the one card
