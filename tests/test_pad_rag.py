"""S2's RAG generation (privleak.pad_rag): a prompt's defenses share one prefill and keep their own
draws, and the secret log-probs equal an independent teacher-forced computation."""

from __future__ import annotations

import pytest
import torch

from privleak.data.chunking import chunk_records, chunk_spans
from privleak.dp_rag import forced_logprobs
from privleak.errors import PrivleakError
from privleak.pad import PADSettings, StaticNoise
from privleak.pad_rag import (
    NO_OUTPUT,
    condensed_context,
    defended_generate,
    distance_filtered,
    encode_prompt,
    noise_defenses,
    rag_prompt,
    secret_logprobs,
    suffix_distributions,
    summary_prompt,
)
from privleak.pipeline import params as project_params
from tests.conftest import tiny_llama, word_tokenizer
from tests.test_dp_rag import CHATML

DEFENSES = {"none": None, "static": StaticNoise(0.5), "pad": PADSettings(epsilon=0.1)}
PROMPTS = ["the cat sat on the mat", "a dog ran to the park", "alice sat"]


@pytest.fixture(scope="module")
def lm():
    return tiny_llama(vocab_size=16, window=128), word_tokenizer(add_bos=True)


def test_the_prompt_is_the_papers():
    assert rag_prompt("q?", ["a", "b"]) == "Context:\na\n\nb\n\nQuestion:q?\nAnswer:\n"


def test_chat_prompts_are_the_papers_prompt_as_the_user_turn():
    tokenizer = word_tokenizer(add_bos=True)
    assert encode_prompt(tokenizer, "the cat")[0] == tokenizer.bos_token_id  # plain: BOS added
    with pytest.raises(PrivleakError, match="'chat' needs a tokenizer with a chat template"):
        encode_prompt(tokenizer, "the cat", "chat")
    with pytest.raises(PrivleakError, match="template 'xml' is unknown"):
        encode_prompt(tokenizer, "the cat", "xml")
    tokenizer.chat_template = CHATML
    body = rag_prompt("q?", ["the cat"])
    text = "<|im_start|>user\n" + body + "<|im_end|>\n<|im_start|>assistant\n"
    assert (
        encode_prompt(tokenizer, body, "chat")
        == tokenizer(text, add_special_tokens=False)["input_ids"]
    )  # the template writes its own specials: no BOS on top


def test_defenses_share_one_prefill_and_keep_their_own_draws(lm):
    model, tokenizer = lm
    kwargs = dict(temperature=0.7, max_new_tokens=6, seed=3)
    whole = defended_generate(model, tokenizer, PROMPTS, ["a", "b", "c"], DEFENSES, **kwargs)
    assert [(r["key"], r["defense"]) for r in whole[:3]] == [("a", n) for n in DEFENSES]
    chunked = defended_generate(model, tokenizer, PROMPTS, ["a", "b", "c"], DEFENSES,
                                max_batch_streams=4, **kwargs)  # fmt: skip
    assert [r["tokens"] for r in whole] == [r["tokens"] for r in chunked]
    alone = defended_generate(model, tokenizer, PROMPTS[1:2], ["b"], {"pad": DEFENSES["pad"]},
                              **kwargs)  # fmt: skip
    assert alone[0]["tokens"] == whole[5]["tokens"]
    assert alone[0]["sigma"] == pytest.approx(whole[5]["sigma"])
    assert all(s == 0 for r in whole[0::3] for s in r["sigma"])


def test_clean_logprobs_are_the_undefended_models(lm):
    model, tokenizer = lm
    row = defended_generate(model, tokenizer, PROMPTS[:1], ["a"], {"pad": DEFENSES["pad"]},
                            temperature=0.7, max_new_tokens=5, seed=1)[0]  # fmt: skip
    prompt = encode_prompt(tokenizer, PROMPTS[0])
    expected = forced_logprobs(model, [prompt], row["tokens"], 0)[0]
    taken = expected.gather(-1, torch.tensor(row["tokens"])[:, None])[:, 0]
    assert row["clean_logprobs"] == pytest.approx(taken.tolist(), abs=1e-5)


def test_suffix_distributions_equal_full_forwards(lm):
    model, _ = lm
    prompt, suffixes = [1, 5, 6, 7], [[8, 9, 10], [11], [12, 13]]
    got, counter = suffix_distributions(model, prompt, suffixes, pad_id=0)
    for j, suffix in enumerate(suffixes):
        expected = forced_logprobs(model, [prompt], suffix, 0)[0]
        assert torch.allclose(got[j, : len(suffix)], expected, atol=1e-5)
    assert counter.tokens == len(prompt) + 3 * 3


def test_secret_logprobs_of_the_plain_decoder_by_teacher_forcing(lm):
    model, tokenizer = lm
    got = secret_logprobs(model, tokenizer, "the cat sat", ["on the"], ["mat"], DEFENSES,
                          temperature=0.5, draws=64, seed=0, key="p")  # fmt: skip
    prompt = encode_prompt(tokenizer, "the cat sat")
    target = tokenizer("on the mat", add_special_tokens=False)["input_ids"]
    logits = forced_logprobs(model, [prompt], target, 0)[0]
    expected = torch.log_softmax(logits[-1] / 0.5, -1)[target[-1]].item()
    assert got["none"][0] == pytest.approx(expected, abs=1e-5)
    # Static noise: an independent Monte-Carlo estimate of E_z[softmax((s + 0.5 z) / 0.5)].
    z = torch.randn(100_000, logits.shape[-1], generator=torch.Generator().manual_seed(0))
    noisy = torch.softmax((logits[-1] + 0.5 * z) / 0.5, -1)[:, target[-1]].mean().log().item()
    assert got["static"][0] == pytest.approx(noisy, abs=0.15)
    assert abs(got["static"][0] - expected) > 0.3  # the noise matters at this size


