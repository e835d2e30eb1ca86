# %% [markdown]
# # S3 (domain privacy in multi-domain dialogs): Fig. 1, its table and the headline numbers
# Reads the cached artifacts of s3_prepare (redaction shares), s3_train (the training log) and
# s3_attack (samples with their NLLs and leak flags, test perplexity).
#
# For each policy F (keyword, classifier) and each of the six targets (the redaction-dependent
# ones in their version redacted by F):
# - the LiRa attack success rate: for each leaked domain j, each prompt's sample with the highest
#   score log(ppl under M_{D without d_j}) / log(ppl under the target) is selected (per_prompt=1:
#   the attacker's best guess per context), and succeeds when F_j flags one of its words; the
#   rate is #successes / #non-empty samples, per domain j and overall (a sample counts once
#   however many domains it leaks). The interval is a percentile bootstrap over prompts (a
#   prompt's samples are drawn together); with no success at all every resample reads 0, so
#   the interval is [0, upper] from `lira.zero_success_interval` instead (an exact binomial
#   bound over prompts on the share whose picks leak, times the largest rate the picks allow);
# - test perplexity;
# - domain privacy per j: C_hat = Pr[target's sample flagged by F_j] / Pr[reference M_{D without
#   d_j}'s sample flagged by F_j], over every non-empty sample of each model, with add-
#   `render.pseudocount` rates and a bootstrap interval over prompts (target and reference
#   samples of a prompt drawn together).
# Fig. 1 plots LiRa success against test perplexity, one panel per policy (lower is better on
# both axes); "2x" marks JFT, which fine-tunes twice. Fig. 1 and its table show training run 0;
# with `s3.seeds` > 1, render_claims resamples every run.

# %% tags=["parameters"]
seed = 0
figures = {"formats": ["png", "pdf"]}
domain = "AIRLINE"
render = {"n_boot": 200, "alpha": 0.05, "pseudocount": 0.5}

# %%
import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privleak.errors import require
from privleak.figures import check_formats, outside_legend, save_figure, save_table, style
from privleak.lira import OVERALL, domain_privacy_table, lira_success_table
from privleak.pipeline import paths

style()
FIG = paths.FIGURES / "s3"
FORMATS = check_formats(figures["formats"])
S3 = paths.INTERIM / "s3"
POLICIES = {"keyword": "keyword policy", "classifier": "classifier policy (MiniLM windows)"}
TARGETS = [f"{domain} Only", "Public", "Pub+Redacted", "Private", "JFT", "Redaction Schedule"]
SHOWN = {"JFT": "JFT (2x)"}  # the paper's mark of double training cost

trained = pd.read_parquet(S3 / "train" / "train_log.parquet")
log = trained[trained["run"] == 0]
samples = pd.read_parquet(S3 / "attack" / "samples.parquet")
ppl = pd.read_parquet(S3 / "attack" / "ppl.parquet").set_index("model")["test_ppl"]
redaction = pd.read_parquet(S3 / "prepare" / "redaction.parquet")
leaked = [c.removeprefix("nll_without_") for c in samples.columns if c.startswith("nll_without_")]
references = log.dropna(subset=["without"]).set_index("without")["model"].to_dict()
masked = redaction.groupby("policy")[["words_masked", "words"]].sum()
masked_share = (masked["words_masked"] / masked["words"]).to_dict()
level = f"{100 * (1 - render['alpha']):g} %"  # the intervals' confidence level, for captions
print(
    f"prompted domain {domain}; leaked domains {leaked}; references {references}; training run 0 "
    f"of {trained['run'].nunique()}"
)


def model_of(target: str, policy: str) -> pd.Series:
    rows = log[(log["target"] == target) & (log["policy"].isna() | (log["policy"] == policy))]
    require(len(rows) == 1, f"render_s3: {len(rows)} models of target {target!r} under {policy}")
    return rows.iloc[0]


# %% [markdown]
# ## LiRa success rates and domain privacy, per policy and target


# %%
BOOT = {"n_boot": render["n_boot"], "seed": seed, "alpha": render["alpha"]}
reference_samples = {j: samples[samples["model"] == references[j]] for j in leaked}

rows, metrics_targets = [], {}
for policy in POLICIES:
    for target in TARGETS:
        entry = model_of(target, policy)
        drawn = samples[samples["model"] == entry["model"]].reset_index(drop=True)
        rates = lira_success_table(drawn, policy, leaked, **BOOT)
        ratios = domain_privacy_table(
            drawn, reference_samples, policy, **BOOT, pseudocount=render["pseudocount"]
        )
        summary = {
            "model": entry["model"],
            "test_ppl": ppl[entry["model"]],
            "epsilon": entry["epsilon"],
            "relative_cost": entry["relative_cost"],
        }
        metrics_targets.setdefault(policy, {})[target] = summary | {
            "lira_success": rates,
            "domain_privacy": ratios,
        }
        row = {"policy": policy, "target": target, **summary}
        row["train_masked_share"] = masked_share[policy] if entry["policy"] == policy else 0.0
        row |= {"nonempty": rates[OVERALL]["nonempty"], "samples": len(drawn)}
        for key, rate in rates.items():
            suffix = "" if key == OVERALL else f"_{key}"
            row |= {
                f"lira_success{suffix}": rate["rate"],
                f"lira_low{suffix}": rate["low"],
                f"lira_high{suffix}": rate["high"],
                f"successes{suffix}": rate["successes"],
            }
        for j, ratio in ratios.items():
            row |= {
                f"domain_privacy_{j}": ratio["ratio"],
                f"domain_privacy_low_{j}": ratio["low"],
                f"domain_privacy_high_{j}": ratio["high"],
                f"target_leak_rate_{j}": ratio["target_rate"],
                f"reference_leak_rate_{j}": ratio["reference_rate"],
            }
        rows.append(row)
