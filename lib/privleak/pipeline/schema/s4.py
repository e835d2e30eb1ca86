"""The s4 group: DP-RAG (S4)."""

from typing import Annotated, Self

from pydantic import Field, model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    DTYPE,
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
    max_retrieve: Annotated[int | None, optional(COUNT)]  # None: every document above tau

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


class S4Questions(Strict):  # Fig. 6: one symptom question per sampled patient
    per_bucket: Annotated[int | None, optional(COUNT)]  # patients per frequency bucket; None: all
    planted: Annotated[int | None, optional(INDEX)]  # planted facts asked; None: all


class S4Sweeps(Strict):  # each on the questions whose disease holds >= *_min_documents documents
    voters: list_of(Annotated[int, COUNT], unique=True, empty=True)  # top-k voters at eps[0]
    voters_min_documents: Annotated[int, COUNT]
    thetas: list_of(Annotated[float, NON_NEGATIVE], unique=True, empty=True)  # at eps[0]
    thetas_min_documents: Annotated[int, COUNT]
    # the Fig. 6 questions also answered at these response budgets (beside budget.epsilons)
    epsilons: list_of(Annotated[float, POSITIVE], unique=True, empty=True) = []


class S4Published(Strict):  # the published evaluation's layout: no answer prefix, long answers
    max_new_tokens: Annotated[int, COUNT]  # the published 70; each response charged them all
    epsilons: list_of(Annotated[float, POSITIVE], unique=True, empty=True)  # [] for no such run
    per_bucket: Annotated[int | None, optional(COUNT)]  # of each bucket's Fig. 6 questions


class S4Densities(Strict):  # F4/F5: the threshold densities over one query's scores
    documents: Annotated[int, COUNT]
    epsilon: Annotated[float, POSITIVE]
    k: Annotated[int, COUNT]
    p: Annotated[float, MASS]
    draws: Annotated[int, at_least(100)]


class S4(Strict):
    lm: Annotated[str, TEXT]
    lm_dtype: Annotated[str | None, optional(DTYPE)]  # None: models.<profile>.dtype
    corpus: Slot
    embed_batch_size: Annotated[int, COUNT]
    budget: S4Budget
    retrieval: S4Retrieval
    dp_icl: S4DPICL
    generation: S4Generation
    questions: S4Questions
    sweeps: S4Sweeps
    published: S4Published
    densities: S4Densities

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        gen, retrieval = self.generation, self.retrieval
        if gen.min_new_tokens > gen.max_new_tokens:
            raise fail(f"must be <= max_new_tokens ({gen.max_new_tokens})",
                        "generation.min_new_tokens", value=gen.min_new_tokens)  # fmt: skip
        cap = retrieval.max_retrieve
        if cap is not None and gen.max_batch_streams < 1 + cap:
            raise fail(
                f"must be >= 1 + retrieval.max_retrieve ({1 + cap}): one question's public and "
                "document streams decode together",
                "generation.max_batch_streams",
                value=gen.max_batch_streams,
            )
        for name, epsilons in (("published", self.published.epsilons),
                               ("sweeps", self.sweeps.epsilons)):  # fmt: skip
            too_small = [e for e in epsilons if e <= self.budget.retrieval_epsilon]
            if too_small:
                raise fail(
                    f"must be > budget.retrieval_epsilon ({self.budget.retrieval_epsilon}), so "
                    "that the tokens get a share",
                    f"{name}.epsilons",
                    value=too_small,
                )
        again = sorted(set(self.sweeps.epsilons) & set(self.budget.epsilons))
        if again:
            raise fail("must not repeat budget.epsilons (they are answered already)",
                       "sweeps.epsilons", value=again)  # fmt: skip
        if self.corpus.n is not None and self.densities.documents > self.corpus.n:
            raise fail(f"must be <= corpus.n ({self.corpus.n})", "densities.documents",
                        value=self.densities.documents)  # fmt: skip
        return self
