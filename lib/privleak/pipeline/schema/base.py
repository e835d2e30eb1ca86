"""The schema's rule machinery: the strict base model, leaf rules and field types every group
uses, and the one-line error format
    <source>: <key.path[i]> = <value>: <what is allowed>
"""

import difflib
import math
import posixpath
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError, core_schema

PROFILES = ("smoke", "embedded", "paper")  # params.yaml's profile blocks
DTYPES = ("float32", "float16", "bfloat16")  # privleak.models.DTYPES

_DEVICE = re.compile(r"cpu|cuda|cuda:\d+|mps")
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a slot or size becomes a file/folder name
_TEXT_FLOAT = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+))[eE]([-+]?\d+)")


# ---------------------------------------------------------------- errors


def fail(message: str, key: str = "", **value: Any) -> PydanticCustomError:
    """An error with our message; `key` extends the error's path, `value=` is shown after it."""
    return PydanticCustomError("privleak", "{message}", {"message": message, "key": key, **value})


def join_key(path: str, key: str) -> str:
    return path + key if not path or key.startswith("[") else f"{path}.{key}" if key else path


def _loc(loc: tuple) -> str:
    path = ""
    for part in loc:
        path = join_key(path, f"[{part}]" if isinstance(part, int) else str(part))
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
    "string_type": "must be a string",
    "float_type": "must be a number",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
}


def _parts(error: dict) -> tuple[str, str, dict]:
    """(dotted path, message, {"value": shown value} or {}) of one pydantic error."""
    ctx = error.get("ctx") or {}
    path = _loc(error["loc"])
    if error["type"] == "privleak":
        value = {"value": ctx["value"]} if "value" in ctx else {}
        return join_key(path, ctx["key"]), ctx["message"], value
    if error["type"] == "missing":
        if error["loc"][-1] in PROFILES and len(error["loc"]) == 2:
            return path, "missing; every group needs blocks " + ", ".join(PROFILES), {}
        return path, "missing; this key is required", {}
    message = _BUILTIN.get(error["type"], error["msg"])
    if error["type"] == "too_short" and ctx.get("min_length", 1) > 1:
        message = f"must hold at least {ctx['min_length']} items"
    elif error["type"] == "too_long":
        message = f"must hold at most {ctx['max_length']} items"
    return path, message, {} if error["type"] == "extra_forbidden" else {"value": error["input"]}


def _line(path: str, message: str, value: dict) -> str:
    shown = f" = {_show(value['value'])}" if value else ""
    return f"{path}{shown}: {message}" if path else message


def error_line(error: ValidationError) -> str:
    """The line of a validation error's first problem (without its source)."""
    return _line(*_parts(error.errors()[0]))


def nested(model: type[BaseModel], value: Any, key: str) -> None:
    """Validate `value` with `model`, re-raising its first error under `key`."""
    try:
        model.model_validate(value)
    except ValidationError as error:
        path, message, shown = _parts(error.errors()[0])
        raise fail(message, join_key(key, path), **shown) from None


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
            raise fail(f"must be {self.allowed}{hint}", key, value=value)
        return value


def is_int(value: Any) -> bool:
    return type(value) is int  # YAML true/false are bools, never counts


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def at_least(minimum: int) -> Rule:
    return Rule(lambda v: is_int(v) and v >= minimum, f"an integer >= {minimum}")


def optional(rule: Rule) -> Rule:
    return Rule(lambda v: v is None or rule.check(v), f"null or {rule.allowed}", rule.number)


def one_of(*values: str) -> Rule:
    return Rule(lambda v: isinstance(v, str) and v in values, "one of " + ", ".join(values))


COUNT = at_least(1)
INDEX = at_least(0)
POSITIVE = Rule(lambda v: is_number(v) and v > 0, "a finite number > 0", number=True)
NON_NEGATIVE = Rule(lambda v: is_number(v) and v >= 0, "a finite number >= 0", number=True)
SHARE = Rule(lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1]", number=True)
MASS = Rule(lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1]", number=True)
PROBABILITY = Rule(lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", number=True)
TEXT = Rule(lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")
FLAG = Rule(lambda v: isinstance(v, bool), "true or false")
DEVICE = Rule(
    lambda v: isinstance(v, str) and _DEVICE.fullmatch(v) is not None,
    "cpu, cuda, cuda:<n> or mps",
)
DTYPE = one_of(*DTYPES)


def _no_repeats(values: list) -> list:
    for i, value in enumerate(values):
        if value in values[:i]:
            raise fail("repeats an earlier item", f"[{i}]", value=value)
    return values


def no_repeats_at(values: list, key: str) -> None:
    try:
        _no_repeats(values)
    except PydanticCustomError as error:
        raise fail(
            error.context["message"], key + error.context["key"], value=error.context["value"]
        ) from None


def list_of(item: Any, *, unique: bool = False, empty: bool = False) -> Any:
    """A list of `item` (non-empty unless `empty`; without repeats when `unique`)."""
    checks = [AfterValidator(_no_repeats)] if unique else []
    return Annotated[list[item], Field(min_length=0 if empty else 1), *checks]


def under(path: str, folder: str, suffixes: tuple[str, ...], value: str) -> None:
    normal = posixpath.normpath(path) if path else ""
    if path.startswith("/") or "\\" in path or not normal.startswith(folder):
        raise fail(
            f"a file: path must lie under {folder} (so DVC tracks it as a dependency)", value=value
        )
    if posixpath.splitext(normal)[1].lower() not in suffixes:
        raise fail(f"a file: path must end in {', '.join(suffixes)}", value=value)


class Parsed:
    """`Annotated[T, Parsed(parse)]`: `parse(value)` returns the value or raises its own error."""

    def __init__(self, parse: Callable[[Any], Any]):
        self.parse = parse

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_plain_validator_function(self.parse)


def named_or_file(name: str, folder: str) -> Parsed:
    """`name` itself, or file:<a .jsonl file under folder> (a list the user provides)."""

    def parse(value: Any) -> str:
        if value != name:
            if not (isinstance(value, str) and value.startswith("file:")):
                raise fail(f"must be {name} or file:{folder}<file>.jsonl", value=value)
            under(value.removeprefix("file:"), folder, (".jsonl",), value)
        return value

    return Parsed(parse)


# The models S1 and MIA score: the in-pipeline family, or model ids and folders.
SCORED_MODELS = Rule(
    lambda v: v == "family" or (isinstance(v, list) and bool(v) and all(map(TEXT.check, v))),
    "family or a non-empty list of model ids/folders",
)


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
                    raise fail(
                        f"unknown key; {_suggest(str(key), list(cls.model_fields))}", str(key)
                    )
        return data


def per_profile(block: Any, name: str) -> type[Strict]:
    """A group: one `block` per profile, every block validated whichever profile is selected."""
    fields = {"__annotations__": dict.fromkeys(PROFILES, block), "__module__": __name__}
    return type(name, (Strict,), fields)
