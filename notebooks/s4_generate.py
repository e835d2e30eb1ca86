# %% [markdown]
# # S4 — DP-RAG responses, the non-private baseline, and the planted facts' exact log-probs
# Every question of s4_retrieve is answered
# - by DP-RAG at each response budget epsilon: the documents its DP threshold kept, one stream
#   each, plus the public stream (the question alone), sampled token by token from
#   exp(eps_token * U / (2 * 2C)) (Grislain's DP-ICL; sensitivity 2C under the max_retrieve cap);
#   eps_token comes from epsilon, delta and the threshold's share by dp_accounting composition,
#   every response charged max_new_tokens tokens. All epsilons decode in one call, so a
#   question's prompts are prefilled once for every epsilon;
# - by the non-private RAG (epsilon = inf): the exact top rag_k documents in one prompt, greedy.
#
# Every answer opens with a public prefix, the same text in every stream (no privacy cost): a
# disease question's is `generation.answer_prefix`, a planted fact's its own ("The serial
# number of <patient>'s <implant> is"). The paper lets its responses run long; a short answer
# spends the budget on the tokens that carry the answer (its own advice: "ask question with
# shorter responses").
#
# Accuracy (Fig. 6): the response names the question's disease (`privleak.dp_rag.names_disease`:
# case, spaces and punctuation ignored, spelling not). Measured privacy: each planted fact (a
# serial number held by exactly one document) is asked for; a response reproduces it when the
# serial appears verbatim. Beside that single sample, its exact log-probability under each decoder
# after the answer prefix: the sum over its tokens of the decoder's own next-token log-probability
# (DP-ICL: the mixed distribution; RAG: the LM's, and whether greedy emits it).

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
device = "cpu"
dtype = "float32"
device_map = None
budget = {"epsilons": [5.0, 20.0], "delta": 1e-3, "retrieval_epsilon": 1.0}
dp_icl = {"alpha": 1.0, "clip": 0.5, "theta": 1.0}
generation = {
    "template": "chat",
    "max_new_tokens": 6,
    "min_new_tokens": 1,
    "max_batch_streams": 10,
    "rag_k": 2,
    "answer_prefix": "The disease is called",
}

# %%
import math
import time

import numpy as np
import pandas as pd

from privleak import models as registry
from privleak.data.medical import document_text, names_disease
from privleak.data.records import read_jsonl
from privleak.dp_rag import (
    DPICLSettings,
    dp_rag_generate,
    planted_fact_rows,
    rag_generate,
    split_budget,
)
from privleak.errors import require
from privleak.pipeline import checkpoint, paths

IN, OUT = paths.INTERIM / "s4" / "retrieve", paths.INTERIM / "s4" / "generate"
OUT.mkdir(parents=True, exist_ok=True)
questions = pd.read_parquet(IN / "questions.parquet")
for column in ("answer_prefix", "fact"):  # a file: or hf: corpus plants no facts
    questions[column] = questions.get(column)
documents = {r["id"]: document_text(r) for r in read_jsonl(IN / "medical.jsonl")}
template, max_new = generation["template"], generation["max_new_tokens"]
budgets = [
    split_budget(e, budget["delta"], budget["retrieval_epsilon"], max_new)
    for e in budget["epsilons"]
]
model, tokenizer = registry.load(lm, device=device, dtype=dtype, device_map=device_map)
store = checkpoint.open_stage("s4_generate", globals())
pd.DataFrame([b.__dict__ for b in budgets])

# %% [markdown]
# ## Responses: DP-RAG at each epsilon, and the non-private RAG

# %%
ask = questions["question"].tolist()
keys = questions["question_id"].tolist()
prefixes = [
    prefix if kind == "planted" else generation["answer_prefix"]
    for kind, prefix in zip(questions["kind"], questions["answer_prefix"], strict=True)
]
common = {
    "keys": keys,
    "template": template,
    "max_new_tokens": max_new,
    "min_new_tokens": generation["min_new_tokens"],
    "answer_prefixes": prefixes,
    "max_batch_streams": generation["max_batch_streams"],
}
settings = [DPICLSettings(spent.token_epsilon, **dp_icl) for spent in budgets]
started = time.perf_counter()
answers = dp_rag_generate(
    model,
    tokenizer,
    ask,
    [[documents[i] for i in chosen] for chosen in questions["chosen"]],
    settings,
    seed=seed,
    cache=store.cache("dp_rag", lm),
    **common,
)
print(f"DP-RAG at epsilons {budget['epsilons']}: {len(ask)} questions in "
      f"{time.perf_counter() - started:.1f} s")  # fmt: skip
rows = [
    {"question_id": key, "decoder": "dp_rag", "epsilon": spent.epsilon, **answer}
    for spent, per_question in zip(budgets, answers, strict=True)
    for key, answer in zip(keys, per_question, strict=True)
]
started = time.perf_counter()
answers = rag_generate(
    model,
    tokenizer,
    ask,
    [[documents[i] for i in rag] for rag in questions["rag"]],
    cache=store.cache("rag", lm),
    **common,
)
print(f"non-private RAG: {len(ask)} questions in {time.perf_counter() - started:.1f} s")
rows += [
    {"question_id": key, "decoder": "rag", "epsilon": math.inf, "public_only": False, **answer}
    for key, answer in zip(keys, answers, strict=True)
]
responses = pd.DataFrame(rows).merge(
    questions[["question_id", "kind", "disease", "frequency", "fact"]],
    on="question_id",
)
responses["correct"] = [
    names_disease(text, disease) if kind == "disease" else None
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
responses["answer_prefix"] = responses["question_id"].map(dict(zip(keys, prefixes, strict=True)))
responses.groupby(["kind", "decoder", "epsilon"])[["correct", "reproduced", "documents"]].agg(
    lambda x: x.astype(float).mean()
)

# %% [markdown]
# ## Planted facts: exact log-probability under each decoder

# %%
planted = questions[questions["kind"] == "planted"]


def fact_rows(question) -> list[dict]:
    return planted_fact_rows(
        model, tokenizer, question, documents, settings, budgets,
        template=template, blocked_steps=generation["min_new_tokens"],
    )  # fmt: skip


started = time.perf_counter()
facts = [
    row
    for _, question in planted.iterrows()
    for row in store.get_or_compute(
        ("planted", lm, question["question_id"]), lambda q=question: fact_rows(q)
    )  # fmt: skip
]
print(f"{len(planted)} planted facts scored in {time.perf_counter() - started:.1f} s")
print(store.summary())
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
pd.DataFrame([b.__dict__ for b in budgets]).to_parquet(OUT / "budgets.parquet", index=False)
