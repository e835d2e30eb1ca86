"""Which user corpus files each corpus-reading stage reads, as content fingerprints.

A stage that read the whole folder data/external/corpora would rerun whenever any file in it
changed, a file its profile never names included. Instead the preflight stage writes, for each
reader, data/corpora/<stage>.txt: one line `<params key> <path> <sha256>` per local corpus (a
`file:` source or an `hf:` folder) that the stage's slots name under the active profile (or one
line saying there is none). Preflight must run before a reader for the fingerprint to be current:
`dvc repro` runs it first; `dvc repro -s <reader>` alone does not. The readers
depend on their own fingerprint file, so a file no slot names changes no fingerprint, and an edit
to a named file changes exactly its readers' fingerprints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from privleak.pipeline.params import profile_block

FINGERPRINT_DIR = Path("data") / "corpora"
NO_FILE = "no file: corpus\n"
READERS = ("prepare_data", "s2_index", "s3_prepare", "s4_retrieve")


def _specs(params: dict, stage: str, profile: str) -> Iterator[tuple[str, Any]]:
    """(params key, slot spec) of every corpus slot that `stage` reads."""
    if stage == "prepare_data":
        for slot, spec in profile_block(params, "data", profile).items():
            yield f"data.{profile}.{slot}", spec
    elif stage == "s2_index":
        for name, spec in (profile_block(params, "s2", profile).get("corpora") or {}).items():
            yield f"s2.{profile}.corpora.{name}", spec
    elif stage == "s3_prepare":
        s3 = profile_block(params, "s3", profile)
        yield f"s3.{profile}.corpus", s3.get("corpus")
        yield f"s3.{profile}.classifier.public", (s3.get("classifier") or {}).get("public")
    elif stage == "s4_retrieve":
        yield f"s4.{profile}.corpus", profile_block(params, "s4", profile).get("corpus")


def named_files(params: dict, stage: str, root: Path) -> list[tuple[str, Path]]:
    """(params key, path) of each local corpus that `stage` reads under params['profile']: a
    `file:` source, or an `hf:` source whose dataset part is a folder under root."""
    files = []
    for key, spec in _specs(params, stage, params["profile"]):
        source = spec.get("source") if isinstance(spec, dict) else None
        if not isinstance(source, str):
            continue
        scheme, _, rest = source.partition(":")
        if scheme == "file":
            files.append((key, Path(rest)))
        elif scheme == "hf" and (root / rest.split(":")[0]).is_dir():
            files.append((key, Path(rest.split(":")[0])))
    return files


def content_hash(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative paths and bytes, sorted)."""
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def fingerprint(params: dict, stage: str, root: Path) -> str:
    """The text of data/corpora/<stage>.txt: `<key> <path> <sha256>` per named local corpus
    (paths relative to root; a folder's hash covers its files), or NO_FILE."""
    lines = [
        f"{key} {path.as_posix()} {content_hash(root / path)}\n"
        for key, path in named_files(params, stage, root)
    ]
    return "".join(lines) or NO_FILE


def write_fingerprints(params: dict, root: Path) -> list[Path]:
    """Write every reader's fingerprint file under root; a file whose text is unchanged is left
    untouched. Returns the paths written or kept, in READERS order."""
    folder = root / FINGERPRINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stage in READERS:
        path = folder / f"{stage}.txt"
        text = fingerprint(params, stage, root)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written
