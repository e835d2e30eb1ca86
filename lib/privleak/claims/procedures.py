"""Small-sample procedures: each claim's interval and its p-value from one procedure fitted to the
effect type and the number of units (docs/design.md §8).

A percentile bootstrap undercovers at the 6-12 units many claims rest on
(benchmarks/bench_coverage.py), so the interval and the test come from:
- a mean over units (paired differences, per-unit trends): `t_mean` (Student's t with n - 1
  degrees of freedom on the units' values; with several rows per unit the mean over rows is a
  ratio estimator and its standard error the cluster-robust one, CR1, with G - 1 degrees of
  freedom over the G units) and `studentized` (the studentized bootstrap of the same mean), both
  of which must decide (`both`: t holds its coverage on heavy tails, the studentized bootstrap
  on skewed data; MEAN_BOTH).
- `tango`: paired binary outcomes, one pair per unit (differences in {-1, 0, 1}): Tango's score
  interval for the difference of paired proportions and the score test it inverts (McNemar's at
  0).
- `binomial_exact`: a share of units with a binary outcome: the Clopper-Pearson interval and the
  exact binomial test that it inverts.
- `welch`: a difference of two independent means: Welch's t with Satterthwaite's degrees of
  freedom.
- any other statistic (rank correlations, ratios of sums, a frontier's matched leakage, AUCs):
  `bootstrap_t`, the effect plus or minus a t quantile times the standard error of its bootstrap
  distribution, with degrees of freedom of the scarcest resampled axis minus one (units, the
  smallest stratum, or training runs: CROSSED_T where runs are crossed with units, its standard
  error scaled by sqrt(R / (R - 1)) over R runs), and where no
  runs are crossed the `percentile` interval of the same draws too, both of which must decide
  (GENERIC_BOTH). An effect known only between two certified bounds spans the bounds' own t
  intervals too (`Test.envelope`).

Each returns a `Test`, which gives the interval at any level and the p-value at any null by the
same procedure, so a claim's p-value is below alpha exactly when its interval excludes the null.
Pure numpy/scipy.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from privleak.errors import require

NAN = float("nan")
T_MEAN, CLUSTER_T, STUDENTIZED, PERCENTILE, TANGO, BINOMIAL_EXACT, WELCH = (
    "t",
    "cluster t",
    "studentized bootstrap",
    "percentile bootstrap",
    "Tango score (McNemar)",
    "exact binomial (Clopper-Pearson)",
    "Welch t",
)
BOOTSTRAP_T, CROSSED_T = "bootstrap-SE t", "bootstrap-SE t, runs x units"
# Both members must decide: the union of their intervals, the larger of their p-values.
MEAN_BOTH = "t and studentized bootstrap (both must decide)"
GENERIC_BOTH = "percentile and bootstrap-SE t (both must decide)"
IQR_OF_NORMAL = 1.3489795003921634  # the standard normal's interquartile range
LOG_SCALE = " (log scale)"  # appended to a procedure run on the log of a ratio
ROUNDING = 1e-12  # a standard error below this share of the values' scale is rounding: no spread
COVERAGE = Path(__file__).resolve().parents[3] / "benchmarks" / "coverage.csv"
"""benchmarks/bench_coverage.py's table: each procedure's coverage and false decisions per n."""


@cache
def _failing(path: Path = COVERAGE) -> dict[str, dict[int, bool]]:
    """{procedure: {n: whether it fails on some shape of the rule}} of the coverage table."""
    require(path.is_file(), f"{path}: no coverage table (run benchmarks/bench_coverage.py)")
    table: dict[str, dict[int, bool]] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle):
            if row["in_rule"] == "True":
                cells = table.setdefault(row["procedure"], {})
                n = int(row["n"])
                cells[n] = cells.get(n, False) or row["passes"] != "True"
    return table


def ruled_out(method: str, units: int) -> str:
    """Why a procedure's interval on `units` units cannot decide (its coverage-table cell at that
    n, or the nearest measured n below, fails on some data shape: coverage < 0.93 or false
    decisions above 0.05 beyond Monte-Carlo error), or "" where it holds. A procedure the table
    does not measure (an exact or analytic one it calls safe by construction) is never ruled
    out."""
    cells = _failing().get(method)
    if cells is None:
        return ""
    measured = [n for n in cells if n <= units]
    if not measured:
        return f"bench_coverage measures the {method} from {min(cells)} units only"
    at = max(measured)
    if cells[at]:
        return f"the {method} fails bench_coverage at {at} units (coverage or false decisions)"
    return ""


@dataclass(frozen=True)
class Test:
    """A procedure's sufficient numbers: the effect, and for t-type procedures its standard
    error and degrees of freedom; for the exact sign test the discordant pairs favouring the
    second setting (`wins`) and the first (`losses`) out of `pairs`; for the exact binomial test
    the units with the outcome (`wins`) out of `pairs`; for the studentized bootstrap the sorted
    pivots (effect* - effect) / se* of its resamples. `resamples`: the bootstrap draws behind a
    bootstrap standard error or the pivots (0: an analytic procedure)."""

    method: str
    effect: float
    se: float = NAN
    df: float = NAN
    wins: int = 0
    losses: int = 0
    pairs: int = 0
    resamples: int = 0
    log_scale: bool = False  # effect and se are of the log of the claim's (positive) effect
    # (centre, se) pairs whose t intervals the interval also spans: bounds of an effect known
    # only between two certified bounds (the frontier's noisy laws)
    envelope: tuple[tuple[float, float], ...] = ()
    pivots: tuple[float, ...] = ()  # sorted: the studentized pivots, or the percentile's draws
    members: tuple[Test, ...] = ()  # a union's procedures, each of which must decide
    # the effect's parameter space (a correlation's [-1, 1], a difference of shares'): the
    # interval is cut to it, which keeps its coverage and changes no p-value of a null inside it
    bounds: tuple[float, float] = (-math.inf, math.inf)

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 - alpha) interval of the effect (on its own scale: exponentiated where the
        procedure ran on the log scale), cut to `bounds`."""
        low, high = self._uncut_interval(alpha)
        return max(low, self.bounds[0]), min(high, self.bounds[1])

    def _uncut_interval(self, alpha: float) -> tuple[float, float]:
        if self.log_scale:
            low, high = replace(self, log_scale=False)._uncut_interval(alpha)
            return math.exp(low), math.exp(high)
        if self.members:
            ends = [member.interval(alpha) for member in self.members]
            return min(low for low, _ in ends), max(high for _, high in ends)
        if self.method == PERCENTILE:  # the nulls whose p-value is at least alpha
            k = math.ceil(alpha * len(self.pivots) / 2)
            return self.pivots[k - 1], self.pivots[-k]
        if self.method == TANGO:
            return _tango_interval(self.wins, self.losses, self.pairs, alpha)
        if self.method == BINOMIAL_EXACT:
            return _clopper_pearson(self.wins, self.pairs, alpha)
        if self.method == STUDENTIZED:  # the nulls whose p-value is at least alpha
            k = math.ceil(alpha * len(self.pivots) / 2)
            upper, lower = self.pivots[-k], self.pivots[k - 1]
            return self.effect - upper * self.se, self.effect - lower * self.se
        quantile = float(stats.t.isf(alpha / 2, self.df))
        pairs = ((self.effect, self.se), *self.envelope)
        return min(c - quantile * se for c, se in pairs), max(c + quantile * se for c, se in pairs)

    def p_value(self, null: float) -> float:
        """The two-sided p-value of effect = null by the same procedure as `interval` (NaN where
        the procedure has no test of that null). A union's is its members' largest, or 1 where
        the null lies inside the union at that level: members excluding it on opposite sides
        never decide (the union's interval holds it at every level)."""
        if self.log_scale:
            return replace(self, log_scale=False).p_value(math.log(null)) if null > 0 else NAN
        if self.members:
            largest = max(member.p_value(null) for member in self.members)
            if not 0 < largest < 1:
                return largest
            # just above the largest p-value every member excludes the null: on one side?
            sides = {member.side(null) for member in self.members}
            return largest if sides in ({1}, {-1}) else 1.0
        if self.method == BINOMIAL_EXACT:
            return _central_binomial_p(self.wins, self.pairs, null) if 0 < null < 1 else NAN
        if self.method == TANGO:
            z = _tango_z(self.wins, self.losses, self.pairs, null) if -1 < null < 1 else NAN
            return float(2 * stats.norm.sf(abs(z))) if math.isfinite(z) else NAN
        if not (math.isfinite(null) and math.isfinite(self.effect)):
            return NAN
        if self.method in (STUDENTIZED, PERCENTILE):  # twice the smaller tail beyond the null
            pivots = np.asarray(self.pivots)
            t = (self.effect - null) / self.se if self.method == STUDENTIZED else null
            tail = min(int((pivots >= t).sum()), int((pivots <= t).sum())) / pivots.size
            return float(min(1.0, 2 * tail))
        # the interval excludes the null once every pair's t interval does, on one side
        if self.side(null) == 0:
            return 1.0
        distances = [_distance(c, null, se) for c, se in ((self.effect, self.se), *self.envelope)]
        return float(2 * stats.t.sf(min(abs(d) for d in distances), self.df))

    def side(self, null: float) -> int:
        """Where the null lies from the intervals that exclude it, at every level at which they
        do: +1 below them (the effect above the null), -1 above them, 0 where no interval
        excludes it on one side (a t envelope straddling the null, a null at the draws' centre).
        Read off the procedure's own statistic, not an inverted interval: a p-value of 1e-16
        would not survive the inversion."""
        if self.log_scale:
            return replace(self, log_scale=False).side(math.log(null)) if null > 0 else 0
        if self.members:
            sides = {member.side(null) for member in self.members}
            return sides.pop() if len(sides) == 1 else 0
        if self.method in (STUDENTIZED, PERCENTILE):
            pivots = np.asarray(self.pivots)
            t = (self.effect - null) / self.se if self.method == STUDENTIZED else null
            above, below = int((pivots > t).sum()), int((pivots < t).sum())
            if self.method == PERCENTILE:  # the null below most draws: the interval above it
                return int(np.sign(above - below))
            return int(np.sign(below - above))  # t beyond most pivots: the effect above the null
        if self.method in (TANGO, BINOMIAL_EXACT):
            return int(np.sign(self.effect - null))
        distances = [_distance(c, null, se) for c, se in ((self.effect, self.se), *self.envelope)]
        if all(d > 0 for d in distances):
            return 1
        return -1 if all(d < 0 for d in distances) else 0

    def monte_carlo_error(self, alpha: float) -> float:
        """The Monte-Carlo standard error of an interval endpoint over `resamples` draws: for a
        bootstrap standard error, the t quantile times se / sqrt(2 (B - 1)) (normal theory); for
        the studentized or percentile quantiles, half the spread of the order statistics one
        binomial standard deviation of the quantile's rank either side (times se for pivots),
        the larger of the two ends; a union's largest; 0 for an analytic procedure."""
        if self.members:
            return max(member.monte_carlo_error(alpha) for member in self.members)
        if not self.resamples:
            return 0.0
        if self.method in (STUDENTIZED, PERCENTILE):
            pivots, b = self.pivots, len(self.pivots)
            k = math.ceil(alpha * b / 2)
            spread = max(1, math.ceil(math.sqrt(b * (alpha / 2) * (1 - alpha / 2))))
            ends = [
                pivots[min(rank + spread, b - 1)] - pivots[max(rank - spread, 0)]
                for rank in (k - 1, b - k)
            ]
            scale = self.se if self.method == STUDENTIZED else 1.0
            return scale * max(ends) / 2
        quantile = float(stats.t.isf(alpha / 2, self.df))
        return quantile * self.se / math.sqrt(2 * (self.resamples - 1))

    def negated(self) -> Test:
        """The same procedure on the negated effect (a ratio's inverse on the log scale)."""
        return replace(
            self,
            effect=-self.effect,
            envelope=tuple((-c, se) for c, se in self.envelope),
            pivots=tuple(sorted(-p for p in self.pivots)),
            members=tuple(member.negated() for member in self.members),
            bounds=_inverse(self.bounds) if self.log_scale else (-self.bounds[1], -self.bounds[0]),
        )


