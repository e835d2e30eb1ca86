"""The conformance check's power, shown on known answers: correct decoding-time DP mechanisms
that must pass and seeded bugs (mutants) that must be caught, each written against the check's
interface (`check.Law`: context logits [k, V] and public logits [V] to ln P [V]).

Correct mechanisms (each with the guarantee its construction proves):
- `vote`: the exponential mechanism on the summed per-document token distributions, utility
  sensitivity 1 under add/remove or replace, at epsilon / 2 per unit (pure epsilon per token,
  the shape of DP-ICL's aggregation); `vote_response` composes T tokens (T epsilon);
- `gaussian`: a Gaussian mechanism on the logits (sensitivity Delta in l2, the premise of PAD's
  accountant), sigma from the RDP accountant (PAD's Eqs. 7-8, the order optimised), then
  sampling at temperature T (post-processing); `gaussian_response` calibrates T steps;
- `screened`: PAD's screening done right: when the public model is confident the step
  releases the public law (no privacy cost), otherwise the Gaussian one;
- `mixture`: bounded CID (S0, Alg. 1): the mix lambda p_ctx + (1 - lambda) p_public with the
  largest lambda that keeps every token within epsilon / 2 of the public law on each side.

Mutants, each claiming its correct twin's guarantee (the bug named by the key).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.optimize import brentq

from privleak.audit.check import Claim, Law, check
from privleak.audit.pad_law import law_bounds
from privleak.pad import optimal_epsilon

TEMPERATURE = 0.2
"""The sampling temperature of the Gaussian mechanisms (PAD's App. E)."""
VOTE_EPSILON, GAUSSIAN_EPSILON, DELTA, SENSITIVITY, STEPS = 1.0, 2.0, 1e-5, 3.0, 8
CONFIDENCE = 0.9
"""The screening threshold on the top probability (PAD's tau_conf)."""


@dataclass(frozen=True)
class Case:
    """One mechanism of the suite: its law, the claim it makes, whether it is correct, and the
    bug it carries (empty for a correct one) or the correct twin it mutates."""

    name: str
    law: Law
    claim: Claim
    correct: bool
    family: str
    bug: str = ""


# ---- the mechanisms ---------------------------------------------------------------------------


def vote_law(epsilon: float, factor: float = 2.0, raw: bool = False) -> Law:
    """ln P [V] of the exponential mechanism on u = the sum over documents of their token
    distributions (raw: of their logits, unbounded), at epsilon / (factor * sensitivity 1)."""

    def law(context: torch.Tensor, public: torch.Tensor) -> torch.Tensor:
        utility = context.sum(0) if raw else torch.softmax(context, -1).sum(0)
        return torch.log_softmax(epsilon * utility / factor, -1)

    return law


@functools.cache
def rdp_sigma(epsilon: float, delta: float, sensitivity: float, steps: int,
              squared: bool = True, conversion: bool = True) -> float:  # fmt: skip
    """The sigma whose `steps` Gaussian steps of `sensitivity` cost `epsilon` at `delta` under
    RDP (alpha Delta^2 / (2 sigma^2) per step, summed, converted at the best order). The bugs:
    squared False charges Delta instead of Delta^2; conversion False takes the RDP value at the
    best order as epsilon, dropping ln(1/delta) / (alpha - 1)."""
    charge = sensitivity**2 if squared else sensitivity

    def cost(sigma: float) -> float:
        slope = steps * charge / (2 * sigma**2)
        if conversion:
            return optimal_epsilon(slope, delta)[0]
        return 2 * slope  # RDP at order 2, no conversion term

    return float(brentq(lambda s: cost(s) - epsilon, 1e-6, 1e6, xtol=1e-12))


def gaussian_law(sigma: float) -> Law:
    """Bounds on ln P [V] of sampling from softmax((s + sigma z) / T), s the context's one row
    (`pad_law`, certified)."""

    def law(context: torch.Tensor, public: torch.Tensor):
        logits = context[0].double().numpy()
        vocab = logits.size
        low, high = law_bounds(np.tile(logits, (vocab, 1)), np.arange(vocab),
                               np.full(vocab, sigma), TEMPERATURE)  # fmt: skip
        return torch.from_numpy(low), torch.from_numpy(high)

    return law


def screened_law(sigma: float, on_private: bool = False) -> Law:
    """PAD's screening: when the public model's (on_private: the context's) top probability at T
    exceeds CONFIDENCE, the step releases that model's tempered law; otherwise the Gaussian one."""
    noisy = gaussian_law(sigma)

    def law(context: torch.Tensor, public: torch.Tensor):
        screen = context[0] if on_private else public
        if torch.softmax(screen / TEMPERATURE, -1).max() > CONFIDENCE:
            exact = torch.log_softmax(screen / TEMPERATURE, -1)
            return exact, exact
        return noisy(context, public)

    return law


def mixture_law(
    epsilon: float, side: float = 0.5, lam: float | None = None, two_sided: bool = True,
    private_prior: bool = False,
) -> Law:  # fmt: skip
    """Bounded CID: ln(lam p_ctx + (1 - lam) p_prior) with the largest lam in [0, 1] keeping
    |ln(mix / p_prior)| <= side * epsilon for every token (bisection; the ratio grows with lam).
    The bugs: a fixed lam (no search), only the upper side checked, side = 1, and a prior read
    from the private context instead of the public model."""

    def law(context: torch.Tensor, public: torch.Tensor) -> torch.Tensor:
        own = torch.log_softmax(context[0], -1)
        prior = torch.log_softmax(context[0] / 4 if private_prior else public, -1)

        def mix(weight: float) -> torch.Tensor:
            return torch.logaddexp(
                math.log(weight) + own if weight > 0 else own - math.inf,
                math.log1p(-weight) + prior if weight < 1 else prior - math.inf,
            )

        def within(weight: float) -> bool:
            ratio = mix(weight) - prior
            top = ratio.max() if not two_sided else ratio.abs().max()
            return bool(top <= side * epsilon)

        if lam is not None:
            return mix(lam)
        low, high = 0.0, 1.0
        if within(high):
            return mix(high)
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if within(mid) else (low, mid)
        return mix(low)

    return law


# ---- the suite --------------------------------------------------------------------------------


def suite() -> list[Case]:
    """Every correct mechanism and every mutant, each with its claim (module docstring)."""
    vote = Claim(VOTE_EPSILON, relation="replace")
    vote_steps = Claim(STEPS * VOTE_EPSILON, steps=STEPS, relation="replace")
    gauss = Claim(GAUSSIAN_EPSILON, DELTA, relation="shift", sensitivity=SENSITIVITY)
    gauss_steps = Claim(GAUSSIAN_EPSILON, DELTA, steps=STEPS, relation="shift",
                        sensitivity=SENSITIVITY)  # fmt: skip
    mix = Claim(VOTE_EPSILON, relation="any")
    sigma = rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY, 1)
    sigma_steps = rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY, STEPS)
    cases: list[tuple[str, Callable[[], Law], Claim, str, str]] = [
        ("vote", lambda: vote_law(VOTE_EPSILON), vote, "vote", ""),
        ("vote_response", lambda: vote_law(VOTE_EPSILON), vote_steps, "vote", ""),
        ("gaussian", lambda: gaussian_law(sigma), gauss, "gaussian", ""),
        ("gaussian_response", lambda: gaussian_law(sigma_steps), gauss_steps, "gaussian", ""),
        ("screened", lambda: screened_law(sigma), gauss, "gaussian", ""),
        ("mixture", lambda: mixture_law(VOTE_EPSILON), mix, "mixture", ""),
        # the exponential mechanism
        ("vote_monotone_factor", lambda: vote_law(VOTE_EPSILON, factor=1.0), vote, "vote",
         "epsilon / sensitivity: the monotone factor, invalid under replace"),
        ("vote_unclipped", lambda: vote_law(VOTE_EPSILON, raw=True), vote, "vote",
         "utility from raw logits: sensitivity unbounded (clipping removed)"),
        ("vote_no_composition", lambda: vote_law(VOTE_EPSILON),
         Claim(VOTE_EPSILON, steps=STEPS, relation="replace"), "vote",
         "a response claims one token's epsilon (composition left out)"),
        ("vote_sqrt_composition", lambda: vote_law(VOTE_EPSILON),
         Claim(math.sqrt(STEPS) * VOTE_EPSILON, steps=STEPS, relation="replace"), "vote",
         "sqrt(T) composition of a pure epsilon with no delta to pay for it"),
        # the Gaussian mechanism and its accountant
        ("gaussian_noise_divided", lambda: gaussian_law(sigma / 10), gauss, "gaussian",
         "noise divided by 10"),
        ("gaussian_sensitivity_scaled", lambda: gaussian_law(
            rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY / 4, 1)), gauss, "gaussian",
         "sigma calibrated for a quarter of the sensitivity"),
        ("gaussian_delta_dropped", lambda: gaussian_law(SENSITIVITY / GAUSSIAN_EPSILON), gauss,
         "gaussian", "sigma = Delta / epsilon, the Laplace scale: delta ignored"),
        ("gaussian_conversion_dropped", lambda: gaussian_law(
            rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY, 1, conversion=False)), gauss,
         "gaussian", "the accountant's order fixed and RDP read as epsilon (no ln(1/delta) term)"),
        ("gaussian_unsquared", lambda: gaussian_law(
            rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY, 1, squared=False)), gauss,
         "gaussian", "the RDP charge alpha Delta / (2 sigma^2): sensitivity not squared"),
        ("gaussian_composition_miscounted", lambda: gaussian_law(
            rdp_sigma(GAUSSIAN_EPSILON, DELTA, SENSITIVITY, STEPS // 4)), gauss_steps,
         "gaussian", "a response's steps miscounted (T / 4 composed)"),
        ("screened_on_private", lambda: screened_law(sigma, on_private=True), gauss, "gaussian",
         "screening on the private logits, releasing their law when confident"),
        # bounded CID
        ("mixture_no_search", lambda: mixture_law(VOTE_EPSILON, lam=0.9), mix, "mixture",
         "lambda fixed at 0.9 (the search dropped)"),
        ("mixture_one_sided", lambda: mixture_law(VOTE_EPSILON, two_sided=False), mix, "mixture",
         "only ln(mix / prior) <= epsilon / 2 checked, not the lower side"),
        ("mixture_full_side", lambda: mixture_law(VOTE_EPSILON, side=1.0), mix, "mixture",
         "each side within epsilon of the prior instead of epsilon / 2"),
        ("mixture_private_prior", lambda: mixture_law(VOTE_EPSILON, private_prior=True), mix,
         "mixture", "the prior read from the private context instead of the public model"),
    ]  # fmt: skip
    return [Case(name, make(), claim, not bug, family, bug)
            for name, make, claim, family, bug in cases]  # fmt: skip


def run_suite(vocab: int = 8, bases: int = 4, seed: int = 0) -> pd.DataFrame:
    """One row per case of the suite: its family, bug, claim (epsilon, delta, steps, relation),
    the audited lower bound, the worst pair and whether the check flags it (`check.check`)."""
    rows = []
    for case in suite():
        report = check(case.law, case.claim, vocab=vocab, seed=seed, bases=bases)
        rows.append({"mechanism": case.name, "family": case.family, "correct": case.correct,
                     "bug": case.bug, "relation": case.claim.relation,
                     "steps": case.claim.steps, "delta": case.claim.delta,
                     "claimed": report.claimed, "audited": report.audited,
                     "flagged": report.violated, "pairs": report.pairs,
                     "worst_pair": report.worst_pair})  # fmt: skip
    return pd.DataFrame(rows)


def detection(results: pd.DataFrame) -> dict[str, float | int]:
    """{mutants, detected, detection_rate, correct, false_flags} of `run_suite`'s rows."""
    mutants, correct = results[~results["correct"]], results[results["correct"]]
    return {"mutants": len(mutants), "detected": int(mutants["flagged"].sum()),
            "detection_rate": float(mutants["flagged"].mean()), "correct": len(correct),
            "false_flags": int(correct["flagged"].sum())}  # fmt: skip
