"""Real text a public pretrained model very likely saw, available offline: the license files of
installed packages (MIT, Apache-2.0, BSD; these texts are copied into countless repositories) and
Python's Zen (`import this`). S1 measures the sampling ESP of SmolLM2 on every 50+50-token
candidate window of these texts and keeps, as its public-text sequences, those it has measurably
memorised (ESP >= a threshold): which windows leak is measured, not chosen by hand.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib
import io
import math
import re
from collections.abc import Mapping, Sequence
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
    """[{source, license, text, copies}] for every LICENSE*/COPYING* file under
    site_packages/*.dist-info whose family is MIT, Apache-2.0 or BSD; identical texts (after
    whitespace normalisation) are kept once, under the first path in sorted order, and `copies`
    counts the files that carry that text. Sorted by source, so the list is stable."""
    root = Path(site_packages)
    require(root.is_dir(), f"site-packages folder {root} does not exist")
    by_digest: dict[str, dict] = {}
    files = sorted(p for p in root.glob("*.dist-info/**/*") if _LICENSE_NAME.match(p.name))
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        family = license_family(text)
        if family is None:
            continue
        digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()
        if digest in by_digest:
            by_digest[digest]["copies"] += 1
            continue
        source = str(path.relative_to(root))
        by_digest[digest] = {"source": source, "license": family, "text": text, "copies": 1}
    return sorted(by_digest.values(), key=lambda row: row["source"])


def first_per_family(rows: Sequence[Mapping], per_family: int | None) -> list[Mapping]:
    """The first `per_family` rows of each `license` value, in the given order (None = all)."""
    require(per_family is None or per_family >= 1, f"per_family must be >= 1, got {per_family}")
    taken: dict[str, int] = {}
    kept = []
    for row in rows:
        if per_family is None or taken.get(row["license"], 0) < per_family:
            taken[row["license"]] = taken.get(row["license"], 0) + 1
            kept.append(row)
    return kept


def zen_of_python() -> str:
    """The Zen of Python: `this.s` decoded with rot13 (importing `this` prints it; silenced)."""
    with contextlib.redirect_stdout(io.StringIO()):
        this = importlib.import_module("this")
    return codecs.decode(this.s, "rot13")


def token_windows(
    ids: Sequence[int],
    prefix_len: int,
    suffix_len: int,
    *,
    stride: int | None = None,
    max_windows: int | None = None,
) -> list[tuple[int, list[int], list[int]]]:
    """(start, prefix, suffix) windows of prefix_len + suffix_len consecutive tokens of ids,
    starting at 0, stride, 2 * stride, ... (default stride: one window length, so windows do not
    overlap); a tail shorter than a full window is dropped; at most max_windows (None = all)."""
    require(prefix_len >= 1, f"prefix_len must be >= 1, got {prefix_len}")
    require(suffix_len >= 1, f"suffix_len must be >= 1, got {suffix_len}")
    require(stride is None or stride >= 1, f"stride must be >= 1, got {stride}")
    require(max_windows is None or max_windows >= 1, f"max_windows must be >= 1, got {max_windows}")
    size = prefix_len + suffix_len
    windows = []
    for start in range(0, len(ids) - size + 1, stride or size):
        if max_windows is not None and len(windows) == max_windows:
            break
        chunk = list(ids[start : start + size])
        windows.append((start, chunk[:prefix_len], chunk[prefix_len:]))
    return windows


def candidate_windows(
    texts: Sequence[Mapping],
    prefix_len: int,
    suffix_len: int,
    *,
    stride: int,
    per_family: int | None = None,
    max_windows: int | None = None,
    min_distinct_tokens: int = 1,
) -> list[dict]:
    """Candidate (prefix, suffix) windows of the first per_family texts of each license family
    (None = all), deduplicated across texts.

    texts: [{source, license, ids, copies}] (ids: token ids; copies: how many files carry the
    text). Per text: windows at `stride` (`token_windows`) whose suffix has at least
    min_distinct_tokens distinct tokens (a run of '=' or spaces is trivially predictable and says
    nothing about memorisation), the first max_windows of them (None = all). A window seen in
    an earlier text is kept once, under its first text. Returns [{seq_id, source, license, start,
    prefix_ids, suffix_ids, duplicates}] in text order; seq_id = "<source>#<start>";
    duplicates = the copies of every text in `texts`, capped or not, that contains the window at
    any token offset.
    """
    require(
        1 <= min_distinct_tokens <= suffix_len,
        f"min_distinct_tokens must be in 1..{suffix_len} (suffix_len), got {min_distinct_tokens}",
    )
    by_tokens: dict[tuple[int, ...], dict] = {}
    for text in first_per_family(texts, per_family):
        windows = [
            w
            for w in token_windows(text["ids"], prefix_len, suffix_len, stride=stride)
            if len(set(w[2])) >= min_distinct_tokens
        ]
        for start, prefix, suffix in windows[:max_windows]:
            by_tokens.setdefault(
                (*prefix, *suffix),
                {"seq_id": f"{text['source']}#{start}", "source": text["source"],
                 "license": text["license"], "start": start, "prefix_ids": prefix,
                 "suffix_ids": suffix, "duplicates": 0},
            )  # fmt: skip
    size = prefix_len + suffix_len
    for text in texts:
        ids = tuple(text["ids"])
        carried = {ids[i : i + size] for i in range(len(ids) - size + 1)} & by_tokens.keys()
        for tokens in carried:
            by_tokens[tokens]["duplicates"] += text["copies"]
    return list(by_tokens.values())


def select_memorised(
    candidates: Sequence[Mapping], log_esp: Sequence[float], min_esp: float
) -> tuple[list[int], dict]:
    """Which candidates the model has measurably memorised: ESP >= min_esp.

    candidates: [{license, ...}]; log_esp: [N] natural-log ESP of each. Returns (indices of the
    kept candidates in order, summary {min_esp, candidates, kept, per_family: {license:
    {candidates, kept}}}); the summary is the same shape when nothing passes (kept 0).
    """
    require(0 < min_esp <= 1, f"min_esp must be in (0, 1], got {min_esp}")
    require(
        len(candidates) == len(log_esp),
        f"{len(candidates)} candidates but {len(log_esp)} ESP values",
    )
    threshold = math.log(min_esp)
    kept = [i for i, value in enumerate(log_esp) if value >= threshold]
    per_family: dict[str, dict[str, int]] = {}
    for i, row in enumerate(candidates):
        counts = per_family.setdefault(row["license"], {"candidates": 0, "kept": 0})
        counts["candidates"] += 1
        counts["kept"] += int(log_esp[i] >= threshold)
    summary = {"min_esp": min_esp, "candidates": len(candidates), "kept": len(kept),
               "per_family": per_family}  # fmt: skip
    return kept, summary
