"""Multiplicity: verdicts adjusted for the number of claims tested at once, per family.

Every claim is judged at its own level (1 - alpha), with the p-value of the procedure behind its
interval (privleak.claims.procedures: p < alpha exactly when the interval excludes the null).
The families (`family`):
- each paper's primary claims (the statements of its abstract and conclusion,
  privleak.claims.roles), adjusted by Holm's step-down method: family-wise error <= alpha, so a
  paper's headline verdicts hold together;
- each paper's other claims, the MIA literature's findings and the frontier's own comparisons,
  each a family adjusted by Benjamini-Yekutieli: false-discovery rate <= alpha (scipy's
  `false_discovery_control`).
Both are valid under any dependence between the p-values, as claims share units and models.
An adjusted verdict is the per-claim verdict where the adjusted p-value stays below alpha,
inconclusive otherwise; a decided claim of a family without a p-value is inconclusive once
adjusted.

Outside the families, with their per-claim verdicts kept: checks of privleak's own mechanisms
(role `check`), claims that are not `adjustable` (guarantees checked on every unit, certified
one-sided bounds, claims ruled inconclusive by missing data) and claims without an interval.

Power (`units_to_decide`): the units at which the claim's test, at its family's strictest level
(`strictest`: Holm's alpha / m, Benjamini-Yekutieli's alpha / (m H_m)), has 80 % power at the
observed effect, its standard error shrinking as 1 / sqrt(n) (normal approximation).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from privleak.claims.spec import CHECK, FRONTIER, INCONCLUSIVE, MIA, PRIMARY, VERDICTS
from privleak.errors import require

HOLM, BY = "holm", "fdr_by"
ADJUSTMENTS = (HOLM, BY)
POWER = 0.8
SATURATED = 100  # more than this many times the units: not decidable by more units


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
    return holm(p) if method == HOLM else stats.false_discovery_control(p, method="by")


def paper_key(claim_id: str) -> str:
    """A claim's paper key: its id's key before the first dot ("s2.pad_over_dist" -> "s2")."""
    return claim_id.split(".", 1)[0]


def family(claim_id: str, paper: str, role: str) -> str:
    """A claim's multiplicity family: "<paper key> primary" or "<paper key> secondary" for the
    papers' claims, "mia" for the MIA literature's, "frontier" for the frontier's own, "" for a
    check (no family)."""
    if role == CHECK:
        return ""
    if paper == MIA:
        return "mia"
    if paper == FRONTIER:
        return "frontier"
    return f"{paper_key(claim_id)} {role}"


def families(frame: pd.DataFrame) -> pd.Series:
    """`family` of every row of a claims frame (id, paper, role)."""
    return pd.Series([family(r.id, r.paper, r.role) for r in frame.itertuples()], frame.index)


def adjustment(name: str) -> str:
    """A family's adjustment: Holm over a paper's primary claims, Benjamini-Yekutieli else."""
    return HOLM if name.endswith(" " + PRIMARY) else BY


def per_group(
    frame: pd.DataFrame, groups: pd.Series, column: str, values: tuple[str, ...] = VERDICTS
) -> dict[str, dict[str, int]]:
    """{group: {value: count}} of one column of a claims frame, zeros included, every group
    label of `groups` (a label per row; "" rows left out)."""
    return {
        key: {v: int((frame.loc[groups == key, column] == v).sum()) for v in values}
        for key in sorted(k for k in groups.unique() if k)
    }


def per_paper(
    frame: pd.DataFrame, column: str, values: tuple[str, ...] = VERDICTS
) -> dict[str, dict[str, int]]:
    """{paper key: {value: count}} of one column of a claims frame."""
    return per_group(frame, frame["id"].map(paper_key), column, values)


def strictest(alpha: float, m: int, method: str) -> float:
    """A family's strictest per-claim level: Holm's alpha / m, Benjamini-Yekutieli's
    alpha / (m (1 + 1/2 + ... + 1/m))."""
    return alpha / m if method == HOLM else alpha / (m * sum(1 / i for i in range(1, m + 1)))


def units_to_decide(effect: float, null: float, se: float, n: int, level: float) -> int | None:
    """The units at which a two-sided test at `level` has 80 % power at the observed effect,
    the standard error `se` (of n units) shrinking as 1 / sqrt(n): n (z_{1 - level/2} + z_0.8)^2
    se^2 / (effect - null)^2, rounded up, at least n. None without a standard error or where the
    effect sits at the null (no number of units decides it)."""
    if n < 2 or not (math.isfinite(se) and se > 0 and math.isfinite(effect)):
        return None
    gap = abs(effect - null)
    if gap == 0:
        return None
    z = stats.norm.isf(level / 2) + stats.norm.ppf(POWER)
    return max(n, math.ceil(n * (z * se / gap) ** 2))


def adjusted(frame: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The claims frame (id, paper, role, effect, se, n, null, verdict, adjustable, p_value) with
    `family`, `adjustment` (holm or fdr_by), `adjusted` (the verdict after the family's
    adjustment), `level` (the family's `strictest`) and `units_to_decide` (80 % power at that
    level; NaN where undefined)."""
    require(0 < alpha < 0.5, f"claims.alpha must be in (0, 0.5); got {alpha!r}")
    out = frame.copy()
    out["family"] = families(out)
    tested = out["adjustable"] & (out["family"] != "")
    out.loc[~tested, "p_value"] = math.nan
    out["adjustment"] = [adjustment(f) if f else "" for f in out["family"]]
    undecidable = tested & out["p_value"].isna() & (out["verdict"] != INCONCLUSIVE)
    out["adjusted"] = out["verdict"].where(~undecidable, INCONCLUSIVE)
    sizes = out[tested].groupby("family")["id"].count()
    out["level"] = [strictest(alpha, int(sizes[f]), adjustment(f)) if f in sizes else math.nan
                    for f in out["family"]]  # fmt: skip
    for name, members in out[out["p_value"].notna()].groupby("family"):
        kept = adjusted_p_values(members["p_value"].to_numpy(), adjustment(name)) < alpha
        out.loc[members.index[~kept], "adjusted"] = INCONCLUSIVE
    out["units_to_decide"] = [
        units_to_decide(r.effect, r.null, r.se, r.n, r.level) if math.isfinite(r.level) else None
        for r in out.itertuples()
    ]
    out["units_to_decide"] = out["units_to_decide"].astype("Int64")
    return out


def adjusted_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{family: {verdict: count}} of an `adjusted` frame's adjusted verdicts, zeros included."""
    return per_group(frame, frame["family"], "adjusted")
