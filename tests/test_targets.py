"""S3's training plan: the models, their documents and seeds, and the dispatch that fits one."""

from __future__ import annotations

import math

import numpy as np
import torch

from privleak.training.finetune import finetune_causal_lm
from privleak.training.targets import (
    adamw_tokens,
    fit_target,
    last_finite,
    optimiser_settings,
    schedule_settings,
    target_plans,
)
from tests.conftest import tiny_llama

TRAIN = {"epochs": 1, "batch_size": 2, "seq_len": 8, "learning_rate": 1e-2}
DP = {"target_epsilon": 8.0, "delta": 1e-5, "max_grad_norm": 1.0, "batch_size": 4,
      "learning_rate": 5e-3}  # fmt: skip
ORIGINAL = [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11, 12]]
REDACTED = {"keyword": [[1, 0, 3, 4], [5, 6, 7], [0, 9, 10, 11, 12]], "classifier": ORIGINAL}
OF_DOMAIN = np.array(["A", "B", "C"])


def test_dp_takes_dp_batches_and_learning_rate_and_trains_epochs_and_seq_len():
    adamw, private = optimiser_settings(TRAIN, DP)
    assert adamw == TRAIN
    assert private == {"target_epsilon": 8.0, "delta": 1e-5, "max_grad_norm": 1.0, "epochs": 1,
                       "batch_size": 4, "seq_len": 8, "learning_rate": 5e-3}  # fmt: skip


def run0_plans_and_settings(adamw: dict, private: dict) -> tuple[dict, dict]:
    """Run 0's plans by model name, and fit_target's settings on the tiny Llama."""
    plans = {
        p["model"]: p
        for p in target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=[], seeds=1)
    }
    settings = dict(
        load=lambda: tiny_llama(vocab_size=16, window=16), original=ORIGINAL, pad_id=0, seed=0,
        adamw=adamw, private=private, schedule={"name": "linear"},
    )  # fmt: skip
    return plans, settings


def test_dp_epochs_are_the_private_targets_own_and_jft_trains_its_redacted_phases_epochs():
    adamw, private = optimiser_settings(TRAIN, DP | {"epochs": 3})
    assert private["epochs"] == 3 and adamw["epochs"] == 1
    plans, settings = run0_plans_and_settings(adamw, private)
    # 3 dialogs at an expected batch of 4: one Poisson step an epoch
    assert fit_target(plans["private"], **settings)["row"]["steps"] == 3
    jft = fit_target(plans["jft-keyword"], **settings)["row"]["steps"]
    assert jft == 2 + 1  # the redacted phase's 2 AdamW steps, then 1 epoch of DP


def test_the_schedule_takes_its_own_epochs_and_one_batch_size_for_both_kinds_of_step():
    adamw, private = optimiser_settings(TRAIN, DP)
    own_adamw, own_private = schedule_settings(
        adamw, private, {"name": "linear", "epochs": 3, "batch_size": 1}
    )
    assert own_adamw == TRAIN | {"epochs": 3, "batch_size": 1}
    assert own_private == private | {"batch_size": 1}
    assert schedule_settings(adamw, private, {"name": "linear"}) == (adamw, private)
    plan = target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=[], seeds=1)[5]
    fitted = fit_target(
        plan, lambda: tiny_llama(vocab_size=16, window=16), ORIGINAL, pad_id=0, seed=0,
        adamw=adamw, private=private,
        schedule={"name": "linear", "draw": "batch", "epochs": 3, "batch_size": 1},
    )  # fmt: skip
    assert fitted["row"]["steps"] == 9  # 3 epochs x 3 one-dialog batches


def test_plans_list_targets_then_references_then_further_runs_of_targets_only():
    plans = target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=["B", "C"], seeds=2)
    names = [p["model"] for p in plans]
    targets = ["a_only", "public", "private", "pub_redacted-keyword", "jft-keyword",
               "schedule-keyword", "pub_redacted-classifier", "jft-classifier",
               "schedule-classifier"]  # fmt: skip
    references = ["reference-no_b", "reference-no_c"]
    assert names == targets + references + [f"run1/{name}" for name in targets]
    by_name = {p["model"]: p for p in plans}
    assert by_name["a_only"]["docs"] == ORIGINAL[:1]
    assert by_name["reference-no_b"] | {"docs": None} == {
        "model": "reference-no_b", "run": 0, "target": "Reference (D without B)", "policy": None,
        "without": "B", "kind": "adamw", "after": None, "docs": None,
    }  # fmt: skip
    assert by_name["jft-keyword"]["after"] == "pub_redacted-keyword"
    assert by_name["run1/jft-keyword"]["after"] == "run1/pub_redacted-keyword"
    assert by_name["reference-no_b"]["docs"] == [ORIGINAL[0], ORIGINAL[2]]
    assert by_name["jft-keyword"]["docs"] is REDACTED["keyword"]
    assert by_name["run1/jft-keyword"]["run"] == 1 and by_name["jft-keyword"]["run"] == 0


