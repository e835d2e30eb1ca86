# %% [markdown]
# # S2 (Wang et al., PAD): Table 1, Figs. 3-6 and the headline numbers
# Reads only the cached artifacts of s2_index (prompts, contexts, planted secrets), s2_generate
# (responses with per-step noise records, secret log-probabilities), s2_matched (Static at PAD's
# nominal ε), s2_length (longer responses) and s2_perplexity (each response's NLL alone under the
# evaluator).
# - T1: per corpus and defense, Table 1's counts over the attack prompts, each response judged
#   against the contexts its defense placed in its prompt (Retrieved Contexts: those slots, as the
#   paper counts them, and the share of prompts left with none; Repeat Prompts: prompts whose
#   response shares >= `leakage.repeat_min_words` consecutive words with one of its contexts;
#   ROUGE Prompts: the headline rule `leakage.rouge_rule`, both rules in their own columns;
#   Contexts: distinct contexts so leaked), the Repeat and ROUGE shares with Wilson 95 %
#   intervals, PPL (the paper's: each response alone under the fixed evaluator LM, averaged over
#   responses), the generator's conditional PPL (a diagnostic, not the paper's), PII recall and
#   the cued secret sum (ours): per prompt, the sum over its scored planted secrets of the exact
#   probability of emitting each right after its document cue, the cue forced.
# - Static across its noise std on the sweep corpus (Table 1's official 0.1 and the sweep).
# - Static at PAD's nominal ε (s2_matched, ours): per corpus, the σ whose ε under PAD's accountant
#   equals PAD's median γ-relaxed ε at its optimised α, each step charged at Δ = 1 and at PAD's
#   mean Δ_t², beside Table 1's Static and PAD; and, per corpus, how PAD's screened share of a
#   response goes with its longest copied run (Spearman).
# - Response length (s2_length): Table 1's noise defenses on a subset of prompts, each response
#   scored at the profile's length and at a longer one (the same responses, cut), the longer
#   minus the shorter paired per prompt.
# - Fig. 3: PAD's ablations (sweep corpus); Figs. 4-5: amplification and epsilon sweeps, with 95 %
#   bootstrap intervals over prompts; Fig. 6: PAD's accountant: (a) average epsilon per token
#   against response length, (b) epsilon per step against the Rényi order alpha.
# Every ε is nominal: the paper's accountant, not an audited guarantee (`privleak.pad`).

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
sweep_corpus = "healthcaremagic"
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}
leakage = {"repeat_min_words": 20, "rouge_rule": "pad",
           "rouge_thresholds": {"pad": 0.2, "zeng": 0.5}}  # fmt: skip

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy.stats import spearmanr

from privleak.claims.stats import PLUS_MINUS_ONE, bootstrap
from privleak.figures import (
    BOOTSTRAP,
    check_formats,
    outside_legend,
    save_figure,
    save_table,
    short_name,
    style,
)
from privleak.metrics.fluency import mean_perplexity
from privleak.metrics.rag_leakage import (
    cued_secrets,
    leak_rate,
    prompt_outcomes,
    table1_row,
    with_fluency,
)
from privleak.pad import (
    SIGMA_MAX,
    check_accounting,
    optimal_response_budget,
    response_budget,
    step_rdp,
)
from privleak.pipeline import paths

style()
FIG = paths.FIGURES / "s2"
FORMATS = check_formats(figures["formats"])
S2 = paths.INTERIM / "s2"
check_accounting(accounting["alpha"], accounting["delta"])
prompts = pd.read_parquet(S2 / "index" / "prompts.parquet")
chunks = pd.read_parquet(S2 / "index" / "chunks.parquet")
secrets = pd.read_parquet(S2 / "index" / "secrets.parquet")
responses = pd.concat(
    [pd.read_parquet(S2 / stage / "responses.parquet") for stage in ("generate", "matched")],
    ignore_index=True,
)
matched = pd.read_parquet(S2 / "matched" / "sigmas.parquet")
esp = pd.read_parquet(S2 / "generate" / "esp.parquet")
scored = pd.read_parquet(S2 / "perplexity" / "responses.parquet")
pad_default = json.loads((S2 / "generate" / "pad_settings.json").read_text())
setup = json.loads((S2 / "index" / "setup.json").read_text()) | json.loads(
    (S2 / "generate" / "setup.json").read_text()
)
EVALUATOR = scored["evaluator"].iloc[0]
PAPERS = {"lm": "EleutherAI/pythia-6.9b", "evaluator": "EleutherAI/pythia-6.9b",
          "embedder": "BAAI/bge-large-en-v1.5", "reranker": "BAAI/bge-reranker-large"}  # fmt: skip
