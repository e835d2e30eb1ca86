# %% [markdown]
# # Render S0 — context influence and CID (Flemings et al.)
# Reads only the cached artifacts of `s0_generate`, `s0_finetune`, `s0_ngram` and `s0_text`;
# no model runs here. τ̂ is Eq. 5: the per-response influence (Def. 3.2, summed over response
# tokens) averaged over (context, query) pairs. Repeat/Rouge Prompts are counts out of the
# number of prompts (the paper's N = 1000; ours is smaller, so shares are given as well).
# Faithfulness in the embedded profile is a PROXY (MiniLM sentence support), not FactKB.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from privleak import paths
from privleak.errors import require
from privleak.figures import save_figure, save_table

S0 = paths.INTERIM / "s0"
FIG = paths.FIGURES / "s0"
FORMATS = tuple(figures["formats"])
generations = pd.read_parquet(S0 / "generate" / "generations.parquet")
finetuned = pd.read_parquet(S0 / "finetune" / "generations.parquet")
knowledge = pd.read_parquet(S0 / "finetune" / "knowledge.parquet")
losses = pd.read_parquet(S0 / "finetune" / "losses.parquet")
ngram = pd.read_parquet(S0 / "ngram" / "ngram.parquet")
unigram = pd.read_parquet(S0 / "ngram" / "unigram.parquet")
bounded = pd.read_parquet(S0 / "ngram" / "bounded.parquet")
text = pd.read_parquet(S0 / "text" / "text_metrics.parquet")
for frame in (generations, finetuned, ngram, bounded, text):
    if len(frame):
        tau = frame["tau"] if "tau" in frame else frame["tau_whole"]
        require(bool(np.isfinite(tau).all()), "render_s0: an S0 artifact holds a non-finite τ")
metrics: dict = {}
main_text = text[(text["source"] == "generate") & (text["experiment"] == "main")]
lms = list(dict.fromkeys(generations["model"]))  # s0.lms order


def metric_key(key: str, model: str) -> str:
    # One LM keeps the plain key; with several (paper profile) every LM gets its own.
    return key if len(lms) == 1 else f"{key}/{model}"


def short(model: str) -> str:
    """Legend label: the last component of a hub id or folder."""
    return model.rstrip("/").split("/")[-1]


# %% [markdown]
# ## T1 — uni-gram influence of one context on one next token

