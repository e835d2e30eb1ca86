"""S3 (domain privacy) bad inputs: each is one line naming the culprit and what is allowed.

Params level: a copy of params.yaml with one s3 key changed fails validation with the key path
(and, run through the stage runner, with exit 2 before any work, every output untouched).
Stage level: a keyword list that covers every word of a dialog, and a prompt dialog with no turn
left after its context, stop s3_prepare with one line naming the dialog and the param to change.
(Library-level checks: a redaction that removes everything in tests/test_policies.py, a model
Opacus cannot train in tests/test_private_training.py.)
"""

from __future__ import annotations

import json
import re

import pytest

from privleak.errors import PrivleakError
from privleak.pipeline import paths, schema
from privleak.pipeline.schema.s3 import S3
from tests.test_bad_runtime_inputs import project  # noqa: F401 (a fixture)
from tests.test_s4_inputs import _edit, _one_error_line, _untouched, leaf_paths, uncovered

BLOCK = "s3.embedded"
DOMAINS = "AIRLINE, MEDIA, INSURANCE, FASTFOOD, FINANCE, SOFTWARE"


def params_with(key: str, value) -> dict:
    """The repository's params with s3.embedded.<key> (dotted) set to value."""
    tree = schema.load_yaml(paths.PARAMS_FILE.read_text())
    node = tree["s3"]["embedded"]
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return tree


