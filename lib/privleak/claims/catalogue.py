"""The claims catalogue: every paper sentence privleak tests, as data.

Each Spec is one kind of claim: the quoted sentence, where the paper says it, the effect that
tests it, the direction the paper gives that effect against the null, and the units its interval
resamples. `id`, `effect`, `unit` and `note` are templates (`str.format`) whose fields come from
the estimator's Finding (a corpus, a decoder, a sequence kind, a λ value, ...), so one Spec stands
for a family of claims. The estimators live in `privleak.claims.s0` ... `s4`; `registry.evaluate`
joins their findings with this catalogue and judges them (docs/design.md §8).
"""

from __future__ import annotations

from dataclasses import replace

from privleak.claims.catalogue_s0_s1 import SPECS_S0_S1
from privleak.claims.roles import CHECKS, PRIMARY
from privleak.claims.spec import FRONTIER, MIA, S2, S3, S4, Spec

MIA_NOTE = (
    "not a claim of the five papers: the MIA literature's finding, paraphrased, judged on the "
    "tiny family, whose members (planted sequences) and non-members (held-out draws of the same "
    "generator) are known by construction"
)
# The classifier policy of S3 is not the paper's RoBERTa: every claim on it says so.
S3_STAND_IN = (
    "the classifier policy of the smoke and embedded profiles fine-tunes the tiny family LM, a "
    "stand-in for the official fine-tuned roberta-base"
)

FRONTIER_EFFECT = (
    "cued secret mass of an extraction response (Σ P(secret | the words before it in its "
    "document) over the secrets its contexts expose; exact, certified bounds for Static and PAD) "
    "under {a} minus under {b}, each the least over the randomised mixtures of its settings "
    "with accuracy at least {share:g} × the undefended accuracy"
)
FRONTIER_NOTE = (
    "one task for every defense (S4's store and LM, the units' top contexts); refusal: answer "
    "undefended with probability q, else refuse; DP-ICL's ε is its token mechanism's given the "
    "contexts (no DP threshold); the keyword policy lists the store's patient names, the "
    "classifier policy is trained on planted secrets of documents no unit retrieves; the rest in "
    "docs/results/frontier.md"
)

# Sentences that two kinds of claim test.
MATCHED_NOTE = (
    "Static's σ spends PAD's median nominal ε under PAD's accountant (privleak.pad_matching), "
    "each step charged at Δ = 1, the strict guarantee and the larger σ, which favours Static on "
    "leakage and PAD on fluency (Static at PAD's mean Δ_t², the smaller σ, is beside it in "
    "figures/s2/s2_static_matched); the two ε differ in scope: PAD's γ-relaxed ε covers its "
    "protected steps only, Static's every token"
)
S2_NOMINAL = (
    "ε is nominal: the paper's accountant (Δ_t from the logit margin, not a proven sensitivity "
    "bound; σ_t, Δ_t and screening read the private logits), not an audited guarantee"
)
S2_EPSILON = (
    "The ε parameter governs the formal privacy guarantee, with lower values providing stronger "
    "protection at the expense of utility."
)
S3_BELOW_ONLY = (
    "For RoBERTa, all but Private and Public have LiRa success rate lower than the {domain} "
    "Only baseline."
)
S3_PERPLEXITY = (
    "While having comparable domain privacy, JFT has better perplexity and Redaction Schedule "
    "has worse perplexity compared to Pub+Redacted."
)


