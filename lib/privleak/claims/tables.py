"""The claims table in its forms: the judged frame (per-claim and family-adjusted verdicts),
metrics/claims.json and the markdown page (figures/claims/claims.md), each leading with every
paper's primary claims, the checks of privleak's own mechanisms apart."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

import pandas as pd

from privleak.claims.multiplicity import (
    SATURATED,
    adjusted,
    adjusted_counts,
    per_group,
    per_paper,
)
from privleak.claims.procedures import CROSSED_T
from privleak.claims.roles import NOT_TESTED
from privleak.claims.spec import (
    CHECK,
    CHECK_OUTCOMES,
    CONTRADICTED,
    DECIDED_MARKS,
    FRAGILE,
    INCONCLUSIVE,
    PRIMARY,
    REPRODUCED,
    VERDICTS,
)
from privleak.claims.verdicts import Claim, claims_frame, number

NO_SENTENCE = "no paper sentence: privleak's extension"  # a claim whose spec quotes nothing
PAPER_KEYS = ("s0", "s1", "s2", "s3", "s4")


def judged_frame(claims: Iterable[Claim], alpha: float) -> pd.DataFrame:
    """`claims_frame` with each claim's family, its adjusted verdict and the units that would
    decide it at 80 % power (`privleak.claims.multiplicity.adjusted`); an undecided claim's note
    says how many (`power_note`)."""
    frame = adjusted(claims_frame(claims), alpha)
    frame["note"] = [
        "; ".join(t for t in (row.note, power_note(row)) if t) for row in frame.itertuples()
    ]
    return frame


def power_note(row) -> str:
    """What would decide a claim its family leaves inconclusive (and that no missing data
    overrules): the units at 80 % power at the family's strictest level, or that the effect
    sits at the null."""
    if row.adjusted != INCONCLUSIVE or not row.adjustable or not math.isfinite(row.level):
        return ""
    unit = row.units.split(" ", 1)[-1]
    if pd.isna(row.units_to_decide):
        if row.effect == row.null and math.isfinite(row.se):
            return "no effect observed: no number of units decides it at this effect"
        return ""
    if row.units_to_decide > SATURATED * row.n:
        return (f"more than {SATURATED} times the {row.n} {unit} would be needed at the observed "
                "effect: not decidable by more units")  # fmt: skip
    crossed = (
        "; a lower bound, as the training runs' share of the variance does not shrink with units"
        if row.method.startswith(CROSSED_T)
        else ""
    )
    return (
        f"about {row.units_to_decide} {unit} would decide it at 80 % power at its family's level "
        f"{row.level:.2g} (the standard error shrinking as 1/sqrt(n); {row.n} now{crossed})"
    )


def counts(claims: Iterable[Claim]) -> dict[str, int]:
    """{verdict: number of claims} over the papers' claims (checks left out), zeros included."""
    found = [c.verdict for c in claims if c.role != CHECK]
    return {v: found.count(v) for v in VERDICTS}


def primary_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{paper key: {verdict: count}} of each paper's primary claims, after Holm."""
    primary = frame[frame["role"] == PRIMARY]
    tally = per_paper(primary, "adjusted")
    return {key: tally.get(key, dict.fromkeys(VERDICTS, 0)) for key in PAPER_KEYS}


def check_counts(frame: pd.DataFrame) -> dict[str, int]:
    """{pass, fail, undecided}: the checks of privleak's own mechanisms."""
    outcomes = frame.loc[frame["role"] == CHECK, "verdict"].map(CHECK_OUTCOMES)
    return {o: int((outcomes == o).sum()) for o in CHECK_OUTCOMES.values()}


