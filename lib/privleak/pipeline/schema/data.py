"""The data group: corpus slots (each materialised as data/raw/<slot>.jsonl), the sources
they read and the options of each synthetic generator.
"""

import re
from typing import Annotated, Any, Self

from pydantic import Field, model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    INDEX,
    POSITIVE,
    SHARE,
    TEXT,
    Parsed,
    Rule,
    Strict,
    at_least,
    fail,
    list_of,
    nested,
    one_of,
    optional,
    under,
)

# privleak.data.dialogs.DOMAINS
DIALOG_DOMAINS = ("AIRLINE", "MEDIA", "INSURANCE", "FASTFOOD", "FINANCE", "SOFTWARE")
# privleak.data.synthetic.GENERATORS
GENERATORS = (
    "cnn_dm",
    "dialogs",
    "enron",
    "healthcaremagic",
    "icliniq",
    "medical_dirichlet",
    "pretrain",
    "pubmedqa",
)
FILE_TYPES = (".csv", ".json", ".jsonl", ".parquet")  # privleak.data.loaders.FILE_TYPES
CORPORA_DIR = "data/external/corpora/"
# As privleak.data.loaders: "train[:100]" keeps its colon.
_HF_PART_SEP = re.compile(r":(?![^\[]*\])")
_HF_SPLIT = re.compile(r"[\w.-]+(\[-?\d*:-?\d*\])?")
_HF_FORM = "hf:<dataset>[:config][:split] with split NAME or NAME[start:end]"


FIELD_MAP = Rule(
    lambda v: (
        v is None
        or (isinstance(v, dict) and all(TEXT.check(k) and TEXT.check(c) for k, c in v.items()))
    ),
    "a mapping of canonical names to source columns, e.g. {text: body}",
)


def _hf(spec: str, value: str) -> None:
    parts = _HF_PART_SEP.split(spec)
    split = parts[-1] if len(parts) == 3 or (len(parts) == 2 and "[" in parts[-1]) else None
    if not all(parts) or len(parts) > 3 or (split and not _HF_SPLIT.fullmatch(split)):
        raise fail(f"must be {_HF_FORM}", value=value)


def _corpus_source(value: Any) -> str:
    scheme, _, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if scheme == "synthetic" and rest not in GENERATORS:
        allowed = ", ".join(f"synthetic:{g}" for g in GENERATORS)
        raise fail(f"unknown synthetic generator; allowed: {allowed}", value=value)
    if scheme == "hf":
        _hf(rest, value)
    elif scheme == "file":
        under(rest, CORPORA_DIR, FILE_TYPES, value)
    elif scheme != "synthetic":
        raise fail(
            f"must be synthetic:<generator>, {_HF_FORM.split(' with')[0]} or "
            f"file:{CORPORA_DIR}<file>",
            value=value,
        )
    return value


CORPUS_SOURCE = Parsed(_corpus_source)


class TextOptions(Strict):  # synthetic:cnn_dm and synthetic:pubmedqa
    min_words: Annotated[int, COUNT] = 300


class PretrainOptions(Strict):
    doc_words: Annotated[int, INDEX] = 200
    duplication_counts: list_of(Annotated[int, COUNT]) = [1, 2, 4, 8, 16, 32]
    sequences_per_count: Annotated[int, COUNT] = 4
    ne_prefix_words: Annotated[int, COUNT] = 40
    long_prefix_words: Annotated[int, COUNT] = 40
    long_suffix_words: Annotated[int, COUNT] = 40


class MedicalOptions(Strict):
    diseases: Annotated[int, COUNT] = 100
    concentration: Annotated[float, POSITIVE] = 0.5
    rare_details: Annotated[int, INDEX] = 20


class NoOptions(Strict):  # synthetic:healthcaremagic, icliniq and enron take none
    pass


class DialogOptions(Strict):  # synthetic:dialogs
    domains: list_of(Annotated[str, one_of(*DIALOG_DOMAINS)], unique=True) = list(DIALOG_DOMAINS)
    turns: Annotated[list[Annotated[int, at_least(3)]], Field(min_length=2, max_length=2)] = [4, 8]
    travel_insurance_share: Annotated[float, SHARE] = 0.1

    @model_validator(mode="after")
    def _turns(self) -> Self:
        if self.turns[0] > self.turns[1]:
            raise fail("must be [fewest, most] exchanges", "turns", value=self.turns)
        return self


GENERATOR_OPTIONS = {
    "cnn_dm": TextOptions,
    "dialogs": DialogOptions,
    "enron": NoOptions,
    "healthcaremagic": NoOptions,
    "icliniq": NoOptions,
    "medical_dirichlet": MedicalOptions,
    "pretrain": PretrainOptions,
    "pubmedqa": TextOptions,
}


class Slot(Strict):
    """One corpus slot, materialised as data/raw/<slot>.jsonl by prepare_data."""

    source: Annotated[str, CORPUS_SOURCE]
    n: Annotated[int | None, optional(COUNT)] = None
    fields: Annotated[dict | None, FIELD_MAP] = None
    options: Any = None
    revision: Annotated[str | None, optional(TEXT)] = None

    @model_validator(mode="after")
    def _by_scheme(self) -> Self:
        scheme, _, generator = self.source.partition(":")
        if scheme == "synthetic":
            if self.n is None:
                raise fail("missing; a synthetic: source needs n (records to generate)", "n")
            nested(GENERATOR_OPTIONS[generator], self.options or {}, "options")
        elif self.options is not None:
            raise fail("applies only to synthetic: sources", "options")
        if self.revision is not None and scheme != "hf":
            raise fail("applies only to hf: sources", "revision", value=self.revision)
        return self