def _inverse(bounds: tuple[float, float]) -> tuple[float, float]:
    """The bounds of 1 / x for x within positive `bounds` (1 / 0 read as infinity)."""
    low, high = bounds
    return 1 / high if high > 0 else 0.0, 1 / low if low > 0 else math.inf


def _distance(centre: float, null: float, se: float) -> float:
    """(centre - null) / se, with a zero standard error (an exact difference) at 0 or +-inf."""
    if se > 0:
        return (centre - null) / se
    return 0.0 if centre == null else math.copysign(math.inf, centre - null)


def _central_binomial_p(successes: int, trials: int, share: float) -> float:
    """Twice the smaller exact binomial tail of `successes` out of `trials` at `share`, capped at
    1: the two-sided test that the Clopper-Pearson interval inverts."""
    tail = min(
        stats.binom.cdf(successes, trials, share), stats.binom.sf(successes - 1, trials, share)
    )
    return float(min(1.0, 2 * tail))


def _clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """The exact (1 - alpha) interval of a binomial proportion (Clopper & Pearson 1934)."""
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    high = (
        1.0 if successes == trials else stats.beta.isf(alpha / 2, successes + 1, trials - successes)
    )
    return float(low), float(high)


def _codes(values: np.ndarray, units: np.ndarray | None) -> np.ndarray:
    """Each row's unit, numbered 0..G-1 (every row its own unit without `units`)."""
    return np.arange(values.size) if units is None else np.unique(units, return_inverse=True)[1]


