"""`dvc repro` as typed never loses outputs: a bad param, a failing stage or an unknown key stops
with one line, and every recorded output is still in the workspace, byte for byte.

A DVC project in a temporary folder holds the real dvc.yaml, notebooks, scripts, lib and
params.yaml (profile smoke), with a placeholder for every declared output, all recorded in
dvc.lock and the DVC cache by `dvc commit`. DVC deletes a stage's outputs before running it; the
preflight stage stops a bare `dvc repro` before that, and the stage runner puts the recorded
outputs back after any failure of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from privleak.pipeline import params, paths

REPO = Path(__file__).resolve().parents[1]
STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="DVC's project needs git")


def _dvc(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = os.environ | {
        "PRIVLEAK_ROOT": str(root),
        "PRIVLEAK_PYTHON": sys.executable,
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


SMOKE = params.load(REPO / "params.yaml") | {"profile": "smoke"}
DECLARED = [o.relative_to(paths.ROOT) for s in STAGES for o in params.stage_outputs(s, SMOKE)]


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file under every declared output of the smoke profile."""
    files = {}
    for output in DECLARED:
        target = root / output
        for file in [target] if target.is_file() else sorted(target.rglob("*")):
            if file.is_file():
                files[str(file.relative_to(root))] = file.read_bytes()
    return files


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The project, committed to git, with every output recorded by DVC."""
    root = tmp_path_factory.mktemp("dvc_project")
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy(REPO / name, root / name)
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("notebooks", "scripts", "lib", "data/external"):
        shutil.copytree(REPO / folder, root / folder, ignore=ignore)
    text = (REPO / "params.yaml").read_text()
    smoke_text = re.sub(r"^profile: .*$", "profile: smoke", text, count=1, flags=re.M)
    (root / "params.yaml").write_text(smoke_text)
    for stage in STAGES:
        for output in params.stage_outputs(stage, SMOKE):
            target = root / output.relative_to(paths.ROOT)
            placeholder = target if target.suffix else target / "placeholder.txt"
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholder.write_text(f"{stage} output {target.name}\n")
    (root / "data" / "preflight.txt").write_text((REPO / "data" / "preflight.txt").read_text())
    for stage, definition in STAGES.items():  # deps that are files inside folder outputs
        for dep in definition.get("deps", []):
            target = root / params.resolve(dep, SMOKE)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)  # benchmarks/coverage.csv
                target.write_text(f"{stage} input\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    assert _dvc(root, "init", "-q").returncode == 0
    committed = _dvc(root, "commit", "-f", "-q")
    assert committed.returncode == 0, committed.stderr
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", "recorded"], cwd=root, check=True)
    status = _dvc(root, "status", "--json")
    assert status.returncode == 0 and yaml.safe_load(status.stdout) == {}, status.stdout
    return root


@pytest.fixture
def project(recorded: Path):
    """The recorded project; its params.yaml and outputs as recorded again afterwards."""
    yield recorded
    subprocess.run(["git", "checkout", "-q", "--", "params.yaml"], cwd=recorded, check=True)
    assert _dvc(recorded, "checkout", "-f", "-q").returncode == 0


def _set(root: Path, old: str, new: str) -> None:
    text = (root / "params.yaml").read_text()
    assert old in text, old
    (root / "params.yaml").write_text(text.replace(old, new, 1))


def _privleak_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("privleak:")]


def _changed(root: Path) -> dict:
    """`dvc status` as {stage: [its changes]}."""
    done = _dvc(root, "status", "--json")
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_bare_dvc_repro_with_a_bad_param_stops_at_the_preflight_and_loses_nothing(project):
    before = _outputs(project)
    _set(project, "questions: {per_bucket: 2,", "questions: {per_bucket: 0,")
    done = _dvc(project, "repro")
    assert done.returncode != 0
    assert _privleak_lines(done) == [
        "privleak: preflight: params.yaml: s4.smoke.questions.per_bucket = 0: must be null or an "
        "integer >= 1"
    ]
    assert _outputs(project) == before
    changed = _changed(project)
    # preflight and report read the whole params.yaml (the report shows it); s4_retrieve the key.
    assert set(changed) == {"preflight", "s4_retrieve", "report"}
    assert changed["s4_retrieve"] == [
        {"changed deps": {"params.yaml": {"s4.smoke.questions": "modified"}}}
    ]


def test_a_failing_stage_puts_back_the_outputs_dvc_removed(project):
    """`dvc repro -s` skips the preflight: DVC removes the stage's outputs, the runner fails on
    the param and copies the recorded outputs back from the DVC cache."""
    before = _outputs(project)
    _set(project, "questions: {per_bucket: 2,", "questions: {per_bucket: 0,")
    done = _dvc(project, "repro", "-s", "s4_retrieve")
    assert done.returncode != 0
    assert _privleak_lines(done) == [
        "privleak: error: params.yaml: s4.smoke.questions.per_bucket = 0: must be null or an "
        "integer >= 1"
    ]
    assert _outputs(project) == before
    assert _changed(project)["s4_retrieve"] == [
        {"changed deps": {"params.yaml": {"s4.smoke.questions": "modified"}}}
    ]


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (  # a group that stages declare key by key: no stage's params changed
            "    sweep_corpus: healthcaremagic\n",
            "    sweep_corpus: healthcaremagic\n    defenses: [pad]\n",
            "params.yaml: s2.smoke.defenses: unknown key; allowed: ",
        ),
        ("profile: smoke", "profile: smok", "params.yaml: profile = 'smok': must be one of "),
        # offline: no CUDA here, or (on a GPU machine) hub models that are not cached
        ("profile: smoke", "profile: paper", "params "),
        (  # a hub model that is not local, offline
            "rerank_top: 2, reranker: tfidf}",
            "rerank_top: 2, reranker: cross-encoder/not-cached-here}",
            "params s2.smoke.retrieval.reranker = 'cross-encoder/not-cached-here': hub model not "
            "in the local Hugging Face cache and HF_HUB_OFFLINE=1",
        ),
    ],
    ids=["unknown_key", "unknown_profile", "paper_offline", "model_not_local"],
)
def test_bare_dvc_repro_validates_what_make_repro_does(project, old, new, line):
    before = _outputs(project)
    _set(project, old, new)
    done = _dvc(project, "repro")
    assert done.returncode != 0
    [shown] = _privleak_lines(done)
    assert shown.startswith(f"privleak: preflight: {line}"), shown
    assert _outputs(project) == before  # the model weights' placeholder included


def test_an_output_dvc_does_not_cache_comes_back_from_git(project):
    """metrics/s4.json is `cache: false` (committed to git): DVC removes it before the run all
    the same, and the runner takes it back from git's HEAD, whose bytes have the recorded md5."""
    before = _outputs(project)
    _set(project, "questions: {per_bucket: 2,", "questions: {per_bucket: 0,")
    done = _dvc(project, "repro", "-f", "-s", "render_s4")
    assert done.returncode != 0
    assert len(_privleak_lines(done)) == 1
    assert _outputs(project) == before
    assert "render_s4" not in _changed(project)


def test_an_output_the_cache_lost_is_named_in_the_one_line(project):
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]["s4_retrieve"]
    [reports] = [o for o in lock["outs"] if o["path"] == "reports/s4_retrieve"]
    listing = project / ".dvc" / "cache" / "files" / "md5" / reports["md5"][:2] / reports["md5"][2:]
    aside = listing.with_name("aside")
    listing.rename(aside)
    try:
        _set(project, "questions: {per_bucket: 2,", "questions: {per_bucket: 0,")
        done = _dvc(project, "repro", "-s", "s4_retrieve")
    finally:
        aside.rename(listing)
    [line] = _privleak_lines(done)
    assert line.endswith(
        "; neither the DVC cache nor git holds its recorded reports/s4_retrieve (rebuild with "
        "`dvc repro -s s4_retrieve`)"
    ), line
    assert (project / "data" / "interim" / "s4" / "retrieve" / "placeholder.txt").exists()
    assert not (project / "reports" / "s4_retrieve").exists()
