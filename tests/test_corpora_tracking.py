"""User corpora and S1 sequence lists are DVC-tracked inputs: editing a file under data/external
marks the stages that read it as changed, and a corpus file that no slot names marks none of the
corpus readers. Runs dvc in a throwaway git + DVC repo whose stages keep the real dvc.yaml's deps
and replace each cmd by a trivial one; the preflight stage keeps its real fingerprinting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from privleak.pipeline import corpora

REPO = Path(__file__).resolve().parents[1]
DVC = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
# The stages that read each tracked folder: preflight checks both (and fingerprints the corpus
# files each corpus reader's slots name); S1 lists -> s1_scores and s1_isp.
S1_READERS = ["s1_scores", "s1_isp"]
READERS = {
    "data/external/corpora": ["preflight"],
    "data/external/s1": ["preflight", *S1_READERS],
}
# What the fingerprinting preflight stage runs in the throwaway repo: the real
# corpora.write_fingerprints over that repo's params.yaml (the model checks need the project).
FINGERPRINT_CMD = (
    f'{sys.executable} -c "import pathlib, yaml; from privleak.pipeline import corpora; '
    "corpora.write_fingerprints(yaml.safe_load(open('params.yaml')), pathlib.Path('.'))\""
)

pytestmark = pytest.mark.skipif(DVC is None, reason="dvc is not installed")


def _run(root: Path, *command: str) -> str:
    env = os.environ | {"DVC_NO_ANALYTICS": "1", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stdout[-1000:]} {done.stderr[-1000:]}"
    return done.stdout


def _external_deps(stage: dict) -> list[str]:
    return [dep for dep in stage.get("deps", []) if dep.startswith("data/external")]


def _fingerprint_deps(stage: dict) -> list[str]:
    folder = corpora.FINGERPRINT_DIR.as_posix()
    return [dep for dep in stage.get("deps", []) if dep.startswith(folder)]


@pytest.fixture
def tracked_repo(tmp_path) -> Path:
    """git + dvc repo with a copy of data/external and, per reading stage, its real external
    deps and a cmd that writes one marker output; `dvc repro` has recorded the lock."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    root = tmp_path / "repo"
    shutil.copytree(REPO / "data" / "external", root / "data" / "external")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (root / "data" / "external" / "corpora" / "named.jsonl").write_text('{"text": "a record"}\n')
    profile = params["profile"]
    params["s4"][profile]["corpus"] = {"source": "file:data/external/corpora/named.jsonl"}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    minimal = {
        name: {
            "cmd": f"mkdir -p out && date +%s%N >> out/{name}",
            "deps": _external_deps(stages[name]) + _fingerprint_deps(stages[name]),
            "outs": [{f"out/{name}": {"persist": True}}],  # one line a run: runs counted
        }
        for name in [*S1_READERS, *corpora.READERS]
    }
    minimal["preflight"] = {
        "cmd": FINGERPRINT_CMD,
        "deps": ["params.yaml", *_external_deps(stages["preflight"])],
        "outs": [{corpora.FINGERPRINT_DIR.as_posix(): {"cache": False, "persist": True}}],
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": minimal}))
    _run(root, "git", "init", "-q")
    _run(root, DVC, "init", "-q")
    _run(root, DVC, "repro", "-q")
    return root


def _changed(root: Path) -> set[str]:
    return set(json.loads(_run(root, DVC, "status", "--json") or "{}"))


def test_every_external_folder_is_a_dep_of_its_readers():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for folder, readers in READERS.items():
        assert (REPO / folder / "README.md").is_file(), f"{folder} has no committed README"
        for name in readers:
            covering = [d for d in _external_deps(stages[name]) if f"{folder}/".startswith(f"{d}/")]
            assert covering, f"{name} does not depend on {folder}"


def test_corpus_readers_depend_on_their_fingerprint_not_the_folder():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    readers = {name for name, stage in stages.items() if _fingerprint_deps(stage)}
    assert readers == set(corpora.READERS)
    for name in corpora.READERS:
        assert _fingerprint_deps(stages[name]) == [f"data/corpora/{name}.txt"]
        assert "data/external/corpora" not in _external_deps(stages[name]), name


def test_data_external_is_not_git_ignored():
    paths = ["data/external/corpora/new.jsonl", "data/external/s1/new.jsonl"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 128:
        pytest.skip("the project is not a git checkout")
    assert done.returncode == 1, f"git-ignored: {done.stdout}"


def _runs(root: Path) -> dict[str, int]:
    """How many times each marker stage has run since the repo was made."""
    return {p.name: len(p.read_text().splitlines()) for p in (root / "out").iterdir()}


def test_editing_an_external_file_marks_its_readers_changed(tracked_repo):
    assert _changed(tracked_repo) == set()
    for folder, readers in READERS.items():
        (tracked_repo / folder / "mine.jsonl").write_text('{"text": "a new record"}\n')
        assert _changed(tracked_repo) == set(readers), folder
        _run(tracked_repo, DVC, "repro", "-q")  # record the edit before the next folder


def test_an_unnamed_corpus_file_reruns_no_reader(tracked_repo):
    before = _runs(tracked_repo)
    (tracked_repo / "data/external/corpora/unused.jsonl").write_text('{"text": "not named"}\n')
    assert _changed(tracked_repo) == {"preflight"}  # the few-second check, nothing else
    _run(tracked_repo, DVC, "repro", "-q")
    assert _changed(tracked_repo) == set()
    assert _runs(tracked_repo) == before  # no corpus reader ran


def test_editing_a_named_corpus_file_reruns_only_its_reader(tracked_repo):
    before = _runs(tracked_repo)
    (tracked_repo / "data/external/corpora/named.jsonl").write_text('{"text": "edited"}\n')
    _run(tracked_repo, DVC, "repro", "-q")
    after = _runs(tracked_repo)
    assert {name for name in after if after[name] != before[name]} == {"s4_retrieve"}


def test_each_reader_fingerprints_exactly_the_local_corpora_its_slots_name(tmp_path):
    folder = tmp_path / "data/external/corpora"
    (folder / "dataset").mkdir(parents=True)
    (folder / "dataset" / "part.arrow").write_bytes(b"rows")
    for name in ("a", "b", "c", "d", "e"):
        (folder / f"{name}.jsonl").write_text(f'{{"text": "{name}"}}\n')
    source = "file:data/external/corpora/{}.jsonl".format
    params = {
        "profile": "p",
        "data": {"p": {"cnn_dm": {"source": source("a")}, "pretrain": {"source": "synthetic:"}}},
        "s2": {"p": {"corpora": {"enron": {"source": source("b")}}}},
        "s3": {
            "p": {
                "corpus": {"source": source("c")},
                "classifier": {"public": {"source": source("d")}},
            }
        },  # fmt: skip
        "s4": {"p": {"corpus": {"source": "hf:data/external/corpora/dataset:train"}}},
    }
    named = {stage: corpora.named_files(params, stage, tmp_path) for stage in corpora.READERS}
    assert named == {
        "prepare_data": [("data.p.cnn_dm", Path("data/external/corpora/a.jsonl"))],
        "s2_index": [("s2.p.corpora.enron", Path("data/external/corpora/b.jsonl"))],
        "s3_prepare": [
            ("s3.p.corpus", Path("data/external/corpora/c.jsonl")),
            ("s3.p.classifier.public", Path("data/external/corpora/d.jsonl")),
        ],
        "s4_retrieve": [("s4.p.corpus", Path("data/external/corpora/dataset"))],
    }
    before = corpora.fingerprint(params, "s4_retrieve", tmp_path)
    (folder / "dataset" / "part.arrow").write_bytes(b"edited rows")
    assert corpora.fingerprint(params, "s4_retrieve", tmp_path) != before
    assert corpora.fingerprint(params, "prepare_data", tmp_path).startswith("data.p.cnn_dm ")
