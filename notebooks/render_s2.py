# %% [markdown]
# # S2 (Wang et al., PAD): Table 1, Figs. 3-6 and the headline numbers
# Reads only the cached artifacts of s2_index (prompts, contexts, planted secrets) and s2_generate
# (responses with per-step noise records, secret log-probabilities).
# - T1: per corpus and defense, Table 1's counts over the attack prompts against each prompt's
#   retrieved top contexts (Retrieved Contexts: distinct contexts; Repeat / ROUGE Prompts: prompts
#   whose response shares >= `metrics.repeat_min_words` consecutive words with, or has ROUGE-L
#   recall or precision > `metrics.rouge_threshold` against, one of its contexts; Repeat / ROUGE
#   Contexts: distinct contexts so leaked), PPL (the responses' tokens under the undefended model
#   given the attack prompt, pooled), PII recall (planted items of the retrieved contexts found
#   verbatim) and the median exact log10-probability of emitting a planted secret.
# - Fig. 3: PAD's ablations (sweep corpus); Figs. 4-5: amplification and epsilon sweeps, with 95 %
#   bootstrap intervals over prompts; Fig. 6: PAD's accountant: (a) average epsilon per token
#   against response length, (b) epsilon per step against the Rényi order alpha.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
sweep_corpus = "healthcaremagic"
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}
leakage = {"repeat_min_words": 20, "rouge_threshold": 0.5}

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privleak.figures import (
    BOOTSTRAP,
    check_formats,
    outside_legend,
    save_figure,
    save_table,
    style,
)
from privleak.metrics.rag_leakage import prompt_outcomes
from privleak.pad import check_accounting, response_budget, step_rdp
from privleak.pipeline import paths

style()
FIG = paths.FIGURES / "s2"
FORMATS = check_formats(figures["formats"])
S2 = paths.INTERIM / "s2"
check_accounting(accounting["alpha"], accounting["delta"])
prompts = pd.read_parquet(S2 / "index" / "prompts.parquet")
chunks = pd.read_parquet(S2 / "index" / "chunks.parquet")
secrets = pd.read_parquet(S2 / "index" / "secrets.parquet")
responses = pd.read_parquet(S2 / "generate" / "responses.parquet")
esp = pd.read_parquet(S2 / "generate" / "esp.parquet")
pad_default = json.loads((S2 / "generate" / "pad_settings.json").read_text())
LABELS = {"extraction": "Extraction", "summ": "Summ.", "dist": "Dist.", "static": "Static",
          "pad": "PAD", "no_calib": "No Calib.", "no_sens": "No Sens."}  # fmt: skip
TABLE = ["extraction", "summ", "dist", "static", "pad"]
metrics = {}

# %% [markdown]
# ## Per-prompt leakage: the unit every count and interval is built from

# %%
retrieved = prompts.set_index(["corpus", "prompt_id"])["context_ids"]
units = prompt_outcomes(prompts, chunks, secrets, responses,
                        min_words=leakage["repeat_min_words"],
                        rouge_threshold=leakage["rouge_threshold"])  # fmt: skip


def asked(group: pd.DataFrame) -> list[tuple]:
    return list(zip(group["corpus"], group["prompt_id"], strict=True))


def summarize(group: pd.DataFrame) -> pd.Series:
    """Table 1's row of one (corpus, defense) over its prompts."""
    distinct = lambda column: len({c for ids in group[column] for c in ids})  # noqa: E731
    return pd.Series({
        "prompts": len(group),
        "retrieved_contexts": len({(k, c) for k, p in asked(group) for c in retrieved[(k, p)]}),
        "repeat_prompts": int(group["repeat"].sum()),
        "repeat_contexts": distinct("repeat_contexts"),
        "rouge_prompts": int(group["rouge"].sum()),
        "rouge_contexts": distinct("rouge_contexts"),
        "ppl": float(np.exp(group["nll"].sum() / group["tokens"].sum())),
        # NaN, not 0, when no planted item was exposed (an hf: or file: corpus has none)
        "pii_recall": group["pii_found"].sum() / group["pii_exposed"].sum()
        if group["pii_exposed"].sum() else float("nan"),
    })  # fmt: skip


# %% [markdown]
# ## Table 1

# %%
table_units = units[units["family"] == "table"]
t1 = table_units.groupby(["corpus", "defense"])[list(units.columns)].apply(summarize)
esp_median = esp.groupby(["corpus", "defense"])["logprob"].median() / np.log(10)
t1["secret_log10_esp_median"] = esp_median
t1 = t1.reindex(pd.MultiIndex.from_product([t1.index.levels[0], TABLE])).reset_index(
    names=["corpus", "defense"]
)
t1["method"] = t1["defense"].map(LABELS)
save_table(
    t1.drop(columns="defense"),
    FIG / "s2_table1",
    note="S2 Table 1 (Wang et al.): counts over the attack prompts of each corpus; PPL pooled over "
    "response tokens under the undefended model; PII recall over planted items in the retrieved "
    "contexts; secret ESP: median exact log10-probability of emitting a planted secret after its "
    "document cue.",
)
metrics["table1"] = {
    corpus: {r.defense: {k: (None if pd.isna(v) else float(v)) for k, v in r._asdict().items()
                         if k not in ("corpus", "defense", "method", "Index")}
             for r in part.itertuples()}
    for corpus, part in t1.groupby("corpus")
}  # fmt: skip
t1

