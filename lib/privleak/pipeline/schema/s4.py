"""The s4 group: DP-RAG (S4)."""

from typing import Annotated, Self

from pydantic import Field, model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    INDEX,
    MASS,
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    TEXT,
    Strict,
    at_least,
    fail,
    list_of,
    one_of,
    optional,
)
from privleak.pipeline.schema.data import Slot


class S4Budget(Strict):
    epsilons: list_of(Annotated[float, POSITIVE], unique=True)  # per response; the first: tables
    delta: Annotated[float, PROBABILITY]
    retrieval_epsilon: Annotated[float, POSITIVE]

    @model_validator(mode="after")
    def _share(self) -> Self:
        smallest = min(self.epsilons)
        if self.retrieval_epsilon >= smallest:
            raise fail(
                f"must be < every epsilon (smallest {smallest}), so that the tokens get a share",
                "retrieval_epsilon",
                value=self.retrieval_epsilon,
            )
        return self


class S4Retrieval(Strict):
    utility: Annotated[str, one_of("top_k", "top_p")]
    k: Annotated[int, COUNT]
    p: Annotated[float, MASS]
    alpha: Annotated[float, POSITIVE]  # the top-p weights' exp(alpha (s - high) / (high - low))
    score_range: Annotated[list[float], Field(min_length=2, max_length=2)]
    max_retrieve: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _range(self) -> Self:
        low, high = self.score_range
        if not (-1 <= low < high <= 1):
            raise fail("must be [low, high] with -1 <= low < high <= 1 (cosine scores)",
                        "score_range", value=self.score_range)  # fmt: skip
        return self


class S4DPICL(Strict):
    alpha: Annotated[float, POSITIVE]
    clip: Annotated[float, POSITIVE]
    theta: Annotated[float, NON_NEGATIVE]


class S4Generation(Strict):
    template: Annotated[str, one_of("chat", "plain")]
    max_new_tokens: Annotated[int, COUNT]
    min_new_tokens: Annotated[int, INDEX]
    max_batch_streams: Annotated[int, COUNT]
    rag_k: Annotated[int, COUNT]  # the non-private baseline's exact top-k documents
    answer_prefix: str  # opens every disease answer, in every stream ("" for none)


class S4Densities(Strict):  # F4/F5: the threshold densities over one query's scores
    documents: Annotated[int, COUNT]
    epsilon: Annotated[float, POSITIVE]
    k: Annotated[int, COUNT]
    p: Annotated[float, MASS]
    draws: Annotated[int, at_least(100)]


class S4(Strict):
    lm: Annotated[str, TEXT]
    corpus: Slot
    embed_batch_size: Annotated[int, COUNT]
    max_diseases: Annotated[int | None, optional(COUNT)]
    budget: S4Budget
    retrieval: S4Retrieval
    dp_icl: S4DPICL
    generation: S4Generation
    densities: S4Densities

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        gen, retrieval = self.generation, self.retrieval
        if gen.min_new_tokens > gen.max_new_tokens:
            raise fail(f"must be <= max_new_tokens ({gen.max_new_tokens})",
                        "generation.min_new_tokens", value=gen.min_new_tokens)  # fmt: skip
        if gen.max_batch_streams < 1 + retrieval.max_retrieve:
            raise fail(
                f"must be >= 1 + retrieval.max_retrieve ({1 + retrieval.max_retrieve}): one "
                "question's public and document streams decode together",
                "generation.max_batch_streams",
                value=gen.max_batch_streams,
            )
        if self.corpus.n is not None and self.densities.documents > self.corpus.n:
            raise fail(f"must be <= corpus.n ({self.corpus.n})", "densities.documents",
                        value=self.densities.documents)  # fmt: skip
        return self
