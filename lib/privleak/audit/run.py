"""One mechanism's audit over its canaries: the candidate outputs of every canary (the secret, the
undefended response, each variant's samples under D' and under D), scored under every variant,
as tidy rows.

A `Mechanism` bundles three callables bound to a model and its settings:
- sample(canary) -> {variant: (responses under D', responses under D)}, every variant from one
  call (they share the prompts' prefill);
- score(canary, candidates, subsets) -> {variant: `pairs.Scores`} of each variant's candidates
  (subsets[variant]: their sorted indices, or None for all), every candidate forwarded once;
- undefended(canary) -> the plain LM's greedy response with D'.
With `cross_score`, every candidate is scored under every variant (DP-ICL's token law costs
little beyond the shared forward, and more candidates sharpen the white-box maximum); without it
(CID, whose lambda search costs a bisection per position, and PAD, whose noise integral costs a
softmax per draw), a variant scores the secret, the undefended response and its own samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from privleak.audit.canaries import Canary
from privleak.audit.pairs import Scores
from privleak.errors import require

KINDS = ("secret", "undefended", "in", "out")
"""A candidate's origin: the canary's secret, the undefended greedy response, or a sample drawn
with the canary in (D') or out (D)."""


@dataclass(frozen=True)
class Mechanism:
    name: str
    relation: str
    variants: Sequence[str]
    sample: Callable[[Canary], dict[str, tuple[list[list[int]], list[list[int]]]]]
    score: Callable[
        [Canary, Sequence[Sequence[int]], dict[str, list[int]] | None], dict[str, Scores]
    ]
    undefended: Callable[[Canary], list[int]]
    cross_score: bool = True


@dataclass(frozen=True)
class Candidate:
    kind: str
    origin: str  # the variant that drew it ("" for the secret and the undefended response)
    index: int
    tokens: list[int]


def secret_tokens(tokenizer, canary: Canary) -> list[int]:
    """The secret as it follows the answer prefix: one leading space, no special tokens."""
    return list(tokenizer(" " + canary.secret, add_special_tokens=False)["input_ids"])


def candidates_of(mechanism: Mechanism, tokenizer, canary: Canary) -> list[Candidate]:
    """The secret, the undefended response and every variant's non-empty samples."""
    out = [Candidate("secret", "", 0, secret_tokens(tokenizer, canary))]
    undefended = mechanism.undefended(canary)
    if undefended:
        out.append(Candidate("undefended", "", 0, undefended))
    samples = mechanism.sample(canary)
    for variant in mechanism.variants:
        inside, outside = samples[variant]
        for kind, responses in (("in", inside), ("out", outside)):
            out += [Candidate(kind, variant, j, list(r)) for j, r in enumerate(responses) if r]
    return out


def _row(mechanism, variant, canary, candidate, scores: Scores, j: int, tokenizer) -> dict:
    row = {
        "mechanism": mechanism.name,
        "variant": variant,
        "relation": mechanism.relation,
        "canary": canary.id,
        "secret": canary.secret,
        "kind": candidate.kind,
        "origin": candidate.origin,
        "index": candidate.index,
        "tokens": candidate.tokens,
        "text": tokenizer.decode(candidate.tokens, skip_special_tokens=True),
        "logp_in": scores.logp_in[j],
        "logp_out": scores.logp_out[j],
        "worst": scores.worst[j],
    }
    return row | {record: values[j] for record, values in scores.steps.items()}


def audit_rows(mechanism: Mechanism, tokenizer, canaries: Sequence[Canary]) -> list[dict]:
    """Every (variant, canary, candidate) row: its tokens and text, logp_in, logp_out and worst
    per position (`pairs`), and PAD's claimed sigma, sensitivity and protected."""
    require(len(canaries) >= 1, "the audit needs at least one canary")
    rows = []
    for canary in canaries:
        candidates = candidates_of(mechanism, tokenizer, canary)
        subsets = None
        if not mechanism.cross_score:
            subsets = {v: [i for i, c in enumerate(candidates) if c.origin in ("", v)]
                       for v in mechanism.variants}  # fmt: skip
        scored = mechanism.score(canary, [c.tokens for c in candidates], subsets)
        plan = {
            v: ([candidates[i] for i in subsets[v]] if subsets else candidates, scored[v])
            for v in mechanism.variants
        }
        for variant, (chosen, scores) in plan.items():
            rows += [_row(mechanism, variant, canary, c, scores, j, tokenizer)
                     for j, c in enumerate(chosen)]  # fmt: skip
    return rows
