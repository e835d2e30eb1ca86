# %% [markdown]
# # S1 (Tiwari & Suh): figures, tables and headline numbers
# Reads only the cached artifacts of s1_scores (family: planted named entities with 4-token
# suffixes and 50 + 50-token sequences, every size, six decoders), s1_isp (n-ISP of the named
# entities on the largest size) and s1_public (SmolLM2-135M-Instruct on the license-text and
# Zen of Python windows it measurably memorised: sampling ESP >= min_esp; when none did, Fig. 2
# and metrics say so and no public-text panel is drawn). Decoders (the paper does not list its
# six; chosen from §5.2 and Table 1):
# greedy, regular sampling, top-k 5, top-k 10, top-p 0.6, temperature 0.1.
# Trends (Fig. 3, Tables 4-5) and token positions (Fig. 4) use regular sampling, i.e. the
# model's own distribution: greedy ESPs are 0/1 and would make trends meaningless.
# Shares and means over sequences carry 95% bootstrap confidence intervals over sequences
# (seaborn, fixed seed: the same figure on every run).

# %% tags=["parameters"]
figures = {"formats": ["png", "pdf"]}
render = {"x_max": 100, "x_check": 30, "top_partial": 100, "examples": 4}

# %%
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from privleak.figures import (
    BOOTSTRAP,
    check_formats,
    outside_legend,
    save_figure,
    save_table,
    short_name,
    style,
)
from privleak.metrics import esp_summary
from privleak.pipeline import paths

style()
FIG = paths.FIGURES / "s1"
FORMATS = check_formats(figures["formats"])
RULE = "pct_rule_esp_ge_1_over_X"  # counted with the paper's rule ESP >= 1/X, not its numbers
RULE_LABEL = "ESP ≥ 1/X (paper's rule)"
EXPECTED_LABEL = "1 − (1 − ESP)^X (expected)"
S1 = paths.INTERIM / "s1"
TREND_DECODER = "sampling"
LABELS = {"named_entity": "family NE (4-token)", "long_sequence": "family 50-token",
          "public_text": "public text (50-token)"}  # fmt: skip

# s1_public writes scores only for the candidates it kept (sampling ESP >= min_esp).
selection = json.loads((S1 / "public" / "selection.json").read_text())
sources = ["scores", "public"] if selection["kept"] else ["scores"]
esp = pd.concat([pd.read_parquet(S1 / s / "esp.parquet") for s in sources])
tp = pd.concat([pd.read_parquet(S1 / s / "tp.parquet") for s in sources])
sequences = pd.concat([pd.read_parquet(S1 / s / "sequences.parquet") for s in sources])
sequences = sequences.set_index("seq_id")
montecarlo = pd.read_parquet(S1 / "scores" / "montecarlo.parquet")
isp = pd.read_parquet(S1 / "isp" / "isp.parquet")
leaves = pd.read_parquet(S1 / "isp" / "leaves.parquet")
exact = pd.read_parquet(S1 / "isp" / "exact.parquet")
decoders = list(dict.fromkeys(esp["decoder"]))
full_prefix = int(esp["prefix_len"].max())
ranks = esp[esp["kind"] != "public_text"].drop_duplicates("model").sort_values("model_rank")
family_models = ranks["model"].tolist()
largest = family_models[-1]
selected = (
    f"public text: {selection['kept']} of {selection['candidates']} candidate windows\n"
    f"with sampling ESP ≥ {selection['min_esp']:g}"
)
metrics: dict = {"decoders": decoders, "family_models": family_models}
metrics["public_selection"] = selection | {"panel": selected.replace("\n", " ")}
if not selection["kept"]:
    metrics["public_selection"]["note"] = (
        "no candidate reached the threshold (best sampling ESP "
        f"10^{selection['best_log10_esp']:.1f}); the public-text panel is not drawn"
    )
# The model each dataset's leak analysis uses, for titles (public text: s1_public's one model).
analysed = {
    kind: short_name(largest if kind != "public_text" else frame["model"].iloc[0])
    for kind, frame in esp.groupby("kind")
}

# Per dataset: the ESPs at the full prefix on the model the leak analysis uses.
datasets = {kind: frame for kind, frame in esp[esp["prefix_len"] == full_prefix].groupby("kind")}
datasets = {k: v[(v["model"] == largest) | (k == "public_text")] for k, v in datasets.items()}
kinds = [k for k in LABELS if k in datasets]

