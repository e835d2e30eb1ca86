# %% [markdown]
# # S2 — Static at PAD's nominal ε: a like-for-like Static baseline (ours)
# Table 1's Static runs at one fixed σ (the official default 0.1), so PAD against Static compares
# two free parameters. Here Static spends PAD's privacy budget instead. Per corpus, the target is
# the median of PAD's per-response γ-relaxed ε at its optimised α in s2_generate (the ε the paper
# reports; δ = `accounting.delta`), and σ is the one whose ε under PAD's own accountant, every
# step of a `decoding.max_new_tokens`-token response charged (Static screens none), equals it:
# - `static_matched`: each step charged at Δ = 1, the worst case Static's noise records carry (it
#   estimates no sensitivity): the strict guarantee, the larger σ; the claims read this one;
# - `static_matched_pad_sensitivity`: each step charged PAD's mean Δ_t² over its own recorded
#   steps (Eq. 4's estimate, as if Static's steps had PAD's margins): the smaller σ, beside it.
# `privleak.pad_matching` holds the definitions. Every prompt of s2_index is answered once more
# under both, forked from one prefill, with the same template, temperature and seed as
# s2_generate; leakage is judged as Table 1's, against the prompt's retrieved top contexts. A
# corpus whose median PAD response screened every step has no finite σ and is not decoded.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
lm_dtype = None
template = "chat"
device = "cpu"
dtype = "float32"
device_map = None
decoding = {
    "temperature": 0.2,
    "max_new_tokens": 10,
    "min_new_tokens": 1,
    "max_batch_streams": 32,
    "forward_mode": "slots",
}
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}

# %%
import pandas as pd

from privleak import models as registry
from privleak.pad import StaticNoise
from privleak.pad_matching import matched_static
from privleak.pad_rag import defended_generate, rag_prompt
from privleak.pipeline import paths

S2 = paths.INTERIM / "s2"
OUT = S2 / "matched"
OUT.mkdir(parents=True, exist_ok=True)
prompts = pd.read_parquet(S2 / "index" / "prompts.parquet")
chunks = pd.read_parquet(S2 / "index" / "chunks.parquet")
text = {(r.corpus, r.id): r.text for r in chunks.itertuples()}
generated = pd.read_parquet(S2 / "generate" / "responses.parquet")
matched = matched_static(
    generated[generated["defense"] == "pad"], decoding["max_new_tokens"], accounting["delta"]
)
model, tokenizer = registry.load(lm, device=device, dtype=lm_dtype or dtype, device_map=device_map)
matched

# %%
rows = []
for m in matched.dropna(subset=["sigma"]).itertuples():
    defenses = {"static_matched": m.sigma,
                "static_matched_pad_sensitivity": m.sigma_pad_sensitivity}  # fmt: skip
    asked = prompts[prompts["corpus"] == m.corpus]
    keys = list(zip(asked["corpus"], asked["prompt_id"], strict=True))
    answered = defended_generate(
        model, tokenizer,
        [rag_prompt(r.question, [text[(r.corpus, c)] for c in r.context_ids])
         for r in asked.itertuples()],
        keys, {name: StaticNoise(sigma) for name, sigma in defenses.items()},
        temperature=decoding["temperature"], max_new_tokens=decoding["max_new_tokens"],
        min_new_tokens=decoding["min_new_tokens"], seed=seed,
        max_batch_streams=decoding["max_batch_streams"], forward_mode=decoding["forward_mode"],
        template=template,
    )  # fmt: skip
    contexts = dict(zip(keys, asked["context_ids"].map(list), strict=True))
    for row in answered:
        corpus, prompt_id = row.pop("key")
        placed = contexts[(corpus, prompt_id)]
        rows.append({"corpus": corpus, "prompt_id": prompt_id, "family": "matched",
                     "value": defenses[row["defense"]], "retrieved_ids": placed,
                     "context_ids": placed, **row})  # fmt: skip
responses = pd.DataFrame(rows).sort_values(["corpus", "prompt_id", "defense"], kind="stable")
responses.to_parquet(OUT / "responses.parquet", index=False)
matched.to_parquet(OUT / "sigmas.parquet", index=False)
responses.groupby(["corpus", "defense"])["tokens"].apply(lambda t: t.map(len).mean())
