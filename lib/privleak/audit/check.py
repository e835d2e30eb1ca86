"""A conformance check for any decoding-time DP mechanism: does the mechanism's claimed epsilon
hold on adversarial neighbouring inputs? Exact where the mechanism's token law is exact.

The interface: a mechanism is a function law(context [k, V], public [V]) -> ln P [V] of the
token it releases at one step, given the private context's per-document next-token logits (one
row per document; one row for a single private context) and a public model's logits (the
no-context prior; ignore it if unused). It may instead return (lower [V], upper [V]) bounds on
ln P, for a law that is integrated rather than closed-form (`pad_law`).

A `Claim` states the guarantee: (epsilon, delta) per token, or per response of `steps` tokens,
over the neighbouring relation:
- "add": D' is D with one more document (add/remove one document);
- "replace": D' is D with its last document replaced;
- "any": D and D' are any two single-row contexts (a guarantee for the whole context);
- "shift": D' = D + v for one row, ||v||_2 <= sensitivity (a premise on the logits, as a Gaussian
  mechanism states its guarantee).

`canary_pairs` builds seeded neighbours with adversarial canaries: a document that puts its mass
on one token or takes it away, near-ties among the base logits so a threshold sits where a test
is strongest. `audit` computes, for each pair, the exact epsilon at the claimed delta of one
token (the smallest epsilon whose hockey-stick divergence is <= delta both ways round) or of a
response of `steps` independent tokens under the same pair (its privacy-loss distribution
composed on a grid, each loss rounded down): a lower bound on the mechanism's true epsilon with no
statistics, since every audited law is exact or bounded from the right side. The mechanism
violates its claim when the largest audited epsilon exceeds the claimed one beyond a relative
float tolerance. Passing shows consistency on the audited pairs, never a proof.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from privleak.errors import PrivleakError, require

RELATIONS = ("add", "replace", "any", "shift")
TOLERANCE = 1e-4
"""Relative slack before a flag: float32 laws reproduce a bound met with equality to ~1e-6."""
LOSS_GRID = 2e-3
"""Width of the grid a response's privacy-loss distribution is composed on (losses rounded
down, so the composed epsilon stays a lower bound)."""
LOSS_FLOOR = -30.0
"""Losses below this are dropped from a composition (a dropped atom only lowers the divergence,
so the bound stays valid)."""

Law = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | tuple[torch.Tensor, torch.Tensor]"]


@dataclass(frozen=True)
class Claim:
    """The guarantee a mechanism states: (epsilon, delta)-DP per token (steps 1) or per response
    of `steps` tokens, over `relation` (module docstring); `sensitivity` bounds the logit shift
    for relation "shift"."""

    epsilon: float
    delta: float = 0.0
    steps: int = 1
    relation: str = "add"
    sensitivity: float | None = None

    def __post_init__(self) -> None:
        require(self.epsilon > 0 and math.isfinite(self.epsilon),
                f"claim epsilon must be a finite number > 0, got {self.epsilon!r}")  # fmt: skip
        require(0 <= self.delta < 1, f"claim delta must be in [0, 1), got {self.delta!r}")
        require(isinstance(self.steps, int) and self.steps >= 1,
                f"claim steps must be an integer >= 1, got {self.steps!r}")  # fmt: skip
        require(self.relation in RELATIONS, f"claim relation {self.relation!r} is unknown; "
                f"allowed: {', '.join(RELATIONS)}")  # fmt: skip
        require((self.relation == "shift") == (self.sensitivity is not None),
                "a claim gives a sensitivity exactly when its relation is 'shift'")  # fmt: skip
        if self.sensitivity is not None:
            require(self.sensitivity > 0, f"sensitivity must be > 0, got {self.sensitivity!r}")


@dataclass(frozen=True)
class Pair:
    """Neighbouring inputs: contexts [k, V] and [k', V] for D and D', the public logits [V]."""

    outside: torch.Tensor
    inside: torch.Tensor
    public: torch.Tensor
    label: str


@dataclass(frozen=True)
class Report:
    """The check's answer: the claimed epsilon, the audited lower bound (the largest over the
    pairs), the pair that reached it, and whether the claim is violated."""

    claimed: float
    audited: float
    delta: float
    steps: int
    worst_pair: str
    pairs: int
    per_pair: list[float] = field(repr=False)

    @property
    def violated(self) -> bool:
        return self.audited > self.claimed * (1 + TOLERANCE)  # inf included, NaN never

    def line(self) -> str:
        verdict = "VIOLATED" if self.violated else "consistent on the audited pairs"
        return (f"claimed epsilon {self.claimed:.4g} (delta {self.delta:g}, "
                f"{'per token' if self.steps == 1 else f'per response of {self.steps} tokens'})"
                f"; audited lower bound {self.audited:.4g} over {self.pairs} pairs "
                f"(worst: {self.worst_pair}): {verdict}")  # fmt: skip


# ---- neighbours ---------------------------------------------------------------------------------


def _base(generator: torch.Generator, rows: int, vocab: int, scale: float) -> torch.Tensor:
    """[rows, V] random logits with a near-tie at the top (the first two tokens)."""
    logits = scale * torch.randn(rows, vocab, generator=generator, dtype=torch.float64)
    top = logits.amax(-1, keepdim=True)
    logits[:, :2] = top + scale * 0.1 * torch.rand(rows, 2, generator=generator,
                                                     dtype=torch.float64)  # fmt: skip
    return logits


GAPS = (0.0, *(2.0 ** (k / 4) for k in range(-4, 29)))
"""Logit gaps of the two-token bases, 0 and 0.5 ... 128 in steps of 2^(1/4): the gap sets where
an event's threshold sits, and the strongest test of a Gaussian shift lies in a tail the checker
cannot know in advance."""
SPIKE = 12.0
"""How far a canary document's logits move its token (about e^12 times the others' odds)."""


def _spike(vocab: int, token: int, height: float = SPIKE) -> torch.Tensor:
    row = torch.zeros(vocab, dtype=torch.float64)
    row[token] = height
    return row


def _document_pair(claim: Claim, base: torch.Tensor, canary: torch.Tensor, swap: torch.Tensor,
                   public: torch.Tensor, label: str) -> Pair:  # fmt: skip
    """D and D' for a document relation: add the canary, replace the last document (with `swap`
    as D's last document), or the canary context against the base context (any)."""
    if claim.relation == "add":
        return Pair(base, torch.cat([base, canary[None]]), public, label)
    if claim.relation == "replace":
        outside = torch.cat([base[:-1], swap[None]])
        return Pair(outside, torch.cat([base[:-1], canary[None]]), public, label)
    return Pair(base[-1:], canary[None], public, label)


