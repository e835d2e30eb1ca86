# %% [markdown]
# # S4 — DP-RAG retrieval: corpus, exact scores, DP thresholds
# Grislain's privacy-unit-preserving retrieval. The corpus holds one document per privacy unit
# (field `unit`; a medical_dirichlet patient). Every document is embedded with MiniLM (batched)
# and every question is scored against every document: exact cosine similarity, no approximate
# index, because the DP threshold's utility counts all documents. The questions:
# - one public symptom question per disease present in the corpus (accuracy, Fig. 6), with the
#   disease's frequency = its number of documents;
# - one question per planted rare detail (a fact in exactly one document; measured privacy).
#
# Per question, the threshold is drawn by the exponential mechanism (top-k or top-p utility,
# scores clipped to `score_range`, `retrieval_epsilon`) from the random stream of
# (seed, question id); the documents above it are kept, best first, at most `max_retrieve`.
# The non-private baseline keeps the exact top `rag_k`. Figs. 4-5's densities use
# `densities.documents` documents drawn at random, scored against the most frequent disease's
# question, with `draws` sampled thresholds each to check the sampler against the density.

# %% tags=["parameters"]
seed = 0
embedder = "all-minilm-l6-v2"
device = "cpu"
corpus = {
    "source": "synthetic:medical_dirichlet",
    "n": 60,
    "options": {"diseases": 4, "concentration": 1.0, "rare_details": 2},
}
embed_batch_size = 64
max_diseases = None
retrieval_epsilon = 1.0
retrieval = {
    "utility": "top_k",
    "k": 4,
    "p": 0.5,
    "alpha": 5.0,
    "score_range": [0.0, 1.0],
    "max_retrieve": 4,
}
rag_k = 2
densities = {"documents": 30, "epsilon": 1.0, "k": 10, "p": 0.5, "draws": 2000}

# %%
import collections

import numpy as np
import pandas as pd

from privleak.accounting import interval_density, sample_from_intervals
from privleak.data import loaders
from privleak.data.medical import CORPUS_FIELDS, check_units, document_text, rare_detail_question
from privleak.data.records import first_gap, gap_message, read_jsonl
from privleak.errors import PrivleakError, require
from privleak.models import load_embedder
from privleak.pipeline import paths
from privleak.retrieval import cosine_scores, embed, retrieve, top_k_utility, top_p_utility

OUT = paths.INTERIM / "s4" / "retrieve"
OUT.mkdir(parents=True, exist_ok=True)
low, high = retrieval["score_range"]

# %% [markdown]
# ## The corpus: one document per privacy unit

# %%
records = read_jsonl(loaders.materialize("medical", corpus, OUT, seed))
where = f"s4 corpus (source '{corpus['source']}')"
check_units(records, where)
gap = first_gap(records, CORPUS_FIELDS)
if gap is not None:
    raise PrivleakError(
        gap_message(where, records, gap, CORPUS_FIELDS) + " (map columns with s4.corpus.fields)"
    )
secrets_path = OUT / "medical.secrets.jsonl"
secrets = read_jsonl(secrets_path) if secrets_path.exists() else []
frequency = collections.Counter(r["disease"] for r in records)
print(f"{len(records)} documents, {len(frequency)} diseases, {len(secrets)} planted secrets")

# %% [markdown]
# ## Questions

# %%
by_disease = {}
for record in records:
    by_disease.setdefault(record["disease"], record["question"])
diseases = sorted(by_disease, key=lambda d: (-frequency[d], d))[:max_diseases]
questions = [
    {
        "question_id": f"disease:{disease}",
        "kind": "disease",
        "question": by_disease[disease],
        "disease": disease,
        "frequency": frequency[disease],
    }
    for disease in diseases
]
holder = {r["id"]: r for r in records}
for secret in (s for s in secrets if s["kind"] == "rare_detail"):
    record = holder[secret["record_id"]]
    asked = rare_detail_question(record["patient"], secret["text"])
    questions.append(
        {
            "question_id": f"planted:{record['id']}",
            "kind": "planted",
            "disease": record["disease"],
            "frequency": frequency[record["disease"]],
            "record_id": record["id"],
            **asked,
        }
    )
