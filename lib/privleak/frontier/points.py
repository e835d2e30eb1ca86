"""The frontier's defenses as sweep points (docs/design.md §12).

Each defense is swept over its knob; its curve runs from its most private setting to its
weakest and ends at the undefended system (`none`), which every defense becomes at its weakest:

| defense | knob | most private first | source |
|---|---|---|---|
| static | noise std σ | descending | S2's Static baseline (noise on every logit) |
| pad | ε_base | ascending | S2's PAD (`frontier.pad` settings, S2's defaults) |
| cid | λ | ascending | S0's CID, the RAG prompt mixed with the public prompt |
| bounded_cid | ε per token | ascending | S0's bounded CID (λ ≤ 1 bounded at each step) |
| dp_icl | ε per response | ascending | S4's DP-ICL over the same contexts (no DP threshold) |
| dist | L2 threshold | ascending | S2's Dist. (Zeng et al.): contexts beyond it dropped |
| summ | (one point) | | S2's Summ. (extractive condensation, Zeng et al.'s prompt) |
| redact_keyword | (one point) | | S3's keyword policy on the store |
| redact_classifier | threshold | ascending | S3's embedding-logistic classifier policy |
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from privleak.errors import require

NONE = "none"

KNOBS = {
    "static": ("σ", True),
    "pad": ("ε_base", False),
    "cid": ("λ", False),
    "bounded_cid": ("ε/token", False),
    "dp_icl": ("ε", False),
    "dist": ("L2 threshold", False),
    "summ": ("", False),
    "redact_keyword": ("", False),
    "redact_classifier": ("threshold", False),
}
"""{defense: (knob name, whether a larger knob value is more private)}, in the report's order."""

SINGLE = ("summ", "redact_keyword")
"""Defenses with one point (no knob)."""


@dataclass(frozen=True)
class Point:
    """One setting of one defense; value is NaN for a defense without a knob."""

    defense: str
    value: float = math.nan

    @property
    def name(self) -> str:
        return self.defense if math.isnan(self.value) else f"{self.defense}={self.value:g}"

    @property
    def knob(self) -> str:
        return KNOBS.get(self.defense, ("", False))[0]


def sweep(defenses: Mapping[str, list]) -> list[Point]:
    """Every point: `none`, then each defense's values in its curve order (most private
    first). defenses: {defense: [knob values]} ([] for a one-point defense)."""
    points = [Point(NONE)]
    for defense, values in defenses.items():
        require(defense in KNOBS, f"frontier defense '{defense}' is unknown; allowed: "
                f"{', '.join(KNOBS)}")  # fmt: skip
        if defense in SINGLE:
            require(not values, f"frontier defense '{defense}' has no knob; give []")
            points.append(Point(defense))
            continue
        require(bool(values), f"frontier defense '{defense}' needs at least one knob value")
        require(len(set(values)) == len(values), f"frontier defense '{defense}' repeats a value")
        descending = KNOBS[defense][1]
        points += [Point(defense, float(v)) for v in sorted(values, reverse=descending)]
    return points


def curves(points: list[Point]) -> dict[str, list[int]]:
    """{defense: point indices from its most private setting to `none`}."""
    reference = [p.defense for p in points].index(NONE)
    out: dict[str, list[int]] = {}
    for i, point in enumerate(points):
        if point.defense != NONE:
            out.setdefault(point.defense, []).append(i)
    return {defense: indices + [reference] for defense, indices in out.items()}
