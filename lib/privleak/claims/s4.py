"""S4 (Grislain) claims: DP-RAG's accuracy against document frequency, and its censoring of
one-document facts. Units are questions (one per disease) and planted facts; accuracy is judged
at every response budget of s4.budget.epsilons."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import Finding
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


def findings(frames: dict[str, pd.DataFrame], boot: Boot) -> list[Finding]:
    """Every S4 claim on `load`'s frames."""
    responses = frames["responses"]
    asked = responses[(responses["kind"] == "disease") & (responses["decoder"] == "dp_rag")]
    found = [
        Finding(
            "s4.accuracy_rises_with_frequency.eps{epsilon:g}",
            boot(
                group[["frequency", "correct"]].astype(float).to_numpy(),
                lambda r: spearman(r[:, 0], r[:, 1]),
            ),
            {"epsilon": epsilon},
        )
        for epsilon, group in asked.groupby("epsilon")
    ]
    differences, epsilon = censoring(frames["planted"])
    found.append(
        Finding("s4.censors_individual_knowledge", boot(differences, np.mean), {"epsilon": epsilon})
    )
    return found
