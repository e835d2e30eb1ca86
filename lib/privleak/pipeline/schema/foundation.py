"""The groups every paper shares: figures, models, context_gain and claims."""

from typing import Annotated, Any, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    DEVICE,
    DTYPE,
    INDEX,
    TEXT,
    Rule,
    Strict,
    at_least,
    fail,
    is_int,
    is_number,
    list_of,
    one_of,
    optional,
)

EMBEDDED_LMS = ("smollm2-135m-instruct",)  # privleak.models.EMBEDDED_LMS
FIGURE_FORMATS = ("png", "pdf", "svg")  # privleak.figures writes these byte-deterministically
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate strategies
# claims.<p>.method: the MIA and frontier figures' error bars (privleak.mia.metrics.METHODS); every
# claim's interval comes from its procedure (privleak.claims.procedures)
CLAIM_METHODS = ("percentile", "basic")


def _device_map(value: Any) -> bool:
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and (is_int(v) or isinstance(v, str)) for k, v in value.items()
        )
    return value is None or value in DEVICE_MAPS


DEVICE_MAP = Rule(
    _device_map, "null, " + ", ".join(DEVICE_MAPS) + " or a mapping of modules to devices"
)


class Figures(Strict):
    formats: list_of(Annotated[str, one_of(*FIGURE_FORMATS)], unique=True)

    @model_validator(mode="after")
    def _png(self) -> Self:
        if "png" not in self.formats:
            raise fail("must include png (the report shows PNGs)", "formats", value=self.formats)
        return self


class Models(Strict):
    # data/models is prepare_models' whole output: an empty list would empty it on a profile switch
    prepare: list_of(Annotated[str, one_of(*EMBEDDED_LMS)], unique=True)
    lm: Annotated[str, TEXT]
    embedder: Annotated[str, TEXT]
    device: Annotated[str, DEVICE]
    dtype: Annotated[str, DTYPE]
    device_map: Annotated[Any, DEVICE_MAP]


class ContextGain(Strict):
    corpus: Annotated[str, TEXT]
    n_examples: Annotated[int, COUNT]
    max_context_tokens: Annotated[int | None, optional(COUNT)]
    batch_size: Annotated[int, COUNT]


class Claims(Strict):
    n_boot: Annotated[int, at_least(100)]
    seed: Annotated[int, INDEX]
    alpha: Annotated[float, Rule(lambda v: is_number(v) and 0 < v < 0.5, "a number in (0, 0.5)")]
    min_units: Annotated[int, at_least(2)]
    method: Annotated[str, one_of(*CLAIM_METHODS)]
