"""Model loading by embedded name, local folder and hub id, with one-line errors."""

from __future__ import annotations

import pytest
import torch

from privleak import models
from privleak.errors import PrivleakError
from tests.conftest import tiny_llama, word_tokenizer


def one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message
    return message


def test_local_hf_folder_loads_the_same_model(tmp_path):
    source = tiny_llama()
    source.save_pretrained(tmp_path)
    word_tokenizer(add_bos=True).save_pretrained(tmp_path)
    model, tokenizer = models.load(str(tmp_path))
    ids = torch.tensor([[4, 5, 6, 7]])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, source(input_ids=ids).logits)
    assert tokenizer.pad_token_id is not None
    assert not model.training


def test_unknown_model_name_lists_what_is_allowed():
    with pytest.raises(PrivleakError) as info:
        models.load("no-such-model")
    assert "model 'no-such-model' is unknown" in one_line(info)
    assert models.SMOLLM2 in str(info.value)


def test_missing_models_folder_says_how_to_prepare(tmp_path):
    with pytest.raises(PrivleakError) as info:
        models.load(models.SMOLLM2, models_dir=tmp_path / "models")
    assert "is not prepared" in one_line(info)
    assert "prepare_models" in str(info.value)


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(PrivleakError, match="has no config.json"):
        models.load(str(tmp_path))


def test_unreachable_hub_id_is_one_line_error():
    with pytest.raises(PrivleakError) as info:
        models.load("facebook/opt-125m")
    assert "could not be loaded" in one_line(info)


def test_unknown_dtype_is_rejected(tmp_path):
    with pytest.raises(PrivleakError, match="dtype 'float8' is unknown"):
        models.load(str(tmp_path), dtype="float8")


def test_prepare_rejects_unknown_embedded_names(tmp_path):
    with pytest.raises(PrivleakError, match="unknown embedded model"):
        models.prepare(["gpt-5"], tmp_path)


def test_smollm2_gguf_ships_in_the_wheel():
    assert (models.smollm2_gguf_folder() / models.SMOLLM2_GGUF).stat().st_size > 50_000_000


@pytest.mark.parametrize("offline", [False, True], ids=["online", "HF_HUB_OFFLINE"])
def test_prepared_tokenizer_config_does_not_depend_on_hub_offline_mode(
    monkeypatch, tmp_path, offline
):
    """transformers writes the load's local_files_only into tokenizer_config.json and forces it
    on under HF_HUB_OFFLINE, so data/models differed between a `make` shell and a plain one."""
    import json

    import transformers.tokenization_utils_base as tokenization

    monkeypatch.setattr(tokenization, "is_offline_mode", lambda: offline)
    tokenizer = models.smollm2_gguf_tokenizer(models.smollm2_gguf_folder())
    tokenizer.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config.get("local_files_only") is True


def test_context_window_reads_the_config():
    assert models.context_window(tiny_llama(window=48)) == 48


def test_embedder_loads_through_the_same_module():
    embedder, tokenizer = models.load(models.MINILM)
    vectors = embedder.encode(["a patient named Alice", "the weather today"])
    assert vectors.shape == (2, 384)
    assert abs(float((vectors**2).sum(axis=1)[0]) - 1.0) < 1e-4
    assert tokenizer is embedder.tokenizer


@pytest.fixture
def saved_model(tmp_path):
    folder = tmp_path / "tiny"
    tiny_llama().save_pretrained(folder)
    word_tokenizer(add_bos=True).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("name", ["./no-such-folder", "/no/such/model", "a/b/c"])
def test_missing_local_folder_says_not_found_with_the_path(name):
    with pytest.raises(PrivleakError) as info:
        models.load(name)
    message = one_line(info)
    assert f"model folder '{name}' not found" in message and "does not exist" in message


def test_path_under_an_existing_folder_is_a_folder_not_a_hub_id(tmp_path):
    with pytest.raises(PrivleakError, match="model folder .* not found"):
        models.load(str(tmp_path / "h8"))
    assert models.looks_like_path("tests/nothing-here")  # its parent exists here
    assert not models.looks_like_path("facebook/opt-125m")


def test_offline_hub_id_not_in_the_cache_says_so(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "hub_model_cached", lambda name: False)
    with pytest.raises(PrivleakError) as info:
        models.load("facebook/opt-125m")
    assert "HF_HUB_OFFLINE=1 and it is not in the local Hugging Face cache" in one_line(info)


def test_truncated_safetensors_names_the_file_and_the_fix(saved_model):
    weights = saved_model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(PrivleakError) as info:
        models.load(str(saved_model))
    message = one_line(info)
    assert f"model weights {weights} are truncated or corrupt" in message
    assert "prepare_models" in message


def test_truncated_weights_in_data_models_point_at_prepare_models(saved_model, monkeypatch):
    monkeypatch.setattr(models.paths, "MODELS", saved_model.parent)
    weights = saved_model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:7])
    with pytest.raises(PrivleakError, match=r"; run `dvc repro prepare_models` to rebuild it$"):
        models.load(str(saved_model))


@pytest.mark.parametrize(
    "device, cuda, count, expected",
    [
        ("cuda", False, 0, "'cuda': CUDA is not available on this machine; available: cpu"),
        ("cuda:1", True, 1, "'cuda:1': this machine has 1 CUDA device(s); available: cpu, cuda:0"),
        ("gpu", False, 0, "'gpu': not a device; allowed: cpu, cuda, cuda:N, mps"),
    ],
)
def test_unavailable_device_names_the_param(monkeypatch, device, cuda, count, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setenv("PRIVLEAK_PROFILE", "paper")
    with pytest.raises(PrivleakError) as info:
        models.load(models.SMOLLM2, device=device)
    assert one_line(info) == f"params models.paper.device = {expected}"
    with pytest.raises(PrivleakError, match=r"^params s1\.paper\.scores\.device = "):
        models.load(models.SMOLLM2, device=device, device_key="s1.scores.device")


def test_available_device_passes_the_check(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert models.device_problem("cuda") is None and models.device_problem("cuda:1") is None
    assert models.device_problem("cpu") is None
