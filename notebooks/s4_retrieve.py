# %% [markdown]
# # S4 — DP-RAG retrieval: corpus, exact scores, DP thresholds
# Grislain's privacy-unit-preserving retrieval. The corpus holds one document per privacy unit
# (field `unit`; a medical_dirichlet patient). Every document is embedded with MiniLM (batched)
# and every question is scored against every document: exact cosine similarity, no approximate
# index, because the DP threshold's utility counts all documents. The questions:
# - Fig. 6, as the published evaluation asks them: one symptom question per patient (the
#   patient's privacy unit), `questions.per_bucket` patients drawn uniformly from each bucket of
#   disease frequency (all of them when null), so each bucket's accuracy is over its patients;
# - one question per planted rare detail (a fact in exactly one document; measured privacy), the
#   first `questions.planted` of them.
#
# Per question, the threshold is drawn by the exponential mechanism (top-k or top-p utility,
# scores clipped to `score_range`, `retrieval_epsilon`) from the random stream of
# (seed, question id); every document above it is kept, best first (at most `max_retrieve` when
# set). The voters sweep: one patient of every disease holding at least
# `sweeps.voters_min_documents` documents (a drawn one, else the disease's first, asked for the
# sweep only: `fig6` False) is asked with top-k thresholds at k = each of `sweeps.voters`, so
# about k documents vote. The non-private baseline keeps the exact top
# `rag_k`. Figs. 4-5's densities use `densities.documents` documents drawn at random, scored
# against the first question, with `draws` sampled thresholds each to check the sampler against
# the density.

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
retrieval_epsilon = 0.5
retrieval = {
    "utility": "top_k",
    "k": 4,
    "p": 0.5,
    "alpha": 5.0,
    "score_range": [0.0, 1.0],
    "max_retrieve": None,
}
rag_k = 2
questions = {"per_bucket": 2, "planted": 1}
voters = [2, 4]
voters_min_documents = 10
densities = {"documents": 30, "epsilon": 1.0, "k": 10, "p": 0.5, "draws": 2000}

# %%
import collections

import numpy as np
import pandas as pd

from privleak.accounting import interval_density, sample_from_intervals
from privleak.data import loaders
from privleak.data.medical import CORPUS_FIELDS, check_units, document_text, rare_detail_question
from privleak.data.records import first_gap, gap_message, read_jsonl
from privleak.dp_rag_eval import bucket, sample_patients, with_questions
from privleak.errors import PrivleakError, require
from privleak.models import load_embedder
from privleak.pipeline import paths
from privleak.pipeline.params import profile_key
from privleak.retrieval import cosine_scores, embed, retrieve, top_k_utility, top_p_utility

OUT = paths.INTERIM / "s4" / "retrieve"
OUT.mkdir(parents=True, exist_ok=True)
low, high = retrieval["score_range"]

# %% [markdown]
# ## The corpus: one document per privacy unit

# %%
records = read_jsonl(loaders.materialize("medical", corpus, OUT, seed))
where = f"s4 corpus (source '{corpus['source']}')"
records = with_questions(records, where)
check_units(records, where)
require(
    densities["documents"] <= len(records),
    f"params {profile_key('s4.densities.documents')} = {densities['documents']}: the {where} "
    f"holds {len(records)} documents; allowed: at most that many",
)
gap = first_gap(records, CORPUS_FIELDS)
if gap is not None:
    raise PrivleakError(
        gap_message(where, records, gap, CORPUS_FIELDS) + " (map columns with s4.corpus.fields)"
    )
secrets_path = OUT / "medical.secrets.jsonl"
secrets = read_jsonl(secrets_path) if secrets_path.exists() else []
frequency = collections.Counter(r["disease"] for r in records)
print(f"{len(records)} documents, {len(frequency)} diseases, {len(secrets)} planted secrets")
print(pd.Series({d: bucket(n) for d, n in frequency.items()}).value_counts())

# %% [markdown]
# ## Questions

# %%
patients = sample_patients(records, questions["per_bucket"], seed)
asked = [
    {
        "question_id": f"patient:{record['id']}",
        "kind": "disease",
        "question": record["question"],
        "disease": record["disease"],
        "frequency": frequency[record["disease"]],
        "bucket": bucket(frequency[record["disease"]]),
        "fig6": True,
    }
    for record in patients
]
# the voters sweep asks one patient of every disease with enough documents: a drawn one, else the
# disease's first patient, asked for the sweep only (claims resample diseases)
drawn = {q["disease"] for q in asked}
for record in records:
    disease = record["disease"]
    if frequency[disease] >= voters_min_documents and disease not in drawn:
        drawn.add(disease)
        asked.append({"question_id": f"patient:{record['id']}", "kind": "disease",
                      "question": record["question"], "disease": disease,
                      "frequency": frequency[disease], "bucket": bucket(frequency[disease]),
                      "fig6": False})  # fmt: skip
