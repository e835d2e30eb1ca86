# %% [markdown]
# # S4 — DP-RAG responses, the non-private baseline, and the planted facts' exact log-probs
# Every question of s4_retrieve is answered
# - by DP-RAG at each response budget epsilon: the documents its DP threshold kept, one stream
#   each, plus the public stream (the question, no document), sampled token by token from
#   exp(eps_token * U / (2 * s * C)) (Grislain's DP-ICL), with s = 1 (the paper's law) when every
#   document above the threshold is kept and s = 2 under a `max_retrieve` cap. eps_token comes
#   from epsilon, delta and the threshold's share by dp_accounting composition, every response
#   charged max_new_tokens tokens. The streams are laid out as the official code lays them out:
#   the document in the system message, then the question. Each document's head is forwarded
#   once for the stage, and every question that retrieves it forwards only its own turn on top,
#   once per stream whatever the epsilons and sweeps;
# - by the non-private RAG (epsilon = inf): the exact top rag_k documents in one prompt, greedy.
# (Planted questions: see Measured privacy below.)
#
# Sweeps: the Fig. 6 questions at each of `sweeps.epsilons` too (accuracy against epsilon); at the
# first epsilon, theta (the public stream's weight) over `sweeps.thetas`, on the questions whose
# disease holds at least `sweeps.thetas_min_documents` documents, and the number of voting
# documents (s4_retrieve's top-k thresholds).
#
# The published layout beside ours (`published`): the first `per_bucket` Fig. 6 questions of each
# bucket answered with no answer prefix and up to `published.max_new_tokens` new tokens (the
# published 70), each response charged all of them, at each of `published.epsilons`.
#
# Every answer opens with a public prefix, the same text in every stream (no privacy cost): a
# disease question's is `generation.answer_prefix`, a planted fact's its own ("The serial
# number of <patient>'s <implant> is"). The paper lets its responses run long; a short answer
# spends the budget on the tokens that carry the answer (its own advice: "ask question with
# shorter responses").
#
# Accuracy (Fig. 6): the response names the question's disease (`privleak.data.medical.
# names_disease`: case, spaces and punctuation ignored, spelling not); beside it the published
# evaluation's rule (`correct_published`: the name as written is a substring, case-sensitive).
# Fluency (not a paper quantity): the response's mean log-prob per token under the public stream,
# the LM given the question and no document. Measured privacy: each planted fact (a serial number
# held by exactly one document) is scored exactly under each decoder after the answer prefix: the
# sum over its tokens of the decoder's own next-token log-probability (DP-ICL: the mixed
# distribution, from the question's shared prefill; RAG: the LM's, and whether greedy emits it).
# The non-private RAG also answers it once (a response reproduces the fact when the serial appears
# verbatim); DP-RAG draws no response for it, its exact log-probability being the measurement.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
lm_dtype = None
device = "cpu"
dtype = "float32"
device_map = None
budget = {"epsilons": [5.0, 20.0], "delta": 1e-3, "retrieval_epsilon": 0.5}
max_retrieve = None
dp_icl = {"alpha": 1.0, "clip": 0.5, "theta": 0.01}
generation = {
    "template": "chat",
    "max_new_tokens": 4,
    "min_new_tokens": 1,
    "max_batch_streams": 40,
    "rag_k": 2,
    "answer_prefix": "The disease is called",
}
thetas = [1.0]
thetas_min_documents = 10
epsilons = [1.0]  # the Fig. 6 questions also at these response budgets
published = {"max_new_tokens": 8, "epsilons": [5.0], "per_bucket": 1}

# %%
import math
import time

import numpy as np
import pandas as pd

from privleak import models as registry
from privleak.data.medical import document_text, names_disease
from privleak.data.records import read_jsonl
from privleak.dp_icl_decode import HeadStore
from privleak.dp_rag import (
    Ask,
    DPICLSettings,
    document_start,
    dp_rag_generate,
    rag_fact_row,
    rag_generate,
    split_budget,
    token_sensitivity,
)
from privleak.errors import require
from privleak.pipeline import checkpoint, paths

IN, OUT = paths.INTERIM / "s4" / "retrieve", paths.INTERIM / "s4" / "generate"
OUT.mkdir(parents=True, exist_ok=True)
questions = pd.read_parquet(IN / "questions.parquet")
for column in ("answer_prefix", "fact"):  # a file: or hf: corpus plants no facts
    questions[column] = questions.get(column)
voters = pd.read_parquet(IN / "voters.parquet")
documents = {r["id"]: document_text(r) for r in read_jsonl(IN / "medical.jsonl")}
template, max_new = generation["template"], generation["max_new_tokens"]
budgets = [
    split_budget(e, budget["delta"], budget["retrieval_epsilon"], max_new)
    for e in budget["epsilons"]
]
sensitivity = token_sensitivity(max_retrieve)
model, tokenizer = registry.load(lm, device=device, dtype=lm_dtype or dtype, device_map=device_map)
store = checkpoint.open_stage("s4_generate", globals())
pd.DataFrame([b.__dict__ for b in budgets]).assign(sensitivity_in_C=sensitivity)

