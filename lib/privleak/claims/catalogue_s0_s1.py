"""The claims catalogue's S0 (context influence, CID) and S1 (ESP, n-ISP) specs: the papers'
sentences, as data (`privleak.claims.catalogue` joins them with the others)."""

from __future__ import annotations

from privleak.claims.spec import S0, S1, Spec

# Sentences that two kinds of claim test.
S0_REGURGITATION = "both Repeat Prompts and Rouge Prompts are larger for GPT-Neo 1.3B than OPT 1.3B"
S1_ON_AVERAGE = "on average, larger models and longer prefixes can extract more data"

SPECS_S0_S1 = (
    # ---- S0: influence level λ (Tables 2-3, Fig. 8)
    Spec(
        id="s0.lambda.influence",
        paper=S0,
        quote="the context privacy leakage can be exacerbated … When the contextual knowledge is "
        "amplified (higher λ)",
        where="§3.3; Tables 2-3",
        effect="mean over contexts of the least-squares slope of τ_|D| (Def. 3.2) on λ (main "
        "experiment, every λ, default T)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.lambda.{flag}_prompts",
        paper=S0,
        quote="this increased context influence is attributable to 50% more input regurgitation",
        where="§4.3; Table 2",
        effect="share of {name} at λ = {high_lam:g} minus at λ = {low_lam:g} (paired difference "
        "of proportions, main experiment)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.lambda.utility_at_low_lambda",
        paper=S0,
        quote="this comes at a cost of substantial utility degradation",
        where="§4.3 (λ reduced to 0.5); Table 3",
        effect="ROUGE-L F1 at λ = 0.5 minus at λ = 1 (paired, main experiment)",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.lambda.faithfulness",
        paper=S0,
        quote="a higher average influence of the context leads to more faithfulness to the "
        "context (higher FactKB)",
        where="App. D, Fig. 8",
        effect="mean over contexts of the slope of faithfulness on λ (sweep at the default T)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.lambda.similarity_above_1.25",
        paper=S0,
        quote="for λ>1.25, the similarity of the generated response to the gold response slightly "
        "degrades",
        where="App. D, Fig. 8",
        effect="mean ROUGE-L F1 over λ > 1.25 minus at λ = 1 (paired, sweep at the default T)",
        direction="-",
        unit="contexts",
    ),
    # ---- S0: temperature (Fig. 7)
    Spec(
        id="s0.temperature.influence",
        paper=S0,
        quote="as τ approaches zero, the model is influenced by the context exponentially",
        where="App. D, Fig. 7 (τ is the temperature T there)",
        effect="mean over contexts of the slope of τ_|D| on the temperature T (sweep, λ = 1); the "
        "direction only, not the exponential shape",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.temperature.similarity",
        paper=S0,
        quote="with moderate improvements in similarity",
        where="App. D, Fig. 7 (as T approaches zero)",
        effect="mean over contexts of the slope of ROUGE-L F1 on T (sweep, λ = 1)",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.temperature.faithfulness_below_0.4",
        paper=S0,
        quote="the faithfulness actually decreases once τ<0.4",
        where="App. D, Fig. 7",
        effect="mean faithfulness over T < 0.4 minus at the smallest T >= 0.4 (paired, sweep, λ = "
        "1)",
        direction="-",
        unit="contexts",
    ),
    # ---- S0: context size (Fig. 2b), response position (Fig. 2c), model size (Fig. 2a)
    Spec(
        id="s0.context_size.small_contexts",
        paper=S0,
        quote="when the context is extremely small (≤32), then the LM is substantially less "
        "influenced by the context",
        where="§4.3, Fig. 2b",
        effect="mean τ_|D| over context sizes <= 32 minus over sizes > 32 (paired, λ = 1)",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.context_size.growth_32_to_256",
        paper=S0,
        quote="as we increase the context size from 32 to 256, the model becomes more influenced "
        "by the context",
        where="§4.3, Fig. 2b",
        effect="mean over contexts of the slope of τ_|D| on log2 |D| for |D| in [32, 256] (λ = 1)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.position.first_10_tokens",
        paper=S0,
        quote="the first 10 generated tokens by the model are influenced by the context the most",
        where="§4.3, Fig. 2c",
        effect="per response, mean per-token τ_|D| at positions < 10 minus at positions >= 10, "
        "averaged over responses longer than 10 tokens (main experiment, every λ)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.model_size.influence",
        paper=S0,
        quote="it generally shows that larger models are less influenced by the context",
        where="§4.3, Fig. 2a",
        effect="mean over contexts of the Spearman correlation of τ_|D| with the parameter count "
        "(in-pipeline tiny family, λ = 1)",
        direction="-",
        unit="contexts",
    ),
    # ---- S0: token n-gram influence (Figs. 3-4) and Theorem 3.1
    Spec(
        id="s0.ngram.peak_grows_with_n",
        paper=S0,
        quote="Larger n-grams have higher peak context influence",
        where="§4.4, Fig. 3",
        effect="Spearman correlation of n with the peak over i of the mean τ̂_{{i,n}} curve (λ = 1)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.ngram.earlier_ngrams_peak",
        paper=S0,
        quote="the context influence peaks for earlier i-th token n-grams, i.e. small i, then "
        "gradually declines for later i-th token n-grams",
        where="§4.4, Fig. 3",
        effect="mean over (context, n) of the Spearman correlation of τ_{{i,n}} with the n-gram "
        "index i (λ = 1)",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.ngram.earlier_ngrams_peak_every_size",
        paper=S0,
        quote="regardless of model size, the context influence peaks at the earlier token "
        "128-grams, then gradually decreases for later ones",
        where="§4.4, Fig. 4",
        effect="mean over (context, family size) of the Spearman correlation of τ_{{i,n}} with i "
        "(n = {n}, λ = 1)",
        direction="-",
        unit="contexts",
    ),
    Spec(
        id="s0.theorem31.tau_tracks_lambda_pmi",
        paper=S0,
        quote="the privacy leakage of the i-th token n-gram of the context depends on two key "
        "factors: (1) the difference in PMIs … and (2) the parameter λ",
        where="§3.3, Theorem 3.1",
        effect="Spearman correlation over response tokens of τ_|D|(y_t) with λ·|pmi(y_t; D)| "
        "(whole context: the pmi without D is 0; main experiment, λ > 0)",
        direction="+",
        unit="contexts",
    ),
    # ---- S0: bounded CID (Alg. 1), a guarantee checked on every response
    Spec(
        id="s0.bounded_cid.within_eps",
        paper=S0,
        quote="the i-th token n-gram D_{{i,n}} influences the LM θ by at most ϵ",
        where="§3.3, Eq. 7; Alg. 1, Thm. B.1",
        effect="smallest slack over responses and ε: ε - max per-token τ_{{i,n}} and ε/2 - max "
        "per-token τ_|D| (tolerance 1e-5)",
        direction="+",
        unit="checks (2 per response × ε)",
    ),
    # ---- S0: bounded CID, audited on neighbouring contexts with a canary (docs/design.md §10)
    Spec(
        id="s0.audit.token_law.eps{epsilon:g}",
        paper=S0,
        quote="Let y_t ∼ 𝒫(p_θ, D, x, y_<t, y_t, ϵ) be a token generated by the bounded CID from "
        "Algorithm 1. Then y_t is ϵ-DP with respect to D.",
        where="App. B, Thm. B.1",
        effect="smallest slack over canaries: ε (1 + 1e-4) - the exact worst-case token privacy "
        "loss over the whole vocabulary at every prefix the canary's candidates visit (D vs D + "
        "the canary's document)",
        direction="+",
        unit="canaries",
        note="the audit's own canaries and contexts (figures/audit); exact on the audited pairs, "
        "which is all it can show",
    ),
    # ---- S0: parametric knowledge (§4.2), OPT vs GPT-Neo, corpora
    Spec(
        id="s0.known_context.influence",
        paper=S0,
        quote="just the inclusion of PubMed data in the pre-training data can effectively "
        "decrease the context influence of PubMedQA abstracts",
        where="§4.3 (parametric knowledge); §4.2, Table 2",
        effect="τ_|D| of the model fine-tuned on the contexts minus the base model's, on those "
        "seen contexts (paired, mean over λ)",
        direction="-",
        unit="seen contexts",
    ),
    Spec(
        id="s0.known_context.{flag}_prompts",
        paper=S0,
        quote=S0_REGURGITATION,
        where="§4.2, Table 2",
        effect="share of {name} of the fine-tuned model minus the base model's, on the seen "
        "contexts (paired difference of proportions, mean over λ)",
        direction="+",
        unit="seen contexts",
    ),
    Spec(
        id="s0.opt_vs_neo.influence",
        paper=S0,
        quote="we expect OPT 1.3B to show greater context privacy leakage",
        where="§4.2, Table 2",
        effect="τ_|D| of OPT-1.3B minus GPT-Neo-1.3B on PubMedQA contexts (paired, mean over λ)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.opt_vs_neo.rouge_prompts",
        paper=S0,
        quote=S0_REGURGITATION,
        where="§4.2, Table 2",
        effect="share of Rouge Prompts of GPT-Neo-1.3B minus OPT-1.3B on PubMedQA contexts "
        "(paired difference of proportions)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.instruction_tuned.influence",
        paper=S0,
        quote="LLaMA 3 IT is substantially influenced by the context more than just pre-trained "
        "LLaMA 3",
        where="§4.3 (pre-trained vs fine-tuned), Table 3",
        effect="τ_|D| of an instruction-tuned model minus its pre-trained base (paired)",
        direction="+",
        unit="contexts",
    ),
    Spec(
        id="s0.corpus.summarization_vs_qa_{value}",
        paper=S0,
        quote="LMs performing abstractive summarization (CNN-DM) rely on/repeat the context more "
        "than long-form question-answering (PubMedQA)",
        where="§4.3 (contextual knowledge); Tables 2-3",
        effect="mean {label} of CNN/DM-like contexts minus PubMedQA-like contexts (two samples, "
        "each context averaged over models and λ)",
        direction="+",
        unit="contexts (resampled within each corpus)",
    ),
    Spec(
        id="s0.related_work.duplication.{kind}",
        paper=S0,
        quote="various factors such as model size, data duplication, and prompt length increase "
        "memorization",
        where="S0 §5 (prior work it cites); tested on S1's planted sequences",
        effect="Spearman correlation over sequences of the duplicate count with log ESP (regular "
        "sampling, {largest}, full prefix)",
        direction="+",
        unit="{units}",
    ),
    # ---- S1: decoders and the number of samples (§5.2, Fig. 2)
    Spec(
        id="s1.random_beats_greedy_x20.{decoder_slug}.{kind}",
        paper=S1,
        quote="if a targeted attacker samples each sequence even 20 times, it is enough to "
        "extract more sequences than is possible with greedy decoding",
        where="§5.2, Fig. 2",
        effect="share of sequences leaked within 20 samples under {decoder} (ESP >= 1/20) minus "
        "greedy's extraction rate (paired difference of proportions)",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.greedy_wins_single_sample.{kind}",
        paper=S1,
        quote="greedy decoding clearly outperforms all randomized decoding schemes",
        where="§5.2, Fig. 2 (first data point)",
        effect="smallest over the randomized decoders of greedy's extraction rate minus the "
        "decoder's mean ESP (the extraction rate of one sample)",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.extraction_rate_underestimates_x30.{kind}",
        paper=S1,
        quote="Extraction Rate, the predominant metric used in prior quantification work, "
        "underestimates the threat of leakage",
        where="Abstract; §5.2 (30 samples)",
        effect="largest over the randomized decoders of the share leaked within 30 samples, minus "
        "greedy's extraction rate",
        direction="+",
        unit="{units}",
    ),
    # ---- S1: prefix length and model size (§5.4-5.5, Tables 4-5)
    Spec(
        id="s1.longer_prefix_on_average.{kind}",
        paper=S1,
        quote=S1_ON_AVERAGE,
        where="Abstract; §5.5",
        effect="mean ESP (regular sampling) with a {longest}-token prefix minus a "
        "{shortest}-token prefix (paired)",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.some_easier_with_shorter_prefix.{kind}",
        paper=S1,
        quote="30.4−41.5% of our sequences are easier to extract with either shorter prefixes or "
        "smaller models",
        where="Abstract; §5.5, Table 5",
        effect="share of sequences whose ESP (regular sampling) is higher at some shorter prefix "
        "than at the full prefix; the null is no such sequence",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.larger_model_on_average.{kind}",
        paper=S1,
        quote=S1_ON_AVERAGE,
        where="Abstract; §5.4",
        effect="mean ESP (regular sampling, full prefix) of {largest} minus {smallest} (paired)",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.some_easier_with_smaller_model.{kind}",
        paper=S1,
        quote="a substantial percentage of samples (30.4−31.7%) are easier to extract with "
        "smaller models",
        where="§1; §5.4, Table 4",
        effect="share of sequences whose ESP (regular sampling) is higher on a smaller model than "
        "on {largest}; the null is no such sequence",
        direction="+",
        unit="{units}",
    ),
    Spec(
        id="s1.decreasing_with_prefix_ne_vs_long",
        paper=S1,
        quote="when considering the extraction of longer sequences, this percentage drops",
        where="§5.5, Table 5 (overall decreasing trends)",
        effect="share of named entities whose ESP (regular sampling) is lower at the full prefix "
        "than at the shortest, minus the same share of 50-token sequences (two samples)",
        direction="+",
        unit="{units} (resampled within each kind)",
    ),
    # ---- S1: partial leakage of named entities (§5.3, Tables 1-2)
    Spec(
        id="s1.partial_not_easier_topk5.n{n}",
        paper=S1,
        quote="a majority (85.25−94.82%) of Named Entities do not see an improvement in their "
        "likelihood of extraction even if we allow tokens to be mismatched",
        where="§5.3",
        effect="share of named entities with {n}-ISP > ESP under top-k 5; the paper says below "
        "one half",
        direction="-",
        null=0.5,
        unit="named entities, {largest}",
    ),
    Spec(
        id="s1.partial_more_mismatches_easier",
        paper=S1,
        quote="as the number of tokens that we allow to be incorrect increases, the likelihood of "
        "observing a partial leakage also increases",
        where="§5.3",
        effect="share of named entities easier with 2 mismatches minus with 1 (top-k 5, paired "
        "difference of proportions)",
        direction="+",
        unit="named entities, {largest}",
    ),
    Spec(
        id="s1.partial_sampling_vs_truncating",
        paper=S1,
        quote="even though the corresponding numbers for top-k and top-p are exact values, they "
        "are much lower",
        where="§5.3, Table 1",
        effect="smallest over {{top-k 10, top-p 0.6}} of the share of named entities easier with "
        "1 mismatch under regular sampling (a lower bound, 90% head) minus under that decoder",
        direction="+",
        unit="named entities, {largest}",
    ),
    Spec(
        id="s1.partial_trailing_mismatch.n{n}",
        paper=S1,
        quote="the most likely permutations are ones where either the last or last two tokens are "
        "incorrect",
        where="§5.3, Table 2",
        effect="share of named entities whose most likely {n}-mismatch partial match (top-k 5) "
        "has the last {n} token(s) wrong; the null is 1/C({m},{n}), every position set equally "
        "likely",
        direction="+",
        null=None,
        unit="named entities, {largest}",
    ),
    # ---- S1: token position (§5.6, Fig. 4) and the n-ISP bound (App. A)
    Spec(
        id="s1.later_tokens_easier.{kind}",
        paper=S1,
        quote="earlier tokens in the target suffix are generally harder to extract than later ones",
        where="§5.6, Fig. 4",
        effect="average TP (regular sampling) of the last suffix token over the average TP of the "
        "first",
        direction="+",
        null=1.0,
        unit="{units}",
    ),
    Spec(
        id="s1.later_tokens_easier_ne_vs_long",
        paper=S1,
        quote="the final token for each Named Entity only gets 50+3=53 tokens of context and yet "
        "are, on average, an order of magnitude easier to extract",
        where="§5.6, Fig. 4",
        effect="log(last/first average TP) of named entities minus of 50-token sequences (regular "
        "sampling, two samples)",
        direction="+",
        unit="{units} (resampled within each kind)",
    ),
    Spec(
        id="s1.isp_bound_holds",
        paper=S1,
        quote="gives us a strict cap on how large the risk of leakage in that particular scenario "
        "will be",
        where="App. A",
        effect="smallest slack of exact 1-ISP (full-vocabulary expansion) inside [approx, approx "
        "+ bound] (relative tolerance 1e-5)",
        direction="+",
        unit="checks (2 per entity × expansion setting)",
    ),
)
