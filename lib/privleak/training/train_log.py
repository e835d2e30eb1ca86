"""Reading s3_train's training log and s3_prepare's redaction table: what each model's
training spent, and what it read."""

from __future__ import annotations

import pandas as pd

from privleak.errors import require


def dp_steps(log: pd.DataFrame) -> pd.Series:
    """Per model of s3_train's log (indexed by `model`), the DP-AdamW steps it took: all of
    Private's, the schedule's DP steps (`dp_steps`; 0 under the document draw), JFT's steps
    after its redacted phase (the steps of its `after` model), 0 for an AdamW model."""
    steps = log.set_index("model")["steps"]
    counts = pd.Series(0, index=steps.index, dtype=int)
    for row in log.itertuples():
        if row.kind == "dp":
            counts[row.model] = row.steps
        elif row.kind == "schedule":
            counts[row.model] = 0 if pd.isna(row.dp_steps) else int(row.dp_steps)
        elif row.kind == "jft":
            require(
                isinstance(row.after, str),
                f"JFT model {row.model!r} names no redacted phase (`after`) in the log",
            )
            counts[row.model] = row.steps - steps[row.after]
    return counts


def masked_shares(redaction: pd.DataFrame) -> dict[str, float]:
    """Per policy of s3_prepare's redaction table, the share of train words it masked."""
    masked = redaction.groupby("policy")[["words_masked", "words"]].sum()
    return (masked["words_masked"] / masked["words"]).to_dict()


def regime(log: pd.DataFrame, redaction: pd.DataFrame) -> str:
    """The training regime every S3 verdict rests on, for its note: each DP target's DP steps
    per run (range over runs and policies) and the epsilon spent, and each policy's share of
    masked train words."""
    steps = dp_steps(log)
    parts = []
    for target in ("Private", "JFT", *log.loc[log["kind"] == "schedule", "target"].unique()):
        models = log.loc[log["target"] == target, "model"]
        low, high = steps[models].min(), steps[models].max()
        counted = f"{low}" if low == high else f"{low}-{high}"
        spent = log.loc[log["target"] == target, "epsilon"].dropna()
        epsilon = (
            "no DP" if spent.empty
            else f"epsilon {spent.max():.2f}" if spent.min() == spent.max()
            else f"epsilon {spent.min():.2f}-{spent.max():.2f}"
        )  # fmt: skip
        parts.append(f"{target} {counted} DP steps a run, {epsilon}")
    shares = ", ".join(
        f"{policy} {share:.1%}" for policy, share in masked_shares(redaction).items()
    )
    return f"training: {'; '.join(parts)}; train words masked: {shares}"
