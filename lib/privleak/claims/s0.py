"""S0 (Flemings et al.) claims: context influence τ, CID and its bounded variant.

A context is (corpus, example); every model's and setting's response to it is one unit, so a
context's rows are resampled together. Claims on models trained here (the tiny family, the
fine-tuned model) hold one training run and stay inconclusive (docs/design.md §8).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import NONE, Finding
from privleak.claims.stats import (
    NAN,
    PLUS_MINUS_ONE,
    UNBOUNDED,
    Estimate,
    mean_contrast,
    paired_differences,
    settings_matrix,
    slope,
    spearman,
    two_samples,
    unit_trends,
    worst_case,
)

Boot = Callable[..., Estimate]
PROMPT_FLAGS = (("rouge", "Rouge Prompts"), ("repeat", "Repeat Prompts"))


def load(interim: Path) -> dict[str, pd.DataFrame]:
    """S0's artifacts under data/interim/s0, with a `context` key (corpus/example) and the 0/1
    prompt outcomes as floats."""
    s0 = interim / "s0"
    text = pd.read_parquet(s0 / "text" / "text_metrics.parquet")
    generations = pd.read_parquet(s0 / "generate" / "generations.parquet")
    return {
        "generations": generations.assign(
            context=generations["corpus"] + "/" + generations["example"]
        ),
        "text": text.assign(
            context=text["corpus"] + "/" + text["example"],
            repeat=text["repeat_prompt"].astype(float),
            rouge=text["rouge_prompt"].astype(float),
        ),
        "ngram": pd.read_parquet(s0 / "ngram" / "ngram.parquet"),
        "bounded": pd.read_parquet(s0 / "ngram" / "bounded.parquet"),
        "family": pd.read_parquet(s0 / "family" / "responses.parquet"),
        "family_grams": pd.read_parquet(s0 / "family" / "ngram.parquet"),
    }


def context_groups(index) -> list[str]:
    """The context of each (model, context) key: a context's rows are resampled together."""
    return [key[1] for key in index]


def trend_estimate(frame, setting, value, boot: Boot, trend=slope, x=None) -> Estimate:
    """Mean over (model, context) of the trend of `value` over `setting`; contexts resampled."""
    matrix = settings_matrix(frame, ["model", "context"], setting, value)
    trends = unit_trends(matrix, trend, x)
    return boot(trends.to_numpy(), np.mean, groups=context_groups(trends.index))


def pair_estimate(frame, setting, value, a, b, boot: Boot) -> Estimate:
    """Mean over (model, context) of value(b) - value(a); NONE when a setting is absent."""
    matrix = settings_matrix(frame, ["model", "context"], setting, value)
    if a not in matrix or b not in matrix:
        return NONE
    diffs = paired_differences(matrix, a, b)
    return boot(diffs.to_numpy(), np.mean, groups=context_groups(diffs.index))


def model_pair(frame: pd.DataFrame, value: str, a, b, boot: Boot) -> Estimate:
    """Mean over contexts of value(model b) - value(model a), each averaged over λ."""
    matrix = settings_matrix(frame, "context", "model", value)
    if a not in matrix or b not in matrix:
        return NONE
    return boot(paired_differences(matrix, a, b).to_numpy(), np.mean)


def first_tokens_gap(generations: pd.DataFrame) -> pd.Series:
    """Per response longer than 10 tokens, keyed (model, context, λ): mean per-token τ at
    positions < 10 minus at positions >= 10 (Fig. 2c's statistic)."""
    gaps = {}
    for row in generations.itertuples():
        taus = np.asarray(row.tau_tokens, dtype=float)
        if taus.size > 10:  # a response needs tokens on both sides of position 10
            gaps[(row.model, row.context, row.lam)] = taus[:10].mean() - taus[10:].mean()
    return pd.Series(gaps, dtype=float)


