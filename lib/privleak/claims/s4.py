"""S4 (Grislain) claims: DP-RAG's accuracy against document frequency and against the number of
voting documents, and its censoring of one-document facts. Accuracy is measured on symptom
questions (one per drawn patient) and resampled by disease, since a disease's patients ask the
same question over the same scores; planted facts are resampled one by one. Accuracy against
frequency is judged at every response budget of s4.budget.epsilons and s4.sweeps.epsilons,
against epsilon between the smallest and the largest, against voters at the first."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import NONE, Finding
from privleak.claims.stats import PLUS_MINUS_ONE, Estimate, spearman

Boot = Callable[..., Estimate]


def load(interim: Path) -> dict[str, pd.DataFrame]:
    """s4_generate's responses and planted-fact log-probs."""
    s4 = interim / "s4" / "generate"
    return {
        "responses": pd.read_parquet(s4 / "responses.parquet"),
        "planted": pd.read_parquet(s4 / "planted.parquet"),
    }


def censoring(planted: pd.DataFrame) -> tuple[np.ndarray, float]:
    """Per planted fact, log P_DP-RAG(fact) - log P_RAG(fact) at the smallest DP-RAG ε (natural
    log); and that ε."""
    first = planted.loc[planted["decoder"] == "dp_rag", "epsilon"].min()
    pairs = planted[(planted["decoder"] == "rag") | (planted["epsilon"] == first)].pivot_table(
        index="question_id", columns="decoder", values="log_prob"
    )
    return (pairs["dp_rag"] - pairs["rag"]).to_numpy() if len(pairs) else np.array([]), first


def voters_gain(responses: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, dict]:
    """Per question of the voters sweep, naming the disease at the largest k minus at the
    smallest (1, 0 or -1); each question's disease (the resampled unit: a disease's questions
    share their scores); and the claim's fields (low, high, epsilon, documents)."""
    swept = responses[(responses["sweep"] == "voters") & (responses["decoder"] == "dp_rag")]
    if swept.empty:
        fields = {"low": "?", "high": "?", "epsilon": math.nan, "documents": "?"}
        return np.array([]), np.array([]), fields
    table = swept.pivot_table(index=["question_id", "disease"], columns="voters",
                              values="correct", aggfunc="first").astype(float)  # fmt: skip
    low, high = int(table.columns.min()), int(table.columns.max())
    fields = {"low": low, "high": high, "epsilon": float(swept["epsilon"].iloc[0]),
              "documents": int(swept["frequency"].min())}  # fmt: skip
    diseases = table.index.get_level_values("disease").to_numpy()
    return (table[high] - table[low]).to_numpy(), diseases, fields


def mean_spearman(rows: np.ndarray) -> float:
    """Rows [budget code, frequency, correct]: the mean over budgets of Spearman(frequency,
    correct) within each budget."""
    return float(np.mean([spearman(rows[rows[:, 0] == b, 1], rows[rows[:, 0] == b, 2])
                          for b in np.unique(rows[:, 0])]))  # fmt: skip


def frequency_finding(asked: pd.DataFrame, boot: Boot) -> Finding:
    """Accuracy against document frequency, one estimate over the response budgets (they answer
    the same questions: a budget whose answers repeat another's adds no claim), each budget whose
    answers are all right or all wrong left out (no rank correlation there); the note gives each
    budget's correlation and how many answers the budgets share."""
    varied = asked.groupby("epsilon")["correct"].transform("nunique") > 1
    kept = asked[varied]
    epsilons = sorted(kept["epsilon"].unique())
    if not epsilons:
        fields = {"epsilons": "-"}
        why = "a budget whose answers are not all right or all wrong"
        return Finding("s4.accuracy_rises_with_frequency", NONE, fields, missing=why)
    codes = kept["epsilon"].map({e: i for i, e in enumerate(epsilons)})
    rows = np.c_[codes, kept[["frequency", "correct"]].astype(float).to_numpy()]
    estimate = boot(rows, mean_spearman, groups=kept["disease"].to_numpy(), bounds=PLUS_MINUS_ONE)
    each = ", ".join(
        f"ε {e:g}: {spearman(g['frequency'], g['correct'].astype(float)):.3f}"
        for e, g in kept.groupby("epsilon")
    )
    left = sorted(set(asked["epsilon"]) - set(epsilons))
    answers = kept.pivot_table(index="question_id", columns="epsilon", values="correct",
                               aggfunc="first").dropna()  # fmt: skip
    same = int((answers.nunique(axis=1) == 1).sum())
    note = (f"per budget: {each}; {same} of {len(answers)} questions get the same verdict at "
            "every budget")  # fmt: skip
    if left:
        note += "; left out, every answer the same: ε " + ", ".join(f"{e:g}" for e in left)
    fields = {"epsilons": ", ".join(f"{e:g}" for e in epsilons)}
    return Finding("s4.accuracy_rises_with_frequency", estimate, fields, note=note)


def findings(frames: dict[str, pd.DataFrame], boot: Boot) -> list[Finding]:
    """Every S4 claim on `load`'s frames."""
    responses = frames["responses"]
    asked = responses[
        (responses["kind"] == "disease")
        & (responses["decoder"] == "dp_rag")
        & (responses["sweep"] == "main")
    ]
    found = [frequency_finding(asked, boot)]
    if asked["epsilon"].nunique() >= 2:
        low, high = asked["epsilon"].min(), asked["epsilon"].max()
        table = asked.pivot_table(index=["question_id", "disease"], columns="epsilon",
                                  values="correct", aggfunc="first").astype(float)  # fmt: skip
        table = table[[low, high]].dropna()  # the questions answered at both budgets
        found.append(
            Finding(
                "s4.accuracy_rises_with_epsilon",
                boot(
                    (table[high] - table[low]).to_numpy(),
                    np.mean,
                    groups=table.index.get_level_values("disease").to_numpy(),
                    bounds=PLUS_MINUS_ONE,
                ),
                {"low": low, "high": high},
            )
        )
    else:
        found.append(
            Finding(
                "s4.accuracy_rises_with_epsilon",
                NONE,
                {"low": math.nan, "high": math.nan},
                missing="a budget with at least two epsilons",
            )
        )
    gains, diseases, fields = voters_gain(responses)
    found.append(
        Finding(
            "s4.accuracy_rises_with_voters",
            boot(gains, np.mean, groups=diseases, bounds=PLUS_MINUS_ONE),
            fields,
            missing="" if len(gains) else "no voters sweep in this run",
        )
    )
    differences, epsilon = censoring(frames["planted"])
    found.append(
        Finding("s4.censors_individual_knowledge", boot(differences, np.mean), {"epsilon": epsilon})
    )
    return found