KEYWORDS = {"AIRLINE": ["flight"], "MEDIA": ["episode"], "INSURANCE": ["claim"]}
GENERATOR_TYPO = (
    "unknown synthetic generator; allowed: synthetic:cnn_dm, synthetic:dialogs, "
    "synthetic:enron, synthetic:healthcaremagic, synthetic:icliniq, "
    "synthetic:medical_dirichlet, synthetic:pretrain, synthetic:pubmedqa"
)
PARAM_CASES = {
    "unknown_domain": ("domain", "AIRLNE", f"domain = 'AIRLNE': must be one of {DOMAINS}"),
    "unknown_private_domain": ("private_domains", ["AIRLINE", "RETAIL"],
                               f"private_domains[1] = 'RETAIL': must be one of {DOMAINS}"),
    "no_domain_left_to_leak": (
        "private_domains", ["AIRLINE"],
        "private_domains = ['AIRLINE']: must name a domain other than domain (AIRLINE) whose "
        "leaks the attack checks",
    ),
    "corpus_without_a_private_domain": (
        "corpus.options.domains", ["AIRLINE", "MEDIA"],
        "corpus.options.domains = ['AIRLINE', 'MEDIA']: has no INSURANCE dialogs, which domain "
        "and private_domains name",
    ),
    "empty_keyword_list": ("keywords", KEYWORDS | {"MEDIA": []},
                           "keywords.MEDIA = []: must not be empty"),
    "keyword_without_a_word": ("keywords", KEYWORDS | {"MEDIA": ["--"]},
                               "keywords.MEDIA[0] = '--': must be a string with a word in it"),
    "keywords_of_a_domain_not_private": (
        "keywords", KEYWORDS | {"FINANCE": ["balance"]},
        "keywords.FINANCE: is not one of private_domains (AIRLINE, MEDIA, INSURANCE)",
    ),
    "keywords_missing_a_private_domain": (
        "keywords", {"AIRLINE": ["flight"], "MEDIA": ["episode"]},
        "keywords.INSURANCE: missing; every private domain needs a keyword list",
    ),
    "unknown_schedule": ("schedule.name", "cosine",
                         "schedule.name = 'cosine': must be one of step, linear, exp_concave"),
    "option_of_another_schedule": (
        "schedule.options", {"switch": 0.5},
        "schedule.options.switch: unknown option of schedule exp_concave; allowed: sharpness",
    ),
    "epsilon_zero": ("dp.target_epsilon", 0.0,
                     "dp.target_epsilon = 0.0: must be a finite number > 0"),
    "epsilon_negative": ("dp.target_epsilon", -1.0,
                         "dp.target_epsilon = -1.0: must be a finite number > 0"),
    "delta_one": ("dp.delta", 1.0, "dp.delta = 1.0: must be a number in (0, 1)"),
    "stride_past_window": (
        "classifier.stride", 20,
        "classifier.stride = 20: must be <= window (16), or words between windows are never "
        "flagged",
    ),
    "sequence_classifier_without_a_model": (
        "classifier.model", None,
        "classifier.model = null: required by kind sequence",
    ),
    "unknown_classifier_kind": (
        "classifier.kind", "roberta",
        "classifier.kind = 'roberta': must be one of sequence, embedding_logistic",
    ),
    "unknown_schedule_draw": (
        "schedule.draw", "prompt",
        "schedule.draw = 'prompt': must be one of batch, document",
    ),
    "unknown_keyword_lists": (
        "keywords", "airline",
        "keywords",
    ),
    "public_dialogs_of_a_private_domain": (
        "classifier.public.options.domains", ["FASTFOOD", "MEDIA"],
        "classifier.public.options.domains = ['FASTFOOD', 'MEDIA']: holds private domains "
        "(MEDIA); the public class takes dialogs of other domains only",
    ),
    "public_dialogs_of_another_generator": (
        "classifier.public", {"source": "synthetic:enron", "n": 5},
        "classifier.public.source = 'synthetic:enron': must be synthetic:dialogs, or a file: or "
        "hf: corpus with fields text, domain",
    ),
    "streams_below_samples": (
        "attack.max_batch_streams", 5,
        "attack.max_batch_streams = 5: must be >= samples (10): a prompt's samples decode together",
    ),
    "all_dialogs_held_out": ("test_share", 1.0, "test_share = 1.0: must be a number in (0, 1)"),
    "base_not_a_family_size": (
        "base", "data/family/h999",
        "base = 'data/family/h999': must be data/family/<size> with a size of "
        "family.embedded.sizes (h32, h64, h96, h128)",
    ),
    "base_a_number": ("base", 64, "base = 64: must be a non-empty string"),
    "corpus_generator_typo": ("corpus.source", "synthetic:dialog",
                              "corpus.source = 'synthetic:dialog': " + GENERATOR_TYPO),
    "corpus_file_outside_the_corpora_folder": (
        "corpus.source", "file:dialogs.jsonl",
        "corpus.source = 'file:dialogs.jsonl': a file: path must lie under "
        "data/external/corpora/ (so DVC tracks it as a dependency)",
    ),
    "corpus_n_float": ("corpus.n", 600.0, "corpus.n = 600.0: must be null or an integer >= 1"),
    "corpus_fields_a_string": (
        "corpus.fields", "text",
        "corpus.fields = 'text': must be a mapping of canonical names to source columns, "
        "e.g. {text: body}",
    ),
    "corpus_option_typo": ("corpus.options.turn", [4, 6],
                           "corpus.options.turn: unknown key; did you mean 'turns'?"),
    "corpus_turns_reversed": ("corpus.options.turns", [6, 4],
                              "corpus.options.turns = [6, 4]: must be [fewest, most] exchanges"),
    "corpus_domains_repeated": ("corpus.options.domains", ["AIRLINE", "AIRLINE"],
                                "corpus.options.domains[1] = 'AIRLINE': repeats an earlier item"),
    "corpus_revision_of_a_synthetic_source": (
        "corpus.revision", "main", "corpus.revision = 'main': applies only to hf: sources",
    ),
    "test_share_percent": ("test_share", 50, "test_share = 50: must be a number in (0, 1)"),
    "lower_case_domain": ("domain", "airline", f"domain = 'airline': must be one of {DOMAINS}"),
    "private_domains_empty": ("private_domains", [], "private_domains = []: must not be empty"),
    "private_domains_repeated": ("private_domains", ["AIRLINE", "MEDIA", "MEDIA"],
                                 "private_domains[2] = 'MEDIA': repeats an earlier item"),
    "private_domains_one_name": ("private_domains", "AIRLINE",
                                 "private_domains = 'AIRLINE': must be a list"),
    "keyword_list_a_string": ("keywords", KEYWORDS | {"AIRLINE": "flight"},
                              "keywords.AIRLINE = 'flight': must be a list"),
    "fine_tune_epochs_float": ("classifier.fine_tune.epochs", 1.5,
                               "classifier.fine_tune.epochs = 1.5: must be an integer >= 1"),
    "fine_tune_batch_size_zero": ("classifier.fine_tune.batch_size", 0,
                                  "classifier.fine_tune.batch_size = 0: must be an integer >= 1"),
    "fine_tune_learning_rate_read_as_text": (
        "classifier.fine_tune.learning_rate", "1e-3",
        "classifier.fine_tune.learning_rate = '1e-3': must be a finite number > 0 (YAML reads "
        "1e-3 as text; write 1.0e-3)",
    ),
    "fine_tune_max_windows_float": (
        "classifier.fine_tune.max_windows", 4000.0,
        "classifier.fine_tune.max_windows = 4000.0: must be an integer >= 1",
    ),
    "fine_tune_key_typo": ("classifier.fine_tune.epoch", 1,
                           "classifier.fine_tune.epoch: unknown key; did you mean 'epochs'?"),
    "window_zero": ("classifier.window", 0, "classifier.window = 0: must be an integer >= 1"),
    "window_float": ("classifier.window", 16.0,
                     "classifier.window = 16.0: must be an integer >= 1"),
    "threshold_one": ("classifier.threshold", 1.0,
                      "classifier.threshold = 1.0: must be a number in (0, 1)"),
    "classifier_batch_size_zero": ("classifier.batch_size", 0,
                                   "classifier.batch_size = 0: must be an integer >= 1"),
    "public_file_not_a_table": (
        "classifier.public.source", "file:data/external/corpora/public.txt",
        "classifier.public.source = 'file:data/external/corpora/public.txt': a file: path must "
        "end in .csv, .json, .jsonl, .parquet",
    ),
    "public_without_n": (
        "classifier.public.n", None,
        "classifier.public.n: missing; a synthetic: source needs n (records to generate)",
    ),
    "public_n_zero": ("classifier.public.n", 0,
                      "classifier.public.n = 0: must be null or an integer >= 1"),
    "public_fields_a_list": (
        "classifier.public.fields", ["text", "domain"],
        "classifier.public.fields = ['text', 'domain']: must be a mapping of canonical names to "
        "source columns, e.g. {text: body}",
    ),
    "public_option_typo": (
        "classifier.public.options.share", 0.1,
        "classifier.public.options.share: unknown key; allowed: domains, turns, "
        "travel_insurance_share",
    ),
    "public_turns_below_three": ("classifier.public.options.turns", [2, 6],
                                 "classifier.public.options.turns[0] = 2: must be an integer >= 3"),
    "public_revision_of_a_synthetic_source": (
        "classifier.public.revision", "v1",
        "classifier.public.revision = 'v1': applies only to hf: sources",
    ),
    "seeds_zero": ("seeds", 0, "seeds = 0: must be an integer >= 1"),
    "seeds_float": ("seeds", 6.0, "seeds = 6.0: must be an integer >= 1"),
    "workers_zero": ("workers", 0, "workers = 0: must be an integer >= 1"),
    "train_epochs_zero": ("train.epochs", 0, "train.epochs = 0: must be an integer >= 1"),
    "train_batch_size_float": ("train.batch_size", 8.0,
                               "train.batch_size = 8.0: must be an integer >= 1"),
    "seq_len_one": ("train.seq_len", 1, "train.seq_len = 1: must be an integer >= 2"),
    "train_learning_rate_read_as_text": (
        "train.learning_rate", "3e-3",
        "train.learning_rate = '3e-3': must be a finite number > 0 (YAML reads 3e-3 as text; "
        "write 3.0e-3)",
    ),
    "max_grad_norm_zero": ("dp.max_grad_norm", 0.0,
                           "dp.max_grad_norm = 0.0: must be a finite number > 0"),
    "dp_batch_size_float": ("dp.batch_size", 16.0,
                            "dp.batch_size = 16.0: must be an integer >= 1"),
    "dp_learning_rate_negative": ("dp.learning_rate", -0.003,
                                  "dp.learning_rate = -0.003: must be a finite number > 0"),
    "delta_read_as_text": (
        "dp.delta", "1e-5",
        "dp.delta = '1e-5': must be a number in (0, 1) (YAML reads 1e-5 as text; write 1.0e-5)",
    ),
    "dp_epochs_zero": ("dp.epochs", 0, "dp.epochs = 0: must be null or an integer >= 1"),
    "schedule_epochs_float": ("schedule.epochs", 2.0,
                              "schedule.epochs = 2.0: must be null or an integer >= 1"),
    "schedule_batch_size_zero": ("schedule.batch_size", 0,
                                 "schedule.batch_size = 0: must be null or an integer >= 1"),
    "schedule_option_zero": ("schedule.options", {"sharpness": 0.0},
                             "schedule.options.sharpness = 0.0: must be a finite number > 0"),
    "schedule_options_a_string": ("schedule.options", "sharpness",
                                  "schedule.options = 'sharpness': must be a mapping"),
    "attack_prompts_zero": ("attack.prompts", 0, "attack.prompts = 0: must be an integer >= 1"),
    "context_turns_zero": ("attack.context_turns", 0,
                           "attack.context_turns = 0: must be an integer >= 1"),
    "samples_float": ("attack.samples", 10.0, "attack.samples = 10.0: must be an integer >= 1"),
    "top_k_zero": ("attack.top_k", 0, "attack.top_k = 0: must be an integer >= 1"),
    "attack_max_new_tokens_zero": ("attack.max_new_tokens", 0,
                                   "attack.max_new_tokens = 0: must be an integer >= 1"),
    "attack_batch_size_text": ("attack.batch_size", "8",
                               "attack.batch_size = '8': must be an integer >= 1"),
    "n_boot_too_few": ("render.n_boot", 10, "render.n_boot = 10: must be an integer >= 100"),
    "n_boot_float": ("render.n_boot", 1000.0,
                     "render.n_boot = 1000.0: must be an integer >= 100"),
    "render_alpha_half": ("render.alpha", 0.5, "render.alpha = 0.5: must be a number in (0, 0.5)"),
    "render_alpha_percent": ("render.alpha", "5%",
                             "render.alpha = '5%': must be a number in (0, 0.5)"),
    "classifier_model_empty": ("classifier.model", "",
                               "classifier.model = '': must be null or a non-empty string"),
    "keyword_repeated": ("keywords", {"AIRLINE": ["flight", "flight"]},
                         "keywords.AIRLINE[1] = 'flight': repeats an earlier item"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARAM_CASES.values(), ids=PARAM_CASES.keys())
def test_bad_s3_param_is_one_line_naming_its_key(case):
    key, value, message = case
    with pytest.raises(PrivleakError) as error:
        schema.validate(params_with(key, value))
    assert "\n" not in str(error.value)
    assert str(error.value).startswith(f"params.yaml: {BLOCK}.{message}"), str(error.value)


def test_the_catalogue_covers_every_s3_param():
    """Every leaf param of the s3 block (the keys of both corpus slots, corpus and
    classifier.public, included) has a bad-value case, so a param added to S3 without one
    fails here."""
    leaves = leaf_paths(S3)
    assert {"base", "classifier.fine_tune.max_windows", "classifier.public.revision"} <= set(leaves)
    assert not uncovered(S3, [key for key, *_ in PARAM_CASES.values()])


def test_valid_variants_pass():
    """Own keyword lists for every private domain, a step schedule at its last switch point and
    a schedule without options are allowed."""
    tree = params_with("keywords", KEYWORDS)
    tree["s3"]["smoke"]["schedule"] = {"name": "step", "options": {"switch": 1.0}}
    tree["s3"]["paper"]["schedule"] = {"name": "linear"}
    valid = schema.validate(tree).s3
    assert valid.embedded.keywords == KEYWORDS
    assert valid.paper.schedule.options == {}


RUNNER_CASES = {
    "s3_prepare": ("s3.smoke", "domain", "RETAIL", "s3.smoke.domain = 'RETAIL': must be one of"),
    "s3_train": ("s3.smoke.dp", "target_epsilon", 0.0,
                 "s3.smoke.dp.target_epsilon = 0.0: must be a finite number > 0"),
    "s3_attack": ("s3.smoke.schedule", "name", "cosine",
                  "s3.smoke.schedule.name = 'cosine': must be one of step, linear, exp_concave"),
    "render_s3": ("s3.smoke.render", "n_boot", 10,
                  "s3.smoke.render.n_boot = 10: must be an integer >= 100"),
}  # fmt: skip


@pytest.mark.parametrize("stage", RUNNER_CASES)
def test_the_stage_runner_stops_on_a_bad_s3_param_before_any_work(project, stage):  # noqa: F811
    block, key, value, message = RUNNER_CASES[stage]
    project.write_params(_edit(block, key, value))
    line = _one_error_line(project.run("privleak.pipeline.stage", stage))
    assert line.startswith(f"privleak: error: params.yaml: {message}"), line
    _untouched(project)


CORPUS_FILE = "data/external/corpora/dialogs.jsonl"
OTHER_DOMAINS = {
    "MEDIA": ["USER: an episode\nAGENT: the season", "USER: a show\nAGENT: a season"],
    "INSURANCE": ["USER: a claim\nAGENT: the policy", "USER: my claim\nAGENT: a premium"],
}
STAGE_CASES = {
    # AIRLINE dialogs 1, 3 and 5 are keywords only, with no speaker label to keep; 2 of the 6
    # are held out, so one of them trains.
    "keywords_cover_a_whole_dialog": (
        ["USER: my flight\nAGENT: your seat", "flight\nseat"],
        1,
        r"the s3 keyword policy flags every word of AIRLINE train dialog 'A[135]', so redacting "
        r"it leaves no word; shorten its list in s3\.smoke\.keywords",
    ),
    "prompt_dialog_without_a_turn_to_generate": (
        ["USER: my flight\nAGENT: your seat", "USER: a flight\nAGENT: a seat"],
        2,
        r"params s3\.smoke\.attack\.context_turns = 2: AIRLINE dialog 'A\d' has only 2 lines, "
        r"so no turn is left to generate",
    ),
}


@pytest.mark.parametrize("case", STAGE_CASES.values(), ids=STAGE_CASES.keys())
def test_a_corpus_the_params_cannot_fit_stops_s3_prepare(project, case):  # noqa: F811
    """A `file:` corpus (columns mapped by `fields`) of six short dialogs per domain: s3_prepare
    stops with one line naming the dialog and the param to change (before the classifier is
    fit) and leaves no output behind."""
    airline, context_turns, message = case
    texts = {"AIRLINE": airline, **OTHER_DOMAINS}
    rows = [
        {"key": f"{domain[0]}{i}", "label": domain, "body": text}
        for domain, bodies in texts.items()
        for i, text in enumerate(bodies * 3)
    ]
    corpus = project.root / CORPUS_FILE
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def edit(tree):
        tree["s3"]["smoke"] |= {
            "corpus": {
                "source": f"file:{CORPUS_FILE}",
                "fields": {"id": "key", "domain": "label", "text": "body"},
            },
            "test_share": 0.4,
            "keywords": {"AIRLINE": ["flight", "seat"], "MEDIA": ["episode"],
                         "INSURANCE": ["claim"]},
        }  # fmt: skip
        tree["s3"]["smoke"]["attack"] |= {"prompts": 1, "context_turns": context_turns}

    project.write_params(edit)
    try:
        line = _one_error_line(project.run("privleak.pipeline.stage", "s3_prepare"))
    finally:
        corpus.unlink()
    assert re.search(
        r"stage 's3_prepare' failed: PrivleakError: " + message
        + r" \(see reports/failed/s3_prepare\.ipynb\)$",
        line,
    ), line  # fmt: skip
    _untouched(project)
    written = project.root / "data" / "interim" / "s3" / "prepare"
    assert [p.name for p in written.iterdir()] == ["placeholder.txt"]


def test_public_dialogs_of_a_private_domain_stop_s3_prepare(project):  # noqa: F811
    """A `file:` public corpus is only known at run time: one of its dialogs of a private domain
    stops s3_prepare (before the classifier is fit) with one line naming the slot."""
    public = project.root / CORPUS_FILE
    public.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"text": "USER: a burger\nAGENT: the fries", "domain": "FASTFOOD"}] * 3
    rows += [{"text": "USER: my claim\nAGENT: the policy", "domain": "INSURANCE"}]
    public.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def edit(tree):
        tree["s3"]["smoke"]["classifier"]["public"] = {"source": f"file:{CORPUS_FILE}"}

    project.write_params(edit)
    try:
        line = _one_error_line(project.run("privleak.pipeline.stage", "s3_prepare"))
    finally:
        public.unlink()
    assert line.endswith(
        f"PrivleakError: s3 classifier.public (source 'file:{CORPUS_FILE}') has INSURANCE "
        "dialogs, but s3.smoke.private_domains makes them private; the public class takes "
        "dialogs of other domains only (see reports/failed/s3_prepare.ipynb)"
    ), line
    _untouched(project)
