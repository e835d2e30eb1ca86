"""Real text a public pretrained model very likely saw, available offline: the license files of
installed packages (MIT, Apache-2.0, BSD; these texts are copied into countless repositories) and
Python's Zen (`import this`). Used by S1 to measure ESP of SmolLM2 on 50+50-token windows.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib
import io
import re
from collections.abc import Sequence
from pathlib import Path

from privleak.errors import require

# A license family is recognised by a sentence its text always contains.
LICENSE_MARKERS = {
    "MIT": "permission is hereby granted, free of charge",
    "Apache-2.0": "apache license",
    "BSD": "redistribution and use in source and binary forms",
}
_LICENSE_NAME = re.compile(r"^(licen[cs]e|copying)", re.IGNORECASE)


def license_family(text: str) -> str | None:
    """'MIT', 'Apache-2.0', 'BSD' or None, from the text (first matching marker wins; Apache
    first because Apache texts quote no MIT/BSD sentence, while some BSD/MIT bundles quote Apache
    only by name)."""
    lowered = " ".join(text.lower().split())
    for family in ("Apache-2.0", "MIT", "BSD"):
        if LICENSE_MARKERS[family] in lowered:
            return family
    return None


def license_texts(site_packages: str | Path) -> list[dict]:
    """[{source, license, text}] for every LICENSE*/COPYING* file under site_packages/*.dist-info
    whose family is MIT, Apache-2.0 or BSD; identical texts (after whitespace normalisation) are
    kept once, under the first path in sorted order. Sorted by source, so the list is stable."""
    root = Path(site_packages)
    require(root.is_dir(), f"site-packages folder {root} does not exist")
    seen: set[str] = set()
    rows = []
    files = sorted(p for p in root.glob("*.dist-info/**/*") if _LICENSE_NAME.match(p.name))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        family = license_family(text)
        digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()
        if family is None or digest in seen:
            continue
        seen.add(digest)
        rows.append({"source": str(path.relative_to(root)), "license": family, "text": text})
    return rows


def zen_of_python() -> str:
    """The Zen of Python: `this.s` decoded with rot13 (importing `this` prints it; silenced)."""
    with contextlib.redirect_stdout(io.StringIO()):
        this = importlib.import_module("this")
    return codecs.decode(this.s, "rot13")


def token_windows(
    ids: Sequence[int], prefix_len: int, suffix_len: int, *, max_windows: int | None = None
) -> list[tuple[list[int], list[int]]]:
    """Non-overlapping (prefix, suffix) windows of prefix_len + suffix_len consecutive tokens,
    from the start of ids; a tail shorter than a full window is dropped."""
    require(prefix_len >= 1, f"prefix_len must be >= 1, got {prefix_len}")
    require(suffix_len >= 1, f"suffix_len must be >= 1, got {suffix_len}")
    require(max_windows is None or max_windows >= 1, f"max_windows must be >= 1, got {max_windows}")
    size = prefix_len + suffix_len
    windows = []
    for start in range(0, len(ids) - size + 1, size):
        if max_windows is not None and len(windows) == max_windows:
            break
        chunk = list(ids[start : start + size])
        windows.append((chunk[:prefix_len], chunk[prefix_len:]))
    return windows
