# %% [markdown]
# # Render S0 — context influence and CID (Flemings et al.)
# Reads only the cached artifacts of `s0_generate`, `s0_finetune`, `s0_ngram` and `s0_text`;
# no model runs here. τ̂ is Eq. 5: the per-response influence (Def. 3.2, summed over response
# tokens) averaged over (context, query) pairs. Repeat/Rouge Prompts are counts out of the
# number of prompts (the paper's N = 1000; ours is smaller, so shares are given as well).
# Faithfulness in the embedded profile is a PROXY (MiniLM sentence support), not FactKB.
# Curves are means over contexts with 95% bootstrap confidence intervals (seaborn, fixed seed:
# the same figure on every run); with a single context there is no interval to draw.
# τ depends on the no-context prompt (the template with the context removed), so every table
# T1-T4 names it: a `no_context_prompt` column in the csv, a note line under the markdown.
# The n-gram figures (F3, F4) name their n-gram layout (disjoint blocks or sliding windows), read
# from the artifacts.

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
template = "chat"

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator
from scipy.stats import spearmanr

from privleak.errors import require
from privleak.figures import (
    BOOTSTRAP,
    check_formats,
    outside_legend,
    save_figure,
    save_table,
    short_name,
    style,
)
from privleak.ngrams import Window
from privleak.pipeline import paths
from privleak.prompts import no_context_prompt

style()
S0 = paths.INTERIM / "s0"
FIG = paths.FIGURES / "s0"
FORMATS = check_formats(figures["formats"])
TAU_HAT = r"$\hat{\tau}_{|D|}$"
TAU_NGRAM = r"$\hat{\tau}_{i,n}$"
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


def lam_label(frame: pd.DataFrame) -> pd.DataFrame:
    """frame with a categorical "λ" column ("0.5", "1", ...) for hue: one colour per λ."""
    return frame.assign(λ=frame["lam"].map(lambda lam: f"{lam:g}"))


def lam_order(frame: pd.DataFrame) -> list[str]:
    return [f"{lam:g}" for lam in sorted(frame["lam"].unique())]


def save_s0_table(table: pd.DataFrame, stem, corpus: str | None = None) -> None:
    """save_table with the no-context prompt behind each row's τ: by the row's `corpus` column,
    else `corpus`; a csv column, and one note line under the markdown table."""
    corpora = table["corpus"] if corpus is None else pd.Series(corpus, index=table.index)
    prompts = {c: no_context_prompt(c, template) for c in dict.fromkeys(corpora)}
    note = f"No-context prompt (template {template}, context removed): " + "; ".join(
        f"{c} `{p!r}`" for c, p in prompts.items()
    )
    save_table(
        table.assign(no_context_prompt=corpora.map(prompts)),
        stem,
        note=note,
        csv_only=["no_context_prompt"],
    )


def layout(frame: pd.DataFrame) -> Window:
    """The one n-gram layout of an n-gram artifact (its window and stride columns)."""
    kinds = frame[["window", "stride"]].drop_duplicates()
    require(len(kinds) == 1, "render_s0: an n-gram artifact mixes window layouts")
    return Window(str(kinds["window"].iloc[0]), int(kinds["stride"].iloc[0]))


# %% [markdown]
# ## T1 — uni-gram influence of one context on one next token

# %%
per_row = 12
tokens = unigram["token"].tolist()
values = unigram["tau"].to_numpy()
rows = int(np.ceil(len(tokens) / per_row))
grid = np.full((rows, per_row), np.nan)
grid.flat[: len(values)] = values
fig, ax = plt.subplots(figsize=(11, 0.45 * rows + 1.2))
image = ax.imshow(grid, cmap="Reds", aspect="auto", vmin=0)
ax.grid(False)
for k, token in enumerate(tokens):
    label = token.replace("\n", "\\n").strip() or "␣"
    dark = values[k] > 0.6 * np.nanmax(values)  # white text stays legible on dark cells
    ax.text(k % per_row, k // per_row, label[:10], ha="center", va="center", fontsize=7,
            color="white" if dark else "black")  # fmt: skip
