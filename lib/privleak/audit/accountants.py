"""The nominal epsilon of a response made of Gaussian steps (PAD's per-token noise), under three
accountants side by side: RDP with the Rényi order optimised (PAD's own, `pad.optimal_epsilon`),
dp_accounting's privacy-loss distribution (PLD) and Opacus's privacy random variables (PRV).

T Gaussian steps with sensitivities Delta_t and stds sigma_t compose exactly into one Gaussian
mechanism with sensitivity / std mu = sqrt(sum_t (Delta_t / sigma_t)^2) (Gaussian DP, Dong, Roth &
Su 2019), so each accountant is called once on mu; PLD and PRV then give the tightest epsilon of
the composition up to their discretisation, RDP an upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dp_accounting.pld import privacy_loss_distribution

from privleak.accounting import check_delta
from privleak.errors import require
from privleak.pad import optimal_epsilon


def gaussian_mu(sensitivity: Sequence[float], sigma: Sequence[float]) -> float:
    """mu = sqrt(sum_t (Delta_t / sigma_t)^2) of T Gaussian steps [T] (module docstring)."""
    sensitivity, sigma = np.asarray(sensitivity, dtype=float), np.asarray(sigma, dtype=float)
    require(sensitivity.shape == sigma.shape and sigma.size >= 1, "give one sigma per sensitivity")
    require(bool(np.all(sigma > 0)), "every accounted step needs noise (sigma > 0)")
    return float(np.sqrt(np.sum((sensitivity / sigma) ** 2)))


def gaussian_pld_epsilon(mu: float, delta: float, relative: float = 1e-4) -> float:
    """epsilon at delta of the Gaussian mechanism with sensitivity / std mu (`gaussian_mu`), by
    dp_accounting's privacy-loss distribution (pessimistic). Its grid is `relative` times the
    loss's scale mu^2 / 2 + 5 mu wide (at least 1e-3): a fixed 1e-3 grid would hold millions of
    points when mu is large (a screened step's sigma_min of 0.01 gives mu ~ 40 alone)."""
    check_delta(delta)
    require(math.isfinite(mu) and mu > 0, f"mu (sensitivity / noise std) must be > 0, got {mu!r}")
    width = max(1e-3, relative * (mu**2 / 2 + 5 * mu))
    loss = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=1.0 / mu, sensitivity=1.0, value_discretization_interval=width
    )
    return float(loss.get_epsilon_for_delta(delta))


def gaussian_prv_epsilon(mu: float, delta: float) -> float:
    """epsilon at delta of the same mechanism by Opacus's PRV accountant (privacy random
    variables; one step of noise multiplier 1 / mu, no subsampling); NaN where its discretisation
    cannot represent the mechanism (a very small noise multiplier: Opacus refuses it)."""
    from opacus.accountants import PRVAccountant

    check_delta(delta)
    require(math.isfinite(mu) and mu > 0, f"mu (sensitivity / noise std) must be > 0, got {mu!r}")
    accountant = PRVAccountant()
    accountant.history = [(1.0 / mu, 1.0, 1)]
    # log(1 - q) at q = 1 is -inf by design; exp overflows far in the tail
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            return float(accountant.get_epsilon(delta=delta))
        except RuntimeError:  # "Discrete mean differs significantly from continuous mean."
            return math.nan


def gaussian_rdp_epsilon(mu: float, delta: float) -> float:
    """epsilon at delta by RDP: the composed Gaussian's RDP is alpha mu^2 / 2 (PAD's Eq. 7 summed),
    converted with PAD's Eq. 8 at the order that minimises it (`pad.optimal_epsilon`)."""
    require(math.isfinite(mu) and mu > 0, f"mu (sensitivity / noise std) must be > 0, got {mu!r}")
    return optimal_epsilon(mu**2 / 2, delta)[0]