table = pd.DataFrame(rows)
table[["policy", "target", "test_ppl", "lira_success", "lira_low", "lira_high", "nonempty"]]

# %% [markdown]
# ## Fig. 1: LiRa success rate vs test perplexity

# %%
palette = dict(
    zip(
        [SHOWN.get(t, t) for t in TARGETS],
        sns.color_palette("colorblind", len(TARGETS)),
        strict=True,
    )
)
plotted = table.assign(shown=table["target"].map(lambda t: SHOWN.get(t, t)))
fig, axes = plt.subplots(1, len(POLICIES), figsize=(10, 4.2), sharey=True, layout="constrained")
for ax, (policy, title) in zip(axes, POLICIES.items(), strict=True):
    part = plotted[plotted["policy"] == policy]
    sns.scatterplot(
        data=part,
        x="test_ppl",
        y="lira_success",
        hue="shown",
        style="shown",
        hue_order=list(palette),
        style_order=list(palette),
        palette=palette,
        s=70,
        ax=ax,
    )
    for r in part.itertuples():
        if math.isfinite(r.lira_low) and math.isfinite(r.lira_high):
            ax.errorbar(
                r.test_ppl,
                r.lira_success,
                # a percentile interval need not contain the point estimate
                yerr=[
                    [max(r.lira_success - r.lira_low, 0)],
                    [max(r.lira_high - r.lira_success, 0)],
                ],
                color=palette[r.shown],
                capsize=3,
                linewidth=1,
                zorder=1,
            )
    ax.set_title(title)
    if part["test_ppl"].max() > 10 * part["test_ppl"].min():
        ax.set_xscale("log")
    ax.set_xlabel("test perplexity (held-out dialogs)")
    ax.set_ylabel("LiRa attack success rate")
for ax in axes[1:]:
    ax.get_legend().remove()
outside_legend(fig, axes[0], title="target", below=True)
fig.suptitle(
    f"S3 Fig. 1: LiRa success rate vs test perplexity ({domain} prompts; lower is better on "
    f"both axes; 2x: double training cost)\n{level} bootstrap intervals over prompts (exact "
    "binomial bound over prompts at 0 successes)"
)
save_figure(fig, FIG / "s3_fig1", FORMATS)

# %% [markdown]
# ## Table 1 (the numbers behind Fig. 1) and the headline metrics

# %%
columns = [
    "policy",
    "target",
    "model",
    "test_ppl",
    "lira_success",
    "lira_low",
    "lira_high",
    "successes",
    "nonempty",
    "samples",
]
columns += [
    f"{m}_{j}"
    for j in leaked
    for m in ("lira_success", "domain_privacy", "domain_privacy_low", "domain_privacy_high")
]
columns += ["epsilon", "relative_cost", "train_masked_share"]
save_table(
    table[columns + [c for c in table.columns if c not in columns]],
    FIG / "s3_table1",
    csv_only=[c for c in table.columns if c not in columns],
    note=f"S3 Fig. 1's data: per policy and target, the LiRa success rate on {domain} prompts "
    f"(one selected sample per prompt and leaked domain, {', '.join(leaked)}; successes / "
    f"non-empty samples) with a {level} bootstrap interval over prompts (at 0 successes [0, an "
    "exact binomial bound over prompts], where every resample reads 0), test perplexity, and "
    f"domain privacy C per leaked domain (leak rate of the target / of M_(D without d_j), "
    f"add-{render['pseudocount']:g} rates). relative_cost: training tokens / Public's; "
    "train_masked_share: the share of train words the policy masked in the model's data.",
)


def finite(value):
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


reference_rates = {
    j: {
        "model": model,
        "test_ppl": ppl[model],
        "leak_rate": {
            policy: float(
                samples.loc[
                    (samples["model"] == model) & ~samples["empty"], f"leak_{policy}_{j}"
                ].mean()
            )
            for policy in POLICIES
        },
    }
    for j, model in references.items()
}
metrics = {
    "prompted_domain": domain,
    "leaked_domains": leaked,
    "prompts": int(samples["prompt_id"].nunique()),
    "samples_per_prompt": int(samples["sample"].max() + 1),
    "train_masked_share": masked_share,
    "targets": metrics_targets,
    "references": reference_rates,
}
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "s3.json").write_text(json.dumps(finite(metrics), indent=1, sort_keys=True) + "\n")
table[["policy", "target", "test_ppl", "lira_success"] + [f"domain_privacy_{j}" for j in leaked]]
