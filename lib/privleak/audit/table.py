"""The audit table: per (mechanism, variant), what the variant claims against what the audit
measured, and whether any audited bound lies above the claim.

A `Claim` states the guarantee a variant asserts (a broken control asserts its correct twin's):
- token_epsilon: every released token is token_epsilon-DP (pure), so the worst-case loss over the
  vocabulary at any prefix is at most it (DP-ICL, bounded CID);
- response_epsilon: a response is response_epsilon-DP (pure; T tokens composed by addition);
- epsilon, delta: a response is (epsilon, delta)-DP. For PAD epsilon is None: each response's
  accountant gives its own, and the claim is the largest over the audited outputs under the
  tightest accountant (the privacy-loss distribution of the composed Gaussian), twice: over
  every step (nominal_epsilon, privleak's all-steps epsilon) and over the protected steps only
  (nominal_relaxed, the paper's gamma-relaxed guarantee, audited on the losses of those steps),
  each on the accounts PAD gives when it runs on D' and on D (`pad_claim`).

Audited (each a lower bound on the true quantity over the audited pairs):
- audited_token: the largest exact worst-case token loss (`pairs` worst) over every prefix the
  candidates visit; audited_response: the largest |L(y)| over candidates;
- wb_epsilon_low: `bounds.loss_epsilon_bound` on the sampled outputs' losses (both directions);
  hs_*: the hockey-stick divergence at the claimed epsilon with its interval;
- event_epsilon_low: the largest ln((P_D'(S) - delta) / P_D(S)) (and the same from D to D') over
  the events "the response begins with a candidate" (`event_epsilon`);
- bb_*: the black-box test (the secret's ROUGE-L recall in the response) and its epsilon bound,
  pooled over canaries (a bound valid for each pair holds for their average).
PAD's token law is integrated for the paper's untruncated Gaussian (certified bounds, `BOUNDS`),
while its samples come from the implementation's hashed noise, truncated at |z| < 5.3: the two
laws differ, so the bounds that need samples of the audited law (wb_*, hs_*) are not run for
PAD. Its event bounds need none, and its black-box test audits the implementation itself.
A variant is flagged when an audited bound exceeds its claim beyond float tolerance
(`TOLERANCE`, relative), or the hockey-stick interval lies above delta. The flag is one test made
of several: each statistical test a variant runs (each direction of the sampled-loss bound and of
the hockey-stick interval, the γ-relaxed sampled-loss bound's directions, the black-box test)
runs at alpha / k, k the number of them (Bonferroni; `tests`, `alpha_per_test`), so a correct
variant is flagged by any of them with probability at most alpha. The exact bounds (token,
response, event) need no share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privleak.accounting import composed_epsilon
from privleak.audit.accountants import (
    gaussian_pld_epsilon,
    gaussian_prv_epsilon,
    gaussian_rdp_epsilon,
)
from privleak.audit.bounds import HockeyStick, blackbox_audit, hockey_stick, loss_epsilon_bound
from privleak.errors import require
from privleak.metrics.text import rouge_l
from privleak.pad import response_budget

TOLERANCE = 1e-4
"""Relative slack of a flag: float32 token laws reproduce a bound that is met with equality to
about 1e-6 of it."""
MECHANISMS = ("dp_rag", "cid", "pad")
PAPER_ALPHA = 10.0
"""The Rényi order PAD's paper and official code report epsilon at (App. E)."""


@dataclass(frozen=True)
class Claim:
    setting: float
    broken: bool = False
    token_epsilon: float | None = None
    response_epsilon: float | None = None
    epsilon: float | None = None
    delta: float = 0.0


BOUNDS = ("logp_in_low", "logp_in_high", "logp_out_low", "logp_out_high")
"""Per-position bounds on logp_in and logp_out, where a token law is integrated rather than
closed-form (PAD, `pad_law`); without them logp_in and logp_out are exact."""


def losses(frame: pd.DataFrame) -> np.ndarray:
    """[rows] L(y) = sum_t logp_in - sum_t logp_out (PAD: from the bounds' midpoints)."""
    return np.array(
        [np.sum(a) - np.sum(b) for a, b in zip(frame["logp_in"], frame["logp_out"], strict=True)]
    )


