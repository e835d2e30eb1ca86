"""The statistics of claims: effects and their intervals over independent units.

Each interval and its p-value come from the small-sample procedure that fits the effect
(`privleak.claims.procedures`: t over units, McNemar's exact test, Welch's t, or a t interval on
a bootstrap standard error). The bootstrap resamples independent units (contexts, sequences):
every row of a drawn unit comes along, so paired settings of one unit stay paired. Where a claim
rests on trained models, the training runs (seeds) are a second, crossed axis: runs and units are
resampled independently (Owen's "pigeonhole" bootstrap for crossed designs), so the standard error
covers both the choice of sequences and the randomness of training (scaled by sqrt(R / (R - 1))
over R runs), and the t reference has the runs' degrees of freedom. Degenerate inputs (too few
units, non-finite values, resamples that all agree) get no interval and a note saying why, never a
crash or a fake-certain interval.

Pure numpy/pandas/scipy; no torch.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from privleak.claims import procedures
from privleak.errors import require

UNBOUNDED = (-math.inf, math.inf)
PLUS_MINUS_ONE = (-1.0, 1.0)
"""The parameter space of a correlation, a mean of correlations and a difference of two shares."""
SHARE = (0.0, 1.0)
"""The parameter space of a share (a rate, a mean of 0/1 outcomes)."""
NAN = float("nan")
BINARY = ("", "paired", "share")  # what a 0/1 mean's values are (bootstrap's `binary`)


@dataclass(frozen=True)
class Estimate:
    """An effect, its interval (NaN when there is none) and how many units it rests on.
    certified: the interval is not resampled (a guarantee checked on every unit, a certified
    bound), so the verdict is no test at alpha and stays outside multiplicity adjustment."""

    effect: float
    low: float
    high: float
    units: int
    note: str = ""
    certified: bool = False
    test: procedures.Test | None = None  # the procedure behind the interval, and its p-value


def _units(n_rows: int, groups, strata) -> tuple:
    """Rows ordered unit by unit, each unit's first position and row count in that order, and
    the unit indices of each stratum (strata in sorted label order)."""
    codes = np.arange(n_rows) if groups is None else pd.factorize(np.asarray(groups), sort=True)[0]
    require(len(codes) == n_rows, f"groups has {len(codes)} labels for {n_rows} rows")
    order = np.argsort(codes, kind="stable")
    lengths = np.bincount(codes, minlength=codes.max() + 1 if n_rows else 0)
    starts = np.r_[0, np.cumsum(lengths)[:-1]].astype(int)
    if strata is None:
        return order, starts, lengths, [np.arange(lengths.size)]
    labels = np.asarray(strata)
    require(len(labels) == n_rows, f"strata has {len(labels)} labels for {n_rows} rows")
    first = labels[order[starts]]
    require(
        bool((labels[order] == np.repeat(first, lengths)).all()),
        "strata must be constant within each unit (a unit belongs to one stratum)",
    )
    return order, starts, lengths, [np.flatnonzero(first == s) for s in np.unique(first)]


def _rows_of(units: np.ndarray, order, starts, lengths) -> np.ndarray:
    """The rows of the given units (repeats included), without a Python loop over units."""
    sizes = lengths[units]
    offsets = np.repeat(starts[units] - np.r_[0, np.cumsum(sizes)[:-1]], sizes)
    return order[offsets + np.arange(sizes.sum())]


def _crossed_cells(groups, runs, n_rows: int) -> np.ndarray:
    """[n_runs, n_units, rows per cell] row indices of a balanced crossed design, runs and units
    in sorted label order (the order `_units` numbers units in)."""
    require(groups is not None, "runs needs groups: a training run crosses units, not rows")
    run_codes, run_labels = pd.factorize(np.asarray(runs), sort=True)
    unit_codes, unit_labels = pd.factorize(np.asarray(groups), sort=True)
    require(len(run_codes) == n_rows, f"runs has {len(run_codes)} labels for {n_rows} rows")
    shape = (len(run_labels), len(unit_labels))
    counts = np.bincount(run_codes * shape[1] + unit_codes, minlength=shape[0] * shape[1])
    require(
        bool((counts == counts[0]).all()) and counts[0] > 0,
        "runs x groups must be balanced: every training run needs the same number of rows for "
        f"every unit (cell sizes range {counts.min()}..{counts.max()})",
    )
    order = np.lexsort((unit_codes, run_codes))
    return order.reshape(*shape, int(counts[0]))


def bootstrap(
    values,
    statistic: Callable[[np.ndarray], float],
    *,
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    min_units: int = 2,
    groups=None,
    strata=None,
    runs=None,
    binary: str = "",
    min_share: float = 1.0,
    bounds: tuple[float, float] = UNBOUNDED,
) -> Estimate:
    """effect = statistic(values) and its (1 - alpha) interval over units, by the small-sample
    procedure that fits the effect (privleak.claims.procedures; the Estimate's `test` gives its
    p-value at any null).

    values: array, rows on axis 0. groups: a label per row; rows sharing a label form one unit,
    resampled whole (default: every row is a unit). strata: a label per row, constant within a
    unit; units are resampled within their stratum, so each keeps its size (two-sample
    contrasts). runs: a label per row naming the training run (seed) that produced it; runs and
    units are then crossed factors, resampled independently, and a drawn (run, unit) cell
    contributes its rows (every cell must hold the same number of rows; at least min_units runs,
    else no interval). statistic: rows -> float, given the rows of the drawn units (a unit drawn
    twice contributes its rows twice). binary: "paired" where values are differences of paired
    0/1 outcomes, "share" where they are 0/1 outcomes, one row per unit ("" otherwise).
    min_share: the share of resamples that must give a finite effect (procedures.bootstrap_t).
    bounds: the effect's parameter space (PLUS_MINUS_ONE for a correlation, a mean of them or a
    difference of two shares, SHARE for a share); the interval is cut to it
    (procedures.Test.bounds).

    The procedure: a mean (np.mean) of 1-D values without strata or runs: Tango's score test
    (McNemar's) for binary "paired" and the exact binomial test for a binary "share" where every
    unit holds one row, else Student's t and the studentized bootstrap over units, both of which
    must decide (cluster-robust with several rows per unit; t alone where resamples have no
    spread); `mean_contrast` of two strata without groups or runs: Welch's t; any other
    statistic: a t interval on the bootstrap standard error with the scarcest resampled axis
    minus one degrees of freedom (Owen's crossed "pigeonhole" bootstrap with runs), and without
    runs, where every draw is finite, the percentile interval of the same draws too, both of
    which must decide. Draws come from
    numpy's default_rng(seed) alone.
    """
    require(
        isinstance(n_boot, int) and n_boot >= 100,
        f"claims.n_boot must be an int >= 100; got {n_boot!r}",
    )
    require(0 < alpha < 0.5, f"claims.alpha must be in (0, 0.5); got {alpha!r}")
    require(
        isinstance(min_units, int) and min_units >= 2,
        f"claims.min_units must be an int >= 2; got {min_units!r}",
    )
    require(binary in BINARY, f"binary must be one of {BINARY}; got {binary!r}")
    values = np.asarray(values, dtype=float)
    order, starts, lengths, samples = _units(len(values), groups, strata)
    n_units, smallest = lengths.size, min((len(s) for s in samples), default=0)
    if n_units == 0:
        return Estimate(NAN, NAN, NAN, 0, "no units: nothing to estimate")
    bad = int((~np.isfinite(values)).sum())
    if bad:
        return Estimate(NAN, NAN, NAN, n_units, f"{bad} non-finite values in the data: no interval")
    effect = float(statistic(values))
    if not math.isfinite(effect):
        return Estimate(effect, NAN, NAN, n_units, "the effect is not finite: no interval")
    if smallest < min_units:
        where = " in a stratum" if len(samples) > 1 else ""
        note = f"{smallest} units{where} < min_units {min_units}: no interval"
        return Estimate(effect, NAN, NAN, n_units, note)

    if runs is None and strata is None and statistic is np.mean and values.ndim == 1:
        one_row = groups is None or bool((lengths == 1).all())
        if binary and one_row:
            exact = procedures.tango if binary == "paired" else procedures.binomial_exact
            return from_test(exact(values), n_units, alpha, effect, bounds)
        codes = None if groups is None else pd.factorize(np.asarray(groups), sort=True)[0]
        test = procedures.mean_both(values, codes, n_boot, seed, alpha)
        return from_test(test, n_units, alpha, effect, bounds)
    if runs is None and groups is None and statistic is mean_contrast and len(samples) == 2:
        first = values[:, 0] == 1
        test = procedures.welch(values[first, 1], values[~first, 1])
        return from_test(test, n_units, alpha, effect, bounds)

    df = smallest - 1
    if runs is None:

        def resampled(*drawn: np.ndarray) -> float:
            units = np.concatenate(drawn).astype(int)
            return float(statistic(values[_rows_of(units, order, starts, lengths)]))

    else:
        cells = _crossed_cells(groups, runs, len(values))
        if cells.shape[0] < min_units:
            note = f"{cells.shape[0]} training runs < min_units {min_units}: no interval"
            return Estimate(effect, NAN, NAN, n_units, note)
        samples = [*samples, np.arange(cells.shape[0])]
        df = min(df, cells.shape[0] - 1)

        def resampled(*drawn: np.ndarray) -> float:
            units = np.concatenate(drawn[:-1]).astype(int)
            rows = cells[drawn[-1].astype(int)][:, units]  # [runs, units, rows per cell]
            return float(statistic(values[rows.reshape(-1)]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate distribution: bootstrap_t says so
        draws = stats.bootstrap(
            tuple(samples),
            resampled,
            n_resamples=n_boot,
            vectorized=False,
            method="percentile",  # only the distribution is read
            rng=np.random.default_rng(seed),
        ).bootstrap_distribution
    crossed_runs = 0 if runs is None else cells.shape[0]
    test = procedures.bootstrap_t(effect, draws, df, min_share, runs=crossed_runs)
    if runs is None and np.isfinite(draws).all():  # the percentile interval of the same draws
        test = procedures.both(procedures.GENERIC_BOTH, test, procedures.percentile(effect, draws))
    return from_test(test, n_units, alpha, effect, bounds)


def from_test(
    test: procedures.Test | str,
    units: int,
    alpha: float,
    effect: float,
    bounds: tuple[float, float] = UNBOUNDED,
) -> Estimate:
    """The Estimate of a procedure's Test (its (1 - alpha) interval, cut to the effect's
    parameter space `bounds`), or of its reason for giving none (a string: no interval, the note
    says why)."""
    if isinstance(test, str):
        return Estimate(effect, NAN, NAN, units, test)
    test = replace(test, bounds=bounds)
    low, high = test.interval(alpha)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Estimate(effect, NAN, NAN, units, f"{test.method} gave no finite interval")
    return Estimate(test.effect, low, high, units, test=test)


def worst_case(slack: Iterable[float], what: str) -> Estimate:
    """A guarantee checked on every unit: the effect and its 'interval' are the smallest slack
    (bound minus observed value, >= 0 when the bound holds). No resampling: one violation is
    enough to contradict a guarantee, however many units hold."""
    slack = np.asarray(list(slack), dtype=float)
    if slack.size == 0 or not np.isfinite(slack).all():
        return Estimate(NAN, NAN, NAN, int(slack.size), f"no finite slack over {what}")
    worst = float(slack.min())
    note = f"{int((slack < 0).sum())} of {slack.size} {what} violate the bound (no resampling)"
    return Estimate(worst, worst, worst, int(slack.size), note, certified=True)


# ---------------------------------------------------------------- effects of common shapes


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation; 0.0 when x or y is constant (no monotone association)."""
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    if rx.size < 2 or np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of y on x (x must take >= 2 distinct values)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    centred = x - x.mean()
    require(bool((centred != 0).any()), "a slope needs >= 2 distinct x values")
    return float((centred * (y - y.mean())).sum() / (centred**2).sum())


def settings_matrix(
    frame: pd.DataFrame, unit: str | list[str], setting: str, value: str
) -> pd.DataFrame:
    """[units x settings] table of `value` (the mean over repeated rows), columns sorted."""
    table = frame.pivot_table(index=unit, columns=setting, values=value, aggfunc="mean")
    return table.sort_index(axis=1)


def paired_differences(matrix: pd.DataFrame, a, b) -> pd.Series:
    """matrix[b] - matrix[a] for every unit that has both settings."""
    return (matrix[b] - matrix[a]).dropna()


def unit_trends(
    matrix: pd.DataFrame, trend: Callable[[np.ndarray, np.ndarray], float] = spearman, x=None
) -> pd.Series:
    """trend(x, row) for every unit (row) over the settings it has, if it has >= 2 of them.

    x: the setting values (default: the column labels); pass e.g. log2 of them for a slope on a
    log scale."""
    xs = np.asarray(matrix.columns if x is None else x, dtype=float)
    values = matrix.to_numpy(dtype=float)
    trends = {
        key: trend(xs[np.isfinite(row)], row[np.isfinite(row)])
        for key, row in zip(matrix.index, values, strict=True)
        if np.isfinite(row).sum() >= 2
    }
    return pd.Series(trends, dtype=float)


def two_samples(first: Sequence[float], second: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Rows [flag, value] (flag 1 = first sample) and their strata, for `mean_contrast`."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    flags = np.r_[np.ones(first.size), np.zeros(second.size)]
    return np.c_[flags, np.r_[first, second]], flags


def mean_contrast(rows: np.ndarray) -> float:
    """mean(value | flag 1) - mean(value | flag 0); with 0/1 values, a difference of proportions."""
    first = rows[:, 0] == 1
    return float(rows[first, 1].mean() - rows[~first, 1].mean())
