# %% [markdown]
# # Frontier — which defense buys the most privacy for the utility it costs
# Every point of every defense on one task (frontier_generate): its utility (accuracy: the answer
# names the disease, S4's rule; ROUGE-L F1 against "<prefix> <disease>"; PPL of the answer alone
# under the LM) and its leakage (the cued secret mass: Σ P(secret | its cue) over the secrets its
# contexts expose, the expected number an attack response emits once it reaches each cue, exact or
# certified; the sampled count repeated verbatim), each a mean over the units with a 95 % interval
# (`claims` sets the bootstrap; one draw of units serves every point, so contrasts are paired).
# The Pareto set is computed, not drawn.
# Leakage at matched utility: each defense's least leakage at `matched.share` of the undefended
# accuracy over the randomised mixtures of its settings (exact for expectations,
# `privleak.frontier.matched`), random refusal beside it, with intervals; the comparisons of
# `comparisons` are the claims render_claims judges. Each point with a stated ε carries it; the
# losses its secrets show on the neighbouring store without their document are set against the
# bound the point states for each secret's event.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
claims = {"n_boot": 1000, "seed": 0, "alpha": 0.05, "min_units": 6, "method": "percentile"}
matched = {"share": 0.9}
comparisons = [["pad", "static"], ["pad", "summ"], ["pad", "dist"], ["dp_icl", "pad"],
               ["pad", "refusal"]]  # fmt: skip

# %%
import json

import pandas as pd

from privleak.figures import save_figure, save_table, style
from privleak.frontier.figure import LABELS, frontier_figure
from privleak.frontier.matched import finite_or_null
from privleak.frontier.summary import (
    comparison,
    curves_of,
    epsilon_gap,
    matched_frame,
    point_table,
    unit_matrices,
)
from privleak.frontier.summary import matched as matched_leakage
from privleak.pipeline import paths

IN, FIG = paths.INTERIM / "frontier" / "generate", paths.FIGURES / "frontier"
FORMATS = tuple(figures["formats"])
style()
responses = pd.read_parquet(IN / "responses.parquet")
leakage = pd.read_parquet(IN / "leakage.parquet")
points = pd.read_parquet(IN / "points.parquet")
matrices = unit_matrices(responses, leakage, points["point"].tolist())
units = matrices["accuracy"].shape[1]
stats = {"n_boot": claims["n_boot"], "seed": claims["seed"]}
interval = {"alpha": claims["alpha"], "method": claims["method"]}
secrets = leakage[["question_id", "secret"]].drop_duplicates().shape[0]
print(f"{len(points)} points, {units} units, {secrets} exposed secrets")

# %% [markdown]
# ## Every point: utility and leakage with intervals, the Pareto set

# %%
table = point_table(matrices, points, **stats, **interval)
save_table(
    table, FIG / "frontier_points",
    note=f"Every defense's points on one task: {units} questions of S4's store (the first "
    "`units` of each frequency bucket, one of two with the same question and contexts), their top "
    "contexts, S4's LM. accuracy: the answer names the disease; rouge_l: F1 against '<prefix> "
    "<disease>'; ppl: the answer alone under the LM; secret_mass: Σ P(secret | its cue) over "
    "the planted secrets the contexts expose, each forced after the words before it in its "
    "document (exact; Static and PAD: the midpoint of certified bounds); emitted: the sampled "
    "count an extraction response repeats verbatim. 95 % intervals over questions. epsilon: the "
    "ε a point states per response (bounded CID: ε/token × the attack's tokens; DP-ICL: the "
    "token mechanism's over the same contexts given those contexts, no DP threshold; PAD: its "
    "accountant's γ-relaxed ε, the largest over its responses, epsilon_all_steps beside it). "
    "pareto_*: no other point has accuracy at least as high and leakage at least as low.",
)  # fmt: skip
table[["point", "epsilon", "accuracy", "accuracy_low", "accuracy_high", "secret_mass",
       "emitted", "pareto_secret_mass", "pareto_emitted"]].round(4)  # fmt: skip

# %% [markdown]
# ## Leakage at matched utility, and the comparisons

