# %% [markdown]
# # The audit table: nominal epsilon beside the white-box and black-box audits
# For DP-RAG's token law (S4), bounded CID (S0) and PAD (S2), each on neighbouring inputs with a
# canary (audit_dp_rag, audit_cid, audit_pad): what each variant claims and what the audit
# measured (`privleak.audit.table`):
# - audited_token: the exact worst-case token loss over the whole vocabulary at every prefix the
#   candidates visit, against the per-token epsilon (DP-ICL, bounded CID);
# - audited_response: the largest |ln P_D'(y) / P_D(y)| over the candidates;
# - wb_epsilon_low: a lower bound on the response epsilon at the claimed delta from the
#   sampled outputs' losses; hs_*: the hockey-stick divergence at the claimed epsilon, with its
#   interval;
# - bb_*: the black-box test (the secret's ROUGE-L recall in a response, threshold chosen on
#   half the samples, evaluated on the other half) and its Clopper-Pearson epsilon lower bound,
#   pooled over canaries.
# A variant is flagged when an audited bound lies above its claim. Its `tests` statistical tests
# each run at `alpha_per_test` = alpha / tests (Bonferroni), so the flag as a whole holds at
# 1 - alpha (95 %); the exact bounds need no share. The broken controls must be flagged and the
# correct DP-RAG and bounded CID, whose token laws are exact, must not: `controls_ok` in
# metrics/audit.json says whether both hold. Every bound is over the audited pairs only: a
# mechanism that is not flagged has not been proven private.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
alpha = 0.05

# %%
import json
import math

import pandas as pd

from privleak.audit.figure import audit_figure, conformance_figure
from privleak.audit.mutants import detection
from privleak.audit.table import MECHANISMS, claims_of, summarise
from privleak.figures import save_figure, save_table, style
from privleak.pipeline import paths

IN, FIG = paths.INTERIM / "audit", paths.FIGURES / "audit"
FORMATS = tuple(figures["formats"])
style()
rows = {m: pd.read_parquet(IN / m / "rows.parquet") for m in MECHANISMS}
claims = {k: v for m in MECHANISMS for k, v in
          claims_of(m, pd.read_parquet(IN / m / "claimed.parquet")).items()}  # fmt: skip
{m: len(frame) for m, frame in rows.items()}

# %% [markdown]
# ## The audit table

# %%
table = pd.concat([summarise(rows[m], claims, alpha) for m in MECHANISMS],
                  ignore_index=True)  # fmt: skip
save_table(
    table,
    FIG / "audit_table",
    note="Nominal ε (what each variant claims; a broken control claims its correct twin's) beside "
    "lower bounds from the audit over the audited neighbouring pairs, each of a variant's `tests` "
    f"statistical tests at alpha_per_test = {alpha:g} / tests (Bonferroni), so each flag holds "
    f"at {1 - alpha:.0%} as a whole; the exact bounds need no share. audited_token: exact "
    "worst-case token loss (whole vocabulary, every visited prefix); audited_response: largest "
    "|loss| of a candidate; wb_epsilon_low: from sampled outputs' losses at the claimed δ; hs_*: "
    "hockey-stick divergence at the nominal ε with its interval; bb_*: black-box test (secret's "
    "ROUGE-L recall), pooled over canaries. PAD's nominal ε is the all-steps ε of the composed "
    "Gaussian under the privacy-loss distribution (nominal_pld), the largest over the audited "
    "outputs of the larger of PAD's accounts under D and D'; its γ-relaxed ε is judged on each "
    "side's own protected steps; nominal_paper is the paper's γ-relaxed RDP ε at α = 10, which "
    "leaves screened steps unaccounted. DP-RAG's retrieval threshold is held fixed (the token "
    "law is audited). The audit's canaries, stores and response lengths are its own, smaller "
    "than the papers'.",
)
table[["mechanism", "variant", "nominal_token", "audited_token", "nominal_epsilon",
       "wb_epsilon_low", "bb_epsilon_low", "flagged", "flagged_by"]]  # fmt: skip

# %% [markdown]
# ## Nominal vs audited, per mechanism and setting

# %%
for mechanism in MECHANISMS:
    save_figure(audit_figure(table, mechanism), FIG / f"audit_{mechanism}", FORMATS)

# %% [markdown]
# ## The conformance check's suite
# Correct decoding-time DP mechanisms and seeded bugs (audit_conformance,
# `privleak.audit.mutants`), each audited by `privleak.audit.check` against its claim: a
# correct one must pass and a bug must be flagged. Small-vocabulary stand-ins, not the papers'
# models.

# %%
suite = pd.read_parquet(IN / "conformance" / "suite.parquet")
save_table(
    suite,
    FIG / "conformance",
    note="The conformance check (privleak.audit.check) on correct mechanisms and seeded bugs "
    "(privleak.audit.mutants; each bug claims its correct twin's guarantee), small-vocabulary "
    "stand-ins: claimed ε beside the audited lower bound, exact on each neighbouring pair (the "
    "largest over the pairs, the worst pair named); flagged when it exceeds the claim.",
)
save_figure(conformance_figure(suite), FIG / "conformance", FORMATS)
detection(suite)

# %% [markdown]
# ## Headline metrics

# %%
# the mechanisms whose audit is exact: a correct variant flagged is a false flag
never_flagged = table[table["mechanism"].isin(["dp_rag", "cid"]) & ~table["broken"]]
controls = table[table["broken"]]


def finite(column: str) -> dict[str, float]:
    """{mechanism/variant: value} of a table column, where it is a finite number (none when no
    variant has the column)."""
    if column not in table:
        return {}
    values = zip(table["mechanism"], table["variant"], table[column], strict=True)
    return {f"{m}/{v}": float(x) for m, v, x in values if pd.notna(x) and math.isfinite(x)}


metrics = {
    "controls_ok": bool(controls["flagged"].all() and not never_flagged["flagged"].any()),
    "flagged": {f"{r.mechanism}/{r.variant}": bool(r.flagged) for r in table.itertuples()},
    "flagged_by": {f"{r.mechanism}/{r.variant}": r.flagged_by for r in table.itertuples()},
    "audited_token": finite("audited_token"),
    "wb_epsilon_low": finite("wb_epsilon_low"),
    "bb_epsilon_low": finite("bb_epsilon_low"),
    "nominal_token": finite("nominal_token"),
    "nominal_response": finite("nominal_response"),
    "audited_response": finite("audited_response"),
    "nominal_relaxed": finite("nominal_relaxed"),
    "nominal_paper": finite("nominal_paper"),
    "nominal_epsilon": finite("nominal_epsilon"),
    "wb_relaxed_low": finite("wb_relaxed_low"),
    "event_epsilon_low": finite("event_epsilon_low"),
    "event_relaxed_low": finite("event_relaxed_low"),
    "relaxed_side": {
        f"{r.mechanism}/{r.variant}": r.relaxed_side
        for r in table.itertuples()
        if r.mechanism == "pad"
    },
    "tests": finite("tests"),
    "alpha_per_test": finite("alpha_per_test"),
    "canaries": finite("canaries"),
    "premise_violated": finite("premise_violated"),
    "shift_ratio_median": finite("shift_ratio_median"),
    "conformance": detection(suite)
    | {
        "claimed": dict(zip(suite["mechanism"], suite["claimed"].astype(float), strict=True)),
        "audited": {
            m: float(a) if math.isfinite(a) else None
            for m, a in zip(suite["mechanism"], suite["audited"], strict=True)
        },
    },
}
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "audit.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
metrics["controls_ok"]
