"""S2 (Wang et al.) claims: privacy-aware decoding (PAD) against RAG extraction.

Units are attack prompts: each prompt's response under every defense is paired (same retrieved
contexts). Leakage is judged on continuous per-prompt effects, the binary Repeat / ROUGE Prompts
counts staying in Table 1 (with 0-8 leaking prompts of a corpus they have no power): the longest
run of response words copied from one of the prompt's contexts ("repeat", Repeat's continuous
form) and the best ROUGE-L score of the headline rule against them ("rouge"). Fluency is the log
of the paper's PPL: the response's mean NLL per token alone under the fixed evaluator
(`metrics.fluency`). Sweeps and ablations run on the sweep corpus only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.claims.registry import NONE, Finding
from privleak.claims.stats import (
    PLUS_MINUS_ONE,
    Estimate,
    paired_differences,
    settings_matrix,
    unit_trends,
)
from privleak.metrics.rag_leakage import cued_secrets, prompt_outcomes, with_fluency
from privleak.pad import optimal_response_budget

Boot = Callable[..., Estimate]
OUTCOMES = {
    "repeat": ("longest_run", "longest copied run (words; Repeat Prompts' continuous form)"),
    "rouge": ("rouge_score", "best ROUGE-L score of the headline rule (ROUGE Prompts' continuous "
                             "form)"),
}  # fmt: skip
LOG_PPL = "log_ppl"
MATCHED = "static_matched"  # s2_matched's defense: Static at PAD's nominal ε, Δ = 1 a step
UNMATCHED = (
    "a finite Static σ at PAD's nominal ε (this corpus's median PAD response screened every "
    "step, so its ε is the accountant's floor)"
)
PAPER_EVALUATOR = "EleutherAI/pythia-6.9b"  # PAD's evaluation code
PARAPHRASED = (
    "Summ. as Zeng et al. define it (summary.style: extract); this run condensed each document "
    "by paraphrase, ours"
)
DIST_THRESHOLD = (
    "Dist.'s threshold (s2.<profile>.distance.table, L2) is ours: the paper sweeps 0-1.2 and "
    "states none for Table 1, so a contrast with Dist. rests on it as much as on the methods"
)
CONTEXT_REMOVED = (
    "{base} removes text from the prompt, while PAD keeps every retrieved document and adds "
    "almost no noise (σ_min) at the confident, large-margin steps a verbatim copy is made of"
)
NO_SENS = (
    "a No Sens. variant the paper defines: it does not say what replaces Δ_t without the "
    "sensitivity module and the official code has no such switch; ours sets Δ_t = 1, the "
    "bound's worst case, which adds at least PAD's noise at every step, so it could leak more "
    "only by chance"
)


def evaluator_note(evaluator: str) -> str:
    """The caveat of a PPL claim scored by another evaluator than PAD's."""
    if evaluator == PAPER_EVALUATOR:
        return ""
    return f"PPL evaluator {evaluator} stands in for PAD's {PAPER_EVALUATOR}"


def load(interim: Path, leakage: Mapping) -> dict:
    """Per-prompt outcomes (`prompt_outcomes` with the leakage params) with the evaluator's
    fluency (`with_fluency`), the responses (s2_generate's, then s2_matched's Static at PAD's
    nominal ε), the matched σ per corpus and PAD's default settings, from data/interim/s2."""
    s2 = interim / "s2"
    responses = pd.concat(
        [pd.read_parquet(s2 / stage / "responses.parquet") for stage in ("generate", "matched")],
        ignore_index=True,
    )
    units = prompt_outcomes(
        pd.read_parquet(s2 / "index" / "chunks.parquet"),
        pd.read_parquet(s2 / "index" / "secrets.parquet"),
        responses,
        min_words=leakage["repeat_min_words"],
        rouge_rule=leakage["rouge_rule"],
        rouge_thresholds=leakage["rouge_thresholds"],
    )
    scored = pd.read_parquet(s2 / "perplexity" / "responses.parquet")
    return {
        "units": with_fluency(units, scored),
        "esp": pd.read_parquet(s2 / "generate" / "esp.parquet"),
        "evaluator": str(scored["evaluator"].iloc[0]),
        "responses": responses,
        "matched": pd.read_parquet(s2 / "matched" / "sigmas.parquet"),
        "pad_default": json.loads((s2 / "generate" / "pad_settings.json").read_text()),
        "summary_style": json.loads((s2 / "generate" / "setup.json").read_text())["summary_style"],
    }


def prompt_differences(frame: pd.DataFrame, base: str, other: str, value: str) -> np.ndarray:
    """Per prompt: value(other) - value(base), over prompts that have both defenses."""
    matrix = settings_matrix(frame, "prompt_id", "defense", value)
    return paired_differences(matrix, base, other).to_numpy()


def sweep_matrix(sweep: pd.DataFrame, family: str, value: str, default: float) -> pd.DataFrame:
    """[prompts x sweep values] of `value`; PAD's own rows are the sweep's `default` point."""
    points = sweep[sweep["family"] == family]
    pad = sweep[sweep["defense"] == "pad"].assign(value=default)
    return settings_matrix(pd.concat([points, pad]), "prompt_id", "value", value)