def t_mean(values: np.ndarray, units: np.ndarray | None = None) -> Test | str:
    """The mean of `values` [rows] (a ratio estimator when `units` puts several rows in a unit)
    and its t test over units; a string saying why there is none (fewer than 2 units, no spread).
    units: an integer label per row (default: every row its own unit)."""
    values = np.asarray(values, dtype=float)
    codes = _codes(values, units)
    units = int(codes.max()) + 1 if values.size else 0
    if units < 2:
        return f"{units} units: no t interval"
    effect = float(values.mean())
    sums = np.bincount(codes, weights=values - effect, minlength=units)  # [units]
    variance = units / (units - 1) * float((sums**2).sum()) / values.size**2
    if math.sqrt(variance) <= ROUNDING * float(np.abs(values).max()):
        return f"all {units} units give the same value: no interval"
    method = T_MEAN if units == values.size else CLUSTER_T
    return Test(method, effect, se=math.sqrt(variance), df=units - 1)


def studentized(
    values: np.ndarray, units: np.ndarray | None, n_boot: int, seed: int, alpha: float
) -> Test | str:
    """The mean of `values` [rows] over `units` (as in `t_mean`) and its studentized
    bootstrap: units resampled whole, each resample's pivot (mean* - mean) / se* with the
    cluster-robust se* of `t_mean`; the interval and p-value invert the pivots' distribution
    (equal tails). A string saying why where the pivots cannot give a finite (1 - alpha) interval
    (resamples without spread: se* = 0)."""
    analytic = t_mean(values, units)
    if isinstance(analytic, str):
        return analytic
    values = np.asarray(values, dtype=float)
    codes = _codes(values, units)
    sums, sizes = np.bincount(codes, weights=values), np.bincount(codes).astype(float)
    units = sums.size
    drawn = np.random.default_rng(seed).integers(0, units, (n_boot, units))  # [B, units]
    s, n = sums[drawn], sizes[drawn]
    means = s.sum(1) / n.sum(1)  # [B]
    se = np.sqrt(units / (units - 1) * ((s - means[:, None] * n) ** 2).sum(1)) / n.sum(1)
    shift = means - analytic.effect
    spread = se > ROUNDING * np.abs(values).max()  # a resample without spread: pivot 0 or +-inf
    with np.errstate(divide="ignore", invalid="ignore"):
        pivots = np.where(spread, shift / se, np.where(shift == 0, 0.0, np.sign(shift) * np.inf))
    test = Test(STUDENTIZED, analytic.effect, se=analytic.se, df=analytic.df,
                resamples=n_boot, pivots=tuple(np.sort(pivots).tolist()))  # fmt: skip
    low, high = test.interval(alpha)
    if not (math.isfinite(low) and math.isfinite(high)):
        return "resamples without spread leave the studentized pivots no finite interval"
    return test


