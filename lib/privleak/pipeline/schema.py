"""The params.yaml schema: every group and every profile block, checked before any stage runs.

`validate(params, source)` checks a loaded params mapping and returns the `Params` model;
`load_yaml(text, source)` parses the file and rejects a mapping key given twice (DVC rejects
those; plain YAML silently keeps the last). A failure is one PrivleakError line:
    <source>: <key.path[i]> = <value>: <what is allowed>

Names that lib modules also define (generators, decoder kinds, dtypes, S0 tasks, ...) are
repeated here so that validating never imports torch; tests/test_schema.py keeps them in step.
"""

import difflib
import math
import posixpath
import re
from collections.abc import Callable
from typing import Annotated, Any, Self

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError, core_schema

from privleak.errors import PrivleakError
from privleak.pipeline.params import PROFILES

# privleak.data.dialogs.DOMAINS
DIALOG_DOMAINS = ("AIRLINE", "MEDIA", "INSURANCE", "FASTFOOD", "FINANCE", "SOFTWARE")
# privleak.decoding.FORWARD_MODES
FORWARD_MODES = ("auto", "dynamic", "slots", "graph")

# privleak.data.synthetic.GENERATORS
GENERATORS = (
    "cnn_dm",
    "dialogs",
    "enron",
    "healthcaremagic",
    "icliniq",
    "medical_dirichlet",
    "pretrain",
    "pubmedqa",
)
ATTACK_STYLES = ("health", "enron")  # privleak.rag_attack.STYLES
FILE_TYPES = (".csv", ".json", ".jsonl", ".parquet")  # privleak.data.loaders.FILE_TYPES
EMBEDDED_LMS = ("smollm2-135m-instruct",)  # privleak.models.EMBEDDED_LMS
DTYPES = ("float32", "float16", "bfloat16")  # privleak.models.DTYPES
DECODER_KINDS = ("greedy", "sampling", "top_k", "top_p", "temperature")  # metrics.sequence
S0_TASKS = ("cnn_dm", "pubmedqa")  # privleak.prompts.TASKS
FIGURE_FORMATS = ("png", "pdf", "svg")  # privleak.figures writes these byte-deterministically
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate strategies
CLAIM_METHODS = ("percentile", "BCa", "basic")  # privleak.claims.METHODS
WINDOWS = ("block", "sliding")  # privleak.ngrams.WINDOWS
# dvc.yaml stages read data/raw/<slot>.jsonl of these; pretrain also needs its secrets file.
REQUIRED_SLOTS = ("cnn_dm", "pubmedqa", "pretrain")
CORPORA_DIR = "data/external/corpora/"
S1_DIR = "data/external/s1/"
FAMILY_DIR = "data/family/"  # train_family's output: one folder per size

_DEVICE = re.compile(r"cpu|cuda|cuda:\d+|mps")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a slot or size becomes a file/folder name
# As privleak.data.loaders: "train[:100]" keeps its colon.
_HF_PART_SEP = re.compile(r":(?![^\[]*\])")
_HF_SPLIT = re.compile(r"[\w.-]+(\[-?\d*:-?\d*\])?")
_TEXT_FLOAT = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+))[eE]([-+]?\d+)")
_HF_FORM = "hf:<dataset>[:config][:split] with split NAME or NAME[start:end]"


# ---------------------------------------------------------------- errors


def _fail(message: str, key: str = "", **value: Any) -> PydanticCustomError:
    """An error with our message; `key` extends the error's path, `value=` is shown after it."""
    return PydanticCustomError("privleak", "{message}", {"message": message, "key": key, **value})


def _join(path: str, key: str) -> str:
    return path + key if not path or key.startswith("[") else f"{path}.{key}" if key else path


def _loc(loc: tuple) -> str:
    path = ""
    for part in loc:
        path = _join(path, f"[{part}]" if isinstance(part, int) else str(part))
    return path


def _show(value: Any) -> str:
    if value is None or isinstance(value, bool):
        text = {None: "null", True: "true", False: "false"}[value]
    elif isinstance(value, list):
        text = "[" + ", ".join(map(_show, value)) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_BUILTIN = {
    "model_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "too_short": "must not be empty",
    "extra_forbidden": "unknown key",
}


def _parts(error: dict) -> tuple[str, str, dict]:
    """(dotted path, message, {"value": shown value} or {}) of one pydantic error."""
    ctx = error.get("ctx") or {}
    path = _loc(error["loc"])
    if error["type"] == "privleak":
        value = {"value": ctx["value"]} if "value" in ctx else {}
        return _join(path, ctx["key"]), ctx["message"], value
    if error["type"] == "missing":
        if error["loc"][-1] in PROFILES and len(error["loc"]) == 2:
            return path, "missing; every group needs blocks " + ", ".join(PROFILES), {}
        return path, "missing; this key is required", {}
    message = _BUILTIN.get(error["type"], error["msg"])
    return path, message, {} if error["type"] == "extra_forbidden" else {"value": error["input"]}


def _line(path: str, message: str, value: dict) -> str:
    shown = f" = {_show(value['value'])}" if value else ""
    return f"{path}{shown}: {message}" if path else message


def _nested(model: type[BaseModel], value: Any, key: str) -> None:
    """Validate `value` with `model`, re-raising its first error under `key`."""
    try:
        model.model_validate(value)
    except ValidationError as error:
        path, message, shown = _parts(error.errors()[0])
        raise _fail(message, _join(key, path), **shown) from None


# ---------------------------------------------------------------- leaf rules


