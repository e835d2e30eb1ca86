"""The tiny model family: tokenizer, packing, training, save/load round trip, mismatch errors."""

from __future__ import annotations

import pytest
import torch

from privleak import models
from privleak.errors import PrivleakError
from privleak.training import family

SENTENCES = [
    "The quiet bridge near the valley was restored last spring.",
    "Local farmers said the museum had changed little.",
    "Readers can send questions to Alice Moreau at the harbor office.",
] * 4
SIZE = {"hidden": 16, "layers": 1, "heads": 2, "intermediate": 32}


@pytest.fixture(scope="module")
def tokenizer():
    return family.train_tokenizer(SENTENCES, 300)


def test_tokenizer_roundtrips_text_and_adds_no_special_tokens(tokenizer):
    ids = tokenizer("Readers can send questions")["input_ids"]
    assert tokenizer.decode(ids) == "Readers can send questions"
    assert tokenizer.convert_ids_to_tokens([0, 1, 2]) == ["<pad>", "<s>", "</s>"]
    assert 1 not in ids and 2 not in ids
    assert len(tokenizer) <= 300


def test_pack_joins_documents_with_eos_and_drops_the_tail():
    blocks = family.pack([[5, 6, 7], [8], [9, 10]], 3, eos_id=2)
    assert blocks.tolist() == [[5, 6, 7], [2, 8, 2], [9, 10, 2]]
    assert family.pack([[5, 6, 7, 8]], 2, eos_id=2).tolist() == [[5, 6], [7, 8]]
    with pytest.raises(PrivleakError, match="fewer than one block"):
        family.pack([[5]], 8, eos_id=2)


def test_training_lowers_the_loss_and_is_deterministic(tokenizer):
    blocks = family.pack([tokenizer(s)["input_ids"] for s in SENTENCES], 16, eos_id=2)
    config = family.llama_config(SIZE, len(tokenizer), window=32)
    kwargs = dict(epochs=6, batch_size=4, lr=1e-2, warmup_steps=2, seed=0)
    model, losses = family.train_lm(config, blocks, **kwargs)
    again, losses_again = family.train_lm(config, blocks, **kwargs)
    assert losses == losses_again
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True)
    )


def test_members_trained_in_parallel_processes_equal_the_in_process_ones(tokenizer, tmp_path):
    blocks = family.pack([tokenizer(s)["input_ids"] for s in SENTENCES], 16, eos_id=2)
    config = family.llama_config(SIZE, len(tokenizer), window=32)
    options = dict(epochs=2, batch_size=4, lr=1e-2, warmup_steps=2)

    def jobs(where):
        return [{"config": config, "seed": s, "folder": tmp_path / where / str(s)} for s in (0, 1)]

    serial = family.train_members(jobs("serial"), blocks, tokenizer, workers=1, **options)
    parallel = family.train_members(jobs("parallel"), blocks, tokenizer, workers=2, **options)
    assert [r["losses"] for r in serial] == [r["losses"] for r in parallel]
    assert serial[0]["losses"] != serial[1]["losses"]  # the seed matters
    for seed in (0, 1):
        a = models.load(str(tmp_path / "serial" / str(seed)))[0].state_dict()
        b = models.load(str(tmp_path / "parallel" / str(seed)))[0].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(PrivleakError, match="family.workers must be an integer >= 1, got 0"):
        family.train_members(jobs("none"), blocks, tokenizer, workers=0, **options)


def test_save_load_roundtrip_and_mismatch_errors(tokenizer, tmp_path):
    blocks = family.pack([tokenizer(s)["input_ids"] for s in SENTENCES], 16, eos_id=2)
    config = family.llama_config(SIZE, len(tokenizer), window=32)
    model, _ = family.train_lm(
        config, blocks, epochs=1, batch_size=4, lr=1e-3, warmup_steps=1, seed=0
    )
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("one\n")
    family.save_member(model, tokenizer, tmp_path / "fam" / "s")
    family.write_manifest(
        tmp_path / "fam",
        {
            "sizes": {"s": SIZE | {"parameters": 9}, "a": SIZE | {"parameters": 10}},
            "corpus_sha256": family.sha256_file(corpus),
            "tokenizer_sha256": family.tokenizer_fingerprint(tokenizer),
        },
    )
    loaded, loaded_tokenizer = models.load(str(tmp_path / "fam" / "s"))
    ids = torch.tensor([tokenizer("The quiet bridge")["input_ids"]])
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    # smallest first by parameter count, not by name
    assert family.member_dirs(tmp_path / "fam") == [tmp_path / "fam" / "s", tmp_path / "fam" / "a"]
    assert (
        family.check_family(tmp_path / "fam", corpus, loaded_tokenizer)["sizes"]["s"]["hidden"]
        == 16
    )

    other = family.train_tokenizer(SENTENCES[:2], 300)
    with pytest.raises(PrivleakError, match="tokenizer mismatch") as info:
        family.check_family(tmp_path / "fam", corpus, other)
    assert "\n" not in str(info.value)
    corpus.write_text("two\n")
    with pytest.raises(PrivleakError, match="not the corpus"):
        family.check_family(tmp_path / "fam", corpus)
    with pytest.raises(PrivleakError, match="no manifest.json"):
        family.read_manifest(tmp_path)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: family.train_tokenizer(["a b"], 100), "vocab_size"),
        (lambda: family.llama_config({"hidden": 16}, 300, 32), "lacks"),
        (lambda: family.llama_config({**SIZE, "heads": 3}, 300, 32), "divisible"),
    ],
)
def test_bad_family_params_are_one_line_errors(call, match):
    with pytest.raises(PrivleakError, match=match):
        call()
