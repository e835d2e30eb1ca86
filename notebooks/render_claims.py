# %% [markdown]
# # Claims of S0, S1, S2, S3 and S4 as data (DESIGN §8)
# Every directional sentence of S0 (Flemings et al.), S1 (Tiwari & Suh), S2 (Wang et al.), S3
# ("Safe generation in multi-domain dialogs") and S4 (Grislain) that the cached artifacts under
# data/interim/s0 to s4 can test, quoted with its section or figure, gets an effect, a bootstrap
# interval over independent units (contexts, sequences, attack prompts or held-out dialogs; every
# setting of a drawn unit comes along, so paired settings stay paired; two-sample contrasts
# resample within each sample) and a verdict: reproduced when the interval excludes the null on
# the paper's side, contradicted when it excludes it on the other side, inconclusive otherwise.
# No model runs here.
#
# Claims about a model trained here need an interval over training seeds too (DESIGN §8). S1's
# claims on the in-pipeline family resample training runs and sequences as crossed factors (the
# family and its retrained runs from train_family_seeds, scored by s1_scores and s1_seeds) when
# there are at least min_units runs, and S3's claims do so for the targets' runs of s3_train
# (`s3.seeds`). Claims whose artifacts hold fewer runs (S0's family and fine-tuned model, S1's
# n-ISP, S3 with `s3.seeds` < min_units) stay inconclusive, and their note says what the
# interval over units alone would read. Guarantees (bounded CID, the n-ISP
# bound) are checked on every unit instead: one violation contradicts them.

# %% tags=["parameters"]
claims = {"n_boot": 1000, "seed": 0, "alpha": 0.05, "min_units": 6, "method": "percentile"}
models = "family"
sweep_corpus = "healthcaremagic"
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}
leakage = {"repeat_min_words": 20, "rouge_threshold": 0.5}
domain = "AIRLINE"
pseudocount = 0.5

# %%
import json
import math
from functools import partial

import numpy as np
import pandas as pd

from privleak.claims import (
    NAN,
    Estimate,
    bootstrap,
    judge,
    markdown,
    mean_contrast,
    metrics_json,
    paired_differences,
    settings_matrix,
    slope,
    spearman,
    two_samples,
    unit_trends,
    worst_case,
)
from privleak.claims import claims_frame as table
from privleak.claims import counts as tally
from privleak.lira import OVERALL, domain_privacy_interval, lira_picks, lira_scores
from privleak.metrics.rag_leakage import prompt_outcomes
from privleak.pad import response_budget
from privleak.pipeline import paths

S0, S1 = paths.INTERIM / "s0", paths.INTERIM / "s1"
OUT = paths.FIGURES / "claims"
boot = partial(
    bootstrap,
    n_boot=claims["n_boot"],
    seed=claims["seed"],
    alpha=claims["alpha"],
    min_units=claims["min_units"],
    method=claims["method"],
)
NONE = Estimate(NAN, NAN, NAN, 0)
SEEDS = f"an interval over >= {claims['min_units']} training runs (DESIGN §8)"
ONE_RUN = SEEDS + "; the artifacts hold one training run"
PAPER0, PAPER1 = "S0 (Flemings et al.)", "S1 (Tiwari & Suh)"
found = []


def add(claim_id: str, estimate: Estimate, **fields) -> None:
    found.append(judge(claim_id, estimate=estimate, **fields))


# %% [markdown]
# ## Load the artifacts

# %%
generations = pd.read_parquet(S0 / "generate" / "generations.parquet")
text = pd.read_parquet(S0 / "text" / "text_metrics.parquet")
ngram = pd.read_parquet(S0 / "ngram" / "ngram.parquet")
bounded = pd.read_parquet(S0 / "ngram" / "bounded.parquet")
family = pd.read_parquet(S0 / "family" / "responses.parquet")
family_grams = pd.read_parquet(S0 / "family" / "ngram.parquet")
# s1_public writes ESP/TP tables only when some candidate window passed its min_esp selection.
public_esp, public_tp = S1 / "public" / "esp.parquet", S1 / "public" / "tp.parquet"
# run 0 is data/family (s1_scores) and the public texts' pretrained model; runs 1.. are the
# family retrained with other seeds (s1_seeds).
esp, tp = (
    pd.concat(
        [pd.read_parquet(p).assign(run=0) for p in (S1 / "scores" / f, public) if p.exists()]
        + [pd.read_parquet(S1 / "seeds" / f)],
        ignore_index=True,
    ).astype({"run": int})
    for f, public in (("esp.parquet", public_esp), ("tp.parquet", public_tp))
)
isp = pd.read_parquet(S1 / "isp" / "isp.parquet")
leaves = pd.read_parquet(S1 / "isp" / "leaves.parquet")
exact = pd.read_parquet(S1 / "isp" / "exact.parquet")

# A context is (corpus, example); every model's and setting's response to it is one unit.
text = text.assign(
    context=text["corpus"] + "/" + text["example"],
    repeat=text["repeat_prompt"].astype(float),
    rouge=text["rouge_prompt"].astype(float),
)
generations = generations.assign(context=generations["corpus"] + "/" + generations["example"])
main = text[(text["source"] == "generate") & (text["experiment"] == "main")]
sweep = text[(text["source"] == "generate") & (text["experiment"] == "sweep")]
default_t = float(main["temperature"].iloc[0])
sweep_t = sweep[np.isclose(sweep["lam"], 1.0)]  # Fig. 7: T varies at λ = 1
sweep_lam = sweep[np.isclose(sweep["temperature"], default_t)]  # Fig. 8: λ varies at default T
faith_kind = str(text["faithfulness_kind"].iloc[0])
faith_note = "" if faith_kind.startswith("factkb") else f"faithfulness is the {faith_kind} proxy"


def per_context(frame: pd.DataFrame, setting: str, value: str) -> pd.DataFrame:
    """[(model, context) x setting] table of value."""
    return settings_matrix(frame, ["model", "context"], setting, value)


def context_groups(index) -> list[str]:
    """The context of each (model, context) key: a context's rows are resampled together."""
    return [key[1] for key in index]


def trend_estimate(frame, setting, value, trend=slope, x=None) -> Estimate:
    """Mean over contexts of each (model, context)'s trend of value over setting."""
    trends = unit_trends(per_context(frame, setting, value), trend, x)
    return boot(trends.to_numpy(), np.mean, groups=context_groups(trends.index))


def pair_estimate(frame, setting, value, a, b) -> Estimate:
    """Mean over contexts of value(b) - value(a), paired within (model, context)."""
    matrix = per_context(frame, setting, value)
    if a not in matrix or b not in matrix:
        return NONE
    diffs = paired_differences(matrix, a, b)
    return boot(diffs.to_numpy(), np.mean, groups=context_groups(diffs.index))


# %% [markdown]
# ## S0: influence level λ (Tables 2-3, Fig. 8)

# %%
lams = sorted(main["lam"].unique())
low_lam, high_lam = lams[0], lams[-1]
add(
    "s0.lambda.influence",
    trend_estimate(main, "lam", "tau"),
    paper=PAPER0,
    quote="the context privacy leakage can be exacerbated … When the contextual knowledge is "
    "amplified (higher λ)",
    where="§3.3; Tables 2-3",
    effect_name="mean over contexts of the least-squares slope of τ_|D| (Def. 3.2) on λ "
    "(main experiment, every λ, default T)",
    direction="+",
    unit="contexts",
)
for flag, name in [("rouge", "Rouge Prompts"), ("repeat", "Repeat Prompts")]:
    add(
        f"s0.lambda.{flag}_prompts",
        pair_estimate(main, "lam", flag, low_lam, high_lam),
        paper=PAPER0,
        quote="this increased context influence is attributable to 50% more input regurgitation",
        where="§4.3; Table 2",
        effect_name=f"share of {name} at λ = {high_lam:g} minus at λ = {low_lam:g} (paired "
        "difference of proportions, main experiment)",
        direction="+",
        unit="contexts",
    )
