"""Coverage of the claims' intervals at the unit counts they use: every effect type's procedure
(`privleak.claims.procedures`) against the percentile bootstrap the claims used before, on data
shaped like the claims' (skewed, heavy-tailed, 0/1, paired, clustered, two-sample, rank
correlations, i.i.d. and over clustered 0/1 rows, runs crossed with units, differences of AUCs
over runs x members x non-members) with a known truth.

Per cell (effect type x data shape x units n x procedure):
    coverage        = the share of 95 % intervals that hold the true effect, with the truth away
                      from the null (half a standard deviation, or the binary cells' alternative);
    false decisions = the share of intervals that exclude the null when the truth is the null
                      (a reproduced or contradicted verdict where there is no effect).
A cell passes with coverage >= 0.93 and false decisions <= 0.05 within two Monte-Carlo standard
errors (sqrt(0.05 x 0.95 / reps): a procedure exactly at its nominal 5 % passes).
`privleak.claims.procedures.ruled_out` reads the committed table: a claim whose procedure fails at
its unit count (or the nearest measured count below) on some shape of the rule (all but the STRESS
shape, reported beside them) is inconclusive by rule (tests/test_claims_procedures.py checks it).

    .venv/bin/python benchmarks/bench_coverage.py [--claims figures/claims/claims.csv]
        [--reps 2000] [--out benchmarks/coverage.csv] [--types TYPE ...]

--claims adds the unit counts the claims use (per procedure) to the grid 6, 9, 12, 24, 50.
--types reruns only those effect types; the other types' rows already in --out are kept (their
claims marks redone from --claims; a count the claims use that they lack is named), so the table
can be rebuilt in parts at one --reps. Prints the table, writes it as CSV and lists the cells the
claims use that fail (their claims are inconclusive by rule).
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

from privleak.claims import procedures as pr
from privleak.claims.stats import spearman
from privleak.mia.metrics import crossed_bootstrap

ALPHA = 0.05
GRID = (6, 9, 12, 24, 50)
B_PERCENTILE = 1000
B_STUDENTIZED = 2000
B_SE = 1000
RUNS = 6  # training runs crossed with units (the family's seeds)
Interval = tuple[float, float]


# ------------------------------------------------------------------ data shapes (mean 0, sd 1)


def shape(name: str, rng: np.random.Generator, size) -> np.ndarray:
    if name == "normal":
        return rng.normal(size=size)
    if name == "skewed":  # exponential: skewness 2
        return rng.exponential(size=size) - 1.0
    if name == "very skewed":  # lognormal, sigma 1: skewness 6.2
        sd = math.sqrt((math.e - 1) * math.e)
        return (rng.lognormal(0.0, 1.0, size) - math.exp(0.5)) / sd
    if name == "heavy-tailed":  # Student t, 3 df
        return rng.standard_t(3, size) / math.sqrt(3)
    if name == "ternary":  # differences of paired 0/1 outcomes read as numbers: P(+-1) = 0.15
        return rng.choice([-1.0, 0.0, 1.0], size=size, p=[0.15, 0.7, 0.15]) / math.sqrt(0.3)
    raise ValueError(name)


SHAPES = ("normal", "skewed", "very skewed", "heavy-tailed", "ternary")
# A stress shape: reported, but outside the rule `procedures.ruled_out` applies. No procedure
# here keeps its coverage on a lognormal (skewness 6.2) at 50 units or fewer, so under the rule no
# mean could be decided at all; the claims' units are differences of bounded rates, counts and
# log-probabilities.
STRESS = ("very skewed",)


# ------------------------------------------------------------------ the old procedure


def percentile(draws: np.ndarray) -> Interval:
    low, high = np.quantile(draws, [ALPHA / 2, 1 - ALPHA / 2])
    return float(low), float(high)


def boot_means(x: np.ndarray, rng: np.random.Generator, b: int = B_PERCENTILE) -> np.ndarray:
    return x[rng.integers(0, x.size, (b, x.size))].mean(1)


def interval_of(test: pr.Test | str) -> Interval:
    return (math.nan, math.nan) if isinstance(test, str) else test.interval(ALPHA)


# ------------------------------------------------------------------ effect types


def both_means(t: pr.Test | str, pivoted: pr.Test | str) -> pr.Test | str:
    """`procedures.mean_both` from its two members, computed once for the cell."""
    return t if isinstance(pivoted, str) else pr.both(pr.MEAN_BOTH, t, pivoted)


def mean_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    x = shape(kind, rng, n) + shift
    seed = int(rng.integers(2**31))
    draws = boot_means(x, rng)
    t, pivoted = pr.t_mean(x), pr.studentized(x, None, B_STUDENTIZED, seed, ALPHA)
    return {
        "percentile": percentile(draws),
        pr.T_MEAN: interval_of(t),
        pr.STUDENTIZED: interval_of(pivoted),
        pr.MEAN_BOTH: interval_of(both_means(t, pivoted)),
        # the frontier's matched leakage at one setting is such a mean, with a bootstrap standard
        # error: the cells of its procedure
        pr.BOOTSTRAP_T: interval_of(pr.bootstrap_t(float(x.mean()), draws, n - 1)),
    }


def cluster_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """n units of 1-6 rows each; a unit effect (the shape) plus row noise: the truth is the
    mean over units of equal expected size, the shift."""
    sizes = rng.integers(1, 7, n)
    groups = np.repeat(np.arange(n), sizes)
    values = shape(kind, rng, n)[groups] + rng.normal(size=groups.size) + shift
    return cluster_procedures(values, groups, n, rng)


def clustered_binary_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """S4's accuracy at the largest budget minus at the smallest, per question (-1, 0 or 1), a
    disease's 1-5 questions sharing its propensities: its chance of a discordant question
    d ~ Beta(1.5, 3.5) (mean 0.3) and of a discordance going up pi ~ Beta(4 m, 4 (1 - m)),
    m = 0.5 + shift / 0.6, so the truth is 0.3 (2 m - 1) = shift (unit sizes are independent of
    both). kind: ignored (one shape)."""
    groups = np.repeat(np.arange(n), rng.integers(1, 6, n))
    mean_up = 0.5 + shift / 0.6
    discordant = rng.random(groups.size) < rng.beta(1.5, 3.5, n)[groups]
    up = rng.random(groups.size) < rng.beta(4 * mean_up, 4 * (1 - mean_up), n)[groups]
    values = np.where(discordant, np.where(up, 1.0, -1.0), 0.0)
    return cluster_procedures(values, groups, n, rng)


def cluster_procedures(values: np.ndarray, groups: np.ndarray, n: int, rng) -> dict[str, Interval]:
    """The intervals of a mean over clustered rows (values [rows], groups [rows] their unit in
    0..n-1): the old percentile bootstrap over units, cluster t, the studentized bootstrap and
    their union."""
    seed = int(rng.integers(2**31))
    sums, counts = np.bincount(groups, values), np.bincount(groups)
    drawn = rng.integers(0, n, (B_PERCENTILE, n))
    draws = sums[drawn].sum(1) / counts[drawn].sum(1)
    t = pr.t_mean(values, groups)
    pivoted = pr.studentized(values, groups, B_STUDENTIZED, seed, ALPHA)
    return {
        "percentile": percentile(draws),
        pr.CLUSTER_T: interval_of(t),
        pr.STUDENTIZED: interval_of(pivoted),
        pr.MEAN_BOTH: interval_of(both_means(t, pivoted)),
    }


def paired_binary_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """Differences of paired 0/1 outcomes: P(+1) = P(-1) = 0.15 under the null; 0.25 and 0.05
    under the alternative (truth 0.2). kind: ignored (one shape)."""
    up = 0.15 + shift / 2
    x = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.3 - up, 0.7, up])
    return {
        "percentile": percentile(boot_means(x, rng)),
        pr.TANGO: interval_of(pr.tango(x)),
    }


def share_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """A share of units with a binary outcome: 0.5 under the null (the claims' null), 0.3 under
    the alternative."""
    x = (rng.random(n) < 0.5 - shift).astype(float)
    return {
        "percentile": percentile(boot_means(x, rng)),
        pr.BINOMIAL_EXACT: interval_of(pr.binomial_exact(x)),
    }


def two_sample_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """Two independent samples of n and n // 2 + 3 units; the second has three times the
    spread in the "heavy-tailed" slot (unequal variances)."""
    m = n // 2 + 3
    spread = 3.0 if kind == "heavy-tailed" else 1.0
    base = "normal" if kind == "heavy-tailed" else kind
    first, second = shape(base, rng, n) + shift, spread * shape(base, rng, m)
    draws = boot_means(first, rng) - boot_means(second, rng)
    return {"percentile": percentile(draws), pr.WELCH: interval_of(pr.welch(first, second))}


def spearman_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """A rank correlation (a statistic with no analytic procedure here): bivariate normal with
    correlation rho = 0 (null) or 0.5; Spearman's population value (6 / pi) asin(rho / 2)."""
    rho = 0.5 if shift else 0.0
    z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], n)
    if kind == "skewed":
        z = np.exp(z)  # ranks are unchanged: the same cell; kept for the grid's shape axis
    effect = stats.spearmanr(z[:, 0], z[:, 1]).statistic
    drawn = rng.integers(0, n, (B_SE, n))
    a, b = stats.rankdata(z[drawn, 0], axis=1), stats.rankdata(z[drawn, 1], axis=1)
    a, b = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    draws = np.nan_to_num(draws, nan=0.0)
    generic = pr.both(pr.GENERIC_BOTH, pr.bootstrap_t(float(effect), draws, n - 1),
                      pr.percentile(float(effect), draws))  # fmt: skip
    return {
        "percentile": percentile(draws),
        pr.BOOTSTRAP_T: interval_of(pr.bootstrap_t(float(effect), draws, n - 1)),
        pr.GENERIC_BOTH: interval_of(generic),
    }


