"""The audit group: nominal epsilon beside a measured lower bound (docs/design.md §10)."""

from typing import Annotated, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    DTYPE,
    INDEX,
    POSITIVE,
    PROBABILITY,
    Strict,
    at_least,
    fail,
    optional,
    under,
)

CANARY_GENERATOR = "synthetic:medical_dirichlet"  # privleak.audit.canaries


class AuditStore(Strict):  # synthetic:medical_dirichlet's options
    diseases: Annotated[int, COUNT]
    concentration: Annotated[float, POSITIVE]
    rare_details: Annotated[int, INDEX]


class AuditCanaries(Strict):
    source: str
    count: Annotated[int, COUNT]
    documents: Annotated[int, COUNT]  # others beside each canary: D
    n: Annotated[int, COUNT]  # the synthetic store's size
    options: AuditStore

    @model_validator(mode="after")
    def _source(self) -> Self:
        if self.source.startswith("file:"):
            under(self.source.removeprefix("file:"), "data/external/canaries/", (".jsonl",),
                  self.source)  # fmt: skip
        elif self.source != CANARY_GENERATOR:
            raise fail(f"allowed: {CANARY_GENERATOR} or file:data/external/canaries/<name>.jsonl",
                       "source", value=self.source)  # fmt: skip
        else:
            if self.count > self.options.rare_details:
                raise fail(f"must be <= options.rare_details ({self.options.rare_details}): one "
                           "canary per planted rare detail", "count", value=self.count)  # fmt: skip
            if self.documents >= self.n:
                raise fail(f"must be < n ({self.n})", "documents", value=self.documents)
        return self


class AuditControls(Strict):  # the broken variants the audit must flag
    dp_rag_sensitivity_divisor: Annotated[float, POSITIVE]
    pad_sigma_divisor: Annotated[float, POSITIVE]

    @model_validator(mode="after")
    def _broken(self) -> Self:
        for key in ("dp_rag_sensitivity_divisor", "pad_sigma_divisor"):
            if getattr(self, key) <= 1:
                raise fail("must be > 1: a control must claim more than it delivers", key,
                           value=getattr(self, key))  # fmt: skip
        return self


class Audit(Strict):
    canaries: AuditCanaries
    lm_dtype: Annotated[str | None, optional(DTYPE)]  # None: the paper group's, else models'
    samples: Annotated[int, at_least(2)]
    max_new_tokens: Annotated[int, COUNT]
    alpha: Annotated[float, PROBABILITY]
    batch_rows: Annotated[int, COUNT]
    controls: AuditControls


class Conformance(Strict):  # the conformance check's suite of seeded bugs (privleak.audit.mutants)
    vocab: Annotated[int, at_least(2)]  # tokens of the suite's stand-in vocabulary
    bases: Annotated[int, at_least(0)]  # random bases, beside the two-token ones