def stability_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{paper key: {stable, fragile, unmeasured}}: the decided verdicts of a claims frame (checks
    left out) by their `stable` mark (privleak.claims.stability)."""
    claims = frame[frame["role"] != CHECK]
    decided = claims.assign(stable=claims["stable"].where(claims["verdict"] != INCONCLUSIVE))
    return per_paper(decided, "stable", DECIDED_MARKS)


def _cell(value) -> object:
    if isinstance(value, float):
        return number(value)
    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def metrics_json(claims: Iterable[Claim], alpha: float) -> str:
    """metrics/claims.json: per claim its effect, interval, procedure, p-value, role, family,
    verdict, adjusted verdict, units to decide and merged ids (null where there is no number; a
    borderline mark is in claims.csv and the note, as it may move with the floats); the primary
    claims per paper;
    the checks; counts per verdict over the papers' claims; per family the adjusted counts; the
    stability counts."""
    frame = judged_frame(claims, alpha)
    per_claim = {
        row["id"]: {
            "effect": _cell(row["effect"]),
            "ci": [_cell(row["ci_low"]), _cell(row["ci_high"])],
            "method": row["method"],
            "p_value": _cell(row["p_value"]),
            "role": row["role"],
            "family": row["family"],
            "verdict": row["verdict"],
            "adjusted": row["adjusted"],
            "units_to_decide": _cell(row["units_to_decide"]),
            "also": row["also"],
            "stable": row["stable"],
        }
        for row in frame.to_dict("records")
    }
    body = {
        "claims": per_claim,
        "counts": counts(claims),
        "total": int((frame["role"] != CHECK).sum()),
        "primary": primary_counts(frame),
        "checks": check_counts(frame),
        "adjusted": adjusted_counts(frame),
        "stability": stability_counts(frame),
    }
    return json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n"


def _show(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) and math.isfinite(value) else "n/a"


def _tally(counted: dict[str, int]) -> str:
    return f"{counted[REPRODUCED]} / {counted[CONTRADICTED]} / {counted[INCONCLUSIVE]}"


def primary_lines(frame: pd.DataFrame) -> list[str]:
    """Each paper's primary claims after Holm, a row per paper, then every primary claim with
    the statement it tests, and the primary statements no claim tests."""
    tallies = primary_counts(frame)
    lines = [
        "| paper | primary claims | reproduced | contradicted | inconclusive |",
        "|---|---|---|---|---|",
        *(f"| {key} | {sum(t.values())} | {t[REPRODUCED]} | {t[CONTRADICTED]} | "
          f"{t[INCONCLUSIVE]} |" for key, t in tallies.items()),
        "",
        "| id | the statement it tests | where | effect [interval] | p | verdict | Holm |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in frame[frame["role"] == PRIMARY].itertuples():
        quote = _escaped(row.primary_quote)
        lines.append(
            f"| {row.id} | “{quote}” | {row.primary_where} | {_interval(row)} | "
            f"{_p(row.p_value)} | **{row.verdict}** | {row.adjusted} |"
        )
    lines += ["", "Primary statements that no claim tests:", ""]
    lines += [f"- {key}: “{text}” ({where})" for key, text, where in NOT_TESTED]
    return lines


def _escaped(text: str) -> str:
    """A table cell's text with its pipes escaped."""
    return text.replace("|", "\\|")


def _interval(row) -> str:
    return f"{_show(row.effect)} [{_show(row.ci_low)}, {_show(row.ci_high)}]"


def _p(value: float) -> str:
    return f"{value:.2g}" if isinstance(value, float) and math.isfinite(value) else "n/a"


def family_lines(frame: pd.DataFrame) -> list[str]:
    """The adjusted counts per family as a markdown table."""
    raw = per_group(frame, frame["family"], "verdict")
    lines = [
        "| family | adjustment | claims | per claim (R / C / I) | adjusted (R / C / I) |",
        "|---|---|---|---|---|",
    ]
    for name, adjusted_tally in adjusted_counts(frame).items():
        method = frame.loc[frame["family"] == name, "adjustment"].iloc[0]
        label = "Holm" if method == "holm" else "Benjamini-Yekutieli"
        lines.append(f"| {name} | {label} | {sum(adjusted_tally.values())} | "
                     f"{_tally(raw[name])} | {_tally(adjusted_tally)} |")  # fmt: skip
    return lines