# %% [markdown]
# ## Fig. 2: % of sequences leaked at least once within X samples
# Solid: counted with the paper's rule (ESP >= 1/X), our ESPs, not the paper's numbers (column
# `pct_rule_esp_ge_1_over_X`). Dashed: the exact expectation mean(1 - (1 - ESP)^X). Bands: 95%
# bootstrap intervals over sequences. Second figure: Monte-Carlo with the real sampler on a
# subset (family only), against the closed form on the same subset. Public text: the panel's
# title says how many measured candidate windows passed the ESP threshold; when none did, a
# text-only panel says so in place of the curves.


# %%
def per_sequence(values: np.ndarray, xs) -> tuple[np.ndarray, np.ndarray]:
    """[sequences, len(xs)] percent leaked per sequence: the paper's rule and the expectation
    (the curves are their means over sequences)."""
    rule = np.stack([esp_summary.leaked_paper(values[j : j + 1], xs) for j in range(len(values))])
    expected = np.stack(
        [esp_summary.leaked_expected(values[j : j + 1], xs) for j in range(len(values))]
    )
    return 100 * rule, 100 * expected


xs = np.arange(1, render["x_max"] + 1)
# The figure draws a log-spaced subset of X: its bootstrap runs per (decoder, X) point.
x_grid = np.unique(np.geomspace(1, render["x_max"], 16).round().astype(int))
curve_rows, figure_rows = [], []
for kind in kinds:
    for decoder in decoders:
        values = datasets[kind].loc[datasets[kind]["decoder"] == decoder, "log_esp"].to_numpy()
        rule_curve = esp_summary.leaked_paper(values, xs)
        expected = esp_summary.leaked_expected(values, xs)
        curve_rows += [
            {"dataset": kind, "decoder": decoder, "X": int(x), RULE: 100 * p,
             "expected_pct": 100 * e}
            for x, p, e in zip(xs, rule_curve, expected, strict=True)
        ]  # fmt: skip
        rule_pct, expected_pct = per_sequence(values, x_grid)
        for curve, pct in [(RULE_LABEL, rule_pct), (EXPECTED_LABEL, expected_pct)]:
            figure_rows.append(
                pd.DataFrame({"dataset": kind, "decoder": decoder, "curve": curve,
                              "X": np.tile(x_grid, len(values)), "pct": pct.ravel()})
            )  # fmt: skip
curves = pd.DataFrame(curve_rows)
per_seq = pd.concat(figure_rows, ignore_index=True)

panels = len(kinds) + (not selection["kept"])
fig, axes = plt.subplots(1, panels, figsize=(3.2 * panels + 1.6, 3), squeeze=False)
for ax, kind in zip(axes[0], kinds, strict=False):
    part = per_seq[per_seq["dataset"] == kind]
    sns.lineplot(
        data=part, x="X", y="pct", hue="decoder", hue_order=decoders, style="curve",
        style_order=[RULE_LABEL, EXPECTED_LABEL], ax=ax, **BOOTSTRAP,
    )  # fmt: skip
    count = part.groupby(["decoder", "curve", "X"]).size().min()
    title = selected if kind == "public_text" else LABELS[kind]
    ax.set_title(f"{title}\n{analysed[kind]}, {count} sequences", fontsize=9)
    ax.set_xlabel("X (samples per sequence)")
    ax.set_ylabel("")
    ax.set_xscale("log")
axes[0][0].set_ylabel("% sequences leaked within X")
outside_legend(fig, axes[0][0])
for ax in axes[0][1 : len(kinds)]:
    ax.get_legend().remove()
if not selection["kept"]:
    note = axes[0][-1]
    note.axis("off")
    note.text(
        0.5, 0.5,
        f"{short_name(selection['model'])}\n{selected}\n\nnone reached it (best "
        f"$10^{{{selection['best_log10_esp']:.1f}}}$):\nno public-text panel",
        transform=note.transAxes, ha="center", va="center", fontsize=9,
    )  # fmt: skip
save_figure(fig, FIG / "s1_fig2", FORMATS)
save_table(curves[curves["X"].isin([1, 2, 5, 10, 20, 30, 50, 100])], FIG / "s1_fig2_data")