# %% [markdown]
# ## Responses: DP-RAG at each epsilon and in the sweeps, and the non-private RAG

# %%
prefix_of = {
    qid: prefix if kind == "planted" else generation["answer_prefix"]
    for qid, kind, prefix in zip(
        questions["question_id"], questions["kind"], questions["answer_prefix"], strict=True
    )
}
text_of = dict(zip(questions["question_id"], questions["question"], strict=True))


def setting(spent, theta: float) -> DPICLSettings:
    return DPICLSettings(spent.token_epsilon, dp_icl["alpha"], dp_icl["clip"], theta, sensitivity)


fact_of = {
    qid: tuple(tokenizer(fact, add_special_tokens=False)["input_ids"])
    for qid, fact in zip(questions["question_id"], questions["fact"], strict=True)
    if isinstance(fact, str)
}


def ask(qid: str, tag: tuple, chosen, spent, theta: float, **labels) -> tuple[Ask, dict]:
    """A disease question draws a response; a planted one is only scored (its fact's exact
    log-probs, from the same prefill)."""
    docs = tuple(documents[i] for i in chosen)
    forced = fact_of.get(qid, ())
    request = Ask((qid, *tag), text_of[qid], docs, setting(spent, theta), prefix_of[qid], forced,
                  sample=not forced)  # fmt: skip
    return request, {"question_id": qid, "epsilon": spent.epsilon, "theta": theta, **labels}


main = questions[questions["fig6"] | (questions["kind"] == "planted")]
swept = set(main.loc[main["fig6"] & (main["frequency"] >= thetas_min_documents), "question_id"])
requests = [
    ask(qid, ("main",), chosen, spent, dp_icl["theta"], sweep="main")
    for qid, chosen in zip(main["question_id"], main["chosen"], strict=True)
    for spent in budgets
]
swept_budgets = [
    split_budget(e, budget["delta"], budget["retrieval_epsilon"], max_new) for e in epsilons
]
requests += [
    ask(qid, ("main",), chosen, spent, dp_icl["theta"], sweep="main")
    for qid, chosen, fig6 in zip(main["question_id"], main["chosen"], main["fig6"], strict=True)
    if fig6
    for spent in swept_budgets
]
requests += [
    ask(qid, ("theta",), chosen, budgets[0], theta, sweep="theta")
    for qid, chosen in zip(questions["question_id"], questions["chosen"], strict=True)
    if qid in swept
    for theta in thetas
    if theta != dp_icl["theta"]
]
requests += [
    ask(qid, ("voters", k), chosen, budgets[0], dp_icl["theta"], sweep="voters", voters=k)
    for qid, k, chosen in zip(
        voters["question_id"], voters["voters"], voters["chosen"], strict=True
    )  # fmt: skip
]
common = {
    "template": template,
    "max_new_tokens": max_new,
    "min_new_tokens": generation["min_new_tokens"],
    "max_batch_streams": generation["max_batch_streams"],
}
# each document's head prefilled once, for every question and layout, on the template's start
heads = HeadStore(model, start=document_start(tokenizer, template))
started = time.perf_counter()
answers = dp_rag_generate(
    model, tokenizer, [r for r, _ in requests], seed=seed, cache=store.cache("dp_rag", lm),
    store=heads, **common,
)  # fmt: skip
print(f"DP-RAG: {len(requests)} responses or scored facts for {len(questions)} questions in "
      f"{time.perf_counter() - started:.1f} s ({len(heads)} distinct heads prefilled)")  # fmt: skip
rows = [{"decoder": "dp_rag", **labels, **answer}
        for (_, labels), answer in zip(requests, answers, strict=True)]  # fmt: skip
# The published layout: no answer prefix, published["max_new_tokens"] new tokens, each response
# charged all of them, on the first per_bucket Fig. 6 questions of each bucket.
layout = main[main["fig6"]].groupby("bucket", sort=False).head(published["per_bucket"] or len(main))
long_budgets = [
    split_budget(e, budget["delta"], budget["retrieval_epsilon"], published["max_new_tokens"])
    for e in published["epsilons"]
]
long_requests = [
    (
        Ask((qid, "published"), text_of[qid], tuple(documents[i] for i in chosen),
            setting(spent, dp_icl["theta"])),
        {"question_id": qid, "epsilon": spent.epsilon, "theta": dp_icl["theta"],
         "sweep": "published"},
    )
    for qid, chosen in zip(layout["question_id"], layout["chosen"], strict=True)
    for spent in long_budgets
]  # fmt: skip
if long_requests:
    started = time.perf_counter()
    answers = dp_rag_generate(
        model, tokenizer, [r for r, _ in long_requests], seed=seed,
        cache=store.cache("dp_rag_published", lm), store=heads,
        **common | {"max_new_tokens": published["max_new_tokens"]},
    )  # fmt: skip
    seconds = time.perf_counter() - started
    print(f"DP-RAG, published layout: {len(long_requests)} responses of up to "
          f"{published['max_new_tokens']} tokens in {seconds:.1f} s")  # fmt: skip
    rows += [{"decoder": "dp_rag", **labels, **answer}
             for (_, labels), answer in zip(long_requests, answers, strict=True)]  # fmt: skip
