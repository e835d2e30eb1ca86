"""The s0 group: context influence and CID decoding (S0)."""

from typing import Annotated, Any, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    FLAG,
    INDEX,
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    TEXT,
    Rule,
    Strict,
    at_least,
    fail,
    list_of,
    one_of,
    optional,
)

S0_TASKS = ("cnn_dm", "pubmedqa")  # privleak.prompts.TASKS
WINDOWS = ("block", "sliding")  # privleak.ngrams.WINDOWS


def _faithfulness(value: Any) -> bool:
    return value == "sentence_support" or (
        isinstance(value, str) and value.startswith("factkb:") and TEXT.check(value[7:])
    )


FAITHFULNESS = Rule(_faithfulness, "sentence_support or factkb:<model>")


S0_CORPUS = one_of(*S0_TASKS)


class Sweep(Strict):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    temperatures: list_of(Annotated[float, POSITIVE])
    lams: list_of(Annotated[float, NON_NEGATIVE])


class ContextSizes(Strict):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    sizes: list_of(Annotated[int, COUNT], unique=True)


class Windowed(Strict):
    """n-gram layout (privleak.ngrams.Window): disjoint blocks, or sliding windows
    that start every `stride` tokens."""

    window: Annotated[str, one_of(*WINDOWS)]
    stride: Annotated[int, COUNT] = 1

    @model_validator(mode="after")
    def _stride(self) -> Self:
        if self.window == "block" and self.stride != 1:
            raise fail(
                "must be 1 (or left out) for window: block, whose blocks step by n",
                "stride",
                value=self.stride,
            )
        return self


class Ngram(Windowed):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    ns: list_of(Annotated[int, COUNT], unique=True)
    unigram_context_tokens: Annotated[int, COUNT]


class Bounded(Strict):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    eps: list_of(Annotated[float, POSITIVE], unique=True)  # one decode group each
    lam_max: Annotated[float, NON_NEGATIVE]
    n: Annotated[int, COUNT]


class Finetune(Strict):
    enabled: Annotated[bool, FLAG]
    docs: Annotated[int, COUNT]
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    seq_len: Annotated[int, at_least(2)]
    learning_rate: Annotated[float, POSITIVE]


class S0Family(Windowed):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    context_tokens: Annotated[int | None, optional(COUNT)]
    max_new_tokens: Annotated[int, COUNT]
    n: Annotated[int, COUNT]


class Bertscore(Strict):
    backend: Annotated[str, one_of("minilm", "bert-score")]
    model: Annotated[str | None, optional(TEXT)]

    @model_validator(mode="after")
    def _model(self) -> Self:
        if (self.model is None) != (self.backend == "minilm"):
            raise fail(
                "must be null for minilm and a model id for bert-score", "model", value=self.model
            )
        return self


class S0(Strict):
    lms: list_of(Annotated[str, TEXT], unique=True)
    corpora: list_of(Annotated[str, S0_CORPUS], unique=True)
    template: Annotated[str, one_of("chat", "plain")]
    n_examples: Annotated[int, COUNT]
    context_tokens: Annotated[int | None, optional(COUNT)]
    max_new_tokens: Annotated[int, COUNT]
    min_new_tokens: Annotated[int, INDEX]
    count_eos: Annotated[bool, FLAG]
    temperature: Annotated[float, POSITIVE]
    lams: list_of(Annotated[float, NON_NEGATIVE], unique=True)  # one decode group each
    max_batch_streams: Annotated[int, at_least(2)]  # two streams per CID response
    sweep: Sweep
    context_sizes: ContextSizes
    ngram: Ngram
    bounded: Bounded
    finetune: Finetune
    family: S0Family
    batch_size: Annotated[int, COUNT]
    leakage_rule: Annotated[str, one_of("runs", "official")]
    repeat_min_run: Annotated[int, COUNT]
    repeat_share: Annotated[float, SHARE]
    repeat_min_shared_words: Annotated[int, INDEX]
    rouge_threshold: Annotated[float, SHARE]
    bertscore: Bertscore
    faithfulness: Annotated[str, FAITHFULNESS]

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.min_new_tokens > self.max_new_tokens:
            raise fail(
                f"must be <= max_new_tokens ({self.max_new_tokens})",
                "min_new_tokens",
                value=self.min_new_tokens,
            )
        if self.family.max_new_tokens < self.min_new_tokens:
            raise fail(
                f"must be >= min_new_tokens ({self.min_new_tokens}), which s0_family applies too",
                "family.max_new_tokens",
                value=self.family.max_new_tokens,
            )
        # n-grams of s0_ngram cut the context_tokens context; s0_family's its own context.
        spans = [(f"ngram.ns[{i}]", n, self.context_tokens) for i, n in enumerate(self.ngram.ns)]
        spans += [("bounded.n", self.bounded.n, self.context_tokens)]
        spans += [("family.n", self.family.n, self.family.context_tokens)]
        for key, n, limit in spans:
            if limit is not None and n > limit:
                where = "family.context_tokens" if key == "family.n" else "context_tokens"
                raise fail(f"must be <= {where} ({limit}), the context it cuts", key, value=n)
        return self