def diminishing_gains(amplified: pd.DataFrame) -> np.ndarray:
    """Per prompt (o(1) - o(5)) - (o(5) - o(10)) of an outcome o over λ_amp; empty when the
    sweep lacks one of the three points."""
    if not {1.0, 5.0, 10.0} <= set(amplified.columns):
        return np.array([])
    gains = (amplified[1.0] - amplified[5.0]) - (amplified[5.0] - amplified[10.0])
    return gains.dropna().to_numpy()


def per_token_cost_change(pad: pd.DataFrame, delta: float, lengths) -> np.ndarray:
    """Per PAD response at least max(lengths) tokens long: ε/L at the longest L minus at the
    shortest (γ-relaxed ε of the response's first L steps at the α that minimises it, as the
    paper reports ε, App. C.3)."""
    shortest, longest = min(lengths), max(lengths)
    change = []
    for r in pad.itertuples():
        if len(r.sigma) >= longest:
            cost = [
                optimal_response_budget(
                    r.sigma[:n], r.sensitivity[:n], np.asarray(r.protected[:n]) > 0.5, delta
                ).epsilon_relaxed
                / n
                for n in (shortest, longest)
            ]
            change.append(cost[1] - cost[0])
    return np.asarray(change)


def baseline_note(base: str) -> str:
    """The caveat a contrast of PAD with `base` carries: what the baseline does that PAD does not
    (Summ., Dist.), and for Dist. that its threshold is ours."""
    names = {"summ": "Summ.", "dist": "Dist."}
    if base not in names:
        return ""
    removed = CONTEXT_REMOVED.format(base=names[base])
    return f"{removed}; {DIST_THRESHOLD}" if base == "dist" else removed


def table_findings(table: pd.DataFrame, boot: Boot, evaluator: str, summary_style: str = "extract"):
    """§4.2, Table 1: PAD against every baseline, perplexities (log PPL under `evaluator`), and
    Static against Dist. A Summ. condensed by paraphrase (`summary_style`) is not the paper's:
    its claims are left inconclusive, saying so."""
    summ_missing = "" if summary_style == "extract" else PARAPHRASED
    for corpus, frame in table.groupby("corpus"):
        for outcome, (column, label) in OUTCOMES.items():
            for base in ("extraction", "summ", "dist", "static"):
                yield Finding(
                    "s2.pad_leaks_less_than_{base}.{outcome}.{corpus}",
                    boot(prompt_differences(frame, base, "pad", column), np.mean),
                    {"base": base, "outcome": outcome, "corpus": corpus, "label": label},
                    missing=summ_missing if base == "summ" else "",
                    note=baseline_note(base),
                )
        yield Finding(
            "s2.pad_ppl_below_extraction.{corpus}",
            boot(prompt_differences(frame, "extraction", "pad", LOG_PPL), np.mean),
            {"corpus": corpus, "evaluator": evaluator},
            note=evaluator_note(evaluator),
        )
        yield Finding(
            "s2.summ_costs_perplexity.{corpus}",
            boot(prompt_differences(frame, "extraction", "summ", LOG_PPL), np.mean),
            {"corpus": corpus, "evaluator": evaluator},
            missing=summ_missing,
            note=evaluator_note(evaluator),
        )
        for outcome, column, label in (
            ("rouge", *OUTCOMES["rouge"]),
            (LOG_PPL, LOG_PPL, f"log PPL (each response alone under {evaluator})"),
        ):
            notes = [DIST_THRESHOLD, evaluator_note(evaluator) if column == LOG_PPL else ""]
            yield Finding(
                "s2.static_beats_dist.{outcome}.{corpus}",
                boot(prompt_differences(frame, "dist", "static", column), np.mean),
                {"outcome": outcome, "corpus": corpus, "label": label},
                note="; ".join(n for n in notes if n),
            )


def matched_findings(units: pd.DataFrame, matched: pd.DataFrame, boot: Boot, evaluator: str):
    """§3.2 at equal nominal ε (s2_matched, `privleak.pad_matching`; ours): per corpus of `matched`
    (its target_epsilon and sigma, Static charged Δ = 1 a step), PAD minus the matched Static per
    prompt in each leakage outcome and in log PPL. A corpus with no finite σ (its median PAD
    response screened every step) has no effect to estimate."""
    for m in matched.itertuples():
        frame = units[(units["corpus"] == m.corpus)
                      & units["defense"].isin(["pad", MATCHED])]  # fmt: skip
        fields = {"corpus": m.corpus, "epsilon": m.target_epsilon, "sigma": m.sigma}
        missing = "" if np.isfinite(m.sigma) else UNMATCHED
        specs = [("s2.pad_leaks_less_than_matched_static.{outcome}.{corpus}", column,
                  {"outcome": outcome, "label": label}, "")
                 for outcome, (column, label) in OUTCOMES.items()]  # fmt: skip
        specs.append(("s2.pad_ppl_below_matched_static.{corpus}", LOG_PPL,
                      {"evaluator": evaluator}, evaluator_note(evaluator)))  # fmt: skip
        for spec, column, extra, note in specs:
            estimate = (
                NONE
                if missing
                else boot(prompt_differences(frame, MATCHED, "pad", column), np.mean)
            )
            yield Finding(spec, estimate, fields | extra, missing=missing, note=note)


