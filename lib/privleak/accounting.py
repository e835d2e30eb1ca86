"""Differential-privacy accounting: the exponential mechanism over intervals of the real line, and
the composition of pure-DP steps into one (epsilon, delta).

The exponential mechanism here samples a real threshold tau from the density
pdf(tau) ∝ exp(epsilon * U(tau) / (2 * sensitivity)) where U is constant on each interval
[edges[j], edges[j + 1]) (DP-RAG's top-k / top-p utilities, Grislain, Fig. 4-5). Composition uses
`dp_accounting`'s privacy-loss distributions: a pure epsilon-DP step is composed through its
worst-case (randomized-response shaped) loss distribution, which is tighter than adding epsilons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dp_accounting.pld import common, privacy_loss_distribution

from privleak.errors import require

LOSS_DISCRETIZATION = 1e-4
"""Width of the privacy-loss grid of the composed distribution (dp_accounting's default)."""


def check_epsilon(epsilon: float, name: str = "epsilon") -> None:
    require(
        isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0,
        f"{name} must be a finite number > 0, got {epsilon!r}",
    )


def check_delta(delta: float, name: str = "delta") -> None:
    require(
        isinstance(delta, int | float) and 0 < delta < 1, f"{name} must be in (0, 1), got {delta!r}"
    )


def _check_intervals(edges: np.ndarray, utilities: np.ndarray) -> None:
    require(edges.ndim == 1 and len(edges) >= 2, "give at least two interval edges")
    require(
        utilities.shape == (len(edges) - 1,),
        f"need one utility per interval: {len(edges) - 1} intervals, {utilities.size} utilities",
    )
    require(bool(np.all(np.diff(edges) >= 0)), "interval edges must be non-decreasing")
    require(bool(edges[-1] > edges[0]), "the intervals must cover a range of positive width")


def interval_log_masses(
    edges: Sequence[float], utilities: Sequence[float], epsilon: float, sensitivity: float = 1.0
) -> np.ndarray:
    """[n] normalised log-probability of each interval [edges[j], edges[j+1]) under
    pdf ∝ exp(epsilon * U / (2 * sensitivity)): log(width_j) + epsilon * U_j / (2 * sensitivity),
    minus their logsumexp. Empty intervals get -inf."""
    edges, utilities = np.asarray(edges, dtype=float), np.asarray(utilities, dtype=float)
    _check_intervals(edges, utilities)
    check_epsilon(epsilon)
    check_epsilon(sensitivity, "sensitivity")
    with np.errstate(divide="ignore"):
        log_mass = np.log(np.diff(edges)) + epsilon * utilities / (2 * sensitivity)
    top = log_mass.max()
    return log_mass - (top + np.log(np.exp(log_mass - top).sum()))


def interval_density(
    edges: Sequence[float], utilities: Sequence[float], epsilon: float, sensitivity: float = 1.0
) -> np.ndarray:
    """[n] the normalised density on each interval (its probability / its width; 0 if empty)."""
    widths = np.diff(np.asarray(edges, dtype=float))
    masses = np.exp(interval_log_masses(edges, utilities, epsilon, sensitivity))
    return np.divide(masses, widths, out=np.zeros_like(masses), where=widths > 0)


def sample_from_intervals(
    edges: Sequence[float],
    utilities: Sequence[float],
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> float:
    """One draw of the exponential mechanism: an interval with probability ∝ its mass, then a
    uniform point inside it."""
    masses = np.exp(interval_log_masses(edges, utilities, epsilon, sensitivity))
    j = rng.choice(len(masses), p=masses / masses.sum())
    return float(rng.uniform(edges[j], edges[j + 1]))


SPARSE_COMPOSITIONS = 400
"""Up to this many repetitions, a pure step is composed one repetition at a time: the k-fold
composition of its two-point loss has k + 1 points, which dp_accounting keeps sparse while the
product of the two operands' sizes stays <= 1,000 (2 (k + 1) here, so up to k = 499; composed
with `fixed` steps afterwards, their points times k + 1 must stay within it too, or dp_accounting
goes dense as before). Its `self_compose` sizes the result as 2**k points and goes to a dense
grid spanning the whole loss range: splitting ε 1,000 over 16 tokens took 35.9 s that way and
5 ms this way (`benchmarks/bench_composition.py`); the composed ε of the two agree to 1e-9
(`tests/test_accounting.py`). For tiny ε over hundreds of steps the dense grid is narrow and
the two cost about the same (milliseconds)."""


def _pure_loss(epsilon: float, count: int) -> privacy_loss_distribution.PrivacyLossDistribution:
    step = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(epsilon, 0.0), LOSS_DISCRETIZATION
    )
    if count > SPARSE_COMPOSITIONS:
        return step.self_compose(count)
    loss = step
    for _ in range(count - 1):
        loss = loss.compose(step)
    return loss


def composed_epsilon(steps: Sequence[tuple[float, int]], delta: float) -> float:
    """The epsilon at `delta` of composing pure-DP steps [(epsilon_i, count_i)], each step
    epsilon_i-DP and repeated count_i times (dp_accounting, pessimistic loss distributions)."""
    check_delta(delta)
    require(bool(steps), "give at least one step to compose")
    loss = None
    for epsilon, count in steps:
        check_epsilon(epsilon)
        require(isinstance(count, int) and count >= 1, f"step count must be >= 1, got {count}")
        part = _pure_loss(epsilon, count)
        loss = part if loss is None else loss.compose(part)
    return float(loss.get_epsilon_for_delta(delta))


def per_step_epsilon(
    total_epsilon: float,
    delta: float,
    steps: int,
    fixed: Sequence[tuple[float, int]] = (),
    tolerance: float = 1e-4,
) -> float:
    """The largest per-step epsilon such that `fixed` steps plus `steps` repetitions of it compose
    to at most total_epsilon at delta (bisection on `composed_epsilon`, to `tolerance`). Used to
    split a response's budget over its tokens after the retrieval step's share."""
    check_epsilon(total_epsilon, "total epsilon")
    require(isinstance(steps, int) and steps >= 1, f"steps must be >= 1, got {steps}")
    fixed = list(fixed)
    spent = composed_epsilon(fixed, delta) if fixed else 0.0
    require(
        spent < total_epsilon,
        f"the fixed steps already spend epsilon {spent:.4g} >= the total {total_epsilon}",
    )
    low, high = 0.0, total_epsilon  # one step never gets more than the whole budget
    while high - low > tolerance:
        middle = (low + high) / 2
        if composed_epsilon([*fixed, (middle, steps)], delta) <= total_epsilon:
            low = middle
        else:
            high = middle
    require(low > 0, f"no per-step epsilon fits {steps} steps into epsilon {total_epsilon}")
    return low