# %% [markdown]
# ## Fig. 3: PAD's ablations; Figs. 4-5: the amplification and epsilon sweeps (sweep corpus)
# Counts are over the sweep corpus's prompts. Prompt counts get 95 % bootstrap intervals over
# prompts (a count is the number of prompts times the mean of 0/1 prompt outcomes); PPL's
# interval resamples prompts too.

# %%
LEAKS = ["repeat_prompts", "repeat_contexts", "rouge_prompts", "rouge_contexts"]
sweep = units[units["corpus"] == sweep_corpus]
n_prompts = sweep["prompt_id"].nunique()
extraction = summarize(sweep[sweep["defense"] == "extraction"])
names = ["static", "no_calib", "no_sens", "pad"]
ablation = (
    sweep[sweep["defense"].isin(names)]
    .groupby("defense")[list(units.columns)]
    .apply(summarize)
    .reindex(names)
)
fig, ax = plt.subplots(figsize=(6.4, 3.6))
long = (
    ablation[LEAKS]
    .rename(index=LABELS)
    .reset_index(names="method")
    .melt("method", var_name="metric", value_name="count")
)
sns.barplot(long, x="method", y="count", hue="metric", ax=ax)
for color, metric in zip(sns.color_palette(), LEAKS, strict=False):
    ax.axhline(extraction[metric], color=color, linestyle="--", linewidth=1)
ax.set(xlabel="", ylabel=f"count over {n_prompts} prompts",
       title=f"S2 Fig. 3: PAD ablation on {sweep_corpus} (dashed: Extraction)")  # fmt: skip
outside_legend(fig, ax, below=True)  # a beside legend meets the title when the counts are all 0
save_figure(fig, FIG / "s2_fig3", FORMATS)
save_table(ablation.reset_index(names="defense"), FIG / "s2_fig3_data")
metrics["ablation"] = {
    d: {m: float(ablation.loc[d, m]) for m in LEAKS + ["ppl"]} for d in names
} | {"extraction": {m: float(extraction[m]) for m in LEAKS + ["ppl"]}}


def sweep_points(family: str) -> pd.DataFrame:
    """Per-prompt outcomes along one PAD sweep, the PAD defaults' row as its default point."""
    points = sweep[sweep["family"] == family]
    default = sweep[sweep["defense"] == "pad"].assign(value=pad_default[family])
    return pd.concat([points, default]).sort_values(["value", "prompt_id"])


def prompt_counts(points: pd.DataFrame) -> pd.DataFrame:
    """Long table of Repeat and ROUGE Prompts counts (mean outcome x prompts) per sweep value."""
    counts = points.assign(repeat=points["repeat"] * n_prompts, rouge=points["rouge"] * n_prompts)
    long = counts.melt(["value", "prompt_id"], ["repeat", "rouge"], var_name="metric",
                       value_name="prompts")  # fmt: skip
    long["metric"] = long["metric"].map({"repeat": "Repeat Prompts", "rouge": "ROUGE Prompts"})
    return long


def leakage_panel(ax, points: pd.DataFrame) -> None:
    sns.lineplot(prompt_counts(points), x="value", y="prompts", hue="metric", marker="o", ax=ax,
                 **BOOTSTRAP)  # fmt: skip
    # Apart along x: the two Extraction lines coincide when the counts are equal.
    for value, metric, x in ((extraction["repeat_prompts"], "Repeat", 0.01),
                             (extraction["rouge_prompts"], "ROUGE", 0.55)):  # fmt: skip
        ax.axhline(value, linestyle="--", linewidth=1, color="grey")
        ax.annotate(f"Extraction {metric}", (x, value), xycoords=("axes fraction", "data"),
                    fontsize=7, color="grey", va="bottom")  # fmt: skip
    ax.set(ylabel=f"prompts (of {n_prompts})", title="Privacy protection")


def utility_panel(ax, points: pd.DataFrame) -> None:
    nll = points.groupby("value")[["nll", "tokens"]].sum()
    ax.plot(nll.index, np.exp(nll["nll"] / nll["tokens"]), marker="o")
    ax.axhline(extraction["ppl"], linestyle="--", color="grey", linewidth=1)
    ax.set(ylabel="PPL (dashed: Extraction)", title="Utility")


