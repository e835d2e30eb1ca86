"""Root-anchored paths, so notebooks and stages work from any working directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def project_root() -> Path:
    """The folder holding dvc.yaml: $PRIVLEAK_ROOT, else the nearest ancestor of the cwd, else
    the checkout this package was installed from."""
    if env := os.environ.get("PRIVLEAK_ROOT"):
        return Path(env).resolve()
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "dvc.yaml").exists():
            return folder
    return Path(__file__).resolve().parents[3]


ROOT = project_root()
DATA = ROOT / "data"
MODELS = DATA / "models"
RAW = DATA / "raw"
INTERIM = DATA / "interim"
FIGURES = ROOT / "figures"
METRICS = ROOT / "metrics"
REPORTS = ROOT / "reports"
NOTEBOOKS = ROOT / "notebooks"
PARAMS_FILE = ROOT / "params.yaml"


def remove(path: Path) -> None:
    """Delete a file, link or folder; nothing when it is absent."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()
