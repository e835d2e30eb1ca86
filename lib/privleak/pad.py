"""Privacy-aware decoding (PAD, Wang et al., S2 §3) and static logit noise, as the shared decoder's
`mix`, with PAD's per-response Rényi-DP accountant.

At step t (1-based, as the official code counts) with next-token log-probs s_t [V]:
    margin_t     = s_t(1) - s_t(2)                                   (Eq. 3; a logit margin, the
                                                                     log-softmax keeps it)
    screened_t   = max p_t > tau_conf  and  margin_t > tau_margin    (§3.2, "low risk")
    Delta_t      = clip(1 / (1 + ln(1 + margin_t)), Delta_min, 1)    (Eq. 4)
    calibrate_t  = (1 - w_H) + w_H H(p_t) + w_pos / (1 + 0.1 t) + w_conf (1 - max p_t)   (§3.4)
    sigma_base   = eps_min / max(eps, eps_min)                       (§3.2)
    sigma_t      = sigma_base * calibrate_t * lambda_amp * Delta_t / eps    (Eq. 5, see below)
    noisy s_t    = s_t + sigma_t z_t,  z_t ~ N(0, I_V);  screened steps use sigma_min instead.
The sampler then applies the decoder's transforms (temperature) to the noisy logits.

Where the paper contradicts itself: Eq. 5 leaves Delta_t out of the noise, which would make the
sensitivity estimate change only the accountant (the "No Sens." ablation could not change a
single token) and would keep sigma <= 3 * 1.5 even at eps = 0.01, where §4.4 reports that all
leakage vanishes at infinite perplexity. We follow Algorithm 1 (App. B, line 21) and the official
code: sigma_t also scales with Delta_t / eps. The clips are the official code's: sigma_t to
[sigma_min, sigma_max] = [0.01, 10], calibrate_t to [0.1, 2] (it never leaves [0.7, 1.5] with the
default weights).

Ablations: "No Calib." sets calibrate_t = 1; "No Sens." sets Delta_t = 1 (the bound's worst case).
Static noise adds sigma z_t at every step with one fixed sigma.

Noise is a pure function of (group seed, step, token id): a 32-bit integer hash turned into a
standard normal by the inverse CDF, computed on the model's device in int64 arithmetic that cannot
overflow, so a group's noise does not depend on its batch and is bit-identical on CPU and CUDA.

Accounting (§3.5), per response (a fresh accountant for every prompt: the official code shared one
across prompts, so epsilon and the position factor accumulated): the Gaussian mechanism with noise
std sigma_t and sensitivity Delta_t costs alpha * Delta_t^2 / (2 sigma_t^2) of RDP at order alpha
(Eq. 7); T steps compose by addition and convert to (eps, delta)-DP with + ln(1/delta)/(alpha - 1)
(Eq. 8). gamma is the fraction of protected (not screened) steps. The paper's gamma-relaxed epsilon
charges only the protected steps (`epsilon_relaxed`); `epsilon_all_steps` also charges the screened
ones (their sigma_min with the step's own Delta_t), the price of a guarantee on every token. The
official code charged them nothing and always reported gamma = 1. Both epsilons are available at
a fixed alpha (`response_budget`; App. E and the official code use alpha = 10) and at the alpha
that minimises them over the usual grid of orders, `RDP_ORDERS` (`optimal_response_budget`;
App. C.3: "we optimize alpha to minimize epsilon for the chosen delta").

This epsilon is nominal: it is the paper's accountant, not an audited guarantee. Delta_t comes from
the logit margin, not from a proven bound on the sensitivity to one retrieved document; sigma_t,
Delta_t and the screening all read the private logits; and the hashed noise is not exactly
Gaussian: it is truncated at |z| < 5.3 (`bits_to_normals`).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privleak.accounting import check_delta, check_epsilon
from privleak.decoding import GroupSettings, group_seed, sampling_logprobs
from privleak.errors import require

EPSILON_MIN = 0.01
SIGMA_MIN = 0.01
SIGMA_MAX = 10.0
CALIBRATION_RANGE = (0.1, 2.0)
POSITION_DECAY = 0.1


@dataclass(frozen=True)
class PADSettings:
    """One PAD configuration. Each default is the paper's value (App. E) or, where the paper gives
    none, the official code's:

        epsilon            eps_base   0.2   App. E
        amplification      lambda_amp 3.0   App. E
        min_sensitivity    Delta_min  0.4   App. E (the official run's value too)
        weight_entropy     w_entropy  0.3   App. E
        weight_position    w_pos      0.2   App. E
        weight_confidence  w_conf     0.3   official code (the paper gives no value)
        tau_conf                      0.9   official code (Algorithm 1 names it, without a value)
        tau_margin                    2.0   official code (Algorithm 1 names it, without a value)
        screening, calibration, sensitivity   True: the full PAD; False is an ablation (App. D)

    App. E's alpha = 10 and delta = 1e-5 are the accountant's, not the noise's: they are arguments
    of `response_budget` (and delta of `optimal_response_budget`)."""

    epsilon: float = 0.2
    amplification: float = 3.0
    min_sensitivity: float = 0.4
    tau_conf: float = 0.9
    tau_margin: float = 2.0
    weight_entropy: float = 0.3
    weight_position: float = 0.2
    weight_confidence: float = 0.3
    screening: bool = True
    calibration: bool = True
    sensitivity: bool = True

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "PAD epsilon")
        require(
            math.isfinite(self.amplification) and self.amplification >= 0,
            f"PAD amplification must be a finite number >= 0, got {self.amplification!r}",
        )
        require(
            0 < self.min_sensitivity <= 1,
            f"PAD min_sensitivity (Delta_min) must be in (0, 1], got {self.min_sensitivity!r}",
        )
        require(0 <= self.tau_conf <= 1, f"PAD tau_conf must be in [0, 1], got {self.tau_conf!r}")
        require(self.tau_margin >= 0, f"PAD tau_margin must be >= 0, got {self.tau_margin!r}")
        for name in ("weight_entropy", "weight_position", "weight_confidence"):
            value = getattr(self, name)
            require(value >= 0, f"PAD {name} must be >= 0, got {value!r}")


# Logits are float32 (max 3.4e38): a larger std turns the noise into inf and every step into
# one token. At 1e30 the logits are already lost in the noise.
STATIC_SIGMA_MAX = 1e30


@dataclass(frozen=True)
class StaticNoise:
    """I.i.d. Gaussian noise of one standard deviation on every logit at every step."""

    sigma: float

    def __post_init__(self) -> None:
        require(
            math.isfinite(self.sigma) and 0 < self.sigma <= STATIC_SIGMA_MAX,
            f"static noise sigma must be a number in (0, {STATIC_SIGMA_MAX:g}] (float32 logits), "
            f"got {self.sigma!r}",
        )


Noise = PADSettings | StaticNoise | None
"""A group's logit noise: PAD, static, or none (the undefended extraction)."""


# The common grid of Rényi orders of RDP accountants (Opacus's default alphas).
RDP_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10 for x in range(1, 100)] + [float(order) for order in range(12, 64)]
)
"""Rényi orders alpha to optimise epsilon over: the common grid of RDP accountants (Opacus's
default: 1.1, 1.2, ..., 10.9, then 12, 13, ..., 63)."""


