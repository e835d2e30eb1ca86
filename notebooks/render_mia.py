# %% [markdown]
# # Membership inference against known ground truth: the attack table, ROC curves, and S1
# Every attack scores every text under every scored model (`privleak.mia.table`): LOSS, zlib,
# Min-K% and Min-K%++ at k = `mia.k`, the reference ratio against `mia.reference`, and offline
# LiRA where mia_references trained reference models. The table gives ROC AUC and the TPR at each
# FPR of `mia.fprs` per attack, model and member group (all members, or those planted a given
# number of times, each against all non-members), averaged over training runs, with 95 %
# intervals that resample texts and runs independently (`privleak.mia.metrics`; `claims` sets
# n_boot, seed, alpha and method). With few non-members a low FPR allows no false positive at
# all: the table says how many non-members each TPR rests on. The cross-check with S1: each
# member's ESP under sampling (s1_scores, s1_seeds; the full prefix) against its LOSS score, as a
# Spearman correlation over members and runs, per sequence kind. Three controls ask whether the
# member signal would show without the target's weights (`privleak.mia.controls`): each
# reference model attacked as a target, a bag-of-words classifier that sees only the texts, and
# the shared tokenizer (characters per token as the attack; LOSS per character instead of per
# token).

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
claims = {"n_boot": 1000, "seed": 0, "alpha": 0.05, "min_units": 6, "method": "percentile"}
prefix_tokens = 50
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
import json
from functools import partial

import numpy as np
import pandas as pd

from privleak.claims.stats import PLUS_MINUS_ONE, bootstrap, spearman
from privleak.figures import save_figure, save_table, style
from privleak.mia import controls
from privleak.mia.figure import LABELS, esp_figure, roc_figure
from privleak.mia.table import metric_table, score_table
from privleak.pipeline import paths

IN, FIG = paths.INTERIM / "mia", paths.FIGURES / "mia"
FORMATS = tuple(figures["formats"])
style()
texts = pd.read_parquet(IN / "texts.parquet")
stats = pd.read_parquet(IN / "stats.parquet")
variance = mia["lira"]["variance"] if mia["lira"] else "global"
table = score_table(stats, texts, k=mia["k"], reference=mia["reference"], lira_variance=variance)
models = list(dict.fromkeys(stats.loc[stats["role"] == "target", "model"]))  # smallest first
runs = table["run"].nunique()
table.groupby(["model", "attack"]).size().unstack()

# %% [markdown]
# ## The attack table

# %%
metrics_table = metric_table(table, texts, fprs=mia["fprs"], n_boot=claims["n_boot"],
                             seed=claims["seed"], alpha=claims["alpha"],
                             method=claims["method"], min_units=claims["min_units"])  # fmt: skip
members, non_members = int(texts["is_member"].sum()), int((~texts["is_member"]).sum())
save_table(
    metrics_table,
    FIG / "mia_table",
    note=f"Membership inference on models whose training data is known: {members} members "
    f"(planted sequences; `duplicates`: how many times) against {non_members} non-members, "
    f"averaged over {runs} training run(s), 95 % intervals resampling texts and runs. A TPR at "
    f"FPR f rests on {non_members} non-members: below 1/{non_members} it allows no false "
    f"positive. Min-K% and Min-K%++ at k = {mia['k']:g}; reference: ratio of log-perplexities "
    f"to {mia['reference']}; LiRA: offline, reference models trained here on other draws of "
    "the corpus.",
)
wide = metrics_table[metrics_table["duplicates"] == "all"].pivot_table(
    index=["model", "attack"], columns="metric", values="effect"
)
wide.round(3)

# %% [markdown]
# ## ROC curves (log axes), averaged over training runs

# %%
fig = roc_figure(table, models, f"ROC over {runs} training run(s): {members} members, "
                 f"{non_members} non-members")  # fmt: skip
save_figure(fig, FIG / "mia_roc", FORMATS)

# %% [markdown]
# ## Cross-check with S1: does a member's ESP predict its membership score?

# %%
s1 = paths.INTERIM / "s1"
esp = pd.concat([pd.read_parquet(s1 / "scores" / "esp.parquet").assign(run=0),
                 pd.read_parquet(s1 / "seeds" / "esp.parquet")], ignore_index=True)  # fmt: skip
