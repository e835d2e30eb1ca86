"""A claim spec (one kind of claim of the catalogue), the papers' labels, the verdicts and their
stability marks."""

from __future__ import annotations

from dataclasses import dataclass

S0 = "S0 (Flemings et al.)"
S1 = "S1 (Tiwari & Suh)"
S2 = "S2 (Wang et al.)"
S3 = "S3 (Safe generation in multi-domain dialogs)"
S4 = "S4 (Grislain)"
MIA = "MIA (standard findings)"
FRONTIER = "Frontier (across defenses)"

REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE)
DECIDED = (REPRODUCED, CONTRADICTED)
# A decided verdict rerun on another machine's floats (privleak.claims.stability): it held, it
# moved, or no rerun of this verdict is on record; an inconclusive one is not decided.
STABLE, FRAGILE, UNMEASURED, NOT_DECIDED = "stable", "fragile", "unmeasured", "not decided"
DECIDED_MARKS = (STABLE, FRAGILE, UNMEASURED)


@dataclass(frozen=True)
class Spec:
    """One kind of claim. null None: the estimator gives the null (it depends on the data)."""

    id: str
    paper: str
    quote: str
    where: str
    effect: str
    direction: str
    unit: str
    null: float | None = 0.0
    note: str = ""