def peak_by_n_spearman(rows: np.ndarray) -> float:
    """Rows [n, i, τ] of the drawn contexts: Spearman of n with the peak over i of the mean
    curve τ̂_{i,n} (Fig. 3's statistic)."""
    keys, inverse = np.unique(rows[:, :2], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    means = np.bincount(inverse, rows[:, 2]) / np.bincount(inverse)
    peaks = pd.Series(means).groupby(keys[:, 0]).max()
    return spearman(peaks.index.to_numpy(), peaks.to_numpy())


def bounded_slack(bounded: pd.DataFrame) -> np.ndarray:
    """[2 x responses × ε] slack of Alg. 1's guarantee: ε - max per-token τ_{i,n}, and ε/2 - max
    per-token τ_|D| (tolerance 1e-5); one negative value breaks it."""
    return np.r_[
        bounded["eps"] + 1e-5 - bounded["max_tau_ngram_token"],
        bounded["eps"] / 2 + 1e-5 - bounded["max_tau_whole_token"],
    ]


def lambda_findings(main: pd.DataFrame, sweep_lam: pd.DataFrame, boot: Boot, faith_note: str):
    """Tables 2-3 and Fig. 8: τ, regurgitation, utility, faithfulness and similarity over λ."""
    lams = sorted(main["lam"].unique())
    low, high = lams[0], lams[-1]
    yield Finding("s0.lambda.influence", trend_estimate(main, "lam", "tau", boot))
    for flag, name in PROMPT_FLAGS:
        yield Finding(
            "s0.lambda.{flag}_prompts",
            pair_estimate(main, "lam", flag, low, high, boot),
            {"flag": flag, "name": name, "low_lam": low, "high_lam": high},
        )
    yield Finding(
        "s0.lambda.utility_at_low_lambda",
        pair_estimate(main, "lam", "rouge_l_f1", 1.0, 0.5, boot),
        missing="" if {0.5, 1.0} <= set(lams) else "λ = 0.5 and λ = 1 in s0.lams",
    )
    yield Finding(
        "s0.lambda.faithfulness",
        trend_estimate(sweep_lam, "lam", "faithfulness", boot),
        note=faith_note,
    )
    above = sweep_lam[sweep_lam["lam"] > 1.25].assign(band="above")
    at_one = sweep_lam[np.isclose(sweep_lam["lam"], 1.0)].assign(band="one")
    yield Finding(
        "s0.lambda.similarity_above_1.25",
        pair_estimate(pd.concat([above, at_one]), "band", "rouge_l_f1", "one", "above", boot),
        missing="" if len(above) and len(at_one) else "sweep λ values above 1.25 and λ = 1",
    )


def temperature_findings(sweep_t: pd.DataFrame, boot: Boot, faith_note: str):
    """Fig. 7: τ, similarity and faithfulness over the temperature T at λ = 1."""
    yield Finding("s0.temperature.influence", trend_estimate(sweep_t, "temperature", "tau", boot))
    yield Finding(
        "s0.temperature.similarity", trend_estimate(sweep_t, "temperature", "rouge_l_f1", boot)
    )
    cold = sweep_t[sweep_t["temperature"] < 0.4].assign(band="below")
    warm_ts = sorted(t for t in sweep_t["temperature"].unique() if t >= 0.4)
    warm = sweep_t[sweep_t["temperature"] == (warm_ts[0] if warm_ts else NAN)].assign(band="above")
    yield Finding(
        "s0.temperature.faithfulness_below_0.4",
        pair_estimate(pd.concat([cold, warm]), "band", "faithfulness", "above", "below", boot),
        missing="" if len(cold) and len(warm) else "sweep temperatures below and above 0.4",
        note=faith_note,
    )


def size_findings(generations, family, boot: Boot, one_run: str):
    """Fig. 2: context size (2b), response position (2c) and model size (2a)."""
    sizes = generations[generations["experiment"] == "context_size"]
    size_values = sorted(sizes["context_limit"].unique())
    small = sizes.assign(band=np.where(sizes["context_limit"] <= 32, "small", "large"))
    yield Finding(
        "s0.context_size.small_contexts",
        pair_estimate(small, "band", "tau", "large", "small", boot),
        missing=""
        if min(size_values) <= 32 < max(size_values)
        else "s0.context_sizes.sizes on both sides of 32",
    )
    middle = sizes[sizes["context_limit"].between(32, 256)]
    middle_sizes = sorted(middle["context_limit"].unique())
    yield Finding(
        "s0.context_size.growth_32_to_256",
        trend_estimate(middle, "context_limit", "tau", boot, x=np.log2(middle_sizes))
        if len(middle_sizes) >= 2
        else NONE,
        missing="" if len(middle_sizes) >= 2 else ">= 2 context sizes in [32, 256]",
    )
    gaps = first_tokens_gap(generations[generations["experiment"] == "main"])
    yield Finding(
        "s0.position.first_10_tokens",
        boot(gaps.to_numpy(), np.mean, groups=context_groups(gaps.index)),
    )
    by_size = unit_trends(settings_matrix(family, "example", "parameters", "tau"), spearman)
    yield Finding(
        "s0.model_size.influence",
        boot(by_size.to_numpy(), np.mean, bounds=PLUS_MINUS_ONE),
        missing=one_run,
    )


def ngram_findings(ngram, family_grams, generations, bounded, boot: Boot):
    """Figs. 3-4 (n-gram influence), Theorem 3.1 and the bounded-CID guarantee (Alg. 1)."""
    several_ns = ngram["n"].nunique() >= 2
    yield Finding(
        "s0.ngram.peak_grows_with_n",
        boot(
            ngram[["n", "i", "tau"]].to_numpy(),
            peak_by_n_spearman,
            groups=ngram["example"],
            bounds=PLUS_MINUS_ONE,
        )
        if several_ns
        else NONE,
        missing="" if several_ns else ">= 2 values in s0.ngram.ns",
    )
    early = unit_trends(settings_matrix(ngram, ["example", "n"], "i", "tau"), spearman)
    yield Finding(
        "s0.ngram.earlier_ngrams_peak",
        boot(
            early.to_numpy(), np.mean, groups=[key[0] for key in early.index], bounds=PLUS_MINUS_ONE
        ),
    )
    by_size = unit_trends(settings_matrix(family_grams, ["example", "size"], "i", "tau"), spearman)
    yield Finding(
        "s0.ngram.earlier_ngrams_peak_every_size",
        boot(
            by_size.to_numpy(),
            np.mean,
            groups=[key[0] for key in by_size.index],
            bounds=PLUS_MINUS_ONE,
        ),
        {"n": int(family_grams["n"].iloc[0]) if len(family_grams) else "n/a"},
    )
    main = generations[generations["experiment"] == "main"]
    tokens = main[main["lam"] > 0].explode(["tau_tokens", "pmi"])
    token_rows = np.c_[
        tokens["tau_tokens"].astype(float), tokens["lam"] * tokens["pmi"].astype(float).abs()
    ]
    yield Finding(
        "s0.theorem31.tau_tracks_lambda_pmi",
        boot(
            token_rows,
            lambda r: spearman(r[:, 0], r[:, 1]),
            groups=tokens["context"],
            bounds=PLUS_MINUS_ONE,
        ),
    )
    yield Finding(
        "s0.bounded_cid.within_eps", worst_case(bounded_slack(bounded), "(response, bound) checks")
    )


def knowledge_findings(text: pd.DataFrame, main: pd.DataFrame, boot: Boot, one_run: str):
    """§4.2-4.3: parametric knowledge (fine-tuned on the contexts), OPT vs GPT-Neo, instruction
    tuning and the corpora."""
    tuned = text[text["source"] == "finetune"]
    seen = tuned[tuned["seen"].astype(bool)] if len(tuned) else tuned
    no_tuned = "" if len(seen) else "s0_finetune responses (s0.finetune.enabled)"
    yield Finding(
        "s0.known_context.influence",
        model_pair(seen, "tau", "base", "finetuned", boot),
        missing=no_tuned or one_run,
    )
    for flag, name in PROMPT_FLAGS:
        yield Finding(
            "s0.known_context.{flag}_prompts",
            model_pair(seen, flag, "base", "finetuned", boot),
            {"flag": flag, "name": name},
            missing=no_tuned or one_run,
        )
    names = list(dict.fromkeys(main["model"]))
    opt = next((m for m in names if "opt-1.3b" in m.lower()), None)
    neo = next((m for m in names if "gpt-neo-1.3b" in m.lower()), None)
    no_pair = (
        "" if opt and neo else "OPT-1.3B and GPT-Neo-1.3B responses (the paper profile's s0.lms)"
    )
    pubmed = main[main["corpus"] == "pubmedqa"]
    yield Finding(
        "s0.opt_vs_neo.influence",
        model_pair(pubmed, "tau", neo, opt, boot) if not no_pair else NONE,
        missing=no_pair,
    )
    yield Finding(
        "s0.opt_vs_neo.rouge_prompts",
        model_pair(pubmed, "rouge", opt, neo, boot) if not no_pair else NONE,
        missing=no_pair,
    )
    yield Finding(
        "s0.instruction_tuned.influence",
        NONE,
        missing="a pre-trained and an instruction-tuned version of one model in s0.lms",
    )
    per_corpus = main.groupby(["corpus", "context"])[["tau", "repeat"]].mean().reset_index()
    cnn, pub = (per_corpus[per_corpus["corpus"] == c] for c in ("cnn_dm", "pubmedqa"))
    both = len(cnn) and len(pub)
    bounds = {"tau": UNBOUNDED, "repeat": PLUS_MINUS_ONE}  # a difference of two shares
    for value, label in (("tau", "τ_|D|"), ("repeat", "share of Repeat Prompts")):
        rows, strata = two_samples(cnn[value], pub[value])
        yield Finding(
            "s0.corpus.summarization_vs_qa_{value}",
            boot(rows, mean_contrast, strata=strata, bounds=bounds[value]) if both else NONE,
            {"value": value, "label": label},
            missing="" if both else "both corpora in s0.corpora",
        )


def findings(frames: dict[str, pd.DataFrame], boot: Boot, one_run: str) -> list[Finding]:
    """Every S0 claim on `load`'s frames. one_run: the `missing` text of claims on a model
    trained here once."""
    text, generations = frames["text"], frames["generations"]
    main = text[(text["source"] == "generate") & (text["experiment"] == "main")]
    sweep = text[(text["source"] == "generate") & (text["experiment"] == "sweep")]
    default_t = float(main["temperature"].iloc[0])
    faith_kind = str(text["faithfulness_kind"].iloc[0])
    faith_note = (
        "" if faith_kind.startswith("factkb") else f"faithfulness is the {faith_kind} proxy"
    )
    return [
        *lambda_findings(
            main, sweep[np.isclose(sweep["temperature"], default_t)], boot, faith_note
        ),  # Fig. 8: λ varies at the default T
        *temperature_findings(sweep[np.isclose(sweep["lam"], 1.0)], boot, faith_note),
        *size_findings(generations, frames["family"], boot, one_run),
        *ngram_findings(
            frames["ngram"], frames["family_grams"], generations, frames["bounded"], boot
        ),
        *knowledge_findings(text, main, boot, one_run),
    ]