def counts(drawn: np.ndarray, size: int) -> np.ndarray:
    """[B, size] how often each index was drawn in each resample of `drawn` [B, draws]."""
    offsets = np.arange(drawn.shape[0])[:, None] * size
    return np.bincount((drawn + offsets).ravel(), minlength=drawn.shape[0] * size).reshape(
        drawn.shape[0], size
    )


def crossed_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """Runs crossed with units: value = run effect + unit effect (the shape) + noise, all with
    sd 1, RUNS runs; the truth is the shift. Owen's pigeonhole bootstrap: runs and units drawn
    independently."""
    runs = rng.normal(size=RUNS)
    units = shape(kind, rng, n)
    values = runs[:, None] + units[None, :] + rng.normal(size=(RUNS, n)) + shift
    run_counts = counts(rng.integers(0, RUNS, (B_SE, RUNS)), RUNS)
    unit_counts = counts(rng.integers(0, n, (B_SE, n)), n)
    draws = np.einsum("br,ru,bu->b", run_counts, values, unit_counts) / (RUNS * n)
    effect = float(values.mean())
    return {
        "percentile": percentile(draws),
        pr.CROSSED_T: interval_of(pr.bootstrap_t(effect, draws, RUNS - 1, runs=RUNS)),
    }


def log_ratio_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """S3's domain-privacy ratio C = target rate / reference rate of flagged samples: n prompts
    of 8 samples each under each of RUNS target training runs and one reference (a prompt's
    samples share its flag probability, beta-spread around the rate); truth C = 2 under the
    alternative, 1 under the null. Runs and prompts resampled crossed (the reference's samples of
    a prompt come with every drawn run); t on the bootstrap standard error of log C,
    exponentiated, against the percentile interval of C."""
    ratio, base = (2.0 if shift else 1.0), 0.15
    target = rng.binomial(8, rng.beta(2, 2 / (base * ratio) - 2, (RUNS, n)))  # [runs, prompts]
    reference = rng.binomial(8, rng.beta(2, 2 / base - 2, n))
    if reference.sum() == 0 or target.sum() == 0:
        none = (math.nan, math.nan)
        return {"percentile": none, pr.CROSSED_T + pr.LOG_SCALE: none}
    effect = (target.sum() / RUNS) / reference.sum()
    run_counts = counts(rng.integers(0, RUNS, (B_SE, RUNS)), RUNS)
    unit_counts = counts(rng.integers(0, n, (B_SE, n)), n)
    flagged = np.einsum("br,ru,bu->b", run_counts, target, unit_counts) / RUNS
    with np.errstate(divide="ignore"):
        draws = flagged / (unit_counts @ reference)
        logs = np.log(draws)
    test = pr.bootstrap_t(math.log(effect), logs, RUNS - 1, min_share=0.95, runs=RUNS)
    low, high = interval_of(test)
    return {
        "percentile": percentile(draws[np.isfinite(draws)]),
        pr.CROSSED_T + pr.LOG_SCALE: (math.exp(low), math.exp(high)),
    }