def test_one_run_trains_each_target_once():
    plans = target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=["B"], seeds=1)
    assert len(plans) == 10 and all(p["run"] == 0 for p in plans)


def test_last_finite_skips_nan_and_infinity():
    assert last_finite([3.0, 2.0, math.nan, math.inf]) == 2.0
    assert math.isnan(last_finite([math.nan]))


def test_the_token_counter_counts_only_forwards_with_labels():
    model = tiny_llama(vocab_size=16, window=16)
    seen, hook = adamw_tokens(model)
    ids, mask = torch.tensor([[1, 2, 3]]), torch.tensor([[1, 1, 0]])
    model(input_ids=ids, attention_mask=mask)
    model(input_ids=ids, attention_mask=mask, labels=ids)
    hook.remove()
    model(input_ids=ids, attention_mask=mask, labels=ids)
    assert seen == [2]


def test_an_adamw_fit_equals_the_fine_tune_at_seed_plus_run():
    adamw, private = optimiser_settings(TRAIN, DP)
    public = target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=[], seeds=2)[10]
    assert public["model"] == "run1/public"
    fitted = fit_target(
        public, lambda: tiny_llama(vocab_size=16, window=16), ORIGINAL, pad_id=0, seed=3,
        adamw=adamw, private=private, schedule={"name": "linear"},
    )  # fmt: skip
    torch.manual_seed(4)
    twin = tiny_llama(vocab_size=16, window=16)
    losses = finetune_causal_lm(twin, ORIGINAL, pad_id=0, seed=4, **adamw)
    assert fitted["losses"] == losses
    assert all(torch.equal(fitted["state"][k], v) for k, v in twin.state_dict().items())
    row = fitted["row"]
    assert math.isnan(row["epsilon"]) and row["steps"] == len(losses)
    assert row["tokens"] == sum(map(len, ORIGINAL)) == fitted["timing"]["adamw_tokens"]
    assert row["final_loss"] == losses[-1] and fitted["timing"]["dp_tokens"] == 0
    assert list(row) == ["epsilon", "delta", "noise_multiplier", "steps", "tokens", "final_loss"]


def test_a_document_draw_schedule_fit_logs_its_mean_redacted_share_and_no_epsilon():
    adamw, private = optimiser_settings(TRAIN, DP)
    plan = target_plans(
        ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=[], seeds=1, draw="document"
    )[5]
    assert plan["kind"] == "schedule"
    assert plan["target"] == "Redaction Schedule (AdamW, per-document draw)"
    fitted = fit_target(
        plan, lambda: tiny_llama(vocab_size=16, window=16), ORIGINAL, pad_id=0, seed=0,
        adamw=adamw, private=private, schedule={"name": "linear", "draw": "document"},
    )  # fmt: skip
    assert 0.0 <= fitted["row"]["mean_redacted_share"] <= 1.0
    assert fitted["row"]["steps"] == len(fitted["losses"]) > 0
    assert math.isnan(fitted["row"]["epsilon"])


def test_a_batch_draw_schedule_fit_logs_its_epsilon_and_dp_steps():
    adamw, private = optimiser_settings(TRAIN | {"epochs": 4}, DP)
    plan = target_plans(ORIGINAL, REDACTED, OF_DOMAIN, domain="A", leaked=[], seeds=1)[5]
    assert plan["target"] == "Redaction Schedule"
    fitted = fit_target(
        plan, lambda: tiny_llama(vocab_size=16, window=16), ORIGINAL, pad_id=0, seed=0,
        adamw=adamw, private=private, schedule={"name": "linear", "draw": "batch"},
    )  # fmt: skip
    row = fitted["row"]
    assert row["steps"] == 8 and 1 <= row["dp_steps"] < 8  # p(0) = 1, p(7) = 0
    assert 0 < row["epsilon"] <= 8.0 * 1.01 and row["delta"] == 1e-5
    assert row["mean_redacted_share"] == 1 - row["dp_steps"] / 8


def test_jft_from_its_first_phase_equals_jft_from_scratch():
    plans, settings = run0_plans_and_settings(*optimiser_settings(TRAIN, DP))
    first = fit_target(plans["pub_redacted-keyword"], **settings)
    reused = fit_target(plans["jft-keyword"], first_phase=first, **settings)
    scratch = fit_target(plans["jft-keyword"], **settings)
    assert reused["losses"] == scratch["losses"]
    assert all(torch.equal(reused["state"][k], v) for k, v in scratch["state"].items())
    assert reused["row"] == scratch["row"]  # tokens include the reused first phase
