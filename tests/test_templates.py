"""The generators' templates and word pools are package data (privleak/data/templates/*.yaml):
they load, ship with the package, and every corpus built from them stays byte-identical."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from privleak.data.synthetic import GENERATORS, generate
from privleak.data.templating import templates

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "lib" / "privleak" / "data"
TEMPLATE_FILES = sorted(p.stem for p in (DATA / "templates").glob("*.yaml"))

# sha256 of json.dumps((records, secrets), sort_keys=True) for generate(name, 20, seed=0), as
# computed before the templates left the code: editing a template file must update these on purpose.
PINNED = {
    "cnn_dm": "e1e1cd7615d959b0504c20af886056cd5ddc2239f5a0f1fbab81f205707f5d25",
    "dialogs": "401333c7f5d423f94ec3d6688f1daea9c9ee03d7b662f1980c773656b22411e3",
    "enron": "41e1dca6e3326eb6f84faac3fec53c66c3e31edcf04aeec41d81bb44275ca762",
    "healthcaremagic": "bcc3ee2a254be75d322a9a5adaa509d93b3ac9694cd43fa4c63f862a522b5ffc",
    "icliniq": "582d45364ac6f5dfbd091ebf840baaa3c1964732e2e69a3fdee7cf6c6889dd39",
    "medical_dirichlet": "8487a5ee45a79fb2a9d392502de0864a606113900e0cc365daddf36a5d27cc6e",
    "pretrain": "c3b30aba7319643d9b593856b1b259d43a0f008fafe4bc037c0da95696df3a36",
    "pubmedqa": "c128da6b711bc5287ff36e959fa7e094dba2ffb3f48ac2bfbd743e98b47e9411",
}


def _readers() -> dict[str, list[str]]:
    """lib/privleak/data/<module>.py -> the template files it reads."""
    found = {}
    for path in sorted(DATA.glob("*.py")):
        names = re.findall(r'\btemplates\("(\w+)"\)', path.read_text(encoding="utf-8"))
        if names:
            found[str(path.relative_to(REPO))] = sorted(set(names))
    return found


def test_pins_cover_every_generator():
    assert set(PINNED) == set(GENERATORS)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_same_seed_gives_the_pinned_bytes(name):
    corpus = json.dumps(generate(name, 20, 0), sort_keys=True).encode()
    assert hashlib.sha256(corpus).hexdigest() == PINNED[name]


@pytest.mark.parametrize("name", TEMPLATE_FILES)
def test_template_files_load_from_the_installed_package(name):
    resource = importlib.resources.files("privleak.data") / "templates" / f"{name}.yaml"
    assert yaml.safe_load(resource.read_text(encoding="utf-8")) == templates(name)
    assert templates(name) is templates(name)  # cached: read once per process


def test_every_template_file_is_read_and_declared_as_package_data():
    read = {name for names in _readers().values() for name in names}
    assert read == set(TEMPLATE_FILES)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["privleak.data"]
    assert all(any((DATA / "templates" / f"{n}.yaml").match(f"*/{p}") for p in patterns)
               for n in TEMPLATE_FILES)  # fmt: skip


def test_stages_that_import_a_reader_depend_on_its_template_files():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    missing = []
    for stage_name, stage in stages.items():
        deps = set(stage.get("deps", []))
        for module, names in _readers().items():
            if module not in deps or "lib/privleak/data/templates" in deps:
                continue
            missing += [
                f"{stage_name}: lib/privleak/data/templates/{n}.yaml"
                for n in names
                if f"lib/privleak/data/templates/{n}.yaml" not in deps
            ]
    assert not missing, "dvc.yaml deps missing:\n" + "\n".join(missing)
