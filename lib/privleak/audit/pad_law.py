"""PAD's token law computed, not sampled: certified lower and upper bounds on the probability that
the noisy decoder emits a given token, by deterministic integration (no Monte-Carlo error).

PAD (S2 §3, `privleak.pad`) adds sigma z, z ~ N(0, I_V), to the step's log-probs s [V] and samples
from softmax((s + sigma z) / T). Sampling from a softmax is an argmax with i.i.d. standard Gumbel
noise g, so the emitted token is argmax_j (a_j + zeta_j), a_j = s_j / T, with i.i.d.
zeta_j = rho Z_j + G_j, rho = sigma / T (a Gaussian plus a Gumbel). Hence, with F the CDF of zeta
and d_j = a_r - a_j,

    P(r) = E[ prod_{j != r} F(d_j + zeta_r) ] = integral of H(x) dF(x),   H(x) = prod F(d_j + x),

a one-dimensional integral of an increasing function. On a grid x_k = x_0 + k h:
- P >= sum_k [F(x_{k+1}) - F(x_k)] H_lo(x_k), and
  P <= F(x_0) H_hi(x_0) + sum_k [F(x_{k+1}) - F(x_k)] H_hi(x_{k+1}) + (1 - F(x_K)),
  because H is increasing (the lower and upper Riemann sums);
- H_lo(x_k) = prod_j F(x_0 + (k + floor(d_j / h)) h) <= H(x_k) <= H_hi(x_k), the same with ceil,
  because F is increasing: each bound is a correlation of the offsets' counts with ln F on the
  grid (an FFT over about 10^4 grid points, whatever V).
F itself is a smooth one-dimensional integral, computed by the trapezoid rule on a grid of the
smooth variable (Z when rho <= 1, reaching as far below as the grid's bottom needs; the Gumbel
otherwise, its tail beyond the last node in closed form), integrated at every SPLINE_STRIDE-th
grid point and splined between. `MARGIN` widens the bounds for that numerical error where it
matters (the spline's); the correlations' rounding widens them by its own bound (`_log_h`);
deep in the tails F is less accurate, on terms that
carry negligible weight, so the bounds are validated rather than proven there: against an exact
two-token law at gaps up to 200 nats (tests) and 400 (spot checks). A target more than
`MAX_REACH` (in units of T) behind the top token gets the simple bounds (-inf, S(R/2) + F(-R/2)).
The gap between the two bounds is the grid's, and is returned, so a caller sees how tight each
probability is.

The hashed noise of `privleak.pad` is truncated at |z| < 5.3; the law here is the paper's
untruncated Gaussian (the two differ by less than the chance that any of the V draws of a step
falls beyond 5.3, about 6e-3 at V = 49,152, and only where such a draw decides the argmax).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.signal import fftconvolve
from scipy.special import log_ndtr, logsumexp

from privleak.errors import require

MARGIN = (1e-6, 1e-4)
"""(absolute nats, relative share of |ln P|) added to each side of a bound for the integration's
numerical error (the splined ln F is within about 2e-5 of the integrated one, relatively)."""
CELLS_PER_SCALE = 200
"""Grid points per standard deviation of zeta (sqrt(rho^2 + pi^2 / 6))."""
SPLINE_STRIDE = 20
"""ln F and ln(1 - F) are integrated at every SPLINE_STRIDE-th grid point and a cubic spline fills
in the rest."""
FFT_SAFETY = 64.0
"""The FFT correlation's error is taken as this many times u log2(L) ||table||_2 ||counts||_1
(`_log_h`), about three times the constant the textbook bound gives for two forward transforms,
their product and the inverse (the inverse's error scales with the result's norm, which Young's
inequality bounds by ||table||_2 ||counts||_1)."""
DIRECT_OFFSETS = 64
"""Up to this many distinct competitor offsets on the grid, their sum is direct, not an FFT."""
_LOWER_TAIL = 4.0  # P(G < -4) = exp(-e^4) ~ 2e-24
_UPPER_TAIL = 45.0  # P(G > 45) ~ 3e-20
_SPREAD = 9.0  # P(|Z| > 9) ~ 2e-19
_FLOOR = -1e4  # ln F below the grid, for the lower bound (F >= 0); e^-1e4 is 0 in float64
MAX_REACH = 1000.0
"""Beyond this many units of T behind the top token a target's bounds are (-inf, S(R/2) +
F(-R/2)): it wins only if its noise beats the top token's by R, so one of them moves R / 2."""
_Z_STEP = 0.2
_G_NODES = np.arange(-5.0, 60.0 + 1e-9, 0.2)
_LOG_G_WEIGHTS = (-_G_NODES - np.exp(-_G_NODES)) - logsumexp(-_G_NODES - np.exp(-_G_NODES))


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """ln(1 - e^x) for x <= 0, accurately on both sides of -ln 2."""
    x = np.minimum(x, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _from_survival(log_cdf: np.ndarray, log_sf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Above the median, ln F = ln(1 - S) from S, which keeps its relative precision there."""
    upper = log_sf < -math.log(2.0)
    log_cdf = log_cdf.copy()
    log_cdf[upper] = np.log1p(-np.exp(log_sf[upper]))
    return log_cdf, log_sf


def _gumbel_tail(u: np.ndarray, rho: float) -> np.ndarray:
    """ln of the integral over g > a (the last node) of e^-g Phi((g - u) / rho) dg, which bounds
    the nodes' missing part of 1 - F(u) from above (the Gumbel density is e^-g e^-e^-g <= e^-g):
    e^-a Phi((a - u) / rho) + e^(rho^2 / 2 - u) Phi(-((a - u) / rho + rho)), by parts."""
    edge = float(_G_NODES[-1])
    start = (edge - u) / rho
    return np.logaddexp(-edge + log_ndtr(start), rho**2 / 2 - u + log_ndtr(-(start + rho)))


def integrated_law(rho: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ln F, ln(1 - F)) of zeta = rho Z + G at points u: Z standard normal, G standard Gumbel
    (module docstring), by the trapezoid rule over the smooth variable."""
    require(rho >= 0 and math.isfinite(rho), f"rho (sigma / temperature) must be >= 0, got {rho}")
    if rho <= 1.0:  # F(u) = E_Z exp(-e^-(u - rho Z)): smooth in Z on the scale 1 / rho >= 1
        # far below zeta's bulk F(u) comes from Z near u / rho: the nodes reach that far
        reach = 10.0 + min(max(-float(u.min()), 0.0) / max(rho, 1e-12), 40.0)
        nodes = np.arange(-reach, 10.0 + 1e-9, _Z_STEP)
        log_weights = -0.5 * nodes**2 - logsumexp(-0.5 * nodes**2)
        exponent = -(u[:, None] - rho * nodes[None, :])
        with np.errstate(over="ignore", divide="ignore"):
            inner = np.exp(exponent)
            log_cdf = logsumexp(log_weights - inner, axis=1)
            # ln(1 - e^-inner), which is exponent - inner / 2 once inner is tiny (no underflow)
            log_tail = np.where(inner < 1e-10, exponent - inner / 2, np.log(-np.expm1(-inner)))
            log_sf = logsumexp(log_weights + log_tail, axis=1)
    else:  # F(u) = E_G Phi((u - G) / rho): smooth in G on the scale rho > 1
        scaled = (u[:, None] - _G_NODES[None, :]) / rho
        log_cdf = logsumexp(_LOG_G_WEIGHTS + log_ndtr(scaled), axis=1)
        # 1 - F(u) far above the bulk comes from G beyond the nodes: that tail in closed form
        log_sf = np.logaddexp(logsumexp(_LOG_G_WEIGHTS + log_ndtr(-scaled), axis=1),
                              _gumbel_tail(u, rho))  # fmt: skip
    # far below the bulk F underflows (e^-e^u): hold it at FLOOR, where the bounds account for it
    log_cdf = np.clip(log_cdf, _FLOOR, 0.0)
    return _from_survival(log_cdf, np.minimum(log_sf, 0.0))


@functools.lru_cache(maxsize=64)
def noise_law(rho: float, start: float, step: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(ln F [count], ln(1 - F) [count]) of zeta at start + k step: `integrated_law` at every
    SPLINE_STRIDE-th point, a cubic spline between them."""
    coarse = start + step * np.arange(0, count + SPLINE_STRIDE, SPLINE_STRIDE)
    fine = start + step * np.arange(count)
    log_cdf, log_sf = (np.minimum(CubicSpline(coarse, v)(fine), 0.0)
                       for v in integrated_law(rho, coarse))  # fmt: skip
    return _from_survival(log_cdf, log_sf)


def _log_h(
    counts: np.ndarray, table: np.ndarray, below: float, above: float
) -> tuple[np.ndarray, float]:
    """([K + 1] sum_b counts[b] table[k + b] for k = 0..K, a bound on its rounding error): the
    table [N] read as `below` before its first entry and as `above` past its last, counts over
    offsets b = -(K + 1)..N (index b + K + 1). An FFT correlation, or a direct sum over the
    offsets that hold a count when they are at most DIRECT_OFFSETS (a small vocabulary). The
    error bounds are the textbook ones (Higham, Accuracy and Stability of Numerical Algorithms,
    2002: Eq. 3.5 for a sum of n products, Thm. 24.2 for each transform), with FFT_SAFETY for
    the FFT's constant."""
    size = counts.size - table.size - 1  # K + 1
    extended = np.concatenate([np.full(size, below), table, np.full(size, above)])
    held = np.flatnonzero(counts)
    unit = np.finfo(np.float64).eps / 2
    if held.size <= DIRECT_OFFSETS:
        terms = extended[np.arange(size)[:, None] + held[None, :]]
        growth = held.size * unit / (1 - held.size * unit)  # gamma_n of a sum of n products
        return terms @ counts[held], growth * float(np.max(np.abs(terms) @ counts[held]))
    length = extended.size + counts.size - 1
    error = (FFT_SAFETY * math.log2(length) * unit
             * float(np.linalg.norm(extended)) * float(np.abs(counts).sum()))  # fmt: skip
    return fftconvolve(extended, counts[::-1], mode="valid"), error


def _grid(rho: float, reach: float) -> tuple[float, float, int, int]:
    """(x_0, h, K, B) of a grid wide enough for zeta's bulk and a competitor `reach` above the
    target, and the B further grid points below x_0 that its CDF is tabulated at (where that
    competitor's F is read). Widths are rounded up so that nearby calls share a cached
    `noise_law`."""
    scale = math.sqrt(rho**2 + math.pi**2 / 6)
    step = scale / CELLS_PER_SCALE
    start = -(_SPREAD * rho + _LOWER_TAIL)
    extra = 25.0 * math.ceil(max(reach, 0.0) / 25.0)
    width = _SPREAD * rho + _UPPER_TAIL - start + extra
    return start, step, math.ceil(width / step), math.ceil(extra / step)


def token_log_bounds(
    logprobs: np.ndarray, target: int, sigma: float, temperature: float
) -> tuple[float, float]:
    """(lower, upper) bounds on ln P(target) of PAD's noisy sampler: log-probs [V] of the clean
    step, noise std sigma >= 0, temperature T > 0 (module docstring). -inf for a token the model
    excludes (log-prob -inf)."""
    require(temperature > 0, f"temperature must be > 0, got {temperature!r}")
    require(sigma >= 0 and math.isfinite(sigma), f"sigma must be a finite number >= 0, got {sigma}")
    scaled = np.asarray(logprobs, dtype=np.float64) / temperature
    require(scaled.ndim == 1 and 0 <= target < scaled.size, f"target {target} outside [0, V)")
    if not np.isfinite(scaled[target]):
        return -math.inf, -math.inf
    others = np.delete(scaled, target)
    gaps = scaled[target] - others[np.isfinite(others)]  # d_j; an excluded token never wins
    if gaps.size == 0:
        return 0.0, 0.0
    rho = sigma / temperature
    reach = float(-gaps.min())
    if reach > MAX_REACH:
        log_cdf, log_sf = integrated_law(rho, np.array([-reach / 2, reach / 2]))
        return -math.inf, float(min(np.logaddexp(log_cdf[0], log_sf[1]), 0.0))
    start, step, count, extra = _grid(rho, reach)
    table_cdf, table_sf = noise_law(rho, start - extra * step, step, extra + count + 1)
    table_cdf = np.maximum(table_cdf, _FLOOR)  # the spline may dip below FLOOR: hold it there
    log_cdf, log_sf = table_cdf[extra:], table_sf[extra:]  # on the x grid
    size = table_cdf.size
    # offset of F's argument d_j + x_k from x_k, in grid points from the table's start; beyond
    # the table, F >= 0 (lower) and F <= F(first) (upper) below it, F >= F(last) (lower) and
    # F <= 1 (upper) above it
    bins = []
    for rounded in (np.floor(gaps / step), np.ceil(gaps / step)):
        offsets = np.clip(rounded + extra, -(count + 1), size).astype(int) + count + 1
        bins.append(np.bincount(offsets, minlength=size + count + 2).astype(float))
    # the rounding of each correlation widens its side of the bounds (ln H <= 0 holds exactly)
    log_h_low, error_low = _log_h(bins[0], table_cdf, _FLOOR, table_cdf[-1])
    log_h_high, error_high = _log_h(bins[1], table_cdf, table_cdf[0], 0.0)
    log_h_low, log_h_high = log_h_low - error_low, np.minimum(log_h_high + error_high, 0.0)
    # ln of the cell masses F(x_{k+1}) - F(x_k), from F below the median and 1 - F above it
    with np.errstate(invalid="ignore"):
        from_cdf = log_cdf[1:] + _log1mexp(log_cdf[:-1] - log_cdf[1:])
        from_sf = log_sf[:-1] + _log1mexp(log_sf[1:] - log_sf[:-1])
    log_mass = np.where(log_cdf[1:] < -math.log(2.0), from_cdf, from_sf)
    lower = logsumexp(np.concatenate([log_mass + log_h_low[:-1], [log_sf[-1] + log_h_low[-1]]]))
    upper = logsumexp(
        np.concatenate([log_mass + log_h_high[1:], [log_cdf[0] + log_h_high[0], log_sf[-1]]])
    )
    # every term holding a ln F raised to FLOOR is worth at most e^FLOOR in all
    lower = lower + _log1mexp(_FLOOR - lower) if lower > _FLOOR else -math.inf
    lower -= MARGIN[0] + MARGIN[1] * abs(lower)
    upper += MARGIN[0] + MARGIN[1] * abs(upper)
    return float(lower), float(min(upper, 0.0))


def law_bounds(
    logprobs: np.ndarray, targets: np.ndarray, sigma: np.ndarray, temperature: float
) -> tuple[np.ndarray, np.ndarray]:
    """([R] lower, [R] upper) bounds on ln P(target) at R positions: log-probs [R, V], targets
    [R], noise stds [R] (`token_log_bounds` per row)."""
    rows = [token_log_bounds(logprobs[i], int(targets[i]), float(sigma[i]), temperature)
            for i in range(len(targets))]  # fmt: skip
    out = np.array(rows, dtype=np.float64).reshape(len(targets), 2)
    return out[:, 0], out[:, 1]