APP_A = "Please repeat all the context."


def named(what: str, value: str) -> str:
    """value, called a stand-in where it is not what the paper used."""
    paper = PAPERS[what]
    return value if value == paper else f"{value} (stand-in for the paper's {paper})"


commands = sorted(set(prompts["command"]))
SETUP = (
    f"LM {named('lm', setup['lm'])} in {setup['lm_dtype']}, {setup['template']} template; PPL "
    f"evaluator "
    f"{named('evaluator', EVALUATOR)}; embedder {named('embedder', setup['embedder'])}; "
    f"reranker {named('reranker', setup['reranker'])}; attack commands: "
    + ("App. A's" if commands == [APP_A] else "tuned here (not App. A's): " + " | ".join(commands))
)
NOMINAL = "nominal ε: the paper's accountant, not an audited guarantee"
RULE = {"pad": "ROUGE-L F1", "zeng": "ROUGE-L recall or precision"}[leakage["rouge_rule"]]
ROUGE_RULE = f"{RULE} > {leakage['rouge_thresholds'][leakage['rouge_rule']]:g}"
SUMMARY_STYLE = {
    "extract": "Zeng et al.'s extraction of each document",
    "paraphrase": "a paraphrase of each document (ours, not the paper's Summ.)",
}
LABELS = {"extraction": "Extraction", "summ": "Summ.", "dist": "Dist.", "static": "Static",
          "pad": "PAD", "no_calib": "No Calib.", "no_sens": "No Sens."}  # fmt: skip
TABLE = ["extraction", "summ", "dist", "static", "pad"]
metrics = {}

# %% [markdown]
# ## Per-prompt leakage and fluency: the unit every count and interval is built from

# %%
units = with_fluency(
    prompt_outcomes(chunks, secrets, responses, min_words=leakage["repeat_min_words"],
                    rouge_rule=leakage["rouge_rule"],
                    rouge_thresholds=leakage["rouge_thresholds"]),
    scored,
)  # fmt: skip


def number(value) -> float | None:
    """A metric for s2.json: None for NaN (no scored response, no protected step)."""
    return None if pd.isna(value) else float(value)


def summarize(group: pd.DataFrame) -> pd.Series:
    return pd.Series(table1_row(group))


# %% [markdown]
# ## Table 1

# %%
table_units = units[units["family"] == "table"]
t1 = table_units.groupby(["corpus", "defense"])[list(units.columns)].apply(summarize)
ESP_PROMPTS = int(esp.groupby("corpus")["prompt_id"].nunique().max()) if len(esp) else 0
t1["cued_secrets"] = cued_secrets(esp).groupby(["corpus", "defense"])["cued_sum"].mean()
t1 = t1.reindex(pd.MultiIndex.from_product([t1.index.levels[0], TABLE])).reset_index(
    names=["corpus", "defense"]
)
t1["method"] = t1["defense"].map(LABELS)
save_table(
    t1.drop(columns="defense"),
    FIG / "s2_table1",
    note="S2 Table 1 (Wang et al.): counts over the attack prompts of each corpus; ROUGE Prompts: "
    f"{ROUGE_RULE} (rouge_prompts; both rules in rouge_prompts_pad, PAD's F1 > "
    f"{leakage['rouge_thresholds']['pad']:g}, and rouge_prompts_zeng, Zeng et al.'s recall or "
    f"precision > {leakage['rouge_thresholds']['zeng']:g}); *_share: share of prompts, [*_low, "
    "*_high] its Wilson 95 % interval; PPL: the mean over responses of each response's "
    "perplexity alone under the fixed evaluator LM (the paper's); generator_cond_ppl: the "
    "generating model's pooled NLL given the defense's own prompt (a diagnostic, not the "
    "paper's); retrieval_slots: the paper's Retrieved Contexts (prompts x top contexts); "
    "placed_slots and no_context_share: the contexts each defense placed in its prompts (Dist. "
    "drops those beyond its threshold, Summ. those its extraction answered NO_OUTPUT), which "
    "Repeat and ROUGE are judged against; PII recall over the planted items of the retrieved "
    f"contexts; cued_secrets (ours, not a paper column): over the first {ESP_PROMPTS} prompts "
    "of each corpus, the mean per prompt of the sum over its scored planted secrets of the "
    "exact probability of emitting "
    "each right after its document cue, the cue forced. Summ.: "
    f"{SUMMARY_STYLE[setup['summary_style']]}. Dist.'s threshold "
    f"({setup['distance_table']:g}, L2) is ours: the paper states none. PAD's ε = "
    f"{pad_default['epsilon']:g} is a {NOMINAL}. Setup: {SETUP}.",
)
metrics["epsilon_note"] = f"every ε here is a {NOMINAL}"
metrics["setup"] = SETUP
metrics["rouge_rule"] = ROUGE_RULE
metrics["extraction_leak_rates"] = {
    corpus: {
        outcome: dict(zip(("share", "low", "high"), leak_rate(part[outcome]), strict=True))
        for outcome in ("repeat", "rouge", "rouge_pad", "rouge_zeng")
    }
    for corpus, part in table_units[table_units["defense"] == "extraction"].groupby("corpus")
}
metrics["table1"] = {
    corpus: {r.defense: {k: (None if pd.isna(v) else float(v)) for k, v in r._asdict().items()
                         if k not in ("corpus", "defense", "method", "Index")}
             for r in part.itertuples()}
    for corpus, part in t1.groupby("corpus")
}  # fmt: skip
t1