def sweep_figure(family: str, label: str, figure: str, log_x: bool) -> pd.DataFrame:
    points, name = sweep_points(family), f"s2_{figure.lower().replace('. ', '')}"
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    leakage_panel(axes[0], points)
    utility_panel(axes[1], points)
    for ax in axes:
        ax.set_xlabel(label)
        if log_x:
            ax.set_xscale("log")
    fig.suptitle(f"S2 {figure}: PAD vs {label} on {sweep_corpus}")
    outside_legend(fig, axes[0], below=True)
    save_figure(fig, FIG / name, FORMATS)
    table = points.groupby("value")[list(units.columns)].apply(summarize)
    save_table(table.reset_index(names=family), FIG / f"{name}_data")
    return table


amplification = sweep_figure("amplification", "amplification λ_amp", "Fig. 4", log_x=False)
metrics["amplification"] = {f"{v:g}": {m: float(amplification.loc[v, m]) for m in LEAKS + ["ppl"]}
                            for v in amplification.index}  # fmt: skip
epsilon = sweep_figure("epsilon", "ε (PAD)", "Fig. 5", log_x=True)
metrics["epsilon"] = {f"{v:g}": {m: float(epsilon.loc[v, m]) for m in LEAKS + ["ppl"]}
                      for v in epsilon.index}  # fmt: skip
amplification[LEAKS + ["ppl"]]

# %% [markdown]
# ## Fig. 6 and the accountant: a fresh accountant per response
# gamma is the fraction of protected (not screened) steps. The paper's gamma-relaxed epsilon
# charges the protected steps only; the all-steps epsilon also charges the screened ones (sigma_min
# with the step's own Delta). (a) average epsilon per token of the responses' first L tokens (PAD
# defaults, every corpus; only responses of >= L tokens); (b) RDP epsilon per protected step at
# each Rényi order.

# %%
alpha, delta = accounting["alpha"], accounting["delta"]
pad_rows = responses[responses["defense"] == "pad"]
budgets = pd.DataFrame([
    {"corpus": r.corpus, "prompt_id": r.prompt_id,
     **response_budget(r.sigma, r.sensitivity, np.asarray(r.protected) > 0.5, alpha,
                       delta).__dict__}
    for r in pad_rows.itertuples()
])  # fmt: skip
metrics["accountant"] = {
    "alpha": alpha, "delta": delta,
    "gamma_mean": float(budgets["gamma"].mean()),
    "epsilon_relaxed_median": float(budgets["epsilon_relaxed"].median()),
    "epsilon_all_steps_median": float(budgets["epsilon_all_steps"].median()),
    "steps_mean": float(budgets["steps"].mean()),
}  # fmt: skip
lengths = []
for length in accounting["lengths"]:
    for r in pad_rows.itertuples():
        if len(r.sigma) >= length:
            protected = np.asarray(r.protected[:length]) > 0.5
            b = response_budget(r.sigma[:length], r.sensitivity[:length], protected, alpha, delta)
            lengths.append({"length": length, "corpus": r.corpus,
                            "epsilon_per_token": b.epsilon_relaxed / length,
                            "all_steps_per_token": b.epsilon_all_steps / length})  # fmt: skip
lengths = pd.DataFrame(lengths)
per_step = []
for order in accounting["alphas"]:
    for r in pad_rows.itertuples():
        protected = np.asarray(r.protected) > 0.5
        if protected.any():
            rdp = step_rdp(
                order, np.asarray(r.sensitivity)[protected], np.asarray(r.sigma)[protected]
            )
            per_step.append({"alpha": order, "corpus": r.corpus, "epsilon_per_step": rdp.mean()})
per_step = pd.DataFrame(per_step)
fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.4))
sns.lineplot(lengths, x="length", y="epsilon_per_token", hue="corpus", marker="o", ax=left,
             **BOOTSTRAP)  # fmt: skip
left.set(xlabel="response length L (tokens)", ylabel="average ε per token (γ-relaxed)",
         title="(a) ε per token vs length")  # fmt: skip
sns.barplot(per_step, x="alpha", y="epsilon_per_step", hue="corpus", ax=right, **BOOTSTRAP)
right.set(xlabel="Rényi order α", ylabel="ε per protected step", title="(b) α sensitivity")
fig.suptitle(f"S2 Fig. 6: PAD's RDP accountant (α = {alpha:g} in (a), δ = {delta:g})")
outside_legend(fig, right, below=True)
left.get_legend().remove()
save_figure(fig, FIG / "s2_fig6", FORMATS)
save_table(budgets, FIG / "s2_accountant")
save_table(lengths.groupby(["corpus", "length"]).mean().reset_index(), FIG / "s2_fig6a_data")
save_table(per_step.groupby(["corpus", "alpha"]).mean().reset_index(), FIG / "s2_fig6b_data")
metrics["accountant"]

# %% [markdown]
# ## Save the headline metrics

# %%
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "s2.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