def mean_both(
    values: np.ndarray, units: np.ndarray | None, n_boot: int, seed: int, alpha: float
) -> Test | str:
    """A mean over units by `t_mean` and `studentized`, both of which must decide (MEAN_BOTH); t
    alone where resamples without spread leave the studentized bootstrap no interval."""
    t = t_mean(values, units)
    pivoted = studentized(values, units, n_boot, seed, alpha)
    return t if isinstance(pivoted, str) else both(MEAN_BOTH, t, pivoted)


def tango(differences: np.ndarray) -> Test | str:
    """Paired binary outcomes, one pair per unit: `differences` [units] in {-1, 0, 1} (second
    setting minus first). The mean difference and Tango's score interval, which inverts the score
    test of a difference of paired proportions (at 0, McNemar's test; Tango 1998)."""
    differences = np.asarray(differences, dtype=float)
    require(
        bool(np.isin(differences, (-1.0, 0.0, 1.0)).all()),
        "a paired binary test needs paired binary outcomes: differences in {-1, 0, 1}",
    )
    wins, losses = int((differences == 1).sum()), int((differences == -1).sum())
    if wins + losses == 0:
        return f"no discordant pair among {differences.size}: no interval"
    return Test(TANGO, float(differences.mean()), wins=wins, losses=losses,
                pairs=int(differences.size))  # fmt: skip


