"""Verdicts: a Claim record per paper sentence, judged from its Estimate, and the claims table in
its three forms (frame, metrics JSON, markdown page).

A claim is *reproduced* when the effect's interval excludes the null on the paper's side,
*contradicted* when it excludes it on the other side, *inconclusive* otherwise (docs/design.md §8).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields

import pandas as pd

from privleak.claims.multiplicity import (
    ADJUSTMENTS,
    adjusted,
    adjusted_counts,
    per_paper,
)
from privleak.claims.spec import (
    CONTRADICTED,
    DECIDED_MARKS,
    FRAGILE,
    INCONCLUSIVE,
    REPRODUCED,
    VERDICTS,
)
from privleak.claims.stats import Estimate
from privleak.errors import require

DIRECTIONS = ("+", "-")  # the paper says the effect is above (+) or below (-) the null
NO_SENTENCE = "no paper sentence: privleak's extension"  # a claim whose spec quotes nothing


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


def units_to_decide(estimate: Estimate, null: float = 0.0) -> int | None:
    """About how many units would make the interval exclude the null at the observed effect: the
    interval's half-width on the null's side shrinks as 1/sqrt(n), so it excludes the null once
    n' > n (h / |effect - null|)^2 (the next integer: an interval that touches the null does not
    exclude it), and at least the n there are. None without a resampled interval (fewer than 2
    units, no finite interval, a degenerate one) or without an observed effect (effect = null)."""
    effect, low, high, n = estimate.effect, estimate.low, estimate.high, estimate.units
    if n < 2 or not all(math.isfinite(v) for v in (effect, low, high)) or not low < high:
        return None
    gap = effect - null
    if gap == 0:
        return None
    half_width = effect - low if gap > 0 else high - effect
    return max(n, math.floor(n * (half_width / abs(gap)) ** 2) + 1)


def power_note(estimate: Estimate, unit: str, null: float = 0.0) -> str:
    """The inconclusive claim's note on what would decide it."""
    needed = units_to_decide(estimate, null)
    if needed is None:
        if estimate.units >= 2 and estimate.effect == null:
            return "no effect observed: no number of units decides it at this effect"
        return ""
    return (
        f"about {needed} {unit} would decide it at the observed effect (the interval narrows "
        f"as 1/sqrt(n); {estimate.units} now)"
    )


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
) -> Claim:
    """The Claim record for `estimate`, judged by `verdict`. `missing` names data the claim
    needs that the artifacts lack: the verdict is then inconclusive whatever the interval says,
    and the note tells what the interval alone would read. `note`: a caveat to keep with it. An
    inconclusive claim's note also says about how many units would decide it (`power_note`)."""
    ruled = verdict(estimate.low, estimate.high, direction, null)
    notes = [text for text in (note, estimate.note) if text]
    if missing:
        alone = f"; the interval alone reads {ruled}" if math.isfinite(estimate.low) else ""
        notes.append(f"needs {missing}{alone}")
        ruled = INCONCLUSIVE
    elif ruled == INCONCLUSIVE:
        notes.append(power_note(estimate, unit, null))
    notes = [text for text in notes if text]
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
        adjustable=not (missing or estimate.certified),
    )


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
    for column in ("null", "effect", "ci_low", "ci_high"):
        frame[column] = [number(v) for v in frame[column]]
    return frame.astype({c: float for c in ("null", "effect", "ci_low", "ci_high")})


def counts(claims: Iterable[Claim]) -> dict[str, int]:
    """{verdict: number of claims} over every verdict, zeros included."""
    found = [c.verdict for c in claims]
    return {v: found.count(v) for v in VERDICTS}


def judged_frame(claims: Iterable[Claim], alpha: float) -> pd.DataFrame:
    """`claims_frame` with each claim's p-value and its verdicts adjusted per paper
    (`privleak.claims.multiplicity`: `holm`, `fdr_by`)."""
    return adjusted(claims_frame(claims), alpha)


def metrics_json(claims: Iterable[Claim], alpha: float) -> str:
    """metrics/claims.json: per claim its effect, interval, verdict and adjusted verdicts (null
    where there is no number), counts per verdict, the total, and per adjustment each paper's
    counts."""
    frame = judged_frame(claims, alpha).set_index("id")
    ordered = _sorted(claims)
    per_claim = {
        c.id: {
            "effect": number(c.effect),
            "ci": [number(c.ci_low), number(c.ci_high)],
            "verdict": c.verdict,
            **{method: frame.at[c.id, method] for method in ADJUSTMENTS},
            "stable": c.stable,
        }
        for c in ordered
    }
    body = {
        "claims": per_claim,
        "counts": counts(ordered),
        "total": len(ordered),
        "adjusted": adjusted_counts(frame.reset_index()),
        "stability": stability_counts(frame.reset_index()),
    }
    return json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n"


