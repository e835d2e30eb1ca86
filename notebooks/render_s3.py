# %% [markdown]
# # S3 (domain privacy in multi-domain dialogs): Fig. 1, its table and the headline numbers
# Reads the cached artifacts of s3_prepare (redaction shares), s3_train (the training log) and
# s3_attack (samples with their NLLs and leak flags, test perplexity).
#
# For each policy F (keyword, classifier) and each of the six targets (the redaction-dependent
# ones in their version redacted by F), over every training run of the target:
# - the LiRa attack success rate: for each leaked domain j, each prompt's sample with the highest
#   score log(ppl under M_{D without d_j}) / log(ppl under the target) is selected (per prompt and
#   training run: the attacker's best guess per context), and succeeds when F_j flags one of its
#   words. The rate is flagged picks / non-empty picks, per domain j and overall (a sample counts
#   once however many domains it leaks); `rate_per_generation`, the paper's literal
#   #success / #non-empty generations, is kept beside it. The interval is a percentile bootstrap
#   over training runs x prompts (crossed); where no pick succeeds it is [0, an exact binomial
#   bound over (run, prompt) cells] (`lira.zero_success_interval`);
# - the rates corrected for the policy's error rates (Rogan-Gladen, `privleak.policy_quality`):
#   with recall and false-positive rate measured on held-out turns by s3_prepare;
# - test perplexity, the mean over runs (and its range);
# - domain privacy per j: C_hat = Pr[target's sample flagged by F_j] / Pr[reference M_{D without
#   d_j}'s sample flagged by F_j], over every non-empty sample of each model, the plain ratio,
#   with a bootstrap interval over runs x prompts; where the reference never flags, C_hat is not
#   estimable and only a lower bound is reported (`bound` = lower).
# Fig. 1 plots LiRa success against test perplexity, one panel per policy (lower is better on
# both axes); "2x" marks JFT, which fine-tunes twice.

# %% tags=["parameters"]
seed = 0
figures = {"formats": ["png", "pdf"]}
domain = "AIRLINE"
render = {"n_boot": 200, "alpha": 0.05}

# %%
import json
import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privleak.domain_privacy import domain_privacy_table
from privleak.errors import require
from privleak.figures import check_formats, outside_legend, save_figure, save_table, style
from privleak.lira import OVERALL, cell_counts, lira_success_table
from privleak.pipeline import paths
from privleak.policy_quality import corrected_rate_interval
from privleak.training.train_log import dp_steps, masked_shares, regime

style()
FIG = paths.FIGURES / "s3"
FORMATS = check_formats(figures["formats"])
S3 = paths.INTERIM / "s3"
setup = json.loads((S3 / "prepare" / "policies.json").read_text())
POLICIES = {"keyword": "keyword policy", "classifier": "classifier policy"}
LABELS = {
    "keyword": f"keyword policy ({setup['keyword']} lists)",
    "classifier": setup["classifier"],
}
SHOWN = {"JFT": "JFT (2x)"}  # the paper's mark of double training cost

trained = pd.read_parquet(S3 / "train" / "train_log.parquet")
schedule_target = trained.loc[trained["kind"] == "schedule", "target"].iloc[0]
TARGETS = [f"{domain} Only", "Public", "Pub+Redacted", "Private", "JFT", schedule_target]
REDACTED = ("Pub+Redacted", "JFT", schedule_target)  # trained on redacted dialogs, in part
log = trained[trained["without"].isna()]
dp_steps_of = dp_steps(trained)
runs = sorted(trained["run"].unique())
samples = pd.read_parquet(S3 / "attack" / "samples.parquet")
ppl = pd.read_parquet(S3 / "attack" / "ppl.parquet").set_index("model")["test_ppl"]
redaction = pd.read_parquet(S3 / "prepare" / "redaction.parquet")
turn_flags = pd.read_parquet(S3 / "prepare" / "turn_flags.parquet")
quality = pd.read_parquet(S3 / "prepare" / "policy_quality.parquet")
leaked = [c.removeprefix("nll_without_") for c in samples.columns if c.startswith("nll_without_")]
references = trained.dropna(subset=["without"]).set_index("without")["model"].to_dict()
masked_share = masked_shares(redaction)
level = f"{100 * (1 - render['alpha']):g} %"  # the intervals' confidence level, for captions
print(
    f"prompted domain {domain}; leaked domains {leaked}; references {references}; "
    f"{len(runs)} training runs of every target"
)