def check_lines(frame: pd.DataFrame) -> list[str]:
    """The checks of privleak's own mechanisms: pass / fail / undecided with the bound."""
    checks = frame[frame["role"] == CHECK]
    lines = [
        "| id | what it checks | effect [bound] | outcome |",
        "|---|---|---|---|",
    ]
    for row in checks.itertuples():
        outcome = CHECK_OUTCOMES[row.verdict]
        what = f"{_escaped(row.effect_name)} ({row.direction} {_show(row.null)})"
        lines.append(f"| {row.id} | {what} | {_interval(row)} | **{outcome}** |")
    return lines


def stability_lines(frame: pd.DataFrame) -> list[str]:
    """The decided verdicts of a claims frame, stable vs fragile per paper key, as markdown: a
    sentence, a table, and each fragile verdict with its note's reading of the rerun."""
    tallies = stability_counts(frame)
    lines = [
        "Decided verdicts rerun on another machine's floats (`make stability`, "
        "metrics/stability.json): stable when the rerun gave the same verdict, fragile when it "
        "moved, unmeasured when no rerun of this verdict (this effect and this interval) is on "
        "record.",
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


def markdown(claims: Sequence[Claim], alpha: float) -> str:
    """A readable page: the primary claims per paper (after Holm), every family's adjusted
    counts, the checks, stability, the claim table (id, quote, effect [interval], procedure,
    p-value, verdict, adjusted verdict, units to decide, stability), then each claim's effect
    definition, units and note."""
    frame = judged_frame(claims, alpha)
    level = f"{100 * (1 - alpha):g} %"
    tally = ", ".join(f"{n} {v}" for v, n in counts(claims).items())
    checks = check_counts(frame)
    lines = [
        "# Claims of S0, S1, S2, S3 and S4: verdicts from the cached artifacts",
        "",
        f"{int((frame['role'] != CHECK).sum())} claims: {tally}; and "
        f"{sum(checks.values())} checks of privleak's own mechanisms "
        f"({', '.join(f'{n} {o}' for o, n in checks.items())}), counted apart. Effect "
        f"[{level} interval over the units, by the procedure named per claim: t over units, "
        "McNemar's exact test, Welch's t or a t interval on a bootstrap standard error with the "
        "scarcest axis' degrees of freedom]; a claim is reproduced when the interval excludes the "
        "null on the paper's side, contradicted when it excludes it on the other side.",
        "",
        "## Primary claims",
        "",
        "Each paper's primary claims are the statements of its abstract and conclusion, chosen "
        "from the paper text alone (privleak.claims.roles); verdicts after "
        f"Holm's adjustment over the paper's primary claims at {alpha:g}.",
        "",
        *primary_lines(frame),
        "",
        "## Every family, adjusted",
        "",
        "Holm over each paper's primary claims; Benjamini-Yekutieli over each paper's other "
        "claims, the MIA literature's and the frontier's (docs/design.md §8). R / C / I: "
        "reproduced / contradicted / inconclusive.",
        "",
        *family_lines(frame),
        "",
        "## Checks of privleak's own mechanisms",
        "",
        "Guarantees checked on every unit, audits of a stated ε, bounds that hold by algebra or "
        "arithmetic, comparisons that hold by construction: they pass or fail and are not "
        "counted among the papers' claims.",
        "",
        *check_lines(frame),
        "",
        "## Stability",
        "",
        *stability_lines(frame),
        "",
        "## Every claim",
        "",
        "| id | role | where | quote | direction vs null | effect [interval] | procedure | p | "
        "verdict | adjusted | units to decide (80 % power) | floats |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        quote = f"“{_escaped(row.quote)}”" if row.quote else NO_SENTENCE
        needed = "" if pd.isna(row.units_to_decide) else str(row.units_to_decide)
        lines.append(
            f"| {row.id} | {row.role} | {row.where} | {quote} | {row.direction} "
            f"{_show(row.null)} | {_interval(row)} | {row.method} | {_p(row.p_value)} | "
            f"**{row.verdict}** | {row.adjusted} | {needed} | {row.stable} |"
        )
    lines += ["", "## Effects, units and notes", ""]
    for row in frame.itertuples():
        note = f" Note: {row.note}." if row.note else ""
        lines.append(f"- **{row.id}** ({row.paper}): {row.effect_name}. Units: {row.units}.{note}")
    return "\n".join(lines) + "\n"