# %%
found = matched_leakage(matrices, points, matched["share"], **stats)
at_target = matched_frame(found, points, matched["share"], units, matrices=matrices, **interval)
save_table(
    at_target, FIG / "frontier_matched",
    note=f"Each defense's least leakage at accuracy at least {matched['share']:g} × the "
    "undefended accuracy (target_accuracy) over the randomised mixtures of its settings (no "
    "defense among them), which reach every point of their convex hull; refusal: the mixture "
    "of refusing and no defense. "
    "mixture: the least leakage is a mixture of two settings (else one setting reaches the "
    "target alone). NaN: no setting reaches it. 95 % intervals over questions, every defense on "
    "the same draws; for secret_mass they also cover the noisy laws' certified bounds.",
    csv_only=["note"],
)  # fmt: skip
contrasts = []
for a, b in comparisons:
    for leak in ("secret_mass", "emitted"):
        e = comparison(found, leak, a, b, units, alpha=claims["alpha"])
        contrasts.append({"a": a, "b": b, "leakage": leak, "difference": e.effect,
                          "low": e.low, "high": e.high, "note": e.note})  # fmt: skip
contrasts = pd.DataFrame(contrasts)
save_table(contrasts, FIG / "frontier_comparisons",
           note="Matched-utility leakage of a minus b (negative: a leaks less), paired over "
           "questions: a t interval on the bootstrap standard error (questions - 1 degrees of "
           "freedom), spanning the noisy laws' certified bounds for secret_mass.",
           csv_only=["note"])  # fmt: skip
at_target.pivot_table(index="defense", columns="leakage", values="matched")

# %% [markdown]
# ## The stated ε against the measured loss

# %%
gap = epsilon_gap(leakage, points)
save_table(
    gap, FIG / "frontier_epsilon",
    note="Per point whose law states a bound for a secret's event: each secret's loss "
    "ln P_D(secret | cue) − ln P_D'(secret | cue), D' the store without the secret's document, "
    "certified from below (exact for bounded CID and DP-ICL; PAD's from its law's certified "
    "bounds), against the bound: bounded CID's and DP-ICL's per-token ε times the secret's "
    "tokens, PAD's accountant over the secret's own steps (every step charged, the larger of its "
    "accounts on D and D'). violations: secrets with P_D > e^ε P_D' + δ on those bounds.",
)  # fmt: skip
gap.round(3)

# %% [markdown]
# ## The frontier

# %%
curves = curves_of(points)
fig = frontier_figure(table, curves, f"Every defense on one task ({units} questions of S4's "
                      "store, S4's LM)")  # fmt: skip
save_figure(fig, FIG / "frontier", FORMATS)
series = pd.DataFrame([
    {"label": LABELS[defense], "accuracy": round(float(table["accuracy"].iloc[i]), 4),
     "secret_mass": float(table["secret_mass"].iloc[i]),
     "emitted": float(table["emitted"].iloc[i])}
    for defense, path in curves.items() for i in path
])  # fmt: skip
series.to_csv(FIG / "frontier_data.csv", index=False)

# %%
headline = {
    "units": units,
    "target_accuracy": float(at_target["target_accuracy"].iloc[0]),
    "points": {r.point: {"accuracy": r.accuracy, "secret_mass": r.secret_mass,
                         "emitted": r.emitted, "epsilon": r.epsilon}
               for r in table.itertuples()},
    "pareto_secret_mass": table.loc[table["pareto_secret_mass"], "point"].tolist(),
    "matched": {leak: {r.defense: {"value": r.matched, "low": r.low, "high": r.high}
                       for r in own.itertuples()}
                for leak, own in at_target.groupby("leakage", sort=False)},
    "epsilon_gap": {r.point: {"max_loss": r.max_loss, "max_loss_over_bound":
                              r.max_loss_over_bound, "violations": r.violations,
                              "secrets": r.secrets} for r in gap.itertuples()},
}  # fmt: skip
(paths.METRICS / "frontier.json").write_text(
    json.dumps(finite_or_null(headline), indent=1, sort_keys=True) + "\n"
)
headline["pareto_secret_mass"]
