"""The s3 group: domain privacy with LiRa (S3)."""

import re
from typing import Annotated, Any, Self

from pydantic import model_validator

from privleak.pipeline.schema.base import (
    COUNT,
    MASS,
    POSITIVE,
    PROBABILITY,
    TEXT,
    Rule,
    Strict,
    at_least,
    fail,
    is_number,
    list_of,
    one_of,
    optional,
)
from privleak.pipeline.schema.data import DIALOG_DOMAINS, Slot

# privleak.training.schedules.SCHEDULE_OPTIONS: each schedule's options and the rule each obeys
S3_SCHEDULES = {"step": {"switch": MASS}, "linear": {}, "exp_concave": {"sharpness": POSITIVE}}
S3_CORPUS_FIELDS = ("text", "domain")  # what s3_prepare reads from every record


class S3FineTune(Strict):  # the sequence classifier's fine-tune on labelled word windows
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    learning_rate: Annotated[float, POSITIVE]
    max_windows: Annotated[int, COUNT] | None = None  # per class, a seeded sample (null: all)


class S3Classifier(Strict):  # the Sequence Classification policy over word windows
    # sequence: a fine-tuned sequence classifier
    # (privleak.classifier_policies.SequenceClassifierPolicy), the paper's kind;
    # embedding_logistic: logistic regression on sentence embeddings of the windows
    # (privleak.classifier_policies.ClassifierPolicy, models.embedder), a cheaper stand-in
    kind: Annotated[str, one_of("sequence", "embedding_logistic")]
    # sequence: the pretrained checkpoint fine-tuned (hub id or folder)
    model: Annotated[str | None, optional(TEXT)] = None
    fine_tune: S3FineTune | None = None  # sequence only
    window: Annotated[int, COUNT]  # words
    stride: Annotated[int, COUNT]
    threshold: Annotated[float, PROBABILITY]
    batch_size: Annotated[int, COUNT]  # windows per forward (sequence) or embed call
    public: Slot | None  # dialogs of no private domain: the "none" class (null: no such class)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.stride > self.window:
            raise fail(
                f"must be <= window ({self.window}), or words between windows are never flagged",
                "stride",
                value=self.stride,
            )
        sequence = self.kind == "sequence"
        for key in ("model", "fine_tune"):
            given = getattr(self, key) is not None
            if given != sequence:
                raise fail(
                    "required by kind sequence" if sequence else "used by kind sequence only",
                    key,
                    value=getattr(self, key),
                )
        return self


class S3Train(Strict):  # every AdamW fine-tune (and the DP ones' epochs and seq_len)
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    seq_len: Annotated[int, at_least(2)]
    learning_rate: Annotated[float, POSITIVE]


class S3DP(Strict):  # the Private target and JFT's second phase (DP-AdamW, Opacus)
    target_epsilon: Annotated[float, POSITIVE]
    delta: Annotated[float, PROBABILITY]
    max_grad_norm: Annotated[float, POSITIVE]
    batch_size: Annotated[int, COUNT]  # expected size of the Poisson batches
    learning_rate: Annotated[float, POSITIVE]
    epochs: Annotated[int | None, optional(COUNT)] = None  # the Private target's; None: train's


class S3Schedule(Strict):  # the Redaction Schedule target's p(step)
    name: Annotated[str, one_of(*S3_SCHEDULES)]
    options: dict[str, Any] = {}
    # batch: one draw per step, DP steps on the originals (the official method); document: one
    # draw per dialog, AdamW only (a deviation, its own target name)
    draw: Annotated[str, one_of("batch", "document")] = "batch"
    # its own regime (None: train's): T = epochs x ceil(n / batch_size) steps; with the batch
    # draw, batch_size is also the DP steps' expected Poisson batch (one size, as officially)
    epochs: Annotated[int | None, optional(COUNT)] = None
    batch_size: Annotated[int | None, optional(COUNT)] = None

    @model_validator(mode="after")
    def _options(self) -> Self:
        allowed = S3_SCHEDULES[self.name]
        for key, value in self.options.items():
            if key not in allowed:
                takes = ", ".join(allowed) or "none"
                raise fail(
                    f"unknown option of schedule {self.name}; allowed: {takes}", f"options.{key}"
                )
            allowed[key].validate(value, f"options.{key}")
        return self