add(
    "s0.lambda.utility_at_low_lambda",
    pair_estimate(main, "lam", "rouge_l_f1", 1.0, 0.5),
    paper=PAPER0,
    quote="this comes at a cost of substantial utility degradation",
    where="§4.3 (λ reduced to 0.5); Table 3",
    effect_name="ROUGE-L F1 at λ = 0.5 minus at λ = 1 (paired, main experiment)",
    direction="-",
    unit="contexts",
    missing="" if {0.5, 1.0} <= set(lams) else "λ = 0.5 and λ = 1 in s0.lams",
)
add(
    "s0.lambda.faithfulness",
    trend_estimate(sweep_lam, "lam", "faithfulness"),
    paper=PAPER0,
    quote="a higher average influence of the context leads to more faithfulness to the context "
    "(higher FactKB)",
    where="App. D, Fig. 8",
    effect_name="mean over contexts of the slope of faithfulness on λ (sweep at the default T)",
    direction="+",
    unit="contexts",
    note=faith_note,
)
above = sweep_lam[sweep_lam["lam"] > 1.25].assign(band="above")
at_one = sweep_lam[np.isclose(sweep_lam["lam"], 1.0)].assign(band="one")
add(
    "s0.lambda.similarity_above_1.25",
    pair_estimate(pd.concat([above, at_one]), "band", "rouge_l_f1", "one", "above"),
    paper=PAPER0,
    quote="for λ>1.25, the similarity of the generated response to the gold response slightly "
    "degrades",
    where="App. D, Fig. 8",
    effect_name="mean ROUGE-L F1 over λ > 1.25 minus at λ = 1 (paired, sweep at the default T)",
    direction="-",
    unit="contexts",
    missing="" if len(above) and len(at_one) else "sweep λ values above 1.25 and λ = 1",
)

# %% [markdown]
# ## S0: temperature (Fig. 7)

# %%
add(
    "s0.temperature.influence",
    trend_estimate(sweep_t, "temperature", "tau"),
    paper=PAPER0,
    quote="as τ approaches zero, the model is influenced by the context exponentially",
    where="App. D, Fig. 7 (τ is the temperature T there)",
    effect_name="mean over contexts of the slope of τ_|D| on the temperature T (sweep, λ = 1); "
    "the direction only, not the exponential shape",
    direction="-",
    unit="contexts",
)
add(
    "s0.temperature.similarity",
    trend_estimate(sweep_t, "temperature", "rouge_l_f1"),
    paper=PAPER0,
    quote="with moderate improvements in similarity",
    where="App. D, Fig. 7 (as T approaches zero)",
    effect_name="mean over contexts of the slope of ROUGE-L F1 on T (sweep, λ = 1)",
    direction="-",
    unit="contexts",
)
cold = sweep_t[sweep_t["temperature"] < 0.4].assign(band="below")
warm_ts = sorted(t for t in sweep_t["temperature"].unique() if t >= 0.4)
warm = sweep_t[sweep_t["temperature"] == (warm_ts[0] if warm_ts else NAN)].assign(band="above")
add(
    "s0.temperature.faithfulness_below_0.4",
    pair_estimate(pd.concat([cold, warm]), "band", "faithfulness", "above", "below"),
    paper=PAPER0,
    quote="the faithfulness actually decreases once τ<0.4",
    where="App. D, Fig. 7",
    effect_name="mean faithfulness over T < 0.4 minus at the smallest T >= 0.4 (paired, sweep, "
    "λ = 1)",
    direction="-",
    unit="contexts",
    missing="" if len(cold) and len(warm) else "sweep temperatures below and above 0.4",
    note=faith_note,
)

# %% [markdown]
# ## S0: context size (Fig. 2b), response position (Fig. 2c), model size (Fig. 2a)

# %%
sizes = generations[generations["experiment"] == "context_size"]
size_values = sorted(sizes["context_limit"].unique())
small = sizes.assign(band=np.where(sizes["context_limit"] <= 32, "small", "large"))
add(
    "s0.context_size.small_contexts",
    pair_estimate(small, "band", "tau", "large", "small"),
    paper=PAPER0,
    quote="when the context is extremely small (≤32), then the LM is substantially less "
    "influenced by the context",
    where="§4.3, Fig. 2b",
    effect_name="mean τ_|D| over context sizes <= 32 minus over sizes > 32 (paired, λ = 1)",
    direction="-",
    unit="contexts",
    missing=""
    if min(size_values) <= 32 < max(size_values)
    else "s0.context_sizes.sizes on both sides of 32",
)
middle = sizes[sizes["context_limit"].between(32, 256)]
middle_sizes = sorted(middle["context_limit"].unique())
add(
    "s0.context_size.growth_32_to_256",
    trend_estimate(middle, "context_limit", "tau", x=np.log2(middle_sizes))
    if len(middle_sizes) >= 2
    else NONE,
    paper=PAPER0,
    quote="as we increase the context size from 32 to 256, the model becomes more influenced by "
    "the context",
    where="§4.3, Fig. 2b",
    effect_name="mean over contexts of the slope of τ_|D| on log2 |D| for |D| in [32, 256] (λ = 1)",
    direction="+",
    unit="contexts",
    missing="" if len(middle_sizes) >= 2 else ">= 2 context sizes in [32, 256]",
)

main_gen = generations[generations["experiment"] == "main"]
position = {}
for row in main_gen.itertuples():
    taus = np.asarray(row.tau_tokens, dtype=float)
    if taus.size > 10:  # a response needs tokens on both sides of position 10
        position[(row.model, row.context, row.lam)] = taus[:10].mean() - taus[10:].mean()
position = pd.Series(position, dtype=float)
add(
    "s0.position.first_10_tokens",
    boot(position.to_numpy(), np.mean, groups=context_groups(position.index)),
    paper=PAPER0,
    quote="the first 10 generated tokens by the model are influenced by the context the most",
    where="§4.3, Fig. 2c",
    effect_name="per response, mean per-token τ_|D| at positions < 10 minus at positions >= 10, "
    "averaged over responses longer than 10 tokens (main experiment, every λ)",
    direction="+",
    unit="contexts",
)

by_size = unit_trends(settings_matrix(family, "example", "parameters", "tau"), spearman)
add(
    "s0.model_size.influence",
    boot(by_size.to_numpy(), np.mean),
    paper=PAPER0,
    quote="it generally shows that larger models are less influenced by the context",
    where="§4.3, Fig. 2a",
    effect_name="mean over contexts of the Spearman correlation of τ_|D| with the parameter "
    "count (in-pipeline tiny family, λ = 1)",
    direction="-",
    unit="contexts",
    missing=ONE_RUN,
)

# %% [markdown]
# ## S0: token n-gram influence (Figs. 3-4) and Theorem 3.1

# %%
gram_ns = np.sort(ngram["n"].unique())