def check_accounting(alpha: float, delta: float) -> None:
    require(
        isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 1,
        f"the Rényi order alpha must be a finite number > 1, got {alpha!r}",
    )
    check_delta(delta)


# ---- the step quantities --------------------------------------------------------------------


def margin_sensitivity(margin: torch.Tensor, min_sensitivity: float | torch.Tensor) -> torch.Tensor:
    """[g] Delta_t of logit margins [g] (Eq. 4): 1 / (1 + ln(1 + m)) clipped to [Delta_min, 1]."""
    value = 1.0 / (1.0 + torch.log1p(margin.clamp(min=0)))
    return torch.maximum(value, torch.as_tensor(min_sensitivity, device=margin.device)).clamp(
        max=1.0
    )


def normalized_entropy(logprobs: torch.Tensor) -> torch.Tensor:
    """[g] entropy of log-probs [g, V] over ln |V| (Eq. 6); |V| counts the tokens the model can
    emit (finite log-probs), so a padded vocabulary does not lower it."""
    probs = logprobs.exp()
    entropy = -torch.where(probs > 0, probs * logprobs, 0.0).sum(-1)
    support = torch.isfinite(logprobs).sum(-1).clamp(min=2)
    return entropy / support.log()


def calibration(
    logprobs: torch.Tensor, position: int | torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """[g] calibrate(p_t, t) (§3.4) of log-probs [g, V] at 1-based step `position` (one, or [g]),
    weights [g, 3]
    = (w_entropy, w_position, w_confidence), clipped to CALIBRATION_RANGE."""
    top = logprobs.amax(-1).exp()
    value = (
        (1 - weights[:, 0])
        + weights[:, 0] * normalized_entropy(logprobs)
        + weights[:, 1] / (1 + POSITION_DECAY * position)
        + weights[:, 2] * (1 - top)
    )
    return value.clamp(*CALIBRATION_RANGE)


# ---- noise that belongs to the group --------------------------------------------------------

_MASK32 = 0xFFFFFFFF
# Odd multipliers below 2^31: a 32-bit value times one stays below 2^63, so int64 never overflows.
_MULTIPLIERS = (0x7FEB352D, 0x5A3C9E4F)


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche hash of int64 values in [0, 2^32), elementwise."""
    h = h ^ (h >> 16)
    h = (h * _MULTIPLIERS[0]) & _MASK32
    h = h ^ (h >> 15)
    h = (h * _MULTIPLIERS[1]) & _MASK32
    return h ^ (h >> 16)


def step_keys(seeds: torch.Tensor, step: int) -> torch.Tensor:
    """[g] 32-bit keys of groups with 63-bit seeds [g] (int64) at one step."""
    low, high = seeds & _MASK32, (seeds >> 32) & _MASK32
    return _mix32(low ^ _mix32(high ^ _mix32(torch.full_like(seeds, step & _MASK32))))


UNIFORM_BITS = 23
"""Bits of each hashed uniform: (bits + 0.5) / 2^23 is exact in float32, so u stays inside (0, 1)
(with 24 bits the largest value rounds up to 1 and its normal is infinite)."""


def bits_to_normals(bits: torch.Tensor) -> torch.Tensor:
    """float32 standard normals of integers in [0, 2^UNIFORM_BITS): the inverse normal CDF of the
    midpoint uniforms (bits + 0.5) / 2^UNIFORM_BITS, so |z| < 5.3."""
    return torch.special.ndtri((bits.float() + 0.5) / float(1 << UNIFORM_BITS))


def hashed_normals(keys: torch.Tensor, vocab: int) -> torch.Tensor:
    """[g, vocab] float32 standard normals, a pure function of each row's 32-bit key [g] and the
    token id (`bits_to_normals` of the top UNIFORM_BITS bits of a hash of both)."""
    return _normals(keys, _token_hashes(vocab, keys.device))


def _normals(keys: torch.Tensor, token_hashes: torch.Tensor) -> torch.Tensor:
    return bits_to_normals(_mix32(keys[:, None] ^ token_hashes) >> (32 - UNIFORM_BITS))


@functools.lru_cache(maxsize=8)
def _token_hashes(vocab: int, device: torch.device) -> torch.Tensor:
    # The token half of the hash, once per vocabulary and device rather than every step.
    return _mix32(torch.arange(vocab, device=device, dtype=torch.int64))


def noise_seeds(seed: int, keys: Sequence) -> torch.Tensor:
    """[g] int64 noise seeds of groups with keys: distinct from the sampler's own stream."""
    return torch.tensor([group_seed(seed, ("logit noise", key)) for key in keys], dtype=torch.int64)


# ---- the decoder's mix ----------------------------------------------------------------------

_KIND_NONE, _KIND_STATIC, _KIND_PAD = 0, 1, 2


def settings_table(noises: Sequence[Noise]) -> dict[str, torch.Tensor]:
    """Columns [g] of per-group noise settings, as `pad_sigma` and `noise_std` read them."""

    def column(get, default=0.0, dtype=torch.float32):
        return torch.tensor(
            [get(n) if isinstance(n, PADSettings) else default for n in noises], dtype=dtype
        )

    return {
        "kind": torch.tensor(
            [
                _KIND_PAD if isinstance(n, PADSettings) else _KIND_STATIC if n else _KIND_NONE
                for n in noises
            ]  # fmt: skip
        ),
        "static_sigma": torch.tensor(
            [n.sigma if isinstance(n, StaticNoise) else 0.0 for n in noises]
        ),
        "epsilon": column(lambda n: n.epsilon, 1.0),
        "amplification": column(lambda n: n.amplification),
        "min_sensitivity": column(lambda n: n.min_sensitivity, 1.0),
        "tau_conf": column(lambda n: n.tau_conf),
        "tau_margin": column(lambda n: n.tau_margin),
        "weights": torch.stack(
            [
                column(lambda n: n.weight_entropy),
                column(lambda n: n.weight_position),
                column(lambda n: n.weight_confidence),
            ],
            dim=1,
        ),  # fmt: skip
        "screening": column(lambda n: n.screening, False, torch.bool),
        "calibration": column(lambda n: n.calibration, False, torch.bool),
        "sensitivity": column(lambda n: n.sensitivity, False, torch.bool),
    }


def pad_sigma(
    logprobs: torch.Tensor, position: int | torch.Tensor, table: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma [g], Delta [g], protected [g] bool) of PAD rows: log-probs [g, V] at 1-based step
    `position` (one, or [g]), their settings `table` (columns [g]). See the module docstring."""
    top2 = logprobs.topk(2, dim=-1).values
    margin = top2[:, 0] - top2[:, 1]
    screened = (
        table["screening"] & (top2[:, 0].exp() > table["tau_conf"]) & (margin > table["tau_margin"])
    )
    delta = torch.where(
        table["sensitivity"], margin_sensitivity(margin, table["min_sensitivity"]), 1.0
    )
    calibrate = torch.where(
        table["calibration"], calibration(logprobs, position, table["weights"]), 1.0
    )
    base = EPSILON_MIN / table["epsilon"].clamp(min=EPSILON_MIN)
    sigma = base * calibrate * table["amplification"] * delta / table["epsilon"]
    sigma = torch.where(screened, SIGMA_MIN, sigma.clamp(SIGMA_MIN, SIGMA_MAX))
    return sigma, delta, ~screened


def noise_std(
    logprobs: torch.Tensor, position: int | torch.Tensor, rows: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sigma, Delta, protected), each [g], of any mix of PAD, static and noiseless rows."""
    sigma, delta, protected = pad_sigma(logprobs, position, rows)
    is_pad, is_static = rows["kind"] == _KIND_PAD, rows["kind"] == _KIND_STATIC
    sigma = torch.where(is_pad, sigma, torch.where(is_static, rows["static_sigma"], 0.0))
    delta = torch.where(is_pad, delta, is_static.float())
    return sigma, delta, torch.where(is_pad, protected, is_static)


class LogitNoise:
    """The decoder's `mix` for one stream per group: adds each group's noise (PAD, static or none;
    `noises[g]`) to its next-token log-probs [g, 1, V]. seeds [g]: `noise_seeds`.

    Records per step: sigma (the noise std, 0 without noise), sensitivity (Delta_t; 1 for static
    noise, 0 without noise) and protected (1 when PAD did not screen the step; 1 for static)."""

    def __init__(self, noises: Sequence[Noise], seeds: torch.Tensor):
        require(len(noises) == len(seeds), f"{len(noises)} noises for {len(seeds)} seeds")
        self.settings = GroupSettings(dict(settings_table(noises), seeds=seeds))

    def __call__(self, stream_logprobs: torch.Tensor, groups: torch.Tensor, step: int):
        require(stream_logprobs.shape[1] == 1, "LogitNoise takes one stream per group")
        logprobs = stream_logprobs[:, 0]
        token_hashes = _token_hashes(logprobs.shape[-1], logprobs.device)
        noisy_step = _compiled_noisy_step() if logprobs.is_cuda else noisy_step_logprobs
        noisy, sigma, delta, protected = noisy_step(
            logprobs, step, groups, self.settings.on(logprobs.device), token_hashes
        )
        return noisy, {"sigma": sigma, "sensitivity": delta, "protected": protected}


def noisy_step_logprobs(
    logprobs: torch.Tensor,
    step: int,
    groups: torch.Tensor,
    table: dict[str, torch.Tensor],
    token_hashes: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(noisy log-probs [g, V], sigma [g], Delta [g], protected [g] float 0/1) of one decode step:
    clean log-probs [g, V] at 0-based `step` of `groups` [g] (rows of `table`: settings columns
    and int64 "seeds", each [G]), `_token_hashes` [V]."""
    rows = {name: values[groups] for name, values in table.items()}
    sigma, delta, protected = noise_std(logprobs, step + 1, rows)
    noise = _normals(step_keys(rows["seeds"], step), token_hashes)
    return logprobs + sigma[:, None] * noise, sigma, delta, protected.float()


@functools.cache
def _compiled_noisy_step():
    # On a GPU the step's ~40 small elementwise kernels over [g, V] cost more in launches than in
    # arithmetic; compiled, they fuse into a few (PAD's overhead over plain sampling falls below
    # the 10 % bar). The step is a Python int, compiled as a symbol: a tensor step would cost a
    # host-to-device copy, and with it a sync, every step. The hash is integer arithmetic, so the
    # noise stays bit-identical to the eager CPU path. TORCHDYNAMO_DISABLE=1 runs it eagerly.
    return torch.compile(noisy_step_logprobs, dynamic=True)


def noisy_target_logprobs(
    logprobs: torch.Tensor,
    targets: torch.Tensor,
    positions: torch.Tensor,
    noises: Sequence[Noise],
    seeds: torch.Tensor,
    transforms: Sequence,
    draws: int,
) -> torch.Tensor:
    """[R] ln P(target) of the noisy decoder at R teacher-forced positions: log-probs [R, V],
    targets [R], 1-based steps [R], each row's noise and int64 seed [R].

    Each step's noise is fresh and its std a function of the clean log-probs, so the probability
    the decoder emits target is E_z[softmax(transforms(s + sigma z))[target]] exactly, and a
    sequence's is the product over its steps. The expectation is the mean over `draws` hashed
    noise draws per row (unbiased; noiseless rows need one)."""
    require(draws >= 1, f"draws (noise samples per position) must be >= 1, got {draws}")
    rows = {k: v.to(logprobs.device) for k, v in settings_table(noises).items()}
    sigma, _, _ = noise_std(logprobs, positions.to(logprobs.device), rows)
    seeds = seeds.to(logprobs.device)
    taken = []
    for draw in range(draws):
        noise = hashed_normals(step_keys(seeds, draw), logprobs.shape[-1])
        noisy = sampling_logprobs(logprobs + sigma[:, None] * noise, transforms)
        taken.append(noisy.gather(-1, targets[:, None].to(logprobs.device))[:, 0])
    return torch.logsumexp(torch.stack(taken), 0) - math.log(draws)


# ---- accounting -----------------------------------------------------------------------------


def step_rdp(alpha: float, sensitivity: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Rényi DP at order alpha of Gaussian steps (Eq. 7): alpha * Delta^2 / (2 sigma^2)."""
    sensitivity, sigma = np.asarray(sensitivity, dtype=float), np.asarray(sigma, dtype=float)
    require(bool(np.all(sigma > 0)), "every accounted step needs noise (sigma > 0)")
    return alpha * sensitivity**2 / (2 * sigma**2)


@dataclass(frozen=True)
class ResponseBudget:
    """One response's privacy: gamma (protected fraction), the epsilons of Eq. 8."""

    steps: int
    gamma: float
    rdp_protected: float
    rdp_all: float
    epsilon_relaxed: float
    epsilon_all_steps: float


def _response_steps(
    sigma: Sequence[float], sensitivity: Sequence[float], protected: Sequence[bool]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sigma, sensitivity, protected) of one response's recorded steps as checked arrays [T]."""
    sigma, sensitivity = np.asarray(sigma, dtype=float), np.asarray(sensitivity, dtype=float)
    protected = np.asarray(protected, dtype=bool)
    require(
        sigma.shape == sensitivity.shape == protected.shape and sigma.ndim == 1,
        "sigma, sensitivity and protected need one value per step",
    )
    require(len(sigma) >= 1, "a response needs at least one step to account")
    return sigma, sensitivity, protected


def response_budget(
    sigma: Sequence[float],
    sensitivity: Sequence[float],
    protected: Sequence[bool],
    alpha: float,
    delta: float,
) -> ResponseBudget:
    """The per-response accountant over one response's T recorded steps at one Rényi order alpha
    (module docstring)."""
    check_accounting(alpha, delta)
    sigma, sensitivity, protected = _response_steps(sigma, sensitivity, protected)
    rdp = step_rdp(alpha, sensitivity, sigma)
    conversion = math.log(1 / delta) / (alpha - 1)
    relaxed, full = float(rdp[protected].sum()), float(rdp.sum())
    return ResponseBudget(
        steps=len(sigma),
        gamma=float(protected.mean()),
        rdp_protected=relaxed,
        rdp_all=full,
        epsilon_relaxed=relaxed + conversion,
        epsilon_all_steps=full + conversion,
    )


def _check_orders(orders: Sequence[float]) -> np.ndarray:
    """orders as a float array [n], or PrivleakError naming the bad ones."""
    try:
        grid = np.asarray(orders, dtype=float)
    except (TypeError, ValueError):
        grid = None
    valid = grid is not None and grid.ndim == 1 and grid.size >= 1
    bad = grid[~(np.isfinite(grid) & (grid > 1))] if valid else None
    require(
        valid and bad.size == 0,
        "orders (the Rényi orders alpha) must be a non-empty list of finite numbers > 1, "
        + (f"got {orders!r}" if not valid else f"and these are not: {bad.tolist()!r}"),
    )
    return grid


def optimal_epsilon(
    rdp_per_order: float, delta: float, orders: Sequence[float] = RDP_ORDERS
) -> tuple[float, float]:
    """(epsilon, alpha): the smallest epsilon = rdp_per_order * alpha + ln(1/delta) / (alpha - 1)
    (Eq. 8; App. C's Eq. 12) over the Rényi orders, and the order that gives it (the smallest on a
    tie).

    The RDP of Gaussian steps is linear in alpha (Eq. 7; App. C's Eq. 10-11), so the caller passes
    its slope, sum_t Delta_t^2 / (2 sigma_t^2): the RDP at alpha = 1."""
    require(
        isinstance(rdp_per_order, numbers.Real)
        and math.isfinite(rdp_per_order)
        and rdp_per_order >= 0,
        f"rdp_per_order (the RDP per unit of alpha) must be a finite number >= 0, "
        f"got {rdp_per_order!r}",
    )
    check_delta(delta)
    grid = _check_orders(orders)
    epsilons = rdp_per_order * grid + math.log(1 / delta) / (grid - 1)
    best = epsilons.min()
    return float(best), float(grid[epsilons == best].min())


@dataclass(frozen=True)
class OptimalBudget:
    """One response's privacy with alpha optimised (App. C.3): gamma (protected fraction), the
    gamma-relaxed epsilon (protected steps only) and the all-steps epsilon, each at its own best
    Rényi order."""

    steps: int
    gamma: float
    epsilon_relaxed: float
    alpha_relaxed: float
    epsilon_all_steps: float
    alpha_all_steps: float


def optimal_response_budget(
    sigma: Sequence[float],
    sensitivity: Sequence[float],
    protected: Sequence[bool],
    delta: float,
    orders: Sequence[float] = RDP_ORDERS,
) -> OptimalBudget:
    """The per-response accountant of `response_budget` with alpha chosen to minimise each epsilon
    over `orders` (`optimal_epsilon`), rather than fixed."""
    check_delta(delta)
    sigma, sensitivity, protected = _response_steps(sigma, sensitivity, protected)
    require(bool(np.all(np.isfinite(sensitivity))), "every step's sensitivity must be finite")
    slope = step_rdp(1.0, sensitivity, sigma)
    epsilon_relaxed, alpha_relaxed = optimal_epsilon(float(slope[protected].sum()), delta, orders)
    epsilon_all, alpha_all = optimal_epsilon(float(slope.sum()), delta, orders)
    return OptimalBudget(
        steps=len(sigma),
        gamma=float(protected.mean()),
        epsilon_relaxed=epsilon_relaxed,
        alpha_relaxed=alpha_relaxed,
        epsilon_all_steps=epsilon_all,
        alpha_all_steps=alpha_all,
    )
