"""privleak.claims.s3 on hand-built frames: the targets' models per run and policy, paired rate
contrasts over prompts, and the training-runs rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privleak.claims import CONTRADICTED, INCONCLUSIVE, REPRODUCED, s3
from privleak.claims.registry import NONE, bootstrapper, claim

BOOT = bootstrapper(
    {"n_boot": 300, "seed": 0, "alpha": 0.05, "min_units": 2, "method": "percentile"}
)
LOG = pd.DataFrame(
    {
        "target": ["Public", "Public", "JFT", "JFT", "JFT", "JFT"],
        "policy": [None, None, "keyword", "classifier", "keyword", "classifier"],
        "run": [0, 1, 0, 0, 1, 1],
        "model": ["pub0", "pub1", "jftk0", "jftc0", "jftk1", "jftc1"],
    }
)


def test_a_target_has_one_model_per_run_and_policy():
    t = s3.targets(LOG, min_units=2)
    assert t.crossed and t.used == (0, 1)
    assert t.model("Public", "keyword", 1) == "pub1"  # trained once for both policies
    assert t.model("JFT", "classifier", 1) == "jftc1"  # each policy's own redacted model
    assert t.model("Private", "keyword") == ""
    assert s3.targets(LOG, min_units=3).used == (0,)


def test_ratio_difference_pools_counts_before_dividing():
    rows = np.array([[1, 4, 3, 4], [0, 6, 1, 6]])
    assert s3.ratio_difference(rows) == pytest.approx(4 / 10 - 1 / 10)


def counts(rate_of: dict[str, list[int]]):
    """rows_of for `paired`: per model, [successes, non-empty picks] per prompt (10 each)."""
    return lambda model, _policy: pd.DataFrame(
        {"successes": rate_of[model], "selected": [10] * len(rate_of[model])},
        index=pd.Index(range(len(rate_of[model])), name="prompt"),
    )


@pytest.mark.parametrize(
    ("public", "jft", "verdict"),
    [
        ([5, 6, 5, 6, 5, 6], [1, 0, 1, 0, 1, 0], CONTRADICTED),  # JFT leaks less: "+" fails
        ([1, 0, 1, 0, 1, 0], [5, 6, 5, 6, 5, 6], REPRODUCED),
        ([1, 5, 1, 5, 1, 5], [5, 1, 5, 1, 5, 1], INCONCLUSIVE),
    ],
)
def test_paired_contrast_over_prompts_and_runs(public, jft, verdict):
    # 4 training runs: the t reference has 3 degrees of freedom (with 2 runs, 1: t_1's quantile is
    # 12.7 and no contrast here is decided)
    runs = range(4)
    log = pd.DataFrame({
        "target": ["Public"] * 4 + ["JFT"] * 4, "policy": [None] * 4 + ["keyword"] * 4,
        "run": [*runs, *runs], "model": [f"pub{r}" for r in runs] + [f"jftk{r}" for r in runs],
    })  # fmt: skip
    t = s3.targets(log, min_units=2)
    rates = {f"pub{r}": public for r in runs} | {f"jftk{r}": jft for r in runs}
    estimate = s3.paired(t, BOOT, ("Public", "keyword"), ("JFT", "keyword"), counts(rates))
    assert estimate.effect == pytest.approx((sum(jft) - sum(public)) / 60)
    # a "+" claim of the catalogue: the classifier finds more leaks than the keyword policy
    fields = {"target": "JFT", "target_slug": "jft", "samples": "", "runs": ""}
    made = claim(s3.Finding("s3.classifier_finds_more_leaks.{target_slug}", estimate, fields))
    assert made.verdict == verdict


def test_a_missing_model_gives_no_estimate():
    t = s3.targets(LOG, min_units=2)
    assert s3.paired(t, BOOT, ("Public", "keyword"), ("Private", "keyword"), None) is NONE


def test_with_too_few_runs_a_contrast_pairs_run_0_only():
    t = s3.targets(LOG, min_units=3)
    rates = {"pub0": [1, 0, 1], "jftk0": [5, 6, 5]}
    estimate = s3.paired(t, BOOT, ("Public", "keyword"), ("JFT", "keyword"), counts(rates))
    assert estimate.units == 3  # run 0's prompts only
    assert estimate.effect == pytest.approx((16 - 2) / 30)


def test_findings_wait_for_runs_and_judge_publics_domain_privacy_against_its_reference():
    log = pd.DataFrame(
        {"target": ["Public", None], "policy": [None, None], "run": [0, 0],
         "model": ["pub0", "ref_X"], "without": [None, "X"]}
    )  # fmt: skip
    prompts = [f"p{i}" for i in range(16)]
    public = pd.DataFrame(
        {"model": "pub0", "prompt_id": prompts, "empty": False, "nll_without_X": 1.0,
         "leak_keyword_X": True, "leak_classifier_X": True}
    )  # fmt: skip
    reference = public.assign(model="ref_X", leak_keyword_X=[False, True] * 8,
                              leak_classifier_X=[False, True] * 8)  # fmt: skip
    samples = pd.concat([public, reference], ignore_index=True)
    t = s3.targets(log, min_units=2)
    settings = {"n_boot": 200, "seed": 0, "alpha": 0.05, "min_units": 2, "method": "percentile"}
    found = list(s3.domain_privacy_findings(samples, t, settings, {"runs": ""}))
    assert [f.fields["policy"] for f in found] == ["keyword", "classifier"]
    # Public flags 16 of 16 samples, the reference 8 of 16: the plain ratio 1 / (8/16) = 2
    assert found[0].estimate.effect == pytest.approx(2.0)
    assert claim(found[0]).verdict == REPRODUCED
    waiting = s3.Finding(found[0].spec, found[0].estimate, found[0].fields, missing="runs")
    assert claim(waiting).verdict == INCONCLUSIVE


def test_success_and_perplexity_findings_cover_every_target_and_policy():
    targets_log = pd.DataFrame(
        {"target": ["AIRLINE Only", "Public", "Private"] + ["Pub+Redacted", "JFT",
                    "Redaction Schedule"] * 2,
         "policy": [None] * 3 + ["keyword"] * 3 + ["classifier"] * 3, "run": 0,
         "model": ["only", "pub", "priv", "prk", "jk", "sk", "prc", "jc", "sc"]}
    )  # fmt: skip
    t = s3.targets(targets_log, min_units=2)
    samples = pd.DataFrame(
        [{"model": m, "prompt_id": p, "empty": False, "nll_self": 1.0, "nll_without_X": 2.0,
          "leak_keyword_X": m == "pub", "leak_classifier_X": m in ("pub", "only")}
         for m in targets_log["model"] for p in range(4)]
    )  # fmt: skip
    found = list(s3.success_findings(samples, t, BOOT, "AIRLINE", {"runs": ""}))
    assert len(found) == 6 + 5 + 6
    ids = {claim(f).id: f for f in found}
    only = ids["s3.classifier_finds_more_leaks.airline_only"]
    assert only.estimate.effect == pytest.approx(1.0)  # classifier 4 of 4, keyword 0 of 4
    assert ids["s3.below_airline_only.jft"].estimate.effect == pytest.approx(-1.0)
    assert "s3.not_below_airline_only.public" in ids
    per_model = {"prk": 4.0, "jk": 2.0, "sk": 6.0, "prc": 4.0, "jc": 2.0, "sc": 6.0}
    test_nll = pd.DataFrame(
        [{"model": m, "dialog": d, "nll": nll, "tokens": 2.0}
         for m, nll in per_model.items() for d in range(3)]
    )  # fmt: skip
    ppl = {claim(f).id: f for f in s3.perplexity_findings(test_nll, t, BOOT, {"runs": ""})}
    # log perplexity = NLL / tokens: JFT 1 vs Pub+Redacted 2, the schedule 3
    assert ppl["s3.jft_better_perplexity_than_pub_redacted.keyword"].estimate.effect == -1.0
    schedule = ppl["s3.redaction_schedule_worse_perplexity_than_pub_redacted.classifier"]
    assert schedule.estimate.effect == 1.0


def test_findings_with_too_few_runs_say_so_on_every_claim():
    models = ["only", "pub", "priv", "prk", "jk", "sk", "prc", "jc", "sc", "ref"]
    log = pd.DataFrame(
        {"target": ["AIRLINE Only", "Public", "Private"] + ["Pub+Redacted", "JFT",
                    "Redaction Schedule"] * 2 + [None],
         "policy": [None] * 3 + ["keyword"] * 3 + ["classifier"] * 3 + [None], "run": 0,
         "model": models, "without": [None] * 9 + ["X"],
         "kind": ["adamw", "adamw", "dp"] + ["adamw", "jft", "schedule"] * 2 + ["adamw"],
         "after": [None] * 4 + ["prk", None, None, "prc", None, None],
         "steps": [10, 38, 57, 38, 57, 150, 38, 57, 150, 30],
         "dp_steps": [None] * 5 + [29, None, None, 31, None],
         "epsilon": [None, None, 8.0, None, 8.0, 5.5, None, 8.0, 5.9, None]}
    )  # fmt: skip
    redaction = pd.DataFrame(
        {"policy": ["keyword", "keyword", "classifier"], "words_masked": [1, 2, 30],
         "words": [50, 50, 100]}
    )  # fmt: skip
    samples = pd.DataFrame(
        [{"model": m, "prompt_id": p, "empty": False, "nll_self": 1.0, "nll_without_X": 2.0,
          "leak_keyword_X": p % 2 == 0, "leak_classifier_X": p % 3 == 0}
         for m in models for p in range(6)]
    )  # fmt: skip
    test_nll = pd.DataFrame({"model": models, "dialog": 0, "nll": 2.0, "tokens": 2.0})
    # the whole claims params block, as render_claims passes it
    settings = {"n_boot": 100, "seed": 0, "alpha": 0.05, "min_units": 2, "method": "percentile"}
    frames = {"log": log, "samples": samples, "test_nll": test_nll, "redaction": redaction}
    found = s3.findings(frames, BOOT, settings, domain="AIRLINE", seeds_rule="runs")
    assert len(found) == 17 + 2 + 4  # success contrasts, Public's Ĉ per policy, perplexities
    assert {f.missing for f in found} == {"runs; the artifacts hold 1"}
    # every verdict carries the DP steps, epsilon spent and masked shares it rests on
    assert {f.note for f in found} == {
        "training: Private 57 DP steps a run, epsilon 8.00; JFT 19 DP steps a run, epsilon 8.00; "
        "Redaction Schedule 29-31 DP steps a run, epsilon 5.50-5.90; train words masked: "
        "classifier 30.0%, keyword 3.0%"
    }
    assert {claim(f).verdict for f in found} == {INCONCLUSIVE}


def test_where_the_reference_never_flags_c_hat_gets_a_lower_bound():
    log = pd.DataFrame(
        {"target": ["Public", None], "policy": [None, None], "run": [0, 0],
         "model": ["pub0", "ref_X"], "without": [None, "X"]}
    )  # fmt: skip
    prompts = [f"p{i}" for i in range(20)]
    flags = [i % 4 != 0 for i in range(20)]  # Public flags 15 of 20
    public = pd.DataFrame(
        {"model": "pub0", "prompt_id": prompts, "empty": False, "nll_without_X": 1.0,
         "leak_keyword_X": flags, "leak_classifier_X": flags}
    )  # fmt: skip
    reference = public.assign(model="ref_X", leak_keyword_X=False, leak_classifier_X=False)
    samples = pd.concat([public, reference], ignore_index=True)
    settings = {"n_boot": 200, "seed": 0, "alpha": 0.05, "min_units": 2, "method": "percentile"}
    found = list(s3.domain_privacy_findings(samples, s3.targets(log, 2), settings, {"runs": ""}))
    estimate = found[0].estimate
    # no ratio exists (0 reference flags); the bound is Public's lower limit over the
    # reference's exact upper limit at 0 of 20 prompts, 1 - 0.025 ** (1 / 20) = 0.168
    assert estimate.effect == np.inf and estimate.high == np.inf
    assert 1.0 < estimate.low < 0.75 / 0.168
    assert claim(found[0]).verdict == REPRODUCED