def peak_by_n_spearman(rows: np.ndarray) -> float:
    """Rows [n, i, τ] of the drawn contexts: Spearman of n with the peak over i of the mean
    curve τ̂_{i,n} (Fig. 3's statistic)."""
    keys, inverse = np.unique(rows[:, :2], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    means = np.bincount(inverse, rows[:, 2]) / np.bincount(inverse)
    peaks = pd.Series(means).groupby(keys[:, 0]).max()
    return spearman(peaks.index.to_numpy(), peaks.to_numpy())


add(
    "s0.ngram.peak_grows_with_n",
    boot(ngram[["n", "i", "tau"]].to_numpy(), peak_by_n_spearman, groups=ngram["example"])
    if len(gram_ns) >= 2
    else NONE,
    paper=PAPER0,
    quote="Larger n-grams have higher peak context influence",
    where="§4.4, Fig. 3",
    effect_name="Spearman correlation of n with the peak over i of the mean τ̂_{i,n} curve (λ = 1)",
    direction="+",
    unit="contexts",
    missing="" if len(gram_ns) >= 2 else ">= 2 values in s0.ngram.ns",
)
early = unit_trends(settings_matrix(ngram, ["example", "n"], "i", "tau"), spearman)
add(
    "s0.ngram.earlier_ngrams_peak",
    boot(early.to_numpy(), np.mean, groups=[key[0] for key in early.index]),
    paper=PAPER0,
    quote="the context influence peaks for earlier i-th token n-grams, i.e. small i, then "
    "gradually declines for later i-th token n-grams",
    where="§4.4, Fig. 3",
    effect_name="mean over (context, n) of the Spearman correlation of τ_{i,n} with the n-gram "
    "index i (λ = 1)",
    direction="-",
    unit="contexts",
)
family_early = unit_trends(settings_matrix(family_grams, ["example", "size"], "i", "tau"), spearman)
add(
    "s0.ngram.earlier_ngrams_peak_every_size",
    boot(family_early.to_numpy(), np.mean, groups=[key[0] for key in family_early.index]),
    paper=PAPER0,
    quote="regardless of model size, the context influence peaks at the earlier token 128-grams, "
    "then gradually decreases for later ones",
    where="§4.4, Fig. 4",
    effect_name=f"mean over (context, family size) of the Spearman correlation of τ_{{i,n}} with i "
    f"(n = {int(family_grams['n'].iloc[0]) if len(family_grams) else 'n/a'}, λ = 1)",
    direction="-",
    unit="contexts",
)

tokens = main_gen[main_gen["lam"] > 0].explode(["tau_tokens", "pmi"])
token_rows = np.c_[
    tokens["tau_tokens"].astype(float), tokens["lam"] * tokens["pmi"].astype(float).abs()
]
add(
    "s0.theorem31.tau_tracks_lambda_pmi",
    boot(token_rows, lambda r: spearman(r[:, 0], r[:, 1]), groups=tokens["context"]),
    paper=PAPER0,
    quote="the privacy leakage of the i-th token n-gram of the context depends on two key "
    "factors: (1) the difference in PMIs … and (2) the parameter λ",
    where="§3.3, Theorem 3.1",
    effect_name="Spearman correlation over response tokens of τ_|D|(y_t) with λ·|pmi(y_t; D)| "
    "(whole context: the pmi without D is 0; main experiment, λ > 0)",
    direction="+",
    unit="contexts",
)

# %% [markdown]
# ## S0: bounded CID (Alg. 1) — a guarantee, checked on every response

# %%
slack = np.r_[
    bounded["eps"] + 1e-5 - bounded["max_tau_ngram_token"],
    bounded["eps"] / 2 + 1e-5 - bounded["max_tau_whole_token"],
]
add(
    "s0.bounded_cid.within_eps",
    worst_case(slack, "(response, bound) checks"),
    paper=PAPER0,
    quote="the i-th token n-gram D_{i,n} influences the LM θ by at most ϵ",
    where="§3.3, Eq. 7; Alg. 1, Thm. B.1",
    effect_name="smallest slack over responses and ε: ε - max per-token τ_{i,n} and ε/2 - max "
    "per-token τ_|D| (tolerance 1e-5)",
    direction="+",
    unit="checks (2 per response × ε)",
)

# %% [markdown]
# ## S0: parametric knowledge — fine-tuned "known" contexts (§4.2), OPT vs GPT-Neo, corpora

# %%
tuned = text[(text["source"] == "finetune")]
seen = tuned[tuned["seen"].astype(bool)] if len(tuned) else tuned
no_tuned = "" if len(seen) else "s0_finetune responses (s0.finetune.enabled)"


def model_pair(frame: pd.DataFrame, value: str, a: str, b: str) -> Estimate:
    """Mean over contexts of value(model b) - value(model a), each averaged over λ."""
    matrix = settings_matrix(frame, "context", "model", value)
    if a not in matrix or b not in matrix:
        return NONE
    return boot(paired_differences(matrix, a, b).to_numpy(), np.mean)


add(
    "s0.known_context.influence",
    model_pair(seen, "tau", "base", "finetuned"),
    paper=PAPER0,
    quote="just the inclusion of PubMed data in the pre-training data can effectively decrease "
    "the context influence of PubMedQA abstracts",
    where="§4.3 (parametric knowledge); §4.2, Table 2",
    effect_name="τ_|D| of the model fine-tuned on the contexts minus the base model's, on those "
    "seen contexts (paired, mean over λ)",
    direction="-",
    unit="seen contexts",
    missing=no_tuned or ONE_RUN,
)
for flag, name in [("rouge", "Rouge Prompts"), ("repeat", "Repeat Prompts")]:
    add(
        f"s0.known_context.{flag}_prompts",
        model_pair(seen, flag, "base", "finetuned"),
        paper=PAPER0,
        quote="both Repeat Prompts and Rouge Prompts are larger for GPT-Neo 1.3B than OPT 1.3B",
        where="§4.2, Table 2",
        effect_name=f"share of {name} of the fine-tuned model minus the base model's, on the seen "
        "contexts (paired difference of proportions, mean over λ)",
        direction="+",
        unit="seen contexts",
        missing=no_tuned or ONE_RUN,
    )

lm_names = list(dict.fromkeys(main["model"]))
opt = next((m for m in lm_names if "opt-1.3b" in m.lower()), None)
neo = next((m for m in lm_names if "gpt-neo-1.3b" in m.lower()), None)
no_pair = "" if opt and neo else "OPT-1.3B and GPT-Neo-1.3B responses (the paper profile's s0.lms)"
pubmed = main[main["corpus"] == "pubmedqa"]
add(
    "s0.opt_vs_neo.influence",
    model_pair(pubmed, "tau", neo, opt) if not no_pair else NONE,
    paper=PAPER0,
    quote="we expect OPT 1.3B to show greater context privacy leakage",
    where="§4.2, Table 2",
    effect_name="τ_|D| of OPT-1.3B minus GPT-Neo-1.3B on PubMedQA contexts (paired, mean over λ)",
    direction="+",
    unit="contexts",
    missing=no_pair,
)
add(
    "s0.opt_vs_neo.rouge_prompts",
    model_pair(pubmed, "rouge", opt, neo) if not no_pair else NONE,
    paper=PAPER0,
    quote="both Repeat Prompts and Rouge Prompts are larger for GPT-Neo 1.3B than OPT 1.3B",
    where="§4.2, Table 2",
    effect_name="share of Rouge Prompts of GPT-Neo-1.3B minus OPT-1.3B on PubMedQA contexts "
    "(paired difference of proportions)",
    direction="+",
    unit="contexts",
    missing=no_pair,
)
add(
    "s0.instruction_tuned.influence",
    NONE,
    paper=PAPER0,
    quote="LLaMA 3 IT is substantially influenced by the context more than just pre-trained "
    "LLaMA 3",
    where="§4.3 (pre-trained vs fine-tuned), Table 3",
    effect_name="τ_|D| of an instruction-tuned model minus its pre-trained base (paired)",
    direction="+",
    unit="contexts",
    missing="a pre-trained and an instruction-tuned version of one model in s0.lms",
)

per_corpus = main.groupby(["corpus", "context"])[["tau", "repeat"]].mean().reset_index()
cnn, pub = (per_corpus[per_corpus["corpus"] == c] for c in ("cnn_dm", "pubmedqa"))
for value, label in [("tau", "τ_|D|"), ("repeat", "share of Repeat Prompts")]:
    rows, strata = two_samples(cnn[value], pub[value])
    add(
        f"s0.corpus.summarization_vs_qa_{value}",
        boot(rows, mean_contrast, strata=strata) if len(cnn) and len(pub) else NONE,
        paper=PAPER0,
        quote="LMs performing abstractive summarization (CNN-DM) rely on/repeat the context more "
        "than long-form question-answering (PubMedQA)",
        where="§4.3 (contextual knowledge); Tables 2-3",
        effect_name=f"mean {label} of CNN/DM-like contexts minus PubMedQA-like contexts (two "
        "samples, each context averaged over models and λ)",
        direction="+",
        unit="contexts (resampled within each corpus)",
        missing="" if len(cnn) and len(pub) else "both corpora in s0.corpora",
    )

# %% [markdown]
# ## S1: the analysed model per dataset
# Named entities and 50-token sequences on the largest model of s1.scores.models, the public
# texts on their pretrained model; trends and token positions use regular sampling (greedy ESPs
# are 0 or 1). ESP-based claims use the paper's count: leaked within X samples when ESP >= 1/X.

# %%
trained = models == "family"  # the in-pipeline family; else pretrained models
runs = sorted(esp.loc[esp["kind"] != "public_text", "run"].unique())
crossed = trained and len(runs) >= claims["min_units"]
print(f"S1: {len(runs)} training runs; runs x sequences resampled: {crossed}")
esp = esp.assign(esp=np.exp(esp["log_esp"]))
ranks = esp[esp["kind"] != "public_text"].drop_duplicates("model").sort_values("model_rank")
largest, smallest = ranks["model"].iloc[-1], ranks["model"].iloc[0]
full_prefix = int(esp["prefix_len"].max())
kinds = [k for k in ("named_entity", "long_sequence", "public_text") if k in set(esp["kind"])]
family_kinds = [k for k in kinds if k != "public_text"]
analysed = {
    kind: esp[(esp["kind"] == kind) & ((esp["model"] == largest) | (kind == "public_text"))]
    for kind in kinds
}
RANDOM = [d for d in dict.fromkeys(esp["decoder"]) if d != "greedy"]


def slug(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def wide(frame: pd.DataFrame, columns: str, values: str = "log_esp") -> pd.DataFrame:
    """One row per (run, sequence)."""
    return frame.pivot_table(
        index=["run", "seq_id"], columns=columns, values=values, aggfunc="first"
    )


def family_run(kind: str) -> bool:
    return trained and kind != "public_text"


def seq_boot(values, statistic, index: pd.MultiIndex, kind: str, strata=None) -> Estimate:
    """Bootstrap over the sequences of (run, seq_id) rows; on the trained family with
    min_units runs or more, over runs x sequences (crossed)."""
    crossing = {"runs": index.get_level_values("run")} if crossed and family_run(kind) else {}
    groups = index.get_level_values("seq_id")
    return boot(np.asarray(values), statistic, groups=groups, strata=strata, **crossing)


def one_run(kind: str) -> str:
    """`missing` of a claim on the trained family when there are too few runs to cross."""
    few = f"; the artifacts hold {len(runs)}"
    return SEEDS + few if family_run(kind) and not crossed else ""


def where_model(kind: str, model: str | None = None) -> str:
    """The resampled units of a claim on `model` (default: the analysed largest one; "" for
    claims across model sizes)."""
    if kind == "public_text":
        return "public texts"
    units = f"sequences x {len(runs)} training runs" if crossed else "sequences"
    return f"{units} ({kind})" if model == "" else f"{units}, {model or largest}"


# %% [markdown]
# ## S1: decoders and the number of samples (§5.2, Fig. 2)


# %%
def greedy_margin(rows: np.ndarray) -> float:
    """Rows [greedy hit, ESP per randomized decoder]: the smallest greedy rate minus mean ESP."""
    return float((rows[:, 0].mean() - rows[:, 1:].mean(axis=0)).min())


def best_random_margin(rows: np.ndarray) -> float:
    """Rows [greedy hit, leaked-within-X flag per randomized decoder]: the largest share leaked
    by a randomized decoder minus greedy's extraction rate."""
    return float(rows[:, 1:].mean(axis=0).max() - rows[:, 0].mean())


for kind in kinds:
    by_decoder = wide(analysed[kind][analysed[kind]["prefix_len"] == full_prefix], "decoder")
    rows = by_decoder.index
    greedy_hit = (by_decoder["greedy"] >= 0).to_numpy(dtype=float)
    # With no greedy extraction at all, any ESP > 0 "beats" greedy: say so next to the verdict.
    no_greedy = "" if greedy_hit.any() else f"greedy extracts none of these {len(greedy_hit)}"
    for decoder in RANDOM:
        hits = (by_decoder[decoder] >= -math.log(20)).to_numpy(dtype=float)
        add(
            f"s1.random_beats_greedy_x20.{slug(decoder)}.{kind}",
            seq_boot(hits - greedy_hit, np.mean, rows, kind),
            paper=PAPER1,
            quote="if a targeted attacker samples each sequence even 20 times, it is enough to "
            "extract more sequences than is possible with greedy decoding",
            where="§5.2, Fig. 2",
            effect_name=f"share of sequences leaked within 20 samples under {decoder} (ESP >= "
            "1/20) minus greedy's extraction rate (paired difference of proportions)",
            direction="+",
            unit=where_model(kind),
            note=no_greedy,
            missing=one_run(kind),
        )
    first = np.c_[greedy_hit, np.exp(by_decoder[RANDOM].to_numpy())]
    add(
        f"s1.greedy_wins_single_sample.{kind}",
        seq_boot(first, greedy_margin, rows, kind),
        paper=PAPER1,
        quote="greedy decoding clearly outperforms all randomized decoding schemes",
        where="§5.2, Fig. 2 (first data point)",
        effect_name="smallest over the randomized decoders of greedy's extraction rate minus the "
        "decoder's mean ESP (the extraction rate of one sample)",
        direction="+",
        unit=where_model(kind),
        note=no_greedy,
        missing=one_run(kind),
    )
    at30 = np.c_[greedy_hit, (by_decoder[RANDOM].to_numpy() >= -math.log(30)).astype(float)]
    add(
        f"s1.extraction_rate_underestimates_x30.{kind}",
        seq_boot(at30, best_random_margin, rows, kind),
        paper=PAPER1,
        quote="Extraction Rate, the predominant metric used in prior quantification work, "
        "underestimates the threat of leakage",
        where="Abstract; §5.2 (30 samples)",
        effect_name="largest over the randomized decoders of the share leaked within 30 samples, "
        "minus greedy's extraction rate",
        direction="+",
        unit=where_model(kind),
        note=no_greedy,
        missing=one_run(kind),
    )

# %% [markdown]
# ## S1: prefix length and model size (§5.4-5.5, Tables 4-5)

# %%
for kind in kinds:
    sampled = analysed[kind][analysed[kind]["decoder"] == "sampling"]
    by_prefix = wide(sampled, "prefix_len")
    longer = np.exp(by_prefix.iloc[:, -1]) - np.exp(by_prefix.iloc[:, 0])
    add(
        f"s1.longer_prefix_on_average.{kind}",
        seq_boot(longer, np.mean, by_prefix.index, kind),
        paper=PAPER1,
        quote="on average, larger models and longer prefixes can extract more data",
        where="Abstract; §5.5",
        effect_name=f"mean ESP (regular sampling) with a {by_prefix.columns[-1]}-token prefix "
        f"minus a {by_prefix.columns[0]}-token prefix (paired)",
        direction="+",
        unit=where_model(kind),
        missing=one_run(kind),
    )
    shorter = (by_prefix.iloc[:, :-1].max(axis=1) > by_prefix.iloc[:, -1]).astype(float)
    add(
        f"s1.some_easier_with_shorter_prefix.{kind}",
        seq_boot(shorter, np.mean, by_prefix.index, kind),
        paper=PAPER1,
        quote="30.4−41.5% of our sequences are easier to extract with either shorter prefixes or "
        "smaller models",
        where="Abstract; §5.5, Table 5",
        effect_name="share of sequences whose ESP (regular sampling) is higher at some shorter "
        "prefix than at the full prefix; the null is no such sequence",
        direction="+",
        unit=where_model(kind),
        missing=one_run(kind),
    )

for kind in family_kinds:
    sampled = esp[(esp["kind"] == kind) & (esp["decoder"] == "sampling")]
    by_model = wide(sampled[sampled["prefix_len"] == full_prefix], "model_rank")
    larger = np.exp(by_model.iloc[:, -1]) - np.exp(by_model.iloc[:, 0])
    add(
        f"s1.larger_model_on_average.{kind}",
        seq_boot(larger, np.mean, by_model.index, kind),
        paper=PAPER1,
        quote="on average, larger models and longer prefixes can extract more data",
        where="Abstract; §5.4",
        effect_name=f"mean ESP (regular sampling, full prefix) of {largest} minus {smallest} "
        "(paired)",
        direction="+",
        unit=where_model(kind, model=""),
        missing=one_run(kind),
    )
    smaller = (by_model.iloc[:, :-1].max(axis=1) > by_model.iloc[:, -1]).astype(float)
    add(
        f"s1.some_easier_with_smaller_model.{kind}",
        seq_boot(smaller, np.mean, by_model.index, kind),
        paper=PAPER1,
        quote="a substantial percentage of samples (30.4−31.7%) are easier to extract with "
        "smaller models",
        where="§1; §5.4, Table 4",
        effect_name=f"share of sequences whose ESP (regular sampling) is higher on a smaller model "
        f"than on {largest}; the null is no such sequence",
        direction="+",
        unit=where_model(kind, model=""),
        missing=one_run(kind),
    )
    on_largest = sampled[(sampled["model"] == largest) & (sampled["prefix_len"] == full_prefix)]
    on_largest = on_largest.set_index(["run", "seq_id"])
    add(
        f"s0.related_work.duplication.{kind}",
        seq_boot(
            on_largest[["duplicates", "log_esp"]],
            lambda r: spearman(r[:, 0], r[:, 1]),
            on_largest.index,
            kind,
        ),
        paper=PAPER0,
        quote="various factors such as model size, data duplication, and prompt length increase "
        "memorization",
        where="S0 §5 (prior work it cites); tested on S1's planted sequences",
        effect_name=f"Spearman correlation over sequences of the duplicate count with log ESP "
        f"(regular sampling, {largest}, full prefix)",
        direction="+",
        unit=where_model(kind),
        missing=one_run(kind),
    )

if {"named_entity", "long_sequence"} <= set(kinds):
    decreasing = {}
    for kind in ("named_entity", "long_sequence"):
        series = wide(analysed[kind][analysed[kind]["decoder"] == "sampling"], "prefix_len")
        decreasing[kind] = (series.iloc[:, -1] < series.iloc[:, 0]).astype(float)
    rows, strata = two_samples(decreasing["named_entity"], decreasing["long_sequence"])
    both = decreasing["named_entity"].index.append(decreasing["long_sequence"].index)
    decreasing_estimate = seq_boot(rows, mean_contrast, both, "named_entity", strata=strata)
else:
    decreasing_estimate = NONE
add(
    "s1.decreasing_with_prefix_ne_vs_long",
    decreasing_estimate,
    paper=PAPER1,
    quote="when considering the extraction of longer sequences, this percentage drops",
    where="§5.5, Table 5 (overall decreasing trends)",
    effect_name="share of named entities whose ESP (regular sampling) is lower at the full prefix "
    "than at the shortest, minus the same share of 50-token sequences (two samples)",
    direction="+",
    unit=f"{where_model('named_entity')} (resampled within each kind)",
    missing=one_run("named_entity")
    if decreasing_estimate is not NONE
    else "named-entity and 50-token sequences",
)

# %% [markdown]
# ## S1: partial leakage of named entities (§5.3, Tables 1-2)

# %%
# s1_isp expands data/family's largest model only: one training run.
ISP_RUNS = ONE_RUN + " (s1_isp expands data/family only)" if trained else ""
isp = isp.assign(easier=(isp["approx"] > np.exp(isp["log_esp"])).astype(float))
easier = isp.pivot_table(index="seq_id", columns=["decoder", "n"], values="easier")
for n in (1, 2):
    column = ("top-k 5", n)
    add(
        f"s1.partial_not_easier_topk5.n{n}",
        boot(easier[column].dropna().to_numpy(), np.mean) if column in easier else NONE,
        paper=PAPER1,
        quote="a majority (85.25−94.82%) of Named Entities do not see an improvement in their "
        "likelihood of extraction even if we allow tokens to be mismatched",
        where="§5.3",
        effect_name=f"share of named entities with {n}-ISP > ESP under top-k 5; the paper says "
        "below one half",
        direction="-",
        null=0.5,
        unit=f"named entities, {largest}",
        missing=ISP_RUNS if column in easier else f"{n}-ISP under top-k 5",
    )
has_both = {("top-k 5", 1), ("top-k 5", 2)} <= set(easier.columns)
add(
    "s1.partial_more_mismatches_easier",
    boot((easier[("top-k 5", 2)] - easier[("top-k 5", 1)]).dropna().to_numpy(), np.mean)
    if has_both
    else NONE,
    paper=PAPER1,
    quote="as the number of tokens that we allow to be incorrect increases, the likelihood of "
    "observing a partial leakage also increases",
    where="§5.3",
    effect_name="share of named entities easier with 2 mismatches minus with 1 (top-k 5, paired "
    "difference of proportions)",
    direction="+",
    unit=f"named entities, {largest}",
    missing=ISP_RUNS if has_both else "1- and 2-ISP under top-k 5",
)
truncating = [("sampling", 1), ("top-k 10", 1), ("top-p 0.6", 1)]
has_table1 = set(truncating) <= set(easier.columns)
add(
    "s1.partial_sampling_vs_truncating",
    boot(
        easier[truncating].dropna().to_numpy(),
        lambda r: float(min(r[:, 0].mean() - r[:, 1].mean(), r[:, 0].mean() - r[:, 2].mean())),
    )
    if has_table1
    else NONE,
    paper=PAPER1,
    quote="even though the corresponding numbers for top-k and top-p are exact values, they are "
    "much lower",
    where="§5.3, Table 1",
    effect_name="smallest over {top-k 10, top-p 0.6} of the share of named entities easier with 1 "
    "mismatch under regular sampling (a lower bound, 90% head) minus under that decoder",
    direction="+",
    unit=f"named entities, {largest}",
    missing=ISP_RUNS if has_table1 else "1-ISP under sampling, top-k 10 and top-p 0.6",
)
topk_leaves = leaves[leaves["decoder"] == "top-k 5"]
for n in (1, 2):
    best = topk_leaves[topk_leaves["n"] == n].sort_values("log_p", ascending=False)
    best = best.drop_duplicates("seq_id")
    m = int(best["truth"].apply(len).max()) if len(best) else 4
    tail = tuple(range(m - n + 1, m + 1))
    trailing = best["positions"].apply(lambda p, tail=tail: tuple(int(v) for v in p) == tail)
    add(
        f"s1.partial_trailing_mismatch.n{n}",
        boot(trailing.to_numpy(dtype=float), np.mean) if len(best) else NONE,
        paper=PAPER1,
        quote="the most likely permutations are ones where either the last or last two tokens "
        "are incorrect",
        where="§5.3, Table 2",
        effect_name=f"share of named entities whose most likely {n}-mismatch partial match (top-k "
        f"5) has the last {n} token(s) wrong; the null is 1/C({m},{n}), every position set "
        "equally likely",
        direction="+",
        null=1 / math.comb(m, n),
        unit=f"named entities, {largest}",
        missing=ISP_RUNS if len(best) else "top-k 5 partial matches with non-zero probability",
    )

# %% [markdown]
# ## S1: token position (§5.6, Fig. 4) and the n-ISP bound (App. A)

# %%
first_last, first_last_rows = {}, {}
for kind in kinds:
    part = tp[
        (tp["kind"] == kind)
        & (tp["decoder"] == "sampling")
        & ((tp["model"] == largest) | (kind == "public_text"))
    ]
    by_position = part.pivot_table(index=["run", "seq_id"], columns="position", values="log_tp")
    first_last[kind] = np.exp(by_position.iloc[:, [0, -1]].to_numpy())
    first_last_rows[kind] = by_position.index
    add(
        f"s1.later_tokens_easier.{kind}",
        seq_boot(
            first_last[kind],
            lambda r: float(r[:, 1].mean() / r[:, 0].mean()),
            by_position.index,
            kind,
        ),
        paper=PAPER1,
        quote="earlier tokens in the target suffix are generally harder to extract than later ones",
        where="§5.6, Fig. 4",
        effect_name="average TP (regular sampling) of the last suffix token over the average TP "
        "of the first",
        direction="+",
        null=1.0,
        unit=where_model(kind),
        missing=one_run(kind),
    )


def log_ratio_contrast(rows: np.ndarray) -> float:
    """Rows [flag, TP first, TP last]: log(last/first) of flag 1 minus of flag 0 (averages)."""
    first = rows[:, 0] == 1
    ratio = [rows[m, 2].mean() / rows[m, 1].mean() for m in (first, ~first)]
    return float(np.log(ratio[0]) - np.log(ratio[1]))


if {"named_entity", "long_sequence"} <= set(first_last):
    flags = np.r_[
        np.ones(len(first_last["named_entity"])), np.zeros(len(first_last["long_sequence"]))
    ]
    rows = np.c_[flags, np.r_[first_last["named_entity"], first_last["long_sequence"]]]
    both = first_last_rows["named_entity"].append(first_last_rows["long_sequence"])
    position_contrast = seq_boot(rows, log_ratio_contrast, both, "named_entity", strata=flags)
else:
    position_contrast = NONE
add(
    "s1.later_tokens_easier_ne_vs_long",
    position_contrast,
    paper=PAPER1,
    quote="the final token for each Named Entity only gets 50+3=53 tokens of context and yet are, "
    "on average, an order of magnitude easier to extract",
    where="§5.6, Fig. 4",
    effect_name="log(last/first average TP) of named entities minus of 50-token sequences "
    "(regular sampling, two samples)",
    direction="+",
    unit=f"{where_model('named_entity')} (resampled within each kind)",
    missing=one_run("named_entity")
    if position_contrast is not NONE
    else "named-entity and 50-token sequences",
)

bound_slack = np.r_[
    exact["exact"] * (1 + 1e-5) + 1e-9 - exact["approx"],
    (exact["approx"] + exact["bound"]) * (1 + 1e-5) + 1e-9 - exact["exact"],
]
add(
    "s1.isp_bound_holds",
    worst_case(bound_slack, "(entity, expansion) checks") if len(exact) else NONE,
    paper=PAPER1,
    quote="gives us a strict cap on how large the risk of leakage in that particular scenario "
    "will be",
    where="App. A",
    effect_name="smallest slack of exact 1-ISP (full-vocabulary expansion) inside [approx, approx "
    "+ bound] (relative tolerance 1e-5)",
    direction="+",
    unit="checks (2 per entity × expansion setting)",
    missing="" if len(exact) else "exact 1-ISP rows (s1.isp.exact_sequences > 0)",
)

# %% [markdown]
# ## S4: DP-RAG (Grislain)
# Units are questions (one per disease) and planted facts. Accuracy is judged at each response
# budget of s4.budget.epsilons; the paper's own setting is epsilon ~ 5.

# %%
PAPER4 = "S4 (Grislain)"
S4 = paths.INTERIM / "s4" / "generate"
s4_responses = pd.read_parquet(S4 / "responses.parquet")
s4_planted = pd.read_parquet(S4 / "planted.parquet")
asked4 = s4_responses[(s4_responses["kind"] == "disease") & (s4_responses["decoder"] == "dp_rag")]
for epsilon, group in asked4.groupby("epsilon"):
    rows = group[["frequency", "correct"]].astype(float).to_numpy()
    add(
        f"s4.accuracy_rises_with_frequency.eps{epsilon:g}",
        boot(rows, lambda r: spearman(r[:, 0], r[:, 1])),
        paper=PAPER4,
        quote="The results show the accuracy becomes reasonable when at least 100 documents hold "
        "a similar piece of information.",
        where="Evaluation, Fig. 6",
        effect_name=f"Spearman correlation of a disease's number of documents with DP-RAG naming "
        f"it (response budget epsilon = {epsilon:g})",
        direction="+",
        unit="questions (one per disease)",
    )
first4 = s4_planted.loc[s4_planted["decoder"] == "dp_rag", "epsilon"].min()
pairs = s4_planted[
    (s4_planted["decoder"] == "rag") | (s4_planted["epsilon"] == first4)
].pivot_table(index="question_id", columns="decoder", values="log_prob")
add(
    "s4.censors_individual_knowledge",
    boot((pairs["dp_rag"] - pairs["rag"]).to_numpy() if len(pairs) else np.array([]), np.mean),
    paper=PAPER4,
    quote="Because DP-RAG protects privacy by making sure a result does not depend on one PU, it "
    "will, by design, censor every knowledge that is too specific about one individual.",
    where="Evaluation",
    effect_name=f"mean over planted one-document facts of log P_DP-RAG(fact) - log P_RAG(fact) "
    f"(exact, natural log; epsilon = {first4:g} vs the non-private RAG)",
    direction="-",
    unit="planted facts",
)

# %% [markdown]
# ## S2: privacy-aware decoding (Wang et al.)
# Units are attack prompts: each prompt's response under every defense is paired (same retrieved
# contexts), and its outcomes are 0/1 (Repeat / ROUGE Prompts: the response leaks one of its
# contexts) or its per-token NLL under the undefended model (log PPL). Counts in the paper's
# Table 1 are the number of prompts times the mean outcome, so a paired mean difference tests a
# count difference. Sweeps and ablations run on the sweep corpus only.

# %%
PAPER2 = "S2 (Wang et al.)"
S2 = paths.INTERIM / "s2"
s2_units = prompt_outcomes(
    pd.read_parquet(S2 / "index" / "prompts.parquet"),
    pd.read_parquet(S2 / "index" / "chunks.parquet"),
    pd.read_parquet(S2 / "index" / "secrets.parquet"),
    s2_responses := pd.read_parquet(S2 / "generate" / "responses.parquet"),
    min_words=leakage["repeat_min_words"],
    rouge_threshold=leakage["rouge_threshold"],
)
s2_units["nll_per_token"] = s2_units["nll"] / s2_units["tokens"].clip(lower=1)
s2_pad_default = json.loads((S2 / "generate" / "pad_settings.json").read_text())
OUTCOMES = {"repeat": "Repeat Prompts", "rouge": "ROUGE Prompts"}
table2 = s2_units[s2_units["family"] == "table"]


def prompt_differences(frame: pd.DataFrame, base: str, other: str, value: str) -> np.ndarray:
    """Per prompt: value(other) - value(base), over prompts that have both defenses."""
    matrix = settings_matrix(frame, "prompt_id", "defense", value)
    return paired_differences(matrix, base, other).to_numpy()


def s2_add(claim_id: str, differences: np.ndarray, **fields) -> None:
    add(claim_id, boot(differences, np.mean), paper=PAPER2, unit="attack prompts", **fields)


for corpus, frame in table2.groupby("corpus"):
    for outcome, label in OUTCOMES.items():
        for base in ("extraction", "summ", "dist", "static"):
            s2_add(
                f"s2.pad_leaks_less_than_{base}.{outcome}.{corpus}",
                prompt_differences(frame, base, "pad", outcome),
                quote="Across all datasets and metrics, PAD provides the most substantial "
                "reductions in both repeat and ROUGE-based privacy leakage compared to all "
                "baseline methods.",
                where="§4.2, Table 1",
                effect_name=f"mean over prompts of {label} outcome (0/1), PAD - {base} in "
                + corpus,
                direction="-",
            )
    s2_add(
        f"s2.pad_ppl_below_extraction.{corpus}",
        prompt_differences(frame, "extraction", "pad", "nll_per_token"),
        quote="The perplexity of outputs generated under PAD is generally lower than or "
        "comparable to the baselines.",
        where="§4.2, Table 1",
        effect_name=f"mean over prompts of per-token NLL (log PPL) under the undefended model, "
        f"PAD - Extraction ({corpus})",
        direction="-",
    )
    s2_add(
        f"s2.summ_costs_perplexity.{corpus}",
        prompt_differences(frame, "extraction", "summ", "nll_per_token"),
        quote="The Summ. baseline achieves notable reductions in privacy leakage, but this comes "
        "at the cost of increased perplexity.",
        where="§4.2, Table 1",
        effect_name=f"mean over prompts of per-token NLL, Summ. - Extraction ({corpus})",
        direction="+",
    )
    for outcome, label in (("rouge", "ROUGE Prompts outcome"), ("nll_per_token", "per-token NLL")):
        s2_add(
            f"s2.static_beats_dist.{outcome}.{corpus}",
            prompt_differences(frame, "dist", "static", outcome),
            quote="The Dist. and Static baselines offer incremental improvements, with Static "
            "generally outperforming Dist. in both privacy protection and utility preservation.",
            where="§4.2, Table 1",
            effect_name=f"mean over prompts of {label}, Static - Dist. ({corpus})",
            direction="-",
        )

sweep2 = s2_units[s2_units["corpus"] == sweep_corpus]
for ablation, quote, where in (
    ("no_sens", "Removing this module results in a measurable decrease in privacy protection.",
     "§4.3, Fig. 3 (No Sens.)"),
    ("no_calib", "context-aware noise calibration is essential for effective privacy "
     "protection, as its removal results in a notable degradation in performance.",
     "§4.3, Fig. 3 (No Calib.)"),
):  # fmt: skip
    for outcome, label in OUTCOMES.items():
        s2_add(
            f"s2.{ablation}_leaks_more.{outcome}",
            prompt_differences(sweep2, "pad", ablation, outcome),
            quote=quote,
            where=where,
            effect_name=f"mean over prompts of {label} outcome (0/1), {ablation} - PAD "
            f"({sweep_corpus})",
            direction="+",
        )


def sweep_matrix(family: str, value: str) -> pd.DataFrame:
    """[prompts x sweep values] of `value`; PAD's own row is the sweep's default point."""
    points = sweep2[sweep2["family"] == family]
    default = sweep2[sweep2["defense"] == "pad"].assign(value=s2_pad_default[family])
    return settings_matrix(pd.concat([points, default]), "prompt_id", "value", value)


for outcome, label in OUTCOMES.items():
    amplified = sweep_matrix("amplification", outcome)
    s2_add(
        f"s2.amplification_reduces_leakage.{outcome}",
        unit_trends(amplified).to_numpy(),
        quote="Increasing the amplification factor consistently enhances privacy protection",
        where="§4.4, Fig. 4",
        effect_name=f"mean over prompts of the Spearman correlation of the {label} outcome with "
        f"λ_amp ({sweep_corpus}; 0 for a prompt whose outcome never changes)",
        direction="-",
    )
    ends = {1.0, 5.0, 10.0}
    if ends <= set(amplified.columns):
        gains = (amplified[1.0] - amplified[5.0]) - (amplified[5.0] - amplified[10.0])
    else:
        gains = pd.Series(dtype=float)
    s2_add(
        f"s2.amplification_diminishing_returns.{outcome}",
        gains.dropna().to_numpy(),
        quote="The most substantial gains are achieved as amplification increases from 1.0 to "
        "5.0 [...] Beyond an amplification factor of 5.0, further increases yield only modest "
        "additional improvements",
        where="§4.4, Fig. 4",
        effect_name=f"mean over prompts of (o(1) - o(5)) - (o(5) - o(10)), o = {label} "
        f"outcome at λ_amp ({sweep_corpus})",
        direction="+",
        missing="" if ends <= set(amplified.columns) else "λ_amp = 1, 5 and 10 in the sweep",
    )
    s2_add(
        f"s2.epsilon_raises_leakage.{outcome}",
        unit_trends(sweep_matrix("epsilon", outcome)).to_numpy(),
        quote="The ε parameter governs the formal privacy guarantee, with lower values providing "
        "stronger protection at the expense of utility.",
        where="§4.4, Fig. 5",
        effect_name=f"mean over prompts of the Spearman correlation of the {label} outcome with "
        f"ε ({sweep_corpus})",
        direction="+",
    )
s2_add(
    "s2.epsilon_lowers_perplexity",
    unit_trends(sweep_matrix("epsilon", "nll_per_token")).to_numpy(),
    quote="The ε parameter governs the formal privacy guarantee, with lower values providing "
    "stronger protection at the expense of utility.",
    where="§4.4, Fig. 5",
    effect_name=f"mean over prompts of the Spearman correlation of per-token NLL with ε "
    f"({sweep_corpus})",
    direction="-",
)

shortest, longest = min(accounting["lengths"]), max(accounting["lengths"])
per_token = []
for r in s2_responses[s2_responses["defense"] == "pad"].itertuples():
    if len(r.sigma) >= longest:
        cost = [
            response_budget(r.sigma[:n], r.sensitivity[:n], np.asarray(r.protected[:n]) > 0.5,
                            accounting["alpha"], accounting["delta"]).epsilon_relaxed / n
            for n in (shortest, longest)
        ]  # fmt: skip
        per_token.append(cost[1] - cost[0])
add(
    "s2.epsilon_per_token_falls_with_length",
    boot(np.asarray(per_token), np.mean),
    paper=PAPER2,
    quote="Both Llama and Pythia models demonstrate decreasing per-token privacy cost with longer "
    "sequences, reflecting favorable composition properties.",
    where="§4.5, Fig. 6a",
    effect_name=f"mean over PAD responses of ε/L at L = {longest} minus at L = {shortest} "
    f"(γ-relaxed, α = {accounting['alpha']:g}, δ = {accounting['delta']:g})",
    direction="-",
    unit="PAD responses",
)

# %% [markdown]
# ## S3: domain privacy (Safe generation in multi-domain dialogs)
# Units are the attack prompts (`domain` test dialogs): every target continues the same prompts,
# so each target's LiRa successes are paired with every other's prompt by prompt. A prompt's
# outcome is its successes and non-empty samples (one pick per leaked domain j, by the score
# against M_{D without d_j}; a pick succeeds when F_j flags it, as in render_s3), and a target's
# rate is successes / non-empty samples over the drawn prompts. Domain privacy C-hat per policy and
# leaked domain is resampled over prompts with the reference's samples of the same prompts (add-
# `pseudocount` rates, as in render_s3). Test perplexity has no prompt: its unit is the held-out
# test dialog, scored by every model, so a perplexity contrast is a paired difference of
# token-weighted mean NLL (log perplexity) over the drawn dialogs.
#
# Each claim compares fine-tuned targets, so it needs an interval over training runs (DESIGN §8):
# with `s3.seeds` >= claims.min_units runs, runs and prompts (or dialogs) are resampled as
# crossed factors, run k of one target paired with run k of the other (both trained with seed +
# k) and every run's samples of a prompt with the one reference's; with fewer runs, each claim
# stays inconclusive whatever the prompts say (the note gives that reading). The classifier
# policy stands in for the paper's RoBERTa (MiniLM windows + logistic regression), and the
# embedded profile fine-tunes a tiny family model on synthetic dialogs, not GPT-2 on MultiDoGo: the
# "For RoBERTa" claims test the stand-in, in every profile. The smoke profile's few prompts give
# no interval at all (fewer than claims.min_units).

# %%
PAPER3 = "S3 (Safe generation in multi-domain dialogs)"
S3 = paths.INTERIM / "s3"
s3_log = pd.read_parquet(S3 / "train" / "train_log.parquet")
s3_samples = pd.read_parquet(S3 / "attack" / "samples.parquet")
s3_nll = pd.read_parquet(S3 / "attack" / "test_nll.parquet")
leaked3 = [
    c.removeprefix("nll_without_") for c in s3_samples.columns if c.startswith("nll_without_")
]
references3 = s3_log.dropna(subset=["without"]).set_index("without")["model"].to_dict()
ONLY, POLICIES3 = f"{domain} Only", ("keyword", "classifier")
REDACTED3 = ("Pub+Redacted", "JFT", "Redaction Schedule")  # trained on redacted data, in part
TARGETS3 = (ONLY, "Public", "Private", *REDACTED3)
STAND_IN = "the classifier policy is a MiniLM + logistic-regression stand-in for RoBERTa"
s3_runs = sorted(s3_log["run"].unique())
s3_crossed = len(s3_runs) >= claims["min_units"]
print(f"S3: {len(s3_runs)} training runs; runs x prompts resampled: {s3_crossed}")
S3_MISSING = "" if s3_crossed else SEEDS + f"; the artifacts hold {len(s3_runs)}"
s3_used = s3_runs if s3_crossed else [0]


def s3_model(target: str, policy: str, run: int = 0) -> str:
    """The model of `target` under `policy` (its own redacted version where it has one) in
    training run `run`."""
    of_policy = s3_log["policy"].isna() | (s3_log["policy"] == policy)
    rows = s3_log[(s3_log["target"] == target) & of_policy & (s3_log["run"] == run)]
    return rows["model"].iloc[0] if len(rows) == 1 else ""


def s3_units(units: str) -> str:
    return f"{units} x {len(s3_runs)} training runs" if s3_crossed else units


def s3_slug(name: str) -> str:
    return name.lower().replace("+", "_").replace(" ", "_")


def prompt_successes(model: str, policy: str) -> pd.DataFrame:
    """[prompts x (successes, nonempty)] of `model`'s samples judged by `policy`."""
    drawn = s3_samples[s3_samples["model"] == model].reset_index(drop=True)
    nonempty = ~drawn["empty"].to_numpy()
    scores = {j: lira_scores(drawn["nll_self"], drawn[f"nll_without_{j}"]) for j in leaked3}
    flags = {j: drawn[f"leak_{policy}_{j}"].to_numpy() for j in leaked3}
    picks = lira_picks(scores, flags, nonempty, drawn["prompt_id"].tolist(), per_prompt=1)
    counts = pd.DataFrame({"successes": picks[OVERALL].success, "nonempty": nonempty})
    return counts.groupby(drawn["prompt_id"]).sum()


def ratio_difference(rows: np.ndarray) -> float:
    """Rows [count a, total a, count b, total b] per unit: sum(count b) / sum(total b) minus
    sum(count a) / sum(total a), e.g. success rate b - success rate a."""
    return float(rows[:, 2].sum() / rows[:, 3].sum() - rows[:, 0].sum() / rows[:, 1].sum())


def s3_paired(a: tuple[str, str], b: tuple[str, str], rows_of) -> Estimate:
    """`ratio_difference` of (target, policy) b against a. rows_of(model, policy): a model's rows
    [count, total] indexed by unit. The sides are paired per unit and run (s3_used's runs), and
    units are resampled, crossed with runs when s3_crossed."""
    if not all(s3_model(*side, run) for side in (a, b) for run in s3_used):
        return NONE
    per_run = [
        pd.concat([rows_of(s3_model(*side, run), side[1]) for side in (a, b)], axis=1)
        for run in s3_used
    ]
    rows = pd.concat(per_run, keys=s3_used, names=["run", "unit"])
    crossing = {"runs": rows.index.get_level_values("run")} if s3_crossed else {}
    groups = rows.index.get_level_values("unit")
    return boot(rows.to_numpy(dtype=float), ratio_difference, groups=groups, **crossing)


def s3_contrast(a: tuple[str, str], b: tuple[str, str]) -> Estimate:
    """Success rate of (target, policy) b minus a's, paired per prompt (and run)."""
    return s3_paired(a, b, prompt_successes)


def s3_add(claim_id: str, estimate: Estimate, *, unit: str, **fields) -> None:
    add(claim_id, estimate, paper=PAPER3, missing=S3_MISSING, unit=s3_units(unit), **fields)


for target in TARGETS3:
    s3_add(
        f"s3.classifier_finds_more_leaks.{s3_slug(target)}",
        s3_contrast((target, "keyword"), (target, "classifier")),
        quote="LiRa attacks are more successful w.r.t. RoBERTa policy compared to the keyword, "
        "because the former has higher recall and lower precision.",
        where="Results, Fig. 1",
        effect_name=f"LiRa success rate of {target} under the classifier policy minus under the "
        "keyword policy (paired per prompt"
        + ("; each policy's own redacted model)" if target in REDACTED3 else "; the same samples)"),
        direction="+",
        unit="attack prompts",
        note=f"{STAND_IN}; the 'because' (recall, precision) is not tested",
    )
for target in ("Public", "Private", *REDACTED3):
    kept = target in ("Public", "Private")
    s3_add(
        f"s3.{'not_' if kept else ''}below_{s3_slug(ONLY)}.{s3_slug(target)}",
        s3_contrast((ONLY, "classifier"), (target, "classifier")),
        quote=f"For RoBERTa, all but Private and Public have LiRa success rate lower than the "
        f"{domain} Only baseline.",
        where="Results, Fig. 1 (classifier policy: the RoBERTa stand-in)",
        effect_name=f"LiRa success rate of {target} minus {ONLY}'s, classifier policy (paired per "
        "prompt)",
        direction="+" if kept else "-",
        unit="attack prompts",
        note=f"{STAND_IN}; the sentence says only 'not lower', so an interval touching 0 agrees "
        "with it too"
        if kept
        else STAND_IN,
    )
for policy in POLICIES3:
    for target in REDACTED3:
        s3_add(
            f"s3.redaction_leaks_less_than_public.{s3_slug(target)}.{policy}",
            s3_contrast(("Public", policy), (target, policy)),
            quote="Domain privacy becomes feasible when models finetuned on redacted datasets (at "
            "least partially).",
            where="Results, Fig. 1",
            effect_name=f"LiRa success rate of {target} minus Public's, {policy} policy (paired "
            "per prompt)",
            direction="-",
            unit="attack prompts",
        )
    public_runs = {s3_model("Public", policy, run): run for run in s3_used}
    public3 = s3_samples[s3_samples["model"].isin(public_runs)]
    crossing = {"target_runs": public3["model"].map(public_runs).tolist()} if s3_crossed else {}
    for j in leaked3:
        reference3 = s3_samples[s3_samples["model"] == references3[j]]
        s3_add(
            f"s3.public_not_domain_private.{policy}.{j}",
            domain_privacy_interval(
                public3[f"leak_{policy}_{j}"].to_numpy(),
                reference3[f"leak_{policy}_{j}"].to_numpy(),
                ~public3["empty"].to_numpy(),
                ~reference3["empty"].to_numpy(),
                public3["prompt_id"].tolist(),
                reference3["prompt_id"].tolist(),
                pseudocount=pseudocount,
                **claims,
                **crossing,
            ),
            quote="Vanilla finetuning like Public is insufficient for domain privacy.",
            where="Results; the definition of C-domain privacy",
            effect_name=f"C-hat of Public for {j}: its share of samples F_{j} flags over the share "
            f"of M_(D without {j})'s ({policy} policy, add-{pseudocount:g} rates, prompts paired)",
            direction="+",
            null=1.0,
            unit="attack prompts",
        )


dialog_nll3 = s3_nll.set_index(["model", "dialog"])[["nll", "tokens"]]


def ppl_contrast(a: tuple[str, str], b: tuple[str, str]) -> Estimate:
    """Log test perplexity of (target, policy) b minus a's (rows [NLL, tokens] per dialog),
    paired per held-out dialog (and run)."""
    return s3_paired(a, b, lambda model, _policy: dialog_nll3.loc[model])


for policy in POLICIES3:
    for target, direction, better in (("JFT", "-", "better"), ("Redaction Schedule", "+", "worse")):
        s3_add(
            f"s3.{s3_slug(target)}_{better}_perplexity_than_pub_redacted.{policy}",
            ppl_contrast(("Pub+Redacted", policy), (target, policy)),
            quote="While having comparable domain privacy, JFT has better perplexity and "
            "Redaction Schedule has worse perplexity compared to Pub+Redacted.",
            where="Results, Fig. 1",
            effect_name=f"log test perplexity of {target} minus Pub+Redacted's, {policy} policy "
            "(token-weighted mean NLL, paired per held-out dialog)",
            direction=direction,
            unit="held-out test dialogs",
            note="'comparable domain privacy' is no direction and is not tested",
        )

# %% [markdown]
# ## Save: figures/claims/claims.{md,csv}, metrics/claims.json

# %%
OUT.mkdir(parents=True, exist_ok=True)
frame = table(found)
frame.to_csv(OUT / "claims.csv", index=False)
(OUT / "claims.md").write_text(markdown(found, claims["alpha"]))
paths.METRICS.mkdir(parents=True, exist_ok=True)
(paths.METRICS / "claims.json").write_text(metrics_json(found))
print(tally(found))
frame[["id", "effect", "ci_low", "ci_high", "verdict"]]
