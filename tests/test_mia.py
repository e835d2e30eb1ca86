"""Membership inference: each attack on hand-computed log-prob tables, the ROC metrics on known
cases, the crossed bootstrap against per-run sklearn, and the one scoring pass."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest
import torch

from privleak import models
from privleak.errors import PrivleakError
from privleak.mia import attacks, metrics, scoring
from privleak.mia.table import member_groups, metric_table, score_table
from privleak.mia.texts import from_sequences, token_ids
from tests.conftest import tiny_llama, word_tokenizer


def test_loss_is_the_mean_token_log_prob():
    assert attacks.loss([-1.0, -2.0, -3.0]) == -2.0


def test_zlib_divides_loss_by_the_compressed_length():
    assert attacks.zlib_entropy("a") == len(zlib.compress(b"a")) == 9
    assert attacks.zlib_ratio([-1.0, -3.0], "a") == pytest.approx(-2.0 / 9)


def test_min_k_averages_the_lowest_share_taking_int_k_t_and_at_least_one():
    logprobs = [-1.0, -5.0, -2.0, -4.0, -3.0]
    assert attacks.min_k(logprobs, 0.4) == -4.5  # int(0.4 * 5) = 2 lowest: -5, -4
    assert attacks.min_k(logprobs, 0.1) == -5.0  # int(0.5) = 0: one token still
    assert attacks.min_k(logprobs, 1.0) == -3.0


def test_min_k_plus_plus_standardises_each_token_before_taking_the_lowest():
    # z = (-1 - -1.5) / 0.5 = 1 and (-2 - -1) / 2 = -0.5; k = 0.5 keeps the lowest one
    assert attacks.min_k_plus_plus([-1.0, -2.0], [-1.5, -1.0], [0.5, 2.0], 0.5) == -0.5
    with pytest.raises(PrivleakError, match="sigma > 0"):
        attacks.min_k_plus_plus([-1.0], [-1.0], [0.0], 0.5)


def test_reference_is_minus_the_ratio_of_log_perplexities():
    assert attacks.reference_ratio([-1.0, -1.0], [-2.0, -2.0, -2.0]) == -0.5


def test_offline_lira_standardises_against_the_references():
    references = np.array([[0.0, 0.0], [2.0, 4.0]])  # means 1, 2; stds sqrt(2), 2 sqrt(2)
    per_text = attacks.lira_offline([3.0, 2.0], references, "per_text")
    assert per_text == pytest.approx([2 / math.sqrt(2), 0.0])
    pooled = attacks.lira_offline([3.0, 2.0], references, "global")  # sqrt((2 + 8) / 2)
    assert pooled == pytest.approx([2 / math.sqrt(5), 0.0])
    with pytest.raises(PrivleakError, match="at least 2 reference"):
        attacks.lira_offline([1.0], np.array([[0.0]]))


def test_auc_and_tpr_at_fpr_on_known_cases():
    # pairs: 3 > 2, 3 > 0, 1 < 2, 1 > 0
    assert metrics.roc_auc([3, 1, 2, 0], [1, 1, 0, 0]) == 0.75
    assert metrics.roc_auc([1, 1], [1, 0]) == 0.5  # a tie counts one half
    scores = [0.9, 0.8, 0.3, 0.85, 0.2, 0.1, 0.05]
    truth = [1, 1, 1, 0, 0, 0, 0]
    assert metrics.tpr_at_fpr(scores, truth, 0.0) == pytest.approx(1 / 3)  # above 0.85 only
    assert metrics.tpr_at_fpr(scores, truth, 0.25) == 1.0  # one false positive allowed


def _per_run(members, non_members, fpr=None):
    values = []
    for inside, outside in zip(members, non_members, strict=True):
        scores = np.r_[inside, outside]
        truth = np.r_[np.ones(len(inside)), np.zeros(len(outside))]
        values.append(metrics.roc_auc(scores, truth) if fpr is None
                      else metrics.tpr_at_fpr(scores, truth, fpr))  # fmt: skip
    return float(np.mean(values))


def test_crossed_bootstrap_effect_is_the_run_mean_of_sklearns_metrics_ties_included():
    rng = np.random.default_rng(1)
    members = rng.normal(0.6, 1, (3, 25)).round(1)  # rounding makes ties
    non_members = rng.normal(0, 1, (3, 150)).round(1)
    found = metrics.crossed_bootstrap({"all": members, "few": members[:, :5]}, non_members,
                                      fprs=[0.01, 0.1], n_boot=200, seed=0)  # fmt: skip
    assert found[("all", "auc")].effect == pytest.approx(_per_run(members, non_members))
    assert found[("few", "auc")].effect == pytest.approx(_per_run(members[:, :5], non_members))
    for fpr in (0.01, 0.1):
        assert found[("all", f"tpr@{fpr:g}")].effect == pytest.approx(
            _per_run(members, non_members, fpr)
        )
    low, high = found[("all", "auc")].interval()
    assert low < found[("all", "auc")].effect < high
    again = metrics.crossed_bootstrap({"all": members, "few": members[:, :5]}, non_members,
                                      fprs=[0.01, 0.1], n_boot=200, seed=0)  # fmt: skip
    assert np.array_equal(again[("all", "auc")].draws, found[("all", "auc")].draws)


def test_a_resample_weighs_each_text_by_its_count():
    # One run; a draw that takes member 0 twice and non-member 1 twice equals sklearn on the
    # duplicated lists.
    members, non_members = np.array([[2.0, 0.5]]), np.array([[1.0, 0.0, 3.0]])
    prepared = metrics._Prepared({"all": members}, non_members)
    cm, cn, cr = {"all": np.array([[2.0, 0.0]])}, np.array([[0.0, 2.0, 1.0]]), np.ones((1, 1))
    values = prepared.values([0.34], cm, cn, cr)
    scores = [2.0, 2.0, 0.0, 0.0, 3.0]
    truth = [1, 1, 0, 0, 0]
    assert values[("all", "auc")][0] == pytest.approx(metrics.roc_auc(scores, truth))
    assert values[("all", "tpr@0.34")][0] == pytest.approx(metrics.tpr_at_fpr(scores, truth, 0.34))


def test_moments_of_a_known_distribution():
    logprobs = torch.log(torch.tensor([[0.5, 0.25, 0.25, 0.0]]))
    mu, sigma = scoring._moments(logprobs)
    assert float(mu) == pytest.approx(0.5 * math.log(0.5) + 0.5 * math.log(0.25))
    assert float(sigma) == pytest.approx(math.log(2) / 2)


def test_one_pass_gives_each_tokens_log_prob_and_does_not_depend_on_batching():
    model = tiny_llama()
    texts = [[1, 5, 9, 3], [1, 7], [1, 4, 4, 4, 4, 2]]
    one = scoring.token_stats(model, texts, batch_size=1)
    together = scoring.token_stats(model, texts, batch_size=3)
    with torch.inference_mode():
        logits = model(torch.tensor([texts[0]])).logits.float()
    expected = torch.log_softmax(logits[0, :-1], -1)[torch.arange(3), torch.tensor(texts[0][1:])]
    assert np.allclose(one[0].logprob, expected.numpy(), atol=1e-5)
    for a, b in zip(one, together, strict=True):
        assert np.allclose(a.logprob, b.logprob, atol=1e-5)
        assert np.allclose(a.sigma, b.sigma, atol=1e-5)
    assert [len(s.logprob) for s in one] == [3, 1, 5]


def test_scoring_a_saved_model_is_its_one_pass_over_the_texts_token_ids(tmp_path):
    tokenizer = word_tokenizer(add_bos=True)
    tiny_llama().save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    texts = ["the cat sat on the mat", "a dog ran"]
    stats, counter = scoring.score_model(
        str(tmp_path), texts, device="cpu", dtype="float32", batch_size=2
    )
    model, saved = models.load(str(tmp_path), device="cpu", dtype="float32")
    ids = token_ids(saved, texts)
    want = scoring.token_stats(model, ids, batch_size=2)
    for got, expected in zip(stats, want, strict=True):
        np.testing.assert_allclose(got.logprob, expected.logprob, rtol=1e-6)
        np.testing.assert_allclose(got.mu, expected.mu, rtol=1e-6)
    assert (counter.calls, counter.tokens) == (1, 2 * max(len(i) for i in ids))


def _texts() -> pd.DataFrame:
    members = [{"seq_id": f"m{i}", "kind": "long_sequence", "duplicates": d, "prefix": "a ",
                "suffix": f"member {i}"} for i, d in enumerate([1, 1, 4, 4])]  # fmt: skip
    outside = [{"seq_id": f"n{i}", "kind": "long_sequence", "prefix": "a ",
                "suffix": f"other {i}"} for i in range(4)]  # fmt: skip
    return from_sequences(members, outside)


def test_the_score_table_orients_every_attack_and_groups_members_by_duplicates():
    texts = _texts()
    rows = []
    for model, shift in (("small", 0.5), ("large", 1.5)):
        for run in (0, 1):
            for text in texts.itertuples():
                lp = np.array([-2.0, -3.0]) + (shift if text.is_member else 0) + 0.01 * run
                rows.append({"model": model, "run": run, "role": "target",
                             "text_id": text.text_id, "logprob": lp, "mu": lp - 1,
                             "sigma": np.ones(2)})  # fmt: skip
    table = score_table(pd.DataFrame(rows), texts, k=0.5, reference="small")
    assert set(table["attack"]) == {"loss", "zlib", "min_k", "min_k_plus_plus", "reference"}
    groups, non_members = member_groups(texts)
    assert groups == {"all": ["m0", "m1", "m2", "m3"], "1": ["m0", "m1"], "4": ["m2", "m3"]}
    assert non_members == ["n0", "n1", "n2", "n3"]
    found = metric_table(table, texts, fprs=[0.25], n_boot=100, seed=0)
    loss = found[(found["attack"] == "loss") & (found["duplicates"] == "all")]
    assert (loss["effect"][loss["metric"] == "auc"] == 1.0).all()  # members score higher


def test_x0_is_the_token_before_a_training_document():
    class Tokenizer:
        bos_token_id, eos_token_id, adds_bos = 1, 2, True

        def __call__(self, text, add_special_tokens=True):
            bos = [self.bos_token_id] if add_special_tokens and self.adds_bos else []
            return {"input_ids": bos + [ord(c) for c in text]}

    tokenizer = Tokenizer()
    assert token_ids(tokenizer, ["ab"]) == [[1, 97, 98]]  # BOS, added on encode
    tokenizer.adds_bos = False  # the family, GPT-NeoX: documents follow an EOS
    assert token_ids(tokenizer, ["ab"]) == [[2, 97, 98]]
    tokenizer.bos_token_id = tokenizer.eos_token_id = None
    assert token_ids(tokenizer, ["ab"]) == [[97, 98]]  # the first token goes unscored
    with pytest.raises(PrivleakError, match="no token to score"):
        token_ids(tokenizer, ["a"])


def test_held_out_sequences_match_the_planted_ones_and_are_planted_nowhere():
    from privleak.data.pretrain import held_out_sequences, pretrain

    options = {"ne_prefix_words": 12, "long_prefix_words": 12, "long_suffix_words": 9}
    records, secrets = pretrain(6, 0, duplication_counts=[1, 2], sequences_per_count=3,
                                doc_words=20, **options)  # fmt: skip
    exclude = [s["text"] for s in secrets]
    held = held_out_sequences(0, 8, exclude=exclude, **options)
    assert held == held_out_sequences(0, 8, exclude=exclude, **options)
    assert [h["kind"] for h in held] == ["named_entity", "long_sequence"] * 4
    corpus = " ".join(r["text"] for r in records)
    for row in held:
        assert row["prefix"] + row["suffix"] not in corpus
        words = len(row["prefix"].split())
        assert words == 12
        if row["kind"] == "long_sequence":
            assert len(row["suffix"].split()) == 9
        else:
            assert row["suffix"].endswith(".")


def _params() -> dict:
    from privleak.pipeline import paths, schema

    return schema.load_yaml(paths.PARAMS_FILE.read_text()) | {"profile": "smoke"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(members="file:data/external/mia/m.jsonl"),
         r"mia\.smoke\.members = 'file:data/external/mia/m\.jsonl': must be planted exactly when"),
        (lambda m: m.update(reference="h99"),
         r"mia\.smoke\.reference = 'h99': must be a size of family\.smoke\.sizes"),
        (lambda m: m["lira"].update(references=1),
         r"mia\.smoke\.lira\.references = 1: must be an integer >= 2"),
        (lambda m: m["lira"].update(sizes=["h99"]),
         r"mia\.smoke\.lira\.sizes\[0\] = 'h99': must be a size of family\.smoke\.sizes"),
        (lambda m: m["non_members"].update(source="file:elsewhere/n.jsonl"),
         r"mia\.smoke\.non_members\.source = 'file:elsewhere/n\.jsonl'"),
        (lambda m: m.update(k=0),
         r"mia\.smoke\.k = 0: must be a number in \(0, 1\]"),
        (lambda m: m.update(workers=0),
         r"mia\.smoke\.workers = 0: must be an integer >= 1"),
    ],
)  # fmt: skip
def test_bad_mia_params_are_one_line_errors(edit, message):
    from privleak.pipeline import schema

    bad = _params()
    edit(bad["mia"]["smoke"])
    with pytest.raises(PrivleakError, match=r"^params.yaml: " + message) as error:
        schema.validate(bad)
    assert "\n" not in str(error.value)


def test_bca_intervals_are_refused_while_mia_reads_percentiles():
    from privleak.pipeline import schema

    bad = _params()
    bad["claims"]["smoke"]["method"] = "BCa"
    with pytest.raises(PrivleakError, match=r"claims\.smoke\.method = 'BCa': must be one of"):
        schema.validate(bad)


def test_a_member_file_without_text_is_one_line_naming_file_row_and_field(tmp_path):
    from privleak.mia.texts import from_files

    members, others = tmp_path / "m.jsonl", tmp_path / "n.jsonl"
    members.write_text('{"id": "a", "text": "x y"}\n{"id": "b"}\n')
    others.write_text('{"id": "c", "text": "z"}\n')
    with pytest.raises(PrivleakError, match=r"m\.jsonl': record 1 \(id 'b'\) has no field 'text'"):
        from_files(f"file:{members}", f"file:{others}", None)
    members.write_text('{"id": "c", "text": "x y"}\n')
    with pytest.raises(PrivleakError, match="id 'c' is used twice"):
        from_files(f"file:{members}", f"file:{others}", None)
