"""Reading s3_train's training log: what each model's training spent."""

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
