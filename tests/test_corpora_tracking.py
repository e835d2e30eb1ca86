"""User corpora and S1 sequence lists are DVC-tracked inputs: editing a file under data/external
marks the stages that read it as changed. Runs dvc in a throwaway git + DVC repo whose stages
keep the real dvc.yaml's deps under data/external and replace each cmd by a trivial one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DVC = shutil.which("dvc", path=str(Path(sys.executable).parent)) or shutil.which("dvc")
# The stage that reads each tracked folder: corpora -> prepare_data, S1 lists ->
# s1_scores and s1_isp.
READERS = {
    "data/external/corpora": ["prepare_data"],
    "data/external/s1": ["s1_scores", "s1_isp"],
}

pytestmark = pytest.mark.skipif(DVC is None, reason="dvc is not installed")


def _run(root: Path, *command: str) -> str:
    env = os.environ | {"DVC_NO_ANALYTICS": "1", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{command}: {done.stdout[-1000:]} {done.stderr[-1000:]}"
    return done.stdout


def _external_deps(stage: dict) -> list[str]:
    return [dep for dep in stage.get("deps", []) if dep.startswith("data/external")]


@pytest.fixture
def tracked_repo(tmp_path) -> Path:
    """git + dvc repo with a copy of data/external and, per reading stage, its real external
    deps and a cmd that writes one marker output; `dvc repro` has recorded the lock."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    root = tmp_path / "repo"
    shutil.copytree(REPO / "data" / "external", root / "data" / "external")
    minimal = {
        name: {
            "cmd": f"mkdir -p out && echo done > out/{name}",
            "deps": _external_deps(stages[name]),
            "outs": [f"out/{name}"],
        }
        for names in READERS.values()
        for name in names
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
            assert folder in _external_deps(stages[name]), f"{name} does not depend on {folder}"


def test_data_external_is_not_git_ignored():
    paths = ["data/external/corpora/new.jsonl", "data/external/s1/new.jsonl"]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 128:
        pytest.skip("the project is not a git checkout")
    assert done.returncode == 1, f"git-ignored: {done.stdout}"


def test_editing_an_external_file_marks_its_readers_changed(tracked_repo):
    assert _changed(tracked_repo) == set()
    for folder, readers in READERS.items():
        (tracked_repo / folder / "mine.jsonl").write_text('{"text": "a new record"}\n')
        assert _changed(tracked_repo) == set(readers), folder
        _run(tracked_repo, DVC, "repro", "-q")  # record the edit before the next folder