NON_MEMBERS = 100  # non-member texts of the AUC cells (the family scores 1,000)
SIGNALS = (1.0, 1.3)  # membership signal (score shift) of the null's both settings, the better


def auc_difference_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """A difference of AUCs, each the mean over RUNS training runs of a run's AUC of n members
    against NON_MEMBERS non-members (claims/mia.py), in three forms: "attacks, <shape>" two
    attacks on the same texts and runs (the attack-order claims); "models, <shape>" one attack on
    two models trained apart, runs paired by seed index only (the size claims); "groups,
    <shape>" one attack on two member groups of n texts each against the same non-members (the
    duplication claims). A text's score in a run: its difficulty (the shape, shared by runs,
    models and attacks) + the run's fit to the text (sd 0.5, a model's own) + attack noise
    (sd 0.5) + for members the signal times the run's strength (1 + 0.3 z, a model's own): runs
    differ in how much they memorise. The better setting's signal is SIGNALS[1] under the
    alternative, SIGNALS[0] under the null (truth 0). Runs, members and non-members resampled
    crossed by the claims' own `mia.metrics.crossed_bootstrap`, both settings with the same
    draws (its same seed, as claims/mia.py); t on the bootstrap standard error with
    min(n, RUNS) - 1 degrees of freedom and the runs' correction (claims/mia.py's _estimate).
    The family scores 1,000 non-members, the cell NON_MEMBERS: the non-members' share of the
    variance is larger here, the members' and runs' smaller."""
    form, base = kind.split(", ")
    better = SIGNALS[1] if shift else SIGNALS[0]
    width = 2 * n if form == "groups" else n
    difficulty = shape(base, rng, width + NON_MEMBERS)

    def trained() -> tuple[np.ndarray, np.ndarray]:
        """A model's RUNS runs: ([RUNS, 1] strengths, [RUNS, texts] fits)."""
        return (1.0 + 0.3 * rng.normal(size=(RUNS, 1)),
                0.5 * rng.normal(size=(RUNS, width + NON_MEMBERS)))  # fmt: skip

    model = trained()

    def scores(signal: np.ndarray, runs=model) -> tuple[np.ndarray, np.ndarray]:
        """([RUNS, width] member, [RUNS, NON_MEMBERS] non-member) scores of one attack."""
        strength, fit = runs
        noisy = difficulty + fit + 0.5 * rng.normal(size=fit.shape)
        return noisy[:, :width] + signal[None, :] * strength, noisy[:, width:]

    seed = int(rng.integers(2**31))
    if form == "groups":
        members, non_members = scores(np.r_[np.full(n, better), np.full(n, SIGNALS[0])])
        groups = {"better": members[:, :n], "other": members[:, n:]}
        both = crossed_bootstrap(groups, non_members, fprs=(), n_boot=B_SE, seed=seed)
        better_auc, other_auc = both[("better", "auc")], both[("other", "auc")]
    else:
        other = trained() if form == "models" else model
        (better_auc, other_auc) = (
            crossed_bootstrap({"all": members}, non_members, fprs=(), n_boot=B_SE, seed=seed)[
                ("all", "auc")]
            for members, non_members in (scores(np.full(n, better)),
                                         scores(np.full(n, SIGNALS[0]), other))
        )  # fmt: skip
    effect, draws = better_auc.effect - other_auc.effect, better_auc.draws - other_auc.draws
    test = pr.bootstrap_t(effect, draws, min(n, RUNS) - 1, runs=RUNS)
    return {"percentile": percentile(draws), pr.CROSSED_T: interval_of(test)}


