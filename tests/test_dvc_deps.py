"""dvc.yaml deps cannot go stale: each stage declares exactly the lib files its notebook imports.

A stage's lib dependencies are the transitive privleak import closure of notebooks/<stage>.py.
A missing dep lets `dvc repro` serve results computed by old code; an extra one reruns a stage
for edits that cannot change its results.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from privleak.pipeline import paths

LIB = paths.ROOT / "lib"
# Infrastructure that cannot change a stage's results: the error type (and the package root that
# re-exports it) and the pipeline machinery (root-anchored paths, params and their schema, the
# stage runner and its checkpoints). Declaring them would rerun the whole DAG for an edited error
# message.
INFRASTRUCTURE = {"privleak", "privleak.errors"}
PIPELINE = "privleak.pipeline"


def is_infrastructure(module: str) -> bool:
    return module in INFRASTRUCTURE or module == PIPELINE or module.startswith(PIPELINE + ".")


def module_file(module: str, lib: Path = LIB) -> Path | None:
    """lib/<a>/<b>.py or lib/<a>/<b>/__init__.py for 'a.b'; None when it is not in the lib."""
    base = lib.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported_modules(source: str, lib: Path = LIB) -> set[str]:
    """The privleak modules a Python source imports, at any depth (lazy imports included).

    `from privleak.metrics import sequence` names the submodule privleak.metrics.sequence when it
    exists, else the package privleak.metrics.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [
                f"{node.module}.{alias.name}"
                if module_file(f"{node.module}.{alias.name}", lib)
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] == "privleak")
    return found


def import_closure(source: str, lib: Path = LIB) -> set[str]:
    """Every privleak module executed by importing what `source` imports: the modules themselves,
    the modules they import, and the packages above each of them."""
    pending, seen = list(imported_modules(source, lib)), set()
    while pending:
        module = pending.pop()
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            file = module_file(name, lib)
            if name in seen or file is None:
                continue
            seen.add(name)
            pending.extend(imported_modules(file.read_text(), lib))
    return seen


def needed_lib_deps(stage: str, lib: Path = LIB) -> set[str]:
    """Repository-relative lib files stage's notebook depends on (infrastructure excluded; a
    package __init__ that holds only a docstring changes nothing and is excluded too)."""
    source = (paths.NOTEBOOKS / f"{stage}.py").read_text()
    needed = set()
    for module in import_closure(source, lib):
        if is_infrastructure(module):
            continue
        file = module_file(module, lib)
        body = ast.parse(file.read_text()).body
        if file.name == "__init__.py" and all(isinstance(n, ast.Expr) for n in body):
            continue
        needed.add(file.relative_to(lib.parent).as_posix())
    return needed


def declared_lib_deps(definition: dict) -> set[str]:
    """The stage's lib code deps; the template files the data modules read are test_templates'."""
    return {
        dep
        for dep in definition.get("deps", [])
        if dep.startswith("lib/") and not dep.startswith("lib/privleak/data/templates")
    }


def missing_and_extra(needed: set[str], declared: set[str]) -> tuple[set[str], set[str]]:
    """Needed files no declared dep covers, and declared deps that cover no needed file (a
    declared folder covers every file under it)."""

    def covers(dep: str, file: str) -> bool:
        return file == dep or file.startswith(dep.rstrip("/") + "/")

    missing = {f for f in needed if not any(covers(d, f) for d in declared)}
    extra = {d for d in declared if not any(covers(d, f) for f in needed)}
    return missing, extra


STAGES = {  # the notebook stages; `preflight` runs privleak.pipeline.preflight (infrastructure)
    stage: definition
    for stage, definition in yaml.safe_load((paths.ROOT / "dvc.yaml").read_text())["stages"].items()
    if stage != "preflight"
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_stage_declares_exactly_its_notebooks_lib_import_closure(stage):
    missing, extra = missing_and_extra(needed_lib_deps(stage), declared_lib_deps(STAGES[stage]))
    assert not missing, f"dvc.yaml stage {stage} misses deps {sorted(missing)}"
    assert not extra, f"dvc.yaml stage {stage} declares lib deps it never imports {sorted(extra)}"


def test_closure_follows_lib_imports_transitively(tmp_path):
    package = tmp_path / "privleak"
    (package / "metrics").mkdir(parents=True)
    (package / "__init__.py").write_text('"""root."""\n')
    (package / "metrics" / "__init__.py").write_text('"""metrics."""\n')
    (package / "metrics" / "sequence.py").write_text("from privleak.decoding import decode\n")
    (package / "decoding.py").write_text("from privleak import scoring\n")
    (package / "scoring.py").write_text("def f():\n    from privleak.models import load\n")
    (package / "models.py").write_text("import torch\n")
    (package / "unused.py").write_text("")
    closure = import_closure("from privleak.metrics import sequence as seq\n", tmp_path)
    assert closure == {
        "privleak",
        "privleak.metrics",
        "privleak.metrics.sequence",
        "privleak.decoding",
        "privleak.scoring",
        "privleak.models",
    }


def test_a_planted_missing_dep_is_caught():
    stage = "s0_generate"
    declared = declared_lib_deps(STAGES[stage])
    planted = declared - {"lib/privleak/decoding/engine.py"}
    missing, _ = missing_and_extra(needed_lib_deps(stage), planted)
    assert missing == {"lib/privleak/decoding/engine.py"}


def test_a_declared_folder_covers_its_files_and_an_unused_dep_is_extra():
    needed = {"lib/privleak/metrics/sequence.py", "lib/privleak/models.py"}
    missing, extra = missing_and_extra(
        needed, {"lib/privleak/metrics", "lib/privleak/models.py", "lib/privleak/cid.py"}
    )
    assert missing == set() and extra == {"lib/privleak/cid.py"}
