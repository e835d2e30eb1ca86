"""The bad-input catalogue, part 2: inputs params validation cannot judge (file contents, models,
devices, corpus sizes) run through the real stage runner and notebooks.

Each case runs one stage of a temporary project (profile smoke) whose every declared output exists
as a placeholder, and asserts: exit status 2, one stderr line naming the param or file and what is
allowed, and every placeholder of every stage unchanged (the failing stage's own outputs are
restored too). Part 1, tests/test_bad_inputs.py, covers broken params.yaml values.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from privleak.pipeline import params, paths
from tests.conftest import tiny_llama, word_tokenizer

REPO = Path(__file__).resolve().parents[1]
STAGES = list(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"])
FILE_CORPUS = "data/external/corpora/news.jsonl"
GOOD_RECORD = '{"id": "a1", "article": "alpha beta gamma", "highlights": "alpha beta"}\n'


@dataclass
class Project:
    root: Path
    placeholders: dict[Path, str]

    def write_params(self, edit) -> None:
        tree = yaml.safe_load((REPO / "params.yaml").read_text())
        tree["profile"] = "smoke"
        edit(tree)
        (self.root / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))

    def run(self, *command: str) -> subprocess.CompletedProcess:
        env = os.environ | {"PRIVLEAK_ROOT": str(self.root), "PYTHONPATH": str(REPO / "lib")}
        return subprocess.run(
            [sys.executable, "-m", *command],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    return build_project(tmp_path_factory.mktemp("runtime"))


def build_project(root: Path) -> Project:
    """dvc.yaml and notebooks in `root`, a placeholder for every declared output, and a tiny LM
    in tiny-lm/."""
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    smoke = params.load(REPO / "params.yaml") | {"profile": "smoke"}
    placeholders = {}
    for stage in STAGES:
        for output in params.stage_outputs(stage, smoke):
            target = root / output.relative_to(paths.ROOT)
            placeholder = target if target.suffix else target / "placeholder.txt"
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholders[placeholder] = f"{stage} output"
            placeholder.write_text(placeholders[placeholder])
    # context_gain reads data/raw/cnn_dm.jsonl: four good records, so only the case's input is bad.
    (root / "data" / "raw" / "cnn_dm.jsonl").write_text(GOOD_RECORD * 4)
    placeholders[root / "data" / "raw" / "cnn_dm.jsonl"] = GOOD_RECORD * 4
    folder = root / "tiny-lm"
    tiny_llama().save_pretrained(folder)
    word_tokenizer(add_bos=True).save_pretrained(folder)
    return Project(root, placeholders)


def set_key(dotted: str, value):
    def edit(tree):
        *parents, last = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        node[last] = value

    return edit


def file_corpus(tree):
    tree["data"]["smoke"]["cnn_dm"] = {"source": f"file:{FILE_CORPUS}"}


def tiny_lm(tree, **changes):
    tree["models"]["smoke"] |= {"lm": "tiny-lm"} | changes


@dataclass
class Case:
    stage: str
    edit: object  # params.yaml edit
    content: bytes | None  # the file corpus's bytes, when the case writes one
    expected: list[str]  # each must appear in the one error line
    corrupt_weights: bool = False


CASES = {
    "non_utf8_corpus": Case(
        "prepare_data",
        file_corpus,
        GOOD_RECORD.encode() + b'{"id": "a2", "article": "caf\xe9"}\n',
        [FILE_CORPUS, "line 2", "not valid UTF-8", "allowed:"],
    ),
    "invalid_json_line": Case(
        "prepare_data",
        file_corpus,
        GOOD_RECORD.encode() + b'{"id": "a2", "article": \n',
        [FILE_CORPUS, "line 2 is not valid JSON", "allowed:"],
    ),
    "corpus_missing_a_required_field": Case(
        "prepare_data",
        file_corpus,
        b'{"id": "a1", "article": "alpha beta gamma"}\n',
        ["data slot 'cnn_dm'", "record 0 (id 'a1') has no field 'highlights'", "fields"],
    ),
    "empty_corpus_file": Case(
        "prepare_data", file_corpus, b"", [FILE_CORPUS, "has no records", "at least one"]
    ),
    "n_examples_beyond_the_corpus": Case(
        "context_gain",
        # A file: slot has no `n` the schema could compare with; the count is checked on load.
        lambda tree: (
            tiny_lm(tree),
            file_corpus(tree),
            set_key("context_gain.smoke.n_examples", 100)(tree),
        ),
        GOOD_RECORD.encode() * 4,
        ["context_gain.smoke.n_examples = 100", "has only 4 records", "allowed: 1 to 4"],
    ),
    "model_folder_not_found": Case(
        "context_gain",
        lambda tree: tiny_lm(tree, lm="data/models/no-such-model"),
        None,
        ["model folder 'data/models/no-such-model' not found"],
    ),
    "truncated_safetensors": Case(
        "context_gain",
        tiny_lm,
        None,
        ["model.safetensors", "truncated or corrupt"],
        corrupt_weights=True,
    ),
    "cuda_without_cuda": Case(
        "context_gain",
        lambda tree: tiny_lm(tree, device="cuda"),
        None,
        ["models.smoke.device = 'cuda'", "CUDA is not available", "available: cpu"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_runtime_input_is_one_line_and_removes_nothing(project, name, monkeypatch):
    case = CASES[name]
    if name == "cuda_without_cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    project.write_params(case.edit)
    corpus = project.root / FILE_CORPUS
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.unlink(missing_ok=True)
    if case.content is not None:
        corpus.write_bytes(case.content)
    weights = project.root / "tiny-lm" / "model.safetensors"
    saved = weights.read_bytes()
    if case.corrupt_weights:
        weights.write_bytes(saved[: len(saved) // 2])
    try:
        result = project.run("privleak.pipeline.stage", case.stage)
    finally:
        weights.write_bytes(saved)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("privleak: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for part in case.expected:
        assert part in lines[0], (part, lines[0])
    for placeholder, content in project.placeholders.items():
        assert placeholder.read_text() == content, f"{placeholder} changed"
    assert re.search(rf"\(see reports/failed/{case.stage}\.ipynb\)$", lines[0]), lines[0]


def test_preflight_stops_the_paper_profile_on_a_machine_without_cuda(project):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    project.write_params(lambda tree: tree.update(profile="paper"))
    result = project.run("privleak.pipeline.preflight")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "models.paper.device = 'cuda'" in lines[0] and "available: cpu" in lines[0]
    for placeholder, content in project.placeholders.items():
        assert placeholder.read_text() == content