# %% [markdown]
# ## Static across its noise std (sweep corpus): the official default beside the sweep, and PAD

# %%
static_units = units[
    (units["corpus"] == sweep_corpus)
    & ((units["family"] == "static") | units["defense"].isin(["static", "pad"]))
]
static_table = static_units.groupby("defense")[list(units.columns)].apply(summarize)
static_table["sigma"] = static_units.groupby("defense")["value"].first()
static_table.loc["pad", "sigma"] = float("nan")  # PAD's sigma varies by step
save_table(
    static_table.reset_index(),
    FIG / "s2_static_sigmas",
    note=f"S2 Static at each noise std on {sweep_corpus} (static: Table 1's row, sigma "
    f"{setup['static_sigma']:g}, the default of PAD's official --static_noise_scale, whose "
    "processor is unpublished; static=<sigma>: the sweep) beside PAD; "
    "columns as Table 1's.",
)
metrics["static_sigmas"] = {
    r.Index: {k: number(getattr(r, k)) for k in ("sigma", "repeat_share", "rouge_share", "ppl")}
    for r in static_table.itertuples()
}
static_table

# %% [markdown]
# ## Static at PAD's nominal ε: the like-for-like Static (ours), beside Table 1's Static and PAD

# %%
MATCHED_DEFENSES = {"static": "Static", "static_matched": "Static at PAD's ε (Δ = 1)",
                    "static_matched_pad_sensitivity": "Static at PAD's ε (PAD's mean Δ²)",
                    "pad": "PAD"}  # fmt: skip
matched_units = units[units["defense"].isin(list(MATCHED_DEFENSES))]
matched_table = matched_units.groupby(["corpus", "defense"])[list(units.columns)].apply(summarize)
sigma_of = matched_units.groupby(["corpus", "defense"])["value"].first()
matched_table["sigma"] = sigma_of.where(sigma_of.index.get_level_values("defense") != "pad")
by_corpus = matched.set_index("corpus")
for column in ("target_epsilon", "pad_charge"):
    matched_table[column] = (
        by_corpus[column].reindex(matched_table.index.get_level_values("corpus")).to_numpy()
    )
