"""Findings meet the catalogue: each estimator's Finding names its Spec and fills its templates,
and `evaluate` turns every finding into a judged Claim."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial

from privleak.claims.catalogue import CATALOGUE
from privleak.claims.stats import NAN, Estimate, bootstrap
from privleak.claims.verdicts import Claim, judge
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
    """`claims.bootstrap` with the params' claims block (n_boot, seed, alpha, min_units,
    method) bound, as every estimator takes it."""
    return partial(
        bootstrap, **{k: settings[k] for k in ("n_boot", "seed", "alpha", "min_units", "method")}
    )


def claim(finding: Finding) -> Claim:
    """The judged Claim of one finding: its Spec's templates filled with the finding's fields."""
    require(finding.spec in CATALOGUE, f"no claim spec {finding.spec!r} in the catalogue")
    spec = CATALOGUE[finding.spec]
    require(
        (spec.null is None) != (finding.null is None),
        f"claim spec {finding.spec!r}: the null comes from the catalogue or the finding, not both",
    )
    fill = dict(finding.fields)
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
        note="; ".join(text for text in (spec.note, finding.note) if text),
        spec=finding.spec,
    )


def evaluate(findings: Iterable[Finding]) -> list[Claim]:
    """Every finding judged. Every Spec of the catalogue must be answered at least once, so a
    claim cannot silently drop out of the table."""
    findings = list(findings)
    unanswered = sorted(set(CATALOGUE) - {f.spec for f in findings})
    require(not unanswered, f"claim specs without a finding: {', '.join(unanswered)}")
    return [claim(f) for f in findings]
