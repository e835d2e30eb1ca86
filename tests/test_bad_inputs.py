"""The bad-input catalogue: a broken params.yaml stops the stage runner (or `params check`) with
exit code 2 and one line naming the key path and what is allowed, before any work.

Each case edits one key of a copy of the real params.yaml (profile smoke) in a temporary project
whose every stage output exists as a placeholder. The notebook machinery (papermill, jupytext,
nbformat, nbconvert) is poisoned on the import path, so a runner that got past validation would
crash with a traceback instead of the one line; and every placeholder must survive.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from privleak.pipeline import params, paths

REPO = Path(__file__).resolve().parents[1]
STAGES = list(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
POISONED = ("papermill", "jupytext", "nbformat", "nbconvert")
DELETE = object()
GROUP_STAGE = {  # the stage a case runs, by the edited key's group
    "profile": "report",
    "seed": "prepare_data",
    "figures": "render_s0",
    "models": "context_gain",
    "data": "prepare_data",
    "context_gain": "context_gain",
    "family": "train_family",
    "s1": "s1_scores",
    "s0": "s0_generate",
    "claims": "render_claims",
}


@dataclass
class Project:
    root: Path
    params_text: str
    placeholders: dict[Path, str]

    def run(self, *command: str) -> subprocess.CompletedProcess:
        poison, lib = self.root / "poison", REPO / "lib"
        env = os.environ | {
            "PRIVLEAK_ROOT": str(self.root),
            "PYTHONPATH": f"{poison}{os.pathsep}{lib}",
        }
        return subprocess.run(
            [sys.executable, "-m", *command],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    """dvc.yaml, notebooks/ and params.yaml (profile smoke) in a temporary folder, with a
    placeholder for every declared output of every stage (a file inside each folder output)."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    text = (REPO / "params.yaml").read_text()
    text = re.sub(r"^profile: .*$", "profile: smoke", text, count=1, flags=re.M)
    smoke = params.load(REPO / "params.yaml") | {"profile": "smoke"}
    placeholders = {}
    for stage in STAGES:
        for output in params.stage_outputs(stage, smoke):
            target = root / output.relative_to(paths.ROOT)
            placeholder = target if target.suffix else target / "placeholder.txt"
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholders[placeholder] = f"{stage} output"
            placeholder.write_text(placeholders[placeholder])
    for module in POISONED:
        (root / "poison" / module).mkdir(parents=True)
        (root / "poison" / module / "__init__.py").write_text(
            f"raise ImportError('{module} imported before params.yaml was validated')\n"
        )
    return Project(root, text, placeholders)


def edited(text: str, key: str, value: Any) -> str:
    """params.yaml text with the value at `key` (dotted, with [i] list indices) set to `value`,
    or removed for DELETE."""
    tree = yaml.safe_load(text)
    parts = [
        int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\[\d+\]|[^.\[\]]+", key)
    ]
    node = tree
    for part in parts[:-1]:
        node = node[part]
    if value is DELETE:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return yaml.safe_dump(tree, sort_keys=False)


@dataclass
class Case:
    key: str  # dotted key to set, or the text to replace for `raw`
    value: Any
    expected: str  # part of the error line, which starts "privleak: error: params.yaml: "
    raw: bool = False
    check: bool = False  # run `python -m privleak.pipeline.params check` instead of the stage

    def text(self, original: str) -> str:
        if self.raw:
            assert self.key in original, self.key
            return original.replace(self.key, self.value, 1)
        return edited(original, self.key, self.value)


