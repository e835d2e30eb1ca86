"""Verdicts: a Claim record per paper sentence, judged from its Estimate, and the claims frame
(privleak.claims.tables renders it as metrics JSON and the markdown page).

A claim is *reproduced* when the effect's interval excludes the null on the paper's side,
*contradicted* when it excludes it on the other side, *inconclusive* otherwise (docs/design.md §8).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

import pandas as pd

from privleak.claims.procedures import ruled_out
from privleak.claims.spec import (
    CONTRADICTED,
    INCONCLUSIVE,
    REPRODUCED,
    ROLES,
    SECONDARY,
    Primary,
)
from privleak.claims.stats import Estimate
from privleak.errors import require

DIRECTIONS = ("+", "-")  # the paper says the effect is above (+) or below (-) the null
CERTIFIED = "certified (every unit)"  # a guarantee checked on every unit, a certified bound
NO_PROCEDURE = "none"  # no interval
Z975 = 1.959963984540054


@dataclass(frozen=True)
class Claim:
    """One paper sentence, the effect that tests it, and the verdict (docs/design.md §8)."""

    id: str
    paper: str
    quote: str
    where: str
    effect_name: str
    direction: str
    null: float
    effect: float
    ci_low: float
    ci_high: float
    units: str
    verdict: str
    note: str
    spec: str = ""  # the catalogue Spec it instantiates (privleak.claims.catalogue)
    # counted in its paper's multiplicity family: a resampled interval that decides the verdict
    # (not a certified bound or guarantee, not overruled by missing data)
    adjustable: bool = True
    # whether a decided verdict held when the run was redone on another machine's floats:
    # stable, fragile, unmeasured, or "not decided" (set by privleak.claims.stability.mark)
    stable: str = ""
    role: str = SECONDARY  # primary, secondary or check (privleak.claims.roles)
    primary_quote: str = ""  # the abstract's or conclusion's statement a primary claim tests
    primary_where: str = ""
    method: str = ""  # the procedure behind the interval and p-value (claims.procedures)
    p_value: float = math.nan  # two-sided, of effect = null, by that procedure
    se: float = math.nan  # the standard error the interval implies (for power)
    n: int = 0  # the units (the count that starts `units`)
    borderline: bool = False  # decided within 3 Monte-Carlo errors of the null
    also: str = ""  # the ids of the claims merged into this one: the same estimate (registry)


def verdict(low: float, high: float, direction: str, null: float = 0.0) -> str:
    """'reproduced' if [low, high] lies strictly on the paper's side of null, 'contradicted' if
    strictly on the other side, else 'inconclusive' (touching the null or no interval). A bound
    may be infinite (a lower bound alone, [low, inf), as for a ratio whose denominator is 0)."""
    require(direction in DIRECTIONS, f"direction must be one of {DIRECTIONS}; got {direction!r}")
    if math.isnan(low) or math.isnan(high) or low == high == math.inf or low == high == -math.inf:
        return INCONCLUSIVE
    above, below = low > null, high < null
    if direction == "-":
        above, below = below, above
    return REPRODUCED if above else CONTRADICTED if below else INCONCLUSIVE


def borderline(estimate: Estimate, null: float, alpha: float) -> bool:
    """Whether a decided interval's endpoint on the null's side lies within 3 Monte-Carlo standard
    errors of the null (`Test.monte_carlo_error`: the bootstrap's seed alone could move the
    verdict); never for analytic procedures. On the log scale for a log-scale procedure."""
    test = estimate.test
    if test is None or not test.resamples or not math.isfinite(estimate.low):
        return False
    low, high = estimate.low, estimate.high
    if test.log_scale:
        if not (null > 0 and low > 0):
            return False
        low, high, null = math.log(low), math.log(high), math.log(null)
    margin = min(abs(low - null), abs(high - null))
    return margin < 3 * test.monte_carlo_error(alpha)


def judge(
    claim_id: str,
    *,
    paper: str,
    quote: str,
    where: str,
    effect_name: str,
    direction: str,
    estimate: Estimate,
    unit: str,
    null: float = 0.0,
    missing: str = "",
    note: str = "",
    spec: str = "",
    role: str = SECONDARY,
    primary: Primary | None = None,
    alpha: float = 0.05,
) -> Claim:
    """The Claim record for `estimate`, judged by `verdict`, with the p-value of its procedure
    (`estimate.test`) at the null. `missing` names data the claim needs that the artifacts lack:
    the verdict is then inconclusive whatever the interval says, and the note tells what the
    interval alone would read. `note`: a caveat to keep with it. role: primary, secondary or
    check; primary: the abstract's or conclusion's statement a primary claim tests. A decided
    verdict whose (1 - alpha) interval lies within 3 Monte-Carlo errors of the null is marked
    borderline. A procedure's interval whose coverage-table cell fails (`procedures.ruled_out`) is
    inconclusive by rule."""
    require(role in ROLES, f"role must be one of {ROLES}; got {role!r}")
    ruled = verdict(estimate.low, estimate.high, direction, null)
    notes = [text for text in (note, estimate.note) if text]
    test = estimate.test
    unsafe = ruled_out(test.method, estimate.units) if test is not None and not missing else ""
    if unsafe:
        missing = f"an interval that keeps its coverage ({unsafe}): inconclusive by rule"
    if missing:
        alone = f"; the interval alone reads {ruled}" if math.isfinite(estimate.low) else ""
        notes.append(f"needs {missing}{alone}")
        ruled = INCONCLUSIVE
    near = ruled != INCONCLUSIVE and borderline(estimate, null, alpha)
    if near:
        notes.append(
            f"borderline: its interval lies within 3 Monte-Carlo errors of the null at "
            f"{estimate.test.resamples} resamples"
        )
    adjustable = not (missing or estimate.certified)
    return Claim(
        id=claim_id,
        paper=paper,
        quote=quote,
        where=where,
        effect_name=effect_name,
        direction=direction,
        null=float(null),
        effect=estimate.effect,
        ci_low=estimate.low,
        ci_high=estimate.high,
        units=f"{estimate.units} {unit}",
        verdict=ruled,
        note="; ".join(notes),
        spec=spec,
        adjustable=adjustable,
        role=role,
        primary_quote=primary.quote if primary else "",
        primary_where=primary.where if primary else "",
        method=test.method if test else CERTIFIED if estimate.certified else NO_PROCEDURE,
        p_value=test.p_value(null) if test and adjustable else math.nan,
        se=implied_se(estimate),
        n=estimate.units,
        borderline=near,
    )


def implied_se(estimate: Estimate) -> float:
    """The standard error the claim's interval implies on the effect's scale (half its width over
    z_{0.975}, or the t-type procedure's own), for power; NaN without an interval."""
    test = estimate.test
    if test is None or not math.isfinite(estimate.low) or not math.isfinite(estimate.high):
        return math.nan
    if test.log_scale or math.isnan(test.se):
        return (estimate.high - estimate.low) / (2 * Z975)
    return test.se


def number(value: float, digits: int = 6) -> float | None:
    """value rounded to `digits` significant digits (platform noise stays out of the files);
    None for NaN/inf, which JSON cannot hold."""
    return float(f"{value:.{digits}g}") if math.isfinite(value) else None


def _sorted(claims: Iterable[Claim]) -> list[Claim]:
    ordered = sorted(claims, key=lambda c: c.id)
    require(len({c.id for c in ordered}) == len(ordered), "claim ids must be unique")
    return ordered


def claims_frame(claims: Iterable[Claim]) -> pd.DataFrame:
    """One row per claim, sorted by id, numbers rounded to 6 significant digits (NaN: none)."""
    columns = [field.name for field in fields(Claim)]
    frame = pd.DataFrame([asdict(c) for c in _sorted(claims)], columns=columns)
    numbers = ("null", "effect", "ci_low", "ci_high", "p_value", "se")
    for column in numbers:
        frame[column] = [number(v) for v in frame[column]]
    return frame.astype({c: float for c in numbers})