class S3Attack(Strict):
    prompts: Annotated[int, COUNT]  # test dialogs of `domain` (the paper: 100)
    context_turns: Annotated[int, COUNT]  # lines ("USER: ..." / "AGENT: ...") of each prompt
    samples: Annotated[int, COUNT]  # continuations per prompt (the paper: 10)
    top_k: Annotated[int, COUNT]
    max_new_tokens: Annotated[int, COUNT]
    max_batch_streams: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]  # scoring rows per forward

    @model_validator(mode="after")
    def _streams(self) -> Self:
        if self.max_batch_streams < self.samples:
            raise fail(
                f"must be >= samples ({self.samples}): a prompt's samples decode together",
                "max_batch_streams",
                value=self.max_batch_streams,
            )
        return self


class S3Render(Strict):
    n_boot: Annotated[int, at_least(100)]
    alpha: Annotated[float, Rule(lambda v: is_number(v) and 0 < v < 0.5, "a number in (0, 0.5)")]


DOMAIN = one_of(*DIALOG_DOMAINS)
KEYWORD = Rule(
    lambda v: isinstance(v, str) and re.search(r"\w", v) is not None, "a string with a word in it"
)


KEYWORD_LISTS = dict[str, list_of(Annotated[str, KEYWORD], unique=True)]


class S3(Strict):
    base: Annotated[str, TEXT]  # the pretrained public checkpoint every model starts from
    corpus: Slot
    test_share: Annotated[float, PROBABILITY]  # of each domain's dialogs, held out
    domain: Annotated[str, DOMAIN]  # the prompted domain d_i
    private_domains: list_of(Annotated[str, DOMAIN], unique=True)
    # null: the synthetic generator's lists; multidogo: privleak.data.multidogo_keywords
    keywords: KEYWORD_LISTS | None
    classifier: S3Classifier
    # training runs of every target: run 0 fine-tunes with seed, run k with seed + k
    seeds: Annotated[int, COUNT]
    train: S3Train
    dp: S3DP
    schedule: S3Schedule
    attack: S3Attack
    render: S3Render
    workers: Annotated[int, COUNT] = 1  # models trained and attacked at once, one process each

    @model_validator(mode="before")
    @classmethod
    def _named_lists(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("keywords") == "multidogo":
            return data | {"keywords": None}  # privleak.data.multidogo_keywords, built in
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.private_domains == [self.domain]:
            raise fail(
                f"must name a domain other than domain ({self.domain}) whose leaks "
                "the attack checks",
                "private_domains",
                value=self.private_domains,
            )
        if isinstance(self.keywords, dict):
            private = ", ".join(self.private_domains)
            for domain in self.keywords:
                if domain not in self.private_domains:
                    raise fail(f"is not one of private_domains ({private})", f"keywords.{domain}")
            for domain in self.private_domains:
                if domain not in self.keywords:
                    raise fail(
                        "missing; every private domain needs a keyword list (or set "
                        "keywords: null for the built-in lists)",
                        f"keywords.{domain}",
                    )
        scheme, _, generator = self.corpus.source.partition(":")
        if scheme == "synthetic":
            if generator != "dialogs":
                raise fail(
                    "must be synthetic:dialogs, or a file: or hf: corpus with fields "
                    + ", ".join(S3_CORPUS_FIELDS),
                    "corpus.source",
                    value=self.corpus.source,
                )
            held = (self.corpus.options or {}).get("domains", list(DIALOG_DOMAINS))
            for domain in dict.fromkeys([self.domain, *self.private_domains]):
                if domain not in held:
                    raise fail(
                        f"has no {domain} dialogs, which domain and private_domains name",
                        "corpus.options.domains",
                        value=held,
                    )
        public = self.classifier.public
        if public is not None and public.source.startswith("synthetic:"):
            if public.source != "synthetic:dialogs":
                raise fail(
                    "must be synthetic:dialogs, or a file: or hf: corpus with fields "
                    + ", ".join(S3_CORPUS_FIELDS),
                    "classifier.public.source",
                    value=public.source,
                )
            held = (public.options or {}).get("domains", list(DIALOG_DOMAINS))
            private = [d for d in held if d in self.private_domains]
            if private:
                raise fail(
                    f"holds private domains ({', '.join(private)}); the public class takes "
                    "dialogs of other domains only",
                    "classifier.public.options.domains",
                    value=held,
                )
        return self
