"""Summaries of ESP values (Tiwari & Suh §5): leak curves over the number of samples X, and the
trend types of an ESP series over model sizes or prefix lengths. numpy only, so render stages
need no model code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privleak.errors import require

TRENDS = (
    "Straight Dec",
    "U-Shaped Dec",
    "Inverted-U Dec",
    "Straight Inc",
    "U-Shaped Inc",
    "Inverted-U Inc",
)
FLAT = "Flat"


# ---------------------------------------------------------------- leak curves


def leaked_paper(log_esps: np.ndarray, xs: Sequence[int]) -> np.ndarray:
    """[len(xs)] fraction of sequences counted as leaked within X samples the paper's way,
    ESP >= 1/X (§5.2 says "greater than"; with a strict > a greedy ESP of 1 would not count at
    X = 1, yet the paper's greedy line is flat at the extraction rate, so ties count)."""
    log_esps = _check_esps(log_esps)
    return np.array([float(np.mean(log_esps >= -math.log(x))) for x in _check_xs(xs)])


def leaked_expected(log_esps: np.ndarray, xs: Sequence[int]) -> np.ndarray:
    """[len(xs)] expected fraction leaked at least once in X independent samples:
    mean of 1 - (1 - ESP)^X, computed as -expm1(X log1p(-ESP))."""
    log_esps = _check_esps(log_esps)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_miss = np.log1p(-np.exp(log_esps))  # log(1 - ESP), -inf when ESP == 1
        return np.array([float(np.mean(-np.expm1(x * log_miss))) for x in _check_xs(xs)])


def _check_esps(log_esps) -> np.ndarray:
    log_esps = np.asarray(log_esps, dtype=float)
    require(log_esps.size >= 1, "the sequence set is empty; leak curves need >= 1 ESP")
    require(
        not np.isnan(log_esps).any() and (log_esps <= 1e-9).all(),
        "log ESPs must be <= 0 and not NaN",
    )
    return np.minimum(log_esps, 0.0)


def _check_xs(xs: Sequence[int]) -> list[int]:
    require(all(int(x) >= 1 for x in xs), f"sample counts X must be >= 1, got {list(xs)}")
    return [int(x) for x in xs]


# ---------------------------------------------------------------- trends


def classify_trend(series: Sequence[float]) -> tuple[str, ...]:
    """Trend types (Fig. 3 caption) of an ESP series over model sizes or prefix lengths.

    Dec if end < start, Inc if end > start. An interior point above both end points makes it
    Inverted-U, an interior point below both makes it U-shaped, neither makes it Straight. A zig-
    zag series has both an interior maximum and minimum and gets BOTH labels: this is how the
    paper's Table 4/5 columns sum to more than 100%. end == start (e.g. two zero ESPs) is FLAT,
    outside the six types. Works on ESPs or log ESPs (order is all that matters).
    """
    values = np.asarray(series, dtype=float)
    require(values.ndim == 1 and values.size >= 2, "a trend needs a series of >= 2 points")
    require(not np.isnan(values).any(), "a trend series must not contain NaN")
    start, end, inner = values[0], values[-1], values[1:-1]
    if end == start:
        return (FLAT,)
    direction = "Dec" if end < start else "Inc"
    labels = []
    if inner.size and inner.min() < min(start, end):
        labels.append(f"U-Shaped {direction}")
    if inner.size and inner.max() > max(start, end):
        labels.append(f"Inverted-U {direction}")
    return tuple(labels) or (f"Straight {direction}",)


def easier_with_smaller(series: Sequence[float]) -> bool:
    """True if some earlier point (smaller model / shorter prefix) beats the last one."""
    values = np.asarray(series, dtype=float)
    require(values.size >= 2, "a trend needs a series of >= 2 points")
    return bool(values[:-1].max() > values[-1])
