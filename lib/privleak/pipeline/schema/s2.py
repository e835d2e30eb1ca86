"""The s2 group: privacy-aware decoding against RAG extraction (S2)."""

from typing import Annotated, Self

from pydantic import Field, model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    DTYPE,
    INDEX,
    MASS,
    NAME,
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    SHARE,
    TEXT,
    Rule,
    Strict,
    fail,
    is_number,
    list_of,
    one_of,
    optional,
)
from privleak.pipeline.schema.data import Slot

# privleak.decoding.FORWARD_MODES
FORWARD_MODES = ("auto", "dynamic", "slots", "graph")
ATTACK_STYLES = ("health", "enron")  # privleak.rag_attack.STYLES
TOPIC_SOURCES = ("records", "builtin")  # privleak.rag_attack.TOPIC_SOURCES
TEMPLATES = ("chat", "plain")  # privleak.pad_rag.TEMPLATES
ROUGE_RULES = ("pad", "zeng")  # privleak.metrics.rag_leakage.ROUGE_RULES


class S2Attack(Strict):
    prompts: Annotated[int, COUNT]  # per corpus (the paper: 250)
    targeted_share: Annotated[float, SHARE]
    topics: Annotated[str, one_of(*TOPIC_SOURCES)]
    # per corpus; `default` serves every corpus without its own list
    commands: dict[str, list_of(Annotated[str, TEXT], unique=True)]


class S2Retrieval(Strict):
    k: Annotated[int, COUNT]
    rerank_top: Annotated[int, COUNT]
    reranker: Annotated[str, TEXT]  # tfidf, or a cross-encoder hub id / folder

    @model_validator(mode="after")
    def _top(self) -> Self:
        if self.rerank_top > self.k:
            raise fail(f"must be <= k ({self.k})", "rerank_top", value=self.rerank_top)
        return self


class S2Decoding(Strict):
    temperature: Annotated[float, POSITIVE]
    max_new_tokens: Annotated[int, COUNT]
    min_new_tokens: Annotated[int, INDEX]
    max_batch_streams: Annotated[int, COUNT]
    forward_mode: Annotated[str, one_of(*FORWARD_MODES)]


class S2PAD(Strict):  # privleak.pad.PADSettings
    epsilon: Annotated[float, POSITIVE]
    amplification: Annotated[float, NON_NEGATIVE]
    min_sensitivity: Annotated[float, MASS]
    tau_conf: Annotated[float, SHARE]
    tau_margin: Annotated[float, NON_NEGATIVE]
    weights: Annotated[list[Annotated[float, NON_NEGATIVE]], Field(min_length=3, max_length=3)]


STATIC_SIGMA_MAX = 1e30  # privleak.pad.STATIC_SIGMA_MAX: float32 logits overflow beyond it
STATIC_SIGMA = Rule(
    lambda v: is_number(v) and 0 < v <= STATIC_SIGMA_MAX,
    f"a number in (0, {STATIC_SIGMA_MAX:g}] (float32 logits overflow beyond it)",
    number=True,
)


class S2Sweeps(Strict):  # Figs. 4-5, and Static's noise beside its Table 1 row
    amplifications: list_of(Annotated[float, NON_NEGATIVE], unique=True)
    epsilons: list_of(Annotated[float, POSITIVE], unique=True)
    static_sigmas: list_of(Annotated[float, STATIC_SIGMA], unique=True)


class S2Distance(Strict):  # Dist.: L2 thresholds (the paper sweeps 0-1.2)
    table: Annotated[float, NON_NEGATIVE]
    sweep: list_of(Annotated[float, NON_NEGATIVE], unique=True)

    @model_validator(mode="after")
    def _table_swept(self) -> Self:
        if self.table not in self.sweep:
            raise fail(f"must be one of sweep ({self.sweep})", "table", value=self.table)
        return self


class S2Summary(Strict):  # Summ.'s condensation step (pad_rag.SUMMARY_STYLES)
    style: Annotated[str, one_of("extract", "paraphrase")]
    max_new_tokens: Annotated[int, COUNT]  # no smaller than the response budget


class S2Length(Strict):  # s2_length: the same prompts answered longer
    prompts: Annotated[int, COUNT]  # per corpus
    max_new_tokens: Annotated[int, COUNT]  # more than decoding.max_new_tokens


