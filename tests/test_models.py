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


def test_context_window_reads_the_config():
    assert models.context_window(tiny_llama(window=48)) == 48


def test_embedder_loads_through_the_same_module():
    embedder, tokenizer = models.load(models.MINILM)
    vectors = embedder.encode(["a patient named Alice", "the weather today"])
    assert vectors.shape == (2, 384)
    assert abs(float((vectors**2).sum(axis=1)[0]) - 1.0) < 1e-4
    assert tokenizer is embedder.tokenizer
