"""Coverage of the claims' intervals at the unit counts they use: every effect type's procedure
(`privleak.claims.procedures`) against the percentile bootstrap the claims used before, on data
shaped like the claims' (skewed, heavy-tailed, 0/1, paired, clustered, two-sample, rank
correlations, runs crossed with units) with a known truth.

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
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

from privleak.claims import procedures as pr

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


# effect type -> (cell, shapes, the alternative's shift, its truth, the null)
TYPES: dict[str, tuple[Callable, tuple[str, ...], float, float, float]] = {
    "mean over units": (mean_cell, SHAPES, 0.5, 0.5, 0.0),
    "mean over clustered rows": (cluster_cell, SHAPES[:4], 0.5, 0.5, 0.0),
    "paired binary": (paired_binary_cell, ("0/1 pairs",), 0.2, 0.2, 0.0),
    "share of binary outcomes": (share_cell, ("0/1",), 0.2, 0.3, 0.5),
    "two-sample difference": (two_sample_cell, ("normal", "skewed", "heavy-tailed"), 0.5, 0.5, 0.0),
    "rank correlation": (spearman_cell, ("normal",), 1.0, 6 / math.pi * math.asin(0.25), 0.0),
    "runs x units mean": (crossed_cell, ("normal", "skewed", "heavy-tailed"), 0.5, 0.5, 0.0),
    "ratio of rates (log)": (log_ratio_cell, ("beta-binomial",), 1.0, 2.0, 1.0),
}
# The effect types whose cells measure each claims procedure (the claims table's `method`): a mean
# over units or clustered rows for t and the studentized bootstrap; rank correlations for the
# generic union (two of its three claims are Spearman correlations, the third a minimum of two
# share differences); a mean of skewed units for the bootstrap-SE t alone (the frontier's matched
# leakage at one setting is a mean over questions) and rank correlations.
OF_METHOD = {
    pr.T_MEAN: ("mean over units",),
    pr.STUDENTIZED: ("mean over units", "mean over clustered rows"),
    pr.MEAN_BOTH: ("mean over units", "mean over clustered rows"),
    pr.GENERIC_BOTH: ("rank correlation",),
    pr.CLUSTER_T: ("mean over clustered rows",),
    pr.TANGO: ("paired binary",),
    pr.BINOMIAL_EXACT: ("share of binary outcomes",),
    pr.WELCH: ("two-sample difference",),
    pr.BOOTSTRAP_T: ("rank correlation", "mean over units"),
    pr.CROSSED_T: ("runs x units mean",),
    pr.CROSSED_T + pr.LOG_SCALE: ("ratio of rates (log)",),
}


def run_cell(effect_type: str, kind: str, n: int, reps: int, seed: int) -> dict[str, dict]:
    cell, _, shift, truth, null = TYPES[effect_type]
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


def claim_units(path: Path) -> dict[str, set[int]]:
    """{procedure: the unit counts its claims rest on} from a claims table (checks left out)."""
    import pandas as pd

    frame = pd.read_csv(path)
    used: dict[str, set[int]] = {}
    for row in frame[frame["role"] != "check"].itertuples():
        if row.method in OF_METHOD and row.n >= 2:
            used.setdefault(row.method, set()).add(int(row.n))
    return used


def grid_of(effect_type: str, used: dict[str, set[int]]) -> list[int]:
    """The grid and every n the claims' procedures of this effect type use."""
    extra = {n for method, ns in used.items() if effect_type in OF_METHOD[method] for n in ns}
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