class S2ESP(Strict):
    prompts: Annotated[int, INDEX]  # per corpus
    max_secrets: Annotated[int, COUNT]  # per prompt
    cue_words: Annotated[int, INDEX]
    draws: Annotated[int, COUNT]  # noise samples per token


ALPHA = Rule(lambda v: is_number(v) and v > 1, "a finite number > 1", number=True)


class S2Accounting(Strict):
    alpha: Annotated[float, ALPHA]
    delta: Annotated[float, PROBABILITY]
    alphas: list_of(Annotated[float, ALPHA], unique=True)  # Fig. 6b
    lengths: list_of(Annotated[int, COUNT], unique=True)  # Fig. 6a


class S2RougeThresholds(Strict):
    pad: Annotated[float, SHARE]  # ROUGE-L F1 (PAD's evaluation code: 0.2)
    zeng: Annotated[float, SHARE]  # ROUGE-L max(recall, precision) (Zeng et al.: 0.5)


class S2Leakage(Strict):
    repeat_min_words: Annotated[int, COUNT]
    rouge_rule: Annotated[str, one_of(*ROUGE_RULES)]  # the headline ROUGE Prompts rule
    rouge_thresholds: S2RougeThresholds


class S2(Strict):
    lm: Annotated[str, TEXT]
    # the LM's dtype for responses and secret ESPs (None: models.<profile>.dtype); PAD's noise, its
    # screening and every log-prob are computed in float32 either way
    lm_dtype: Annotated[str | None, optional(DTYPE)]
    template: Annotated[str, one_of(*TEMPLATES)]
    evaluator: Annotated[str, TEXT]  # the fixed LM that scores every response's PPL
    embedder: Annotated[str, TEXT]
    corpora: dict[str, Slot]
    styles: dict[str, Annotated[str, one_of(*ATTACK_STYLES)]]
    sweep_corpus: Annotated[str, TEXT]
    embed_batch_size: Annotated[int, COUNT]
    chunk_words: Annotated[int, COUNT]
    attack: S2Attack
    retrieval: S2Retrieval
    decoding: S2Decoding
    pad: S2PAD
    static_sigma: Annotated[float, STATIC_SIGMA]
    sweeps: S2Sweeps
    distance: S2Distance
    summary: S2Summary
    length: S2Length
    esp: S2ESP
    accounting: S2Accounting
    leakage: S2Leakage

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.corpora:
            raise fail("must name at least one corpus", "corpora")
        for name in self.corpora:
            if not NAME.fullmatch(name):
                raise fail("unusable as a Chroma collection and file name", f"corpora.{name}")
            if name not in self.styles:
                raise fail(
                    f"has no attack style; add styles.{name} ({' or '.join(ATTACK_STYLES)})",
                    f"corpora.{name}",
                )
            if name not in self.attack.commands and "default" not in self.attack.commands:
                raise fail(
                    f"has no commands; add attack.commands.{name} or attack.commands.default",
                    f"corpora.{name}",
                )
        named = ", ".join(self.corpora)
        for name in self.styles:
            if name not in self.corpora:
                raise fail(f"is not one of corpora ({named})", f"styles.{name}")
        for name in self.attack.commands:
            if name != "default" and name not in self.corpora:
                raise fail(f"is not default or one of corpora ({named})", f"attack.commands.{name}")
        if self.sweep_corpus not in self.corpora:
            raise fail(f"must be one of corpora ({', '.join(self.corpora)})", "sweep_corpus",
                        value=self.sweep_corpus)  # fmt: skip
        if self.decoding.min_new_tokens > self.decoding.max_new_tokens:
            raise fail(f"must be <= max_new_tokens ({self.decoding.max_new_tokens})",
                        "decoding.min_new_tokens", value=self.decoding.min_new_tokens)  # fmt: skip
        if self.length.max_new_tokens <= self.decoding.max_new_tokens:
            raise fail(
                f"must be > decoding.max_new_tokens ({self.decoding.max_new_tokens}): it is the "
                "longer length",
                "length.max_new_tokens", value=self.length.max_new_tokens,
            )  # fmt: skip
        if self.summary.max_new_tokens < self.decoding.max_new_tokens:
            raise fail(
                f"must be >= decoding.max_new_tokens ({self.decoding.max_new_tokens}): Zeng et "
                "al. condense with the response's budget",
                "summary.max_new_tokens", value=self.summary.max_new_tokens,
            )  # fmt: skip
        return self
