"""The frontier's tables from frontier_generate's artifacts (docs/design.md §12): each point's
utility and leakage with intervals, the Pareto set, leakage at matched utility per defense, and
the paired comparisons the claims read.

Units are the frontier's questions; a unit's utility and leakage come from the same question (its
question and the attack on its contexts), so one draw of units serves every point and measure,
and every difference is paired.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from privleak.claims.procedures import BOOTSTRAP_T, Test
from privleak.claims.stats import Estimate, from_test
from privleak.errors import require
from privleak.frontier.matched import (
    Units,
    estimate,
    pareto_set,
    point_estimates,
    resampled_matched,
)

LEAKAGE = ("secret_mass", "emitted")
"""Leakage measures: the cued secret mass (Σ P(secret | its cue) over the unit's exposed secrets:
the expected number of secrets a response emits once it reaches each secret's cue; exact, or
certified bounds for the noisy defenses) and the sampled count of secrets repeated verbatim."""
MIN_SHARE = 0.95  # of a comparison's resamples that must reach the target utility
BOUNDS = ("secret_mass_low", "secret_mass_high")
"""The cued secret mass from the lower and upper bounds of each probability (equal but for the
noisy defenses, whose laws are bounded by integration)."""


def unit_matrices(responses: pd.DataFrame, leakage: pd.DataFrame,
                  points: Sequence[str]) -> dict[str, np.ndarray]:  # fmt: skip
    """{measure: [P, U] per-unit values}, points in `points` order, units in the order of the
    utility responses' first point. secret_mass is 0 for a unit whose contexts expose none."""
    utility = responses[responses["kind"] == "utility"]
    attack = responses[responses["kind"] == "attack"]
    units = list(dict.fromkeys(utility["question_id"]))
    require(len(units) >= 1, "frontier: no utility response")

    def matrix(frame: pd.DataFrame, column: str, fill: float | None = None) -> np.ndarray:
        table = frame.pivot_table(index="point", columns="question_id", values=column,
                                  aggfunc="sum" if fill is not None else "first")  # fmt: skip
        table = table.reindex(index=list(points), columns=units)
        if fill is not None:
            table = table.fillna(fill)
        values = table.to_numpy(dtype=float)
        require(bool(np.isfinite(values).all()) or column == "ppl",
                f"frontier: {column} is missing for some (point, unit)")  # fmt: skip
        return values

    mass = leakage.assign(p=np.exp(leakage["logprob"]), low=np.exp(leakage["logprob_low"]),
                          high=np.exp(leakage["logprob_high"]))  # fmt: skip
    return {
        "accuracy": matrix(utility.assign(correct=utility["correct"].astype(float)), "correct"),
        "rouge_l": matrix(utility, "rouge"),
        "ppl": matrix(utility, "ppl"),
        "secret_mass": matrix(mass, "p", fill=0.0),
        "secret_mass_low": matrix(mass, "low", fill=0.0),
        "secret_mass_high": matrix(mass, "high", fill=0.0),
        "emitted": matrix(attack.assign(emitted=attack["emitted"].astype(float)), "emitted"),
    }


def point_table(
    matrices: dict[str, np.ndarray],
    points: pd.DataFrame,
    *,
    n_boot: int,
    seed: int,
    alpha: float,
    method: str,
) -> pd.DataFrame:
    """One row per point: its defense, knob, value, nominal ε, each measure's mean over units
    with its interval, and whether it is on the Pareto set of (accuracy, secret_mass) and of
    (accuracy, emitted). PPL's mean leaves out responses with no scored token."""
    draws = np.random.default_rng(seed).integers(
        0, matrices["accuracy"].shape[1], size=(n_boot, matrices["accuracy"].shape[1])
    )
    out = points[["point", "defense", "knob", "value", "epsilon", "epsilon_all_steps"]].copy()
    for name, values in matrices.items():
        if name in BOUNDS:
            continue
        if name == "ppl":  # a response with no scored token takes its point's mean
            values = np.where(np.isfinite(values), values, np.nanmean(values, 1, keepdims=True))
        estimates = point_estimates(values, draws, alpha=alpha, method=method)
        out[name] = [e.effect for e in estimates]
        out[f"{name}_low"] = [e.low for e in estimates]
        out[f"{name}_high"] = [e.high for e in estimates]
    for leak in LEAKAGE:
        on = set(pareto_set(out["accuracy"].to_numpy(), out[leak].to_numpy()))
        out[f"pareto_{leak}"] = [i in on for i in range(len(out))]
    return out


def curves_of(points: pd.DataFrame) -> dict[str, list[int]]:
    """{defense: point positions, most private first, ending at none} from points.parquet."""
    return {d: [int(i) for i in c.split(",")]
            for d, c in zip(points["defense"], points["curve"], strict=True) if c}  # fmt: skip


REFUSAL = "refusal"
"""The baseline every defense should beat: answer undefended with probability q, else refuse
(an empty answer: no accuracy, no leakage); at matched utility it leaks share × the undefended
leakage."""


