"""Findings meet the catalogue: each estimator's Finding names its Spec and fills its templates,
and `evaluate` turns every finding into a judged Claim."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from privleak.claims.catalogue import CATALOGUE
from privleak.claims.procedures import BINOMIAL_EXACT, TANGO
from privleak.claims.spec import CHECK, PRIMARY, ROLES, SECONDARY, Primary, Spec
from privleak.claims.stats import NAN, Estimate, bootstrap
from privleak.claims.verdicts import Claim, judge, number
from privleak.errors import require

NONE = Estimate(NAN, NAN, NAN, 0)  # the artifacts cannot give this effect


@dataclass(frozen=True)
class Finding:
    """An estimator's answer for one claim of Spec `spec` (a CATALOGUE key).

    fields: the values of the Spec's templates; missing: data the claim needs that the artifacts
    lack (the verdict is then inconclusive); note: a caveat of this finding; null: the null when
    the Spec leaves it to the data."""

    spec: str
    estimate: Estimate
    fields: Mapping[str, object] = field(default_factory=dict)
    missing: str = ""
    note: str = ""
    null: float | None = None


def bootstrapper(settings: Mapping) -> Callable[..., Estimate]:
    """`claims.bootstrap` with the params' claims block (n_boot, seed, alpha, min_units) bound,
    as every estimator takes it."""
    return partial(bootstrap, **{k: settings[k] for k in ("n_boot", "seed", "alpha", "min_units")})


def role(spec: Spec, fields: Mapping) -> tuple[str, Primary | None]:
    """A finding's role (check, primary or secondary) and the primary statement it tests."""
    if spec.check and spec.check.covers(fields):
        return CHECK, None
    if spec.primary and spec.primary.covers(fields):
        return PRIMARY, spec.primary
    return SECONDARY, None


def claim(finding: Finding, alpha: float = 0.05) -> Claim:
    """The judged Claim of one finding: its Spec's templates filled with the finding's fields,
    its role from privleak.claims.roles; alpha: the level of its interval."""
    require(finding.spec in CATALOGUE, f"no claim spec {finding.spec!r} in the catalogue")
    spec = CATALOGUE[finding.spec]
    require(
        (spec.null is None) != (finding.null is None),
        f"claim spec {finding.spec!r}: the null comes from the catalogue or the finding, not both",
    )
    fill = dict(finding.fields)
    kind, primary = role(spec, fill)
    check = f"check: {spec.check.reason}" if kind == CHECK else ""
    return judge(
        spec.id.format(**fill),
        paper=spec.paper,
        quote=spec.quote.format(**fill),
        where=spec.where,
        effect_name=spec.effect.format(**fill),
        direction=spec.direction,
        estimate=finding.estimate,
        unit=spec.unit.format(**fill),
        null=spec.null if finding.null is None else finding.null,
        missing=finding.missing,
        note="; ".join(text for text in (check, spec.note, finding.note) if text),
        spec=finding.spec,
        role=kind,
        primary=primary,
        alpha=alpha,
    )


def _signature(c: Claim) -> tuple | None:
    """What makes two claims one estimate: the same paper, units, procedure and null, and the same
    effect and interval to 6 significant digits, or their mirror image (the effect negated, the
    interval reflected). None where the match could be chance: no interval, or a binary test's
    few possible outcomes."""
    discrete = c.method in (TANGO, BINOMIAL_EXACT)
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)) or discrete:
        return None
    values = tuple(number(v) for v in (c.effect, c.ci_low, c.ci_high))
    mirrored = tuple(number(-v) for v in (c.effect, c.ci_high, c.ci_low))
    return (c.paper, c.units, c.method, c.null, min(values, mirrored))


def merged(claims: Sequence[Claim]) -> list[Claim]:
    """The claims with every set of the same estimate (`_signature`: identical or mirror images)
    made one claim: the first id in sorted order keeps its verdict and lists the others' ids,
    sentences and verdicts in `also` and its note (a mirror image's sentence, about the negated
    effect, may read the other way). A merged set's checks stay checks only if all of them are;
    a primary member makes the claim primary, with its statement."""
    sets: dict[tuple, list[Claim]] = {}
    for c in sorted(claims, key=lambda c: c.id):
        key = _signature(c)
        sets.setdefault(key if key is not None else ("alone", c.id), []).append(c)
    out = []
    for members in sets.values():
        kept, *others = members
        if others:
            listed = "; ".join(
                f"{o.id}" + (" (its mirror image)" if number(o.effect) != number(kept.effect)
                             else "") + (f", “{o.quote}”" if o.quote else "")
                + f", which it reads {o.verdict}"
                for o in others
            )  # fmt: skip
            roles = {c.role for c in members}
            role = kept.role if len(roles) == 1 else min(roles - {CHECK}, key=ROLES.index)
            lead = next((c for c in members if c.role == PRIMARY), kept)
            kept = replace(
                kept,
                also=", ".join(o.id for o in others),
                role=role,
                primary_quote=lead.primary_quote,
                primary_where=lead.primary_where,
                note="; ".join(t for t in (kept.note, f"the same estimate tests {listed}") if t),
            )
        out.append(kept)
    return out


def evaluate(findings: Iterable[Finding], alpha: float = 0.05) -> list[Claim]:
    """Every finding judged at (1 - alpha), one claim per estimate (`merged`). Every Spec of the
    catalogue must be answered at least once, so a claim cannot silently drop out of the table."""
    findings = list(findings)
    unanswered = sorted(set(CATALOGUE) - {f.spec for f in findings})
    require(not unanswered, f"claim specs without a finding: {', '.join(unanswered)}")
    return merged([claim(f, alpha) for f in findings])
