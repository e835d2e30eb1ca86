"""The audit on tiny models: canaries and neighbours, batched forced decoding against the
per-candidate loop, each mechanism's forced law against its decoder, and the controls (broken
variants flagged, the correct DP-RAG never)."""

import dataclasses
import json

import pandas as pd
import pytest
import torch

from privleak.audit import pairs
from privleak.audit.canaries import (
    Canary,
    file_canaries,
    load_canaries,
    neighbours,
    synthetic_canaries,
)
from privleak.audit.forced import forced_all, forced_loop, prefill
from privleak.audit.run import Mechanism, audit_rows, secret_tokens
from privleak.audit.table import TOLERANCE, Claim, claims_of, summarise
from privleak.batching import ForwardCounter
from privleak.cid import cid_logprobs
from privleak.dp_rag import Ask, DPICLSettings, dp_icl_forced_logprobs, dp_rag_generate
from privleak.errors import PrivleakError
from privleak.pad import PADSettings
from tests.conftest import copying_llama, tiny_llama, word_tokenizer

CANARY = Canary(
    id="c1",
    document="alice ran to the park with bob",
    secret="bob",
    question="who ran to the park",
    answer_prefix="it is",
    others=("the cat sat on the mat", "a dog sat on a mat", "the dog ran to a cat"),
)


@pytest.fixture(scope="module")
def lm(one_torch_thread):
    return tiny_llama(vocab_size=16, window=256), word_tokenizer(add_bos=True)


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# ---- canaries ------------------------------------------------------------------------------


def test_neighbours_put_the_canary_last():
    out, inside = neighbours(CANARY, "add")
    assert out == list(CANARY.others) and inside == [*CANARY.others, CANARY.document]
    out, inside = neighbours(CANARY, "replace")
    assert out == list(CANARY.others) and inside == [*CANARY.others[:-1], CANARY.document]
    with pytest.raises(PrivleakError, match="relation 'swap' is unknown"):
        neighbours(CANARY, "swap")


def test_synthetic_canaries_hold_their_secret_and_others_of_their_disease():
    canaries = synthetic_canaries(
        3, 4, n=60, seed=0, options={"diseases": 5, "concentration": 0.5, "rare_details": 3}
    )
    assert len(canaries) == 3 and len({c.id for c in canaries}) == 3
    for canary in canaries:
        assert f"with serial number {canary.secret}." in canary.document
        assert canary.question.startswith("What is the serial number of")
        assert len(canary.others) == 4 and canary.document not in canary.others
        assert all(canary.secret not in other for other in canary.others)  # serials never repeat
    again = synthetic_canaries(
        3, 4, n=60, seed=0, options={"diseases": 5, "concentration": 0.5, "rare_details": 3}
    )
    assert again == canaries


def test_synthetic_canaries_refuse_more_than_the_planted_details():
    with pytest.raises(PrivleakError, match=r"count \(3\) exceeds the 2 planted rare details"):
        synthetic_canaries(
            3, 2, n=20, seed=0, options={"diseases": 3, "concentration": 0.5, "rare_details": 2}
        )


def test_file_canaries_load_and_fail_with_one_line(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(CANARY.model_dump(mode="json")) + "\n")
    assert file_canaries(good) == [CANARY]
    assert load_canaries(f"file:{good}", 5, 2) == [CANARY]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CANARY.model_dump(mode="json") | {"secret": "zebra"}) + "\n")
    with pytest.raises(PrivleakError, match=r"bad.jsonl:1: not a canary .*zebra"):
        file_canaries(bad)
    empty_others = tmp_path / "others.jsonl"
    empty_others.write_text(json.dumps(CANARY.model_dump(mode="json") | {"others": []}) + "\n")
    with pytest.raises(PrivleakError, match="others.jsonl:1: not a canary .others: .*at least one"):
        file_canaries(empty_others)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(PrivleakError, match="broken.jsonl:1: not JSON"):
        file_canaries(broken)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(good.read_text() * 2)
    with pytest.raises(PrivleakError, match="two canaries share an id"):
        file_canaries(twice)
    with pytest.raises(PrivleakError, match="does not exist"):
        file_canaries(tmp_path / "none.jsonl")
    with pytest.raises(PrivleakError, match="canaries.source 'hf:x' is unknown"):
        load_canaries("hf:x", 1, 1)


# ---- forced decoding -----------------------------------------------------------------------


def test_batched_forced_decoding_equals_the_per_candidate_loop(tiny_lm):
    tokenizer = word_tokenizer(add_bos=True)
    prompts = [tokenizer(t)["input_ids"] for t in ("the cat sat on", "the cat ran to a")]
    candidates = [_ids(tokenizer, t) for t in ("the mat", "a dog ran to the park", "bob")]
    counter = ForwardCounter()
    batched = forced_all(tiny_lm, prefill(tiny_lm, prompts, 0, counter), candidates, 0, counter)
    for j, (candidate, looped) in enumerate(
        zip(candidates, forced_loop(tiny_lm, prompts, candidates, 0), strict=True)
    ):
        assert torch.allclose(batched[:, j, : len(candidate)], looped, atol=1e-5)


