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
from privleak.claims.stats import Estimate, spearman

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


def findings(frames: dict[str, pd.DataFrame], boot: Boot) -> list[Finding]:
    """Every S4 claim on `load`'s frames."""
    responses = frames["responses"]
    asked = responses[
        (responses["kind"] == "disease")
        & (responses["decoder"] == "dp_rag")
        & (responses["sweep"] == "main")
    ]
    found = [
        Finding(
            "s4.accuracy_rises_with_frequency.eps{epsilon:g}",
            boot(
                group[["frequency", "correct"]].astype(float).to_numpy(),
                lambda r: spearman(r[:, 0], r[:, 1]),
                groups=group["disease"].to_numpy(),
            ),
            {"epsilon": epsilon},
        )
        for epsilon, group in asked.groupby("epsilon")
    ]
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
            boot(gains, np.mean, groups=diseases),
            fields,
            missing="" if len(gains) else "no voters sweep in this run",
        )
    )
    differences, epsilon = censoring(frames["planted"])
    found.append(
        Finding("s4.censors_individual_knowledge", boot(differences, np.mean), {"epsilon": epsilon})
    )
    return found
