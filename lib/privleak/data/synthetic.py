"""Synthetic corpora with planted-secret ground truth, by generator name (`synthetic:<name>`).

A generator returns (records, secrets). Each secret row locates one planted occurrence:
    {"record_id", "field", "start", "end", "kind", "text", "duplicates"}
with record[field][start:end] == text; duplicates counts how often that exact text was planted
in the whole corpus. pretrain rows also carry "seq_id" and "prefix": the verbatim text right
before the secret (ending in a space), so prefix + text occurs exactly `duplicates` times.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from privleak.data.cnn_dm import cnn_dm
from privleak.data.dialogs import dialogs
from privleak.data.medical import medical_dirichlet
from privleak.data.pretrain import pretrain
from privleak.data.pubmedqa import pubmedqa
from privleak.data.rag_private import enron, healthcaremagic, icliniq
from privleak.errors import PrivleakError, require

GENERATORS: dict[str, Callable[..., tuple[list[dict], list[dict]]]] = {
    "cnn_dm": cnn_dm,
    "dialogs": dialogs,
    "enron": enron,
    "healthcaremagic": healthcaremagic,
    "icliniq": icliniq,
    "medical_dirichlet": medical_dirichlet,
    "pretrain": pretrain,
    "pubmedqa": pubmedqa,
}


def generate(
    generator: str, n: int, seed: int, options: dict | None = None
) -> tuple[list[dict], list[dict]]:
    """Run GENERATORS[generator](n, seed, **options) after checking the name and option names."""
    require(
        generator in GENERATORS,
        f"synthetic generator '{generator}' is unknown; allowed: {', '.join(GENERATORS)}",
    )
    options = options or {}
    require(isinstance(options, dict), f"options must be a mapping; got {options!r}")
    parameters = inspect.signature(GENERATORS[generator]).parameters.values()
    allowed = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = [key for key in options if key not in allowed]
    if unknown:
        raise PrivleakError(
            f"synthetic:{generator} has no option '{unknown[0]}'; "
            f"allowed: {', '.join(allowed) or 'none'}"
        )
    return GENERATORS[generator](n, seed, **options)
