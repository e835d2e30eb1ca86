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
# A claim's role: one of its paper's primary claims (its abstract's or conclusion's statements),
# a secondary claim (a body sentence, the MIA literature's, the frontier's), or a check of
# privleak's own mechanism (a guarantee, a conformance audit, arithmetic or construction): a check
# passes or fails and is never counted among the papers' reproduced or contradicted claims.
PRIMARY, SECONDARY, CHECK = "primary", "secondary", "check"
ROLES = (PRIMARY, SECONDARY, CHECK)
PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"
CHECK_OUTCOMES = {REPRODUCED: PASS, CONTRADICTED: FAIL, INCONCLUSIVE: UNDECIDED}


@dataclass(frozen=True)
class Primary:
    """The statement of a paper's abstract or conclusion that a Spec tests, chosen from the paper
    text alone (not from any result): its quote, where the paper says it, and (when only some
    instances of the Spec test it) the allowed values of its template fields."""

    quote: str
    where: str
    only: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def covers(self, fields) -> bool:
        """Whether the instance with these template fields tests the statement."""
        return _covers(self.only, fields)


@dataclass(frozen=True)
class Check:
    """Why a Spec (or the instances whose template fields take the `only` values) checks
    privleak's own mechanism rather than testing a paper's empirical claim."""

    reason: str
    only: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def covers(self, fields) -> bool:
        """Whether the instance with these template fields is a check."""
        return _covers(self.only, fields)


def _covers(only: tuple[tuple[str, tuple[str, ...]], ...], fields) -> bool:
    return all(str(fields.get(name)) in allowed for name, allowed in only)


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
    primary: Primary | None = None  # the abstract's or conclusion's statement it tests
    check: Check | None = None  # why it checks privleak's own mechanism, not a paper's claim
