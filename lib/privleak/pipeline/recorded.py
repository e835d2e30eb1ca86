"""A stage's recorded outputs: the ones dvc.lock names, put back after a failed `dvc repro`.

`dvc repro` deletes a stage's outputs before it runs the stage's command. When that command then
fails, the stage runner calls `restore` so the workspace holds what dvc.lock records again, as
`dvc checkout <stage>` would (that command waits on the outputs DVC has locked for the failing
stage). Cached outputs come from the DVC cache; an output DVC does not cache (`cache: false`, the
git-tracked metrics) comes from git's HEAD when its bytes have the recorded md5.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import subprocess
from pathlib import Path

import yaml

from privleak.pipeline import paths


def lock_outputs(stage: str, root: Path) -> dict[str, str]:
    """{normalised path: md5} of the stage's `outs` in dvc.lock; {} without a lock or entry."""
    lock = root / "dvc.lock"
    if not lock.exists():
        return {}
    entry = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get(stage) or {}
    return {posixpath.normpath(o["path"]): o["md5"] for o in entry.get("outs", []) if "md5" in o}


def _cached_files(md5: str, cache) -> list[tuple[str, Path]] | None:
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


def _from_git(name: str, md5: str, root: Path) -> bytes | None:
    """The bytes of `name` at git's HEAD when their md5 is the recorded one, else None."""
    done = subprocess.run(
        ["git", "show", f"HEAD:{name}"], cwd=root, capture_output=True, check=False
    )
    if done.returncode != 0 or hashlib.md5(done.stdout).hexdigest() != md5:
        return None
    return done.stdout


def _rebuild(name: str, md5: str, cache, building: Path, root: Path) -> bool:
    """Write the recorded output `name` at `building`; False when neither the DVC cache nor
    git holds it."""
    files = _cached_files(md5, cache)
    if files is None:
        content = None if md5.endswith(".dir") else _from_git(name, md5, root)
        if content is None:
            return False
        building.parent.mkdir(parents=True, exist_ok=True)
        building.write_bytes(content)
        return True
    if not files:  # an empty folder output
        building.mkdir(parents=True)
    for relative, source in files:
        destination = building / relative if relative else building
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)  # a writable copy; the cache stays read-only
    return True


def restore(
    stage: str, declared: list[Path], root: Path | None = None
) -> tuple[list[str], list[str]]:
    """Put back every output of `stage` that is declared (absolute paths), recorded in
    dvc.lock and missing from the workspace. Returns (restored, unavailable): the outputs put
    back and those neither the DVC cache nor git holds, as paths relative to `root`."""
    root = root or paths.ROOT
    recorded = lock_outputs(stage, root)
    wanted = {
        name: path
        for path in declared
        if not (path.exists() or path.is_symlink())
        and (name := posixpath.normpath(os.path.relpath(path, root))) in recorded
    }
    if not wanted:
        return [], []
    from dvc.repo import Repo

    cache = Repo(str(root)).cache.local
    restored, unavailable = [], []
    for name, target in wanted.items():
        # Built under .privleak/ and renamed into place, so a copy that fails half-way (a full
        # disk) never leaves a partial output looking complete.
        building = root / ".privleak" / "restoring" / stage / name
        paths.remove(building)
        if not _rebuild(name, recorded[name], cache, building, root):
            unavailable.append(name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        building.rename(target)
        restored.append(name)
    paths.remove(root / ".privleak" / "restoring" / stage)
    return restored, unavailable