# %%
mc_rows = []
for (kind, decoder), frame in montecarlo.groupby(["kind", "decoder"]):
    hits = np.stack([g.sort_values("sample")["hit"].to_numpy() for _, g in frame.groupby("seq_id")])
    ids = sorted(frame["seq_id"].unique())
    subset = datasets[kind].set_index("seq_id").loc[ids]
    values = subset.loc[subset["decoder"] == decoder, "log_esp"].to_numpy()
    # Given the ESPs, "leaked within X" is Bernoulli(q_i) per sequence: the Monte-Carlo share
    # falls within expected ± 1.96·sqrt(Σ q_i(1 - q_i))/N in 95% of runs.
    q = per_sequence(values, range(1, hits.shape[1] + 1))[1] / 100
    noise = 196 * np.sqrt((q * (1 - q)).sum(0)) / len(ids)
    for x in range(1, hits.shape[1] + 1):
        mc_rows.append(
            {"dataset": kind, "decoder": decoder, "X": x, "sequences": len(ids),
             "monte_carlo_pct": 100 * hits[:, :x].any(1).mean(),
             "expected_pct": 100 * esp_summary.leaked_expected(values, [x])[0],
             "mc_noise_95_pct": float(noise[x - 1]),
             RULE: 100 * esp_summary.leaked_paper(values, [x])[0]}
        )  # fmt: skip
mc = pd.DataFrame(mc_rows)
# The band is the Monte-Carlo noise given the ESPs (closed form), not a bootstrap over sequences.
colors = dict(zip(decoders, sns.color_palette(n_colors=len(decoders)), strict=True))
panels = mc["dataset"].nunique()
fig, axes = plt.subplots(1, panels, figsize=(3.5 * panels + 3, 3), squeeze=False)
for ax, (kind, frame) in zip(axes[0], mc.groupby("dataset"), strict=True):
    for decoder in [d for d in decoders if d in set(frame["decoder"])]:
        c = frame[frame["decoder"] == decoder]
        ax.plot(c["X"], c["expected_pct"], color=colors[decoder], lw=1, label=decoder)
        ax.fill_between(
            c["X"], (c["expected_pct"] - c["mc_noise_95_pct"]).clip(lower=0),
            c["expected_pct"] + c["mc_noise_95_pct"], color=colors[decoder], alpha=0.2, lw=0,
        )  # fmt: skip
        dots = c[(c["X"] == 1) | (c["X"] % 5 == 0)]
        ax.plot(dots["X"], dots["monte_carlo_pct"], "o", ms=3, color=colors[decoder])
    ax.plot([], [], "o", ms=3, color="grey", label="Monte-Carlo, real sampler")
    ax.fill_between([], [], color="grey", alpha=0.2, lw=0, label="1 − (1 − ESP)^X ± 95% MC noise")
    ax.set_title(
        f"{LABELS[kind]}\n{analysed[kind]}, {frame['sequences'].iloc[0]} sequences", fontsize=9
    )
    ax.set_xlabel("X (samples per sequence)")
axes[0][0].set_ylabel("% leaked (subset)")
outside_legend(fig, axes[0][0])
save_figure(fig, FIG / "s1_fig2_montecarlo", FORMATS)
save_table(mc[mc["X"].isin([1, 5, 10, 30, 50, 100])], FIG / "s1_fig2_montecarlo")
metrics["monte_carlo_max_abs_diff_pct"] = float(
    (mc["monte_carlo_pct"] - mc["expected_pct"]).abs().max()
)
# Per single draw (X = 1) every sample is an independent Bernoulli(ESP_i) trial: the hit rate over
# all draws vs the mean ESP, with the binomial standard error of that mean.
single = []
for (kind, decoder), frame in montecarlo.groupby(["kind", "decoder"]):
    by_seq = datasets[kind][datasets[kind]["decoder"] == decoder].set_index("seq_id")["log_esp"]
    p = np.exp(by_seq.loc[frame["seq_id"]].to_numpy())
    se = float(np.sqrt((p * (1 - p)).sum()) / len(p))
    rate = float(frame["hit"].mean())
    z = (rate - p.mean()) / se if se > 0 else 0.0
    single.append({"dataset": kind, "decoder": decoder, "draws": len(p), "hit_rate": rate,
                   "mean_esp": float(p.mean()), "z": z})  # fmt: skip
