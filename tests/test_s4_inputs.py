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
import re
import shutil
import types
import typing
from pathlib import Path

import pandas as pd
import pytest

from privleak.data.records import write_jsonl
from privleak.data.synthetic import generate
from privleak.errors import PrivleakError
from privleak.pipeline import paths, schema
from privleak.pipeline.schema.base import Strict
from privleak.pipeline.schema.s4 import S4
from tests.conftest import tiny_llama, word_tokenizer
from tests.test_bad_runtime_inputs import REPO, Project, project  # noqa: F401 (a fixture)

BLOCK = "s4.embedded"


def params_with(group: str, key: str, value) -> dict:
    """The repository's params with s4.embedded.<group>.<key> set to value (key may be dotted;
    group "" for a key of the block itself)."""
    tree = schema.load_yaml(paths.PARAMS_FILE.read_text())
    node = tree["s4"]["embedded"]
    *parents, last = case_path(group, key).split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return tree


def case_path(group: str, key: str) -> str:
    return f"{group}.{key}" if group else key


def _strict_model(annotation) -> type[Strict] | None:
    """The Strict model an annotation is, or holds as an alternative (`S3FineTune | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, Strict):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for alternative in typing.get_args(annotation):
            if model := _strict_model(alternative):
                return model
    return None


def leaf_paths(model: type[Strict], prefix: str = "") -> list[str]:
    """Every leaf key path of a block model: nested Strict models are walked into, and so are
    the values of a dict of Strict models (such as s2 corpora, whose names become `*`)."""
    leaves = []
    for name, field in model.model_fields.items():
        annotation, path = field.annotation, prefix + name
        if nested := _strict_model(annotation):
            leaves += leaf_paths(nested, path + ".")
        elif typing.get_origin(annotation) is dict and (
            values := _strict_model(typing.get_args(annotation)[1])
        ):
            leaves += leaf_paths(values, path + ".*.")
        else:
            leaves.append(path)
    return leaves


def uncovered(model: type[Strict], case_paths: list[str]) -> list[str]:
    """The leaf paths of `model` no case path names: a case covers a leaf when its path is the
    leaf's (`*` standing for any one key) or lies below it (`corpus.options.domains`,
    `attack.commands.default`)."""

    def covers(leaf: str, path: str) -> bool:
        pattern = r"[^.]+".join(map(re.escape, leaf.split("*")))
        return re.fullmatch(pattern + r"(?:[.\[].*)?", path) is not None

    return [leaf for leaf in leaf_paths(model) if not any(covers(leaf, p) for p in case_paths)]


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
    "lm_empty": ("", "lm", "", "lm = '': must be a non-empty string"),
    "lm_dtype_abbreviated": (
        "", "lm_dtype", "bf16",
        "lm_dtype = 'bf16': must be null or one of float32, float16, bfloat16",
    ),
    "corpus_generator_typo": (
        "corpus", "source", "synthetic:medical",
        "corpus.source = 'synthetic:medical': unknown synthetic generator; allowed: "
        "synthetic:cnn_dm, synthetic:dialogs, synthetic:enron, synthetic:healthcaremagic, "
        "synthetic:icliniq, synthetic:medical_dirichlet, synthetic:pretrain, synthetic:pubmedqa",
    ),
    "corpus_n_float": ("corpus", "n", 1000.0,
                       "corpus.n = 1000.0: must be null or an integer >= 1"),
    "corpus_n_below_the_density_documents": ("corpus", "n", 20,
                                             "densities.documents = 30: must be <= corpus.n (20)"),
    "corpus_field_mapped_to_a_number": (
        "corpus", "fields", {"text": 3},
        "corpus.fields = {text: 3}: must be a mapping of canonical names to source columns, "
        "e.g. {text: body}",
    ),
    "corpus_option_typo": (
        "corpus", "options.concentraton", 0.5,
        "corpus.options.concentraton: unknown key; did you mean 'concentration'?",
    ),
    "corpus_concentration_zero": (
        "corpus", "options.concentration", 0.0,
        "corpus.options.concentration = 0.0: must be a finite number > 0",
    ),
    "corpus_revision_of_a_synthetic_source": (
        "corpus", "revision", "main",
        "corpus.revision = 'main': applies only to hf: sources",
    ),
    "embed_batch_size_float": ("", "embed_batch_size", 64.0,
                               "embed_batch_size = 64.0: must be an integer >= 1"),
    "epsilons_one_number": ("budget", "epsilons", 5.0, "budget.epsilons = 5.0: must be a list"),
    "epsilons_repeated": ("budget", "epsilons", [5.0, 5.0],
                          "budget.epsilons[1] = 5.0: repeats an earlier item"),
    "retrieval_alpha_zero": ("retrieval", "alpha", 0.0,
                             "retrieval.alpha = 0.0: must be a finite number > 0"),
    "score_range_reversed": (
        "retrieval", "score_range", [0.8, -0.5],
        "retrieval.score_range = [0.8, -0.5]: must be [low, high] with -1 <= low < high <= 1 "
        "(cosine scores)",
    ),
    "score_range_one_number": ("retrieval", "score_range", 0.8,
                               "retrieval.score_range = 0.8: must be a list"),
    "max_retrieve_float": ("retrieval", "max_retrieve", 20.0,
                           "retrieval.max_retrieve = 20.0: must be null or an integer >= 1"),
    "dp_icl_alpha_text": ("dp_icl", "alpha", "1",
                          "dp_icl.alpha = '1': must be a finite number > 0"),
    "theta_negative": ("dp_icl", "theta", -0.01,
                       "dp_icl.theta = -0.01: must be a finite number >= 0"),
    "max_new_tokens_zero": ("generation", "max_new_tokens", 0,
                            "generation.max_new_tokens = 0: must be an integer >= 1"),
    "min_new_tokens_above_max": ("generation", "min_new_tokens", 10,
                                 "generation.min_new_tokens = 10: must be <= max_new_tokens (7)"),
    "min_new_tokens_negative": ("generation", "min_new_tokens", -1,
                                "generation.min_new_tokens = -1: must be an integer >= 0"),
    "max_batch_streams_zero": ("generation", "max_batch_streams", 0,
                               "generation.max_batch_streams = 0: must be an integer >= 1"),
    "rag_k_float": ("generation", "rag_k", 5.0, "generation.rag_k = 5.0: must be an integer >= 1"),
    "answer_prefix_null": ("generation", "answer_prefix", None,
                           "generation.answer_prefix = null: must be a string"),
    "planted_negative": ("questions", "planted", -1,
                         "questions.planted = -1: must be null or an integer >= 0"),
    "voters_one_number": ("sweeps", "voters", 10, "sweeps.voters = 10: must be a list"),
    "voters_repeated": ("sweeps", "voters", [10, 10],
                        "sweeps.voters[1] = 10: repeats an earlier item"),
    "voters_min_documents_zero": ("sweeps", "voters_min_documents", 0,
                                  "sweeps.voters_min_documents = 0: must be an integer >= 1"),
    "thetas_repeated": ("sweeps", "thetas", [1.0, 1.0],
                        "sweeps.thetas[1] = 1.0: repeats an earlier item"),
    "thetas_min_documents_float": ("sweeps", "thetas_min_documents", 100.0,
                                   "sweeps.thetas_min_documents = 100.0: must be an integer >= 1"),
    "swept_epsilon_at_the_threshold": (
        "sweeps", "epsilons", [0.5],
        "sweeps.epsilons = [0.5]: must be > budget.retrieval_epsilon (0.5), so that the tokens "
        "get a share",
    ),
    "swept_epsilon_of_the_budget": (
        "sweeps", "epsilons", [1.0, 20.0],
        "sweeps.epsilons = [20.0]: must not repeat budget.epsilons (they are answered already)",
    ),
    "published_tokens_zero": ("published", "max_new_tokens", 0,
                              "published.max_new_tokens = 0: must be an integer >= 1"),
    "published_epsilon_negative": ("published", "epsilons", [-1.0],
                                   "published.epsilons[0] = -1.0: must be a finite number > 0"),
    "published_per_bucket_zero": ("published", "per_bucket", 0,
                                  "published.per_bucket = 0: must be null or an integer >= 1"),
    "density_documents_above_corpus": ("densities", "documents", 2000,
                                       "densities.documents = 2000: must be <= corpus.n (1000)"),
    "density_epsilon_zero": ("densities", "epsilon", 0.0,
                             "densities.epsilon = 0.0: must be a finite number > 0"),
    "density_p_above_one": ("densities", "p", 1.5,
                            "densities.p = 1.5: must be a number in (0, 1]"),
    "density_draws_float": ("densities", "draws", 20000.0,
                            "densities.draws = 20000.0: must be an integer >= 100"),
    "density_draws_too_few": ("densities", "draws", 10,
                              "densities.draws = 10: must be an integer >= 100"),
    "score_range_three_numbers": ("retrieval", "score_range", [-0.5, 0.5, 0.8],
                                  "retrieval.score_range = [-0.5, 0.5, 0.8]: must hold at most 2 "
                                  "items"),
    "score_range_text": ("retrieval", "score_range", [-0.5, "0.8"],
                         "retrieval.score_range[1] = '0.8': must be a number"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARAM_CASES.values(), ids=PARAM_CASES.keys())
def test_bad_s4_param_is_one_line_naming_its_key(case):
    group, key, value, message = case
    with pytest.raises(PrivleakError) as error:
        schema.validate(params_with(group, key, value))
    assert str(error.value) == str(error.value).strip() and "\n" not in str(error.value)
    assert str(error.value).startswith(f"params.yaml: {BLOCK}.{message}"), str(error.value)


def test_the_catalogue_covers_every_s4_param():
    """Every leaf param of the s4 block has a bad-value case, so a param added to S4 without
    one fails here."""
    leaves = leaf_paths(S4)
    assert {"lm", "corpus.options", "retrieval.score_range", "densities.draws"} <= set(leaves)
    assert not uncovered(S4, [case_path(group, key) for group, key, *_ in PARAM_CASES.values()])


def test_the_bounds_themselves_are_allowed():
    """p = 1 (keep the whole mass), max_batch_streams = 1 + max_retrieve, and a retrieval
    epsilon just below the smallest epsilon are valid."""
    tree = params_with("retrieval", "p", 1.0)
    tree["s4"]["embedded"]["generation"]["max_batch_streams"] = 21
    tree["s4"]["embedded"]["budget"] |= {"epsilons": [20.0, 5.0], "retrieval_epsilon": 4.99}
    tree["s4"]["embedded"]["sweeps"]["epsilons"] = [50.0]  # a sweep above the threshold too
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
    assert len(dp_rag) == 3 * int(questions["fig6"].sum())  # both epsilons and the swept one
    assert dp_rag["public_only"].all() and (dp_rag["documents"] == 0).all()
    assert (responses.loc[responses["decoder"] == "rag", "documents"] == 1).all()
    planted = pd.read_parquet(public_only_run / "data/interim/s4/generate/planted.parquet")
    assert planted.empty and "log_prob" in planted.columns