def stability_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{paper key: {stable, fragile, unmeasured}}: the decided verdicts of a claims frame by
    their `stable` mark (privleak.claims.stability)."""
    decided = frame.assign(stable=frame["stable"].where(frame["verdict"] != INCONCLUSIVE))
    return per_paper(decided, "stable", DECIDED_MARKS)


def stability_lines(frame: pd.DataFrame) -> list[str]:
    """The decided verdicts of a claims frame, stable vs fragile per paper key, as markdown: a
    sentence, a table, and each fragile verdict with its note's reading of the rerun."""
    tallies = stability_counts(frame)
    lines = [
        "Decided verdicts rerun on another machine's floats (`make stability`, "
        "metrics/stability.json): stable when the rerun gave the same verdict, fragile when it "
        "moved, unmeasured when no rerun of this verdict is on record.",
        "",
        "| paper | stable | fragile | unmeasured |",
        "|---|---|---|---|",
        *(
            f"| {key} | " + " | ".join(str(t[mark]) for mark in DECIDED_MARKS) + " |"
            for key, t in tallies.items()
        ),
    ]
    fragile = frame[frame["stable"] == FRAGILE]
    if len(fragile):
        lines += ["", "Fragile decided verdicts:", ""]
        lines += [f"- **{row.id}** ({row.verdict}): {row.note}" for row in fragile.itertuples()]
    return lines


def _show(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "n/a"


def adjusted_lines(frame: pd.DataFrame) -> list[str]:
    """The adjusted counts of a `judged_frame` as a markdown table, a row per paper key."""
    tallies = adjusted_counts(frame)
    lines = [
        "| paper | per claim | Holm (family-wise) | Benjamini-Yekutieli (false discovery) |",
        "|---|---|---|---|",
    ]
    for key, raw in per_paper(frame, "verdict").items():
        cells = [raw, tallies["holm"][key], tallies["fdr_by"][key]]
        lines.append(
            f"| {key} | "
            + " | ".join(f"{c[REPRODUCED]} / {c[CONTRADICTED]} / {c[INCONCLUSIVE]}" for c in cells)
            + " |"
        )
    return lines


def markdown(claims: Sequence[Claim], alpha: float) -> str:
    """A readable page: counts, per-paper counts adjusted for multiplicity, stable vs fragile
    decided verdicts, the claim table (id, quote, effect [interval], verdict, adjusted verdicts,
    stability), then each claim's effect definition, units and note."""
    frame = judged_frame(claims, alpha)
    level = f"{100 * (1 - alpha):g} %"
    tally = ", ".join(f"{n} {v}" for v, n in counts(claims).items())
    lines = [
        "# Claims of S0, S1, S2, S3 and S4: verdicts from the cached artifacts",
        "",
        f"{len(frame)} claims: {tally}. Effect [{level} bootstrap interval over the units]; a "
        "claim is reproduced when the interval excludes the null on the paper's side "
        "(direction + or - of the null), contradicted when it excludes it on the other side.",
        "",
        "Reproduced / contradicted / inconclusive per paper, per claim and adjusted for the "
        f"paper's number of claims at the same {alpha:g} (docs/design.md §8): a decided verdict "
        "stays decided where its adjusted p-value (the test its interval implies) stays below "
        "alpha. Guarantees checked on every unit, certified one-sided bounds and claims overruled "
        "by missing data are outside the adjustment.",
        "",
        *adjusted_lines(frame),
        "",
        *stability_lines(frame),
        "",
        "| id | where | quote | direction vs null | effect [interval] | verdict | Holm | BY "
        "| floats |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        interval = f"{_show(row.effect)} [{_show(row.ci_low)}, {_show(row.ci_high)}]"
        quote = f"“{row.quote}”".replace("|", "\\|") if row.quote else NO_SENTENCE
        lines.append(
            f"| {row.id} | {row.where} | {quote} | {row.direction} {_show(row.null)} | "
            f"{interval} | **{row.verdict}** | {row.holm} | {row.fdr_by} | {row.stable} |"
        )
    lines += ["", "## Effects, units and notes", ""]
    for row in frame.itertuples():
        note = f" Note: {row.note}." if row.note else ""
        lines.append(f"- **{row.id}** ({row.paper}): {row.effect_name}. Units: {row.units}.{note}")
    return "\n".join(lines) + "\n"
