"""Leakage at matched utility, the Pareto set, and their paired bootstrap (docs/design.md §12).

A defense's sweep is a set of points (utility u_i, leakage l_i), the undefended system among them
(every defense's weakest setting). Both are expectations over units (the mean accuracy of the
answers, the mean number of secrets a response emits after their cues), so a deployment that
draws setting i with probability 1 - q and setting j with probability q has utility
(1 - q) u_i + q u_j and leakage (1 - q) l_i + q l_j exactly: what a defense can reach is the
convex hull of its points. Matched-utility leakage is the least leakage on that hull at utility
at least the target: the smallest over the settings that reach the target and over the mixtures
of a setting below it with one above it that reach it exactly. A curve none of whose settings
reaches the target gives NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privleak.claims.stats import NAN, Estimate
from privleak.errors import require

INTERVALS = ("percentile", "basic")
"""Interval methods over a statistic's resamples (BCa needs a jackknife of the curve fit)."""


@dataclass(frozen=True)
class Matched:
    """leakage: the least leakage at the target (NaN when no setting reaches it); mixture: it is
    a mixture of two settings rather than one setting."""

    leakage: float
    mixture: bool = False


def matched_leakage(utility: Sequence[float], leakage: Sequence[float], target: float) -> Matched:
    """The least leakage at utility >= target over the mixtures of one curve's points (module
    docstring). utility, leakage: [n] means, n >= 1, in any order."""
    u, v = np.asarray(utility, dtype=float), np.asarray(leakage, dtype=float)
    require(
        u.shape == v.shape and u.ndim == 1 and u.size >= 1,
        f"a curve needs matching utility and leakage lists; got {u.shape} and {v.shape}",
    )
    require(bool(np.isfinite(u).all() and np.isfinite(v).all()), "a curve point is not finite")
    reached = u >= target
    if not reached.any():
        return Matched(NAN)
    best, mixture = float(v[reached].min()), False
    for i in np.flatnonzero(~reached):
        for j in np.flatnonzero(reached):
            q = (target - u[i]) / (u[j] - u[i])
            mixed = float((1 - q) * v[i] + q * v[j])
            if mixed < best:
                best, mixture = mixed, True
    return Matched(best, mixture)


def pareto_set(utility: Sequence[float], leakage: Sequence[float]) -> list[int]:
    """Indices of the points no other point dominates (utility at least as high and leakage at
    least as low, one of them strictly), in input order. Equal points keep each other."""
    u, v = np.asarray(utility, dtype=float), np.asarray(leakage, dtype=float)
    require(u.shape == v.shape and u.ndim == 1, "give one leakage per utility")
    kept = []
    for i in range(u.size):
        better = (u >= u[i]) & (v <= v[i]) & ((u > u[i]) | (v < v[i]))
        if not better.any():
            kept.append(i)
    return kept


@dataclass(frozen=True)
class Units:
    """Per-unit values of every point: utility [P, U] and leakage [P, L] (P points; U utility
    units and L leakage units, the same units in the same order when `paired`)."""

    utility: np.ndarray
    leakage: np.ndarray
    paired: bool

    def __post_init__(self) -> None:
        require(self.utility.ndim == 2 and self.leakage.ndim == 2
                and self.utility.shape[0] == self.leakage.shape[0],
                "utility and leakage need one row per point")  # fmt: skip
        require(not self.paired or self.utility.shape[1] == self.leakage.shape[1],
                "paired units need as many utility as leakage columns")  # fmt: skip

    def draws(self, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """([n_boot, U], [n_boot, L]) unit indices: one draw of the units for every point, so
        every contrast is paired; paired units draw utility and leakage together."""
        rng = np.random.default_rng(seed)
        first = rng.integers(0, self.utility.shape[1], size=(n_boot, self.utility.shape[1]))
        if self.paired:
            return first, first
        return first, rng.integers(0, self.leakage.shape[1], size=(n_boot, self.leakage.shape[1]))


Curves = Mapping[str, Sequence[int]]
"""{defense: point indices from its most private setting to its weakest}"""


def matched_table(
    means_utility: np.ndarray,
    means_leakage: np.ndarray,
    curves: Curves,
    reference: int,
    share: float,
) -> dict[str, Matched]:
    """{defense: Matched} at target = share * the utility of point `reference` (the undefended
    system), from per-point means [P]."""
    target = share * float(means_utility[reference])
    return {
        name: matched_leakage(means_utility[list(i)], means_leakage[list(i)], target)
        for name, i in curves.items()
    }


def _interval(values: np.ndarray, effect: float, alpha: float, method: str,
              min_share: float) -> tuple[float, float, str]:  # fmt: skip
    """Percentile or basic interval of the finite resamples; none when fewer than min_share of
    them are finite (the curve misses the target too often)."""
    require(
        method in INTERVALS, f"frontier interval method must be one of {INTERVALS}; got {method!r}"
    )
    finite = values[np.isfinite(values)]
    if finite.size < min_share * values.size or not math.isfinite(effect):
        missed = values.size - finite.size
        return NAN, NAN, f"{missed} of {values.size} resamples miss the target utility: no interval"
    low, high = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    if method == "basic":
        low, high = 2 * effect - high, 2 * effect - low
    return float(low), float(high), ""


def resampled_matched(
    units: Units,
    curves: Curves,
    reference: int,
    share: float,
    *,
    n_boot: int,
    seed: int,
) -> tuple[dict[str, Matched], dict[str, np.ndarray]]:
    """(the matched leakage of every defense on the data, {defense: [n_boot] its value on each
    resample}); every defense sees the same resampled units, so differences are paired."""
    require(
        isinstance(n_boot, int) and n_boot >= 100, f"n_boot must be an int >= 100; got {n_boot!r}"
    )
    require(0 < share <= 1, f"frontier matched share must be in (0, 1]; got {share!r}")
    observed = matched_table(units.utility.mean(1), units.leakage.mean(1), curves, reference, share)
    first, second = units.draws(n_boot, seed)
    out = {name: np.empty(n_boot) for name in curves}
    for b in range(n_boot):
        table = matched_table(
            units.utility[:, first[b]].mean(1),
            units.leakage[:, second[b]].mean(1),
            curves,
            reference,
            share,
        )
        for name, value in table.items():
            out[name][b] = value.leakage
    return observed, out


def estimate(observed: float, resamples: np.ndarray, units: int, *, alpha: float, method: str,
             min_share: float = 0.95) -> Estimate:  # fmt: skip
    """An Estimate (effect, interval, units, note) from one statistic's resamples."""
    low, high, note = _interval(resamples, observed, alpha, method, min_share)
    return Estimate(observed, low, high, units, note)


def point_estimates(values: np.ndarray, draws: np.ndarray, *, alpha: float,
                    method: str) -> list[Estimate]:  # fmt: skip
    """Each point's mean over units [P, U] with its interval over the resampled units `draws`
    [n_boot, U] (shared by every point)."""
    means = values.mean(1)
    resampled = np.stack([values[:, d].mean(1) for d in draws], 1)  # [P, n_boot]
    return [estimate(float(m), r, values.shape[1], alpha=alpha, method=method)
            for m, r in zip(means, resampled, strict=True)]  # fmt: skip


def finite_or_null(value):
    """value with every non-finite float replaced by None, for strict JSON."""
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
