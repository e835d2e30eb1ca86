"""Claims as data: the statistics core (`stats`), verdicts and the claims table (`verdicts`), the
declarative catalogue of paper sentences (`catalogue`) and one estimator module per paper
(`s0` ... `s4`), which turn cached artifacts into effects with intervals."""

from privleak.claims.stats import (
    METHODS,
    NAN,
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
from privleak.claims.verdicts import (
    CONTRADICTED,
    DIRECTIONS,
    INCONCLUSIVE,
    REPRODUCED,
    VERDICTS,
    Claim,
    claims_frame,
    counts,
    judge,
    markdown,
    metrics_json,
    verdict,
)

__all__ = [
    "CONTRADICTED",
    "DIRECTIONS",
    "INCONCLUSIVE",
    "METHODS",
    "NAN",
    "REPRODUCED",
    "VERDICTS",
    "Claim",
    "Estimate",
    "bootstrap",
    "claims_frame",
    "counts",
    "judge",
    "markdown",
    "mean_contrast",
    "metrics_json",
    "paired_differences",
    "settings_matrix",
    "slope",
    "spearman",
    "two_samples",
    "unit_trends",
    "verdict",
    "worst_case",
]
