"""S3's policies as measured instruments: each policy's recall, precision and false-positive rate
per private domain on held-out labelled dialogs, and LiRa success rates corrected for those errors.

Unit of measurement: a held-out dialog TURN, one non-blank line of a dialog's text ("USER: ..." or
"AGENT: ..."), labelled with its dialog's domain. A turn is scored alone, speaker label included
(the leak test's view of a sample). Intervals are percentile bootstraps over dialogs, resampled
within each dialog domain: a dialog's turns share one conversation, so they are not independent.

For policy F and private domain j, a turn is flagged when F_j flags one of its words, and
- recall_j (sensitivity): the flagged share of the turns of domain-j dialogs;
- false-positive rate of F_j on domain d != j: the flagged share of the turns of domain-d dialogs;
- precision_j: flagged turns of domain-j dialogs / all flagged turns, over the held-out turns of
  every dialog domain given (so it depends on the domain mix of the held-out set).

Error-corrected rate (Rogan & Gladen 1978): if a sample is, with probability pi, text of domain j
and otherwise text of the prompted domain d, then P(flag) = pi * sens + (1 - pi) * fpr_d, so
pi_hat = (observed - fpr_d) / (sens - fpr_d), clipped to [0, 1]. It is undefined (NaN) when
sens <= fpr_d: the policy then flags domain-d text at least as often as domain-j text, so a flag
says nothing about j.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from privleak.errors import require
from privleak.policies import Policy

ALL_DOMAINS = "all"
"""The dialog_domain of precision rows in `policy_quality_table`: its base is every domain."""


TURN_FLAG_COLUMNS = ("dialog", "dialog_domain", "flagged_for", "flagged_turns", "turns")
"""The columns of `turn_flags`' frame, which `policy_quality_table` reads."""


def dialog_turns(text: str) -> list[str]:
    """The turns of a dialog: its non-blank lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def turn_flags(
    policy: Policy,
    dialogs: Sequence[str],
    dialog_domains: Sequence[str],
    dialog_ids: Sequence[Hashable],
    domains: Sequence[str],
) -> pd.DataFrame:
    """Per (dialog, flagged_for j): how many of the dialog's turns F_j flags, out of its turns.

    Args:
        policy: the policy (one flags_by_domain call on every turn of every dialog).
        dialogs, dialog_domains, dialog_ids: [n_dialogs] texts, domain labels and distinct ids.
        domains: the private domains j to flag for.

    Returns:
        [n_dialogs * len(domains)] rows, columns dialog, dialog_domain, flagged_for,
        flagged_turns, turns (ints).
    """
    require(
        len(dialogs) == len(dialog_domains) == len(dialog_ids),
        f"turn_flags: {len(dialogs)} dialogs, {len(dialog_domains)} dialog_domains and "
        f"{len(dialog_ids)} dialog_ids must be as many",
    )
    require(len(set(dialog_ids)) == len(dialog_ids), "turn_flags: dialog_ids must be distinct")
    require(bool(domains), "turn_flags: give at least one domain to flag for")
    turns = [dialog_turns(text) for text in dialogs]
    empty = [key for key, of_dialog in zip(dialog_ids, turns, strict=True) if not of_dialog]
    require(not empty, f"turn_flags: dialogs {empty[:3]} have no non-blank line (no turn)")
    flags = policy.flags_by_domain([turn for of_dialog in turns for turn in of_dialog], domains)
    sizes = np.array([len(of_dialog) for of_dialog in turns])
    starts = np.r_[0, np.cumsum(sizes)[:-1]]  # each dialog's first turn, every dialog non-empty
    frames = []
    for j in domains:
        flagged = np.array([any(words) for words in flags[j]], dtype=int)
        frames.append(
            pd.DataFrame(
                {
                    "dialog": list(dialog_ids),
                    "dialog_domain": list(dialog_domains),
                    "flagged_for": j,
                    "flagged_turns": np.add.reduceat(flagged, starts),
                    "turns": sizes,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _resampled_sums(rows: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[n_boot, k] column sums of rows [n_units, k] over n_boot resamples of the units with
    replacement (unit i drawn w_i times, w multinomial)."""
    weights = rng.multinomial(len(rows), np.full(len(rows), 1 / len(rows)), size=n_boot)
    return weights @ rows