single = pd.DataFrame(single)
save_table(single, FIG / "s1_montecarlo_single_draw")
metrics["monte_carlo_single_draw_max_abs_z"] = float(single["z"].abs().max())

# %%
x_check = render["x_check"]
under = {}
for kind in kinds:
    at = curves[(curves["dataset"] == kind) & (curves["X"] == x_check)].set_index("decoder")
    greedy_pct = float(at.loc["greedy", RULE]) if "greedy" in at.index else float("nan")
    random = at.drop(index="greedy", errors="ignore")
    best = random[RULE].idxmax()
    first = curves[(curves["dataset"] == kind) & (curves["decoder"] != "greedy")]
    overtakes = first[first[RULE] > greedy_pct].groupby("decoder")["X"].min()
    under[kind] = {
        "greedy_extraction_rate_pct": greedy_pct,
        f"best_random_decoder_at_X{x_check}": best,
        f"best_random_pct_at_X{x_check}": float(random.loc[best, RULE]),
        f"best_random_expected_pct_at_X{x_check}": float(random["expected_pct"].max()),
        "underestimation_vs_greedy": (
            float(random.loc[best, RULE] / greedy_pct) if greedy_pct > 0 else None
        ),
        "first_X_random_beats_greedy": {d: int(x) for d, x in overtakes.items()},
    }
metrics["leak_at_X"] = under
under

# %% [markdown]
# ## Table 1-3: partial leakage of named entities (largest family size)

# %%
isp["esp"] = np.exp(isp["log_esp"])
isp["easier"] = isp["approx"] > isp["esp"]
table1 = (
    isp.groupby(["decoder", "n"])["easier"].mean().mul(100).unstack("n")
    .rename(columns=lambda n: f"% easier with {n} mismatch(es)").reset_index()
)  # fmt: skip
# "exact" only where the data shows it: every entity's Appendix A bound is 0 for that decoder
# (a truncating decoder whose kept tokens all fit in `expand`); otherwise approx is a lower bound
# and the largest bound says how far below the true n-ISP it may be.
largest_bound = isp.groupby("decoder")["bound"].max()
table1["note"] = [
    "exact (bound 0)" if largest_bound[d] == 0
    else f"lower bound; Appendix A bound <= {largest_bound[d]:.2g}"
    for d in table1["decoder"]
]  # fmt: skip
save_table(table1, FIG / "s1_table1")
metrics["pct_ne_easier_partially"] = {
    f"{d}/n={n}": float(v)
    for (d, n), v in isp.groupby(["decoder", "n"])["easier"].mean().mul(100).items()
}
table1

# %%
table2_rows = []
topk = "top-k 5" if "top-k 5" in set(leaves["decoder"]) else leaves["decoder"].iloc[0]
for n, frame in leaves[leaves["decoder"] == topk].groupby("n"):
    top = frame.nlargest(render["top_partial"], "log_p")
    counts = top["positions"].apply(lambda p: tuple(int(v) for v in p)).value_counts()
    for positions, count in sorted(counts.items()):
        table2_rows.append({"decoder": topk, "n": n, "mismatch positions": str(positions),
                            "count in top": int(count), "top": len(top)})  # fmt: skip
table2 = pd.DataFrame(table2_rows)
save_table(table2, FIG / "s1_table2")
m_ne = int(leaves["truth"].apply(len).max())
trailing = {}
for n, frame in table2.groupby("n"):
    tail = str(tuple(range(m_ne - n + 1, m_ne + 1)))
    trailing[f"n={n}"] = float(
        frame.loc[frame["mismatch positions"] == tail, "count in top"].sum() / frame["top"].iloc[0]
    )
metrics["trailing_mismatch_share_top_partial"] = trailing
table2

# %%
best_leaf = (
    leaves[leaves["decoder"] == topk]
    .sort_values("log_p", ascending=False)
    .drop_duplicates(["seq_id", "n"])
)
t3 = best_leaf.merge(isp[isp["decoder"] == topk][["seq_id", "n", "esp"]], on=["seq_id", "n"])
t3 = (
    t3[np.exp(t3["log_p"]) > t3["esp"]]
    .sort_values("log_p", ascending=False)
    .head(render["examples"])
)
table3 = pd.DataFrame(
    {
        "ground truth": [" ".join(t) for t in t3["truth"]],
        "ESP": t3["esp"].to_numpy(),
        "partial match": [" ".join(t) for t in t3["tokens"]],
        "P(partial)": np.exp(t3["log_p"]).to_numpy(),
        "mismatch positions": t3["positions"].apply(lambda p: str([int(v) for v in p])).to_numpy(),
    }
)
save_table(table3, FIG / "s1_table3")
table3