def secret_findings(
    esp: pd.DataFrame, boot: Boot, corpora: Sequence[str], summary_style: str = "extract"
):
    """Extending §4.2: PAD against every baseline on the cued secret sum (per prompt, the sum
    over its scored planted secrets of the exact probability of emitting each right after its
    document cue, `metrics.rag_leakage.cued_secrets`; esp: s2_generate's esp table), paired per
    prompt: every defense is scored on the same secrets. A corpus without planted secrets (an
    hf: or file: one) has no effect to estimate."""
    summ_missing = "" if summary_style == "extract" else PARAPHRASED
    sums = cued_secrets(esp)
    for corpus in corpora:
        frame = sums[sums["corpus"] == corpus]
        for base in ("extraction", "summ", "dist", "static"):
            fields = {"base": base, "corpus": corpus}
            if frame.empty:
                yield Finding(
                    "s2.pad_emits_fewer_secrets_than_{base}.{corpus}", NONE, fields,
                    missing="planted secrets (this corpus plants none)",
                )  # fmt: skip
                continue
            yield Finding(
                "s2.pad_emits_fewer_secrets_than_{base}.{corpus}",
                boot(prompt_differences(frame, base, "pad", "cued_sum"), np.mean),
                fields,
                missing=summ_missing if base == "summ" else "",
                note=baseline_note(base),
            )


def sweep_findings(
    sweep: pd.DataFrame, corpus: str, default: Mapping, boot: Boot, evaluator: str = ""
):
    """§4.3-4.4, Figs. 3-5: ablations, the amplification and ε sweeps."""
    for ablation in ("no_sens", "no_calib"):
        for outcome, (column, label) in OUTCOMES.items():
            yield Finding(
                f"s2.{ablation}_leaks_more.{{outcome}}",
                boot(prompt_differences(sweep, "pad", ablation, column), np.mean),
                {"outcome": outcome, "label": label, "sweep_corpus": corpus},
                missing=NO_SENS if ablation == "no_sens" else "",
            )
    for outcome, (column, label) in OUTCOMES.items():
        fill = {"outcome": outcome, "label": label, "sweep_corpus": corpus}
        amplified = sweep_matrix(sweep, "amplification", column, default["amplification"])
        yield Finding(
            "s2.amplification_reduces_leakage.{outcome}",
            boot(unit_trends(amplified).to_numpy(), np.mean, bounds=PLUS_MINUS_ONE),
            fill,
        )
        complete = {1.0, 5.0, 10.0} <= set(amplified.columns)
        yield Finding(
            "s2.amplification_diminishing_returns.{outcome}",
            boot(diminishing_gains(amplified), np.mean),
            fill,
            missing="" if complete else "λ_amp = 1, 5 and 10 in the sweep",
        )
        by_epsilon = sweep_matrix(sweep, "epsilon", column, default["epsilon"])
        yield Finding(
            "s2.epsilon_raises_leakage.{outcome}",
            boot(unit_trends(by_epsilon).to_numpy(), np.mean, bounds=PLUS_MINUS_ONE),
            fill,
        )
    by_epsilon = sweep_matrix(sweep, "epsilon", LOG_PPL, default["epsilon"])
    yield Finding(
        "s2.epsilon_lowers_perplexity",
        boot(unit_trends(by_epsilon).to_numpy(), np.mean, bounds=PLUS_MINUS_ONE),
        {"sweep_corpus": corpus, "evaluator": evaluator},
        note=evaluator_note(evaluator),
    )


def findings(frames: dict, boot: Boot, sweep_corpus: str, accounting: Mapping) -> list[Finding]:
    """Every S2 claim on `load`'s frames; accounting: the α, δ and lengths of Fig. 6a."""
    units, responses = frames["units"], frames["responses"]
    lengths = accounting["lengths"]
    return [
        *table_findings(
            units[units["family"] == "table"], boot, frames["evaluator"], frames["summary_style"]
        ),  # fmt: skip
        *matched_findings(units, frames["matched"], boot, frames["evaluator"]),
        *secret_findings(
            frames["esp"], boot, sorted(set(units["corpus"])), frames["summary_style"]
        ),
        *sweep_findings(
            units[units["corpus"] == sweep_corpus],
            sweep_corpus,
            frames["pad_default"],
            boot,
            frames["evaluator"],
        ),
        Finding(
            "s2.epsilon_per_token_falls_with_length",
            boot(
                per_token_cost_change(
                    responses[responses["defense"] == "pad"], accounting["delta"], lengths
                ),
                np.mean,
            ),
            {
                "shortest": min(lengths),
                "longest": max(lengths),
                "alpha": accounting["alpha"],
                "delta": accounting["delta"],
            },
        ),
    ]