INF, NAN = float("inf"), float("nan")
CORPUS = "data.smoke.cnn_dm"
CASES = {
    # the catalogue of bad params (docs/design.md §9)
    "repeat_share_5": Case(
        "s0.embedded.repeat_share", 5, "s0.embedded.repeat_share = 5: must be a number in [0, 1]"
    ),
    "rouge_threshold_negative": Case(
        "s0.smoke.rouge_threshold", -1, "s0.smoke.rouge_threshold = -1: must be a number in [0, 1]"
    ),
    "n_examples_negative": Case(
        "s0.smoke.n_examples", -1, "s0.smoke.n_examples = -1: must be an integer >= 1"
    ),
    "n_examples_zero": Case(
        "context_gain.smoke.n_examples",
        0,
        "context_gain.smoke.n_examples = 0: must be an integer >= 1",
        check=True,
    ),
    "min_new_tokens_above_max": Case(
        "s0.smoke.min_new_tokens",
        20,
        "s0.smoke.min_new_tokens = 20: must be <= max_new_tokens (12)",
    ),
    "no_figure_format": Case("figures.formats", [], "figures.formats = []: must not be empty"),
    "figure_format_bmp": Case(
        "figures.formats",
        ["png", "bmp"],
        "figures.formats[1] = 'bmp': must be one of png, pdf, svg",
    ),
    "typo_max_new_token": Case(
        "    max_new_tokens: 12\n",
        "    max_new_token: 12\n",
        "s0.smoke.max_new_token: unknown key; did you mean 'max_new_tokens'?",
        raw=True,
    ),
    "duplicate_key": Case(
        "    n_examples: 2\n",
        "    n_examples: 2\n    n_examples: 3\n",
        "key 'n_examples' is given twice (first at line",
        raw=True,
    ),
    "string_for_a_count": Case(
        "s0.smoke.n_examples", "4", "s0.smoke.n_examples = '4': must be an integer >= 1"
    ),
    "infinite_lambda": Case(
        "s0.smoke.lams", [0.5, INF], "s0.smoke.lams[1] = inf: must be a finite number >= 0"
    ),
    "infinite_temperature": Case(
        "s0.smoke.temperature", INF, "s0.smoke.temperature = inf: must be a finite number > 0"
    ),
    "seed_abc": Case("seed", "abc", "seed = 'abc': must be an integer >= 0", check=True),
    "device_cudaa": Case(
        "models.smoke.device",
        "cudaa",
        "models.smoke.device = 'cudaa': must be cpu, cuda, cuda:<n> or mps",
    ),
    "bounded_eps_zero": Case(
        "s0.smoke.bounded.eps",
        [0, 2.0],
        "s0.smoke.bounded.eps[0] = 0: must be a finite number > 0",
    ),
    "ngram_longer_than_context": Case(
        "s0.smoke.ngram.ns",
        [32, 128],
        "s0.smoke.ngram.ns[1] = 128: must be <= context_tokens (64)",
    ),
    "ngram_window_typo": Case(
        "s0.smoke.ngram.window",
        "slide",
        "s0.smoke.ngram.window = 'slide': must be one of block, sliding",
    ),
    "sliding_stride_zero": Case(
        "s0.paper.ngram.stride",
        0,
        "s0.paper.ngram.stride = 0: must be an integer >= 1",
        check=True,
    ),
    "block_with_a_stride": Case(
        "s0.smoke.family.stride",
        2,
        "s0.smoke.family.stride = 2: must be 1 (or left out) for window: block",
    ),
    "corpus_file_outside_external": Case(
        f"{CORPUS}.source",
        "file:corpora/news.jsonl",
        f"{CORPUS}.source = 'file:corpora/news.jsonl': a file: path must lie under "
        "data/external/corpora/ (so DVC tracks it as a dependency)",
    ),
    "unknown_generator": Case(
        f"{CORPUS}.source",
        "synthetic:cnn",
        f"{CORPUS}.source = 'synthetic:cnn': unknown synthetic generator; allowed: "
        "synthetic:cnn_dm, synthetic:dialogs, synthetic:enron, synthetic:healthcaremagic, "
        "synthetic:icliniq, synthetic:medical_dirichlet, synthetic:pretrain, synthetic:pubmedqa",
    ),
    "unknown_group": Case(
        "s9", {"smoke": {}}, "s9: unknown key; allowed: profile, seed, figures", check=True
    ),
    "missing_profile_block": Case(
        "s0.paper", DELETE, "s0.paper: missing; every group needs blocks smoke, embedded, paper"
    ),
    # types
    "bool_for_a_count": Case(
        "s0.smoke.batch_size", True, "s0.smoke.batch_size = true: must be an integer >= 1"
    ),
    "nan_temperature": Case(
        "s0.smoke.temperature", NAN, "s0.smoke.temperature = nan: must be a finite number > 0"
    ),
    "yaml_text_exponent": Case(
        "learning_rate: 1.0e-4}",
        "learning_rate: 1e-4}",
        "s0.smoke.finetune.learning_rate = '1e-4': must be a finite number > 0 (YAML reads "
        "1e-4 as text; write 1.0e-4)",
        raw=True,
    ),
    "list_for_a_number": Case("s0.smoke.lams", 0.5, "s0.smoke.lams = 0.5: must be a list"),
    "count_eos_as_number": Case(
        "s0.smoke.count_eos", 1, "s0.smoke.count_eos = 1: must be true or false"
    ),
    "flag_yes": Case(
        "s0.smoke.finetune.enabled",
        "yes",
        "s0.smoke.finetune.enabled = 'yes': must be true or false",
    ),
    "not_yaml": Case(
        "seed: 0\n", "seed: [0\n", "not valid YAML: did not find expected ','", raw=True, check=True
    ),
    # allowed values
    "dtype_float64": Case(
        "models.smoke.dtype",
        "float64",
        "models.smoke.dtype = 'float64': must be one of float32, float16, bfloat16",
    ),
    "template_html": Case(
        "s0.smoke.template", "html", "s0.smoke.template = 'html': must be one of chat, plain"
    ),
    "unknown_profile": Case(
        "profile", "large", "profile = 'large': must be one of smoke, embedded, paper", check=True
    ),
    "decoder_kind_typo": Case(
        "s1.smoke.decoders[2].kind",
        "top_j",
        "s1.smoke.decoders[2].kind = 'top_j': must be one of greedy, sampling, top_k, top_p",
    ),
    "top_p_above_one": Case(
        "s1.smoke.decoders[4].value", 1.5, "s1.smoke.decoders[4].value = 1.5: must be a number"
    ),
    "greedy_with_value": Case(
        "s1.smoke.decoders[0].value",
        3,
        "s1.smoke.decoders[0].value = 3: must be omitted: greedy takes no value",
    ),
    "leakage_rule_typo": Case(
        "s0.smoke.leakage_rule",
        "offical",
        "s0.smoke.leakage_rule = 'offical': must be one of runs, official",
    ),
    "bertscore_backend": Case(
        "s0.smoke.bertscore.backend",
        "bertscore",
        "s0.smoke.bertscore.backend = 'bertscore': must be one of minilm, bert-score",
    ),
    "faithfulness_without_model": Case(
        "s0.smoke.faithfulness",
        "factkb",
        "s0.smoke.faithfulness = 'factkb': must be sentence_support or factkb:<model>",
    ),
    "device_map_typo": Case(
        "models.paper.device_map", "autoo", "models.paper.device_map = 'autoo': must be null, auto"
    ),
    "head_mass_zero": Case(
        "s1.smoke.isp.sampling_head_mass",
        0,
        "s1.smoke.isp.sampling_head_mass = 0: must be a number in (0, 1]",
    ),
    "repeated_lambda": Case(
        "s0.smoke.lams", [0.5, 0.5], "s0.smoke.lams[1] = 0.5: repeats an earlier item"
    ),
    # data slots
    "s1_sequences_outside_external": Case(
        "s1.paper.scores.sequences",
        "file:data/external/s1_sequences.jsonl",
        "s1.paper.scores.sequences = 'file:data/external/s1_sequences.jsonl': a file: path "
        "must lie under data/external/s1/",
    ),
    "corpus_file_escapes": Case(
        f"{CORPUS}.source",
        "file:data/external/corpora/../news.jsonl",
        "a file: path must lie under data/external/corpora/",
    ),
    "corpus_file_type": Case(
        f"{CORPUS}.source",
        "file:data/external/corpora/news.txt",
        "a file: path must end in .csv, .json, .jsonl, .parquet",
    ),
    "hf_split": Case(
        f"{CORPUS}.source",
        "hf:cnn_dailymail:3.0.0:test[:x]",
        "must be hf:<dataset>[:config][:split] with split NAME or NAME[start:end]",
    ),
    "revision_without_hf": Case(
        f"{CORPUS}.revision",
        "main",
        f"{CORPUS}.revision = 'main': applies only to hf: sources",
    ),
    "generator_option_typo": Case(
        f"{CORPUS}.options",
        {"min_word": 300},
        f"{CORPUS}.options.min_word: unknown key; did you mean 'min_words'?",
    ),
    "synthetic_without_n": Case(
        f"{CORPUS}.n", DELETE, f"{CORPUS}.n: missing; a synthetic: source needs n"
    ),
    "missing_pretrain_slot": Case(
        "data.smoke.pretrain",
        DELETE,
        "data.smoke.pretrain: missing; dvc.yaml stages read data/raw/pretrain.jsonl",
    ),
    # across keys and groups
    "corpus_not_a_slot": Case(
        "context_gain.smoke.corpus",
        "wiki",
        "context_gain.smoke.corpus = 'wiki': must name a slot of data.smoke (cnn_dm, pubmedqa",
    ),
    "more_examples_than_records": Case(
        "s0.smoke.ngram.examples",
        9,
        "s0.smoke.ngram.examples = 9: must be <= data.smoke.pubmedqa.n (4)",
    ),
    "family_heads": Case(
        "family.smoke.sizes.h8.heads",
        3,
        "family.smoke.sizes.h8.heads = 3: must divide hidden (8) into heads of even width",
    ),
    "family_window_below_block": Case(
        "family.smoke.window", 64, "family.smoke.window = 64: must be >= block_size (128)"
    ),
    "s0_family_context_beyond_window": Case(
        "s0.smoke.family.context_tokens",
        600,
        "s0.smoke.family.context_tokens = 600: plus max_new_tokens (12) must be <= "
        "family.smoke.window (512)",
    ),
    "isp_n_beyond_suffix": Case(
        "s1.smoke.isp.n",
        [1, 5],
        "s1.smoke.isp.n[1] = 5: must be <= scores.ne_suffix_tokens (4)",
    ),
    "public_min_distinct_beyond_suffix": Case(
        "s1.smoke.public.min_distinct_tokens",
        60,
        "s1.smoke.public.min_distinct_tokens = 60: must be <= suffix_tokens (50)",
    ),
    "public_min_esp_zero": Case(
        "s1.smoke.public.min_esp", 0, "s1.smoke.public.min_esp = 0: must be a number in (0, 1]"
    ),
    "public_per_family_zero": Case(
        "s1.smoke.public.per_family",
        0,
        "s1.smoke.public.per_family = 0: must be null or an integer >= 1",
    ),
    "workers_zero": Case("s1.smoke.workers", 0, "s1.smoke.workers = 0: must be an integer >= 1"),
    "x_check_beyond_x_max": Case(
        "s1.smoke.render.x_check", 200, "s1.smoke.render.x_check = 200: must be <= x_max (100)"
    ),
    "planted_with_model_list": Case(
        "s1.smoke.scores.models",
        ["org/a", "org/b"],
        "s1.smoke.scores.sequences = 'planted': must be file:data/external/s1/<file>.jsonl",
    ),
    "claims_alpha": Case(
        "claims.paper.alpha", 0.5, "claims.paper.alpha = 0.5: must be a number in (0, 0.5)"
    ),
    "nothing_to_prepare": Case(  # data/models is prepare_models' whole output
        "models.paper.prepare", [], "models.paper.prepare = []: must not be empty"
    ),
    "one_stream_per_batch": Case(
        "s0.smoke.max_batch_streams", 1, "s0.smoke.max_batch_streams = 1: must be an integer >= 2"
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_params_stop_with_one_line_before_any_work(project, case):
    (project.root / "params.yaml").write_text(case.text(project.params_text))
    group = re.split(r"[.\[:]", case.key.strip())[0] if not case.raw else "s0"
    command = (
        ("privleak.pipeline.params", "check")
        if case.check
        else ("privleak.pipeline.stage", GROUP_STAGE[group])
    )
    result = project.run(*command)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert lines == [lines[-1]] and lines[-1].startswith("privleak: error: params.yaml: ")
    assert case.expected in lines[-1]
    for placeholder, content in project.placeholders.items():
        assert placeholder.read_text() == content, f"{placeholder} was touched"


def test_the_catalogue_has_every_kind_of_case():
    assert len(CASES) >= 35
    assert sum(case.raw for case in CASES.values()) >= 3
    assert sum(case.check for case in CASES.values()) >= 3


def test_valid_params_pass_check(project):
    (project.root / "params.yaml").write_text(project.params_text)
    result = project.run("privleak.pipeline.params", "check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "params.yaml: ok (profile smoke)"


def test_the_poison_stops_a_runner_that_gets_past_validation(project):
    """With valid params the runner reaches the notebook machinery and hits the poison: so a
    bad case that ends with exit 2 and the one line never reached it."""
    (project.root / "params.yaml").write_text(project.params_text)
    result = project.run("privleak.pipeline.stage", "report")
    assert result.returncode == 1
    assert "imported before params.yaml was validated" in result.stderr
    for placeholder, content in project.placeholders.items():
        assert placeholder.read_text() == content