# %% [markdown]
# ## Fig. 3, Tables 4-5: the six trend types vs model size and prefix length (regular sampling)


# %%
def trend_table(frame: pd.DataFrame, axis: str) -> tuple[pd.DataFrame, pd.Series]:
    """Per sequence: the multi-label trend of its ESP series along axis, and whether a smaller
    value of the axis gives a higher ESP than the largest."""
    rows, smaller = [], {}
    for seq_id, g in frame.sort_values(axis).groupby("seq_id"):
        series = g["log_esp"].to_numpy()
        rows += [{"seq_id": seq_id, "trend": t} for t in esp_summary.classify_trend(series)]
        smaller[seq_id] = esp_summary.easier_with_smaller(series)
    return pd.DataFrame(rows), pd.Series(smaller)


def trend_percentages(trends: pd.DataFrame, n: int) -> pd.Series:
    counts = trends["trend"].value_counts()
    return pd.Series(
        {t: 100 * counts.get(t, 0) / n for t in (*esp_summary.TRENDS, esp_summary.FLAT)}
    )


sampled = esp[esp["decoder"] == TREND_DECODER]
size_frames = {
    k: sampled[(sampled["kind"] == k) & (sampled["prefix_len"] == full_prefix)]
    for k in ("named_entity", "long_sequence")
    if k in kinds
}
table4, smaller_model, size_trends = {}, {}, {}
for kind, frame in size_frames.items():
    trends, smaller = trend_table(frame, "model_rank")
    size_trends[kind] = trends
    table4[LABELS[kind]] = trend_percentages(trends, frame["seq_id"].nunique())
    smaller_model[kind] = 100 * float(smaller.mean())
table4 = pd.DataFrame(table4).rename_axis("trend").reset_index()
save_table(table4, FIG / "s1_table4")
metrics["pct_easier_with_smaller_model"] = smaller_model

table5, shorter_prefix = {}, {}
for kind in kinds:
    frame = sampled[sampled["kind"] == kind]
    frame = frame[frame["model"] == (largest if kind != "public_text" else frame["model"].iloc[0])]
    trends, smaller = trend_table(frame, "prefix_len")
    table5[LABELS[kind]] = trend_percentages(trends, frame["seq_id"].nunique())
    shorter_prefix[kind] = 100 * float(smaller.mean())
table5 = pd.DataFrame(table5).rename_axis("trend").reset_index()
save_table(table5, FIG / "s1_table5")
metrics["pct_easier_with_shorter_prefix"] = shorter_prefix
table4, table5

# %%
# Individual sequences (up to 5 per trend), one line each: there is no mean to put an interval on.
size_names = [short_name(m) for m in family_models]
long_names = sum(len(name) + 2 for name in size_names) > 30  # side by side they would collide
fig, axes = plt.subplots(2, 3, figsize=(8.5, 5.6 if long_names else 5))
example_frame = pd.concat(size_frames.values())
example_frame = example_frame.assign(dataset=example_frame["kind"].map(LABELS))
labelled = pd.concat(size_trends.values())
datasets_shown = [LABELS[k] for k in size_frames]
for ax, trend in zip(axes.flat, esp_summary.TRENDS, strict=True):
    ids = labelled.loc[labelled["trend"] == trend, "seq_id"].tolist()[:5]
    pct = table4.set_index("trend").loc[trend]
    share = ", ".join(f"{LABELS[k].split(' (')[0]} {pct[LABELS[k]]:.1f}%" for k in size_frames)
    ax.set_title(f"{trend}\n{share}", fontsize=8)
    ax.set_xticks(range(len(family_models)), size_names, rotation=90 if long_names else 0)
    ax.set_xlim(-0.3, len(family_models) - 0.7)
    ax.set_xlabel("model size")
    if not ids:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no sequence", transform=ax.transAxes, ha="center", color="grey")
        continue
    sns.lineplot(
        data=example_frame[example_frame["seq_id"].isin(ids)], x="model_rank", y="log_esp",
        hue="dataset", hue_order=datasets_shown, units="seq_id", estimator=None, marker="o",
        lw=1, legend=False, ax=ax,
    )  # fmt: skip
    ax.set_xlabel("model size")
    ax.set_ylabel("log ESP (sampling)")