esp = esp[(esp["decoder"] == "sampling") & (esp["prefix_len"] == prefix_tokens)]
loss = table[(table["attack"] == "loss") & table["is_member"]]
esp = esp[["run", "model", "seq_id", "log_esp"]].rename(columns={"seq_id": "text_id"})
joined = loss.merge(esp, on=["run", "model", "text_id"])
joined = joined[np.isfinite(joined["log_esp"])]
joined = joined.assign(log10_esp=joined["log_esp"] / np.log(10))
correlations: dict[str, dict] = {}
# Per sequence kind: a 4-token entity's ESP and a 50-token suffix's differ by orders of magnitude
# for reasons that have nothing to do with membership, so pooling the kinds would mislead.
for (model, kind), own in joined.groupby(["model", "kind"], sort=False):
    runs_of = own.groupby("text_id")["run"].transform("nunique")
    balanced = own[runs_of == own["run"].nunique()]  # the crossed bootstrap needs every run
    estimate = bootstrap(balanced[["log_esp", "score"]].to_numpy(),
                         lambda rows: spearman(rows[:, 0], rows[:, 1]), n_boot=claims["n_boot"],
                         seed=claims["seed"], alpha=claims["alpha"],
                         groups=balanced["text_id"], runs=balanced["run"],
                         min_units=claims["min_units"], bounds=PLUS_MINUS_ONE)  # fmt: skip
    correlations.setdefault(model, {})[kind] = {
        "spearman": estimate.effect, "low": estimate.low, "high": estimate.high,
        "members": estimate.units,
    }  # fmt: skip
# S1 scores other models than these (a listed model S1 did not score): the panel says so.
save_figure(esp_figure(joined, models[-1], "loss"), FIG / "mia_esp", FORMATS)
pd.DataFrame({(m, k): v for m, by in correlations.items() for k, v in by.items()}).T.round(3)

# %% [markdown]
# ## Controls: would the member signal show without the target's weights?
# Reference models never saw a member or a non-member: attacked as targets, every
# reference-free attack should sit at AUC 0.5. The blind baseline sees only the texts (word
# counts, logistic regression, each text scored out of fold). The tokenizer was trained on a
# corpus with the members in it: characters per token as the attack shows what tokenization
# alone separates, and LOSS per character re-measures the member signal without the token count.

# %%
# (control, scores, the texts they score): the tokenizer's LOSS within each kind scores that
# kind's texts alone
control_scores = [
    ("reference_as_target", controls.reference_as_target(stats, texts, mia["k"]), texts),
    ("blind", controls.blind_scores(texts, seed=claims["seed"]), texts),
    ("tokenizer", pd.concat([controls.tokenizer_scores(stats, texts),
                             controls.loss_per_char(stats, texts)], ignore_index=True), texts),
    *(("tokenizer", *controls.loss_within_kind(stats, texts, kind))
      for kind in sorted(texts["kind"].unique())),
]  # fmt: skip
control_table = pd.concat(
    [metric_table(scores, scored, fprs=mia["fprs"], n_boot=claims["n_boot"],
                  seed=claims["seed"], alpha=claims["alpha"], method=claims["method"],
                  min_units=claims["min_units"]).assign(control=name)
     for name, scores, scored in control_scores if len(scores)],
    ignore_index=True,
)  # fmt: skip
save_table(
    control_table,
    FIG / "mia_controls",
    note="Controls of the attack table (privleak.mia.controls): reference_as_target, each "
    "offline-LiRA reference model (trained on another draw of the corpus, never seeing a member "
    "or a non-member) attacked as if it were the target, the references playing the runs; "
    "blind, word-count logistic regression and naive Bayes on the texts alone, each text scored "
    "by the fold that did not train on it (ranks within the fold); tokenizer, characters per "
    "token of the shared tokenizer as the score (tokenizer only), each target's summed log-prob "
    "over the text's characters (loss_per_char, LOSS without the token count), and each "
    "target's LOSS within one sequence kind (loss_<kind>: that kind's members against its "
    "non-members). 95 % intervals over texts and runs.",
)
boot = partial(bootstrap, **{k: claims[k] for k in ("n_boot", "seed", "alpha", "min_units")})
tokens_by_kind = controls.by_kind(stats, texts, boot)
auc_rows = control_table[
    (control_table["duplicates"] == "all") & (control_table["metric"] == "auc")
]
auc_rows[["control", "model", "attack", "effect", "low", "high", "runs"]].round(3)

# %%
pd.DataFrame(tokens_by_kind).T.round(3)

# %%
controls_json = {
    name: {model: {attack: {"auc": r.effect, "low": r.low, "high": r.high}
                   for attack, r in own.set_index("attack").iterrows()}
           for model, own in rows.groupby("model")}
    for name, rows in auc_rows.groupby("control")
}  # fmt: skip
controls_json.setdefault("tokenizer", {})["by_kind"] = tokens_by_kind
headline = {
    model: {attack: {row.metric: row.effect for row in frame.itertuples()}
            for attack, frame in own.groupby("attack")}
    for model, own in metrics_table[metrics_table["duplicates"] == "all"].groupby("model")
}  # fmt: skip
(paths.METRICS / "mia.json").write_text(json.dumps(
    {"members": members, "non_members": non_members, "runs": runs, "auc_and_tpr": headline,
     "esp_spearman": correlations, "controls": controls_json}, indent=1,
    sort_keys=True) + "\n")  # fmt: skip
{m: {LABELS[a]: round(v["auc"], 3) for a, v in by.items()} for m, by in headline.items()}
