"""Claims as data: the statistics core (`stats`, `procedures`), verdicts (`verdicts`), the claims
table in its forms (`tables`), the declarative catalogue of paper sentences (`catalogue`) with
each Spec's role (`roles`: primary claims, checks) and one estimator module per paper (`s0` ...
`s4`), which turn cached artifacts into effects with intervals."""

from privleak.claims.spec import CONTRADICTED, INCONCLUSIVE, REPRODUCED, VERDICTS
from privleak.claims.stats import (
    NAN,
    PLUS_MINUS_ONE,
    SHARE,
    UNBOUNDED,
    Estimate,
    bootstrap,
    mean_contrast,
    paired_differences,
    settings_matrix,
    slope,
    spearman,
    two_samples,
    unit_trends,
    worst_case,
)
from privleak.claims.tables import (
    counts,
    judged_frame,
    markdown,
    metrics_json,
    stability_lines,
)
from privleak.claims.verdicts import (
    DIRECTIONS,
    Claim,
    claims_frame,
    judge,
    verdict,
)

__all__ = [
    "CONTRADICTED",
    "DIRECTIONS",
    "INCONCLUSIVE",
    "NAN",
    "PLUS_MINUS_ONE",
    "REPRODUCED",
    "SHARE",
    "UNBOUNDED",
    "VERDICTS",
    "Claim",
    "Estimate",
    "bootstrap",
    "claims_frame",
    "counts",
    "judge",
    "judged_frame",
    "markdown",
    "mean_contrast",
    "metrics_json",
    "paired_differences",
    "settings_matrix",
    "slope",
    "spearman",
    "stability_lines",
    "two_samples",
    "unit_trends",
    "verdict",
    "worst_case",
]
