"""Multiplicity: each paper's verdicts adjusted for the number of claims it tests at once.

Every claim is judged at its own level (1 - alpha): with S2's 78 claims some decided verdicts are
expected from chance alone. Beside the per-claim verdict, two adjusted ones per paper (the family:
the claims whose id starts with the paper's key, as the report groups them), both valid under any
dependence between claims, which share units and models:
- `holm`: Holm's step-down adjustment, family-wise error <= alpha;
- `fdr_by`: Benjamini-Yekutieli, false-discovery rate <= alpha (scipy's
  `false_discovery_control`).

A claim's p-value is the two-sided test its own interval implies under a normal approximation of
the effect: the standard error is the interval's half-width on the null's side over z_{1-alpha/2}
(the whole width over 2 z when the effect lies outside its interval), so a claim whose interval
excludes the null has p < alpha and the per-claim verdict is exactly "p < alpha" (Altman & Bland,
BMJ 2011, with the null-side half-width for asymmetric bootstrap intervals). An adjusted verdict is
the per-claim verdict where the adjusted p-value stays below alpha, inconclusive otherwise.

Outside the family, with their per-claim verdict kept and no p-value: guarantees checked on every
unit (a point "interval": one violation contradicts them), one-sided certified bounds (the audit's
lower bounds on epsilon) and claims without an interval (inconclusive already).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from privleak.claims.spec import INCONCLUSIVE, VERDICTS
from privleak.errors import require

ADJUSTMENTS = ("holm", "fdr_by")


def interval_p_value(effect: float, low: float, high: float, null: float, alpha: float) -> float:
    """The two-sided p-value of effect = null that the (1 - alpha) interval [low, high] implies
    (normal approximation, the null-side half-width); NaN outside the family: no finite
    two-sided interval, or a point one."""
    require(0 < alpha < 0.5, f"claims.alpha must be in (0, 0.5); got {alpha!r}")
    if not all(math.isfinite(v) for v in (effect, low, high, null)) or not low < high:
        return math.nan
    z = stats.norm.ppf(1 - alpha / 2)
    half = effect - low if effect > null else high - effect
    if half <= 0:
        half = (high - low) / 2
    return float(2 * stats.norm.sf(abs(effect - null) * z / half))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest times (m - i), running maximum,
    capped at 1."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = np.maximum.accumulate(p[order] * (p.size - np.arange(p.size)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(scaled, 1.0)
    return adjusted


def adjusted_p_values(p_values: np.ndarray, method: str) -> np.ndarray:
    """One family's adjusted p-values: `holm` or `fdr_by`."""
    require(method in ADJUSTMENTS, f"adjustment {method!r} is unknown; allowed: {ADJUSTMENTS}")
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return p
    return holm(p) if method == "holm" else stats.false_discovery_control(p, method="by")


def adjusted(frame: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The claims frame (id, effect, ci_low, ci_high, null, verdict) with `p_value` (NaN outside
    the family) and one verdict column per adjustment, each family a paper's claims (the id's
    key before its first dot)."""
    out = frame.copy()
    out["p_value"] = [
        interval_p_value(r.effect, r.ci_low, r.ci_high, r.null, alpha) for r in frame.itertuples()
    ]
    family = out["id"].str.split(".").str[0]
    for method in ADJUSTMENTS:
        out[method] = out["verdict"]
        for _, members in out[out["p_value"].notna()].groupby(family):
            kept = adjusted_p_values(members["p_value"].to_numpy(), method) < alpha
            out.loc[members.index[~kept], method] = INCONCLUSIVE
    return out


def adjusted_counts(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, int]]]:
    """{adjustment: {paper key: {verdict: count}}} of an `adjusted` frame, zeros included."""
    family = frame["id"].str.split(".").str[0]
    return {
        method: {
            key: {v: int((frame.loc[family == key, method] == v).sum()) for v in VERDICTS}
            for key in sorted(family.unique())
        }
        for method in ADJUSTMENTS
    }
