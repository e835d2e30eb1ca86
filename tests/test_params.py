"""params.yaml and dvc.yaml agree: profiles resolve; notebooks take only declared params."""

from __future__ import annotations

import ast
import re
import sys

import pytest
import yaml

from privleak.errors import PrivleakError
from privleak.pipeline import params, paths

DEFINED = yaml.safe_load((paths.ROOT / "dvc.yaml").read_text())["stages"]
# Every stage but `preflight` (a plain command, no notebook) runs a notebook.
STAGES = [stage for stage in DEFINED if stage != "preflight"]
PARAMS_FILE = paths.PARAMS_FILE


def with_profile(profile: str) -> dict:
    return params.load() | {"profile": profile}


def parameters_cell_names(stage: str) -> set[str]:
    """Names assigned in the notebook's `parameters` cell."""
    source = (paths.NOTEBOOKS / f"{stage}.py").read_text()
    cell = re.search(r'# %% tags=\["parameters"\]\n(.*?)(?=\n# %%)', source, re.DOTALL)
    assert cell, f"notebooks/{stage}.py has no parameters cell"
    tree = ast.parse(cell.group(1))
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}


@pytest.mark.parametrize("stage", STAGES)
def test_notebook_parameters_are_exactly_the_declared_params(stage):
    assert parameters_cell_names(stage) == set(params.stage_params(stage))


def parameters_cell_values(stage: str) -> dict:
    """The values the notebook's `parameters` cell assigns (its defaults outside a stage run)."""
    source = (paths.NOTEBOOKS / f"{stage}.py").read_text()
    cell = re.search(r'# %% tags=\["parameters"\]\n(.*?)(?=\n# %%)', source, re.DOTALL)
    assert cell, f"notebooks/{stage}.py has no parameters cell"
    values: dict = {}
    exec(cell.group(1), {}, values)  # literals only: the cell is the notebook's own source
    return values


@pytest.mark.parametrize("stage", STAGES)
def test_notebook_defaults_are_the_smoke_profiles_values(stage):
    # A notebook run by hand (jupytext, no papermill) then computes what a smoke run computes.
    defaults = parameters_cell_values(stage)
    smoke = params.stage_params(stage, with_profile("smoke"))
    assert {name: defaults.get(name) for name in smoke} == smoke


@pytest.mark.parametrize("profile", params.PROFILES)
@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_resolves_under_every_profile(stage, profile):
    values = params.stage_params(stage, with_profile(profile))
    outputs = params.stage_outputs(stage, with_profile(profile))
    assert outputs and all(paths.ROOT in path.parents for path in outputs)
    assert values or stage.startswith("render")


def test_profiles_differ_only_where_stages_should_rerun():
    smoke = params.stage_params("context_gain", with_profile("smoke"))
    embedded = params.stage_params("context_gain", with_profile("embedded"))
    assert smoke["context_gain"] != embedded["context_gain"]
    assert params.stage_params("render_context_gain", with_profile("smoke")) == (
        params.stage_params("render_context_gain", with_profile("embedded"))
    )


def real_params_text(**replace: str) -> str:
    """The repository's params.yaml; each `key="key: value"` replaces the top-level key's line."""
    text = PARAMS_FILE.read_text()
    for key, line in replace.items():
        text, count = re.subn(rf"^{key}:.*$", line, text, count=1, flags=re.MULTILINE)
        assert count == 1, key
    return text


def test_unknown_profile_is_one_line_error(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text(real_params_text(profile="profile: large"))
    with pytest.raises(PrivleakError, match="profile = 'large': must be one of smoke") as info:
        params.load(bad)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("params.yaml: ")


def test_missing_key_names_the_key():
    with pytest.raises(PrivleakError, match="no key 'embedded.nope'"):
        params.lookup(params.load(), "embedded.nope")


def test_run_with_profile_switches_then_restores(tmp_path, monkeypatch):
    original = real_params_text(profile="profile: embedded")
    (tmp_path / "params.yaml").write_text(original)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "PARAMS_FILE", tmp_path / "params.yaml")
    seen = tmp_path / "seen.txt"
    command = [sys.executable, "-c", f"import shutil; shutil.copy('params.yaml', {str(seen)!r})"]
    assert params.run_with_profile("smoke", command) == 0
    assert seen.read_text() == real_params_text(profile="profile: smoke")
    assert (tmp_path / "params.yaml").read_text() == original
    assert not (tmp_path / "dvc.lock").exists()


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_runs_through_scripts_stage(stage):
    # scripts/stage finds the checkout's interpreter: `dvc repro` works without the venv on PATH.
    assert params.stage_definition(stage)["cmd"] == f"scripts/stage {stage}"


def test_the_preflight_stage_starts_every_path_of_the_dag():
    # A bare `dvc repro` reaches no stage before the preflight: every stage without an upstream
    # stage depends on the preflight's record, and the record is never removed by DVC.
    outputs = [
        next(iter(o)) if isinstance(o, dict) else o
        for stage in STAGES
        for o in DEFINED[stage].get("outs", []) + DEFINED[stage].get("metrics", [])
    ]

    def upstream(deps):
        return [o for o in outputs if any(d == o or d.startswith(o + "/") for d in deps)]

    roots = [s for s in STAGES if not upstream(DEFINED[s]["deps"])]
    assert roots, "no stage starts the DAG"
    for stage in roots:
        assert "data/preflight.txt" in DEFINED[stage]["deps"], stage
    assert DEFINED["preflight"]["cmd"].startswith("scripts/python -m privleak.pipeline.preflight")
    assert DEFINED["preflight"]["outs"] == [
        {"data/preflight.txt": {"cache": False, "persist": True}},
        {"data/corpora": {"cache": False, "persist": True}},  # the corpus readers' fingerprints
    ]
    assert "params.yaml" in DEFINED["preflight"]["deps"]
