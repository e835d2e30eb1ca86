"""Claims of the decoding-time DP audit (docs/design.md §10): the guarantees S0 (bounded CID),
S2 (PAD) and S4 (DP-RAG's token law) state, judged on the audit's neighbouring pairs.

- A per-token pure epsilon (bounded CID, DP-ICL) is a guarantee checked on every canary: the
  exact worst-case token loss over the whole vocabulary at every prefix the canary's candidates
  visit must stay within epsilon (`stats.worst_case`; one violation contradicts it). Within it on
  every audited pair is all an audit can show: the verdict speaks for these pairs.
- PAD's per-response (epsilon, delta), gamma-relaxed as the paper states it (the protected steps
  only): the audited lower bound on those steps (the event bound, `audit.table`, built on the
  integrated bounds of the token law, `audit.pad_law`) against the nominal epsilon of the
  tightest accountant. A lower bound can
  contradict a guarantee, never confirm it, so the interval is (-inf, slack]: contradicted or
  inconclusive. The note adds PAD's premise check (`audit.table.premise`), reported beside the
  verdict, not as its basis.
Broken controls are not claims of any paper: they are in the audit table only.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.audit.table import MECHANISMS, TOLERANCE, claims_of, summarise
from privleak.claims.registry import Finding
from privleak.claims.stats import Estimate, worst_case

SPECS = {
    "dp_rag": "s4.audit.token_law.eps{epsilon:g}",
    "cid": "s0.audit.token_law.eps{epsilon:g}",
    "pad": "s2.audit.response.eps{epsilon:g}",
}


def load(interim: Path) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """{mechanism: (rows, claimed)} of the audit stages."""
    return {
        m: (
            pd.read_parquet(interim / "audit" / m / "rows.parquet"),
            pd.read_parquet(interim / "audit" / m / "claimed.parquet"),
        )  # fmt: skip
        for m in MECHANISMS
    }


def token_slack(rows: pd.DataFrame, epsilon: float) -> np.ndarray:
    """[canaries] epsilon (1 + TOLERANCE) minus the canary's largest worst-case token loss."""
    worst = rows.groupby("canary")["worst"].agg(lambda column: max(max(w) for w in column))
    return epsilon * (1 + TOLERANCE) - worst.to_numpy(dtype=float)


def response_slack(rows: pd.DataFrame, claimed: pd.DataFrame, alpha: float) -> Estimate:
    """PAD: its gamma-relaxed nominal epsilon (the paper's guarantee, under the tightest
    accountant) minus the audited lower bound on the protected steps, as (-inf, slack]."""
    row = summarise(rows, claims_of("pad", claimed), alpha).iloc[0]
    audited = float(row["event_relaxed_low"])  # the event bound (-inf when no event has mass)
    slack = float(row["nominal_relaxed"]) - audited
    accountants = {
        "privacy-loss distribution (the verdict's)": float(row["nominal_relaxed"]),
        "RDP at the optimised α": float(row["nominal_relaxed_rdp"]),
        "RDP at App. E's α = 10 (the paper's report)": float(row["nominal_paper"]),
    }
    exceeded = [name.split(" (")[0] for name, value in accountants.items() if audited > value]
    note = (
        "nominal γ-relaxed ε by accountant: "
        + "; ".join(f"{name} {value:.4g}" for name, value in accountants.items())
        + f" (all steps, privacy-loss distribution: {row['nominal_epsilon']:.4g}); each on "
        f"PAD's own account under D and under D', the γ-relaxed one reported under "
        f"{row['relaxed_side']} (its larger slack); audited lower bound {audited:.4g}, above "
        + (" and ".join(exceeded) if exceeded else "none of them")
        + f"; PAD's premise (the logit shift between D and D' <= Δ_t) fails at "
        f"{row['premise_violated']:.0%} of {row['premise_steps']:.0f} protected steps (median "
        f"shift / Δ_t {row['shift_ratio_median']:.3g}), which voids the stated guarantee there; "
        "the verdict rests on the event bound"
    )
    return Estimate(slack, -math.inf, slack, int(rows["canary"].nunique()), note, certified=True)


def findings(frames: dict[str, tuple[pd.DataFrame, pd.DataFrame]], alpha: float) -> list[Finding]:
    """One claim per correct variant of each audited mechanism."""
    found = []
    for mechanism, (rows, claimed) in frames.items():
        for setting in claimed[~claimed["broken"].astype(bool)].to_dict("records"):
            own = rows[rows["variant"] == setting["variant"]]
            fields = {"epsilon": float(setting["setting"])}
            if mechanism == "pad":
                one = claimed[claimed["variant"] == setting["variant"]]
                estimate = response_slack(own, one, alpha)
            else:
                slack = token_slack(own, float(setting["token_epsilon"]))
                estimate = worst_case(slack, "canaries")
                fields["token_epsilon"] = float(setting["token_epsilon"])
            found.append(Finding(SPECS[mechanism], estimate, fields))
    return found