def test_chunks_cut_at_words_and_carry_their_secrets():
    text = "one two three four five six seven"
    assert chunk_spans(text, 3) == [(0, 13), (14, 27), (28, 33)]
    records = [{"id": "d1", "text": text, "topic": "t"}, {"id": "d2", "text": "alpha beta"}]
    secrets = [
        {"record_id": "d1", "field": "text", "start": 4, "end": 7, "kind": "x", "text": "two"},
        {"record_id": "d1", "field": "text", "start": 8, "end": 18, "kind": "x",
         "text": "three four"},  # cut by the first boundary: dropped
        {"record_id": "d1", "field": "text", "start": 28, "end": 33, "kind": "y", "text": "seven"},
        {"record_id": "d2", "field": "text", "start": 6, "end": 10, "kind": "z", "text": "beta"},
    ]  # fmt: skip
    chunks, moved = chunk_records(records, secrets, 3)
    assert [c["id"] for c in chunks] == ["d1#0", "d1#1", "d1#2", "d2"]
    assert chunks[0]["topic"] == "t" and chunks[0]["record_id"] == "d1"
    texts = {c["id"]: c["text"] for c in chunks}
    assert [(s["chunk_id"], s["text"]) for s in moved] == [
        ("d1#0", "two"), ("d1#2", "seven"), ("d2", "beta")
    ]  # fmt: skip
    assert all(texts[s["chunk_id"]][s["start"] : s["end"]] == s["text"] for s in moved)


def test_noise_defenses_table_only_off_the_sweep_corpus():
    pad = PADSettings(epsilon=0.2, amplification=3.0)
    table = noise_defenses(pad, 0.5, sweep=False, amplifications=[1.0], epsilons=[1.0])
    assert list(table) == ["extraction", "static", "pad"]
    assert table["static"][:2] == ("table", 0.5) and table["static"][2] == StaticNoise(0.5)
    assert table["pad"] == ("table", 3.0, pad) and table["extraction"][2] is None


def test_noise_defenses_sweep_skips_the_table_values():
    pad = PADSettings(epsilon=0.2, amplification=3.0)
    swept = noise_defenses(pad, 0.1, sweep=True, amplifications=[1.0, 3.0], epsilons=[0.2, 1.0],
                           static_sigmas=[0.1, 0.5])  # fmt: skip
    assert list(swept)[3:] == [
        "no_calib", "no_sens", "amplification=1", "epsilon=1", "static=0.5"
    ]  # fmt: skip
    assert swept["static=0.5"] == ("static", 0.5, StaticNoise(0.5))
    assert swept["no_calib"][2] == PADSettings(epsilon=0.2, amplification=3.0, calibration=False)
    assert swept["no_sens"][2].sensitivity is False and swept["no_sens"][0] == "ablation"
    assert swept["amplification=1"][:2] == ("amplification", 1.0)
    assert swept["epsilon=1"][2] == PADSettings(epsilon=1.0, amplification=3.0)


def test_summ_extracts_as_zeng_et_al_and_drops_a_document_answered_no_output():
    prompt = summary_prompt("Who called?", "Alice called on Monday.")
    # LangChain's LLMChainExtractor prompt, which Zeng et al.'s code writes out
    assert prompt.startswith(
        "Given the following question and context, extract any part of the context *AS IS* "
        "that is relevant to answer the question. If none of the context is relevant return "
        "NO_OUTPUT.\n\nRemember, *DO NOT* edit the extracted parts of the context.\n\n"
        "> Question: Who called?\n> Context:\n>>>\nAlice called on Monday.\n>>>\n"
    )
    assert prompt.endswith("Extracted relevant parts:")
    assert "in your own words" in summary_prompt("q", "d", "paraphrase")
    with pytest.raises(PrivleakError, match="summary style 'abstract' is unknown"):
        summary_prompt("q", "d", "abstract")
    assert condensed_context(f"  {NO_OUTPUT} \n") is None and condensed_context(" ") is None
    assert condensed_context(" Alice called. ") == "Alice called."


def test_dist_drops_a_context_beyond_the_threshold_and_never_substitutes_one():
    distances = {"top1": 1.3, "top2": 0.4, "top3": 0.9, "top4": 0.1}  # top4: ranked below top 3
    assert distance_filtered(["top1", "top2", "top3"], distances, 1.0) == ["top2", "top3"]
    assert distance_filtered(["top1", "top2", "top3"], distances, 0.2) == []


def test_statics_table_sigma_is_pads_official_default_in_every_profile():
    tree = project_params.load()
    for profile in ("smoke", "embedded", "paper"):
        # PAD-Code's --static_noise_scale default (the processor's source is unpublished)
        assert tree["s2"][profile]["static_sigma"] == 0.1