scored, rows = [r for r in rows if "tokens" not in r], [r for r in rows if "tokens" in r]
keys = main["question_id"].tolist()
started = time.perf_counter()
answers = rag_generate(
    model,
    tokenizer,
    main["question"].tolist(),
    [[documents[i] for i in rag] for rag in main["rag"]],
    keys=keys,
    answer_prefixes=[prefix_of[q] for q in keys],
    cache=store.cache("rag", lm),
    **common,
)
print(f"non-private RAG: {len(keys)} questions in {time.perf_counter() - started:.1f} s")
rows += [
    {"decoder": "rag", "question_id": key, "epsilon": math.inf, "sweep": "main",
     "public_only": False, **answer}
    for key, answer in zip(keys, answers, strict=True)
]  # fmt: skip
responses = pd.DataFrame(rows).merge(
    questions[["question_id", "kind", "disease", "frequency", "bucket", "fact"]],
    on="question_id",
)
responses["correct"] = [
    names_disease(text, disease) if kind == "disease" else None
    for text, disease, kind in zip(
        responses["text"], responses["disease"], responses["kind"], strict=True
    )
]
# the published evaluation's rule beside ours: the disease's name as written, case-sensitive
responses["correct_published"] = [
    disease in text if kind == "disease" else None
    for text, disease, kind in zip(
        responses["text"], responses["disease"], responses["kind"], strict=True
    )
]
responses["reproduced"] = [
    fact.strip() in text if kind == "planted" else None
    for text, fact, kind in zip(
        responses["text"], responses["fact"], responses["kind"], strict=True
    )
]
responses["new_tokens"] = responses["tokens"].map(len)
responses["fluency"] = [
    float(np.mean(values)) if isinstance(values, list) and values else math.nan
    for values in responses["public_logprobs"]
]
responses["answer_prefix"] = (
    responses["question_id"].map(prefix_of).where(responses["sweep"] != "published", "")
)
responses.groupby(["kind", "sweep", "decoder", "epsilon"])[["correct", "documents"]].agg(
    lambda x: x.astype(float).mean()
)

# %% [markdown]
# ## Planted facts: exact log-probability under each decoder

# %%
planted = questions[questions["kind"] == "planted"]
dp_facts = [
    {"question_id": row["question_id"], "fact_tokens": len(row["forced_logprobs"]),
     "decoder": "dp_rag", "epsilon": row["epsilon"],
     "log_prob": float(np.sum(row["forced_logprobs"])), "greedy_emits": None}
    for row in scored
]  # fmt: skip
started = time.perf_counter()
rag_facts = [
    store.get_or_compute(
        ("planted", lm, question["question_id"]),
        lambda q=question: rag_fact_row(
            model,
            tokenizer,
            q,
            documents,
            template=template,
            blocked_steps=generation["min_new_tokens"],
        ),
    )  # fmt: skip
    for _, question in planted.iterrows()
]
print(f"{len(planted)} planted facts scored under the RAG in {time.perf_counter() - started:.1f} s")
print(store.summary())
facts = dp_facts + rag_facts
facts = pd.DataFrame(
    facts, columns=["question_id", "fact_tokens", "decoder", "epsilon", "log_prob", "greedy_emits"]
)
require(
    bool(np.isfinite(facts["log_prob"]).all()) if len(facts) else True,
    "s4_generate: a planted fact's log-probability is not finite",
)
facts.groupby(["decoder", "epsilon"])["log_prob"].describe()

# %% [markdown]
# ## Save

# %%
responses.drop(columns=["fact"]).to_parquet(OUT / "responses.parquet", index=False)
facts.to_parquet(OUT / "planted.parquet", index=False)
pd.DataFrame(
    [b.__dict__ | {"layout": "main"} for b in budgets]
    + [b.__dict__ | {"layout": "sweep"} for b in swept_budgets]
    + [b.__dict__ | {"layout": "published"} for b in long_budgets]
).assign(sensitivity_in_C=sensitivity).to_parquet(OUT / "budgets.parquet", index=False)
