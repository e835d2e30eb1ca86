"""A stage's recorded outputs: the ones dvc.lock names, put back from the DVC cache.

`dvc repro` deletes a stage's outputs before it runs the stage's command. When that command then
fails, the stage runner calls `restore` so the workspace holds what dvc.lock records again, as
`dvc checkout <stage>` would (that command cannot run while the failing `dvc repro` holds the
repository lock).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from privleak.pipeline import paths


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _lock_outputs(stage: str, root: Path) -> list[dict]:
    """The stage's `outs` entries in dvc.lock (path, md5, ...); [] without a lock or entry."""
    lock = root / "dvc.lock"
    if not lock.exists():
        return []
    entry = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get(stage) or {}
    return [out for out in entry.get("outs", []) if "md5" in out]


def _files(md5: str, cache) -> list[tuple[str, Path]] | None:
    """(relative path, cache file) of every file an output holds ("" for a file output), or
    None when the cache lacks any of them."""
    if md5.endswith(".dir"):
        listing = Path(cache.oid_to_path(md5))
        if not listing.is_file():
            return None
        entries = json.loads(listing.read_text())
        files = [(e["relpath"], Path(cache.oid_to_path(e["md5"]))) for e in entries]
    else:
        files = [("", Path(cache.oid_to_path(md5)))]
    return files if all(source.is_file() for _, source in files) else None


def restore(
    stage: str, declared: list[Path] | None = None, root: Path | None = None
) -> tuple[list[str], list[str]]:
    """Copy back from the DVC cache every recorded output of `stage` that is declared (absolute
    paths; None: every output the lock records) and missing from the workspace. Returns
    (restored, unavailable): the outputs put back and those whose files the cache no longer
    holds, as paths relative to `root`."""
    root = root or paths.ROOT
    recorded = {out["path"]: out["md5"] for out in _lock_outputs(stage, root)}
    if declared is None:
        declared = [root / name for name in recorded]
    missing = [p for p in declared if not (p.exists() or p.is_symlink())]
    wanted = {str(p.relative_to(root)): p for p in missing if str(p.relative_to(root)) in recorded}
    if not wanted:
        return [], []
    from dvc.repo import Repo

    cache = Repo(str(root)).cache.local
    restored, unavailable = [], []
    for name, target in wanted.items():
        files = _files(recorded[name], cache)
        if files is None:
            unavailable.append(name)
            continue
        # Built beside the target and renamed into place, so a copy that fails half-way (a full
        # disk) never leaves a partial output looking complete.
        building = target.with_name(target.name + ".restoring")
        _remove(building)
        building.parent.mkdir(parents=True, exist_ok=True)
        for relative, source in files:
            destination = building / relative if relative else building
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)  # a writable copy; the cache stays read-only
        if not files:  # an empty folder output
            building.mkdir(parents=True)
        building.rename(target)
        restored.append(name)
    return restored, unavailable
