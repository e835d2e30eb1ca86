"""The bad-input catalogue, part 3: S2-S4 inputs that used to end in a library's words or in a
silent wrong result, run through the real stage runner and notebooks (profile smoke).

Each failing case ends with exit status 2, one line naming the param or file and what is allowed,
and every placeholder output unchanged. A corpus of mixed sources (one S2 slot a `file:` copy of
the synthetic records, the others synthetic) runs.
"""

from __future__ import annotations

import pandas as pd
import pytest

from privleak.data.loaders import load_corpus
from privleak.data.records import write_jsonl
from privleak.pipeline import paths
from tests.test_bad_runtime_inputs import build_project, project  # noqa: F401 (a fixture)
from tests.test_s4_inputs import _edit, _one_error_line, _record, _untouched

S4_FILE = "data/external/corpora/medical.jsonl"
S2_FILE = "data/external/corpora/healthcaremagic.jsonl"


def _failure(project, stage: str, edit, files: dict[str, list[dict]]) -> str:  # noqa: F811
    for name, rows in files.items():
        write_jsonl(rows, project.root / name)
    project.write_params(edit)
    try:
        return _one_error_line(project.run("privleak.pipeline.stage", stage))
    finally:
        for name in files:
            (project.root / name).unlink()
        _untouched(project)


def test_an_s4_corpus_with_a_repeated_id_stops_s4_retrieve(project):  # noqa: F811
    # Record 2 carrying record 1's id would hand the generator another unit's document.
    rows = [_record(0, "p0"), _record(1, "p1"), _record(2, "p2") | {"id": "m1"}]
    edit = _edit("s4.smoke", "corpus", {"source": f"file:{S4_FILE}"})
    line = _failure(project, "s4_retrieve", edit, {S4_FILE: rows})
    assert (
        f"records 1 and 2 of corpus 'file:{S4_FILE}' share id 'm1'; every record needs its own id"
        in line
    ), line


def test_a_density_sample_larger_than_the_corpus_is_one_line(project):  # noqa: F811
    rows = [_record(i, f"p{i}") for i in range(3)]
    edit = _edit("s4.smoke", "corpus", {"source": f"file:{S4_FILE}"})
    line = _failure(project, "s4_retrieve", edit, {S4_FILE: rows})
    assert (
        "params s4.smoke.densities.documents = 30: the s4 corpus (source "
        f"'file:{S4_FILE}') holds 3 documents; allowed: at most that many" in line
    ), line


def test_a_news_corpus_whose_records_share_one_id_stops_prepare_data(project):  # noqa: F811
    name = "data/external/corpora/news.jsonl"
    rows = [{"id": "a1", "article": f"story {i}", "highlights": "story"} for i in range(4)]
    edit = _edit("data.smoke", "cnn_dm", {"source": f"file:{name}"})
    line = _failure(project, "prepare_data", edit, {name: rows})
    assert f"records 0 and 1 of corpus 'file:{name}' share id 'a1'" in line, line


def test_more_attack_prompts_than_distinct_ones_is_one_line(project):  # noqa: F811
    line = _failure(project, "s2_index", _edit("s2.smoke.attack", "prompts", 5000), {})
    assert "attack.prompts = 5000 asks for 2500 untargeted prompts, but only 1560 distinct" in line


def test_an_s2_corpus_without_text_stops_s2_index_naming_its_fields(project):  # noqa: F811
    rows = [{"id": f"h{i}", "body": "Patient: my knee hurts."} for i in range(3)]
    edit = _edit("s2.smoke.corpora", "healthcaremagic", {"source": f"file:{S2_FILE}"})
    line = _failure(project, "s2_index", edit, {S2_FILE: rows})
    where = f"s2 corpus 'healthcaremagic' (source 'file:{S2_FILE}')"
    assert f"{where}: record 0 (id 'h0') has no field 'text'" in line, line
    assert line.endswith(
        "(map a column to it with s2.smoke.corpora.healthcaremagic.fields) "
        "(see reports/failed/s2_index.ipynb)"
    ), line


@pytest.mark.skipif(
    not (paths.MODELS / "smollm2-135m-instruct" / "config.json").exists(),
    reason="data/models is absent",
)
def test_a_file_slot_beside_synthetic_ones_runs_s2(tmp_path):
    """One S2 slot read from a file holding the generator's own records (no planted secrets
    travel with it), the others synthetic: s2_index and s2_generate both run."""
    runs = build_project(tmp_path)
    (runs.root / "data" / "models").rename(runs.root / "placeholder-models")
    (runs.root / "data" / "models").symlink_to(paths.MODELS)
    spec = {"source": "synthetic:healthcaremagic", "n": 20}
    write_jsonl(load_corpus(spec["source"], n=spec["n"], seed=0), runs.root / S2_FILE)
    runs.write_params(_edit("s2.smoke.corpora", "healthcaremagic", {"source": f"file:{S2_FILE}"}))
    for stage in ("s2_index", "s2_generate"):
        done = runs.run("privleak.pipeline.stage", stage)
        assert done.returncode == 0, done.stderr[-2000:]
    secrets = pd.read_parquet(runs.root / "data" / "interim" / "s2" / "index" / "secrets.parquet")
    assert "healthcaremagic" not in set(secrets["corpus"]) and len(secrets)
    assert secrets["start"].dtype == "int64"