def models_of(target: str, policy: str) -> pd.DataFrame:
    """The target's models under `policy` (its own redacted version where it has one), one per
    training run."""
    rows = log[(log["target"] == target) & (log["policy"].isna() | (log["policy"] == policy))]
    require(
        len(rows) == len(runs),
        f"render_s3: {len(rows)} models of target {target!r} under {policy}, {len(runs)} runs",
    )
    return rows.sort_values("run")


def error_rows(policy: str, j: str, dialog_domain: str) -> np.ndarray:
    """[dialogs, 2] (flagged turns, turns) of F_j on the held-out dialogs of dialog_domain."""
    part = turn_flags[
        (turn_flags["policy"] == policy)
        & (turn_flags["flagged_for"] == j)
        & (turn_flags["dialog_domain"] == dialog_domain)
    ]
    return part[["flagged_turns", "turns"]].to_numpy(dtype=float)


# %% [markdown]
# ## LiRa success rates and domain privacy, per policy and target


# %%
BOOT = {"n_boot": render["n_boot"], "seed": seed, "alpha": render["alpha"]}
reference_samples = {j: samples[samples["model"] == references[j]] for j in leaked}

rows, metrics_targets = [], {}
for policy in POLICIES:
    for target in TARGETS:
        entries = models_of(target, policy)
        run_of = dict(zip(entries["model"], entries["run"], strict=True))
        drawn = samples[samples["model"].isin(run_of)].reset_index(drop=True)
        drawn_runs = drawn["model"].map(run_of).tolist()
        rates = lira_success_table(drawn, policy, leaked, runs=drawn_runs, **BOOT)
        counts = cell_counts(drawn, policy, leaked, runs=drawn_runs)
        for j in leaked:
            corrected = corrected_rate_interval(
                counts[j], error_rows(policy, j, j), error_rows(policy, j, domain), **BOOT
            )
            rates[j] |= {
                "corrected": corrected.estimate,
                "corrected_low": corrected.low,
                "corrected_high": corrected.high,
            }
        ratios = domain_privacy_table(drawn, reference_samples, policy, runs=drawn_runs, **BOOT)
        run_ppl = ppl[entries["model"]]
        summary = {
            "models": entries["model"].tolist(),
            "runs": len(entries),
            "test_ppl": float(run_ppl.mean()),
            "test_ppl_min": float(run_ppl.min()),
            "test_ppl_max": float(run_ppl.max()),
            "epsilon": float(entries["epsilon"].max()),
            "relative_cost": float(entries["relative_cost"].mean()),
            "dp_steps": [int(dp_steps_of[m]) for m in entries["model"]],
            "epsilon_spent": entries["epsilon"].tolist(),
        }
        metrics_targets.setdefault(policy, {})[target] = summary | {
            "lira_success": rates,
            "domain_privacy": ratios,
        }
        row = {"policy": policy, "target": target, **summary}
        for key in ("models", "dp_steps", "epsilon_spent"):
            row.pop(key)
        row |= {"dp_steps_min": min(summary["dp_steps"]), "dp_steps_max": max(summary["dp_steps"])}
        row["train_masked_share"] = masked_share[policy] if target in REDACTED else 0.0
        row |= {"nonempty": rates[OVERALL]["nonempty"], "samples": len(drawn)}
        row["official_rate"] = rates[OVERALL]["official_rate"]
        for key, rate in rates.items():
            suffix = "" if key == OVERALL else f"_{key}"
            row |= {
                f"lira_success{suffix}": rate["rate"],
                f"lira_low{suffix}": rate["low"],
                f"lira_high{suffix}": rate["high"],
                f"successes{suffix}": rate["successes"],
                f"selected{suffix}": rate["selected"],
                f"rate_per_generation{suffix}": rate["rate_per_generation"],
            }
            if key != OVERALL:
                row |= {
                    f"{name}{suffix}": rate[name]
                    for name in ("corrected", "corrected_low", "corrected_high")
                }
        for j, ratio in ratios.items():
            row |= {
                f"domain_privacy_{j}": ratio["ratio"],
                f"domain_privacy_low_{j}": ratio["low"],
                f"domain_privacy_high_{j}": ratio["high"],
                f"domain_privacy_bound_{j}": ratio["bound"],
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
title = (
    f"S3 Fig. 1: LiRa success rate (flagged picks / non-empty picks) vs test perplexity ({domain} "
    f"prompts; lower is better on both axes; 2x: double training cost). {level} bootstrap "
    f"intervals over {len(runs)} training runs x prompts (exact binomial bound at 0 successes). "
    f"T{regime(trained, redaction)[1:]} (JFT's and the schedule's epsilon: selective DP, "
    f"relative to the policy). {LABELS['classifier']}; {LABELS['keyword']}."
)
fig.suptitle("\n".join(textwrap.wrap(title, 120)))
save_figure(fig, FIG / "s3_fig1", FORMATS)

# %% [markdown]
# ## Table 1 (the numbers behind Fig. 1) and the headline metrics

# %%
columns = [
    "policy",
    "target",
    "runs",
    "test_ppl",
    "lira_success",
    "lira_low",
    "lira_high",
    "successes",
    "selected",
    "rate_per_generation",
    "official_rate",
]
columns += [
    f"{m}_{j}"
    for j in leaked
    for m in (
        "lira_success",
        "corrected",
        "corrected_low",
        "corrected_high",
        "domain_privacy",
        "domain_privacy_low",
        "domain_privacy_high",
        "domain_privacy_bound",
    )  # fmt: skip
]
columns += ["epsilon", "dp_steps_min", "dp_steps_max", "relative_cost", "train_masked_share"]
save_table(
    table[columns + [c for c in table.columns if c not in columns]],
    FIG / "s3_table1",
    csv_only=[c for c in table.columns if c not in columns],
    note=f"S3 Fig. 1's data over {len(runs)} training runs of every target: per policy and "
    f"target, the LiRa success rate on {domain} prompts (one pick per prompt, run and leaked "
    f"domain, {', '.join(leaked)}; flagged picks / non-empty picks; rate_per_generation: the "
    f"paper's literal successes / non-empty generations; official_rate: the official "
    "extraction script's, the flagged share of every non-empty sample, no pick) with a "
    f"{level} bootstrap interval over runs x prompts (at 0 successes [0, an exact binomial "
    "bound over prompts]); "
    "corrected_<j>: the per-domain rate corrected for the policy's recall and false-positive "
    "rate on held-out turns (Rogan-Gladen; s3_policy_quality); test perplexity (mean over runs); "
    "domain privacy C per leaked domain, the plain ratio of the target's to M_(D without d_j)'s "
    "flagged share of non-empty samples (bound = lower: the reference never flags, so only a "
    "lower bound; none: neither flags). epsilon: Private's DP guarantee; JFT's and the "
    "Redaction Schedule's are selective DP, relative to the policy (what it missed was trained "
    "on without noise); the schedule's is spent over its DP steps, its noise set as if every "
    "step were DP, as the official code sets it. relative_cost: training tokens / Public's; "
    "dp_steps_min/max: the DP-AdamW steps of a run, the fewest and most over runs; "
    "train_masked_share: the share of train words the policy masked. "
    f"{LABELS['classifier']}; {LABELS['keyword']}.",
)

# %% [markdown]
# ## The policies as instruments: precision and recall on held-out turns

# %%
save_table(
    quality,
    FIG / "s3_policy_quality",
    note="S3 policies measured on the held-out test dialogs, one unit per turn labelled with its "
    "dialog's domain: recall (flagged share of domain j's turns), false-positive rate per other "
    "domain (flagged share of its turns) and precision (share of flagged turns that are j's), "
    f"with {100 * (1 - 0.05):g} % bootstrap intervals over dialogs resampled within their domain. "
    f"{LABELS['classifier']}; {LABELS['keyword']}.",
)
quality.round(3)


def finite(value):
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
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
    **{f"{policy}_masked_share": masked_share[policy] for policy in POLICIES},
    "targets": metrics_targets,
    "references": reference_rates,
}
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "s3.json").write_text(json.dumps(finite(metrics), indent=1, sort_keys=True) + "\n")
table[["policy", "target", "test_ppl", "lira_success"] + [f"domain_privacy_{j}" for j in leaked]]