@functools.cache
def auc_truth(kind: str) -> float:
    """The population AUC difference of `auc_difference_cell`'s alternative: E over runs and
    texts of Phi(signal x strength + difficulty_m - difficulty_n) at the better signal minus the
    other (the noise terms' difference has variance 1), by Monte Carlo on 2e6 draws (error
    about 1e-4)."""
    rng = np.random.default_rng(7)
    base = kind.split(", ")[1]
    size = 2_000_000
    strength = 1.0 + 0.3 * rng.normal(size=size)
    gap = shape(base, rng, size) - shape(base, rng, size)
    high, low = (stats.norm.cdf(s * strength + gap).mean() for s in reversed(SIGNALS))
    return float(high - low)


def clustered_rank_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """S4's accuracy against document frequency: a rank correlation between a unit-level x (a
    disease's frequency, one of LEVELS equally likely values: units tie) and a 0/1 outcome of
    each of its 1-5 rows (its questions), rows of a unit sharing its propensity:
    y = [x + u + 0.3 e > 0] under the alternative, [u + 0.3 e > 0] under the null (truth 0), x
    standardised, u the unit's term (the shape), e the row's. Spearman over the rows (S4 averages
    it over two budgets whose answers differ on one disease: one budget here); units resampled
    whole (the rows of a unit drawn twice count twice, tied); the bootstrap-SE t and the
    percentile interval, both of which must decide."""
    sizes = rng.integers(1, 6, n)
    unit = np.repeat(np.arange(n), sizes)
    x = levels(rng, n)
    y = ((x[unit] if shift else 0.0) + shape(kind, rng, n)[unit]
         + 0.3 * rng.normal(size=unit.size) > 0).astype(float)  # fmt: skip
    effect = spearman(x[unit], y)
    draws = weighted_spearman(x, unit, y, counts(rng.integers(0, n, (B_SE, n)), n))
    generic = pr.both(pr.GENERIC_BOTH, pr.bootstrap_t(effect, draws, n - 1),
                      pr.percentile(effect, draws))  # fmt: skip
    return {"percentile": percentile(draws), pr.GENERIC_BOTH: interval_of(generic)}


