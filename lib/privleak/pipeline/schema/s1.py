"""The s1 group: sequence-level ESP and n-ISP (S1)."""

from typing import Annotated, Any, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    DEVICE,
    DTYPE,
    INDEX,
    MASS,
    POSITIVE,
    SCORED_MODELS,
    TEXT,
    Strict,
    fail,
    list_of,
    named_or_file,
    no_repeats_at,
    one_of,
    optional,
)

DECODER_KINDS = ("greedy", "sampling", "top_k", "top_p", "temperature")  # metrics.sequence
S1_DIR = "data/external/s1/"


SEQUENCES = named_or_file("planted", S1_DIR)


class Decoder(Strict):
    name: Annotated[str, TEXT]
    kind: Annotated[str, one_of(*DECODER_KINDS)]
    value: Any = None

    @model_validator(mode="after")
    def _value(self) -> Self:
        rule = {"top_k": COUNT, "top_p": MASS, "temperature": POSITIVE}.get(self.kind)
        if rule is not None:
            rule.validate(self.value, "value")
        elif self.value is not None:
            raise fail(f"must be omitted: {self.kind} takes no value", "value", value=self.value)
        return self


class MonteCarlo(Strict):
    kinds: list_of(Annotated[str, one_of("named_entity", "long_sequence")], unique=True)
    sequences: Annotated[int, COUNT]
    samples: Annotated[int, COUNT]
    seed: Annotated[int, INDEX]
    max_batch_streams: Annotated[int, COUNT]


class Scores(Strict):
    models: Annotated[Any, SCORED_MODELS]
    sequences: Annotated[str, SEQUENCES]
    prefix_tokens: Annotated[int, COUNT]
    ne_suffix_tokens: Annotated[int, COUNT]
    long_suffix_tokens: Annotated[int, COUNT]
    prefix_lengths: list_of(Annotated[int, COUNT])
    batch_size: Annotated[int, COUNT]
    device: Annotated[str, DEVICE]
    dtype: Annotated[str, DTYPE]
    monte_carlo: MonteCarlo

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for i, length in enumerate(self.prefix_lengths):
            if length > self.prefix_tokens:
                raise fail(
                    f"must be <= prefix_tokens ({self.prefix_tokens})",
                    f"prefix_lengths[{i}]",
                    value=length,
                )
        if set(self.prefix_lengths) <= {self.prefix_tokens}:
            raise fail(
                "must hold a length below prefix_tokens (render_s1 fits trends over "
                ">= 2 prefix lengths)",
                "prefix_lengths",
                value=self.prefix_lengths,
            )
        family = self.models == "family"
        if family and self.sequences != "planted":
            raise fail(
                "must be planted when models is family (s1_isp reads the family's planted secrets)",
                "sequences",
                value=self.sequences,
            )
        if not family and self.sequences == "planted":
            raise fail(
                f"must be file:{S1_DIR}<file>.jsonl when models is a list (planted "
                "secrets are only in the family's corpus)",
                "sequences",
                value="planted",
            )
        if not family:
            no_repeats_at(self.models, "models")
            if len(self.models) < 2:
                raise fail(
                    "must list >= 2 models (render_s1 fits trends over model sizes)",
                    "models",
                    value=self.models,
                )
        return self


class Isp(Strict):
    n: list_of(Annotated[int, COUNT], unique=True)
    expand: Annotated[int, COUNT]
    sampling_head_mass: Annotated[float, MASS]
    sampling_expand: Annotated[int, COUNT]
    exact_sequences: Annotated[int, INDEX]
    batch_size: Annotated[int, COUNT]
    max_nodes: Annotated[int, COUNT]


class Public(Strict):
    model: Annotated[str, TEXT]
    per_family: Annotated[int | None, optional(COUNT)]
    max_windows: Annotated[int | None, optional(COUNT)]
    stride: Annotated[int, COUNT]
    min_distinct_tokens: Annotated[int, COUNT]
    min_esp: Annotated[float, MASS]
    prefix_tokens: Annotated[int, COUNT]
    suffix_tokens: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _distinct_within_suffix(self) -> Self:
        if self.min_distinct_tokens > self.suffix_tokens:
            raise fail(
                f"must be <= suffix_tokens ({self.suffix_tokens})",
                "min_distinct_tokens",
                value=self.min_distinct_tokens,
            )
        return self


class Render(Strict):
    x_max: Annotated[int, COUNT]
    x_check: Annotated[int, COUNT]
    top_partial: Annotated[int, COUNT]
    examples: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _check_within(self) -> Self:
        if self.x_check > self.x_max:
            raise fail(f"must be <= x_max ({self.x_max})", "x_check", value=self.x_check)
        return self


class S1(Strict):
    decoders: list_of(Decoder)
    scores: Scores
    isp: Isp
    public: Public
    render: Render
    workers: Annotated[int, COUNT] = 1  # family jobs at once (n-ISP, runs), one process each

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [d.name for d in self.decoders]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise fail("repeats an earlier decoder name", f"decoders[{i}].name", value=name)
        if not any(d.name == d.kind == "sampling" for d in self.decoders):
            raise fail(
                "must include {name: sampling, kind: sampling} (render_s1's trends use it)",
                "decoders",
            )
        for i, n in enumerate(self.isp.n):
            if n > self.scores.ne_suffix_tokens:
                raise fail(
                    f"must be <= scores.ne_suffix_tokens ({self.scores.ne_suffix_tokens}),"
                    " the named-entity suffix length",
                    f"isp.n[{i}]",
                    value=n,
                )
        if self.public.prefix_tokens != self.scores.prefix_tokens:
            raise fail(
                f"must equal scores.prefix_tokens ({self.scores.prefix_tokens})",
                "public.prefix_tokens",
                value=self.public.prefix_tokens,
            )
        return self