def _text_number_hint(value: Any) -> str:
    match = _TEXT_FLOAT.fullmatch(value.strip()) if isinstance(value, str) else None
    if not match:
        return ""
    mantissa = match[1] if "." in match[1] else match[1] + ".0"
    return f" (YAML reads {value} as text; write {mantissa}e{match[2]})"


class Rule:
    """A leaf value rule for `Annotated[T, rule]`: values where `check` holds pass unchanged,
    others fail with 'must be <allowed>'. `validate(value, key)` applies it inside a model
    validator."""

    def __init__(self, check: Callable[[Any], bool], allowed: str, number: bool = False):
        self.check, self.allowed, self.number = check, allowed, number

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_plain_validator_function(self.validate)

    def validate(self, value: Any, key: str = "") -> Any:
        if not self.check(value):
            hint = _text_number_hint(value) if self.number else ""
            raise _fail(f"must be {self.allowed}{hint}", key, value=value)
        return value


def _is_int(value: Any) -> bool:
    return type(value) is int  # YAML true/false are bools, never counts


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _at_least(minimum: int) -> Rule:
    return Rule(lambda v: _is_int(v) and v >= minimum, f"an integer >= {minimum}")


def _optional(rule: Rule) -> Rule:
    return Rule(lambda v: v is None or rule.check(v), f"null or {rule.allowed}", rule.number)


def _one_of(*values: str) -> Rule:
    return Rule(lambda v: isinstance(v, str) and v in values, "one of " + ", ".join(values))