def _tango_z(wins: int, losses: int, pairs: int, delta: float) -> float:
    """Tango's score statistic for a paired difference delta: (b - c - n delta) / sqrt(n (2 q +
    delta (1 - delta))), q the restricted maximum-likelihood share of (0, 1) pairs."""
    a = 2 * pairs
    b = -wins - losses + (2 * pairs - wins + losses) * delta
    c = -losses * delta * (1 - delta)
    q = (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)
    variance = pairs * (2 * q + delta * (1 - delta))
    gap = wins - losses - pairs * delta
    if variance > 0:
        return gap / math.sqrt(variance)
    return 0.0 if gap == 0 else math.copysign(math.inf, gap)  # at delta = +-1


def _tango_interval(wins: int, losses: int, pairs: int, alpha: float) -> tuple[float, float]:
    """The deltas whose score statistic stays within the normal's (1 - alpha) quantiles (the
    statistic falls as delta grows)."""
    quantile = float(stats.norm.isf(alpha / 2))
    effect = (wins - losses) / pairs
    edge = 1 - 1e-12

    def root(target: float, lo: float, hi: float) -> float:
        f = lambda d: _tango_z(wins, losses, pairs, d) - target  # noqa: E731
        return lo if f(lo) <= 0 else hi if f(hi) >= 0 else optimize.brentq(f, lo, hi)

    return root(quantile, -edge, effect), root(-quantile, effect, edge)


def percentile(effect: float, draws: np.ndarray) -> Test | str:
    """`effect` and its bootstrap `draws` [B]: the percentile interval and the test that inverts
    it (twice the smaller share of draws beyond the null)."""
    draws = np.asarray(draws, dtype=float)
    if draws.size < 2 or not np.isfinite(draws).all():
        return "no finite bootstrap distribution: no interval"
    return Test(PERCENTILE, float(effect), se=float(draws.std(ddof=1)), resamples=int(draws.size),
                pivots=tuple(np.sort(draws).tolist()))  # fmt: skip