def canary_pairs(
    claim: Claim, vocab: int = 8, documents: int = 3, seed: int = 0, bases: int = 4
) -> list[Pair]:
    """Seeded neighbouring inputs for the claim's relation, each with an adversarial canary:
    - `bases` random bases (logits at scales 0.5 ... 8, a near-tie at the top), each with a
      canary that spikes one token, one that dips it, one that moves two tokens apart and a
      random one;
    - two-token bases, one per gap in `GAPS`: token 1 ahead of token 0 by the gap, the rest far
      below, and a canary that moves token 0 up and token 1 down (a document spiked on token 0
      replacing one spiked on token 1).
    For "shift" each canary is its direction scaled to the claimed sensitivity (l2)."""
    require(vocab >= 2 and documents >= 1 and bases >= 0, "need vocab >= 2, documents >= 1")
    generator = torch.Generator().manual_seed(seed)
    rows = 1 if claim.relation in ("any", "shift") else documents
    pairs = []

    def add(base, direction, public, label, swap_token):
        if claim.relation == "shift":
            shift = claim.sensitivity * direction / direction.norm()
            pairs.append(Pair(base, base + shift[None], public, label))
            return
        centre = base.mean(0)
        canary = centre + SPIKE * direction / direction.abs().max()
        swap = centre + _spike(vocab, swap_token)
        pairs.append(_document_pair(claim, base, canary, swap, public, label))

    for b in range(bases):
        scale = 0.5 * 2.0 ** (b % 5)
        base = _base(generator, rows, vocab, scale)
        public = _base(generator, 1, vocab, scale)[0]
        target = int(torch.randint(vocab, (1,), generator=generator))
        other = (target + 1) % vocab
        noise = torch.randn(vocab, generator=generator, dtype=torch.float64)
        directions = {"spike": _spike(vocab, target, 1.0), "dip": -_spike(vocab, target, 1.0),
                      "apart": _spike(vocab, target, 1.0) - _spike(vocab, other, 1.0),
                      "random": noise}  # fmt: skip
        for name, direction in directions.items():
            add(base, direction, public, f"base {b} (scale {scale:g}), {name} canary on token "
                f"{target}", other)  # fmt: skip
    for gap in GAPS:
        base = torch.full((rows, vocab), -60.0, dtype=torch.float64)
        base[:, 0], base[:, 1] = 0.0, gap
        public = torch.zeros(vocab, dtype=torch.float64)
        add(base, _spike(vocab, 0, 1.0) - _spike(vocab, 1, 1.0), public,
            f"two tokens {gap:g} apart, canary moving them together", 1)  # fmt: skip
    return pairs