# ---- each mechanism's forced law is the law it samples ---------------------------------------


def test_dp_icl_forced_law_is_the_decoders_and_the_worst_token_stays_within_epsilon(lm):
    model, tokenizer = lm
    setting = DPICLSettings(1.0, 1.0, 0.5, 0.01)
    out_docs, in_docs = neighbours(CANARY, "add")
    ask = Ask("k", CANARY.question, tuple(in_docs), setting, CANARY.answer_prefix)
    drawn = dp_rag_generate(model, tokenizer, [ask], template="plain", max_new_tokens=4, seed=3)[0]
    scores = pairs.dp_icl_scores(
        model, tokenizer, CANARY, "add", "plain", {"ok": setting}, [drawn["tokens"]]
    )["ok"]
    assert scores.logp_in[0] == pytest.approx(drawn["sample_logprobs"], abs=1e-5)
    # D's law equals the existing exact scorer run on D's streams alone.
    from privleak.dp_rag import stream_prompts

    reference = dp_icl_forced_logprobs(
        model,
        stream_prompts(tokenizer, CANARY.question, out_docs, "plain", CANARY.answer_prefix),
        drawn["tokens"],
        [setting],
        pad_id=0,
    )[0]
    assert scores.logp_out[0] == pytest.approx(reference.tolist(), abs=1e-5)
    assert max(scores.worst[0]) <= setting.epsilon * (1 + TOLERANCE)


def test_cid_forced_law_is_the_mix_of_full_forwards_and_bounded_stays_within_epsilon(lm):
    model, tokenizer = lm
    candidate = _ids(tokenizer, "bob ran to the park")
    variants = {"b": pairs.CIDVariant(1.0, 0.5, 0.8), "free": pairs.CIDVariant(1.0, None, 0.8)}
    scores = pairs.cid_scores(model, tokenizer, CANARY, "add", "plain", variants, [candidate])
    out_docs, in_docs = neighbours(CANARY, "add")
    inside = pairs.cid_prompt(tokenizer, CANARY, in_docs, "plain")
    laws = forced_loop(model, [inside.ids, inside.with_context([]).ids], [candidate], 0)[0]
    reference = cid_logprobs(laws[0], laws[1], 1.0, 0.8)
    chosen = reference.gather(-1, torch.tensor(candidate)[:, None])[:, 0]
    assert scores["free"].logp_in[0] == pytest.approx(chosen.tolist(), abs=1e-5)
    assert max(scores["b"].worst[0]) <= 0.5 * (1 + TOLERANCE)


def test_pad_scores_report_the_claimed_noise_not_the_sampled_one(lm):
    model, tokenizer = lm
    table = PADSettings(epsilon=0.2)
    broken = dataclasses.replace(table, amplification=table.amplification / 10)
    candidate = _ids(tokenizer, "bob ran")
    scores = pairs.pad_scores(
        model,
        tokenizer,
        CANARY,
        "replace",
        "plain",
        {"ok": (table, table), "broken": (broken, table)},
        [candidate],
        temperature=0.2,
    )
    assert scores["ok"].steps["sigma"] == scores["broken"].steps["sigma"]
    assert scores["ok"].logp_in != scores["broken"].logp_in  # less noise, another law
    assert all(len(v[0]) == len(candidate) for v in scores["ok"].steps.values())


# ---- the controls ----------------------------------------------------------------------------


def _audit(model, tokenizer, mechanism, variants, relation, samples, score, sample):
    return pd.DataFrame(
        audit_rows(
            Mechanism(
                name=mechanism,
                relation=relation,
                variants=list(variants),
                sample=sample,
                score=score,
                undefended=lambda canary: pairs.greedy_response(
                    model,
                    tokenizer,
                    pairs.pad_prompt_ids(tokenizer, canary, list(canary.others), "plain"),
                    4,
                ),
                cross_score=mechanism != "pad",
            ),
            tokenizer,
            [CANARY],
        )
    )


