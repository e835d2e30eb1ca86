"""privleak.claims.s0 on hand-built frames: each estimator's effect is the statistic its
catalogue entry names, computed by hand here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privleak.claims import CONTRADICTED, INCONCLUSIVE, REPRODUCED, s0
from privleak.claims.registry import NONE, bootstrapper, claim

BOOT = bootstrapper(
    {"n_boot": 300, "seed": 0, "alpha": 0.05, "min_units": 3, "method": "percentile"}
)


def lam_frame(slopes: list[float]) -> pd.DataFrame:
    """One model, one context per slope: τ = slope · λ at λ = 0, 1, 2."""
    rows = [
        {"model": "m", "context": f"c{i}", "lam": lam, "tau": slope * lam}
        for i, slope in enumerate(slopes)
        for lam in (0.0, 1.0, 2.0)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("slopes", "verdict"),
    [
        ([1.0, 1.2, 0.8, 1.1, 0.9, 1.0] * 2, REPRODUCED),  # 12 contexts: the union's cells hold
        ([-1.0, -1.2, -0.8, -1.1, -0.9, -1.0] * 2, CONTRADICTED),
        ([1.0, -1.0, 0.5, -0.5, 0.2, -0.2] * 2, INCONCLUSIVE),
    ],
)
def test_lambda_influence_is_the_mean_slope_over_contexts(slopes, verdict):
    estimate = s0.trend_estimate(lam_frame(slopes), "lam", "tau", BOOT)
    assert estimate.effect == pytest.approx(np.mean(slopes))
    assert estimate.units == len(slopes)
    assert claim(s0.Finding("s0.lambda.influence", estimate)).verdict == verdict


def test_pair_estimate_is_the_paired_mean_difference_and_none_without_a_setting():
    frame = lam_frame([1.0, 2.0, 3.0])
    # τ(λ=2) - τ(λ=0) = 2 · slope: mean 4
    assert s0.pair_estimate(frame, "lam", "tau", 0.0, 2.0, BOOT).effect == pytest.approx(4.0)
    assert s0.pair_estimate(frame, "lam", "tau", 0.0, 5.0, BOOT) is NONE


def test_model_pair_averages_each_context_over_lambda_first():
    frame = pd.DataFrame(
        {
            "context": ["a", "a", "a", "b", "b", "b"],
            "model": ["base", "base", "tuned", "base", "tuned", "tuned"],
            "tau": [1.0, 3.0, 1.0, 2.0, 0.0, 2.0],
        }
    )
    # a: tuned 1 - base 2 = -1; b: tuned 1 - base 2 = -1
    assert s0.model_pair(frame, "tau", "base", "tuned", BOOT).effect == pytest.approx(-1.0)
    assert s0.model_pair(frame, "tau", "base", "other", BOOT) is NONE


def test_first_tokens_gap_skips_short_responses():
    long = list(range(12))  # first 10 mean 4.5, the rest mean 10.5
    frame = pd.DataFrame(
        {"model": ["m", "m"], "context": ["a", "b"], "lam": [1.0, 1.0],
         "tau_tokens": [long, list(range(10))]}
    )  # fmt: skip
    gaps = s0.first_tokens_gap(frame)
    assert gaps.to_dict() == {("m", "a", 1.0): pytest.approx(-6.0)}


def test_peak_by_n_spearman_ranks_the_peaks_of_the_mean_curves():
    # n = 1 peaks at 0.5, n = 2 at 0.9, n = 4 at 0.7: Spearman of (1, 2, 4) with (0.5, 0.9, 0.7)
    rows = np.array([[1, 0, 0.5], [1, 1, 0.1], [2, 0, 0.9], [2, 1, 0.2], [4, 0, 0.3], [4, 1, 0.7]])
    assert s0.peak_by_n_spearman(rows) == pytest.approx(0.5)


def test_bounded_slack_is_negative_exactly_where_the_bound_breaks():
    bounded = pd.DataFrame(
        {"eps": [1.0, 1.0], "max_tau_ngram_token": [0.5, 1.5], "max_tau_whole_token": [0.2, 0.2]}
    )
    slack = s0.bounded_slack(bounded)
    assert slack == pytest.approx([0.50001, -0.49999, 0.30001, 0.30001])
    assert (
        claim(s0.Finding("s0.bounded_cid.within_eps", s0.worst_case(slack, "checks"))).verdict
        == CONTRADICTED
    )


def test_corpus_contrast_and_missing_pair_findings():
    main = pd.DataFrame(
        {
            "corpus": ["cnn_dm"] * 4 + ["pubmedqa"] * 4,
            "context": ["c1", "c2", "c3", "c4", "p1", "p2", "p3", "p4"],
            "model": ["m"] * 8,
            "tau": [2.0, 2.2, 1.8, 2.0, 1.0, 1.1, 0.9, 1.0],
            "repeat": [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            "rouge": [0.0] * 8,
        }
    )
    text = main.assign(source="generate")
    found = {
        f.spec + str(dict(f.fields)): f for f in s0.knowledge_findings(text, main, BOOT, "one run")
    }
    tau = next(f for f in found.values() if f.fields.get("value") == "tau")
    assert tau.estimate.effect == pytest.approx(1.0)
    repeat = next(f for f in found.values() if f.fields.get("value") == "repeat")
    assert repeat.estimate.effect == pytest.approx(0.5)
    pair = next(f for f in found.values() if f.spec == "s0.opt_vs_neo.influence")
    assert pair.estimate is NONE and "OPT-1.3B" in pair.missing
    tuned = next(f for f in found.values() if f.spec == "s0.known_context.influence")
    assert tuned.missing.startswith("s0_finetune responses")


def sweep_frame() -> pd.DataFrame:
    """Two contexts; faithfulness 0.5 below T = 0.4, 0.9 at T = 0.7; λ in {1, 1.5}."""
    rows = []
    for context in ("a", "b", "c"):
        for t, faith in ((0.2, 0.5), (0.7, 0.9)):
            for lam in (1.0, 1.5):
                rows.append({"model": "m", "context": context, "temperature": t, "lam": lam,
                             "faithfulness": faith, "tau": lam / t, "rouge_l_f1": 0.3})  # fmt: skip
    return pd.DataFrame(rows)


def test_temperature_findings_compare_cold_and_warm_and_keep_the_proxy_note():
    sweep = sweep_frame()
    found = {f.spec: f for f in s0.temperature_findings(sweep[sweep["lam"] == 1.0], BOOT, "proxy")}
    below = found["s0.temperature.faithfulness_below_0.4"]
    assert below.estimate.effect == pytest.approx(-0.4) and below.note == "proxy"
    assert found["s0.temperature.influence"].estimate.effect < 0  # τ = 1 / T falls with T


def test_lambda_findings_say_which_lambdas_are_missing():
    sweep = sweep_frame()
    main = sweep[sweep["temperature"] == 0.7].assign(repeat=0.0, rouge=0.0)
    found = {f.spec: f for f in s0.lambda_findings(main, main, BOOT, "")}
    assert found["s0.lambda.utility_at_low_lambda"].missing == "λ = 0.5 and λ = 1 in s0.lams"
    assert found["s0.lambda.similarity_above_1.25"].estimate.effect == pytest.approx(0.0)
    assert found["s0.lambda.influence"].estimate.effect == pytest.approx(0.5 / 0.7 / 0.5)


def test_one_ngram_size_cannot_test_the_peak_claim():
    ngram = pd.DataFrame({"example": ["a", "a"], "n": [2, 2], "i": [0, 1], "tau": [0.5, 0.1]})
    family_grams = ngram.assign(size="s")
    generations = pd.DataFrame(
        {"experiment": ["main"], "lam": [1.0], "tau_tokens": [[0.1, 0.2]], "pmi": [[0.3, 0.1]],
         "context": ["a"]}
    )  # fmt: skip
    bounded = pd.DataFrame(
        {"eps": [1.0], "max_tau_ngram_token": [0.1], "max_tau_whole_token": [0.1]}
    )
    found = {f.spec: f for f in s0.ngram_findings(ngram, family_grams, generations, bounded, BOOT)}
    assert found["s0.ngram.peak_grows_with_n"].estimate is NONE
    assert found["s0.ngram.peak_grows_with_n"].missing == ">= 2 values in s0.ngram.ns"
    assert found["s0.ngram.earlier_ngrams_peak_every_size"].fields == {"n": 2}


def test_size_findings_split_contexts_at_32_tokens_and_need_two_sizes_in_range():
    rows = []
    for context, base in (("a", 1.0), ("b", 1.2), ("c", 0.9)):
        for limit, tau in ((16, base), (64, base + 0.5)):
            row = {"experiment": "context_size", "model": "m", "context": context}
            rows.append(row | {"context_limit": limit, "tau": tau, "lam": 1.0, "tau_tokens": []})
    generations = pd.DataFrame(rows)
    family = pd.DataFrame({"example": ["a", "a", "b", "b"], "parameters": [1, 2, 1, 2],
                           "tau": [2.0, 1.0, 3.0, 1.0]})  # fmt: skip
    found = {f.spec: f for f in s0.size_findings(generations, family, BOOT, "one run")}
    assert found["s0.context_size.small_contexts"].estimate.effect == pytest.approx(-0.5)
    assert found["s0.context_size.growth_32_to_256"].missing == ">= 2 context sizes in [32, 256]"
    size = found["s0.model_size.influence"]
    assert size.estimate.effect == pytest.approx(-1.0) and size.missing == "one run"