# %%
per_row = 12
tokens = unigram["token"].tolist()
values = unigram["tau"].to_numpy()
rows = int(np.ceil(len(tokens) / per_row))
grid = np.full((rows, per_row), np.nan)
grid.flat[: len(values)] = values
fig, ax = plt.subplots(figsize=(12, 0.45 * rows + 1.2))
image = ax.imshow(grid, cmap="Reds", aspect="auto", vmin=0)
for k, token in enumerate(tokens):
    label = token.replace("\n", "\\n").strip() or "␣"
    ax.text(k % per_row, k // per_row, label[:10], ha="center", va="center", fontsize=7)
ax.set_xticks([])
ax.set_yticks([])
fig.colorbar(image, ax=ax, label="uni-gram influence τ_{i,1}")
ax.set_title(
    f"Generation: …{unigram['generated'].iloc[0][-60:]!r} → next token "
    f"{unigram['next_token'].iloc[0]!r} (whole-context τ = "
    f"{unigram['tau_whole_context'].iloc[0]:.2f})",
    fontsize=9,
)
save_figure(fig, FIG / "s0_table1", FORMATS)
top = unigram.sort_values(["tau", "i"], ascending=[False, True]).head(10)
save_table(top[["i", "token", "tau", "next_token"]].reset_index(drop=True), FIG / "s0_table1")
metrics["t1_top_token"] = str(top["token"].iloc[0])
metrics["t1_next_token"] = str(unigram["next_token"].iloc[0])

# %% [markdown]
# ## T2 — τ̂_|D|, Repeat and Rouge Prompts per model × λ × dataset


# %%
def leakage_table(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    grouped = frame.groupby(keys)
    table = grouped.agg(
        tau_hat=("tau", "mean"),
        repeat_prompts=("repeat_prompt", "sum"),
        rouge_prompts=("rouge_prompt", "sum"),
        prompts=("tau", "size"),
        repeat_share=("repeat_prompt", "mean"),
        rouge_share=("rouge_prompt", "mean"),
        longest_copied_run=("longest_copied_run", "mean"),
    )
    return table.reset_index()


table2 = leakage_table(main_text, ["model", "corpus", "lam"])
save_table(table2, FIG / "s0_table2")
table2

# %% [markdown]
# ## Miniature of §4.2: base vs fine-tuned SmolLM2 on seen and unseen PubMedQA-like contexts

# %%
ft_text = text[text["source"] == "finetune"]
if len(ft_text):
    table2_known = leakage_table(ft_text, ["model", "seen", "lam"])
    save_table(table2_known, FIG / "s0_table2_known")
    known = knowledge.groupby(["model", "seen"])["mean_logprob"].mean().reset_index()
    save_table(known, FIG / "s0_table2_known_loglik")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, column, label in zip(
        axes,
        ["tau_hat", "repeat_share", "rouge_share"],
        ["τ̂_|D|", "Repeat Prompts (share)", "Rouge Prompts (share)"],
        strict=True,
    ):
        for (model, seen), part in table2_known.groupby(["model", "seen"]):
            style = "-" if model == "finetuned" else "--"
            name = f"{model}, {'seen' if seen else 'unseen'} docs"
            ax.plot(part["lam"], part[column], style, marker="o", label=name)
        ax.set_xlabel("λ")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle("Fine-tuned on the seen half: influence vs regurgitation")
    save_figure(fig, FIG / "s0_known_context", FORMATS)
    pivot = table2_known.set_index(["model", "seen", "lam"])
    for lam in sorted(table2_known["lam"].unique()):
        for column in ["tau_hat", "repeat_share", "rouge_share"]:
            tuned, base = (
                pivot.loc[("finetuned", True, lam), column],
                pivot.loc[("base", True, lam), column],
            )
            metrics[f"known_seen_{column}_finetuned_minus_base_lam{lam:g}"] = float(tuned - base)
    metrics["known_loglik_gain_seen"] = float(
        known.set_index(["model", "seen"]).loc[("finetuned", True), "mean_logprob"]
        - known.set_index(["model", "seen"]).loc[("base", True), "mean_logprob"]
    )
    metrics["finetune_final_loss"] = float(losses["loss"].iloc[-1])
    table2_known

# %% [markdown]
# ## T3 — τ̂, ROUGE-L, BERTScore-style F1, faithfulness (proxy)

# %%
table3 = (
    main_text.groupby(["model", "corpus", "lam"])
    .agg(
        tau_hat=("tau", "mean"),
        rouge_l=("rouge_l_f1", "mean"),
        bertscore_style=("bertscore_f1", "mean"),
        faithfulness=("faithfulness", "mean"),
        faithfulness_kind=("faithfulness_kind", "first"),
        content_word_support=("content_word_support", "mean"),
    )
    .reset_index()
)
for column in ["rouge_l", "bertscore_style", "faithfulness", "content_word_support"]:
    table3[column] = 100 * table3[column]  # the paper reports these in percent
save_table(table3, FIG / "s0_table3")
for row in table3.itertuples():
    key = f"{row.corpus}_lam{row.lam:g}"
    metrics[metric_key(f"tau_hat_{key}", row.model)] = float(row.tau_hat)
    metrics[metric_key(f"rouge_l_{key}", row.model)] = float(row.rouge_l)
for row in table2.itertuples():
    key = f"{row.corpus}_lam{row.lam:g}"
    metrics[metric_key(f"repeat_share_{key}", row.model)] = float(row.repeat_share)
    metrics[metric_key(f"rouge_share_{key}", row.model)] = float(row.rouge_share)
table3

# %% [markdown]
# ## T4 — qualitative generations per model and λ (first CNN/DM-like article)

# %%
main = generations[generations["experiment"] == "main"]
first_corpus = "cnn_dm" if (main["corpus"] == "cnn_dm").any() else main["corpus"].iloc[0]
example = main[main["corpus"] == first_corpus]["example"].iloc[0]
rows4 = main[(main["corpus"] == first_corpus) & (main["example"] == example)]
table4 = pd.DataFrame(
    [
        row
        for model, part in rows4.sort_values("lam").groupby("model", sort=False)
        for row in [
            # Each LM's own tokenizer cut the context, so each block shows its context.
            {"model": model, "setting": "context (first 600 characters)",
             "text": part["context"].iloc[0][:600]},
            *[{"model": model, "setting": f"λ = {r.lam:g} (τ = {r.tau:.1f})", "text": r.response}
              for r in part.itertuples()],
        ]
    ]
)  # fmt: skip
table4["text"] = table4["text"].str.replace("\n", " ", regex=False)
save_table(table4, FIG / "s0_table4")
table4

# %% [markdown]
# ## F2b — τ vs context size; F2c — per-token τ by response position

# %%
sizes = generations[generations["experiment"] == "context_size"]
by_size = (
    sizes.groupby(["model", "context_limit"], sort=False)["tau"].agg(["mean", "sem"]).reset_index()
)
fig, ax = plt.subplots(figsize=(5, 3.4))
for model, line in by_size.groupby("model", sort=False):
    ax.errorbar(
        line["context_limit"], line["mean"], yerr=line["sem"], marker="o", label=short(model)
    )
ax.set_xscale("log", base=2)
ax.set_xlabel("context size |D| (first |D| tokens)")
ax.set_ylabel("τ̂_|D| (λ = 1)")
ax.set_title("Context size")
if len(lms) > 1:
    ax.legend(fontsize=7)
save_figure(fig, FIG / "s0_fig2b", FORMATS)
save_table(by_size, FIG / "s0_fig2b")
for model, line in by_size.groupby("model", sort=False):
    metrics[metric_key("fig2b_tau_by_size", model)] = {
        str(int(k)): float(v) for k, v in zip(line["context_limit"], line["mean"], strict=True)
    }

per_token = main.explode("tau_tokens")[["model", "corpus", "lam", "example", "tau_tokens"]]
per_token["position"] = per_token.groupby(["model", "corpus", "lam", "example"]).cumcount()
per_token["tau_tokens"] = per_token["tau_tokens"].astype(float)
by_position = (
    per_token.groupby(["model", "corpus", "lam", "position"], sort=False)["tau_tokens"]
    .mean()
    .reset_index()
)
corpora = sorted(by_position["corpus"].unique())
fig, axes = plt.subplots(
    len(lms), len(corpora), figsize=(11, 3.4 * len(lms)), squeeze=False, sharey=True
)
for (model, corpus), part in by_position.groupby(["model", "corpus"]):
    ax = axes[lms.index(model)][corpora.index(corpus)]
    for lam, line in part.groupby("lam"):
        ax.plot(line["position"], line["tau_tokens"], label=f"λ = {lam:g}")
    ax.axvline(10, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("response position t")
    ax.set_ylabel("mean τ_|D| of token t")
    ax.set_title(corpus if len(lms) == 1 else f"{short(model)}: {corpus}")
axes[0][0].legend()
save_figure(fig, FIG / "s0_fig2c", FORMATS)
save_table(by_position, FIG / "s0_fig2c")
for model, part in per_token.groupby("model", sort=False):
    first10 = part[part["position"] < 10]["tau_tokens"].mean()
    later = part[part["position"] >= 10]["tau_tokens"].mean()
    metrics[metric_key("fig2c_mean_token_tau_first10", model)] = float(first10)
    metrics[metric_key("fig2c_mean_token_tau_after10", model)] = float(later)

# %% [markdown]
# ## F3 — influence of the i-th token n-gram

# %%
by_gram = ngram.groupby(["n", "i", "start"])["tau"].agg(["mean", "sem"]).reset_index()
ns = sorted(by_gram["n"].unique(), reverse=True)
fig, axes = plt.subplots(1, len(ns), figsize=(3.2 * len(ns), 3.2), squeeze=False)
for ax, n in zip(axes[0], ns, strict=True):
    part = by_gram[by_gram["n"] == n]
    ax.plot(part["i"], part["mean"], marker="o" if len(part) < 20 else None)
    ax.set_xlabel("i (n-gram index)")
    ax.set_ylabel("τ̂_{i,n}")
    ax.set_title(f"n = {n}")
fig.suptitle(f"Token n-gram influence, λ = 1, {ngram['example'].nunique()} contexts")
save_figure(fig, FIG / "s0_fig3", FORMATS)
save_table(by_gram, FIG / "s0_fig3")
peaks = by_gram.groupby("n")["mean"].max()
metrics["fig3_peak_tau_by_n"] = {str(int(n)): float(v) for n, v in peaks.items()}
metrics["fig3_argmax_i_by_n"] = {
    str(int(n)): int(part.loc[part["mean"].idxmax(), "i"]) for n, part in by_gram.groupby("n")
}

# %% [markdown]
# ## F2a — τ vs model size; F4 — largest-n n-gram influence across sizes (tiny family)

# %%
family = pd.read_parquet(S0 / "family" / "responses.parquet")
family_grams = pd.read_parquet(S0 / "family" / "ngram.parquet")
by_model = family.groupby(["parameters", "size"])["tau"].agg(["mean", "sem"]).reset_index()
fig, ax = plt.subplots(figsize=(5, 3.4))
ax.errorbar(by_model["parameters"], by_model["mean"], yerr=by_model["sem"], marker="o")
for row in by_model.itertuples():
    ax.annotate(
        row.size, (row.parameters, row.mean), fontsize=7, xytext=(3, 3), textcoords="offset points"
    )
ax.set_xscale("log")
ax.set_xlabel("parameters (tiny in-pipeline Llama family)")
ax.set_ylabel("τ̂_|D| (λ = 1)")
ax.set_title(f"Model size, {family['example'].nunique()} contexts")
save_figure(fig, FIG / "s0_fig2a", FORMATS)
save_table(by_model, FIG / "s0_fig2a")
metrics["fig2a_tau_by_parameters"] = {
    str(int(p)): float(v) for p, v in zip(by_model["parameters"], by_model["mean"], strict=True)
}

by_size_gram = family_grams.groupby(["parameters", "size", "i"])["tau"].mean().reset_index()
fig, ax = plt.subplots(figsize=(5, 3.4))
for (parameters, size), part in by_size_gram.groupby(["parameters", "size"]):
    ax.plot(part["i"], part["tau"], marker="o", label=f"{size} ({parameters:,} params)")
ax.set_xlabel(f"i (token {family_grams['n'].iloc[0]}-gram index)")
ax.set_ylabel("τ̂_{i,n}")
ax.legend(fontsize=7)
ax.set_title("Largest-n influence across model sizes")
save_figure(fig, FIG / "s0_fig4", FORMATS)
save_table(by_size_gram, FIG / "s0_fig4")

# %% [markdown]
# ## F7 / F8 — τ, ROUGE-L and faithfulness vs T (λ = 1) and vs λ (default T)

# %%
sweep_text = text[(text["source"] == "generate") & (text["experiment"] == "sweep")]
main_temperature = float(main["temperature"].iloc[0])
for name, fixed, axis in [
    ("s0_fig7", ("lam", 1.0), "temperature"),
    ("s0_fig8", ("temperature", main_temperature), "lam"),
]:
    part = sweep_text[np.isclose(sweep_text[fixed[0]], fixed[1])]
    curve = part.groupby(["model", axis])[["tau", "rouge_l_f1", "faithfulness"]].mean()
    curve = curve.reset_index()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    for ax, column, label in zip(
        axes,
        ["tau", "rouge_l_f1", "faithfulness"],
        ["τ̂_|D|", "ROUGE-L F1", f"faithfulness ({part['faithfulness_kind'].iloc[0]})"],
        strict=True,
    ):
        for model, line in curve.groupby("model", sort=False):
            ax.plot(line[axis], line[column], marker="o", label=short(model))
        ax.set_xlabel("T" if axis == "temperature" else "λ")
        ax.set_ylabel(label)
    if len(lms) > 1:
        axes[0].legend(fontsize=7)
    fig.suptitle(f"{fixed[0]} = {fixed[1]:g}, {part['example'].nunique()} contexts")
    save_figure(fig, FIG / name, FORMATS)
    save_table(curve, FIG / name)
    for model, line in curve.groupby("model", sort=False):
        metrics[metric_key(f"{name}_tau_by_{axis}", model)] = {
            f"{k:g}": float(v) for k, v in zip(line[axis], line["tau"], strict=True)
        }

# %% [markdown]
# ## Bounded CID — maximum observed influence vs ε

# %%
worst = bounded.groupby("eps")[
    ["max_tau_whole_token", "max_tau_ngram_token", "mean_lam_used"]
].max()
worst = worst.reset_index()
fig, ax = plt.subplots(figsize=(5, 3.6))
ax.plot(
    worst["eps"],
    worst["max_tau_ngram_token"],
    marker="o",
    label=f"max τ_(i,n), n = {bounded['n'].iloc[0]}",
)
ax.plot(worst["eps"], worst["max_tau_whole_token"], marker="s", label="max τ_|D|")
grid_eps = np.array(sorted(worst["eps"]))
ax.plot(grid_eps, grid_eps, "k--", lw=0.8, label="ε")
ax.plot(grid_eps, grid_eps / 2, "k:", lw=0.8, label="ε/2")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("ε")
ax.set_ylabel("max observed per-token τ")
ax.legend(fontsize=7)
ax.set_title("Bounded CID (Alg. 1)")
save_figure(fig, FIG / "s0_bounded", FORMATS)
save_table(worst, FIG / "s0_bounded")
metrics["bounded_all_within_eps"] = bool(
    (bounded["max_tau_ngram_token"] <= bounded["eps"] + 1e-5).all()
    and (bounded["max_tau_whole_token"] <= bounded["eps"] / 2 + 1e-5).all()
)

# %% [markdown]
# ## Theorem 3.1 — τ against λ·|ΔPMI| (whole context: PMI without the context is 0)
# With T ≠ 1 and different normalisers the relation is a proportionality, not an equality, so we
# report the rank correlation per λ and the median ratio τ / (λ·|pmi|).

# %%
tokens = main[main["lam"] > 0].explode(["tau_tokens", "pmi"])[["model", "lam", "tau_tokens", "pmi"]]
tokens = tokens.astype({"lam": float, "tau_tokens": float, "pmi": float})
tokens["bound"] = tokens["lam"] * tokens["pmi"].abs()
check = []
for (model, lam), part in tokens.groupby(["model", "lam"], sort=False):
    rho = spearmanr(part["tau_tokens"], part["bound"]).statistic
    ratio = (part["tau_tokens"] / part["bound"].where(part["bound"] > 1e-6)).median()
    check.append(
        {"model": model, "lam": lam, "spearman": float(rho), "median_ratio": float(ratio),
         "tokens": len(part)}
    )  # fmt: skip
check = pd.DataFrame(check)
fig, ax = plt.subplots(figsize=(4.5, 4))
for lam, part in tokens.groupby("lam"):
    ax.scatter(part["bound"], part["tau_tokens"], s=3, alpha=0.4, label=f"λ = {lam:g}")
top_value = float(max(tokens["bound"].max(), tokens["tau_tokens"].max()))
ax.plot([0, top_value], [0, top_value], "k--", lw=0.8)
ax.set_xlabel("λ·|pmi(y_t; D)| (T = 1)")
ax.set_ylabel("τ_|D|(y_t) under CID")
ax.legend(fontsize=7)
save_figure(fig, FIG / "s0_theorem31", FORMATS)
save_table(check, FIG / "s0_theorem31")
for model, part in check.groupby("model", sort=False):
    metrics[metric_key("theorem31_spearman_by_lam", model)] = {
        f"{r.lam:g}": r.spearman for r in part.itertuples()
    }

# %% [markdown]
# ## Headline numbers

# %%
metrics["prompts_per_corpus"] = int(main_text.groupby(["model", "corpus", "lam"]).size().min())
paths.METRICS.mkdir(exist_ok=True)
(paths.METRICS / "s0.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
metrics
