# %% [markdown]
# # Claims of S0, S1, S2, S3 and S4 as data
# Every directional sentence of the five papers that the cached artifacts under data/interim can
# test is an entry of the claims catalogue (`privleak.claims.catalogue`: the quote, where the
# paper says it, the effect that tests it and its direction against the null), and each entry's
# role (`privleak.claims.roles`): a primary claim (a statement of the paper's abstract or
# conclusion, chosen from the text before looking at results), a secondary one, or a check of
# privleak's own mechanism, counted apart. One estimator module per paper (`privleak.claims.s0`
# ... `s4`) computes each effect with an interval over independent units (contexts, sequences,
# attack prompts or held-out dialogs; paired settings of a unit stay paired) by the small-sample
# procedure that fits it (`privleak.claims.procedures`: t over units, McNemar's exact test,
# Welch's t, or a t interval on a bootstrap standard error), with that procedure's p-value; one
# estimate makes one claim. The verdict follows docs/design.md §8: reproduced when the
# interval excludes the null on the paper's side, contradicted when it excludes it on the other
# side, inconclusive otherwise. Claims about a model trained here also need an interval over
# training runs: where the artifacts hold fewer than `min_units` runs, the claim stays
# inconclusive and its note says what the interval over units alone reads. Guarantees (bounded
# CID, the n-ISP bound, the per-token ε of bounded CID and DP-ICL on the audit's canaries) are
# checked on every unit instead: one violation contradicts them. PAD's per-response ε is judged
# against the audit's lower bound, which can contradict it but never confirm it. The frontier's
# comparisons (`comparisons`, `privleak.claims.frontier`) judge which defense leaks less at matched
# utility on one task. Beside each verdict, the verdict adjusted in its family (Holm over each
# paper's primary claims, Benjamini-Yekutieli over the rest, `privleak.claims.multiplicity`), the
# units that would decide it at 80 % power at the family's level, and whether it held when every
# stage was rerun on another machine's floats (metrics/stability.json, written by `make
# stability`: `privleak.claims.stability`). No model runs here.

# %% tags=["parameters"]
claims = {"n_boot": 1000, "seed": 0, "alpha": 0.05, "min_units": 6, "method": "percentile"}
models = "family"
sweep_corpus = "healthcaremagic"
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}
leakage = {"repeat_min_words": 20, "rouge_rule": "pad",
           "rouge_thresholds": {"pad": 0.2, "zeng": 0.5}}  # fmt: skip
domain = "AIRLINE"
matched = {"share": 0.9}
comparisons = [["pad", "static"], ["pad", "summ"], ["pad", "dist"], ["dp_icl", "pad"],
               ["pad", "refusal"]]  # fmt: skip
mia = {
    "models": "family",
    "members": "planted",
    "non_members": {"source": "held_out", "count": 64},
    "k": 0.2,
    "reference": "h8",
    "lira": {"sizes": ["h8"], "references": 2, "variance": "global"},
    "batch_size": 16,
    "workers": 1,
    "fprs": [0.01, 0.001],
}

# %%
from privleak.claims import audit, s0, s1, s2, s3, s4, stability
from privleak.claims import frontier as frontier_claims
from privleak.claims import mia as mia_claims
from privleak.claims.registry import bootstrapper, evaluate
from privleak.claims.tables import (
           counts,
           family_lines,
           judged_frame,
           markdown,
           metrics_json,
           primary_lines,
           stability_lines,
)
from privleak.pipeline import paths

OUT = paths.FIGURES / "claims"
boot = bootstrapper(claims)
# The rule every claim on a model trained here answers to, and what a single run lacks.
SEEDS = f"an interval over >= {claims['min_units']} training runs (docs/design.md §8)"
ONE_RUN = SEEDS + "; the artifacts hold one training run"

# %% [markdown]
# ## Load the artifacts

# %%
frames = {
    "s0": s0.load(paths.INTERIM),
    "s1": s1.load(paths.INTERIM),
    "s2": s2.load(paths.INTERIM, leakage),
    "s3": s3.load(paths.INTERIM),
    "s4": s4.load(paths.INTERIM),
    "audit": audit.load(paths.INTERIM),
    "mia": mia_claims.load(paths.INTERIM),
    "frontier": frontier_claims.load(paths.INTERIM),
}
# S1 on the in-pipeline family resamples its training runs with the sequences when there are
# min_units of them; pretrained models have one run by nature.
design1 = s1.design(frames["s1"]["esp"], models == "family", claims["min_units"], SEEDS)
print(f"S1: {len(design1.runs)} training runs; runs x sequences resampled: {design1.crossed}")

# %% [markdown]
# ## Evaluate every claim of the catalogue

# %%
found = evaluate(
    [
        *s0.findings(frames["s0"], boot, ONE_RUN),
        *s1.findings(frames["s1"], design1, boot),
        *s2.findings(frames["s2"], boot, sweep_corpus, accounting),
        *s3.findings(
            frames["s3"],
            boot,
            claims,
            domain=domain,
            seeds_rule=SEEDS,
        ),
        *s4.findings(frames["s4"], boot),
        *audit.findings(frames["audit"], claims["alpha"]),
        *mia_claims.findings(frames["mia"], mia, claims, SEEDS),
        *frontier_claims.findings(frames["frontier"], matched["share"], comparisons, claims),
    ],
    claims["alpha"],
)
# Each decided verdict's rerun on another machine's floats (`make stability`): stable or fragile.
found = stability.mark(found, stability.load(paths.METRICS / "stability.json"))
frame = judged_frame(found, claims["alpha"])
counts(found)

# %% [markdown]
# ## Verdicts per paper

# %%
frame.pivot_table(index="paper", columns="verdict", values="id", aggfunc="count", fill_value=0)

# %% [markdown]
# ## Primary claims per paper, after Holm

# %%
print("\n".join(primary_lines(frame)))

# %% [markdown]
# ## Every family, adjusted
# Reproduced / contradicted / inconclusive per family, per claim and after the family's adjustment
# (`privleak.claims.multiplicity`).

# %%
print("\n".join(family_lines(frame)))

# %% [markdown]
# ## Stable and fragile decided verdicts
# Per paper key, the decided verdicts that held (stable) or moved (fragile) when every stage was
# rerun on another machine's floats; unmeasured: no rerun of this verdict on record.

# %%
print("\n".join(stability_lines(frame)))

# %% [markdown]
# ## Save: figures/claims/claims.{md,csv}, metrics/claims.json

# %%
OUT.mkdir(parents=True, exist_ok=True)
frame.to_csv(OUT / "claims.csv", index=False)
(OUT / "claims.md").write_text(markdown(found, claims["alpha"]))
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "claims.json").write_text(metrics_json(found, claims["alpha"]))
frame[["id", "role", "effect", "ci_low", "ci_high", "method", "p_value", "verdict", "adjusted"]]
