"""Each Spec's role: which claims test a paper's primary statements, and which are checks.

PRIMARY: the statements of each paper's abstract and conclusion (S0's thin conclusion with its
introduction's contributions; S3, a poster without either, with its two concluding Results
bullets; S4's conclusion with its introduction's closing sentence), quoted verbatim and chosen
from the paper texts alone, not from any result, each mapped to the Specs whose effect measures
what the sentence says. Holm's adjustment runs over each paper's primary claims;
Benjamini-Yekutieli's over the rest (privleak.claims.multiplicity). Primary statements that no
Spec tests are listed in NOT_TESTED, so the claims page says so.

CHECKS: Specs that check privleak's own mechanism (a guarantee on every unit, an audit of a stated
ε, a bound that holds by algebra or arithmetic, a comparison decided by design of a policy). They
pass or fail and are kept apart from the papers' claims.
"""

from __future__ import annotations

from privleak.claims.spec import Check, Primary

S0_OVERESTIMATE = Primary(
    "A straightforward approach of directly comparing an LM's output to the contexts can "
    "overestimate the privacy risk, since the LM's parametric knowledge might already contain the "
    "augmented contextual knowledge.",
    "Abstract",
)
S0_OOD = Primary(
    "Using our context influence metric, we demonstrate that context privacy leakage occurs when "
    "contextual knowledge is out of distribution with respect to parametric knowledge.",
    "Abstract",
)
S0_FACTORS = Primary(
    "We found that the choice of contextual and parametric knowledge, model capacity, context and "
    "response size, and token n-grams largely affect the privacy of contextual information.",
    "§6 Conclusion (directions from §4.3-4.4)",
)
S0_POSITION = Primary(
    "we evaluate how factors– such as model size, context size, generation position, etc.– "
    "affect context privacy leakage.",
    "Abstract (direction from §4.3)",
)
S0_LAMBDA = Primary(
    "we show that context privacy leakage can be affected (1) explicitly when "
    "amplifying/deamplifying contextual knowledge during decoding",
    "§1, contribution 2",
)
S1_ER = Primary(
    "Extraction Rate, the predominant metric used in prior quantification work, underestimates "
    "the threat of leakage of training data in randomized LLMs by as much as 2.14X.",
    "Abstract (paraphrased in §7 Conclusion)",
)
S1_AVERAGE = Primary(
    "Although on average, larger models and longer prefixes can extract more data", "Abstract"
)
S1_SEQUENCES = Primary(
    "this is not true for a substantial portion of individual sequences. 30.4-41.5% of our "
    "sequences are easier to extract with either shorter prefixes or smaller models.",
    "Abstract (paraphrased in §7 Conclusion)",
)
S1_PARTIAL = Primary(
    "Contrary to previous beliefs, partial leakage in commonly used decoding schemes like top-k "
    "and top-p is not easier than leaking verbatim training data.",
    "Abstract (top-k only: top-p is not tested)",
)
S1_LATER = Primary(
    "Extracting later tokens in a sequence is as much as 10.12X easier than extracting earlier "
    "tokens.",
    "Abstract",
)
S2_LEAKAGE = Primary(
    "Experiments on three real-world datasets demonstrate that PAD substantially reduces private "
    "information leakage while preserving response utility, outperforming existing retrieval- "
    "and post-processing-based defenses.",
    "Abstract (its leakage paraphrased in §5 Conclusion)",
    (("base", ("extraction", "summ", "dist")),),
)
S2_DEFENSES = Primary(
    "outperforming existing retrieval- and post-processing-based defenses.",
    "Abstract (at matched utility: privleak's frontier)",
    (("b", ("summ", "dist")),),
)
S3_PUBLIC = Primary(
    "Vanilla finetuning like Public is insufficient for domain privacy.",
    "Results (concluding bullet)",
)
S3_REDACTED = Primary(
    "Domain privacy becomes feasible when models finetuned on redacted datasets (at least "
    "partially).",
    "Results (concluding bullet)",
)
S4_DOCUMENTS = Primary(
    "Overall DP-RAG, provides a viable approach to private RAG in contexts where documents are "
    "organized by individual (e.g. Electronic Health Records financial statements) and where "
    "sufficiently many documents cover the question asked so that no one individual has an "
    "impact on the response.",
    "Conclusion (and the Introduction: 'DP-RAG is most effective in context where enough "
    "documents give elements of response')",
)