ax.set_xticks([])
ax.set_yticks([])
fig.colorbar(image, ax=ax, label=r"uni-gram influence $\tau_{i,1}$")
ax.set_title(
    f"Generation: …{unigram['generated'].iloc[0][-60:]!r} → next token "
    f"{unigram['next_token'].iloc[0]!r} (whole-context τ = "
    f"{unigram['tau_whole_context'].iloc[0]:.2f})",
    fontsize=9,
)
save_figure(fig, FIG / "s0_table1", FORMATS)
top = unigram.sort_values(["tau", "i"], ascending=[False, True]).head(10)
save_s0_table(
    top[["i", "token", "tau", "next_token"]].reset_index(drop=True),
    FIG / "s0_table1",
    corpus=str(unigram["corpus"].iloc[0]),
)
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
save_s0_table(table2, FIG / "s0_table2")
table2

# %% [markdown]
# ## Miniature of §4.2: base vs fine-tuned SmolLM2 on seen and unseen PubMedQA-like contexts

# %%
ft_text = text[text["source"] == "finetune"]
if len(ft_text):
    table2_known = leakage_table(ft_text, ["model", "seen", "lam"])
    save_s0_table(table2_known, FIG / "s0_table2_known", corpus=str(ft_text["corpus"].iloc[0]))
    known = knowledge.groupby(["model", "seen"])["mean_logprob"].mean().reset_index()
    save_table(known, FIG / "s0_table2_known_loglik")
    per_prompt = lam_label(ft_text).assign(
        setting=ft_text["model"] + np.where(ft_text["seen"], ", seen docs", ", unseen docs"),
        repeat=ft_text["repeat_prompt"].astype(float),
        rouge=ft_text["rouge_prompt"].astype(float),
    )
    # Four settings at three λ: dodged points with error bars stay apart where bands would not.
    settings = ["finetuned, seen docs", "base, seen docs", "finetuned, unseen docs",
                "base, unseen docs"]  # fmt: skip
    blue, orange = sns.color_palette()[:2]
    fig, axes = plt.subplots(1, 3, figsize=(8.5, 2.8))
    for ax, column, label in zip(
        axes,
        ["tau", "repeat", "rouge"],
        [TAU_HAT, "Repeat Prompts (share)", "Rouge Prompts (share)"],
        strict=True,
    ):
        sns.pointplot(
            data=per_prompt, x="λ", y=column, order=lam_order(ft_text), hue="setting",
            hue_order=settings, palette=[blue, blue, orange, orange], markers=["o", "X", "o", "X"],
            linestyles=["-", "--", "-", "--"], dodge=0.3, capsize=0.1, linewidth=1.2,
            markersize=4, err_kws={"linewidth": 1}, ax=ax, **BOOTSTRAP,
        )  # fmt: skip
        ax.set(xlabel="λ", ylabel=label)
    outside_legend(fig, axes[0], below=True)
    for ax in axes[1:]:
        ax.get_legend().remove()
    fig.suptitle(
        f"Fine-tuned on the seen half: influence vs regurgitation "
        f"({per_prompt.groupby(['model', 'seen', 'lam']).size().min()} prompts per point)"
    )
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
save_s0_table(table3, FIG / "s0_table3")
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
save_s0_table(table4, FIG / "s0_table4", corpus=first_corpus)
table4

# %% [markdown]
# ## F2b — τ vs context size; F2c — per-token τ by response position

