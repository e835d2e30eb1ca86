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
from dataclasses import replace
from pathlib import Path

import pandas as pd

from privleak.claims.procedures import bootstrap_t
from privleak.claims.registry import Finding
from privleak.claims.stats import Estimate, from_test
from privleak.frontier.summary import BOUNDS, matched, unit_matrices

S2_BASELINES = ("static", "summ", "dist")
"""The baselines S2 compares PAD with (Table 1)."""
LEAKAGE = "secret_mass"
"""The exact leakage measure the claims read."""


def load(interim: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(responses, leakage, points) of frontier_generate."""
    folder = interim / "frontier" / "generate"
    return tuple(pd.read_parquet(folder / f"{name}.parquet")
                 for name in ("responses", "leakage", "points"))  # fmt: skip


def comparison(found: dict, a: str, b: str, units: int, alpha: float) -> Estimate:
    """Matched cued secret mass of a minus b on the same resamples (negative: a leaks less): a t
    interval on the bootstrap standard error (units - 1 degrees of freedom), spanning too the t
    intervals of the difference's certified bounds (a's lower bound minus b's upper one, a's
    upper minus b's lower: matched leakage rises with every point's leakage, so the true
    difference lies between them); no interval when more than 5 % of the resamples miss the
    target utility."""
    (observed, draws), (low, low_draws), (high, high_draws) = (
        found[name] for name in (LEAKAGE, *BOUNDS)
    )
    effect = observed[a].leakage - observed[b].leakage
    sides = [
        bootstrap_t(centre, spread, units - 1, min_share=0.95)
        for centre, spread in (
            (effect, draws[a] - draws[b]),
            (low[a].leakage - high[b].leakage, low_draws[a] - high_draws[b]),
            (high[a].leakage - low[b].leakage, high_draws[a] - low_draws[b]),
        )
    ]
    reason = next((side for side in sides if isinstance(side, str)), None)
    if reason is not None:
        return Estimate(effect, math.nan, math.nan, units, reason)
    central, *bounds = sides
    envelope = tuple((side.effect, side.se) for side in bounds)
    return from_test(replace(central, envelope=envelope), units, alpha, effect)


def findings(frames, share: float, comparisons, settings: dict) -> list[Finding]:
    """One finding per comparison (module docstring); `settings`: the claims block. Fewer than
    min_units questions leave every interval out."""
    responses, leakage, points = frames
    matrices = unit_matrices(responses, leakage, points["point"].tolist())
    units = matrices["accuracy"].shape[1]
    found = matched(matrices, points, share, n_boot=settings["n_boot"], seed=settings["seed"])
    out = []
    for a, b in comparisons:
        estimate = comparison(found, a, b, units, settings["alpha"])
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
