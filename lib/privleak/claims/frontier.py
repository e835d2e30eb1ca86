"""Claims of the frontier (docs/design.md §12): which defense leaks less at matched utility.

Each comparison (a, b) of `frontier.comparisons` is one claim: the exact expected number of
secrets an extraction response emits under a minus under b, each where its accuracy is
`matched.share` of the undefended system's (`privleak.frontier.summary`), with its interval over
the frontier's questions (every defense on the same draws). S2 states that PAD has "the best
balance between privacy and utility" against Summ., Dist. and Static: its comparisons with
those are S2's claims; every other pair (DP-ICL, CID, redaction, random refusal) is the
frontier's own sentence.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from privleak.claims.registry import Finding
from privleak.claims.stats import Estimate
from privleak.frontier.summary import comparison, matched, unit_matrices

S2_BASELINES = ("static", "summ", "dist")
"""The baselines S2 compares PAD with (Table 1)."""
LEAKAGE = "secret_mass"
"""The exact leakage measure the claims read."""


def load(interim: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(responses, leakage, points) of frontier_generate."""
    folder = interim / "frontier" / "generate"
    return tuple(pd.read_parquet(folder / f"{name}.parquet")
                 for name in ("responses", "leakage", "points"))  # fmt: skip


def findings(frames, share: float, comparisons, settings: dict) -> list[Finding]:
    """One finding per comparison (module docstring); `settings`: the claims block. Fewer than
    min_units questions leave every interval out."""
    responses, leakage, points = frames
    matrices = unit_matrices(responses, leakage, points["point"].tolist())
    units = matrices["accuracy"].shape[1]
    found = matched(matrices, points, share, n_boot=settings["n_boot"], seed=settings["seed"])
    out = []
    for a, b in comparisons:
        estimate = comparison(found, LEAKAGE, a, b, units, alpha=settings["alpha"])
        missing = ""
        if units < settings["min_units"]:
            missing = f"{units} questions < min_units {settings['min_units']}"
            estimate = Estimate(estimate.effect, math.nan, math.nan, units, missing)
        elif not math.isfinite(estimate.low):
            missing = estimate.note or "no interval"
        s2 = a == "pad" and b in S2_BASELINES
        spec = "s2.frontier.pad_over_{b}" if s2 else "s4.frontier.{a}_over_{b}"
        out.append(Finding(spec, estimate, {"a": a, "b": b, "share": share}, missing=missing))
    return out