def weighted_spearman(x: np.ndarray, unit: np.ndarray, y: np.ndarray, drawn: np.ndarray):
    """[B] Spearman's correlation (midranks for ties) of every resample: x [U] a value per unit
    (units may tie), unit [rows] each row's unit, y [rows] 0/1, drawn [B, U] how often each unit
    was drawn."""
    return spearman_of_rows(x[unit], y, drawn[:, unit].astype(float))


def spearman_of_rows(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """[B] Spearman's correlation of rows x, y [rows], each counted weight [B, rows] times (a
    resample's rows, a row drawn twice tied with itself); 0 where a side has no spread."""
    rank_x, rank_y = midranks(x, weight), midranks(y, weight)
    size = weight.sum(1, keepdims=True)
    dx = rank_x - (weight * rank_x).sum(1, keepdims=True) / size
    dy = rank_y - (weight * rank_y).sum(1, keepdims=True) / size
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (weight * dx * dy).sum(1) / np.sqrt((weight * dx**2).sum(1) * (weight * dy**2).sum(1))
    return np.nan_to_num(rho, nan=0.0)  # every drawn value the same: no rank correlation


def midranks(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """[B, rows] each row's midrank among the rows counted weight [B, rows] times: the rows
    before its tie group plus (the group's count + 1) / 2."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    ends = np.searchsorted(ordered, ordered, side="right") - 1  # a tie group's last row
    starts = np.searchsorted(ordered, ordered, side="left")
    total = np.cumsum(weight[:, order], 1)
    before = np.where(starts > 0, total[:, np.maximum(starts - 1, 0)], 0.0)
    ranks = np.empty_like(weight)
    ranks[:, order] = before + (total[:, ends] - before + 1) / 2
    return ranks


DUPLICATES = 6  # levels of the duplicate count: sequences tie on it


def crossed_rank_cell(kind: str, n: int, shift: float, rng) -> dict[str, Interval]:
    """s0.related_work.duplication: Spearman over (run, sequence) rows of a sequence's
    duplicate count (one of DUPLICATES equally likely levels: sequences tie) with its log ESP in
    the run, y = 0.5 x + u + v + w under the alternative (x the standardised level), u + v + w
    under the null (truth 0): u the sequence's term (the shape), v the run's (sd 0.5), w the
    row's (sd 1). Runs and sequences resampled crossed (a drawn pair contributes its row); t on
    the bootstrap standard error with min(n, RUNS) - 1 degrees of freedom and the runs'
    correction (stats.bootstrap with runs)."""
    x, y = duplication_rows(kind, rng, RUNS, n, shift)
    effect = spearman(x, y)
    run_counts = counts(rng.integers(0, RUNS, (B_SE, RUNS)), RUNS)
    unit_counts = counts(rng.integers(0, n, (B_SE, n)), n)
    weight = (run_counts[:, :, None] * unit_counts[:, None, :]).reshape(B_SE, RUNS * n)
    draws = spearman_of_rows(x, y, weight.astype(float))
    test = pr.bootstrap_t(effect, draws, min(n, RUNS) - 1, runs=RUNS)
    return {"percentile": percentile(draws), pr.CROSSED_T: interval_of(test)}


def duplication_rows(kind: str, rng, runs: int, n: int, shift: float):
    """([runs * n] levels, [runs * n] log ESP) of `crossed_rank_cell`, run-major."""
    x = levels(rng, n, DUPLICATES)
    y = ((0.5 * x if shift else 0.0) + shape(kind, rng, n))[None, :] + 0.5 * rng.normal(
        size=(runs, 1)) + rng.normal(size=(runs, n))  # fmt: skip
    return np.tile(x, runs), y.ravel()


@functools.cache
def crossed_rank_truth(kind: str) -> float:
    """The population Spearman correlation of `crossed_rank_cell`'s alternative: its rows'
    correlation over 400 runs x 5,000 sequences."""
    return spearman(*duplication_rows(kind, np.random.default_rng(13), 400, 5000, 1.0))


LEVELS = 12  # S4's 21 diseases have 18 distinct frequencies


def levels(rng: np.random.Generator, size: int, count: int = LEVELS) -> np.ndarray:
    """[size] one of `count` equally likely values each, standardised (mean 0, sd 1)."""
    drawn = rng.integers(0, count, size)
    return (drawn - (count - 1) / 2) / math.sqrt((count**2 - 1) / 12)


@functools.cache
def clustered_rank_truth(kind: str) -> float:
    """The population Spearman correlation of `clustered_rank_cell`'s alternative: its rows'
    correlation on 400,000 units (unit sizes are independent of x, so the rows' population is
    the units' weighted by size)."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 6, 400_000)
    unit = np.repeat(np.arange(sizes.size), sizes)
    x = levels(rng, sizes.size)
    y = x[unit] + shape(kind, rng, sizes.size)[unit] + 0.3 * rng.normal(size=unit.size) > 0
    return float(stats.spearmanr(x[unit], y).statistic)


# effect type -> (cell, shapes, the alternative's shift, its truth (or shape -> truth), the null)
TYPES: dict[str, tuple[Callable, tuple[str, ...], float, float | Callable, float]] = {
    "mean over units": (mean_cell, SHAPES, 0.5, 0.5, 0.0),
    "mean over clustered rows": (cluster_cell, SHAPES[:4], 0.5, 0.5, 0.0),
    "paired binary": (paired_binary_cell, ("0/1 pairs",), 0.2, 0.2, 0.0),
    "paired binary over clustered rows": (
        clustered_binary_cell,
        ("beta-binomial",),
        0.1,
        0.1,
        0.0,
    ),
    "share of binary outcomes": (share_cell, ("0/1",), 0.2, 0.3, 0.5),
    "two-sample difference": (two_sample_cell, ("normal", "skewed", "heavy-tailed"), 0.5, 0.5, 0.0),
    "rank correlation": (spearman_cell, ("normal",), 1.0, 6 / math.pi * math.asin(0.25), 0.0),
    "runs x units mean": (crossed_cell, ("normal", "skewed", "heavy-tailed"), 0.5, 0.5, 0.0),
    "ratio of rates (log)": (log_ratio_cell, ("beta-binomial",), 1.0, 2.0, 1.0),
    "AUC difference, runs x members": (
        auc_difference_cell,
        tuple(
            f"{form}, {base}"
            for form in ("attacks", "models", "groups")
            for base in ("normal", "skewed", "heavy-tailed")
        ),
        1.0,
        auc_truth,
        0.0,
    ),  # fmt: skip
    "rank correlation, runs x units": (
        crossed_rank_cell,
        ("normal", "skewed", "heavy-tailed"),
        1.0,
        crossed_rank_truth,
        0.0,
    ),
    "rank correlation over clustered rows": (
        clustered_rank_cell,
        ("normal", "skewed", "heavy-tailed"),
        1.0,
        clustered_rank_truth,
        0.0,
    ),
}
# Effect types run only at the grid and the unit counts of the claims they stand for (an AUC
# cell at the 300 units of S1's extraction claims would take most of the run).
FOR_CLAIMS = {"AUC difference, runs x members": "s1.mia.",
              "rank correlation, runs x units": "s0.related_work."}  # fmt: skip
# The effect types whose cells measure each claims procedure (the claims table's `method`): a mean
# over units or clustered rows (continuous, or paired 0/1 as S4's budgets) for t and the
# studentized bootstrap; rank correlations, i.i.d. and
# over clustered rows with a 0/1 outcome (S4's frequency claim), for the generic union (its other
# claim, a minimum of two share differences, has no cell of its own); a mean of skewed units for
# the bootstrap-SE t alone (the frontier's matched leakage at one setting is a mean over
# questions) and rank correlations; crossed means, AUC differences and rank correlations (S1's
# duplication) for the runs x units t.
OF_METHOD = {
    pr.T_MEAN: ("mean over units",),
    pr.STUDENTIZED: (
        "mean over units",
        "mean over clustered rows",
        "paired binary over clustered rows",
    ),
    pr.MEAN_BOTH: (
        "mean over units",
        "mean over clustered rows",
        "paired binary over clustered rows",
    ),
    pr.GENERIC_BOTH: ("rank correlation", "rank correlation over clustered rows"),
    pr.CLUSTER_T: ("mean over clustered rows", "paired binary over clustered rows"),
    pr.TANGO: ("paired binary",),
    pr.BINOMIAL_EXACT: ("share of binary outcomes",),
    pr.WELCH: ("two-sample difference",),
    pr.BOOTSTRAP_T: ("rank correlation", "mean over units"),
    pr.CROSSED_T: (
        "runs x units mean",
        "AUC difference, runs x members",
        "rank correlation, runs x units",
    ),  # fmt: skip
    pr.CROSSED_T + pr.LOG_SCALE: ("ratio of rates (log)",),
}


def run_cell(effect_type: str, kind: str, n: int, reps: int, seed: int) -> dict[str, dict]:
    cell, _, shift, truth, null = TYPES[effect_type]
    truth = truth(kind) if callable(truth) else truth
    rng = np.random.default_rng(seed)
    held, false, nan = {}, {}, {}
    for _ in range(reps):
        for where, at in (("alternative", shift), ("null", 0.0)):
            for method, (low, high) in cell(kind, n, at, rng).items():
                # no interval: no decision (inconclusive), and a truth it cannot miss
                none = not (math.isfinite(low) and math.isfinite(high))
                nan[method] = nan.get(method, 0) + none
                target = truth if where == "alternative" else null
                inside = none or low <= target <= high
                if where == "alternative":
                    held[method] = held.get(method, 0) + inside
                else:
                    false[method] = false.get(method, 0) + (not inside)
    tolerance = 2 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    return {
        method: {
            "coverage": held[method] / reps,
            "false_decisions": false[method] / reps,
            "no_interval": nan[method] / (2 * reps),
            "passes": held[method] / reps >= 0.93 and false[method] / reps <= ALPHA + tolerance,
            "in_rule": kind not in STRESS,
        }
        for method in held
    }


def claim_units(path: Path) -> dict[str, dict[int, list[str]]]:
    """{procedure: {a unit count its claims rest on: those claims' ids}} from a claims table
    (checks left out)."""
    import pandas as pd

    frame = pd.read_csv(path)
    used: dict[str, dict[int, list[str]]] = {}
    for row in frame[frame["role"] != "check"].itertuples():
        if row.method in OF_METHOD and row.n >= 2:
            used.setdefault(row.method, {}).setdefault(int(row.n), []).append(row.id)
    return used


def grid_of(effect_type: str, used: dict[str, dict[int, list[str]]]) -> list[int]:
    """The grid and every n the claims' procedures of this effect type use (only the claims
    FOR_CLAIMS names, where it names this type)."""
    prefix = FOR_CLAIMS.get(effect_type, "")
    extra = {n for method, ns in used.items() if effect_type in OF_METHOD[method]
             for n, ids in ns.items() if any(i.startswith(prefix) for i in ids)}  # fmt: skip
    return sorted(set(GRID) | extra)


def markdown(rows: list[dict]) -> str:
    """Per effect type and procedure, the worst coverage and the worst false-decision rate over
    the shapes in the rule (STRESS left out) at every n (a star where the claims use that n, a
    cross where the cell fails)."""
    lines = [
        "| effect type | procedure | n: worst coverage / worst false decisions |",
        "|---|---|---|",
    ]
    keys = dict.fromkeys((r["effect_type"], r["procedure"]) for r in rows)
    for effect_type, procedure in keys:
        mine = [r for r in rows if (r["effect_type"], r["procedure"]) == (effect_type, procedure)]
        cells = []
        for n in sorted({r["n"] for r in mine}):
            at = [r for r in mine if r["n"] == n and r["in_rule"]]
            if not at:
                continue
            mark = ("*" if any(r["claims_use"] for r in at) else "") + (
                "" if all(r["passes"] for r in at) else " ✗"
            )
            cells.append(f"{n}{mark}: {min(r['coverage'] for r in at):.3f} / "
                         f"{max(r['false_decisions'] for r in at):.3f}")  # fmt: skip
        lines.append(f"| {effect_type} | {procedure} | {'; '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=Path, help="a claims table: add the n the claims use")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("coverage.csv"))
    parser.add_argument("--types", nargs="+", choices=list(TYPES), default=list(TYPES),
                        help="the effect types to run (default: all)")  # fmt: skip
    args = parser.parse_args()
    used = claim_units(args.claims) if args.claims else {}
    rows, started = [], time.perf_counter()
    for index, (effect_type, (_, kinds, *_)) in enumerate(TYPES.items()):
        if effect_type not in args.types:
            earlier = kept(args.out, effect_type)
            if args.claims:  # the stars as the claims table has them now
                for row in earlier:
                    row["claims_use"] = row["n"] in used.get(row["procedure"], ())
            lacking = sorted(set(grid_of(effect_type, used)) - {r["n"] for r in earlier})
            if lacking:
                print(f"{effect_type}: kept from {args.out}, which lacks n = {lacking}: rerun it "
                      f"(--types '{effect_type}')")  # fmt: skip
            rows.extend(earlier)
            continue
        grid = grid_of(effect_type, used)
        for kind in kinds:
            for n in grid:
                seed = 1000 * index + n
                for method, found in run_cell(effect_type, kind, n, args.reps, seed).items():
                    rows.append({"effect_type": effect_type, "shape": kind, "n": n,
                                 "procedure": method, "claims_use": n in used.get(method, ()),
                                 **found})  # fmt: skip
            print(f"  {effect_type}, {kind}: {time.perf_counter() - started:.0f} s", flush=True)
        print(f"{effect_type}: done after {time.perf_counter() - started:.0f} s", flush=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()})
    print(f"{len(rows)} cells, {args.reps} replications each, in "
          f"{time.perf_counter() - started:.0f} s; written to {args.out}")  # fmt: skip
    print(markdown(rows))
    for row in rows:
        if row["claims_use"] and row["in_rule"] and not row["passes"]:
            print(f"fails where claims use it (inconclusive by rule): {row}")


def kept(path: Path, effect_type: str) -> list[dict]:
    """The rows of `effect_type` in an earlier table at `path` (none where there is no table),
    typed as `run_cell` gives them."""
    if not path.is_file():
        return []
    flags, numbers = ("claims_use", "passes", "in_rule"), ("coverage", "false_decisions",
                                                           "no_interval")  # fmt: skip
    with path.open() as handle:
        found = [row for row in csv.DictReader(handle) if row["effect_type"] == effect_type]
    return [{**row, "n": int(row["n"]), **{k: row[k] == "True" for k in flags},
             **{k: float(row[k]) for k in numbers}} for row in found]  # fmt: skip


if __name__ == "__main__":
    main()