# %%
sizes = generations[generations["experiment"] == "context_size"]
by_size = (
    sizes.groupby(["model", "context_limit"], sort=False)["tau"].agg(["mean", "sem"]).reset_index()
)
fig, ax = plt.subplots(figsize=(4.5, 3))
sns.lineplot(
    data=sizes.assign(LM=sizes["model"].map(short_name)), x="context_limit", y="tau", hue="LM",
    marker="o", legend=len(lms) > 1, ax=ax, **BOOTSTRAP,
)  # fmt: skip
ax.set_xscale("log", base=2)
ax.set_xticks(sorted(sizes["context_limit"].unique()))
ax.xaxis.set_major_formatter("{x:g}")
ax.set_xticks([], minor=True)
ax.set_xlabel("context size |D| (first |D| tokens)")
ax.set_ylabel(TAU_HAT + " (λ = 1)")
ax.set_title(f"Context size, {sizes['example'].nunique()} contexts")
if len(lms) > 1:
    outside_legend(fig, ax, title="LM")
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
    len(lms), len(corpora), figsize=(8, 2.8 * len(lms)), squeeze=False, sharey=True
)
for (model, corpus), part in per_token.groupby(["model", "corpus"]):
    ax = axes[lms.index(model)][corpora.index(corpus)]
    sns.lineplot(
        data=lam_label(part), x="position", y="tau_tokens", hue="λ", hue_order=lam_order(part),
        ax=ax, **BOOTSTRAP,
    )  # fmt: skip
    ax.axvline(10, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("response position t")
    ax.set_ylabel(r"mean $\tau_{|D|}$ of token t")
    ax.set_title(
        f"{corpus if len(lms) == 1 else f'{short_name(model)}: {corpus}'}, "
        f"{part['example'].nunique()} contexts"
    )
outside_legend(fig, axes.flat[0], title="λ")
for ax in axes.flat[1:]:
    ax.get_legend().remove()
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
window = layout(ngram)
by_gram = ngram.groupby(["n", "i", "start"])["tau"].agg(["mean", "sem"]).reset_index()
ns = sorted(by_gram["n"].unique(), reverse=True)
fig, axes = plt.subplots(1, len(ns), figsize=(2.8 * len(ns), 2.8), squeeze=False)
for ax, n in zip(axes[0], ns, strict=True):
    part = ngram[ngram["n"] == n]
    grams = part["i"].nunique()
    sns.lineplot(data=part, x="i", y="tau", marker="o" if grams < 20 else None, ax=ax, **BOOTSTRAP)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("")
    ax.set_ylabel(TAU_NGRAM)
    ax.set_title(f"n = {n} ({grams} n-grams)")
fig.supxlabel(f"n-gram i ({window.describe()}: tokens {window.formula()})")
fig.suptitle(f"Token n-gram influence, λ = 1, {ngram['example'].nunique()} contexts")
save_figure(fig, FIG / "s0_fig3", FORMATS)
save_table(by_gram, FIG / "s0_fig3")
peaks = by_gram.groupby("n")["mean"].max()
metrics["fig3_window"] = {"kind": window.kind, "stride": window.stride}
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
fig, ax = plt.subplots(figsize=(4.5, 3))
sns.lineplot(data=family, x="parameters", y="tau", marker="o", ax=ax, **BOOTSTRAP)
ax.set_xscale("log")
# One tick per family member, named: log-axis minor labels collide at these sizes.
ax.set_xticks(
    by_model["parameters"], [f"{r.size}\n{r.parameters:,}" for r in by_model.itertuples()]
)
ax.set_xticks([], minor=True)
ax.set_xlabel("parameters (tiny in-pipeline Llama family)")
ax.set_ylabel(TAU_HAT + " (λ = 1)")
ax.set_title(f"Model size, {family['example'].nunique()} contexts")
save_figure(fig, FIG / "s0_fig2a", FORMATS)
save_table(by_model, FIG / "s0_fig2a")
metrics["fig2a_tau_by_parameters"] = {
    str(int(p)): float(v) for p, v in zip(by_model["parameters"], by_model["mean"], strict=True)
}

by_size_gram = family_grams.groupby(["parameters", "size", "i"])["tau"].mean().reset_index()
family_grams["model"] = [
    f"{row.size} ({row.parameters:,} params)" for row in family_grams.itertuples()
]
n_family = int(family_grams["n"].iloc[0])
family_window = layout(family_grams)
fig, ax = plt.subplots(figsize=(5.5, 3))
sns.lineplot(
    data=family_grams, x="i", y="tau", hue="model",
    hue_order=list(dict.fromkeys(family_grams.sort_values("parameters")["model"])),
    marker="o", ax=ax, **BOOTSTRAP,
)  # fmt: skip
ax.xaxis.set_major_locator(MaxNLocator(integer=True))
ax.set_xlabel(f"n-gram i ({family_window.describe()}, n = {n_family})")
ax.set_ylabel(TAU_NGRAM)
outside_legend(fig, ax, title="model size")
ax.set_title(f"Largest-n influence across sizes, {family_grams['example'].nunique()} contexts")
save_figure(fig, FIG / "s0_fig4", FORMATS)
save_table(by_size_gram, FIG / "s0_fig4")
metrics["fig4_window"] = {"kind": family_window.kind, "stride": family_window.stride}

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
    # The kind without its model folder ("factkb:/path/to/model"): a path would fill the axis.
    faithfulness_kind = part["faithfulness_kind"].iloc[0].split(":")[0]
    fig, axes = plt.subplots(1, 3, figsize=(8.5, 2.8))
    for ax, column, label in zip(
        axes,
        ["tau", "rouge_l_f1", "faithfulness"],
        [TAU_HAT, "ROUGE-L F1", f"faithfulness ({faithfulness_kind})"],
        strict=True,
    ):
        sns.lineplot(
            data=part.assign(LM=part["model"].map(short_name)), x=axis, y=column, hue="LM",
            marker="o", legend=len(lms) > 1, ax=ax, **BOOTSTRAP,
        )  # fmt: skip
        ax.set_xlabel("T" if axis == "temperature" else "λ")
        ax.set_ylabel(label)
    if len(lms) > 1:
        outside_legend(fig, axes[0], title="LM")
        for ax in axes[1:]:
            ax.get_legend().remove()
    fixed_name = "λ" if fixed[0] == "lam" else "T"
    fig.suptitle(f"{fixed_name} = {fixed[1]:g}, {part['example'].nunique()} contexts")
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
# A maximum over contexts and tokens, checked against a bound: no interval to estimate.
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(
    worst["eps"],
    worst["max_tau_ngram_token"],
    marker="o",
    label=rf"max $\tau_{{i,n}}$, n = {bounded['n'].iloc[0]}",
)
ax.plot(worst["eps"], worst["max_tau_whole_token"], marker="s", label=r"max $\tau_{|D|}$")
grid_eps = np.array(sorted(worst["eps"]))
ax.plot(grid_eps, grid_eps, "k--", lw=0.8, label="ε")
ax.plot(grid_eps, grid_eps / 2, "k:", lw=0.8, label="ε/2")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xticks(grid_eps, [f"{eps:g}" for eps in grid_eps])
ax.set_xticks([], minor=True)
ax.set_xlabel("ε")
ax.set_ylabel("max observed per-token τ")
outside_legend(fig, ax)
ax.set_title(f"Bounded CID (Alg. 1), {bounded['example'].nunique()} contexts")
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
fig, ax = plt.subplots(figsize=(5, 3.6))
sns.scatterplot(
    data=lam_label(tokens), x="bound", y="tau_tokens", hue="λ", hue_order=lam_order(tokens),
    s=8, alpha=0.5, linewidth=0, ax=ax,
)  # fmt: skip
top_value = float(max(tokens["bound"].max(), tokens["tau_tokens"].max()))
ax.plot([0, top_value], [0, top_value], "k--", lw=0.8, label="τ = λ·|pmi|")
ax.set_xlabel(r"$\lambda\,|\mathrm{pmi}(y_t; D)|$ (T = 1)")
ax.set_ylabel(r"$\tau_{|D|}(y_t)$ under CID")
ax.set_title(f"Theorem 3.1, {len(tokens)} response tokens")
outside_legend(fig, ax, title="λ")
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
