"""S4 (DP-RAG) bad inputs: each is one line naming the culprit and what is allowed.

Params level: a copy of params.yaml with one s4 key changed fails validation with the key path
(and, run through the stage runner, with exit 2 before any work, every output untouched).
Stage level: checks params cannot make (the corpus's privacy units) run in the real s4_retrieve
notebook, which must stop with one line and leave no output behind. And a user's `file:` corpus
(no planted facts) whose documents all score below the DP threshold runs through both stages,
every question answered from the public stream alone, and s4_retrieve says so.
(Library-level checks of the same rules: tests/test_dp_rag.py and tests/test_retrieval.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from privleak.data.records import write_jsonl
from privleak.data.synthetic import generate
from privleak.errors import PrivleakError
from privleak.pipeline import paths, schema
from tests.conftest import tiny_llama, word_tokenizer
from tests.test_bad_runtime_inputs import REPO, Project, project  # noqa: F401 (a fixture)

BLOCK = "s4.embedded"


def params_with(group: str, key: str, value) -> dict:
    tree = schema.load_yaml(paths.PARAMS_FILE.read_text())
    tree["s4"]["embedded"][group][key] = value
    return tree


PARAM_CASES = {
    "epsilon_zero": ("budget", "epsilons", [0.0, 20.0],
                     "budget.epsilons[0] = 0.0: must be a finite number > 0"),
    "epsilon_negative": ("budget", "epsilons", [5.0, -1.0],
                         "budget.epsilons[1] = -1.0: must be a finite number > 0"),
    "delta_zero": ("budget", "delta", 0.0, "budget.delta = 0.0: must be a number in (0, 1)"),
    "delta_one": ("budget", "delta", 1.0, "budget.delta = 1.0: must be a number in (0, 1)"),
    "clip_zero": ("dp_icl", "clip", 0.0, "dp_icl.clip = 0.0: must be a finite number > 0"),
    "clip_negative": ("dp_icl", "clip", -0.5, "dp_icl.clip = -0.5: must be a finite number > 0"),
    "p_zero": ("retrieval", "p", 0.0, "retrieval.p = 0.0: must be a number in (0, 1]"),
    "p_above_one": ("retrieval", "p", 1.5, "retrieval.p = 1.5: must be a number in (0, 1]"),
    "k_zero": ("retrieval", "k", 0, "retrieval.k = 0: must be an integer >= 1"),
    "density_k_zero": ("densities", "k", 0, "densities.k = 0: must be an integer >= 1"),
    "retrieval_epsilon_equal": (
        "budget", "retrieval_epsilon", 5.0,
        "budget.retrieval_epsilon = 5.0: must be < every epsilon (smallest 5.0), so that the "
        "tokens get a share",
    ),
    "retrieval_epsilon_between": (
        "budget", "retrieval_epsilon", 10.0,
        "budget.retrieval_epsilon = 10.0: must be < every epsilon (smallest 5.0)",
    ),
    "cap_above_the_streams_of_a_batch": (
        "retrieval", "max_retrieve", 500,
        "generation.max_batch_streams = 200: must be >= 1 + retrieval.max_retrieve (501): one "
        "question's public and document streams decode together",
    ),
    "no_patient_per_bucket": ("questions", "per_bucket", 0,
                              "questions.per_bucket = 0: must be null or an integer >= 1"),
    "zero_voters": ("sweeps", "voters", [0, 10],
                    "sweeps.voters[0] = 0: must be an integer >= 1"),
    "negative_theta": ("sweeps", "thetas", [-0.1],
                       "sweeps.thetas[0] = -0.1: must be a finite number >= 0"),
    "unknown_template": ("generation", "template", "xml",
                         "generation.template = 'xml': must be one of chat, plain"),
    "unknown_utility": ("retrieval", "utility", "top_j",
                        "retrieval.utility = 'top_j': must be one of top_k, top_p"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARAM_CASES.values(), ids=PARAM_CASES.keys())
def test_bad_s4_param_is_one_line_naming_its_key(case):
    group, key, value, message = case
    with pytest.raises(PrivleakError) as error:
        schema.validate(params_with(group, key, value))
    assert str(error.value) == str(error.value).strip() and "\n" not in str(error.value)
    assert str(error.value).startswith(f"params.yaml: {BLOCK}.{message}"), str(error.value)


def test_the_bounds_themselves_are_allowed():
    """p = 1 (keep the whole mass), max_batch_streams = 1 + max_retrieve, and a retrieval
    epsilon just below the smallest epsilon are valid."""
    tree = params_with("retrieval", "p", 1.0)
    tree["s4"]["embedded"]["generation"]["max_batch_streams"] = 21
    tree["s4"]["embedded"]["budget"] |= {"epsilons": [20.0, 5.0], "retrieval_epsilon": 4.99}
    assert schema.validate(tree).s4.embedded.retrieval.p == 1.0


RUNNER_CASES = {
    "s4_retrieve": ("s4.smoke.retrieval", "k", 0, "s4.smoke.retrieval.k = 0: must be an integer"),
    "s4_generate": ("s4.smoke.budget", "delta", 1.0,
                    "s4.smoke.budget.delta = 1.0: must be a number in (0, 1)"),
}  # fmt: skip


def _edit(block: str, key: str, value):
    def edit(tree):
        node = tree
        for part in block.split("."):
            node = node[part]
        node[key] = value

    return edit


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("privleak: error: "), result.stderr[-2000:]
    return lines[0]


def _untouched(runs: Project) -> None:
    for placeholder, content in runs.placeholders.items():
        assert placeholder.read_text() == content, f"{placeholder} changed"


@pytest.mark.parametrize("stage", RUNNER_CASES)
def test_the_stage_runner_stops_on_a_bad_s4_param_before_any_work(project, stage):  # noqa: F811
    block, key, value, message = RUNNER_CASES[stage]
    project.write_params(_edit(block, key, value))
    line = _one_error_line(project.run("privleak.pipeline.stage", stage))
    assert line.startswith(f"privleak: error: params.yaml: {message}"), line
    _untouched(project)


CORPUS_FILE = "data/external/corpora/medical.jsonl"


def _record(index: int, unit: str | None) -> dict:
    record = {
        "id": f"m{index}",
        "disease": "Flumplenaxism",
        "question": "I am experiencing the following symptoms: Bloating. What is my disease?",
        "request": "I am Ann Lee, and I am experiencing symptoms such as bloating.",
        "response": "Ann Lee has been diagnosed with Flumplenaxism.",
    }
    return record if unit is None else record | {"unit": unit}


UNIT_CASES = {
    "corpus_without_unit_ids": (
        [None, None, None],
        "s4 corpus (source 'file:data/external/corpora/medical.jsonl'): record 0 (id 'm0') has "
        "no privacy-unit id in field 'unit'",
    ),
    "one_record_without_a_unit": (
        ["p0", "p1", ""],
        "record 2 (id 'm2') has no privacy-unit id in field 'unit'",
    ),
    "a_unit_owning_two_documents": (
        ["p0", "p1", "p0"],
        "privacy unit 'p0' owns records 0 and 2; DP-RAG needs one document per unit",
    ),
}


@pytest.mark.parametrize("case", UNIT_CASES.values(), ids=UNIT_CASES.keys())
def test_a_corpus_without_one_document_per_unit_stops_s4_retrieve(project, case):  # noqa: F811
    units, message = case
    corpus = project.root / CORPUS_FILE
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(_record(i, u)) + "\n" for i, u in enumerate(units)))
    project.write_params(_edit("s4.smoke", "corpus", {"source": f"file:{CORPUS_FILE}"}))
    try:
        line = _one_error_line(project.run("privleak.pipeline.stage", "s4_retrieve"))
    finally:
        corpus.unlink()
    assert "stage 's4_retrieve' failed: PrivleakError: " in line and message in line, line
    assert line.endswith("(see reports/failed/s4_retrieve.ipynb)"), line
    _untouched(project)
    # The corpus copy the notebook wrote before its check is gone with the failed run.
    written = project.root / "data" / "interim" / "s4" / "retrieve"
    assert [p.name for p in written.iterdir()] == ["placeholder.txt"]


PUBLISHED_FIELDS = {"id": "patient_id", "unit": "patient_id", "disease": "disease",
                    "request": "patient_request", "response": "doctor_response",
                    "symptoms": "symptom"}  # fmt: skip
PUBLISHED_CASES = {
    "a_mapped_column_missing": (
        {"patient_id": 0, "patient_request": "I feel odd.", "symptom": ["Bloating"],
         "disease": "Flumplenaxism"},
        "field 'response' maps to column 'doctor_response', which record 0 of "
        "'file:data/external/corpora/medical.jsonl' lacks",
    ),
    "no_question_and_no_symptoms": (
        {"patient_id": 0, "patient_request": "I feel odd.", "doctor_response": "Flumplenaxism.",
         "symptom": [], "disease": "Flumplenaxism"},
        "record 0 (id '0') has no 'question' and no 'symptoms' list to derive it from",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", PUBLISHED_CASES.values(), ids=PUBLISHED_CASES.keys())
def test_a_published_like_export_with_a_gap_stops_s4_retrieve(project, case):  # noqa: F811
    row, message = case
    corpus = project.root / CORPUS_FILE
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text(json.dumps(row) + "\n")
    spec = {"source": f"file:{CORPUS_FILE}", "fields": PUBLISHED_FIELDS}
    project.write_params(_edit("s4.smoke", "corpus", spec))
    try:
        line = _one_error_line(project.run("privleak.pipeline.stage", "s4_retrieve"))
    finally:
        corpus.unlink()
    assert "stage 's4_retrieve' failed: PrivleakError: " in line and message in line, line
    _untouched(project)


@pytest.fixture(scope="module")
def public_only_run(tmp_path_factory) -> Path:
    """s4_retrieve and s4_generate (profile smoke, a tiny LM) on a `file:` corpus of 12 patient
    documents with their units (a user's corpus: no planted secrets, so no planted questions),
    the score range clipped to [0.99, 1]: no document reaches the threshold."""
    root = tmp_path_factory.mktemp("s4_public_only")
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    tiny_llama(window=512).save_pretrained(root / "tiny-lm")
    word_tokenizer(add_bos=True).save_pretrained(root / "tiny-lm")
    records, _ = generate("medical_dirichlet", 12, 0, {"diseases": 3, "rare_details": 0})
    write_jsonl(records, root / CORPUS_FILE)
    runs = Project(root, {})

    def edit(tree):
        s4 = tree["s4"]["smoke"]
        s4["lm"] = "tiny-lm"
        s4["corpus"] = {"source": f"file:{CORPUS_FILE}"}
        s4["retrieval"] |= {"score_range": [0.99, 1.0], "max_retrieve": 2}
        s4["generation"] |= {"template": "plain", "max_new_tokens": 2, "max_batch_streams": 3,
                             "rag_k": 1}  # fmt: skip
        s4["densities"] |= {"documents": 5, "draws": 100}

    runs.write_params(edit)
    for stage in ("s4_retrieve", "s4_generate"):
        done = runs.run("privleak.pipeline.stage", stage)
        assert done.returncode == 0, f"{stage}: {done.stderr[-2000:]}"
    return root


def test_no_document_above_the_threshold_is_answered_from_the_public_stream(public_only_run):
    questions = pd.read_parquet(public_only_run / "data/interim/s4/retrieve/questions.parquet")
    assert len(questions) >= 2 and set(questions["kind"]) == {"disease"}
    assert (questions["above"] == 0).all() and questions["chosen"].map(len).eq(0).all()
    executed = (public_only_run / "reports/s4_retrieve/s4_retrieve.ipynb").read_text()
    said = f"{len(questions)} of {len(questions)} questions keep none and are answered from the "
    assert said in executed
    assert "no planted rare details in this corpus" in executed
    responses = pd.read_parquet(public_only_run / "data/interim/s4/generate/responses.parquet")
    dp_rag = responses[(responses["decoder"] == "dp_rag") & (responses["sweep"] == "main")]
    assert len(dp_rag) == 2 * int(questions["fig6"].sum())  # both epsilons
    assert dp_rag["public_only"].all() and (dp_rag["documents"] == 0).all()
    assert (responses.loc[responses["decoder"] == "rag", "documents"] == 1).all()
    planted = pd.read_parquet(public_only_run / "data/interim/s4/generate/planted.parquet")
    assert planted.empty and "log_prob" in planted.columns
