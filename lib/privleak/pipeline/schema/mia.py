"""The mia group: membership inference against known ground truth (docs/design.md §11)."""

from typing import Annotated, Any, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    MASS,
    PROBABILITY,
    SCORED_MODELS,
    TEXT,
    Strict,
    at_least,
    fail,
    list_of,
    named_or_file,
    no_repeats_at,
    one_of,
    optional,
)

MIA_DIR = "data/external/mia/"
MIA_VARIANCES = ("global", "per_text")  # privleak.mia.attacks.VARIANCES
MIA_METHODS = ("percentile", "basic")  # privleak.mia.metrics.METHODS


class MiaNonMembers(Strict):
    # held_out: drawn by synthetic:pretrain
    source: Annotated[str, named_or_file("held_out", MIA_DIR)]
    count: Annotated[int | None, optional(COUNT)]  # held_out: how many; a file: None = all


class MiaLira(Strict):  # offline LiRA's reference models (family only)
    sizes: Annotated[list[str], list_of(TEXT, unique=True)]
    references: Annotated[int, at_least(2)]  # per size, each never saw a candidate text
    variance: Annotated[str, one_of(*MIA_VARIANCES)]


class Mia(Strict):
    models: Annotated[Any, SCORED_MODELS]
    members: Annotated[str, named_or_file("planted", MIA_DIR)]
    non_members: MiaNonMembers
    k: Annotated[float, MASS]  # Min-K% and Min-K%++: the share of lowest tokens
    reference: Annotated[str | None, optional(TEXT)]  # family: a size name; else an id/folder
    lira: MiaLira | None = None
    batch_size: Annotated[int, COUNT]
    workers: Annotated[int, COUNT] = 1  # models scored at once, one process and thread each
    fprs: Annotated[list[float], list_of(PROBABILITY, unique=True)]

    @model_validator(mode="after")
    def _sources(self) -> Self:
        family = self.models == "family"
        if family != (self.members == "planted"):
            raise fail(
                "must be planted exactly when models is family (the family's corpus holds the "
                f"planted sequences; other models need file:{MIA_DIR}<file>.jsonl)",
                "members",
                value=self.members,
            )
        if not family:
            no_repeats_at(self.models, "models")
            if self.non_members.source == "held_out":
                raise fail(
                    f"must be file:{MIA_DIR}<file>.jsonl when models is a list (held_out texts "
                    "are only unseen by the family)",
                    "non_members.source",
                    value="held_out",
                )
            if self.lira is not None:
                raise fail("must be null when models is a list: reference models are trained "
                           "here on the family's corpus only", "lira", value="...")  # fmt: skip
        if self.non_members.source == "held_out" and self.non_members.count is None:
            raise fail("must be a count when source is held_out", "non_members.count", value=None)
        return self