COUNT = _at_least(1)
INDEX = _at_least(0)
POSITIVE = Rule(lambda v: _is_number(v) and v > 0, "a finite number > 0", number=True)
NON_NEGATIVE = Rule(lambda v: _is_number(v) and v >= 0, "a finite number >= 0", number=True)
SHARE = Rule(lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]", number=True)
MASS = Rule(lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]", number=True)
TEXT = Rule(lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")
FLAG = Rule(lambda v: isinstance(v, bool), "true or false")
DEVICE = Rule(
    lambda v: isinstance(v, str) and _DEVICE.fullmatch(v) is not None,
    "cpu, cuda, cuda:<n> or mps",
)
DTYPE = _one_of(*DTYPES)


def _device_map(value: Any) -> bool:
    if isinstance(value, dict):
        return all(
            isinstance(k, str) and (_is_int(v) or isinstance(v, str)) for k, v in value.items()
        )
    return value is None or value in DEVICE_MAPS


DEVICE_MAP = Rule(
    _device_map, "null, " + ", ".join(DEVICE_MAPS) + " or a mapping of modules to devices"
)
FIELD_MAP = Rule(
    lambda v: (
        v is None
        or (isinstance(v, dict) and all(TEXT.check(k) and TEXT.check(c) for k, c in v.items()))
    ),
    "a mapping of canonical names to source columns, e.g. {text: body}",
)


def _no_repeats(values: list) -> list:
    for i, value in enumerate(values):
        if value in values[:i]:
            raise _fail("repeats an earlier item", f"[{i}]", value=value)
    return values


def _no_repeats_at(values: list, key: str) -> None:
    try:
        _no_repeats(values)
    except PydanticCustomError as error:
        raise _fail(
            error.context["message"], key + error.context["key"], value=error.context["value"]
        ) from None


def list_of(item: Any, *, unique: bool = False, empty: bool = False) -> Any:
    """A list of `item` (non-empty unless `empty`; without repeats when `unique`)."""
    checks = [AfterValidator(_no_repeats)] if unique else []
    return Annotated[list[item], Field(min_length=0 if empty else 1), *checks]


def _under(path: str, folder: str, suffixes: tuple[str, ...], value: str) -> None:
    normal = posixpath.normpath(path) if path else ""
    if path.startswith("/") or "\\" in path or not normal.startswith(folder):
        raise _fail(
            f"a file: path must lie under {folder} (so DVC tracks it as a dependency)", value=value
        )
    if posixpath.splitext(normal)[1].lower() not in suffixes:
        raise _fail(f"a file: path must end in {', '.join(suffixes)}", value=value)


def _hf(spec: str, value: str) -> None:
    parts = _HF_PART_SEP.split(spec)
    split = parts[-1] if len(parts) == 3 or (len(parts) == 2 and "[" in parts[-1]) else None
    if not all(parts) or len(parts) > 3 or (split and not _HF_SPLIT.fullmatch(split)):
        raise _fail(f"must be {_HF_FORM}", value=value)


def _corpus_source(value: Any) -> str:
    scheme, _, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if scheme == "synthetic" and rest not in GENERATORS:
        allowed = ", ".join(f"synthetic:{g}" for g in GENERATORS)
        raise _fail(f"unknown synthetic generator; allowed: {allowed}", value=value)
    if scheme == "hf":
        _hf(rest, value)
    elif scheme == "file":
        _under(rest, CORPORA_DIR, FILE_TYPES, value)
    elif scheme != "synthetic":
        raise _fail(
            f"must be synthetic:<generator>, {_HF_FORM.split(' with')[0]} or "
            f"file:{CORPORA_DIR}<file>",
            value=value,
        )
    return value


def _sequences(value: Any) -> str:
    if value != "planted":
        if not (isinstance(value, str) and value.startswith("file:")):
            raise _fail(f"must be planted or file:{S1_DIR}<file>.jsonl", value=value)
        _under(value.removeprefix("file:"), S1_DIR, (".jsonl",), value)
    return value


def _faithfulness(value: Any) -> bool:
    return value == "sentence_support" or (
        isinstance(value, str) and value.startswith("factkb:") and TEXT.check(value[7:])
    )


class Parsed:
    """`Annotated[T, Parsed(parse)]`: `parse(value)` returns the value or raises its own error."""

    def __init__(self, parse: Callable[[Any], Any]):
        self.parse = parse

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_plain_validator_function(self.parse)


CORPUS_SOURCE = Parsed(_corpus_source)
SEQUENCES = Parsed(_sequences)
SCORED_MODELS = Rule(
    lambda v: v == "family" or (isinstance(v, list) and bool(v) and all(map(TEXT.check, v))),
    "family or a non-empty list of model ids/folders",
)
FAITHFULNESS = Rule(_faithfulness, "sentence_support or factkb:<model>")


# ---------------------------------------------------------------- blocks


def _suggest(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    return f"did you mean '{close[0]}'?" if close else "allowed: " + (", ".join(allowed) or "none")


class Strict(BaseModel):
    """A mapping with exactly the declared keys; an unknown key names the nearest valid one."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    raise _fail(
                        f"unknown key; {_suggest(str(key), list(cls.model_fields))}", str(key)
                    )
        return data


def per_profile(block: Any, name: str) -> type[Strict]:
    """A group: one `block` per profile, every block validated whichever profile is selected."""
    fields = {"__annotations__": dict.fromkeys(PROFILES, block), "__module__": __name__}
    return type(name, (Strict,), fields)


class Figures(Strict):
    formats: list_of(Annotated[str, _one_of(*FIGURE_FORMATS)], unique=True)

    @model_validator(mode="after")
    def _png(self) -> Self:
        if "png" not in self.formats:
            raise _fail("must include png (the gallery shows PNGs)", "formats", value=self.formats)
        return self


class Models(Strict):
    prepare: list_of(Annotated[str, _one_of(*EMBEDDED_LMS)], unique=True, empty=True)
    lm: Annotated[str, TEXT]
    embedder: Annotated[str, TEXT]
    device: Annotated[str, DEVICE]
    dtype: Annotated[str, DTYPE]
    device_map: Annotated[Any, DEVICE_MAP]


class TextOptions(Strict):  # synthetic:cnn_dm and synthetic:pubmedqa
    min_words: Annotated[int, COUNT] = 300


class PretrainOptions(Strict):
    doc_words: Annotated[int, INDEX] = 200
    duplication_counts: list_of(Annotated[int, COUNT]) = [1, 2, 4, 8, 16, 32]
    sequences_per_count: Annotated[int, COUNT] = 4
    ne_prefix_words: Annotated[int, COUNT] = 40
    long_prefix_words: Annotated[int, COUNT] = 40
    long_suffix_words: Annotated[int, COUNT] = 40


class MedicalOptions(Strict):
    diseases: Annotated[int, COUNT] = 100
    concentration: Annotated[float, POSITIVE] = 0.5
    rare_details: Annotated[int, INDEX] = 20


class NoOptions(Strict):  # synthetic:healthcaremagic, icliniq and enron take none
    pass


class DialogOptions(Strict):  # synthetic:dialogs
    domains: list_of(Annotated[str, _one_of(*DIALOG_DOMAINS)], unique=True) = list(DIALOG_DOMAINS)
    turns: Annotated[list[Annotated[int, _at_least(3)]], Field(min_length=2, max_length=2)] = [4, 8]
    travel_insurance_share: Annotated[float, SHARE] = 0.1

    @model_validator(mode="after")
    def _turns(self) -> Self:
        if self.turns[0] > self.turns[1]:
            raise _fail("must be [fewest, most] exchanges", "turns", value=self.turns)
        return self


GENERATOR_OPTIONS = {
    "cnn_dm": TextOptions,
    "dialogs": DialogOptions,
    "enron": NoOptions,
    "healthcaremagic": NoOptions,
    "icliniq": NoOptions,
    "medical_dirichlet": MedicalOptions,
    "pretrain": PretrainOptions,
    "pubmedqa": TextOptions,
}


class Slot(Strict):
    """One corpus slot, materialised as data/raw/<slot>.jsonl by prepare_data."""

    source: Annotated[str, CORPUS_SOURCE]
    n: Annotated[int | None, _optional(COUNT)] = None
    fields: Annotated[dict | None, FIELD_MAP] = None
    options: Any = None
    revision: Annotated[str | None, _optional(TEXT)] = None

    @model_validator(mode="after")
    def _by_scheme(self) -> Self:
        scheme, _, generator = self.source.partition(":")
        if scheme == "synthetic":
            if self.n is None:
                raise _fail("missing; a synthetic: source needs n (records to generate)", "n")
            _nested(GENERATOR_OPTIONS[generator], self.options or {}, "options")
        elif self.options is not None:
            raise _fail("applies only to synthetic: sources", "options")
        if self.revision is not None and scheme != "hf":
            raise _fail("applies only to hf: sources", "revision", value=self.revision)
        return self


class ContextGain(Strict):
    corpus: Annotated[str, TEXT]
    n_examples: Annotated[int, COUNT]
    max_context_tokens: Annotated[int | None, _optional(COUNT)]
    batch_size: Annotated[int, COUNT]


class Size(Strict):
    hidden: Annotated[int, COUNT]
    layers: Annotated[int, COUNT]
    heads: Annotated[int, COUNT]
    intermediate: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _head_dim(self) -> Self:
        # RoPE rotates pairs of dimensions: each head needs an even width.
        if self.hidden % (2 * self.heads):
            raise _fail(
                f"must divide hidden ({self.hidden}) into heads of even width",
                "heads",
                value=self.heads,
            )
        return self


class Mix(Strict):  # extra synthetic articles per generator (train_family's MIX_FIELDS)
    cnn_dm: Annotated[int, INDEX] = 0
    pubmedqa: Annotated[int, INDEX] = 0


class Family(Strict):
    vocab_size: Annotated[int, _at_least(300)]  # 256 bytes + specials
    block_size: Annotated[int, _at_least(2)]
    window: Annotated[int, COUNT]
    sizes: dict[str, Size]
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    lr: Annotated[float, POSITIVE]
    warmup_steps: Annotated[int, INDEX]
    mix: Mix
    mix_seed_offset: Annotated[int, INDEX]
    # training runs: train_family trains seed, train_family_seeds seed + 1 .. seed + seeds - 1
    seeds: Annotated[int, COUNT] = 1
    workers: Annotated[int, COUNT] = 1  # members trained at once, one process and thread each

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if self.window < self.block_size:
            raise _fail(f"must be >= block_size ({self.block_size})", "window", value=self.window)
        if not self.sizes:
            raise _fail("must list at least one size", "sizes", value={})
        for name in self.sizes:
            if not _NAME.fullmatch(name):
                raise _fail("unusable as a folder name", f"sizes.{name}")
        return self


class Decoder(Strict):
    name: Annotated[str, TEXT]
    kind: Annotated[str, _one_of(*DECODER_KINDS)]
    value: Any = None

    @model_validator(mode="after")
    def _value(self) -> Self:
        rule = {"top_k": COUNT, "top_p": MASS, "temperature": POSITIVE}.get(self.kind)
        if rule is not None:
            rule.validate(self.value, "value")
        elif self.value is not None:
            raise _fail(f"must be omitted: {self.kind} takes no value", "value", value=self.value)
        return self


class MonteCarlo(Strict):
    kinds: list_of(Annotated[str, _one_of("named_entity", "long_sequence")], unique=True)
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
                raise _fail(
                    f"must be <= prefix_tokens ({self.prefix_tokens})",
                    f"prefix_lengths[{i}]",
                    value=length,
                )
        if set(self.prefix_lengths) <= {self.prefix_tokens}:
            raise _fail(
                "must hold a length below prefix_tokens (render_s1 fits trends over "
                ">= 2 prefix lengths)",
                "prefix_lengths",
                value=self.prefix_lengths,
            )
        family = self.models == "family"
        if family and self.sequences != "planted":
            raise _fail(
                "must be planted when models is family (s1_isp reads the family's planted secrets)",
                "sequences",
                value=self.sequences,
            )
        if not family and self.sequences == "planted":
            raise _fail(
                f"must be file:{S1_DIR}<file>.jsonl when models is a list (planted "
                "secrets are only in the family's corpus)",
                "sequences",
                value="planted",
            )
        if not family:
            _no_repeats_at(self.models, "models")
            if len(self.models) < 2:
                raise _fail(
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
    per_family: Annotated[int | None, _optional(COUNT)]
    max_windows: Annotated[int | None, _optional(COUNT)]
    stride: Annotated[int, COUNT]
    min_distinct_tokens: Annotated[int, COUNT]
    min_esp: Annotated[float, MASS]
    prefix_tokens: Annotated[int, COUNT]
    suffix_tokens: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _distinct_within_suffix(self) -> Self:
        if self.min_distinct_tokens > self.suffix_tokens:
            raise _fail(
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
            raise _fail(f"must be <= x_max ({self.x_max})", "x_check", value=self.x_check)
        return self


class S1(Strict):
    decoders: list_of(Decoder)
    scores: Scores
    isp: Isp
    public: Public
    render: Render

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [d.name for d in self.decoders]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise _fail("repeats an earlier decoder name", f"decoders[{i}].name", value=name)
        if not any(d.name == d.kind == "sampling" for d in self.decoders):
            raise _fail(
                "must include {name: sampling, kind: sampling} (render_s1's trends use it)",
                "decoders",
            )
        for i, n in enumerate(self.isp.n):
            if n > self.scores.ne_suffix_tokens:
                raise _fail(
                    f"must be <= scores.ne_suffix_tokens ({self.scores.ne_suffix_tokens}),"
                    " the named-entity suffix length",
                    f"isp.n[{i}]",
                    value=n,
                )
        if self.public.prefix_tokens != self.scores.prefix_tokens:
            raise _fail(
                f"must equal scores.prefix_tokens ({self.scores.prefix_tokens})",
                "public.prefix_tokens",
                value=self.public.prefix_tokens,
            )
        return self


S0_CORPUS = _one_of(*S0_TASKS)


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

    window: Annotated[str, _one_of(*WINDOWS)]
    stride: Annotated[int, COUNT] = 1

    @model_validator(mode="after")
    def _stride(self) -> Self:
        if self.window == "block" and self.stride != 1:
            raise _fail(
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
    seq_len: Annotated[int, _at_least(2)]
    learning_rate: Annotated[float, POSITIVE]


class S0Family(Windowed):
    corpus: Annotated[str, S0_CORPUS]
    examples: Annotated[int, COUNT]
    context_tokens: Annotated[int | None, _optional(COUNT)]
    max_new_tokens: Annotated[int, COUNT]
    n: Annotated[int, COUNT]


class Bertscore(Strict):
    backend: Annotated[str, _one_of("minilm", "bert-score")]
    model: Annotated[str | None, _optional(TEXT)]

    @model_validator(mode="after")
    def _model(self) -> Self:
        if (self.model is None) != (self.backend == "minilm"):
            raise _fail(
                "must be null for minilm and a model id for bert-score", "model", value=self.model
            )
        return self


class S0(Strict):
    lms: list_of(Annotated[str, TEXT], unique=True)
    corpora: list_of(Annotated[str, S0_CORPUS], unique=True)
    template: Annotated[str, _one_of("chat", "plain")]
    n_examples: Annotated[int, COUNT]
    context_tokens: Annotated[int | None, _optional(COUNT)]
    max_new_tokens: Annotated[int, COUNT]
    min_new_tokens: Annotated[int, INDEX]
    count_eos: Annotated[bool, FLAG]
    temperature: Annotated[float, POSITIVE]
    lams: list_of(Annotated[float, NON_NEGATIVE], unique=True)  # one decode group each
    max_batch_streams: Annotated[int, _at_least(2)]  # two streams per CID response
    sweep: Sweep
    context_sizes: ContextSizes
    ngram: Ngram
    bounded: Bounded
    finetune: Finetune
    family: S0Family
    batch_size: Annotated[int, COUNT]
    leakage_rule: Annotated[str, _one_of("runs", "official")]
    repeat_min_run: Annotated[int, COUNT]
    repeat_share: Annotated[float, SHARE]
    repeat_min_shared_words: Annotated[int, INDEX]
    rouge_threshold: Annotated[float, SHARE]
    bertscore: Bertscore
    faithfulness: Annotated[str, FAITHFULNESS]

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.min_new_tokens > self.max_new_tokens:
            raise _fail(
                f"must be <= max_new_tokens ({self.max_new_tokens})",
                "min_new_tokens",
                value=self.min_new_tokens,
            )
        if self.family.max_new_tokens < self.min_new_tokens:
            raise _fail(
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
                raise _fail(f"must be <= {where} ({limit}), the context it cuts", key, value=n)
        return self


PROBABILITY = Rule(lambda v: _is_number(v) and 0 < v < 1, "a number in (0, 1)", number=True)


class S4Budget(Strict):
    epsilons: list_of(Annotated[float, POSITIVE], unique=True)  # per response; the first: tables
    delta: Annotated[float, PROBABILITY]
    retrieval_epsilon: Annotated[float, POSITIVE]

    @model_validator(mode="after")
    def _share(self) -> Self:
        smallest = min(self.epsilons)
        if self.retrieval_epsilon >= smallest:
            raise _fail(
                f"must be < every epsilon (smallest {smallest}), so that the tokens get a share",
                "retrieval_epsilon",
                value=self.retrieval_epsilon,
            )
        return self


class S4Retrieval(Strict):
    utility: Annotated[str, _one_of("top_k", "top_p")]
    k: Annotated[int, COUNT]
    p: Annotated[float, MASS]
    alpha: Annotated[float, POSITIVE]  # the top-p weights' exp(alpha (s - high) / (high - low))
    score_range: Annotated[list[float], Field(min_length=2, max_length=2)]
    max_retrieve: Annotated[int, COUNT]

    @model_validator(mode="after")
    def _range(self) -> Self:
        low, high = self.score_range
        if not (-1 <= low < high <= 1):
            raise _fail("must be [low, high] with -1 <= low < high <= 1 (cosine scores)",
                        "score_range", value=self.score_range)  # fmt: skip
        return self


class S4DPICL(Strict):
    alpha: Annotated[float, POSITIVE]
    clip: Annotated[float, POSITIVE]
    theta: Annotated[float, NON_NEGATIVE]


class S4Generation(Strict):
    template: Annotated[str, _one_of("chat", "plain")]
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
    draws: Annotated[int, _at_least(100)]


class S4(Strict):
    lm: Annotated[str, TEXT]
    corpus: Slot
    embed_batch_size: Annotated[int, COUNT]
    max_diseases: Annotated[int | None, _optional(COUNT)]
    budget: S4Budget
    retrieval: S4Retrieval
    dp_icl: S4DPICL
    generation: S4Generation
    densities: S4Densities

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        gen, retrieval = self.generation, self.retrieval
        if gen.min_new_tokens > gen.max_new_tokens:
            raise _fail(f"must be <= max_new_tokens ({gen.max_new_tokens})",
                        "generation.min_new_tokens", value=gen.min_new_tokens)  # fmt: skip
        if gen.max_batch_streams < 1 + retrieval.max_retrieve:
            raise _fail(
                f"must be >= 1 + retrieval.max_retrieve ({1 + retrieval.max_retrieve}): one "
                "question's public and document streams decode together",
                "generation.max_batch_streams",
                value=gen.max_batch_streams,
            )
        if self.corpus.n is not None and self.densities.documents > self.corpus.n:
            raise _fail(f"must be <= corpus.n ({self.corpus.n})", "densities.documents",
                        value=self.densities.documents)  # fmt: skip
        return self


class S2Attack(Strict):
    prompts: Annotated[int, COUNT]  # per corpus (the paper: 250)
    targeted_share: Annotated[float, SHARE]


class S2Retrieval(Strict):
    k: Annotated[int, COUNT]
    rerank_top: Annotated[int, COUNT]
    reranker: Annotated[str, TEXT]  # tfidf, or a cross-encoder hub id / folder

    @model_validator(mode="after")
    def _top(self) -> Self:
        if self.rerank_top > self.k:
            raise _fail(f"must be <= k ({self.k})", "rerank_top", value=self.rerank_top)
        return self


class S2Decoding(Strict):
    temperature: Annotated[float, POSITIVE]
    max_new_tokens: Annotated[int, COUNT]
    min_new_tokens: Annotated[int, INDEX]
    max_batch_streams: Annotated[int, COUNT]
    forward_mode: Annotated[str, _one_of(*FORWARD_MODES)]


class S2PAD(Strict):  # privleak.pad.PADSettings
    epsilon: Annotated[float, POSITIVE]
    amplification: Annotated[float, NON_NEGATIVE]
    min_sensitivity: Annotated[float, MASS]
    tau_conf: Annotated[float, SHARE]
    tau_margin: Annotated[float, NON_NEGATIVE]
    weights: Annotated[list[Annotated[float, NON_NEGATIVE]], Field(min_length=3, max_length=3)]


class S2Sweeps(Strict):  # Figs. 4-5
    amplifications: list_of(Annotated[float, NON_NEGATIVE], unique=True)
    epsilons: list_of(Annotated[float, POSITIVE], unique=True)


class S2Distance(Strict):  # Dist.: L2 thresholds (the paper sweeps 0-1.2)
    table: Annotated[float, NON_NEGATIVE]
    sweep: list_of(Annotated[float, NON_NEGATIVE], unique=True)

    @model_validator(mode="after")
    def _table_swept(self) -> Self:
        if self.table not in self.sweep:
            raise _fail(f"must be one of sweep ({self.sweep})", "table", value=self.table)
        return self


class S2Summary(Strict):
    max_new_tokens: Annotated[int, COUNT]


class S2ESP(Strict):
    prompts: Annotated[int, INDEX]  # per corpus
    max_secrets: Annotated[int, COUNT]  # per prompt
    cue_words: Annotated[int, INDEX]
    draws: Annotated[int, COUNT]  # noise samples per token


ALPHA = Rule(lambda v: _is_number(v) and v > 1, "a finite number > 1", number=True)


class S2Accounting(Strict):
    alpha: Annotated[float, ALPHA]
    delta: Annotated[float, PROBABILITY]
    alphas: list_of(Annotated[float, ALPHA], unique=True)  # Fig. 6b
    lengths: list_of(Annotated[int, COUNT], unique=True)  # Fig. 6a


class S2Leakage(Strict):
    repeat_min_words: Annotated[int, COUNT]
    rouge_threshold: Annotated[float, SHARE]


class S2(Strict):
    lm: Annotated[str, TEXT]
    corpora: dict[str, Slot]
    styles: dict[str, Annotated[str, _one_of(*ATTACK_STYLES)]]
    sweep_corpus: Annotated[str, TEXT]
    embed_batch_size: Annotated[int, COUNT]
    chunk_words: Annotated[int, COUNT]
    attack: S2Attack
    retrieval: S2Retrieval
    decoding: S2Decoding
    pad: S2PAD
    static_sigma: Annotated[float, POSITIVE]
    sweeps: S2Sweeps
    distance: S2Distance
    summary: S2Summary
    esp: S2ESP
    accounting: S2Accounting
    leakage: S2Leakage

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.corpora:
            raise _fail("must name at least one corpus", "corpora")
        for name in self.corpora:
            if not _NAME.fullmatch(name):
                raise _fail("unusable as a Chroma collection and file name", f"corpora.{name}")
            if name not in self.styles:
                raise _fail(
                    f"has no attack style; add styles.{name} ({' or '.join(ATTACK_STYLES)})",
                    f"corpora.{name}",
                )
        if self.sweep_corpus not in self.corpora:
            raise _fail(f"must be one of corpora ({', '.join(self.corpora)})", "sweep_corpus",
                        value=self.sweep_corpus)  # fmt: skip
        if self.decoding.min_new_tokens > self.decoding.max_new_tokens:
            raise _fail(f"must be <= max_new_tokens ({self.decoding.max_new_tokens})",
                        "decoding.min_new_tokens", value=self.decoding.min_new_tokens)  # fmt: skip
        return self


# privleak.training.schedules.SCHEDULE_OPTIONS: each schedule's options and the rule each obeys
S3_SCHEDULES = {"step": {"switch": MASS}, "linear": {}, "exp_concave": {"sharpness": POSITIVE}}
S3_CORPUS_FIELDS = ("text", "domain")  # what s3_prepare reads from every record


class S3Classifier(Strict):  # privleak.policies.ClassifierPolicy over word windows
    window: Annotated[int, COUNT]  # words
    stride: Annotated[int, COUNT]
    threshold: Annotated[float, PROBABILITY]
    embed_batch_size: Annotated[int, COUNT]
    public: Slot | None  # dialogs of no private domain: the "none" class (null: no such class)

    @model_validator(mode="after")
    def _stride(self) -> Self:
        if self.stride > self.window:
            raise _fail(
                f"must be <= window ({self.window}), or words between windows are never flagged",
                "stride",
                value=self.stride,
            )
        return self


class S3Train(Strict):  # every AdamW fine-tune (and the DP ones' epochs and seq_len)
    epochs: Annotated[int, COUNT]
    batch_size: Annotated[int, COUNT]
    seq_len: Annotated[int, _at_least(2)]
    learning_rate: Annotated[float, POSITIVE]


class S3DP(Strict):  # the Private target and JFT's second phase (DP-AdamW, Opacus)
    target_epsilon: Annotated[float, POSITIVE]
    delta: Annotated[float, PROBABILITY]
    max_grad_norm: Annotated[float, POSITIVE]
    batch_size: Annotated[int, COUNT]  # expected size of the Poisson batches
    learning_rate: Annotated[float, POSITIVE]


class S3Schedule(Strict):  # the Redaction Schedule target's p(step)
    name: Annotated[str, _one_of(*S3_SCHEDULES)]
    options: dict[str, Any] = {}

    @model_validator(mode="after")
    def _options(self) -> Self:
        allowed = S3_SCHEDULES[self.name]
        for key, value in self.options.items():
            if key not in allowed:
                takes = ", ".join(allowed) or "none"
                raise _fail(
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
            raise _fail(
                f"must be >= samples ({self.samples}): a prompt's samples decode together",
                "max_batch_streams",
                value=self.max_batch_streams,
            )
        return self


class S3Render(Strict):
    n_boot: Annotated[int, _at_least(100)]
    alpha: Annotated[float, Rule(lambda v: _is_number(v) and 0 < v < 0.5, "a number in (0, 0.5)")]
    pseudocount: Annotated[float, NON_NEGATIVE]  # domain privacy's add-a rates (0: plain ratio)


DOMAIN = _one_of(*DIALOG_DOMAINS)
KEYWORD = Rule(
    lambda v: isinstance(v, str) and re.search(r"\w", v) is not None, "a string with a word in it"
)


class S3(Strict):
    base: Annotated[str, TEXT]  # the pretrained public checkpoint every model starts from
    corpus: Slot
    test_share: Annotated[float, PROBABILITY]  # of each domain's dialogs, held out
    domain: Annotated[str, DOMAIN]  # the prompted domain d_i
    private_domains: list_of(Annotated[str, DOMAIN], unique=True)
    keywords: dict[str, list_of(Annotated[str, KEYWORD])] | None  # null: the built-in lists
    classifier: S3Classifier
    # training runs of every target: run 0 fine-tunes with seed, run k with seed + k
    seeds: Annotated[int, COUNT]
    train: S3Train
    dp: S3DP
    schedule: S3Schedule
    attack: S3Attack
    render: S3Render

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.private_domains == [self.domain]:
            raise _fail(
                f"must name a domain other than domain ({self.domain}) whose leaks "
                "the attack checks",
                "private_domains",
                value=self.private_domains,
            )
        if self.keywords is not None:
            private = ", ".join(self.private_domains)
            for domain in self.keywords:
                if domain not in self.private_domains:
                    raise _fail(f"is not one of private_domains ({private})", f"keywords.{domain}")
            for domain in self.private_domains:
                if domain not in self.keywords:
                    raise _fail(
                        "missing; every private domain needs a keyword list (or set "
                        "keywords: null for the built-in lists)",
                        f"keywords.{domain}",
                    )
        scheme, _, generator = self.corpus.source.partition(":")
        if scheme == "synthetic":
            if generator != "dialogs":
                raise _fail(
                    "must be synthetic:dialogs, or a file: or hf: corpus with fields "
                    + ", ".join(S3_CORPUS_FIELDS),
                    "corpus.source",
                    value=self.corpus.source,
                )
            held = (self.corpus.options or {}).get("domains", list(DIALOG_DOMAINS))
            for domain in dict.fromkeys([self.domain, *self.private_domains]):
                if domain not in held:
                    raise _fail(
                        f"has no {domain} dialogs, which domain and private_domains name",
                        "corpus.options.domains",
                        value=held,
                    )
        public = self.classifier.public
        if public is not None and public.source.startswith("synthetic:"):
            if public.source != "synthetic:dialogs":
                raise _fail(
                    "must be synthetic:dialogs, or a file: or hf: corpus with fields "
                    + ", ".join(S3_CORPUS_FIELDS),
                    "classifier.public.source",
                    value=public.source,
                )
            held = (public.options or {}).get("domains", list(DIALOG_DOMAINS))
            private = [d for d in held if d in self.private_domains]
            if private:
                raise _fail(
                    f"holds private domains ({', '.join(private)}); the public class takes "
                    "dialogs of other domains only",
                    "classifier.public.options.domains",
                    value=held,
                )
        return self


class Claims(Strict):
    n_boot: Annotated[int, _at_least(100)]
    seed: Annotated[int, INDEX]
    alpha: Annotated[float, Rule(lambda v: _is_number(v) and 0 < v < 0.5, "a number in (0, 0.5)")]
    min_units: Annotated[int, _at_least(2)]
    method: Annotated[str, _one_of(*CLAIM_METHODS)]


class Params(Strict):
    """The whole params.yaml."""

    profile: Annotated[str, _one_of(*PROFILES)]
    seed: Annotated[int, INDEX]
    figures: Figures
    models: per_profile(Models, "ModelsGroup")
    data: per_profile(dict[str, Slot], "DataGroup")
    context_gain: per_profile(ContextGain, "ContextGainGroup")
    family: per_profile(Family, "FamilyGroup")
    s1: per_profile(S1, "S1Group")
    s0: per_profile(S0, "S0Group")
    s4: per_profile(S4, "S4Group")
    s2: per_profile(S2, "S2Group")
    s3: per_profile(S3, "S3Group")
    claims: per_profile(Claims, "ClaimsGroup")

    @model_validator(mode="after")
    def _across_groups(self) -> Self:
        for profile in PROFILES:
            _check_data(getattr(self.data, profile), profile)
            _check_corpora(self, profile)
            _check_prepared(self, profile)
            _check_family(self, profile)
            _check_s3_base(self, profile)
        return self


def _check_data(data: dict[str, Slot], p: str) -> None:
    for slot, spec in data.items():
        if not _NAME.fullmatch(slot):
            raise _fail("unusable as a file name (data/raw/<slot>.jsonl)", f"data.{p}.{slot}")
        generator = spec.source.removeprefix("synthetic:")
        if slot in GENERATORS and spec.source.startswith("synthetic:") and generator != slot:
            raise _fail(
                f"slot {slot} needs synthetic:{slot} records",
                f"data.{p}.{slot}.source",
                value=spec.source,
            )
    for slot in REQUIRED_SLOTS:
        if slot not in data:
            raise _fail(f"missing; dvc.yaml stages read data/raw/{slot}.jsonl", f"data.{p}.{slot}")
    if data["pretrain"].source != "synthetic:pretrain":
        raise _fail(
            "must be synthetic:pretrain (S1 reads its planted secrets)",
            f"data.{p}.pretrain.source",
            value=data["pretrain"].source,
        )


def _check_corpora(params: Params, p: str) -> None:
    """Every corpus a stage names is a slot of data.<p>, holding the records the stage reads."""
    s0, gain, slots = (
        getattr(params.s0, p),
        getattr(params.context_gain, p),
        getattr(params.data, p),
    )
    # (key naming the corpus, corpus, key of the record count read from it, that count)
    uses = [(f"context_gain.{p}.corpus", gain.corpus, "n_examples", gain.n_examples)]
    uses += [
        (f"s0.{p}.corpora[{i}]", c, "n_examples", s0.n_examples) for i, c in enumerate(s0.corpora)
    ]
    for key in ("sweep", "context_sizes", "ngram", "bounded", "family"):
        use = getattr(s0, key)
        uses.append((f"s0.{p}.{key}.corpus", use.corpus, f"{key}.examples", use.examples))
    if s0.finetune.enabled:  # s0_finetune reads pubmedqa, a required slot
        uses.append(("", "pubmedqa", "finetune.docs", s0.finetune.docs))
    for key, corpus, count_key, count in uses:
        if corpus not in slots:
            raise _fail(f"must name a slot of data.{p} ({', '.join(slots)})", key, value=corpus)
        held = slots[corpus].n
        if held is not None and count > held:
            group = "context_gain" if key.startswith("context_gain") else "s0"
            raise _fail(
                f"must be <= data.{p}.{corpus}.n ({held}), the records that slot holds",
                f"{group}.{p}.{count_key}",
                value=count,
            )


def _check_prepared(params: Params, p: str) -> None:
    models, s0, s1 = getattr(params.models, p), getattr(params.s0, p), getattr(params.s1, p)
    named = [(f"models.{p}.lm", models.lm)]
    named += [(f"s0.{p}.lms[{i}]", lm) for i, lm in enumerate(s0.lms)]
    if s1.scores.models != "family":
        named += [(f"s1.{p}.scores.models[{i}]", m) for i, m in enumerate(s1.scores.models)]
    named += [(f"s1.{p}.public.model", s1.public.model)]
    named += [(f"s4.{p}.lm", getattr(params.s4, p).lm)]
    named += [(f"s2.{p}.lm", getattr(params.s2, p).lm)]
    for key, name in named:
        if name in EMBEDDED_LMS and name not in models.prepare:
            raise _fail(f"an embedded model must be listed in models.{p}.prepare", key, value=name)


def _check_family(params: Params, p: str) -> None:
    family, s0 = getattr(params.family, p), getattr(params.s0, p)
    if getattr(params.s1, p).scores.models == "family" and len(family.sizes) < 2:
        raise _fail(
            "must list >= 2 sizes (s1.scores.models: family fits trends over sizes)",
            f"family.{p}.sizes",
        )
    tokens = s0.family.context_tokens
    if tokens is not None and tokens + s0.family.max_new_tokens > family.window:
        raise _fail(
            f"plus max_new_tokens ({s0.family.max_new_tokens}) must be <= "
            f"family.{p}.window ({family.window})",
            f"s0.{p}.family.context_tokens",
            value=tokens,
        )


def _check_s3_base(params: Params, p: str) -> None:
    """A base in data/family/ is a size train_family builds under this profile."""
    base = getattr(params.s3, p).base
    folder = posixpath.normpath(base)
    if folder.startswith(FAMILY_DIR):
        sizes = getattr(params.family, p).sizes
        if folder.removeprefix(FAMILY_DIR) not in sizes:
            raise _fail(
                f"must be {FAMILY_DIR}<size> with a size of family.{p}.sizes ({', '.join(sizes)})",
                f"s3.{p}.base",
                value=base,
            )


# ---------------------------------------------------------------- entry points


def validate(params: Any, source: str = "params.yaml") -> Params:
    """The validated Params model of a loaded params mapping; PrivleakError (one line naming
    `source`, the key path, the value and what is allowed) at the first problem."""
    try:
        return Params.model_validate(params)
    except ValidationError as error:
        line = _line(*_parts(error.errors()[0]))
        raise PrivleakError(f"{source}: {line}") from None


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that rejects a mapping key given twice (merge keys `<<` may still override)."""

    source = "params.yaml"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                seen = first.get(key)
            except TypeError:  # an unhashable key; SafeLoader reports it below
                continue
            if seen is not None:
                raise PrivleakError(
                    f"{self.source}: line {line}: key '{key}' is given twice (first at line "
                    f"{seen}); DVC rejects duplicate keys"
                )
            first[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str = "params.yaml") -> Any:
    """Parse YAML text like yaml.safe_load, rejecting duplicate mapping keys; one-line
    PrivleakError naming `source` (and the line) otherwise."""
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise PrivleakError(f"{source}: {where}not valid YAML: {error.problem}") from None
    except yaml.YAMLError as error:
        raise PrivleakError(f"{source}: not valid YAML: {error}".replace("\n", " ")) from None
    finally:
        loader.dispose()