def matched(
    matrices: dict[str, np.ndarray],
    points: pd.DataFrame,
    share: float,
    *,
    n_boot: int,
    seed: int,
) -> dict[str, tuple[dict, dict[str, np.ndarray]]]:
    """{leakage measure: (observed {defense: Matched}, {defense: [n_boot] resamples})} at
    target accuracy share × the undefended accuracy, every defense (and `REFUSAL`) on the same
    draws."""
    reference = points["defense"].tolist().index("none")
    refuse = len(points)
    curves = {**curves_of(points), REFUSAL: [refuse, reference]}
    zero = np.zeros((1, matrices["accuracy"].shape[1]))
    accuracy = np.vstack([matrices["accuracy"], zero])
    return {
        leak: resampled_matched(
            Units(accuracy, np.vstack([matrices[leak], zero]), paired=True),
            curves,
            reference,
            share,
            n_boot=n_boot,
            seed=seed,
        )  # fmt: skip
        for leak in (*LEAKAGE, *BOUNDS)
    }


def matched_frame(found: dict, points: pd.DataFrame, share: float, units: int, *, alpha: float,
                  method: str, matrices: dict[str, np.ndarray]) -> pd.DataFrame:  # fmt: skip
    """One row per (leakage measure, defense): the matched leakage with its interval (for the
    cued secret mass, covering the noisy laws' bounds too), whether it is a mixture of two
    settings, and the target accuracy."""
    reference = points["defense"].tolist().index("none")
    target = share * float(matrices["accuracy"][reference].mean())
    rows = []
    for leak in LEAKAGE:
        observed, resamples = found[leak]
        for defense, value in observed.items():
            e = estimate(value.leakage, resamples[defense], units, alpha=alpha, method=method)
            if leak == "secret_mass" and math.isfinite(e.low):
                low = estimate(value.leakage, found[BOUNDS[0]][1][defense], units, alpha=alpha,
                               method=method).low  # fmt: skip
                high = estimate(value.leakage, found[BOUNDS[1]][1][defense], units, alpha=alpha,
                                method=method).high  # fmt: skip
                e = Estimate(e.effect, min(low, e.low), max(high, e.high), e.units, e.note)
            rows.append({"leakage": leak, "defense": defense, "target_accuracy": target,
                         "matched": e.effect, "low": e.low, "high": e.high,
                         "mixture": value.mixture, "note": e.note})  # fmt: skip
    return pd.DataFrame(rows)


def comparison(found: dict, leak: str, a: str, b: str, units: int, *, alpha: float) -> Estimate:
    """Matched leakage of a minus b on the same resamples (negative: a leaks less): a t interval
    on the standard error of the paired resamples, units - 1 degrees of freedom
    (privleak.claims.procedures.BOOTSTRAP_T). For the cued secret mass it also spans the t
    intervals of the difference's certified bounds, a's lower bound minus b's upper one and a's
    upper minus b's lower (matched leakage rises with every point's leakage, so the true
    difference lies between them), and its p-value needs all three to exclude the null. No
    interval when more than 5 % of the resamples miss the target utility."""
    observed, draws = found[leak]
    effect = observed[a].leakage - observed[b].leakage
    sides = [(effect, draws[a] - draws[b])]
    if leak == "secret_mass":
        (low, low_draws), (high, high_draws) = found[BOUNDS[0]], found[BOUNDS[1]]
        sides += [(low[a].leakage - high[b].leakage, low_draws[a] - high_draws[b]),
                  (high[a].leakage - low[b].leakage, high_draws[a] - low_draws[b])]  # fmt: skip
    spreads = []
    for centre, spread in sides:
        finite = spread[np.isfinite(spread)]
        if finite.size < MIN_SHARE * spread.size or not math.isfinite(centre):
            missed = spread.size - finite.size
            note = f"{missed} of {spread.size} resamples miss the target utility: no interval"
            return Estimate(effect, math.nan, math.nan, units, note)
        spreads.append((centre, float(finite.std(ddof=1))))
    (_, se), *envelope = spreads
    test = Test(BOOTSTRAP_T, effect, se=se, df=units - 1, resamples=draws[a].size,
                envelope=tuple(envelope))  # fmt: skip
    return from_test(test, units, alpha, effect)


def epsilon_gap(leakage: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """Per point whose law states a bound for a secret's event (`event_epsilon`: bounded CID's
    and DP-ICL's per-token ε times the secret's tokens; PAD's accountant over the secret's own
    steps, with `event_delta`): each secret's loss on the store without its document,
    ln P_D(secret | cue) − ln P_D'(secret | cue), certified from below (P_D's lower bound over
    P_D''s upper), against that bound; a violation is P_D > e^ε P_D' + δ on those bounds.
    Columns: the largest loss, the largest loss over its bound, and the secrets that violate."""
    rows = []
    kinds = points.set_index("point")["defense"]
    stated = leakage[np.isfinite(leakage["event_epsilon"])]
    for point, own in stated.groupby("point", sort=False):
        loss = (own["logprob_low"] - own["without_high"]).to_numpy()
        bound = own["event_epsilon"].to_numpy()
        with np.errstate(over="ignore"):
            excess = np.exp(own["logprob_low"]) - np.exp(bound + own["without_high"])
        violated = excess.to_numpy() > own["event_delta"].to_numpy()
        rows.append({"point": point, "defense": kinds[point], "max_loss": float(loss.max()),
                     "max_loss_over_bound": float((loss - bound).max()),
                     "largest_bound": float(bound.max()), "violations": int(violated.sum()),
                     "secrets": int(loss.size)})  # fmt: skip
    return pd.DataFrame(rows)