def test_the_controls_broken_variants_are_flagged_and_the_correct_dp_rag_never(lm):
    model, tokenizer = lm
    # DP-RAG: the correct token law and one sampling with C / 4 while claiming epsilon.
    correct = DPICLSettings(0.5, 1.0, 0.5, 0.01)
    dp = {"ok": correct, "broken": dataclasses.replace(correct, epsilon=2.0)}
    rows = _audit(
        model,
        tokenizer,
        "dp_rag",
        dp,
        "add",
        6,
        lambda c, cands, subsets: pairs.dp_icl_scores(
            model, tokenizer, c, "add", "plain", dp, cands, subsets=subsets
        ),
        lambda c: pairs.dp_icl_samples(
            model, tokenizer, c, "add", "plain", dp, 6, max_new_tokens=4, seed=0
        ),
    )
    claimed = pd.DataFrame(
        [
            {
                "variant": v,
                "setting": 4 * 0.5,
                "broken": v == "broken",
                "token_epsilon": 0.5,
                "steps": 4,
                "delta": 1e-3,
            }
            for v in dp
        ]
    )
    table = summarise(rows, claims_of("dp_rag", claimed)).set_index("variant")
    # an (epsilon, delta) claim with samples on both sides: 2 directions x (loss bound,
    # hockey-stick) and the black-box test share the flag's 0.05
    assert table.loc["ok", "tests"] == 5 and table.loc["ok", "alpha_per_test"] == 0.01
    assert not table.loc["ok", "flagged"], table.loc["ok", "flagged_by"]
    assert table.loc["ok", "audited_token"] <= 0.5 * (1 + TOLERANCE)
    assert table.loc["broken", "flagged"] and "token" in table.loc["broken", "flagged_by"]
    # Bounded CID without its lambda search, claiming epsilon 0.1.
    cid = {"eps0.1": pairs.CIDVariant(1.0, 0.1, 0.8), "no_search": pairs.CIDVariant(1.0, None, 0.8)}
    rows = _audit(
        model,
        tokenizer,
        "cid",
        cid,
        "add",
        4,
        lambda c, cands, subsets: pairs.cid_scores(
            model, tokenizer, c, "add", "plain", cid, cands, subsets=subsets
        ),
        lambda c: pairs.cid_samples(
            model, tokenizer, c, "add", "plain", cid, 4, max_new_tokens=4, seed=0
        ),
    )
    claims = {("cid", v): Claim(0.1, v == "no_search", 0.1, 0.4, None, 0.0) for v in cid}
    table = summarise(rows, claims).set_index("variant")
    assert not table.loc["eps0.1", "flagged"]
    assert table.loc["no_search", "flagged"]


COPIED = Canary(  # every word in the tokenizer's vocabulary, so the copying model sees them all
    id="c2",
    document="bob bob ran to bob park bob",
    secret="bob",
    question="alice ran to the park",
    answer_prefix="a",
    others=("the cat sat on the mat", "a dog sat on a mat", "the dog ran to a cat"),
)


def test_the_pad_control_is_flagged_on_a_model_that_copies_its_context(one_torch_thread):
    # PAD at the table's epsilon with sigma / 10, claiming the correct sigma's epsilon, on a
    # model whose logits move with the context (a random tiny model barely reacts to a canary,
    # and a too confident one is screened at every step).
    model, tokenizer = copying_llama(16, strength=2.0), word_tokenizer(add_bos=True)
    table = PADSettings(epsilon=0.2)
    pad = {"ok": (table, table), "broken": (dataclasses.replace(table, amplification=0.3), table)}
    rows = pd.DataFrame(
        audit_rows(
            Mechanism(
                name="pad",
                relation="replace",
                variants=list(pad),
                sample=lambda c: pairs.pad_samples(
                    model, tokenizer, c, "replace", "plain", {v: n for v, (n, _) in pad.items()},
                    8, temperature=0.2, max_new_tokens=6, seed=0,
                ),
                score=lambda c, cands, subsets: pairs.pad_scores(
                    model, tokenizer, c, "replace", "plain", pad, cands, subsets=subsets,
                    temperature=0.2,
                ),
                undefended=lambda c: pairs.greedy_response(
                    model, tokenizer, pairs.pad_prompt_ids(tokenizer, c, list(c.others), "plain"), 6
                ),
                cross_score=False,
            ),
            tokenizer,
            [COPIED],
        )
    )  # fmt: skip
    claims = {("pad", v): Claim(0.2, v == "broken", delta=1e-5) for v in pad}
    result = summarise(rows, claims).set_index("variant")
    assert result.loc["broken", "flagged"], result.loc["broken"].to_dict()
    # Delta_t comes from the logit margin, not from a bound on what one document can move: here
    # the canary moves the logits by more, and the correct PAD exceeds its gamma-relaxed claim too.
    assert "γ-relaxed" in result.loc["ok", "flagged_by"]
    for variant in pad:
        row = result.loc[variant]
        assert row["nominal_rdp"] >= row["nominal_pld"] >= row["nominal_relaxed"] > 0
        assert row["nominal_relaxed_rdp"] >= row["nominal_relaxed"]
        assert row["nominal_relaxed_prv"] == pytest.approx(row["nominal_relaxed"], rel=0.02)


def test_secret_tokens_follow_the_answer_prefix_with_one_space(lm):
    _, tokenizer = lm
    assert secret_tokens(tokenizer, CANARY) == _ids(tokenizer, " bob")