holder = {r["id"]: r for r in records}
planted = [s for s in secrets if s["kind"] == "rare_detail"][: questions["planted"]]
for secret in planted:
    record = holder[secret["record_id"]]
    detail = rare_detail_question(record["patient"], secret["text"])
    asked.append(
        {
            "question_id": f"planted:{record['id']}",
            "kind": "planted",
            "disease": record["disease"],
            "frequency": frequency[record["disease"]],
            "bucket": bucket(frequency[record["disease"]]),
            "fig6": False,
            "record_id": record["id"],
            **detail,
        }
    )
if not any(q["kind"] == "planted" for q in asked):
    print("no planted rare details in this corpus: the measured-privacy questions are skipped")

# %% [markdown]
# ## Exact scores for every (question, document)

# %%
encoder = load_embedder(embedder, device=device)
document_vectors = embed(encoder, [document_text(r) for r in records], embed_batch_size)
question_vectors = embed(encoder, [q["question"] for q in asked], embed_batch_size)
scores = cosine_scores(question_vectors, document_vectors)  # [Q, N]
require(bool(np.isfinite(scores).all()), "s4_retrieve: a cosine score is not finite")

# %% [markdown]
# ## DP thresholds and the documents they keep

# %%
ids = np.array([r["id"] for r in records])
document_disease = np.array([r["disease"] for r in records])
cap = retrieval["max_retrieve"] or len(records)  # null: every document above the threshold


def kept_documents(row, key, utility: str, k: int) -> dict:
    kept = retrieve(
        row,
        epsilon=retrieval_epsilon,
        seed=seed,
        key=key,
        max_retrieve=cap,
        k=k if utility == "top_k" else None,
        p=retrieval["p"] if utility == "top_p" else None,
        alpha=retrieval["alpha"],
        low=low,
        high=high,
    )
    return {"threshold": kept.threshold, "above": kept.above, "chosen": ids[kept.chosen].tolist()}


rows, by_voters, swept = [], [], set()
for question, row in zip(asked, scores, strict=True):
    kept = kept_documents(row, question["question_id"], retrieval["utility"], retrieval["k"])
    exact = np.argsort(-row, kind="stable")[:rag_k]
    rows.append(
        {
            **question,
            **kept,
            "chosen_same_disease": int(
                (document_disease[np.isin(ids, kept["chosen"])] == question["disease"]).sum()
            ),
            "rag": ids[exact].tolist(),
            "holder_chosen": question.get("record_id") in set(kept["chosen"]),
            "holder_rank": (
                int((row > row[list(ids).index(question["record_id"])]).sum())
                if question["kind"] == "planted"
                else None
            ),
        }
    )
    first_of_its_disease = question["kind"] == "disease" and question["disease"] not in swept
    if first_of_its_disease and question["frequency"] >= voters_min_documents:
        swept.add(question["disease"])
        for k in voters:
            by_k = kept_documents(row, (question["question_id"], "voters", k), "top_k", k)
            same = document_disease[np.isin(ids, by_k["chosen"])] == question["disease"]
            by_voters.append({"question_id": question["question_id"], "voters": k, **by_k,
                           "chosen_same_disease": int(same.sum())})  # fmt: skip
by_voters = pd.DataFrame(
    by_voters,
    columns=["question_id", "voters", "threshold", "above", "chosen", "chosen_same_disease"],
)
table = pd.DataFrame(rows)
print(
    f"threshold keeps {table['above'].mean():.1f} documents on average ({retrieval['utility']}); "
    f"{int((table['above'] == 0).sum())} of {len(table)} questions keep none and are answered "
    "from the public stream alone"
)
print(f"voters sweep: {by_voters['question_id'].nunique()} questions x k = {voters}")
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
by_voters.to_parquet(OUT / "voters.parquet", index=False)
np.save(OUT / "scores.npy", scores)
pd.DataFrame(curves).to_parquet(OUT / "densities.parquet", index=False)
pd.DataFrame(draws).to_parquet(OUT / "threshold_draws.parquet", index=False)
pd.DataFrame({"score": sample_scores}).to_parquet(OUT / "density_scores.parquet", index=False)