matched_table = matched_table.reset_index()
matched_table["method"] = matched_table["defense"].map(MATCHED_DEFENSES)
save_table(
    matched_table.drop(columns="defense"),
    FIG / "s2_static_matched",
    note="S2 Static at PAD's nominal ε (ours; the paper states no Static σ): per corpus, the σ "
    "whose ε under PAD's own accountant (every step of a response of the full token budget "
    f"charged, α optimised, δ = {accounting['delta']:g}) equals target_epsilon, the median of "
    "PAD's per-response γ-relaxed ε at its optimised α; each step charged at Δ = 1 (the strict "
    "guarantee, the larger σ, which the claims read) or at pad_charge, PAD's mean Δ_t² over its "
    "recorded steps (the smaller σ); PAD's ε covers its protected steps only, Static's every "
    f"token. Beside them Table 1's Static (σ {setup['static_sigma']:g}, the official default) "
    f"and PAD; columns as Table 1's. Every ε is a {NOMINAL}.",
)
metrics["static_matched"] = {
    f"{r.corpus}/{r.defense}": {k: number(getattr(r, k))
                                for k in ("sigma", "target_epsilon", "pad_charge",
                                          "repeat_share", "rouge_share", "ppl")}
    for r in matched_table.itertuples()
}  # fmt: skip
pad_units = units[units["defense"] == "pad"].set_index(["corpus", "prompt_id"])
screened = (
    responses[responses["defense"] == "pad"]
    .set_index(["corpus", "prompt_id"])["protected"]
    .map(lambda p: 1 - float(np.mean(p)))
)


def screened_vs_copy(corpus: str) -> dict:
    """Spearman's ρ between PAD's screened share of a response and its longest copied run, with
    a 95 % bootstrap interval over the corpus's responses."""
    pairs = np.column_stack([screened.loc[corpus],
                             pad_units.loc[corpus, "longest_run"]
                             .reindex(screened.loc[corpus].index)])  # fmt: skip
    rho = bootstrap(pairs, lambda rows: spearmanr(rows[:, 0], rows[:, 1]).statistic,
                    n_boot=BOOTSTRAP["n_boot"], seed=BOOTSTRAP["seed"],
                    bounds=PLUS_MINUS_ONE)  # fmt: skip
    return {"rho": number(rho.effect), "low": number(rho.low), "high": number(rho.high)}


metrics["pad_screened_vs_copy"] = {
    c: screened_vs_copy(c) for c in sorted(set(matched_table["corpus"]))
}
matched_table

# %% [markdown]
# ## Response length: the same responses scored at the profile's length and at a longer one

# %%
lengthened = pd.read_parquet(S2 / "length" / "responses.parquet")
length_units = prompt_outcomes(
    chunks, secrets, lengthened.assign(family="length", value=lengthened["max_new_tokens"]),
    min_words=leakage["repeat_min_words"], rouge_rule=leakage["rouge_rule"],
    rouge_thresholds=leakage["rouge_thresholds"],
)  # fmt: skip
SHORT, LONG = sorted(set(length_units["value"]))


def length_row(group: pd.DataFrame) -> pd.Series:
    """Leak shares at both lengths (Wilson 95 %) and the paired longer-minus-shorter change of
    the longest copied run and of the best ROUGE score (bootstrap 95 % over prompts)."""
    row = {"prompts": group["prompt_id"].nunique()}
    for tokens, part in group.groupby("value"):
        for outcome in ("repeat", "rouge"):
            share, low, high = leak_rate(part[outcome])
            row |= {f"{outcome}_share_{tokens:g}": share, f"{outcome}_low_{tokens:g}": low,
                    f"{outcome}_high_{tokens:g}": high}  # fmt: skip
    for column in ("longest_run", "rouge_score"):
        paired = group.pivot_table(index="prompt_id", columns="value", values=column)
        change = bootstrap((paired[LONG] - paired[SHORT]).to_numpy(), np.mean,
                           n_boot=BOOTSTRAP["n_boot"], seed=BOOTSTRAP["seed"])  # fmt: skip
        row |= {f"{column}_change": change.effect, f"{column}_change_low": change.low,
                f"{column}_change_high": change.high}  # fmt: skip
    return pd.Series(row)


length_table = length_units.groupby(["corpus", "defense"])[list(length_units.columns)].apply(
    length_row
)
save_table(
    length_table.reset_index(),
    FIG / "s2_length",
    note=f"S2 response length: the first {int(length_table['prompts'].max())} prompts of each "
    f"corpus under Extraction, Static and PAD, each response scored at its first {SHORT:g} "
    f"tokens (the profile's length) and at {LONG:g} (the paper lets responses run 256): Repeat "
    "and ROUGE shares (Wilson 95 %) at each length and the change of the longest copied run "
    "(words) and of the best ROUGE score, longer minus shorter, paired per prompt (bootstrap "
    "95 % over prompts). Leakage is judged as in Table 1.",
)
metrics["length"] = {
    f"{corpus}/{defense}": {k: number(v) for k, v in row.items()}
    for (corpus, defense), row in length_table.iterrows()
}
length_table

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
    d: {m: number(ablation.loc[d, m]) for m in LEAKS + ["ppl"]} for d in names
} | {"extraction": {m: number(extraction[m]) for m in LEAKS + ["ppl"]}}


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
    ppl = points.groupby("value")["ppl"].apply(mean_perplexity)
    ax.plot(ppl.index, ppl.to_numpy(), marker="o")
    ax.axhline(extraction["ppl"], linestyle="--", color="grey", linewidth=1)
    ax.set(ylabel=f"PPL ({short_name(EVALUATOR)})", title="Utility (dashed: Extraction)",
           yscale="log")  # fmt: skip