# ---- exact epsilon of a pair of laws ----------------------------------------------------------


def _bounds(law) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(law, tuple):
        low, high = (np.asarray(torch.as_tensor(v, dtype=torch.float64)) for v in law)
    else:
        low = high = np.asarray(torch.as_tensor(law, dtype=torch.float64))
    require(low.ndim == 1 and low.shape == high.shape, "a law is [V] log-probs (or two bounds)")
    require(bool(np.all(low <= high + 1e-12)), "a law's lower bound exceeds its upper bound")
    return low, high


def _divergence_low(log_a_low, log_b_high, epsilon: float) -> float:
    """A lower bound on H_eps(A || B) = sum_r (A_r - e^eps B_r)_+."""
    return float(np.sum(np.clip(np.exp(log_a_low) - np.exp(epsilon + log_b_high), 0, None)))


def token_epsilon(inside, outside, delta: float) -> float:
    """A lower bound on the smallest epsilon >= 0 with H_eps <= delta both ways round between two
    token laws (each [V] log-probs, or (lower, upper) bounds); with delta 0 the largest
    |log-ratio|."""
    (in_low, in_high), (out_low, out_high) = _bounds(inside), _bounds(outside)
    with np.errstate(invalid="ignore"):
        if delta == 0:
            ratios = np.concatenate([in_low - out_high, out_low - in_high])
            ratios = ratios[~np.isnan(ratios)]
            return max(float(ratios.max()), 0.0) if ratios.size else 0.0
    best = 0.0
    for a, b in ((in_low, out_high), (out_low, in_high)):
        if _divergence_low(a, b, 0.0) <= delta:
            continue
        low, high = 0.0, 1.0
        while _divergence_low(a, b, high) > delta:
            low, high = high, 2 * high
            if high > 1e4:
                return math.inf
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if _divergence_low(a, b, mid) > delta else (low, mid)
        best = max(best, low)
    return best


def _loss_atoms(log_a_low, log_b_high) -> tuple[np.ndarray, np.ndarray]:
    """(grid indices, masses) of the finite loss ln A/B under A, losses rounded down to LOSS_GRID,
    masses A's lower bounds; atoms below LOSS_FLOOR or with no mass dropped (an infinite loss
    is `response_epsilon`'s escape mass)."""
    with np.errstate(invalid="ignore"):
        loss = log_a_low - log_b_high
    keep = np.isfinite(log_a_low) & np.isfinite(loss) & (np.nan_to_num(loss) >= LOSS_FLOOR)
    return np.floor(loss[keep] / LOSS_GRID).astype(int), np.exp(log_a_low[keep])


