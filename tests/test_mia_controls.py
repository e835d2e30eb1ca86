"""Controls of the membership-inference benchmark (privleak.mia.controls) on hand-built texts and
log-prob tables, and the size claims' ordering over every size (privleak.claims.mia)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privleak.claims import mia as mia_claims
from privleak.claims import registry
from privleak.claims.registry import bootstrapper
from privleak.mia import controls
from privleak.mia.table import metric_table
from privleak.mia.texts import from_sequences

BOOT = bootstrapper({"n_boot": 200, "seed": 0, "alpha": 0.05, "min_units": 2,
                     "method": "percentile"})  # fmt: skip


def texts(members: list[str], outside: list[str], kind: str = "named_entity") -> pd.DataFrame:
    inside = [{"seq_id": f"m{i}", "kind": kind, "duplicates": 1, "prefix": "", "suffix": t}
              for i, t in enumerate(members)]  # fmt: skip
    rest = [{"seq_id": f"n{i}", "kind": kind, "prefix": "", "suffix": t}
            for i, t in enumerate(outside)]  # fmt: skip
    return from_sequences(inside, rest)


def stats(frame: pd.DataFrame, tokens: dict[str, int], rows: list[tuple]) -> pd.DataFrame:
    """Stats rows (model, run, role, member log-prob, non-member log-prob): every token of a
    text gets that log-prob; a text has `tokens[text_id]` tokens."""
    out = []
    for model, run, role, inside, outside in rows:
        for text in frame.itertuples():
            lp = np.full(tokens[text.text_id], inside if text.is_member else outside)
            out.append({"model": model, "run": run, "role": role, "text_id": text.text_id,
                        "logprob": lp, "mu": lp - 1, "sigma": np.ones_like(lp)})  # fmt: skip
    return pd.DataFrame(out)


def auc(table: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    found = metric_table(table, frame, fprs=[], n_boot=200, seed=0)
    return found[(found["metric"] == "auc") & (found["duplicates"] == "all")]


def test_a_reference_is_attacked_as_a_target_with_the_reference_free_attacks_only():
    frame = texts(["aa", "bb", "cc"], ["dd", "ee", "ff"])
    tokens = dict.fromkeys(frame["text_id"], 2)
    # the target separates perfectly; each reference gives members and non-members one log-prob
    scored = stats(frame, tokens, [("h8", 0, "target", -1.0, -3.0),
                                   ("h8", 0, "reference", -2.0, -2.0),
                                   ("h8", 1, "reference", -2.0, -2.0)])  # fmt: skip
    table = controls.reference_as_target(scored, frame, k=0.5)
    assert set(table["model"]) == {"h8 reference"}
    assert set(table["run"]) == {0, 1}
    assert set(table["attack"]) == set(controls.REFERENCE_FREE)
    # LOSS ties every member with every non-member: AUC 0.5 exactly
    assert auc(table[table["attack"] == "loss"], frame)["effect"].tolist() == [0.5]
    assert controls.reference_as_target(scored[scored["role"] == "target"], frame, 0.5).empty


def test_the_blind_classifiers_score_each_text_out_of_fold():
    # members share a word no non-member has: the texts alone separate them
    members = [f"alpha {w}" for w in ("one", "two", "three", "four", "five", "six")]
    outside = [f"beta {w}" for w in ("one", "two", "three", "four", "five", "six")]
    frame = texts(members, outside)
    table = controls.blind_scores(frame, seed=0)
    assert table["model"].unique().tolist() == [controls.BLIND]
    assert auc(table, frame).set_index("attack")["effect"].to_dict() == {
        "bag_of_words_logistic": 1.0, "bag_of_words_naive_bayes": 1.0,
    }  # fmt: skip
    # a word only one text has tells nothing about the texts of the other folds: every fold
    # scores its texts alike, 0.5 (scored in-fold, its own word would separate each perfectly)
    unique = texts([f"w{i}" for i in range(6)], [f"v{i}" for i in range(6)])
    scores = controls.blind_scores(unique, seed=0)
    assert (scores["score"] == 0.5).all()
    assert auc(scores, unique)["effect"].tolist() == [0.5, 0.5]


def test_too_few_members_for_two_folds_leave_the_blind_control_out():
    assert controls.blind_scores(texts(["a b"], ["c d", "e f"]), seed=0).empty


def test_chars_per_token_and_loss_per_char_by_hand():
    frame = texts(["abcdef", "ghijkl"], ["mnopqr", "stuvwx"])
    # members in 2 tokens (3 characters each), non-members in 3 (2 characters each)
    tokens = {"m0": 2, "m1": 2, "n0": 3, "n1": 3}
    # a reference model of the same size and index as a target run (as the smoke profile has)
    scored = stats(frame, tokens, [("h8", 0, "target", -1.0, -1.0),
                                   ("h8", 0, "reference", -1.0, -1.0)])  # fmt: skip
    ratio = controls.chars_per_token(scored, frame)
    assert ratio.to_dict() == {"m0": 3.0, "m1": 3.0, "n0": 2.0, "n1": 2.0}
    assert auc(controls.tokenizer_scores(scored, frame), frame)["effect"].tolist() == [1.0]
    per_char = controls.loss_per_char(scored, frame).set_index("text_id")["score"]
    # LOSS ties at -1 a token; summed over the text's tokens and divided by its 6 characters
    assert per_char.to_dict() == {"m0": -2 / 6, "m1": -2 / 6, "n0": -3 / 6, "n1": -3 / 6}
    kinds = controls.by_kind(scored, frame, BOOT)
    assert kinds["named_entity"]["members"] == 3.0
    assert kinds["named_entity"]["non_members"] == 2.0
    assert kinds["named_entity"]["difference"] == pytest.approx(1.0)


def test_the_size_note_states_every_step_of_the_ordering():
    note = mia_claims.ordering([0.6, 0.7, 0.8, 0.75], ["h32", "h64", "h96", "h128"])
    assert note == (
        "AUC by size (point estimates): h32 0.600 < h64 0.700 < h96 0.800 >= h128 0.750 "
        "(not increasing in size)"
    )
    assert mia_claims.ordering([0.6, 0.7], ["a", "b"]).endswith("(increasing in size)")


def size_findings(models: list[str]) -> list:
    frame = texts(["aa", "bb", "cc", "dd"], ["ee", "ff", "gg", "hh"])
    tokens = dict.fromkeys(frame["text_id"], 2)
    rows = [(m, run, "target", -1.0 - i - 0.1 * run, -2.0) for i, m in enumerate(models)
            for run in (0, 1)]  # fmt: skip
    mia = {"k": 0.5, "reference": None, "models": "family", "lira": None}
    settings = {"n_boot": 100, "seed": 0, "alpha": 0.05, "min_units": 2, "method": "percentile"}
    found = mia_claims.findings((frame, stats(frame, tokens, rows)), mia, settings, "runs")
    return [f for f in found if f.spec.startswith("s1.mia.size")]


def test_every_step_of_the_size_ordering_is_a_claim_and_one_model_leaves_them_open():
    steps = [f for f in size_findings(["h8", "h16", "h24"]) if f.spec == mia_claims.STEP]
    assert [(f.fields["attack"], f.fields["smaller"], f.fields["larger"]) for f in steps][:2] == [
        ("loss", "h8", "h16"), ("loss", "h16", "h24"),
    ]  # fmt: skip
    assert len(steps) == 2 * len(mia_claims.SIZE_ATTACKS)
    ends = [f for f in size_findings(["h8", "h16", "h24"]) if f.spec == "s1.mia.size.{attack}"]
    assert ends[0].note.startswith("AUC by size (point estimates): h8 ")
    alone = size_findings(["h8"])
    assert {f.missing for f in alone} == {"one scored model"}
    assert [registry.claim(f).id for f in alone if f.spec == mia_claims.STEP][0] == (
        "s1.mia.size.loss.h8_over_-"
    )


def test_loss_within_a_kind_scores_that_kinds_texts_only():
    entities = texts(["ab", "cd"], ["ef", "gh"], "named_entity")
    sequences = texts(["ij", "kl"], ["mn", "op"], "long_sequence")
    frame = pd.concat([entities, sequences.assign(text_id=sequences["text_id"] + "s")],
                      ignore_index=True)  # fmt: skip
    scored = stats(frame, dict.fromkeys(frame["text_id"], 2), [("h8", 0, "target", -1.0, -2.0)])
    table, own = controls.loss_within_kind(scored, frame, "long_sequence")
    assert sorted(own["text_id"]) == ["m0s", "m1s", "n0s", "n1s"]
    assert set(table["text_id"]) == set(own["text_id"])
    assert set(table["attack"]) == {"loss_long_sequence"}
    assert auc(table, own)["effect"].tolist() == [1.0]
