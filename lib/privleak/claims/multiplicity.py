"""Multiplicity: each paper's verdicts adjusted for the number of claims it tests at once.

Every claim is judged at its own level (1 - alpha): with S2's 78 claims some decided verdicts are
expected from chance alone. Beside the per-claim verdict, two adjusted ones per paper key (the
family: the claims whose id starts with it, as the report groups them; s1 holds the MIA claims,
s2 and s4 the frontier's), both valid under any dependence between the p-values, as claims share
units and models:
- `holm`: Holm's step-down adjustment, family-wise error <= alpha;
- `fdr_by`: Benjamini-Yekutieli, false-discovery rate <= alpha (scipy's
  `false_discovery_control`).

A claim's p-value is the two-sided test its own interval implies under a normal approximation of
the effect: the standard error is the interval's half-width on the null's side over
z_{1-alpha/2}; where the effect lies outside its interval or on its null-side bound, the
interval's midpoint and half its width stand in for effect and half-width. Either way p < alpha
exactly when the interval excludes the null, so the per-claim verdict is "p < alpha" (Altman &
Bland, BMJ 2011, with the null-side half-width for asymmetric bootstrap intervals). An adjusted
verdict is the per-claim verdict where the adjusted p-value stays below alpha, inconclusive
otherwise; a decided claim of the family without a p-value (an infinite effect) is inconclusive
once adjusted.

Outside the families, with their per-claim verdicts kept: claims that are not `adjustable`
(guarantees checked on every unit, where one violation contradicts; the audit's certified
one-sided bounds; claims ruled inconclusive by missing data, whose interval is not their test)
and claims without an interval (inconclusive already).
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
    (normal approximation, the null-side half-width; see the module doc); NaN without a finite
    effect, with no interval or a point one, or with an effect outside an interval with an
    infinite bound."""
    require(0 < alpha < 0.5, f"claims.alpha must be in (0, 0.5); got {alpha!r}")
    if not (math.isfinite(effect) and math.isfinite(null)) or not low < high:
        return math.nan  # NaN bounds fail low < high too
    z = stats.norm.ppf(1 - alpha / 2)
    half = effect - low if effect > null else high - effect
    if half <= 0 or not low <= effect <= high:  # outside or on its bound: centre on the interval
        if not (math.isfinite(low) and math.isfinite(high)):
            return math.nan
        effect, half = (low + high) / 2, (high - low) / 2
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


def paper_key(claim_id: str) -> str:
    """A claim's family: its id's key before the first dot ("s2.pad_over_dist" -> "s2")."""
    return claim_id.split(".", 1)[0]


def paper_keys(frame: pd.DataFrame) -> pd.Series:
    """`paper_key` of every row of a claims frame."""
    return frame["id"].map(paper_key)


def per_paper(
    frame: pd.DataFrame, column: str, values: tuple[str, ...] = VERDICTS
) -> dict[str, dict[str, int]]:
    """{paper key: {value: count}} of one column of a claims frame (a verdict column by default),
    zeros included, every paper key of the frame."""
    family = paper_keys(frame)
    return {
        key: {v: int((frame.loc[family == key, column] == v).sum()) for v in values}
        for key in sorted(family.unique())
    }


def adjusted(frame: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The claims frame (id, effect, ci_low, ci_high, null, verdict, adjustable) with `p_value`
    (NaN outside the families) and one verdict column per adjustment, each family a paper key's
    adjustable claims (the id's key before its first dot)."""
    out = frame.copy()
    out["p_value"] = [
        interval_p_value(r.effect, r.ci_low, r.ci_high, r.null, alpha) if r.adjustable else math.nan
        for r in frame.itertuples()
    ]
    family = paper_keys(out)
    undecidable = out["adjustable"] & out["p_value"].isna() & (out["verdict"] != INCONCLUSIVE)
    for method in ADJUSTMENTS:
        out[method] = out["verdict"].where(~undecidable, INCONCLUSIVE)
        for _, members in out[out["p_value"].notna()].groupby(family):
            kept = adjusted_p_values(members["p_value"].to_numpy(), method) < alpha
            out.loc[members.index[~kept], method] = INCONCLUSIVE
    return out


def adjusted_counts(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, int]]]:
    """{adjustment: {paper key: {verdict: count}}} of an `adjusted` frame, zeros included."""
    return {method: per_paper(frame, method) for method in ADJUSTMENTS}