for dataset, color in zip(datasets_shown, sns.color_palette(), strict=False):
    axes.flat[0].plot([], [], marker="o", lw=1, color=color, label=dataset)
outside_legend(fig, axes.flat[0], below=True)
fig.suptitle("Trend of log ESP across model sizes: example sequences (regular sampling)")
save_figure(fig, FIG / "s1_fig3", FORMATS)

# %% [markdown]
# ## Fig. 4: average TP by suffix position (regular sampling, full prefix)

# %%
tp_s = tp[
    (tp["decoder"] == TREND_DECODER) & ((tp["model"] == largest) | (tp["kind"] == "public_text"))
]
tp_s = tp_s.assign(tp=np.exp(tp_s["log_tp"]), position=tp_s["position"] + 1)
avg_tp = tp_s.groupby(["kind", "position"])["tp"].mean().reset_index()
fig, axes = plt.subplots(1, len(kinds), figsize=(3 * len(kinds), 2.8), squeeze=False)
ratios = {}
for ax, kind in zip(axes[0], kinds, strict=True):
    c = avg_tp[avg_tp["kind"] == kind]
    part = tp_s[tp_s["kind"] == kind]
    few = part["position"].nunique() <= 10
    sns.lineplot(data=part, x="position", y="tp", marker="o" if few else None, ax=ax, **BOOTSTRAP)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(
        f"{LABELS[kind]}\n{analysed[kind]}, {part['seq_id'].nunique()} sequences", fontsize=9
    )
    ax.set_xlabel("suffix token position")
    ax.set_ylabel("")
    ratios[kind] = float(c["tp"].iloc[-1] / c["tp"].iloc[0])
axes[0][0].set_ylabel("average TP")
save_figure(fig, FIG / "s1_fig4", FORMATS)
save_table(avg_tp, FIG / "s1_fig4_data")
metrics["last_to_first_tp_ratio"] = ratios
ratios

# %% [markdown]
# ## Table 6: sequences easier to extract with a smaller model

# %%
t6_rows = []
for kind, frame in size_frames.items():
    wide = frame.pivot(index="seq_id", columns="model", values="log_esp")[family_models]
    easier = wide[wide.iloc[:, :-1].max(axis=1) > wide[largest]]
    gain = (easier.max(axis=1) - easier[largest]).sort_values(ascending=False)
    for seq_id in gain.index[: render["examples"]]:
        best = easier.loc[seq_id].idxmax()
        prefix = sequences.loc[seq_id, "prefix_text"]
        t6_rows.append({"kind": kind, "prefix": "…" + " ".join(prefix.split()[-12:]),
                        "suffix": sequences.loc[seq_id, "suffix_text"][:80],
                        "best model (ESP)": f"{best} ({np.exp(easier.loc[seq_id, best]):.3g})",
                        f"ESP {largest}": float(np.exp(easier.loc[seq_id, largest]))})  # fmt: skip
table6 = pd.DataFrame(t6_rows)
save_table(table6, FIG / "s1_table6")
table6

# %% [markdown]
# ## ESP vs duplication count (planted sequences, every size)

# %%
dup = esp[(esp["kind"] != "public_text") & (esp["prefix_len"] == full_prefix)]
dup = dup[dup["decoder"].isin(["sampling", "greedy"])]
by_dup = (
    dup.assign(esp=np.exp(dup["log_esp"]))
    .groupby(["kind", "decoder", "model_rank", "model", "duplicates"])["esp"].mean()
    .reset_index()
)  # fmt: skip
sampled_dup = dup[dup["decoder"] == "sampling"]
sampled_dup = sampled_dup.assign(esp=np.exp(sampled_dup["log_esp"]))
fig, axes = plt.subplots(1, sampled_dup["kind"].nunique(), figsize=(7.5, 3), squeeze=False)
for ax, (kind, frame) in zip(axes[0], sampled_dup.groupby("kind"), strict=True):
    sns.lineplot(
        data=frame.assign(size=frame["model"].map(short_name)), x="duplicates", y="esp",
        hue="size", hue_order=size_names, marker="o", ax=ax, **BOOTSTRAP,
    )  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(frame["duplicates"].unique()))
    ax.xaxis.set_major_formatter("{x:g}")
    ax.set_xticks([], minor=True)
    per_point = frame.groupby(["model", "duplicates"]).size().min()
    ax.set_title(f"{LABELS[kind]}\nmean ESP (sampling), {per_point} per point", fontsize=9)
    ax.set_xlabel("duplicates in the corpus")
    ax.set_ylabel("")