PRIMARY: dict[str, Primary] = {
    "s0.opt_vs_neo.influence": S0_OOD,
    "s0.opt_vs_neo.rouge_prompts": S0_OVERESTIMATE,
    "s0.known_context.influence": S0_OOD,
    "s0.known_context.{flag}_prompts": S0_OVERESTIMATE,
    "s0.lambda.influence": S0_LAMBDA,
    "s0.model_size.influence": S0_FACTORS,
    "s0.context_size.small_contexts": S0_FACTORS,
    "s0.context_size.growth_32_to_256": S0_FACTORS,
    "s0.position.first_10_tokens": S0_POSITION,
    "s0.corpus.summarization_vs_qa_{value}": S0_FACTORS,
    "s0.instruction_tuned.influence": S0_FACTORS,
    "s0.ngram.peak_grows_with_n": S0_FACTORS,
    "s0.ngram.earlier_ngrams_peak": S0_FACTORS,
    "s0.ngram.earlier_ngrams_peak_every_size": S0_FACTORS,
    "s1.extraction_rate_underestimates_x30.{kind}": S1_ER,
    "s1.larger_model_on_average.{kind}": S1_AVERAGE,
    "s1.longer_prefix_on_average.{kind}": S1_AVERAGE,
    "s1.some_easier_with_shorter_prefix.{kind}": S1_SEQUENCES,
    "s1.some_easier_with_smaller_model.{kind}": S1_SEQUENCES,
    "s1.partial_not_easier_topk5.n{n}": S1_PARTIAL,
    "s1.later_tokens_easier.{kind}": S1_LATER,
    "s2.pad_leaks_less_than_{base}.{outcome}.{corpus}": S2_LEAKAGE,
    "s2.pad_emits_fewer_secrets_than_{base}.{corpus}": S2_LEAKAGE,
    "s2.frontier.pad_over_{b}": S2_DEFENSES,
    "s3.public_not_domain_private.{policy}.{domain_j}": S3_PUBLIC,
    "s3.redaction_leaks_less_than_public.{target_slug}.{policy}": S3_REDACTED,
    "s4.accuracy_rises_with_frequency": S4_DOCUMENTS,
    "s4.accuracy_rises_with_voters": S4_DOCUMENTS,
}

NOT_TESTED: tuple[tuple[str, str, str], ...] = (
    ("s1", "partial leakage in ... top-p is not easier than leaking verbatim training data "
     "(the top-p half)", "Abstract"),
    ("s2", "PAD is model-agnostic and operates entirely at decoding time with minimal "
     "computational overhead", "Abstract"),
    ("s2", "while preserving response utility (a non-inferiority statement: "
     "s2.pad_ppl_below_extraction tests PPL below the undefended one, a stricter sentence of "
     "§4.2, without a margin)", "Abstract; §5 Conclusion"),
    ("s2", "A Rényi Differential Privacy (RDP) accountant rigorously tracks cumulative privacy "
     "loss, enabling explicit per-response (ε, δ)-DP guarantees (audited by the checks "
     "s2.audit.response.*: a failed audit of the paper's accountant contradicts this sentence "
     "unless privleak's implementation is at fault; a passed one never confirms it)",
     "Abstract"),
    ("s3", "Domain privacy becomes feasible (the redacted models' own C-domain privacy)",
     "Results"),
    ("s4", "differentially private token generation is a viable approach to private RAG "
     "('viable' has no threshold; the token law is audited as a check)", "Abstract; Conclusion"),
    ("s4", "Ask question with shorter responses (and limit the number of tokens generated)",
     "Conclusion"),
    ("s4", "Increase the impact of the public prior (θ) if some elements of the response are "
     "public", "Conclusion"),
    ("s1, s2", "the magnitudes (2.14X, 30.4-41.5 %, 10.12X, 67.8 %, 69.0 %): every claim tests a "
     "direction", "Abstracts; conclusions"),
)  # fmt: skip
"""(paper key, statement, where) of the primary statements no claim tests."""

AUDIT = (
    "an audit of privleak's own implementation against the ε it states: its certified lower bound "
    "can contradict the guarantee, never confirm it"
)
CHECKS: dict[str, Check] = {
    "s0.audit.token_law.eps{epsilon:g}": Check(AUDIT),
    "s2.audit.response.eps{epsilon:g}": Check(AUDIT),
    "s4.audit.token_law.eps{epsilon:g}": Check(AUDIT),
    "s0.bounded_cid.within_eps": Check(
        "bounded CID's ε bound checked on every response of privleak's implementation"
    ),
    "s0.theorem31.tau_tracks_lambda_pmi": Check(
        "Theorem 3.1 holds by algebra (τ is proportional to λ |PMI| up to CID's normaliser): it "
        "checks the implementation, not an empirical finding"
    ),
    "s1.isp_bound_holds": Check(
        "Appendix A's bound checked on privleak's exact against approximate n-ISP computation"
    ),
    "s2.epsilon_per_token_falls_with_length": Check(
        "ε / L falls with L by the accountant's arithmetic, whatever the responses"
    ),
    "s3.redaction_leaks_less_than_public.{target_slug}.{policy}": Check(
        "the keyword policy redacts exactly what its own detector flags, so a model trained on "
        "its redaction leaks less under that detector by design of the policy",
        (("policy", ("keyword",)),),
    ),
}
