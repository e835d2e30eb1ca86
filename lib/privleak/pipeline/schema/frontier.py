"""The frontier group: one leakage-utility frontier across every decoding-time defense
(docs/design.md §12)."""

from typing import Annotated, Self

from pydantic import Field, model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    MASS,
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    SHARE,
    TEXT,
    Strict,
    fail,
    list_of,
    one_of,
    optional,
)
from privleak.pipeline.schema.s2 import ALPHA, STATIC_SIGMA

# privleak.frontier.points.KNOBS, in its order
DEFENSES = ("static", "pad", "cid", "bounded_cid", "dp_icl", "dist", "summ", "redact_keyword",
            "redact_classifier")  # fmt: skip
SINGLE = ("summ", "redact_keyword")  # privleak.frontier.points.SINGLE
REFUSAL = "refusal"  # privleak.frontier.summary.REFUSAL: a baseline every comparison may name
SECRET_KINDS = ("name", "rare_detail")  # the kinds synthetic:medical_dirichlet plants


class FrontierAttack(Strict):
    command: Annotated[str, TEXT]  # the extraction prompt put to a unit's contexts
    max_new_tokens: Annotated[int, COUNT]
    cue_words: Annotated[int, COUNT]  # words before a secret forced as the response's opening
    kinds: list_of(Annotated[str, one_of(*SECRET_KINDS)], unique=True)


class FrontierDefenses(Strict):
    static: list_of(Annotated[float, STATIC_SIGMA], unique=True, empty=True) = []
    pad: list_of(Annotated[float, POSITIVE], unique=True, empty=True) = []  # ε_base
    cid: list_of(Annotated[float, SHARE], unique=True, empty=True) = []  # λ in [0, 1]
    bounded_cid: list_of(Annotated[float, POSITIVE], unique=True, empty=True) = []  # ε per token
    dp_icl: list_of(Annotated[float, POSITIVE], unique=True, empty=True) = []  # ε per response
    dist: list_of(Annotated[float, NON_NEGATIVE], unique=True, empty=True) = []  # L2 thresholds
    summ: list_of(Annotated[float, NON_NEGATIVE], empty=True) | None = None  # [] runs it
    redact_keyword: list_of(Annotated[float, NON_NEGATIVE], empty=True) | None = None  # [] runs it
    redact_classifier: list_of(Annotated[float, PROBABILITY], unique=True, empty=True) = []

    @model_validator(mode="after")
    def _single(self) -> Self:
        if not any(getattr(self, name) is not None and (getattr(self, name) or name in SINGLE)
                   for name in DEFENSES):  # fmt: skip
            raise fail("must run at least one defense", value={})
        for name in SINGLE:
            if getattr(self, name):
                raise fail("has no knob: give [] to run it, or leave it out", name,
                           value=getattr(self, name))  # fmt: skip
        return self


class FrontierPAD(Strict):  # privleak.pad.PADSettings but epsilon, the swept knob
    amplification: Annotated[float, NON_NEGATIVE]
    min_sensitivity: Annotated[float, MASS]
    tau_conf: Annotated[float, SHARE]
    tau_margin: Annotated[float, NON_NEGATIVE]
    weights: Annotated[list[Annotated[float, NON_NEGATIVE]], Field(min_length=3, max_length=3)]


class FrontierSummary(Strict):  # Summ.'s condensation (privleak.pad_rag.SUMMARY_STYLES)
    style: Annotated[str, one_of("extract", "paraphrase")]
    max_new_tokens: Annotated[int, COUNT]


class FrontierClassifier(Strict):  # privleak.classifier_policies.ClassifierPolicy
    window: Annotated[int, COUNT]
    stride: Annotated[int, COUNT]
    train_documents: Annotated[int, COUNT]  # documents no unit retrieves


class FrontierRedaction(Strict):
    keywords: list_of(Annotated[str, TEXT], unique=True)
    classifier: FrontierClassifier


class FrontierAccounting(Strict):  # PAD's accountant
    alpha: Annotated[float, ALPHA]
    delta: Annotated[float, PROBABILITY]


class FrontierMatched(Strict):
    share: Annotated[float, MASS]  # the target: this share of the undefended accuracy


class Frontier(Strict):
    units: Annotated[int | None, optional(COUNT)]  # Fig. 6 questions per bucket; null: all
    top_contexts: Annotated[int, COUNT]  # a unit's first contexts of s4's rag_k
    temperature: Annotated[float, POSITIVE]
    attack: FrontierAttack
    max_batch_streams: Annotated[int, COUNT]
    defenses: FrontierDefenses
    pad: FrontierPAD
    summary: FrontierSummary
    redaction: FrontierRedaction
    accounting: FrontierAccounting
    matched: FrontierMatched
    comparisons: list_of(Annotated[list[Annotated[str, one_of(*DEFENSES, REFUSAL)]],
                                   Field(min_length=2, max_length=2)], unique=True)  # fmt: skip

    @model_validator(mode="after")
    def _compared(self) -> Self:
        swept = {name for name in DEFENSES if getattr(self.defenses, name) not in (None, [])}
        swept |= {name for name in SINGLE if getattr(self.defenses, name) == []} | {REFUSAL}
        for i, (a, b) in enumerate(self.comparisons):
            for name in (a, b):
                if name not in swept:
                    raise fail(f"names {name}, which defenses does not run", f"comparisons[{i}]",
                               value=[a, b])  # fmt: skip
            if a == b:
                raise fail("compares a defense with itself", f"comparisons[{i}]", value=[a, b])
        return self