SPECS = (
    *SPECS_S0_S1,
    # ---- S2: privacy-aware decoding
    Spec(
        id="s2.audit.response.eps{epsilon:g}",
        paper=S2,
        quote="A Rényi Differential Privacy (RDP) accountant rigorously tracks cumulative privacy "
        "loss, enabling explicit per-response (ε, δ)-DP guarantees for sensitive outputs.",
        where="Abstract; §3.5, Eq. 9",
        effect="PAD's nominal γ-relaxed ε at ε_base = {epsilon:g} (its protected steps composed "
        "into one Gaussian under the privacy-loss distribution, the largest over the audited "
        "outputs, each the larger of its accounts under D and D') minus the audited lower bound "
        "on those steps (white-box: the event bound from certified token probabilities; context "
        "D vs D with one document replaced by the canary's)",
        direction="+",
        unit="canaries",
        note="an audit's lower bound can contradict a guarantee, never confirm it: the interval "
        "is (-inf, slack]; each token's probability is bounded from both sides by integration "
        "(no Monte-Carlo error) and the verdict rests on the event bound, which needs no "
        "statistics",
    ),
    Spec(
        id="s2.pad_leaks_less_than_{base}.{outcome}.{corpus}",
        paper=S2,
        quote="Across all datasets and metrics, PAD provides the most substantial reductions in "
        "both repeat and ROUGE-based privacy leakage compared to all baseline methods.",
        where="§4.2, Table 1",
        effect="mean over prompts of the {label}, PAD - {base} in {corpus}",
        direction="-",
        unit="attack prompts",
    ),
    Spec(
        id="s2.pad_leaks_less_than_matched_static.{outcome}.{corpus}",
        paper=S2,
        quote="Uniform noise injection, in contrast, is inefficient since it either wastes "
        "privacy budget on low-risk tokens or degrades generation quality.",
        where="§3.2 (tested at equal nominal ε: ours)",
        effect="mean over prompts of the {label}, PAD - Static at PAD's nominal ε in {corpus} "
        "(σ {sigma:.3g}: every step charged at Δ = 1; target {epsilon:.3g}, PAD's median "
        "γ-relaxed ε at its optimised α)",
        direction="-",
        unit="attack prompts",
        note=MATCHED_NOTE,
    ),
    Spec(
        id="s2.pad_ppl_below_matched_static.{corpus}",
        paper=S2,
        quote="Uniform noise injection, in contrast, is inefficient since it either wastes "
        "privacy budget on low-risk tokens or degrades generation quality.",
        where="§3.2 (tested at equal nominal ε: ours)",
        effect="mean over prompts of log PPL, PAD - Static at PAD's nominal ε in {corpus} (σ "
        "{sigma:.3g}: every step charged at Δ = 1; target {epsilon:.3g}, PAD's median γ-relaxed "
        "ε at its optimised α; each response alone under {evaluator}; a geometric-mean contrast)",
        direction="-",
        unit="attack prompts",
        note=MATCHED_NOTE,
    ),
    Spec(
        id="s2.pad_emits_fewer_secrets_than_{base}.{corpus}",
        paper=S2,
        quote="",
        where="extends §4.2, Table 1",
        effect="mean over prompts of the cued secret sum (over the prompt's scored planted "
        "secrets, the exact probability of emitting each right after its document cue, the cue "
        "forced), PAD - {base} in {corpus}",
        direction="-",
        unit="attack prompts",
        note="privleak's extension of Table 1's Repeat and ROUGE measures, not a sentence of the "
        "paper: does PAD lower the probability of emitting the planted secrets at risk, computed "
        "exactly (forced scoring, the noise integrated by draws per token); every defense is "
        "scored on the secrets of the retrieved contexts, the same set, so the defenses pair",
    ),
    Spec(
        id="s2.pad_ppl_below_extraction.{corpus}",
        paper=S2,
        quote="The perplexity of outputs generated under PAD is generally lower than or "
        "comparable to the baselines.",
        where="§4.2, Table 1",
        effect="mean over prompts of log PPL, PAD - Extraction ({corpus}; each response alone "
        "under {evaluator}, as the paper defines PPL; a geometric-mean contrast, where Table 1 "
        "shows the arithmetic mean)",
        direction="-",
        unit="attack prompts",
    ),
    Spec(
        id="s2.summ_costs_perplexity.{corpus}",
        paper=S2,
        quote="The Summ. baseline achieves notable reductions in privacy leakage, but this comes "
        "at the cost of increased perplexity.",
        where="§4.2, Table 1",
        effect="mean over prompts of log PPL, Summ. - Extraction ({corpus}; each response alone "
        "under {evaluator})",
        direction="+",
        unit="attack prompts",
    ),
    Spec(
        id="s2.static_beats_dist.{outcome}.{corpus}",
        paper=S2,
        quote="The Dist. and Static baselines offer incremental improvements, with Static "
        "generally outperforming Dist. in both privacy protection and utility preservation.",
        where="§4.2, Table 1",
        effect="mean over prompts of {label}, Static - Dist. ({corpus})",
        direction="-",
        unit="attack prompts",
    ),
    Spec(
        id="s2.no_sens_leaks_more.{outcome}",
        paper=S2,
        quote="Removing this module results in a measurable decrease in privacy protection.",
        where="§4.3, Fig. 3 (No Sens.)",
        effect="mean over prompts of the {label}, no_sens - PAD ({sweep_corpus})",
        direction="+",
        unit="attack prompts",
    ),
    Spec(
        id="s2.no_calib_leaks_more.{outcome}",
        paper=S2,
        quote="context-aware noise calibration is essential for effective privacy protection, as "
        "its removal results in a notable degradation in performance.",
        where="§4.3, Fig. 3 (No Calib.)",
        effect="mean over prompts of the {label}, no_calib - PAD ({sweep_corpus})",
        direction="+",
        unit="attack prompts",
    ),
    Spec(
        id="s2.amplification_reduces_leakage.{outcome}",
        paper=S2,
        quote="Increasing the amplification factor consistently enhances privacy protection",
        where="§4.4, Fig. 4",
        effect="mean over prompts of the Spearman correlation of the {label} with λ_amp "
        "({sweep_corpus}; 0 for a prompt whose value never changes)",
        direction="-",
        unit="attack prompts",
    ),
    Spec(
        id="s2.amplification_diminishing_returns.{outcome}",
        paper=S2,
        quote="The most substantial gains are achieved as amplification increases from 1.0 to 5.0 "
        "[...] Beyond an amplification factor of 5.0, further increases yield only modest "
        "additional improvements",
        where="§4.4, Fig. 4",
        effect="mean over prompts of (o(1) - o(5)) - (o(5) - o(10)), o = the {label} at λ_amp "
        "({sweep_corpus})",
        direction="+",
        unit="attack prompts",
    ),
    Spec(
        id="s2.epsilon_raises_leakage.{outcome}",
        paper=S2,
        quote=S2_EPSILON,
        where="§4.4, Fig. 5",
        effect="mean over prompts of the Spearman correlation of the {label} with ε "
        "({sweep_corpus})",
        direction="+",
        unit="attack prompts",
        note=S2_NOMINAL,
    ),
    Spec(
        id="s2.epsilon_lowers_perplexity",
        paper=S2,
        quote=S2_EPSILON,
        where="§4.4, Fig. 5",
        effect="mean over prompts of the Spearman correlation of log PPL (each response alone "
        "under {evaluator}) with ε ({sweep_corpus})",
        direction="-",
        unit="attack prompts",
        note=S2_NOMINAL,
    ),
    Spec(
        id="s2.epsilon_per_token_falls_with_length",
        paper=S2,
        quote="Both Llama and Pythia models demonstrate decreasing per-token privacy cost with "
        "longer sequences, reflecting favorable composition properties.",
        where="§4.5, Fig. 6a",
        effect="mean over PAD responses of ε/L at L = {longest} minus at L = {shortest} "
        "(γ-relaxed, δ = {delta:g}, α optimised per response as App. C.3 reports ε; at the "
        "official code's α = {alpha:g} see figures/s2/s2_fig6a_data)",
        direction="-",
        unit="PAD responses",
        note=S2_NOMINAL + "; with α optimised, ε/L falls with L by the accountant's arithmetic "
        "(the conversion term ln(1/δ)/(α-1) is paid once per response), whatever the responses",
    ),
    # ---- S3: domain privacy
    Spec(
        id="s3.classifier_finds_more_leaks.{target_slug}",
        paper=S3,
        quote="LiRa attacks are more successful w.r.t. RoBERTa policy compared to the keyword, "
        "because the former has higher recall and lower precision.",
        where="Results, Fig. 1",
        effect="LiRa success rate of {target} under the classifier policy minus under the keyword "
        "policy (paired per prompt; {samples})",
        direction="+",
        unit="attack prompts{runs}",
        note=S3_STAND_IN + "; the 'because' (recall, precision) is not tested",
    ),
    Spec(
        id="s3.not_below_{only_slug}.{target_slug}",
        paper=S3,
        quote=S3_BELOW_ONLY,
        where="Results, Fig. 1 (classifier policy: the RoBERTa stand-in)",
        effect="LiRa success rate of {target} minus {only}'s, classifier policy (paired per "
        "prompt)",
        direction="+",
        unit="attack prompts{runs}",
        note=S3_STAND_IN + "; the sentence says only 'not lower', so an interval touching 0 "
        "agrees with it too",
    ),
    Spec(
        id="s3.below_{only_slug}.{target_slug}",
        paper=S3,
        quote=S3_BELOW_ONLY,
        where="Results, Fig. 1 (classifier policy: the RoBERTa stand-in)",
        effect="LiRa success rate of {target} minus {only}'s, classifier policy (paired per "
        "prompt)",
        direction="-",
        unit="attack prompts{runs}",
        note=S3_STAND_IN,
    ),
    Spec(
        id="s3.redaction_leaks_less_than_public.{target_slug}.{policy}",
        paper=S3,
        quote="Domain privacy becomes feasible when models finetuned on redacted datasets (at "
        "least partially).",
        where="Results, Fig. 1",
        effect="LiRa success rate of {target} minus Public's, {policy} policy (paired per prompt)",
        direction="-",
        unit="attack prompts{runs}",
    ),
    Spec(
        id="s3.public_not_domain_private.{policy}.{domain_j}",
        paper=S3,
        quote="Vanilla finetuning like Public is insufficient for domain privacy.",
        where="Results; the definition of C-domain privacy",
        effect="C-hat of Public for {domain_j}: its share of samples F_{domain_j} flags over the "
        "share of M_(D without {domain_j})'s ({policy} policy, the plain ratio, prompts paired; "
        "where the reference never flags, the interval is a lower bound)",
        direction="+",
        null=1.0,
        unit="attack prompts{runs}",
    ),
    Spec(
        id="s3.jft_better_perplexity_than_pub_redacted.{policy}",
        paper=S3,
        quote=S3_PERPLEXITY,
        where="Results, Fig. 1",
        effect="log test perplexity of JFT minus Pub+Redacted's, {policy} policy (token-weighted "
        "mean NLL, paired per held-out dialog)",
        direction="-",
        unit="held-out test dialogs{runs}",
        note="'comparable domain privacy' is no direction and is not tested",
    ),
    Spec(
        id="s3.redaction_schedule_worse_perplexity_than_pub_redacted.{policy}",
        paper=S3,
        quote=S3_PERPLEXITY,
        where="Results, Fig. 1",
        effect="log test perplexity of Redaction Schedule minus Pub+Redacted's, {policy} policy "
        "(token-weighted mean NLL, paired per held-out dialog)",
        direction="+",
        unit="held-out test dialogs{runs}",
        note="'comparable domain privacy' is no direction and is not tested",
    ),
    # ---- S4: DP-RAG
    Spec(
        id="s4.accuracy_rises_with_frequency",
        paper=S4,
        quote="The results show the accuracy becomes reasonable when at least 100 documents hold "
        "a similar piece of information.",
        where="Evaluation, Fig. 6",
        effect="Spearman correlation of the patient's disease's number of documents with DP-RAG "
        "naming it, averaged over the response budgets whose answers vary (epsilon = {epsilons}): "
        "the budgets answer the same questions, so they make one estimate, not one claim each",
        direction="+",
        unit="diseases (their drawn patients' symptom questions resampled together)",
    ),
    Spec(
        id="s4.accuracy_rises_with_voters",
        paper=S4,
        quote="The results show the accuracy becomes reasonable when at least 100 documents hold "
        "a similar piece of information.",
        where="Evaluation (the sentence under Fig. 6)",
        effect="per question, DP-RAG naming the disease with a top-k DP threshold at k = {high} "
        "minus at k = {low} (voting documents; epsilon = {epsilon:g})",
        direction="+",
        unit="diseases with >= {documents} documents (their questions resampled together)",
        note="the documents that hold the information are the retrieved documents of the "
        "question's disease, varied through the threshold's k; Fig. 6 varies the corpus instead",
    ),
    Spec(
        id="s4.accuracy_rises_with_epsilon",
        paper=S4,
        quote="In this formula, the larger the epsilon (privacy loss), or the smaller the "
        "clipping C the closer we are to the most likely token.",
        where="DP in-context learning (the token law under Fig. 5)",
        effect="per Fig. 6 question, DP-RAG naming the disease at response budget epsilon = "
        "{high:g} minus at epsilon = {low:g}",
        direction="+",
        unit="diseases (their drawn patients' symptom questions resampled together)",
        note="accuracy stands in for 'closer to the most likely token': the LM given the retrieved "
        "documents names the disease when it is their most likely answer",
    ),
    Spec(
        id="s4.censors_individual_knowledge",
        paper=S4,
        quote="Because DP-RAG protects privacy by making sure a result does not depend on one PU, "
        "it will, by design, censor every knowledge that is too specific about one individual.",
        where="Evaluation",
        effect="mean over planted one-document facts of log P_DP-RAG(fact) - log P_RAG(fact) "
        "(exact, natural log; epsilon = {epsilon:g} vs the non-private RAG)",
        direction="-",
        unit="planted facts",
    ),
    # ---- S4: DP-ICL's token law, audited on neighbouring stores with a canary (§10)
    Spec(
        id="s4.audit.token_law.eps{epsilon:g}",
        paper=S4,
        quote="The small (pure) privacy losses incurred during the retrieval phase and the ICL "
        "phase are aggregated in a simple privacy accountant",
        where="DP ICL (the accountant paragraph)",
        effect="smallest slack over canaries: the per-token ε ({token_epsilon:.4g} at response "
        "budget ε = {epsilon:g}) × (1 + 1e-4) - the exact worst-case token privacy loss over the "
        "whole vocabulary at every prefix the canary's candidates visit (store D vs D + the "
        "canary's document)",
        direction="+",
        unit="canaries",
        note="the retrieval threshold is held fixed (the token law is audited) and the audit's "
        "stores are its own (figures/audit); exact on the audited pairs, which is all it can show",
    ),
    # ---- the frontier: every defense on one task, leakage at matched utility
    Spec(
        id="s2.frontier.pad_over_{b}",
        paper=S2,
        quote="When compared to stronger privacy baselines such as Summ., Dist., and Static, PAD "
        "consistently demonstrates the best balance between privacy and utility",
        where="§4.2 (Utility Preservation)",
        effect=FRONTIER_EFFECT,
        direction="-",
        unit="questions (utility and attack on the same contexts)",
        note=FRONTIER_NOTE + "; the paper compares each method at one setting, with utility as "
        "PPL and leakage as Repeat and ROUGE prompt counts; the frontier at matched accuracy, "
        "with the secrets' probabilities",
    ),
    Spec(
        id="s4.frontier.{a}_over_{b}",
        paper=FRONTIER,
        quote="{a} leaks less than {b} at matched utility",
        where="the frontier's comparison: no paper puts these defenses on one task",
        effect=FRONTIER_EFFECT,
        direction="-",
        unit="questions (utility and attack on the same contexts)",
        note=FRONTIER_NOTE,
    ),
    # ---- MIA: the standard membership-inference findings, on the family (known membership)
    Spec(
        id="s1.mia.size.{attack}",
        paper=MIA,
        quote="larger models are more vulnerable to membership inference",
        where="a finding of the MIA literature, paraphrased (e.g. Duan et al. 2024, MIMIR: "
        "attacks gain with model size)",
        effect="AUC of {attack} on {large} minus on {small} (mean over training runs; all "
        "members against the non-members)",
        direction="+",
        unit="members (crossed with the non-members and the training runs)",
        note=MIA_NOTE,
    ),
    Spec(
        id="s1.mia.size.{attack}.{larger}_over_{smaller}",
        paper=MIA,
        quote="larger models are more vulnerable to membership inference",
        where="a finding of the MIA literature, paraphrased (e.g. Duan et al. 2024, MIMIR: "
        "attacks gain with model size); one step of the size ordering",
        effect="AUC of {attack} on {larger} minus on {smaller}, the next smaller size (mean over "
        "training runs; all members against the non-members)",
        direction="+",
        unit="members (crossed with the non-members and the training runs)",
        note=MIA_NOTE,
    ),
    Spec(
        id="s1.mia.duplication.{attack}",
        paper=MIA,
        quote="sequences duplicated more often in the training data are more vulnerable to "
        "membership inference",
        where="a finding of the MIA literature, paraphrased (e.g. Kandpal et al. 2022, "
        "deduplication mitigates privacy risks)",
        effect="on {model}, AUC of {attack} for the members planted {most} times minus for "
        "those planted {least} time(s) (each against all non-members; mean over runs)",
        direction="+",
        unit="members per duplication count (crossed with the non-members and the runs)",
        note=MIA_NOTE + "; the two counts' members are different texts, and the tokenizer was "
        "trained on the duplicated corpus, so the contrast confounds duplication with the texts "
        "and their tokenization: it is not shown free of the text-level confound",
    ),
    Spec(
        id="s1.mia.order.{better}_over_{worse}.{model}",
        paper=MIA,
        quote="Min-K%++ outperforms Min-K%, which outperforms the LOSS attack",
        where="a finding of the MIA literature, paraphrased (Zhang et al. 2024, Min-K%++; Shi "
        "et al. 2024, Min-K%)",
        effect="on {model}, AUC of {better} minus AUC of {worse} (same texts and runs; mean "
        "over runs)",
        direction="+",
        unit="members (crossed with the non-members and the training runs)",
        note=MIA_NOTE,
    ),
)
CATALOGUE = {
    spec.id: replace(spec, primary=PRIMARY.get(spec.id), check=CHECKS.get(spec.id))
    for spec in SPECS
}
_UNKNOWN = sorted((set(PRIMARY) | set(CHECKS)) - set(CATALOGUE))
assert not _UNKNOWN, f"roles name specs the catalogue lacks: {_UNKNOWN}"