axes[0][0].set_ylabel("ESP")
outside_legend(fig, axes[0][0], title="model size")
for ax in axes[0][1:]:
    ax.get_legend().remove()
save_figure(fig, FIG / "s1_esp_vs_duplication", FORMATS)
save_table(by_dup, FIG / "s1_esp_vs_duplication")
largest_dup = by_dup[by_dup["model"] == largest]
metrics["esp_vs_duplication"] = {
    f"{kind}/{decoder}": {
        str(int(d)): float(v) for d, v in zip(c["duplicates"], c["esp"], strict=True)
    }
    for (kind, decoder), c in largest_dup.groupby(["kind", "decoder"])
}
metrics["esp_duplication_spearman"] = {
    kind: float(
        frame.assign(esp=frame["log_esp"])[["duplicates", "esp"]].corr(method="spearman").iloc[0, 1]
    )
    for kind, frame in dup[(dup["model"] == largest) & (dup["decoder"] == "sampling")].groupby(
        "kind"
    )
}

# %% [markdown]
# ## The n-ISP approximation against its Appendix A error bound
# Regular sampling, 1-ISP, entities with an exact value (full-vocabulary expansion): the
# approximation with `expand` alternatives per node (with or without the 90% head rule), the
# approximation + bound, and the exact value. The bound is loose, as the paper says.

# %%
if len(exact):
    summary = (
        exact.assign(head=exact["head_mass"].fillna(1.0))
        .groupby(["expand", "head"])[["approx", "bound", "exact"]].mean()
        .reset_index()
    )  # fmt: skip
    summary["approx/exact"] = summary["approx"] / summary["exact"]
    summary["(approx+bound)/exact"] = (summary["approx"] + summary["bound"]) / summary["exact"]
    save_table(summary, FIG / "s1_isp_bound")
    rule = exact["head_mass"].map(
        lambda h: "top-expand" if pd.isna(h) else f"top-expand in {h:.0%} head"
    )
    # One row per (sequence, expand, rule, quantity); exact 1-ISP does not depend on either.
    with_rule = exact.assign(rule=rule)
    long = pd.concat(
        [
            with_rule.assign(quantity="approx", value=exact["approx"]),
            with_rule.assign(quantity="approx + bound", value=exact["approx"] + exact["bound"]),
            with_rule[rule == rule.iloc[0]].assign(quantity="exact 1-ISP", value=exact["exact"]),
        ]
    )
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.lineplot(
        data=long, x="expand", y="value", hue="quantity",
        hue_order=["approx + bound", "exact 1-ISP", "approx"], style="rule", markers=True,
        ax=ax, **BOOTSTRAP,
    )  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("alternatives expanded per node")
    ax.set_ylabel("mean 1-ISP (sampling)")
    ax.set_title(f"1-ISP approximation vs its bound\n{exact['seq_id'].nunique()} entities")
    outside_legend(fig, ax)
    save_figure(fig, FIG / "s1_isp_bound", FORMATS)
    metrics["isp_bound_check"] = {
        "exact_within_bounds": bool(
            ((exact["approx"] <= exact["exact"] * (1 + 1e-5) + 1e-9)
             & (exact["exact"] <= (exact["approx"] + exact["bound"]) * (1 + 1e-5) + 1e-9)).all()
        ),
        "sequences": int(exact["seq_id"].nunique()),
    }  # fmt: skip
    summary

# %%
metrics["isp_forward_tokens_per_sequence"] = {
    f"{d}/n={n}": float(v)
    for (d, n), v in isp.groupby(["decoder", "n"])["forward_tokens_per_seq"].first().items()
}
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "s1.json").write_text(
    json.dumps(metrics, indent=2, sort_keys=True, allow_nan=False) + "\n"
)
print(json.dumps(metrics, indent=1)[:3000])