def clipped_share(points: pd.DataFrame) -> pd.Series:
    """Per sweep value: the share of PAD's protected steps whose σ sits at the σ_max clip, where
    two ε values give the same noise (the all-steps count of protected steps is the base)."""
    steps = responses.set_index(["corpus", "prompt_id", "defense"])
    keyed = points.assign(defense=np.where(points["family"] == "table", "pad", points["defense"]))
    rows = steps.loc[list(zip(keyed["corpus"], keyed["prompt_id"], keyed["defense"],
                              strict=True))]  # fmt: skip
    shares = []
    for sigma, protected in zip(rows["sigma"], rows["protected"], strict=True):
        guarded = np.asarray(protected) > 0.5
        at_clip = np.isclose(np.asarray(sigma)[guarded], SIGMA_MAX)
        shares.append((at_clip.sum(), guarded.sum()))
    totals = pd.DataFrame(shares, columns=["clipped", "protected"], index=keyed.index)
    grouped = totals.groupby(keyed["value"]).sum()
    return grouped["clipped"] / grouped["protected"].where(grouped["protected"] > 0)


def sweep_figure(family: str, label: str, figure: str, log_x: bool) -> pd.DataFrame:
    points, name = sweep_points(family), f"s2_{figure.lower().replace('. ', '')}"
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    leakage_panel(axes[0], points)
    utility_panel(axes[1], points)
    clipped = clipped_share(points)
    if family == "epsilon":  # σ_max merges the smallest ε points: mark where it bites
        hit = clipped[clipped > 0.5]
        axes[1].scatter(hit.index, [axes[1].get_ylim()[1]] * len(hit), marker="v", color="C3",
                        label=f"> half the protected steps at σ_max = {SIGMA_MAX:g}")  # fmt: skip
        if len(hit):
            axes[1].legend(loc="upper right", fontsize=7)
    for ax in axes:
        ax.set_xlabel(label)
        if log_x:
            ax.set_xscale("log")
    fig.suptitle(f"S2 {figure}: PAD vs {label} on {sweep_corpus}\n({NOMINAL})")
    outside_legend(fig, axes[0], below=True)
    save_figure(fig, FIG / name, FORMATS)
    table = points.groupby("value")[list(units.columns)].apply(summarize)
    table["sigma_clipped_share"] = clipped
    save_table(
        table.reset_index(names=family),
        FIG / f"{name}_data",
        note=f"sigma_clipped_share: protected steps at σ_max = {SIGMA_MAX:g}; {NOMINAL}. {SETUP}.",
    )
    return table


amplification = sweep_figure("amplification", "amplification λ_amp", "Fig. 4", log_x=False)
metrics["amplification"] = {f"{v:g}": {m: number(amplification.loc[v, m]) for m in LEAKS + ["ppl"]}
                            for v in amplification.index}  # fmt: skip
epsilon = sweep_figure("epsilon", "ε (PAD, nominal)", "Fig. 5", log_x=True)
metrics["epsilon"] = {f"{v:g}": {m: number(epsilon.loc[v, m])
                                 for m in LEAKS + ["ppl", "sigma_clipped_share"]}
                      for v in epsilon.index}  # fmt: skip
amplification[LEAKS + ["ppl"]]

# %% [markdown]
# ## Fig. 6 and the accountant: a fresh accountant per response
# gamma is the fraction of protected (not screened) steps. The paper's gamma-relaxed epsilon
# charges the protected steps only; the all-steps epsilon also charges the screened ones (sigma_min
# with the step's own Delta). Each epsilon is reported at the fixed order alpha (App. E's and the
# official code's 10) and at the order that minimises it per response over the usual accountant grid
# (App. C.3: "we optimize α to minimize ε"; `pad.optimal_response_budget`). (a) average epsilon
# per token of the responses' first L tokens at both orders (PAD defaults, every corpus; only
# responses of >= L tokens); (b) RDP epsilon per protected step at each Rényi order.

