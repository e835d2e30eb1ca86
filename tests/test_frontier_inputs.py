"""Frontier bad inputs: each is one line naming the culprit and what is allowed.

Params level: a copy of params.yaml with one frontier key changed fails validation with the key
path; every leaf of the block has a case. Stage level: the stage runner stops on a bad frontier
param before any work. (Library-level checks: tests/test_frontier.py.)
"""

from __future__ import annotations

import copy

import pytest

from privleak.errors import PrivleakError
from privleak.pipeline import paths, schema
from privleak.pipeline.schema.frontier import Frontier
from tests.test_bad_runtime_inputs import Project, project  # noqa: F401 (a fixture)
from tests.test_s4_inputs import _edit, _one_error_line, _untouched, case_path, uncovered

BLOCK = "frontier.embedded"
TREE = schema.load_yaml(paths.PARAMS_FILE.read_text())


def params_with(group: str, key: str, value) -> dict:
    """The repository's params with frontier.embedded.<group>.<key> set to value."""
    tree = copy.deepcopy(TREE)
    node = tree["frontier"]["embedded"]
    *parents, last = case_path(group, key).split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return tree


PARAM_CASES = {
    "top_contexts_zero": ("", "top_contexts", 0,
        "top_contexts = 0: must be an integer >= 1"),
    "top_contexts_above_rag_k": ("", "top_contexts", 6,
        "top_contexts = 6: must be <= s4.embedded.generation.rag_k (5): a unit's contexts are "
        "the first of s4_retrieve's top documents"),
    "units_zero": ("", "units", 0,
        "units = 0: must be null or an integer >= 1"),
    "units_float": ("", "units", 2.0,
        "units = 2.0: must be null or an integer >= 1"),
    "temperature_zero": ("", "temperature", 0.0,
        "temperature = 0.0: must be a finite number > 0"),
    "command_empty": ("attack", "command", ' ',
        "attack.command = ' ': must be a non-empty string"),
    "attack_tokens_zero": ("attack", "max_new_tokens", 0,
        "attack.max_new_tokens = 0: must be an integer >= 1"),
    "cue_words_zero": ("attack", "cue_words", 0,
        "attack.cue_words = 0: must be an integer >= 1"),
    "kind_unknown": ("attack", "kinds", ['email'],
        "attack.kinds[0] = 'email': must be one of name, rare_detail"),
    "streams_float": ("", "max_batch_streams", 64.0,
        "max_batch_streams = 64.0: must be an integer >= 1"),
    "static_zero": ("defenses", "static", [0.0],
        "defenses.static[0] = 0.0: must be a number in (0, 1e+30] (float32 logits overflow "
        "beyond it)"),
    "pad_negative": ("defenses", "pad", [-0.1],
        "defenses.pad[0] = -0.1: must be a finite number > 0"),
    "cid_above_one": ("defenses", "cid", [1.5],
        "defenses.cid[0] = 1.5: must be a number in [0, 1]"),
    "bounded_zero": ("defenses", "bounded_cid", [0.0],
        "defenses.bounded_cid[0] = 0.0: must be a finite number > 0"),
    "dp_icl_repeated": ("defenses", "dp_icl", [5.0, 5.0],
        "defenses.dp_icl[1] = 5.0: repeats an earlier item"),
    "dist_negative": ("defenses", "dist", [-0.1],
        "defenses.dist[0] = -0.1: must be a finite number >= 0"),
    "summ_knob": ("defenses", "summ", [1.0],
        "defenses.summ = [1.0]: has no knob: give [] to run it, or leave it out"),
    "keyword_knob": ("defenses", "redact_keyword", [0.5],
        "defenses.redact_keyword = [0.5]: has no knob: give [] to run it, or leave it out"),
    "classifier_one": ("defenses", "redact_classifier", [1.0],
        "defenses.redact_classifier[0] = 1.0: must be a number in (0, 1)"),
    "defense_typo": ("defenses", "statik", [1.0],
        "defenses.statik: unknown key; did you mean 'static'?"),
    "amplification_negative": ("pad", "amplification", -1.0,
        "pad.amplification = -1.0: must be a finite number >= 0"),
    "min_sensitivity_zero": ("pad", "min_sensitivity", 0.0,
        "pad.min_sensitivity = 0.0: must be a number in (0, 1]"),
    "tau_conf_above_one": ("pad", "tau_conf", 1.5,
        "pad.tau_conf = 1.5: must be a number in [0, 1]"),
    "tau_margin_negative": ("pad", "tau_margin", -2.0,
        "pad.tau_margin = -2.0: must be a finite number >= 0"),
    "weights_two": ("pad", "weights", [0.3, 0.2],
        "pad.weights = [0.3, 0.2]: must hold at least 3 items"),
    "style_unknown": ("summary", "style", 'abstract',
        "summary.style = 'abstract': must be one of extract, paraphrase"),
    "summary_tokens_zero": ("summary", "max_new_tokens", 0,
        "summary.max_new_tokens = 0: must be an integer >= 1"),
    "keywords_empty": ("redaction", "keywords", [],
        "redaction.keywords = []: must not be empty"),
    "window_zero": ("redaction", "classifier.window", 0,
        "redaction.classifier.window = 0: must be an integer >= 1"),
    "stride_float": ("redaction", "classifier.stride", 2.5,
        "redaction.classifier.stride = 2.5: must be an integer >= 1"),
    "train_documents_zero": ("redaction", "classifier.train_documents", 0,
        "redaction.classifier.train_documents = 0: must be an integer >= 1"),
    "alpha_one": ("accounting", "alpha", 1.0,
        "accounting.alpha = 1.0: must be a finite number > 1"),
    "delta_one": ("accounting", "delta", 1.0,
        "accounting.delta = 1.0: must be a number in (0, 1)"),
    "share_zero": ("matched", "share", 0.0,
        "matched.share = 0.0: must be a number in (0, 1]"),
    "share_above_one": ("matched", "share", 1.5,
        "matched.share = 1.5: must be a number in (0, 1]"),
    "comparison_unknown": ("", "comparisons", [['pad', 'statik']],
        "comparisons[0][1] = 'statik': must be one of static, pad, cid, bounded_cid, dp_icl, "
        "dist, summ, redact_keyword, redact_classifier, refusal"),
    "comparison_not_run": ("", "comparisons", [['pad', 'static'], ['cid', 'summ']],
        "comparisons[1] = ['cid', 'summ']: names summ, which defenses does not run"),
    "comparison_itself": ("", "comparisons", [['pad', 'pad']],
        "comparisons[0] = ['pad', 'pad']: compares a defense with itself"),
    "comparison_three": ("", "comparisons", [['pad', 'static', 'cid']],
        "comparisons[0] = ['pad', 'static', 'cid']: must hold at most 2 items"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARAM_CASES.values(), ids=PARAM_CASES.keys())
def test_bad_frontier_param_is_one_line_naming_its_key(case):
    group, key, value, message = case
    tree = params_with(group, key, value)
    if key == "comparisons" and any("summ" in pair for pair in value):
        tree["frontier"]["embedded"]["defenses"].pop("summ")  # a defense the profile does not run
    with pytest.raises(PrivleakError) as error:
        schema.validate(tree)
    assert str(error.value) == str(error.value).strip() and "\n" not in str(error.value)
    assert str(error.value).startswith(f"params.yaml: {BLOCK}.{message}"), str(error.value)


def test_a_frontier_without_any_defense_is_one_line():
    tree = params_with("", "defenses", {})
    tree["frontier"]["embedded"]["comparisons"] = [["pad", "refusal"]]
    with pytest.raises(PrivleakError, match="defenses = {}: must run at least one defense"):
        schema.validate(tree)


def test_the_catalogue_covers_every_frontier_param():
    """Every leaf param of the frontier block has a bad-value case."""
    cases = [case_path(group, key) for group, key, *_ in PARAM_CASES.values()]
    assert not uncovered(Frontier, cases)


def test_a_one_point_defense_and_a_comparison_with_refusal_are_allowed():
    tree = params_with("", "defenses", {"summ": [], "dp_icl": [5.0]})
    tree["frontier"]["embedded"]["comparisons"] = [["summ", "refusal"], ["dp_icl", "summ"]]
    assert schema.validate(tree).frontier.embedded.defenses.summ == []


def test_the_stage_runner_stops_on_a_bad_frontier_param_before_any_work(project):  # noqa: F811
    project.write_params(_edit("frontier.smoke.attack", "cue_words", 0))
    line = _one_error_line(project.run("privleak.pipeline.stage", "frontier_generate"))
    assert line.startswith("privleak: error: params.yaml: frontier.smoke.attack.cue_words = 0: "
                           "must be an integer >= 1"), line  # fmt: skip
    _untouched(project)