def response_epsilon(inside, outside, delta: float, steps: int) -> float:
    """A lower bound on the epsilon at delta of `steps` independent tokens drawn from the same
    pair of token laws: the privacy-loss distribution composed `steps` times on a grid (both ways
    round), then the smallest epsilon whose divergence is <= delta. An infinite loss (a token one
    side cannot emit) gives inf when its mass exceeds delta."""
    (in_low, in_high), (out_low, out_high) = _bounds(inside), _bounds(outside)
    best = 0.0
    for a_low, b_high in ((in_low, out_high), (out_low, in_high)):
        infinite = np.isfinite(a_low) & np.isneginf(b_high)
        escape = float(np.exp(a_low[infinite]).sum())  # mass one side alone can emit
        escaped = -math.expm1(steps * math.log1p(-escape))  # responses with an infinite loss
        if escaped > delta:
            return math.inf
        index, mass = _loss_atoms(a_low, b_high)
        if mass.size == 0:
            continue
        offset, span = int(index.min()), int(index.max() - index.min())
        composed = np.array([1.0])
        for _ in range(steps):  # one shifted copy per atom: V atoms, not a dense convolution
            grown = np.zeros(composed.size + span)
            for shift, weight in zip(index - offset, mass, strict=True):
                grown[shift : shift + composed.size] += weight * composed
            composed = grown
        losses = (np.arange(composed.size) + steps * offset) * LOSS_GRID

        def divergence(epsilon: float, losses=losses, composed=composed, escaped=escaped):
            return escaped + float(np.sum(composed * np.clip(-np.expm1(epsilon - losses), 0, None)))

        if divergence(0.0) <= delta:
            continue
        low, high = 0.0, max(float(losses.max()), 1e-9)
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if divergence(mid) > delta else (low, mid)
        best = max(best, low)
    return best


def audit(law: Law, claim: Claim, pairs: Sequence[Pair]) -> Report:
    """The check (module docstring): each pair's exact epsilon, the largest against the claim."""
    require(len(pairs) >= 1, "the check needs at least one neighbouring pair")
    values = []
    for pair in pairs:
        inside, outside = law(pair.inside, pair.public), law(pair.outside, pair.public)
        if claim.steps == 1:
            values.append(token_epsilon(inside, outside, claim.delta))
        else:
            values.append(response_epsilon(inside, outside, claim.delta, claim.steps))
    worst = int(np.argmax(values))
    return Report(claim.epsilon, float(values[worst]), claim.delta, claim.steps,
                  pairs[worst].label, len(pairs), [float(v) for v in values])  # fmt: skip


def check(law: Law, claim: Claim, *, vocab: int = 8, seed: int = 0, bases: int = 4) -> Report:
    """Audit `law` against `claim` on the seeded canary neighbours (`canary_pairs`)."""
    return audit(law, claim, canary_pairs(claim, vocab=vocab, seed=seed, bases=bases))


# ---- the command ------------------------------------------------------------------------------


def load_law(spec: str) -> Law:
    """The law named "module:attribute" (a callable law(context, public))."""
    module, _, name = spec.partition(":")
    require(bool(module) and bool(name), f"--law must be module:attribute, got {spec!r}")
    try:
        law = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise PrivleakError(f"--law {spec!r} cannot be loaded: {error}") from None
    require(callable(law), f"--law {spec!r} is not callable")
    return law


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m privleak.audit.check",
        description="Audit a decoding-time DP mechanism's claimed epsilon on canary neighbours.",
    )
    parser.add_argument("--law", help="module:attribute of law(context [k, V], public [V])")
    parser.add_argument("--epsilon", type=float, help="the claimed epsilon")
    parser.add_argument("--delta", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=1, help="tokens per response (1: per token)")
    parser.add_argument("--relation", default="add", choices=RELATIONS)
    parser.add_argument("--sensitivity", type=float, help="l2 bound of the shift (relation shift)")
    parser.add_argument("--vocab", type=int, default=8)
    parser.add_argument("--bases", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--suite", action="store_true", help="run the seeded-bug suite instead")
    args = parser.parse_args(argv)
    try:
        if args.suite:
            from privleak.audit.mutants import run_suite

            print(run_suite(vocab=args.vocab, bases=args.bases, seed=args.seed).to_string())
            return 0
        require(args.law is not None and args.epsilon is not None,
                "give --law and --epsilon (or --suite)")  # fmt: skip
        claim = Claim(args.epsilon, args.delta, args.steps, args.relation, args.sensitivity)
        report = check(load_law(args.law), claim, vocab=args.vocab, seed=args.seed,
                       bases=args.bases)  # fmt: skip
        print(report.line())
        return 1 if report.violated else 0
    except PrivleakError as error:
        print(f"privleak: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