def log_probabilities(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """{in_low, in_high, out_low, out_high}: [rows] bounds on ln P_D'(y) and ln P_D(y), the sums
    of the per-position bounds (`BOUNDS`), or the exact sums twice."""
    sums = {c: np.array([np.sum(v) for v in frame[c]]) for c in ("logp_in", "logp_out")}
    if BOUNDS[0] not in frame:
        return {f"{side}_{end}": sums[f"logp_{side}"] for side in ("in", "out")
                for end in ("low", "high")}  # fmt: skip
    return {c[5:]: np.array([np.sum(v) for v in frame[c]]) for c in BOUNDS}


def loss_bounds(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """([rows] lower, [rows] upper) bounds on L(y); both equal `losses` for an exact law."""
    logs = log_probabilities(frame)
    return logs["in_low"] - logs["out_high"], logs["in_high"] - logs["out_low"]


def event_epsilon(frame: pd.DataFrame, delta: float) -> float:
    """The largest ln((P_A(S) - delta) / P_B(S)) over the events S = "the response begins with
    y" of the candidates y, both ways round ((A, B) = (D', D), (D, D')): a lower bound on the
    epsilon of any (epsilon, delta) claim (-inf when no event has P_A(S) > delta). Exact for
    DP-ICL and CID; for PAD from the lower bound on P_A(S) and the upper bound on P_B(S)."""
    logs = log_probabilities(frame)
    best = -math.inf
    for a, b in (("in", "out"), ("out", "in")):
        log_a, log_b = logs[f"{a}_low"], logs[f"{b}_high"]
        above = np.exp(log_a) > delta
        if above.any():
            best = max(best, float(np.max(np.log(np.exp(log_a[above]) - delta) - log_b[above])))
    return best


def premise(frame: pd.DataFrame) -> dict[str, float]:
    """PAD's premise that Delta_t bounds the logit shift between D and D' (`pairs.logit_shift`),
    over the protected steps of every candidate (the claimed mechanism's, under D'): their
    count, the share where the shift exceeds Delta_t (the larger of its values under D and D',
    `premise_sensitivity`), and the largest and median shift / Delta_t.
    A violated premise voids the stated guarantee at that step; it proves no loss by itself."""
    parts = []
    for shift, sensitivity, protected in zip(
        frame["shift"], frame["premise_sensitivity"], frame["protected"], strict=True
    ):
        kept = np.asarray(protected) > 0.5
        parts.append(np.asarray(shift, dtype=float)[kept] / np.asarray(sensitivity)[kept])
    ratios = np.concatenate(parts)
    if ratios.size == 0:
        return {"premise_steps": 0, "premise_violated": math.nan, "shift_ratio_max": math.nan,
                "shift_ratio_median": math.nan}  # fmt: skip
    return {"premise_steps": int(ratios.size),
            "premise_violated": float(np.mean(ratios > 1 + TOLERANCE)),
            "shift_ratio_max": float(ratios.max()),
            "shift_ratio_median": float(np.median(ratios))}  # fmt: skip


def _exceeds(audited: float, claimed: float | None) -> bool:
    return claimed is not None and math.isfinite(audited) and audited > claimed * (1 + TOLERANCE)


def _steps_mu(frame: pd.DataFrame, protected_only: bool) -> float:
    """The largest mu = sqrt(sum_t (Delta_t / sigma_t)^2) over rows, over every step or over the
    protected ones (0 when none is)."""
    mus = []
    for d, s, p in zip(frame["sensitivity"], frame["sigma"], frame["protected"], strict=True):
        ratio = np.asarray(d, dtype=float) / np.asarray(s, dtype=float)
        keep = np.asarray(p) > 0.5 if protected_only else np.ones(ratio.size, dtype=bool)
        mus.append(float(np.sqrt(np.sum(ratio[keep] ** 2))))
    return max(mus)


SIDES = {"D'": ("sigma", "sensitivity", "protected"),
         "D": ("sigma_d", "sensitivity_d", "protected_d")}  # fmt: skip
"""PAD's account of each audited output when it runs on D' (canary in) and on D: the step
columns of `pairs.pad_scores`."""


def _on_side(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    """The frame with sigma, sensitivity and protected read from `side`'s columns."""
    sigma, sensitivity, protected = SIDES[side]
    return frame.assign(sigma=frame[sigma], sensitivity=frame[sensitivity],
                        protected=frame[protected])  # fmt: skip


def _largest(values) -> float:
    """max of the values, NaN when any is NaN (an accountant that could not represent a side)."""
    values = list(values)
    return math.nan if any(math.isnan(v) for v in values) else max(values)


def pad_claim(frame: pd.DataFrame, delta: float) -> tuple[dict[str, float], pd.DataFrame]:
    """(PAD's claims and the γ-relaxed event bound, the rows kept at the protected steps of the
    side reported) on each neighbour's own account: PAD run on D' reports the columns sigma,
    sensitivity and protected, run on D the columns sigma_d, sensitivity_d and protected_d
    (when present). A loss is a violation only beyond both accounts:
    - all steps (nominal_rdp, nominal_pld): the same whole-response loss is audited against
      both, so the claim is the larger account (NaN when either side's is);
    - γ-relaxed (the paper's guarantee): each side's claim against the event bound on its own
      protected steps; the side with the larger slack nominal_relaxed - event_relaxed_low is
      reported (relaxed_side, its nominal_relaxed, nominal_relaxed_rdp, nominal_relaxed_prv,
      nominal_paper and event_relaxed_low), so a negative slack holds under both."""
    sides = [side for side, columns in SIDES.items() if columns[0] in frame]
    accounts, kept, events = {}, {}, {}
    for side in sides:
        own = _on_side(frame, side)
        accounts[side] = pad_nominal(own, delta)
        kept[side] = protected_steps(own)
        events[side] = event_epsilon(kept[side], delta)
    best = max(sides, key=lambda side: accounts[side]["nominal_relaxed"] - events[side])
    out = {key: _largest(accounts[side][key] for side in sides)
           for key in ("nominal_rdp", "nominal_pld")}  # fmt: skip
    relaxed = ("nominal_relaxed", "nominal_relaxed_rdp", "nominal_relaxed_prv", "nominal_paper")
    out |= {key: accounts[best][key] for key in relaxed}
    return out | {"relaxed_side": best, "event_relaxed_low": events[best]}, kept[best]


def pad_nominal(frame: pd.DataFrame, delta: float) -> dict[str, float]:
    """What PAD claims for its audited outputs (rows with the claimed sigma, sensitivity and
    protected per step, one neighbour's account: `pad_claim`), each the largest over rows
    (`gaussian_mu` composes a response's steps):
    - the gamma-relaxed epsilon (protected steps only, the paper's guarantee) under the
      privacy-loss distribution (nominal_relaxed), RDP with alpha optimised and PRV beside it,
      and the paper's own report, RDP at alpha 10 (nominal_paper);
    - the all-steps epsilon (the screened steps charged too) under the privacy-loss distribution
      (nominal_pld) and RDP (nominal_rdp); PRV cannot represent a screened step's
      sigma_min = 0.01 composed with the rest, so it is not run there."""
    mu, relaxed = _steps_mu(frame, False), _steps_mu(frame, True)
    paper = max(
        response_budget(s, d, np.asarray(p) > 0.5, PAPER_ALPHA, delta).epsilon_relaxed
        for s, d, p in zip(frame["sigma"], frame["sensitivity"], frame["protected"], strict=True)
    )
    out = {"nominal_rdp": gaussian_rdp_epsilon(mu, delta),
           "nominal_pld": gaussian_pld_epsilon(mu, delta),
           "nominal_relaxed": 0.0, "nominal_relaxed_rdp": 0.0, "nominal_relaxed_prv": 0.0,
           "nominal_paper": paper}  # fmt: skip
    if relaxed > 0:  # some output has protected steps
        out |= {"nominal_relaxed": gaussian_pld_epsilon(relaxed, delta),
                "nominal_relaxed_rdp": gaussian_rdp_epsilon(relaxed, delta),
                "nominal_relaxed_prv": gaussian_prv_epsilon(relaxed, delta)}  # fmt: skip
    return out


def protected_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with logp_in and logp_out (and their bounds) kept at the protected steps only
    (the gamma-relaxed claim's steps, as the frame's `protected` column marks them)."""

    def keep(values, flags):
        return [v for v, f in zip(values, flags, strict=True) if f > 0.5]

    columns = ["logp_in", "logp_out", *(c for c in BOUNDS if c in frame)]
    return frame.assign(**{
        c: [keep(v, f) for v, f in zip(frame[c], frame["protected"], strict=True)] for c in columns
    })  # fmt: skip


def _sampled_bounds(
    frame, inside, outside, epsilon, delta, alpha
) -> tuple[float, HockeyStick | None]:
    """(white-box lower bound from the sampled outputs' losses, the hockey-stick divergence at
    epsilon): samples drawn with the canary in measure L, those drawn without it -L; where the
    losses are bounded, the lower bound on each feeds the white-box bound (the k-th largest lower
    bound is at most the k-th largest loss)."""
    low, high = loss_bounds(frame)
    parts = [(lo, hi) for lo, hi in ((low[inside.to_numpy()], high[inside.to_numpy()]),
                                     (-high[outside.to_numpy()], -low[outside.to_numpy()]))
             if lo.size]  # fmt: skip
    if not parts:
        return math.nan, None
    bounds = [loss_epsilon_bound(lo, delta, alpha) for lo, _ in parts]
    best = max((b for b in bounds if not math.isnan(b)), default=math.nan)
    hockeys = [hockey_stick(lo, epsilon, alpha, upper=hi) for lo, hi in parts]
    return best, max(hockeys, key=lambda h: h.estimate)


def statistical_tests(inside: int, outside: int, sampled: bool, relaxed: bool) -> int:
    """How many statistical tests can flag a variant with `inside` and `outside` own samples:
    per sampled direction (a side with a sample) the loss bound and the hockey-stick interval
    when an (epsilon, delta) claim is audited (`sampled`), and the γ-relaxed loss bound
    (`relaxed`, PAD); and the black-box test when each side has >= 2 samples."""
    directions = int(inside > 0) + int(outside > 0)
    return directions * (2 * sampled + relaxed) + int(inside >= 2 and outside >= 2)


def _group(frame: pd.DataFrame, claim: Claim, alpha: float) -> dict:
    low, high = loss_bounds(frame)
    own = frame["origin"] == frame["variant"]
    inside, outside = own & (frame["kind"] == "in"), own & (frame["kind"] == "out")
    worst = [max(w) for w in frame["worst"] if len(w)]
    row = {
        "setting": claim.setting,
        "broken": claim.broken,
        "canaries": frame["canary"].nunique(),
        "samples": int(inside.sum() + outside.sum()),
        "nominal_token": claim.token_epsilon,
        "nominal_response": claim.response_epsilon,
        "delta": claim.delta,
        "audited_token": max(worst) if worst else math.nan,
        "audited_response": float(max(np.max(low), np.max(-high))),
    }
    epsilon = claim.epsilon
    if claim.epsilon is None and claim.delta > 0:  # PAD: each output's accountant
        claimed, relaxed = pad_claim(frame, claim.delta)
        row |= claimed | premise(frame)
        epsilon = row["nominal_pld"]
    row["nominal_epsilon"] = epsilon
    # PAD's law is integrated for the paper's Gaussian; its samples come from the implementation's
    # hashed noise (truncated at |z| < 5.3), so no bound that needs samples of the audited law
    bounded = BOUNDS[0] in frame
    sampled = epsilon is not None and not bounded
    row["tests"] = statistical_tests(
        int(inside.sum()), int(outside.sum()), sampled, "nominal_relaxed" in row and not bounded
    )
    row["alpha_per_test"] = alpha = alpha / max(row["tests"], 1)
    flags = []
    if _exceeds(row["audited_token"], claim.token_epsilon):
        flags.append("token")
    if _exceeds(row["audited_response"], claim.response_epsilon):
        flags.append("response")
    if epsilon is not None:
        row["event_epsilon_low"] = event_epsilon(frame, claim.delta)
        if _exceeds(row["event_epsilon_low"], epsilon):
            flags.append("event")
    if sampled:
        low, hockey = _sampled_bounds(frame, inside, outside, epsilon, claim.delta, alpha)
        row["wb_epsilon_low"] = low
        if _exceeds(low, epsilon):
            flags.append("white-box samples")
        if hockey is not None:
            row |= {"hs_estimate": hockey.estimate, "hs_low": hockey.low, "hs_high": hockey.high}
            if hockey.low > claim.delta:
                flags.append("hockey-stick")
    if "nominal_relaxed" in row:  # PAD's own claim: the protected steps only (`pad_claim`)
        if _exceeds(row["event_relaxed_low"], row["nominal_relaxed"]):
            flags.append("event (γ-relaxed)")
        if not bounded:
            row["wb_relaxed_low"] = _sampled_bounds(
                relaxed, inside, outside, row["nominal_relaxed"], claim.delta, alpha
            )[0]
            if _exceeds(row["wb_relaxed_low"], row["nominal_relaxed"]):
                flags.append("white-box samples (γ-relaxed)")
    claimed = epsilon if epsilon is not None else claim.response_epsilon
    if inside.sum() >= 2 and outside.sum() >= 2:
        scores = np.array(
            [rouge_l(t, s)[1] for t, s in zip(frame["text"], frame["secret"], strict=True)]
        )
        test = blackbox_audit(
            scores[inside.to_numpy()], scores[outside.to_numpy()], claim.delta, alpha
        )
        row |= {"bb_threshold": test.threshold, "bb_test": test.combination,
                "bb_tpr": test.tpr, "bb_fpr": test.fpr,
                "bb_epsilon_low": test.epsilon_low}  # fmt: skip
        if _exceeds(test.epsilon_low, claimed):
            flags.append("black-box")
    return row | {"flagged": bool(flags), "flagged_by": ", ".join(flags)}


def summarise(
    rows: pd.DataFrame, claims: Mapping[tuple[str, str], Claim], alpha: float = 0.05
) -> pd.DataFrame:
    """One row per (mechanism, variant) of the audit rows (`run.audit_rows`), judged against
    claims[(mechanism, variant)] (module docstring)."""
    require(len(rows) >= 1, "no audit rows to summarise")
    out = []
    for (mechanism, variant), frame in rows.groupby(["mechanism", "variant"], sort=False):
        require((mechanism, variant) in claims, f"no claim for audit variant {mechanism}/{variant}")
        names = {"mechanism": mechanism, "variant": variant, "relation": frame["relation"].iloc[0]}
        out.append(names | _group(frame, claims[(mechanism, variant)], alpha))
    return pd.DataFrame(out)


def claims_of(mechanism: str, claimed: pd.DataFrame) -> dict[tuple[str, str], Claim]:
    """What each variant of a mechanism claims, from its audit stage's claimed table (variant,
    setting, broken, token_epsilon, steps, delta):
    - dp_rag: token_epsilon per token; steps tokens compose to steps * token_epsilon (pure) and
      to dp_accounting's epsilon at delta (the token share of the response budget);
    - cid: token_epsilon per token; steps * token_epsilon per response (pure);
    - pad: (epsilon, delta) per response, epsilon from each output's accountant (`pad_nominal`)."""
    require(mechanism in MECHANISMS, f"audit mechanism {mechanism!r} is unknown; allowed: "
            + ", ".join(MECHANISMS))  # fmt: skip
    out = {}
    for row in claimed.to_dict("records"):
        base = {"setting": float(row["setting"]), "broken": bool(row["broken"])}
        if mechanism == "pad":
            claim = Claim(**base, delta=float(row["delta"]))
        else:
            token, steps = float(row["token_epsilon"]), int(row["steps"])
            composed = None
            if mechanism == "dp_rag":
                composed = composed_epsilon([(token, steps)], float(row["delta"]))
            claim = Claim(**base, token_epsilon=token, response_epsilon=steps * token,
                          epsilon=composed, delta=float(row["delta"]))  # fmt: skip
        out[(mechanism, row["variant"])] = claim
    return out