def both(method: str, *members: Test | str) -> Test | str:
    """A union of procedures that must all decide: their intervals' union, their largest
    p-value; the first member's reason where one gives no test."""
    reason = next((m for m in members if isinstance(m, str)), None)
    if reason is not None:
        return reason
    first = members[0]
    return Test(method, first.effect, se=first.se, df=first.df, members=tuple(members),
                resamples=max(m.resamples for m in members))  # fmt: skip


def binomial_exact(outcomes: np.ndarray) -> Test | str:
    """A share of units with a binary outcome: `outcomes` [units] in {0, 1}; its exact test."""
    outcomes = np.asarray(outcomes, dtype=float)
    require(
        bool(np.isin(outcomes, (0.0, 1.0)).all()),
        "an exact binomial test needs binary outcomes: values in {0, 1}",
    )
    if outcomes.size < 2:
        return f"{outcomes.size} units: no interval"
    return Test(BINOMIAL_EXACT, float(outcomes.mean()), wins=int(outcomes.sum()),
                pairs=int(outcomes.size))  # fmt: skip


def welch(first: np.ndarray, second: np.ndarray) -> Test | str:
    """mean(first) - mean(second) of two independent samples and Welch's t test."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if min(first.size, second.size) < 2:
        return f"samples of {first.size} and {second.size}: no Welch interval"
    v1, v2 = first.var(ddof=1) / first.size, second.var(ddof=1) / second.size
    scale = max(float(np.abs(first).max()), float(np.abs(second).max()))
    if math.sqrt(v1 + v2) <= ROUNDING * scale:
        return "no spread in either sample: no interval"
    df = (v1 + v2) ** 2 / (v1**2 / (first.size - 1) + v2**2 / (second.size - 1))
    effect = float(first.mean() - second.mean())
    return Test(WELCH, effect, se=math.sqrt(v1 + v2), df=float(df))


def bootstrap_t(
    effect: float, draws: np.ndarray, df: int, min_share: float = 1.0, runs: int = 0
) -> Test | str:
    """`effect` and the standard error of its bootstrap `draws` [B], with `df` degrees of freedom
    (the scarcest resampled axis minus one), when at least `min_share` of the draws are finite:
    their standard deviation where every draw is a number, or where some are infinite (a ratio
    whose denominator a resample missed) the interquartile range of all of them over 1.349, the
    normal's (NaN draws, which have no value, left out). runs: the training runs the draws
    resampled crossed with units (CROSSED_T; 0: none). Resampling R runs with replacement gives
    the runs' share of the variance times (R - 1) / R (the plug-in variance of R values), which
    no longer vanishes once the units are many, so the standard error is scaled by
    sqrt(R / (R - 1)): the t reference on R - 1 degrees of freedom then has the unbiased
    variance it assumes (slightly conservative in the units' share, scaled alike)."""
    draws = np.asarray(draws, dtype=float)
    finite, valued = draws[np.isfinite(draws)], draws[~np.isnan(draws)]
    if df < 1:
        return f"{df} degrees of freedom: no interval"
    if finite.size < max(2, min_share * draws.size):
        missed = draws.size - finite.size
        return f"{missed} of {draws.size} resamples give no finite effect: no interval"
    if valued.size > finite.size:
        quartiles = np.quantile(np.sort(valued), [0.25, 0.75], method="inverted_cdf")
        se = float(quartiles[1] - quartiles[0]) / IQR_OF_NORMAL
    else:
        se = float(finite.std(ddof=1))
    if se <= ROUNDING * float(np.abs(finite).max()):
        return f"all {finite.size} resamples give the same effect: no interval"
    require(runs != 1, "bootstrap_t: one training run crosses nothing (runs is 0 or >= 2)")
    if runs:
        se *= math.sqrt(runs / (runs - 1))
    method = CROSSED_T if runs else BOOTSTRAP_T
    return Test(method, float(effect), se=se, df=float(df), resamples=int(finite.size))