if not any(q["kind"] == "planted" for q in questions):
    print("no planted rare details in this corpus: the measured-privacy questions are skipped")

# %% [markdown]
# ## Exact scores for every (question, document)

# %%
encoder = load_embedder(embedder, device=device)
document_vectors = embed(encoder, [document_text(r) for r in records], embed_batch_size)
question_vectors = embed(encoder, [q["question"] for q in questions], embed_batch_size)
scores = cosine_scores(question_vectors, document_vectors)  # [Q, N]
require(bool(np.isfinite(scores).all()), "s4_retrieve: a cosine score is not finite")

# %% [markdown]
# ## DP thresholds and the documents they keep

# %%
ids = np.array([r["id"] for r in records])
document_disease = np.array([r["disease"] for r in records])
rows = []
for question, row in zip(questions, scores, strict=True):
    kept = retrieve(
        row,
        epsilon=retrieval_epsilon,
        seed=seed,
        key=question["question_id"],
        max_retrieve=retrieval["max_retrieve"],
        k=retrieval["k"] if retrieval["utility"] == "top_k" else None,
        p=retrieval["p"] if retrieval["utility"] == "top_p" else None,
        alpha=retrieval["alpha"],
        low=low,
        high=high,
    )
    exact = np.argsort(-row, kind="stable")[:rag_k]
    rows.append(
        {
            **question,
            "threshold": kept.threshold,
            "above": kept.above,
            "chosen": ids[kept.chosen].tolist(),
            "chosen_same_disease": int(
                (document_disease[kept.chosen] == question["disease"]).sum()
            ),
            "rag": ids[exact].tolist(),
            "holder_chosen": question.get("record_id") in set(ids[kept.chosen]),
            "holder_rank": (
                int((row > row[list(ids).index(question["record_id"])]).sum())
                if question["kind"] == "planted"
                else None
            ),
        }
    )
table = pd.DataFrame(rows)
print(
    f"threshold keeps {table['above'].mean():.1f} documents on average (k = {retrieval['k']}); "
    f"{int((table['above'] == 0).sum())} of {len(table)} questions keep none and are answered "
    "from the public stream alone"
)
table[["question_id", "frequency", "threshold", "above", "chosen_same_disease"]]

# %% [markdown]
# ## Figs. 4-5: threshold densities over one question's scores

# %%
rng = np.random.default_rng(seed)
sample = rng.choice(len(records), size=densities["documents"], replace=False)
sample_scores = scores[0, sample]
curves, draws = [], []
utilities = {
    "top_k": top_k_utility(sample_scores, densities["k"], low, high),
    "top_p": top_p_utility(sample_scores, densities["p"], retrieval["alpha"], low, high),
}
for utility, (edges, values) in utilities.items():
    density = interval_density(edges, values, densities["epsilon"])
    curves += [
        {"utility": utility, "low": a, "high": b, "utility_value": u, "density": d}
        for a, b, u, d in zip(edges[:-1], edges[1:], values, density, strict=True)
    ]
    draws += [
        {
            "utility": utility,
            "threshold": sample_from_intervals(edges, values, densities["epsilon"], rng),
        }
        for _ in range(densities["draws"])
    ]

# %% [markdown]
# ## Save

# %%
table.to_parquet(OUT / "questions.parquet", index=False)
np.save(OUT / "scores.npy", scores)
pd.DataFrame(curves).to_parquet(OUT / "densities.parquet", index=False)
pd.DataFrame(draws).to_parquet(OUT / "threshold_draws.parquet", index=False)
pd.DataFrame({"score": sample_scores}).to_parquet(OUT / "density_scores.parquet", index=False)
