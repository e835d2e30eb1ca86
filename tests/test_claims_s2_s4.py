"""privleak.claims.s2 and s4 on hand-built frames: paired per-prompt contrasts, the sweeps'
trends and DP-RAG's frequency and censoring statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privleak import claims as cl
from privleak.claims import CONTRADICTED, INCONCLUSIVE, REPRODUCED, s2, s4
from privleak.claims.registry import bootstrapper, claim
from privleak.metrics.rag_leakage import with_fluency
from privleak.pad import RDP_ORDERS

BOOT = bootstrapper(
    {"n_boot": 300, "seed": 0, "alpha": 0.05, "min_units": 3, "method": "percentile"}
)


def outcomes(defense_values: dict[str, list[float]], value: str = "longest_run") -> pd.DataFrame:
    rows = [
        {"prompt_id": i, "defense": defense, "corpus": "enron", "family": "table", value: v}
        for defense, values in defense_values.items()
        for i, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_prompt_differences_pair_by_prompt():
    frame = outcomes({"extraction": [1.0, 1.0, 0.0], "pad": [0.0, 1.0, 0.0]})
    assert list(s2.prompt_differences(frame, "extraction", "pad", "longest_run")) == [-1, 0, 0]


BASE_RUNS = [30.0, 28.0, 31.0, 29.0, 32.0, 27.0, 30.0, 29.0, 31.0, 28.0, 30.0, 29.0]
PAD_RUNS = [2.0, 3.0, 1.0, 4.0, 2.0, 3.0, 2.0, 1.0, 3.0, 2.0, 4.0, 2.0]


@pytest.mark.parametrize(
    ("base", "pad", "verdict"),
    [
        (BASE_RUNS, PAD_RUNS, REPRODUCED),  # PAD copies about 2 words, the base about 30
        (PAD_RUNS, BASE_RUNS, CONTRADICTED),
        ([30.0, 2.0] * 6, [2.0, 30.0] * 6, INCONCLUSIVE),  # as many prompts either way
    ],
)
def test_pad_leaks_less_than_extraction(base, pad, verdict):
    frame = outcomes(
        {d: base for d in ("extraction", "summ", "dist", "static")} | {"pad": pad}
    ).assign(rouge_score=0.0, log_ppl=1.0)
    found = {f.spec.format(**f.fields): f for f in s2.table_findings(frame, BOOT, "tiny")}
    leak = found["s2.pad_leaks_less_than_extraction.repeat.enron"]
    assert leak.estimate.effect == pytest.approx(np.mean(pad) - np.mean(base))
    assert claim(leak).verdict == verdict


def test_perplexity_claims_pair_the_evaluators_log_ppl_and_skip_unscored_responses():
    frame = outcomes(
        {"extraction": [1.0, 1.0, 1.0, 1.0], "pad": [2.0, 2.0, 2.0, np.nan],
         "summ": [3.0] * 4, "dist": [1.0] * 4, "static": [1.0] * 4}, value="log_ppl",
    ).assign(longest_run=0, rouge_score=0.0)  # fmt: skip
    found = {f.spec.format(**f.fields): f for f in s2.table_findings(frame, BOOT, "tiny")}
    ppl = found["s2.pad_ppl_below_extraction.enron"].estimate
    assert ppl.effect == pytest.approx(1.0) and ppl.units == 3  # the unscored prompt is left out
    assert found["s2.summ_costs_perplexity.enron"].estimate.effect == pytest.approx(2.0)
    assert "s2.static_beats_dist.log_ppl.enron" in found
    assert found["s2.pad_ppl_below_extraction.enron"].note == (
        "PPL evaluator tiny stands in for PAD's EleutherAI/pythia-6.9b"
    )
    assert s2.evaluator_note("EleutherAI/pythia-6.9b") == ""
    assert found["s2.static_beats_dist.rouge.enron"].note == s2.DIST_THRESHOLD  # no evaluator
    assert found["s2.static_beats_dist.log_ppl.enron"].note.endswith(
        "stands in for PAD's EleutherAI/pythia-6.9b"
    )
    assert s2.DIST_THRESHOLD in found["s2.pad_leaks_less_than_dist.rouge.enron"].note
    assert "Summ. removes text" in found["s2.pad_leaks_less_than_summ.rouge.enron"].note
    assert found["s2.pad_leaks_less_than_extraction.rouge.enron"].note == ""


def test_secret_findings_pair_each_prompts_expected_secret_count_in_probability():
    # prompt 0, three secrets: PAD emits them with P 0.5, 0.5 and 1e-9 (expected 1.0), Extraction
    # with 0.3 each (expected 0.9). The mean of logs would call PAD safer (-7.37 vs -1.20 nats):
    # the improbable third secret carries no risk, and the risk is the probability.
    # prompt 1, one secret: 0.2 under both.
    probabilities = [{"extraction": [0.3, 0.3, 0.3], "pad": [0.5, 0.5, 1e-9]},
                     {"extraction": [0.2], "pad": [0.2]}]  # fmt: skip
    rows = [
        {"corpus": "enron", "prompt_id": p, "secret": k, "defense": d, "logprob": np.log(v)}
        for p, values in enumerate(probabilities)
        for d, ps in values.items()
        for k, v in enumerate(ps)
    ]
    esp = pd.DataFrame(rows)
    for base in ("summ", "dist", "static"):
        esp = pd.concat([esp, esp[esp["defense"] == "extraction"].assign(defense=base)])
    found = {f.spec.format(**f.fields): f for f in s2.secret_findings(esp, BOOT, ["enron"])}
    # per prompt PAD - Extraction: (1.0 + 1e-9 - 0.9) and 0; their mean over the 2 prompts
    secret = found["s2.pad_emits_fewer_secrets_than_extraction.enron"].estimate
    assert secret.effect == pytest.approx((0.1 + 1e-9) / 2) and secret.units == 2
    assert len(found) == 4
    assert claim(found["s2.pad_emits_fewer_secrets_than_summ.enron"]).quote == ""
    # a corpus that plants no secret: every row stays, inconclusive, saying what it lacks
    empty = list(s2.secret_findings(esp.iloc[:0], BOOT, ["hub"]))
    assert len(empty) == 4 and all(claim(f).verdict == INCONCLUSIVE for f in empty)
    assert "this corpus plants none" in claim(empty[0]).note


def test_with_fluency_joins_the_evaluators_nll_per_response():
    units = outcomes({"extraction": [5.0, 6.0], "pad": [1.0, 2.0]})
    scored = units[["corpus", "prompt_id", "defense"]].assign(nll=[4.0, 0.0, 6.0, 3.0],
                                                              tokens=[2, 0, 3, 3])  # fmt: skip
    joined = with_fluency(units, scored)
    assert joined["log_ppl"].tolist()[0] == 2.0 and np.isnan(joined["log_ppl"].tolist()[1])
    assert joined["ppl"].tolist()[2:] == pytest.approx([np.exp(2.0), np.exp(1.0)])


def test_sweep_matrix_puts_pads_own_rows_at_the_default_point():
    sweep = pd.DataFrame(
        {"prompt_id": [0, 0, 1, 1], "defense": ["amp", "pad", "amp", "pad"],
         "family": ["amplification", "table", "amplification", "table"],
         "value": [10.0, np.nan, 10.0, np.nan], "longest_run": [0.0, 1.0, 0.0, 1.0]}
    )  # fmt: skip
    matrix = s2.sweep_matrix(sweep, "amplification", "longest_run", 5.0)
    assert list(matrix.columns) == [5.0, 10.0] and matrix[5.0].tolist() == [1.0, 1.0]


def test_diminishing_gains_need_all_three_points():
    amplified = pd.DataFrame({1.0: [1.0, 1.0], 5.0: [0.0, 1.0], 10.0: [0.0, 0.0]})
    # prompt 0: (1 - 0) - (0 - 0) = 1; prompt 1: (1 - 1) - (1 - 0) = -1
    assert list(s2.diminishing_gains(amplified)) == [1.0, -1.0]
    assert s2.diminishing_gains(amplified.drop(columns=10.0)).size == 0


def test_s4_accuracy_spearman_per_epsilon_voters_and_censoring():
    main = pd.DataFrame(
        {"question_id": range(6), "kind": ["disease"] * 6, "decoder": ["dp_rag"] * 6,
         "epsilon": [5.0] * 6, "sweep": ["main"] * 6, "voters": [np.nan] * 6,
         "disease": list("abcdef"), "frequency": [1, 2, 3, 4, 5, 6],
         "correct": [0, 0, 0, 1, 1, 1]}
    )  # fmt: skip
    # questions 4 and 5 asked again with 10 and 100 voting documents: 0 -> 1 and 1 -> 1
    voters = pd.DataFrame(
        {"question_id": [4, 4, 5, 5], "kind": ["disease"] * 4, "decoder": ["dp_rag"] * 4,
         "epsilon": [5.0] * 4, "sweep": ["voters"] * 4, "voters": [10, 100, 10, 100],
         "disease": list("eeff"), "frequency": [5, 5, 6, 6], "correct": [0, 1, 1, 1]}
    )  # fmt: skip
    planted = pd.DataFrame(
        {"decoder": ["rag", "rag", "dp_rag", "dp_rag", "dp_rag", "dp_rag"],
         "epsilon": [np.nan, np.nan, 5.0, 5.0, 20.0, 20.0], "question_id": [0, 1, 0, 1, 0, 1],
         "log_prob": [-1.0, -2.0, -4.0, -6.0, -1.0, -2.0]}
    )  # fmt: skip
    frames = {"responses": pd.concat([main, voters]), "planted": planted}
    accuracy, by_epsilon, by_voters, censor = s4.findings(frames, BOOT)
    assert by_epsilon.missing == "a budget with at least two epsilons"
    assert accuracy.fields == {"epsilons": "5"}
    assert accuracy.estimate.effect == pytest.approx(np.sqrt(13.5 / 17.5))  # ranks with ties
    assert "ε 5: 0.878" in accuracy.note
    gains, diseases, fields = s4.voters_gain(frames["responses"])
    assert sorted(zip(diseases, gains, strict=True)) == [("e", 1.0), ("f", 0.0)]
    assert fields == {"low": 10, "high": 100, "epsilon": 5.0, "documents": 5}
    assert by_voters.estimate.effect == pytest.approx(0.5)
    differences, epsilon = s4.censoring(planted)
    assert epsilon == 5.0 and list(differences) == [-3.0, -4.0]
    assert censor.estimate.effect == pytest.approx(-3.5)


def test_s4_accuracy_over_budgets_is_one_estimate():
    """Two budgets answering the same questions make one claim: the mean of their correlations,
    with how many questions get the same verdict at both in the note."""
    rows = []
    for epsilon, correct in ((5.0, [0, 0, 1, 1, 1, 1]), (20.0, [0, 0, 0, 1, 1, 1])):
        rows += [{"question_id": q, "kind": "disease", "decoder": "dp_rag", "epsilon": epsilon,
                  "sweep": "main", "voters": np.nan, "disease": "abcdef"[q], "frequency": q,
                  "correct": c} for q, c in enumerate(correct)]  # fmt: skip
    planted = pd.DataFrame({"decoder": ["rag", "dp_rag"], "epsilon": [np.nan, 5.0],
                            "question_id": [0, 0], "log_prob": [-1.0, -3.0]})  # fmt: skip
    found = s4.findings({"responses": pd.DataFrame(rows), "planted": planted}, BOOT)
    frequency = [f for f in found if f.spec == "s4.accuracy_rises_with_frequency"]
    assert len(frequency) == 1 and frequency[0].fields == {"epsilons": "5, 20"}
    each = [cl.spearman(range(6), c) for c in ([0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1])]
    assert frequency[0].estimate.effect == pytest.approx(np.mean(each))
    assert "5 of 6 questions get the same verdict at every budget" in frequency[0].note


def test_s4_accuracy_resamples_diseases_not_questions():
    """Six questions of two diseases are two units: too few for an interval (min_units 3)."""
    responses = pd.DataFrame(
        {"question_id": range(6), "kind": ["disease"] * 6, "decoder": ["dp_rag"] * 6,
         "epsilon": [5.0] * 6, "sweep": ["main"] * 6, "voters": [np.nan] * 6,
         "disease": list("aaabbb"), "frequency": [1, 1, 1, 9, 9, 9],
         "correct": [0, 0, 0, 1, 1, 1]}
    )  # fmt: skip
    planted = pd.DataFrame(columns=["decoder", "epsilon", "question_id", "log_prob"])
    accuracy = s4.findings({"responses": responses, "planted": planted}, BOOT)[0]
    assert accuracy.estimate.effect == pytest.approx(1.0) and accuracy.estimate.units == 2
    assert claim(accuracy).verdict == INCONCLUSIVE


def test_s4_without_a_voters_sweep_is_missing_not_judged():
    main = pd.DataFrame(
        {"question_id": [0], "kind": ["disease"], "decoder": ["dp_rag"], "epsilon": [5.0],
         "sweep": ["main"], "voters": [np.nan], "disease": ["a"], "frequency": [3],
         "correct": [1]}
    )  # fmt: skip
    planted = pd.DataFrame(columns=["decoder", "epsilon", "question_id", "log_prob"])
    found = s4.findings({"responses": main, "planted": planted}, BOOT)
    assert found[2].missing == "no voters sweep in this run"


def test_s4_accuracy_rises_with_epsilon_pairs_each_question_between_the_extreme_budgets():
    rows = [
        {"question_id": q, "kind": "disease", "decoder": "dp_rag", "epsilon": eps,
         "sweep": "main", "voters": np.nan, "disease": "abcd"[q], "frequency": q,
         "correct": correct}
        for q, by_eps in enumerate([(0, 0, 1), (0, 1, 1), (1, 1, 1), (1, 0, 0)])
        for eps, correct in zip((1.0, 5.0, 50.0), by_eps, strict=True)
    ]  # fmt: skip
    planted = pd.DataFrame(columns=["decoder", "epsilon", "question_id", "log_prob"])
    found = s4.findings({"responses": pd.DataFrame(rows), "planted": planted}, BOOT)
    by_epsilon = next(f for f in found if f.spec == "s4.accuracy_rises_with_epsilon")
    assert by_epsilon.fields == {"low": 1.0, "high": 50.0}
    # per question at 50 minus at 1: 1, 1, 0, -1 (the middle budget is not used)
    assert by_epsilon.estimate.effect == pytest.approx(0.25)


def test_per_token_cost_change_skips_short_responses_and_divides_by_length():
    long = {"sigma": [1.0] * 8, "sensitivity": [1.0] * 8, "protected": [1.0] * 8}
    short = {"sigma": [1.0] * 3, "sensitivity": [1.0] * 3, "protected": [1.0] * 3}
    change = s2.per_token_cost_change(pd.DataFrame([long, short]), 1e-5, [4, 8])
    # n steps of Δ = σ = 1: RDP n α / 2, so ε(α) = n α / 2 + ln(1e5) / (α - 1), least on the grid
    cost = [min(n * a / 2 + np.log(1e5) / (a - 1) for a in RDP_ORDERS) / n for n in (4, 8)]
    assert change == pytest.approx([cost[1] - cost[0]])
    assert change[0] < 0  # the conversion term is amortised over more tokens


def test_sweep_findings_cover_both_ablations_and_the_sweeps():
    sweep = pd.concat(
        [
            outcomes({"pad": [0.0, 0.0, 1.0], "no_sens": [1.0, 0.0, 1.0], "no_calib": [0.0] * 3}),
            outcomes({"amp": [1.0, 1.0, 1.0]}).assign(family="amplification", value=1.0),
            outcomes({"eps": [1.0, 1.0, 1.0]}).assign(family="epsilon", value=10.0),
        ]
    ).assign(rouge_score=0.0, log_ppl=1.0)
    found = list(
        s2.sweep_findings(sweep, "enron", {"amplification": 5.0, "epsilon": 1.0}, BOOT, "tiny")
    )
    by_id = {f.spec.format(**f.fields): f for f in found}
    assert by_id["s2.no_sens_leaks_more.repeat"].estimate.effect == pytest.approx(1 / 3)
    assert by_id["s2.amplification_diminishing_returns.repeat"].missing.startswith("λ_amp = 1, 5")
    assert {"s2.epsilon_raises_leakage.rouge", "s2.epsilon_lowers_perplexity"} <= set(by_id)


def test_a_paraphrasing_summ_leaves_its_claims_inconclusive_and_says_why():
    frame = outcomes(
        {d: BASE_RUNS for d in ("extraction", "summ", "dist", "static")} | {"pad": PAD_RUNS}
    ).assign(rouge_score=0.0, log_ppl=1.0)
    found = {
        f.spec.format(**f.fields): claim(f)
        for f in s2.table_findings(frame, BOOT, "tiny", summary_style="paraphrase")
    }
    summ = found["s2.pad_leaks_less_than_summ.repeat.enron"]
    assert summ.verdict == INCONCLUSIVE and "condensed each document by paraphrase" in summ.note
    assert "the interval alone reads reproduced" in summ.note
    assert found["s2.pad_leaks_less_than_dist.repeat.enron"].verdict == REPRODUCED
    assert "paraphrase" in found["s2.summ_costs_perplexity.enron"].note


def test_no_sens_rows_are_untestable_with_the_reason():
    # both ablations copy longer runs than PAD on every prompt
    sweep = outcomes({"pad": PAD_RUNS, "no_sens": BASE_RUNS, "no_calib": BASE_RUNS})
    sweep = sweep.assign(rouge_score=0.0, log_ppl=1.0, value=np.nan)
    found = {
        f.spec.format(**f.fields): claim(f)
        for f in s2.sweep_findings(sweep, "enron", {"amplification": 3.0, "epsilon": 0.2}, BOOT)
    }
    no_sens = found["s2.no_sens_leaks_more.repeat"]
    assert no_sens.verdict == INCONCLUSIVE and "Δ_t = 1, the bound's worst case" in no_sens.note
    assert found["s2.no_calib_leaks_more.repeat"].verdict == REPRODUCED


def test_matched_findings_pair_pad_with_static_at_its_epsilon_per_corpus():
    frame = outcomes(
        {"static_matched": BASE_RUNS, "pad": PAD_RUNS, "static": [0.0] * 12}
    ).assign(rouge_score=0.0, log_ppl=lambda f: f["defense"].map({"pad": 1.0,
                                                                  "static_matched": 1.5,
                                                                  "static": 0.0}))  # fmt: skip
    frame.loc[frame["defense"] == "pad", "log_ppl"] += np.linspace(-0.1, 0.1, 12)
    matched = pd.DataFrame([{"corpus": "enron", "target_epsilon": 52.4, "sigma": 0.93}])
    found = {
        f.spec.format(**f.fields): f for f in s2.matched_findings(frame, matched, BOOT, "tiny")
    }
    leak = found["s2.pad_leaks_less_than_matched_static.repeat.enron"]
    # never against "static"
    assert leak.estimate.effect == pytest.approx(np.mean(PAD_RUNS) - np.mean(BASE_RUNS))
    assert claim(leak).verdict == REPRODUCED
    assert "σ 0.93" in claim(leak).effect_name and "target 52.4" in claim(leak).effect_name
    ppl = found["s2.pad_ppl_below_matched_static.enron"]
    assert ppl.estimate.effect == pytest.approx(-0.5) and claim(ppl).verdict == REPRODUCED
    assert "stands in" in ppl.note


def test_a_corpus_without_a_matched_sigma_has_no_effect():
    frame = outcomes({"static_matched": [1.0] * 4, "pad": [1.0] * 4}).assign(
        rouge_score=0.0, log_ppl=1.0
    )
    matched = pd.DataFrame([{"corpus": "enron", "target_epsilon": 0.19, "sigma": np.nan}])
    found = list(s2.matched_findings(frame, matched, BOOT, "tiny"))
    assert len(found) == 3
    assert all(claim(f).verdict == INCONCLUSIVE and "screened every step" in f.missing
               for f in found)  # fmt: skip
