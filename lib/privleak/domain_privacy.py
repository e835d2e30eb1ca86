"""Domain privacy (S3): the ratio C of a target's and a reference's flagged-sample rates for a
leaked domain, its bootstrap interval over prompts (runs crossed), the lower bound where the
reference never flags, and the per-target table that S3's renderer reads. The samples come from
`privleak.lira_sampling`; the LiRa attack's own statistics are in `privleak.lira`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from scipy import stats

from privleak.claims.procedures import LOG_SCALE
from privleak.claims.stats import Estimate, bootstrap
from privleak.errors import require
from privleak.lira import prompt_codes, ratio_of_sums

FINITE_SHARE = 0.95  # of the resamples whose log C must be finite for an interval


@dataclass(frozen=True)
class DomainPrivacy:
    """The empirical C of one leaked domain and the counts it rests on.

    ratio: target_rate / reference_rate; target_rate, reference_rate: flagged non-empty samples /
    non-empty samples (pseudocounts included)."""

    ratio: float
    target_rate: float
    reference_rate: float
    target_flagged: int
    target_nonempty: int
    reference_flagged: int
    reference_nonempty: int


def _rate(flagged: float, nonempty: float, pseudocount: float) -> float:
    total = nonempty + 2 * pseudocount
    return (flagged + pseudocount) / total if total else math.nan


def _ratio(target_rate: float, reference_rate: float) -> float:
    """target / reference; inf for a positive target over 0, NaN for 0 / 0 or a NaN rate."""
    if reference_rate == 0:
        return math.inf if target_rate > 0 else math.nan
    return target_rate / reference_rate


def domain_privacy(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    *,
    pseudocount: float = 0.0,
) -> DomainPrivacy:
    """Pr_target[flagged by F_j] / Pr_reference[flagged by F_j] over all non-empty samples of
    each model (target masks [n_t], reference masks [n_r]; flags of empty samples are ignored).

    Zero denominators: with pseudocount 0 the plain ratio is returned, inf when the reference
    never leaks but the target does (no finite C bounds it), NaN when neither leaks (0 / 0: every
    C holds, none is estimated) or a model has no non-empty sample; the counts say which. A
    pseudocount a > 0 gives the add-a estimate (flagged + a) / (non-empty + 2a) per model (a = 0.5:
    Jeffreys' prior mean), finite and positive whenever both models have samples."""
    require(pseudocount >= 0, f"pseudocount must be >= 0, got {pseudocount}")
    counts = []
    for side, flagged, nonempty in (
        ("target", target_flagged, target_nonempty),
        ("reference", reference_flagged, reference_nonempty),
    ):
        flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
        require(
            flagged.shape == nonempty.shape and flagged.ndim == 1,
            f"{side}_flagged has shape {flagged.shape}, {side}_nonempty {nonempty.shape}",
        )
        counts += [int((flagged & nonempty).sum()), int(nonempty.sum())]
    target_rate = _rate(counts[0], counts[1], pseudocount)
    reference_rate = _rate(counts[2], counts[3], pseudocount)
    return DomainPrivacy(_ratio(target_rate, reference_rate), target_rate, reference_rate, *counts)


def domain_privacy_interval(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    target_prompt_ids: Sequence[Hashable],
    reference_prompt_ids: Sequence[Hashable],
    *,
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    pseudocount: float = 0.0,
    min_units: int = 2,
    target_runs: Sequence[Hashable] | None = None,
    lower_bound_if_reference_clean: bool = False,
) -> Estimate:
    """`domain_privacy`'s ratio and its (1 - alpha) interval over prompts (min_units as in
    `privleak.claims.bootstrap`): a t interval on the bootstrap standard error of log C,
    exponentiated (a ratio's sampling distribution is far from symmetric on its own scale), so
    the Estimate's test reads C's null on the log scale. A resample that draws none of the
    denominator's flags makes log C infinite: up to 5 % of them (`FINITE_SHARE`) leave the standard
    error to the draws' interquartile range; more leave no interval.

    The unit is the prompt: a prompt's samples come from one context, so they are not
    independent, and a drawn prompt brings all of its samples under both models along (the same
    contexts drive target and reference, so the two rates stay paired). `privleak.claims.bootstrap`
    gives no interval, with a note, when a resample's ratio is not finite (a reference with no
    flagged sample; a pseudocount > 0 avoids it) or fewer than two prompts.

    target_runs: the training run of each target sample, when the target was trained several
    times (every run with the same samples per prompt); runs and prompts are then resampled as
    crossed factors, each run's samples of a prompt paired with the (one) reference's samples of
    that prompt (fewer than min_units runs: no interval).

    lower_bound_if_reference_clean: where the ratio is inf (pseudocount 0, the reference never
    flags, the target does), return [`domain_privacy_bound`, inf] with a note saying so, instead
    of no interval."""
    target_flagged, reference_flagged = np.asarray(target_flagged), np.asarray(reference_flagged)
    require(
        len(target_prompt_ids) == len(target_flagged),
        f"{len(target_flagged)} target samples for {len(target_prompt_ids)} target_prompt_ids",
    )
    require(
        len(reference_prompt_ids) == len(reference_flagged),
        f"{len(reference_flagged)} reference samples for {len(reference_prompt_ids)} "
        "reference_prompt_ids",
    )
    # The point estimate's checks (mask shapes, pseudocount) hold for the resampled rows too.
    point = domain_privacy(
        target_flagged,
        reference_flagged,
        target_nonempty,
        reference_nonempty,
        pseudocount=pseudocount,
    )
    if lower_bound_if_reference_clean and point.ratio == math.inf:
        low = domain_privacy_bound(
            target_flagged,
            reference_flagged,
            target_nonempty,
            reference_nonempty,
            target_prompt_ids,
            reference_prompt_ids,
            n_boot=n_boot,
            seed=seed,
            alpha=alpha,
            min_units=min_units,
            target_runs=target_runs,
        )
        units = len(np.unique(prompt_codes([*target_prompt_ids, *reference_prompt_ids])))
        note = "the reference never flags: low is a lower bound on C, with no upper limit"
        return Estimate(math.inf, low, math.inf, units, note)
    target = _flag_rows(1.0, target_flagged, target_nonempty)
    reference = _flag_rows(0.0, reference_flagged, reference_nonempty)
    target_groups, reference_groups = list(target_prompt_ids), list(reference_prompt_ids)
    crossing, copies = {}, 1
    if target_runs is not None:
        require(
            len(target_runs) == len(target_flagged),
            f"{len(target_flagged)} target samples for {len(target_runs)} target_runs",
        )
        # Each run's cell of a prompt: that run's samples of it and the reference's samples of it.
        run_codes = prompt_codes(target_runs)
        runs = range(int(run_codes.max()) + 1)
        copies = len(runs)  # a resample draws len(runs) runs, each with the reference's rows
        reference = np.concatenate([reference] * copies)
        reference_groups = reference_groups * len(runs)
        crossing["runs"] = np.r_[run_codes, np.repeat(runs, len(reference_flagged))]
    rows = np.r_[target, reference]
    # Where the reference flags less often than the target, a resample may draw none of its flags
    # (C = inf there): log(1 / C) = log(reference rate / target rate) is finite unless a resample
    # draws none of the target's flags, and its interval, negated, is log C's.
    inverted = (
        pseudocount == 0
        and point.reference_flagged > 0
        and point.reference_flagged * point.target_nonempty
        < point.target_flagged * point.reference_nonempty
    )
    estimate = bootstrap(
        rows,
        partial(
            _log_ratio_of_rows,
            pseudocount=pseudocount,
            reference_copies=copies,
            inverted=inverted,
        ),
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
        min_units=min_units,
        groups=prompt_codes([*target_groups, *reference_groups]),
        min_share=FINITE_SHARE,
        **crossing,
    )
    if estimate.test is None:
        return replace(estimate, effect=point.ratio, low=math.nan, high=math.nan)
    test = estimate.test.negated() if inverted else estimate.test
    test = replace(test, log_scale=True, method=test.method + LOG_SCALE)
    low, high = test.interval(alpha)
    return replace(estimate, effect=point.ratio, low=low, high=high, test=test)


def _flag_rows(is_target: float, flagged, nonempty) -> np.ndarray:
    """Rows [is_target, flagged and non-empty, non-empty], one per sample."""
    flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
    return np.c_[np.full(len(flagged), is_target), flagged & nonempty, nonempty]


def _log_ratio_of_rows(
    drawn: np.ndarray, pseudocount: float, reference_copies: int = 1, inverted: bool = False
) -> float:
    """The log of domain_privacy's ratio of `_flag_rows` rows (target and reference rows
    together), where the reference's rows come `reference_copies` times (once per drawn training
    run); of its inverse (reference rate / target rate) when `inverted`. inf or NaN where a rate
    is 0."""
    target = drawn[:, 0] == 1
    flagged, nonempty = drawn[:, 1], drawn[:, 2]
    rates = (
        _rate(flagged[target].sum(), nonempty[target].sum(), pseudocount),
        _rate(
            flagged[~target].sum() / reference_copies,
            nonempty[~target].sum() / reference_copies,
            pseudocount,
        ),
    )
    ratio = _ratio(*rates[::-1]) if inverted else _ratio(*rates)
    with np.errstate(divide="ignore"):
        return float(np.log(ratio))


def domain_privacy_bound(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    target_prompt_ids: Sequence[Hashable],
    reference_prompt_ids: Sequence[Hashable],
    *,
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    min_units: int = 2,
    target_runs: Sequence[Hashable] | None = None,
) -> float:
    """A lower bound on C where the reference never flags (its estimate is inf): the target
    rate's (1 - alpha) lower limit over the reference rate's (1 - alpha) upper limit, so the
    bound fails with probability at most alpha (each limit fails with at most alpha / 2).

    The target rate's limit is its bootstrap interval over prompts (runs crossed when
    target_runs is given; arguments as in `domain_privacy_interval`); NaN where that bootstrap
    gives no interval, 0 where the target never flags either (C >= 0 holds trivially). The
    reference rate's limit is exact at 0 flagged: a sample's chance to be flagged is at most its
    prompt's chance to have a flagged sample, whose Clopper-Pearson upper limit at 0 of the
    reference's prompts with a non-empty sample (the independent unit: a prompt's samples share
    one context) is 1 - (alpha / 2) ** (1 / prompts). NaN where the reference has no non-empty
    sample."""
    point = domain_privacy(target_flagged, reference_flagged, target_nonempty, reference_nonempty)
    require(
        point.reference_flagged == 0,
        f"domain_privacy_bound is for a reference that never flags; this one flags "
        f"{point.reference_flagged} non-empty samples (use domain_privacy_interval)",
    )
    require(
        len(target_prompt_ids) == len(np.asarray(target_flagged)),
        f"{len(np.asarray(target_flagged))} target samples for {len(target_prompt_ids)} "
        "target_prompt_ids",
    )
    require(
        len(reference_prompt_ids) == len(np.asarray(reference_flagged)),
        f"{len(np.asarray(reference_flagged))} reference samples for "
        f"{len(reference_prompt_ids)} reference_prompt_ids",
    )
    reference_nonempty = np.asarray(reference_nonempty, bool)
    reference_prompts = len(set(prompt_codes(reference_prompt_ids)[reference_nonempty]))
    if reference_prompts == 0:
        return math.nan
    if point.target_flagged == 0:
        return 0.0
    crossing = {} if target_runs is None else {"runs": target_runs}
    target_nonempty = np.asarray(target_nonempty, bool)
    target = bootstrap(
        np.c_[np.asarray(target_flagged, bool) & target_nonempty, target_nonempty],
        ratio_of_sums,
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
        min_units=min_units,
        groups=prompt_codes(target_prompt_ids),
        **crossing,
    )
    reference = stats.binomtest(0, reference_prompts).proportion_ci(1 - alpha, method="exact")
    return max(target.low, 0.0) / reference.high  # a rate's t limit may fall below 0


def domain_privacy_table(
    drawn,
    references: Mapping[str, object],
    policy: str,
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    runs: Sequence[Hashable] | None = None,
) -> dict[str, dict]:
    """Domain privacy C of one target's samples against each leaked domain's reference: the plain
    ratio of the two flagged rates (no pseudocount) and its bootstrap interval over prompts.

    Where the reference never flags, the ratio is inf and not estimable; where the target does,
    `domain_privacy_bound` still bounds C from below.

    Args:
        drawn: the target's samples, a frame with columns prompt_id, empty and
            leak_<policy>_<j>.
        references: per leaked domain j, the reference M_(D without d_j)'s samples (same
            columns); its keys are the leaked domains, in table order.
        policy: the policy whose flags count as leaks.
        n_boot, seed, alpha: the bootstrap over prompts (`domain_privacy_interval`).
        runs: the training run of each target sample, when `drawn` holds several runs of the
            target: runs and prompts are then resampled as crossed factors.

    Returns:
        Per leaked domain j: {ratio, low, high, bound, target_rate, reference_rate}, bound one of
        "" ((low, high) a two-sided interval, NaN where the bootstrap gives none), "lower" (the
        reference never flags, the target does: ratio inf, low the lower bound, high inf) and
        "none" (neither model flags: ratio NaN, low 0, high inf, every C holds).
    """
    out = {}
    for j, reference in references.items():
        masks = (
            drawn[f"leak_{policy}_{j}"].to_numpy(),
            reference[f"leak_{policy}_{j}"].to_numpy(),
            ~drawn["empty"].to_numpy(),
            ~reference["empty"].to_numpy(),
        )
        point = domain_privacy(*masks)
        if point.target_flagged == point.reference_flagged == 0:
            low, high, bound = 0.0, math.inf, "none"
        else:
            estimate = domain_privacy_interval(
                *masks,
                drawn["prompt_id"].tolist(),
                reference["prompt_id"].tolist(),
                n_boot=n_boot,
                seed=seed,
                alpha=alpha,
                lower_bound_if_reference_clean=True,
                target_runs=runs,
            )
            low, high = estimate.low, estimate.high
            bound = "lower" if point.ratio == math.inf else ""
        out[j] = {
            "ratio": point.ratio,
            "low": low,
            "high": high,
            "bound": bound,
            "target_rate": point.target_rate,
            "reference_rate": point.reference_rate,
        }
    return out
