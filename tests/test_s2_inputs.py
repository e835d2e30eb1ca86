"""S2 (PAD against RAG extraction) bad inputs: each is one line naming the culprit and what is
allowed.

Params level: a copy of params.yaml with one s2 key changed fails validation with the key path
(and, run through the stage runner, with exit 2 before any work, every output untouched).
Stage level: an empty `file:` corpus runs into the real s2_index notebook, which must stop with one
line naming the corpus and leave no output behind.
(Library-level checks of the same rules, and of a missing or mismatched Chroma collection:
tests/test_pad.py and tests/test_vector_store.py.)
"""

from __future__ import annotations

import pytest

from privleak.errors import PrivleakError
from privleak.pipeline import paths, schema
from tests.test_bad_runtime_inputs import project  # noqa: F401 (a fixture)
from tests.test_s4_inputs import _edit, _one_error_line, _untouched

BLOCK = "s2.embedded"


def params_with(group: str, key: str, value) -> dict:
    tree = schema.load_yaml(paths.PARAMS_FILE.read_text())
    tree["s2"]["embedded"][group][key] = value
    return tree


PARAM_CASES = {
    "k_zero": ("retrieval", "k", 0, "retrieval.k = 0: must be an integer >= 1"),
    "rerank_top_above_k": ("retrieval", "rerank_top", 7,
                           "retrieval.rerank_top = 7: must be <= k (6)"),
    "epsilon_zero": ("pad", "epsilon", 0.0, "pad.epsilon = 0.0: must be a finite number > 0"),
    "epsilon_negative": ("pad", "epsilon", -0.2, "pad.epsilon = -0.2: must be a finite number > 0"),
    "swept_epsilon_zero": ("sweeps", "epsilons", [0.1, 0.0],
                           "sweeps.epsilons[1] = 0.0: must be a finite number > 0"),
    "amplification_negative": ("pad", "amplification", -1.0,
                               "pad.amplification = -1.0: must be a finite number >= 0"),
    "swept_amplification_negative": (
        "sweeps", "amplifications", [1.0, -2.0],
        "sweeps.amplifications[1] = -2.0: must be a finite number >= 0",
    ),
    "alpha_one": ("accounting", "alpha", 1.0,
                  "accounting.alpha = 1.0: must be a finite number > 1"),
    "alpha_below_one": ("accounting", "alpha", 0.5,
                        "accounting.alpha = 0.5: must be a finite number > 1"),
    "swept_alpha_one": ("accounting", "alphas", [5.0, 1.0],
                        "accounting.alphas[1] = 1.0: must be a finite number > 1"),
    "delta_zero": ("accounting", "delta", 0.0,
                   "accounting.delta = 0.0: must be a number in (0, 1)"),
    "delta_one": ("accounting", "delta", 1.0,
                  "accounting.delta = 1.0: must be a number in (0, 1)"),
    "rouge_rule_unknown": ("leakage", "rouge_rule", "f1",
                           "leakage.rouge_rule = 'f1': must be one of pad, zeng"),
    "rouge_threshold_above_one": ("leakage", "rouge_thresholds", {"pad": 1.5, "zeng": 0.5},
                                  "leakage.rouge_thresholds.pad = 1.5: must be a number in [0, 1]"),
    "topics_unknown": ("attack", "topics", "wiki",
                       "attack.topics = 'wiki': must be one of records, builtin"),
    "commands_empty": ("attack", "commands",
                       {"healthcaremagic": [], "icliniq": ["x"], "enron": ["x"]},
                       "attack.commands.healthcaremagic = []: "),
    "commands_missing_corpus": ("attack", "commands", {"healthcaremagic": ["x"], "icliniq": ["x"]},
                                "corpora.enron: has no commands; add attack.commands.enron or "
                                "attack.commands.default"),
}  # fmt: skip


def test_template_is_chat_or_plain():
    tree = schema.load_yaml(paths.PARAMS_FILE.read_text())
    tree["s2"]["embedded"]["template"] = "xml"
    with pytest.raises(PrivleakError, match=r"s2\.embedded\.template = 'xml': must be one of chat"):
        schema.validate(tree)


@pytest.mark.parametrize("case", PARAM_CASES.values(), ids=PARAM_CASES.keys())
def test_bad_s2_param_is_one_line_naming_its_key(case):
    group, key, value, message = case
    with pytest.raises(PrivleakError) as error:
        schema.validate(params_with(group, key, value))
    assert str(error.value) == str(error.value).strip() and "\n" not in str(error.value)
    assert str(error.value).startswith(f"params.yaml: {BLOCK}.{message}"), str(error.value)


def test_the_bounds_themselves_are_allowed():
    """amplification 0 (no noise beyond sigma_min), rerank_top = k and alpha just above 1."""
    tree = params_with("pad", "amplification", 0.0)
    tree["s2"]["embedded"]["retrieval"] |= {"k": 3, "rerank_top": 3}
    tree["s2"]["embedded"]["accounting"]["alpha"] = 1.001
    assert schema.validate(tree).s2.embedded.pad.amplification == 0.0


RUNNER_CASES = {
    "s2_index": ("s2.smoke.retrieval", "k", 0, "s2.smoke.retrieval.k = 0: must be an integer"),
    "s2_generate": ("s2.smoke.pad", "epsilon", 0.0,
                    "s2.smoke.pad.epsilon = 0.0: must be a finite number > 0"),
    "render_s2": ("s2.smoke.accounting", "delta", 1.0,
                  "s2.smoke.accounting.delta = 1.0: must be a number in (0, 1)"),
}  # fmt: skip


@pytest.mark.parametrize("stage", RUNNER_CASES)
def test_the_stage_runner_stops_on_a_bad_s2_param_before_any_work(project, stage):  # noqa: F811
    block, key, value, message = RUNNER_CASES[stage]
    project.write_params(_edit(block, key, value))
    line = _one_error_line(project.run("privleak.pipeline.stage", stage))
    assert line.startswith(f"privleak: error: params.yaml: {message}"), line
    _untouched(project)


def test_an_empty_corpus_stops_s2_index_with_no_output_left(project):  # noqa: F811
    corpus = project.root / "data" / "external" / "corpora" / "empty.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("")

    def edit(tree):
        tree["s2"]["smoke"]["corpora"] = {
            "mine": {"source": "file:data/external/corpora/empty.jsonl"}
        }
        tree["s2"]["smoke"]["styles"] = {"mine": "health"}
        tree["s2"]["smoke"]["sweep_corpus"] = "mine"

    project.write_params(edit)
    try:
        line = _one_error_line(project.run("privleak.pipeline.stage", "s2_index"))
    finally:
        corpus.unlink()
    assert (
        "stage 's2_index' failed: PrivleakError: corpus 'file:data/external/corpora/empty.jsonl' "
        "has no records" in line
    ), line
    assert line.endswith("(see reports/failed/s2_index.ipynb)"), line
    _untouched(project)
    written = project.root / "data" / "interim" / "s2" / "index"
    assert [p.name for p in written.iterdir()] == ["placeholder.txt"]
