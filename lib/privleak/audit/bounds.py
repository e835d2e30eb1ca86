"""Statistics of a privacy audit: what a set of privacy losses or a distinguishing test says about
a mechanism's epsilon, each at a stated confidence 1 - alpha.

Notation: L(y) = ln P_D'(y) / P_D(y) is the privacy loss of output y between neighbours D' and D.
- A pure epsilon-DP mechanism has |L(y)| <= epsilon for every y: the largest exact loss over any
  candidates is a lower bound on epsilon with no statistics at all.
- An (epsilon, delta)-DP mechanism has the hockey-stick divergence
  H_eps = E_{y ~ P_D'}[(1 - e^{eps - L(y)})_+] <= delta. Since (1 - e^{eps - L})_+ >=
  (1 - e^{-s}) 1{L > eps + s}, P(L > eps + ln 2) <= 2 delta (s = ln 2): a loss level t that
  outputs reach with probability above 2 delta proves epsilon >= t - ln 2
  (`loss_epsilon_bound`, from sampled outputs).
- A black-box test that flags D' with probability TPR and D with FPR proves
  epsilon >= ln((TPR - delta) / FPR) (and the same with the roles of the outcomes swapped); with
  Clopper-Pearson bounds TPR_lo and FPR_hi it holds at the stated confidence
  (`blackbox_epsilon`). The threshold is chosen on one split of the samples and the bound
  evaluated on the other (`blackbox_audit`), so choosing it costs no confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from privleak.errors import require

LN2 = math.log(2.0)


def check_alpha(alpha: float) -> None:
    require(0 < alpha < 1, f"alpha (1 - the audit's confidence) must be in (0, 1), got {alpha!r}")


def clopper_pearson(successes: int, trials: int, alpha: float = 0.05) -> tuple[float, float]:
    """The exact two-sided 1 - alpha interval of a binomial proportion; each end is a one-sided
    bound at level alpha / 2."""
    check_alpha(alpha)
    require(trials >= 1 and 0 <= successes <= trials, f"need 0 <= {successes} <= {trials}, >= 1")
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = (
        1.0
        if successes == trials
        else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    )
    return low, high


def _losses(losses: Sequence[float]) -> np.ndarray:
    values = np.asarray(losses, dtype=float)
    require(values.ndim == 1 and values.size >= 1, "give at least one privacy loss")
    require(bool(np.all(~np.isnan(values))), "a privacy loss is NaN")
    return values


def loss_epsilon_bound(losses: Sequence[float], delta: float, alpha: float = 0.05) -> float:
    """A 1 - alpha lower bound on the epsilon of an (epsilon, delta) claim from m privacy losses
    [m] of outputs sampled from P_D' (module doc): with L_(k) the k-th largest, P(L >= L_(k)) is
    at least the alpha-quantile of Beta(k, m - k + 1) (distribution-free), so the smallest k whose
    quantile exceeds 2 delta gives epsilon >= L_(k) - ln 2. NaN when m is too small for any k."""
    check_alpha(alpha)
    require(0 <= delta < 0.5, f"delta must be in [0, 0.5), got {delta!r}")
    values = np.sort(_losses(losses))[::-1]
    m = values.size
    for k in range(1, m + 1):
        if beta.ppf(alpha, k, m - k + 1) > 2 * delta:
            return float(values[k - 1] - LN2)
    return math.nan


@dataclass(frozen=True)
class HockeyStick:
    """H_eps(P_D' || P_D) estimated from m sampled losses: the mean of (1 - e^{eps - L})_+, and a
    1 - alpha interval from the tail counts: [(1/2) CP_lo(#{L > eps + ln 2}), CP_hi(#{L > eps})]."""

    estimate: float
    low: float
    high: float


def hockey_stick(
    losses: Sequence[float],
    epsilon: float,
    alpha: float = 0.05,
    upper: Sequence[float] | None = None,
) -> HockeyStick:
    """H_eps from m losses; when each loss is only bounded, `losses` are the lower bounds and
    `upper` the upper ones: the low end counts the lower bounds, the high end the upper ones, and
    the estimate reads their midpoints."""
    values = _losses(losses)
    tops = values if upper is None else _losses(upper)
    require(tops.shape == values.shape and bool(np.all(tops >= values)), "upper < losses")
    m = values.size
    middle = (values + tops) / 2
    estimate = float(np.mean(-np.expm1(np.minimum(epsilon - middle, 0.0))))
    low = clopper_pearson(int(np.sum(values > epsilon + LN2)), m, alpha)[0] / 2
    high = clopper_pearson(int(np.sum(tops > epsilon)), m, alpha)[1]
    return HockeyStick(estimate, low, high)


COMBINATIONS = ("fires, D' over D", "fires, D over D'", "silent, D' over D", "silent, D over D'")
"""The four inequalities a DP claim makes about one test: P_A(S) <= e^eps P_B(S) + delta for the
events S = fires and S = stays silent, with (A, B) = (D', D) or (D, D')."""


def _rates(combination: int, hits_in: int, trials_in: int, hits_out: int, trials_out: int):
    x_in, x_out = (hits_in, hits_out) if combination < 2 else (trials_in - hits_in,
                                                                trials_out - hits_out)  # fmt: skip
    return (x_in, trials_in, x_out, trials_out) if combination % 2 == 0 else (
        x_out, trials_out, x_in, trials_in)  # fmt: skip


def blackbox_epsilon(
    hits_in: int,
    trials_in: int,
    hits_out: int,
    trials_out: int,
    delta: float,
    alpha: float,
    combination: int = 0,
) -> float:
    """The 1 - alpha lower bound ln((TPR_lo - delta) / FPR_hi) from one of the `COMBINATIONS`
    (default: the test fires more often with the canary in) for a test that fires on hits_in of
    trials_in outputs from D' and hits_out of trials_out from D; -inf when TPR_lo <= delta.
    TPR_lo and FPR_hi are Clopper-Pearson bounds at alpha / 2 each (a union bound)."""
    tp, n_tp, fp, n_fp = _rates(combination, hits_in, trials_in, hits_out, trials_out)
    tpr_low = clopper_pearson(tp, n_tp, alpha)[0]
    fpr_high = clopper_pearson(fp, n_fp, alpha)[1]
    return math.log((tpr_low - delta) / fpr_high) if tpr_low > delta else -math.inf


@dataclass(frozen=True)
class BlackBox:
    """A threshold test on a score s(y) (fires when s >= threshold) and one of the
    `COMBINATIONS`, both chosen on the selection split; its counts and epsilon lower bound on
    the evaluation split."""

    threshold: float
    combination: str
    hits_in: int
    trials_in: int
    hits_out: int
    trials_out: int
    epsilon_low: float

    @property
    def tpr(self) -> float:
        return self.hits_in / self.trials_in

    @property
    def fpr(self) -> float:
        return self.hits_out / self.trials_out


def _counts(scores_in: np.ndarray, scores_out: np.ndarray, threshold: float) -> tuple:
    hits_in, hits_out = int(np.sum(scores_in >= threshold)), int(np.sum(scores_out >= threshold))
    return hits_in, scores_in.size, hits_out, scores_out.size


def blackbox_audit(
    scores_in: Sequence[float], scores_out: Sequence[float], delta: float, alpha: float = 0.05
) -> BlackBox:
    """The black-box audit of scores [m_in] of outputs sampled with the canary and [m_out]
    without: the even-indexed samples choose the threshold (an observed score) and the
    combination that maximise the bound there; the odd-indexed ones evaluate that single test,
    so the choice costs no confidence. Needs >= 2 samples on each side."""
    check_alpha(alpha)
    inside, outside = np.asarray(scores_in, dtype=float), np.asarray(scores_out, dtype=float)
    require(inside.size >= 2 and outside.size >= 2, "the black-box audit needs >= 2 samples a side")
    pick_in, pick_out = inside[0::2], outside[0::2]
    options = [(t, c) for t in np.unique(np.concatenate([pick_in, pick_out]))
               for c in range(len(COMBINATIONS))]  # fmt: skip
    threshold, combination = max(
        options,
        key=lambda o: blackbox_epsilon(*_counts(pick_in, pick_out, o[0]), delta, alpha, o[1]),
    )
    counts = _counts(inside[1::2], outside[1::2], float(threshold))
    epsilon = blackbox_epsilon(*counts, delta, alpha, combination)
    return BlackBox(float(threshold), COMBINATIONS[combination], *counts, epsilon)
