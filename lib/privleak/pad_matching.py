"""Static noise at PAD's nominal ε: a like-for-like Static baseline (ours; the paper states no σ).

Table 1's Static adds one fixed σ to every logit at every step (the official default 0.1), while
PAD's noise follows its accountant, so "PAD beats Static" compares two free parameters. The matched
Static spends PAD's privacy budget instead. Under PAD's own accountant (`privleak.pad`: the Gaussian
mechanism's RDP alpha * Delta^2 / (2 sigma^2) per step, composed by addition and converted with
ln(1/delta) / (alpha - 1) at the order that minimises ε), a response of `steps` Static steps, each
charged Delta^2 = `charge`, costs

    ε_static(σ) = min_alpha  steps * charge * alpha / (2 σ^2) + ln(1/δ) / (alpha - 1),

every step charged, since Static screens none. The matched σ solves ε_static(σ) = the median of
PAD's per-response γ-relaxed ε at its optimised alpha (the ε the paper reports, App. C.3), with
`steps` the response budget, so no matched response spends more than the target. Two charges:
- Δ = 1 on every step (`sigma`): the bound's worst case, which Static's noise records carry
  (Static estimates no sensitivity). It is the strict guarantee and the larger σ: it favours
  Static on leakage and PAD on fluency.
- PAD's mean Δ_t^2 over its own recorded steps (`sigma_pad_sensitivity`): Eq. 4's estimate
  applied to Static, as if its steps had PAD's margins; the smaller σ.
The two ε are not the same guarantee: PAD's γ-relaxed ε covers its protected steps only (the
paper's γ-relaxation), Static's covers every token.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from privleak.accounting import check_delta
from privleak.errors import require
from privleak.pad import RDP_ORDERS, STATIC_SIGMA_MAX, optimal_epsilon, optimal_response_budget


def _check_charge(steps: int, charge: float) -> None:
    require(
        isinstance(steps, numbers.Integral) and steps >= 1,
        f"steps (the Static response's length) must be an integer >= 1, got {steps!r}",
    )
    require(
        isinstance(charge, numbers.Real) and 0 < charge <= 1,
        f"charge (Delta^2 per Static step) must be a number in (0, 1], got {charge!r}",
    )


def static_epsilon(
    sigma: float,
    steps: int,
    delta: float,
    charge: float = 1.0,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """ε of a Static response of `steps` steps at noise std sigma under PAD's accountant: every
    step charged Delta^2 = charge (1: the worst case), alpha optimised over `orders`."""
    _check_charge(steps, charge)
    require(
        isinstance(sigma, numbers.Real) and math.isfinite(sigma) and sigma > 0,
        f"Static sigma must be a finite number > 0, got {sigma!r}",
    )
    return optimal_epsilon(steps * charge / (2 * sigma**2), delta, orders)[0]


def epsilon_floor(delta: float, orders: Sequence[float] = RDP_ORDERS) -> float:
    """The accountant's ε at infinite noise, ln(1/δ) / (alpha_max - 1): no σ spends less."""
    return optimal_epsilon(0.0, delta, orders)[0]


def matched_static_sigma(
    target_epsilon: float,
    steps: int,
    delta: float,
    charge: float = 1.0,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """The Static noise std whose `static_epsilon` over `steps` steps at `charge` equals
    target_epsilon.

    ε_static rises strictly and continuously with the RDP slope steps * charge / (2 σ^2) (a
    minimum of lines of slopes alpha > 1), from `epsilon_floor` at slope 0 (infinite noise): a
    target at or below that floor has no finite σ."""
    _check_charge(steps, charge)
    check_delta(delta)
    floor = epsilon_floor(delta, orders)
    require(
        isinstance(target_epsilon, numbers.Real)
        and math.isfinite(target_epsilon)
        and target_epsilon > floor,
        f"the target ε must be a finite number above {floor:.4g} (the accountant's ε at "
        f"infinite noise for δ = {delta:g}), got {target_epsilon!r}",
    )
    gap = lambda slope: optimal_epsilon(slope, delta, orders)[0] - target_epsilon  # noqa: E731
    high = 1.0
    while gap(high) < 0:
        high *= 2
    slope = brentq(gap, 0.0, high, xtol=1e-300, rtol=1e-14)
    sigma = math.sqrt(steps * charge / (2 * slope))
    require(
        sigma <= STATIC_SIGMA_MAX,
        f"the target ε {target_epsilon!r} needs Static sigma {sigma:.3g}, above the largest "
        f"float32 logits allow ({STATIC_SIGMA_MAX:g})",
    )
    return sigma


def pad_epsilons(pad_rows: pd.DataFrame, delta: float) -> pd.Series:
    """[responses] PAD's γ-relaxed ε at the optimised alpha (the paper's reported ε) of each
    response (rows with sigma, sensitivity and protected per step), indexed like pad_rows."""
    return pd.Series(
        [
            optimal_response_budget(
                r.sigma, r.sensitivity, np.asarray(r.protected) > 0.5, delta
            ).epsilon_relaxed
            for r in pad_rows.itertuples()
        ],
        index=pad_rows.index,
        dtype=float,
    )


def matched_static(pad_rows: pd.DataFrame, steps: int, delta: float) -> pd.DataFrame:
    """Per corpus of pad_rows (PAD's responses): PAD's median ε (target_epsilon), the matched
    Static σ over `steps` steps at Δ = 1 (sigma) and at PAD's mean Δ_t^2 over its recorded steps
    (pad_charge, sigma_pad_sensitivity), and sigma's own ε (static_epsilon, the target up to the
    solver's tolerance). A corpus whose target is at the accountant's floor (its median PAD
    response screened every step) gets NaN σ's: no finite noise spends so little.
    Columns corpus, responses, target_epsilon, pad_charge, sigma, sigma_pad_sensitivity,
    static_epsilon."""
    require(not pad_rows.empty, "no PAD response to match Static's ε to")
    epsilons = pad_epsilons(pad_rows, delta)
    floor = epsilon_floor(delta)
    rows = []
    for corpus, part in pad_rows.groupby("corpus", sort=True):
        target = float(epsilons[part.index].median())
        sensitivity = np.concatenate([np.asarray(v, dtype=float) for v in part["sensitivity"]])
        charge = float(np.mean(sensitivity**2))
        row = {"corpus": corpus, "responses": len(part), "target_epsilon": target,
               "pad_charge": charge}  # fmt: skip
        if target > floor:
            sigma = matched_static_sigma(target, steps, delta)
            row |= {"sigma": sigma,
                    "sigma_pad_sensitivity": matched_static_sigma(target, steps, delta, charge),
                    "static_epsilon": static_epsilon(sigma, steps, delta)}  # fmt: skip
        else:
            row |= dict.fromkeys(("sigma", "sigma_pad_sensitivity", "static_epsilon"), math.nan)
        rows.append(row)
    return pd.DataFrame(rows)