def _ratio(counts, totals):
    """counts / totals elementwise, NaN where the total is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(totals) > 0, np.divide(counts, totals), np.nan)


def _percentile_interval(resampled: np.ndarray, alpha: float) -> tuple[float, float]:
    """The (alpha/2, 1 - alpha/2) percentiles of the finite resampled values [n_boot]; NaN when
    more than alpha/2 of them are undefined: dropping that many could move either limit."""
    finite = resampled[np.isfinite(resampled)]
    if finite.size < (1 - alpha / 2) * resampled.size:
        return math.nan, math.nan
    low, high = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _check_bootstrap(n_boot, alpha) -> None:
    require(
        isinstance(n_boot, int) and n_boot >= 100, f"n_boot must be an int >= 100; got {n_boot!r}"
    )
    require(0 < alpha < 0.5, f"alpha must be in (0, 0.5); got {alpha!r}")


def policy_quality_table(
    turn_flag_frame: pd.DataFrame, *, n_boot: int, seed: int, alpha: float
) -> pd.DataFrame:
    """Recall, precision and false-positive rates of one policy, per private domain j.

    Args:
        turn_flag_frame: `turn_flags`' rows (one per dialog and flagged_for j); every j must
            have dialogs of its own domain.
        n_boot, seed, alpha: the percentile bootstrap over dialogs, resampled within each
            dialog domain (numpy's default_rng(seed)); one resample serves every measure of j.

    Returns:
        Per flagged_for j (in order of first appearance), the rows
        - measure "recall", dialog_domain j: count = flagged turns, total = turns of j's dialogs;
        - measure "precision", dialog_domain ALL_DOMAINS: count = flagged turns of j's dialogs,
          total = flagged turns of every dialog;
        - measure "false_positive_rate", one row per dialog_domain d != j: count = flagged
          turns, total = turns of d's dialogs;
        with columns flagged_for, measure, dialog_domain, estimate (count / total, NaN when the
        total is 0), low, high (the (1 - alpha) interval; NaN when more than alpha/2 of the
        resamples have a total of 0), count, total, dialogs (the dialogs behind the total).
    """
    missing = [c for c in TURN_FLAG_COLUMNS if c not in turn_flag_frame.columns]
    require(not missing, f"policy_quality_table: turn_flag_frame lacks columns {missing}")
    require(
        not turn_flag_frame.duplicated(["flagged_for", "dialog"]).any(),
        "policy_quality_table: a dialog has several rows for one flagged_for domain",
    )
    counts, turns = turn_flag_frame["flagged_turns"], turn_flag_frame["turns"]
    require(
        bool(((counts >= 0) & (counts <= turns) & (turns >= 1)).all()),
        "policy_quality_table: need 0 <= flagged_turns <= turns and turns >= 1 on every row",
    )
    _check_bootstrap(n_boot, alpha)
    rng = np.random.default_rng(seed)
    rows = []
    for j, part in turn_flag_frame.groupby("flagged_for", sort=False):
        by_domain = {
            d: group[["flagged_turns", "turns"]].to_numpy(float)
            for d, group in part.groupby("dialog_domain", sort=True)
        }
        require(
            j in by_domain,
            f"policy_quality_table: no held-out dialog of domain {j!r}, so F_{j}'s recall is "
            f"undefined; dialog domains: {sorted(by_domain)}",
        )
        sums = {d: units.sum(0) for d, units in by_domain.items()}  # [2] per domain
        resampled = {d: _resampled_sums(units, n_boot, rng) for d, units in by_domain.items()}
        # Precision's base: the flagged turns of every domain, point and resampled.
        flagged = np.array([sums[j][0], sum(s[0] for s in sums.values())])
        resampled_flagged = np.c_[resampled[j][:, 0], sum(r[:, 0] for r in resampled.values())]
        measures = [
            ("recall", j, sums[j], resampled[j], len(by_domain[j])),
            ("precision", ALL_DOMAINS, flagged, resampled_flagged, len(part)),
            *(
                ("false_positive_rate", d, sums[d], resampled[d], len(by_domain[d]))
                for d in by_domain
                if d != j
            ),
        ]
        for measure, domain, (count, total), spread, dialogs in measures:
            low, high = _percentile_interval(_ratio(spread[:, 0], spread[:, 1]), alpha)
            rows.append(
                {
                    "flagged_for": j,
                    "measure": measure,
                    "dialog_domain": domain,
                    "estimate": float(_ratio(count, total)),
                    "low": low,
                    "high": high,
                    "count": int(count),
                    "total": int(total),
                    "dialogs": dialogs,
                }
            )
    return pd.DataFrame(rows)


def _corrected(observed, sensitivity, false_positive_rate):
    """The Rogan-Gladen estimate, elementwise: NaN where sensitivity <= false_positive_rate."""
    observed, sensitivity, fpr = (
        np.asarray(v, float) for v in (observed, sensitivity, false_positive_rate)
    )
    defined = sensitivity > fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        pi = np.clip((observed - fpr) / (sensitivity - fpr), 0.0, 1.0)
    return np.where(defined, pi, np.nan)


def corrected_rate(observed: float, sensitivity: float, false_positive_rate: float) -> float:
    """The share pi of samples that are domain-j text, from the observed flagged share and the
    policy's sensitivity on j and false-positive rate on the prompted domain (all in [0, 1]):
    (observed - fpr) / (sensitivity - fpr) clipped to [0, 1]; NaN when sensitivity <= fpr (the
    flags then carry no information on j) or an input is NaN."""
    values = {
        "observed": observed,
        "sensitivity": sensitivity,
        "false_positive_rate": false_positive_rate,
    }
    for name, value in values.items():
        require(
            math.isnan(value) or 0 <= value <= 1, f"{name} must be in [0, 1] or NaN; got {value}"
        )
    return float(_corrected(observed, sensitivity, false_positive_rate))


class CorrectedRate(NamedTuple):
    """An error-corrected rate, its (1 - alpha) interval and why a value is NaN ("" when none
    is)."""

    estimate: float
    low: float
    high: float
    note: str


def _count_rows(rows, name: str) -> np.ndarray:
    """rows as a float array [n, 2] of (count, total) per unit, checked."""
    array = np.asarray(rows, float)
    require(
        array.ndim == 2 and array.shape[1] == 2 and len(array) >= 1,
        f"{name} must be [units, 2] rows of (count, total) with at least one unit; got shape "
        f"{array.shape}",
    )
    require(
        bool(((array[:, 0] >= 0) & (array[:, 0] <= array[:, 1])).all()),
        f"{name}: every row needs 0 <= count <= total",
    )
    require(array[:, 1].sum() > 0, f"{name}: the totals sum to 0, so there is no rate")
    return array


def corrected_rate_interval(
    count_rows, sensitivity_rows, false_positive_rows, *, n_boot: int, seed: int, alpha: float
) -> CorrectedRate:
    """`corrected_rate` of three ratios of sums and its percentile bootstrap interval.

    Args:
        count_rows: [n_prompts, 2] (successes, total) per prompt of the observed rate.
        sensitivity_rows: [n_pos_dialogs, 2] (flagged_turns, turns) per domain-j dialog.
        false_positive_rows: [n_neg_dialogs, 2] (flagged_turns, turns) per dialog of the
            prompted domain.
        n_boot, seed, alpha: the three samples are independent, so each is resampled on its own
            (numpy's default_rng(seed), in argument order); resamples with sensitivity <= fpr
            are dropped, and more than alpha/2 of them dropped means no interval.

    Returns:
        CorrectedRate(estimate, low, high, note).
    """
    _check_bootstrap(n_boot, alpha)
    samples = [
        _count_rows(rows, name)
        for rows, name in (
            (count_rows, "count_rows"),
            (sensitivity_rows, "sensitivity_rows"),
            (false_positive_rows, "false_positive_rows"),
        )
    ]
    observed, sensitivity, fpr = (units[:, 0].sum() / units[:, 1].sum() for units in samples)
    estimate = float(_corrected(observed, sensitivity, fpr))
    if math.isnan(estimate):
        note = (
            f"sensitivity {sensitivity:.3g} <= false-positive rate {fpr:.3g}: the policy flags "
            "the prompted domain's text as often as domain j's, so no corrected rate"
        )
        return CorrectedRate(math.nan, math.nan, math.nan, note)
    rng = np.random.default_rng(seed)
    resampled = [_resampled_sums(units, n_boot, rng) for units in samples]
    corrected = _corrected(*(_ratio(sums[:, 0], sums[:, 1]) for sums in resampled))
    low, high = _percentile_interval(corrected, alpha)
    dropped = int(np.isnan(corrected).sum())
    note = (
        f"{dropped} of {n_boot} resamples have no corrected rate (sensitivity <= false-positive "
        "rate), more than alpha/2: no interval"
        if math.isnan(low)
        else ""
    )
    return CorrectedRate(estimate, low, high, note)