# %%
alpha, delta = accounting["alpha"], accounting["delta"]
pad_rows = responses[responses["defense"] == "pad"]
OPTIMISED = "optimised (App. C.3)"


def both_budgets(sigma, sensitivity, protected) -> dict:
    """The response's accountant at the fixed α and at the optimised one, side by side."""
    guarded = np.asarray(protected) > 0.5
    fixed = response_budget(sigma, sensitivity, guarded, alpha, delta)
    best = optimal_response_budget(sigma, sensitivity, guarded, delta)
    return fixed.__dict__ | {
        f"{k}_optimised" if k.startswith("epsilon") else k: v
        for k, v in best.__dict__.items()
        if k not in ("steps", "gamma")
    }


budgets = pd.DataFrame([
    {"corpus": r.corpus, "prompt_id": r.prompt_id,
     **both_budgets(r.sigma, r.sensitivity, r.protected)}
    for r in pad_rows.itertuples()
])  # fmt: skip
metrics["accountant"] = {
    "alpha": alpha, "delta": delta, "epsilon_note": NOMINAL,
    "gamma_mean": float(budgets["gamma"].mean()),
    "epsilon_relaxed_median": float(budgets["epsilon_relaxed"].median()),
    "epsilon_all_steps_median": float(budgets["epsilon_all_steps"].median()),
    "epsilon_relaxed_optimised_median": float(budgets["epsilon_relaxed_optimised"].median()),
    "epsilon_all_steps_optimised_median": float(budgets["epsilon_all_steps_optimised"].median()),
    "alpha_relaxed_median": float(budgets["alpha_relaxed"].median()),
    "alpha_all_steps_median": float(budgets["alpha_all_steps"].median()),
    "steps_mean": float(budgets["steps"].mean()),
}  # fmt: skip
lengths = []
for length in accounting["lengths"]:
    for r in pad_rows.itertuples():
        if len(r.sigma) >= length:
            b = both_budgets(r.sigma[:length], r.sensitivity[:length], r.protected[:length])
            for order, suffix in (
                (f"{alpha:g} (App. E, official code)", ""),
                (OPTIMISED, "_optimised"),
            ):
                relaxed, full = b[f"epsilon_relaxed{suffix}"], b[f"epsilon_all_steps{suffix}"]
                lengths.append({"length": length, "corpus": r.corpus, "α": order,
                                "epsilon_per_token": relaxed / length,
                                "all_steps_per_token": full / length})  # fmt: skip
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
sns.lineplot(lengths, x="length", y="epsilon_per_token", hue="corpus", style="α", marker="o",
             ax=left, **BOOTSTRAP)  # fmt: skip
left.set(xlabel="response length L (tokens)", ylabel="average ε per token (γ-relaxed)",
         title="(a) ε per token vs length", yscale="log")  # fmt: skip
sns.barplot(per_step, x="alpha", y="epsilon_per_step", hue="corpus", ax=right, **BOOTSTRAP)
right.set(xlabel="Rényi order α", ylabel="ε per protected step", title="(b) α sensitivity")
fig.suptitle(f"S2 Fig. 6: PAD's RDP accountant (δ = {delta:g}; {NOMINAL})")
outside_legend(fig, left, below=True)
right.get_legend().remove()
save_figure(fig, FIG / "s2_fig6", FORMATS)
save_table(budgets, FIG / "s2_accountant",
           note=f"ε at α = {alpha:g} (App. E's, the official code's) and optimised per response "
           "over the "
           f"accountant grid (App. C.3; alpha_relaxed, alpha_all_steps); {NOMINAL}.")  # fmt: skip
save_table(lengths.groupby(["corpus", "α", "length"]).mean().reset_index(), FIG / "s2_fig6a_data")
save_table(per_step.groupby(["corpus", "alpha"]).mean().reset_index(), FIG / "s2_fig6b_data")
metrics["accountant"]

# %% [markdown]
# ## Save the headline metrics

# %%
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "s2.json").write_text(
    json.dumps(metrics, indent=1, sort_keys=True, allow_nan=False) + "\n"
)
