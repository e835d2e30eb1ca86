# %% [markdown]
# # S2 — what a longer response changes: leakage at the profile's length and at a longer one
# The paper lets every response run 256 tokens; the embedded profile stops at
# `decoding.max_new_tokens` to fit its budget, and a 20-word Repeat then needs most of a response.
# Here the first `length.prompts` prompts of each corpus are answered once more under Table 1's
# noise defenses (Extraction, Static, PAD; the same prompts, template, temperature and seed as
# s2_generate) for `length.max_new_tokens` tokens. Decoding is causal, so each response's first
# `decoding.max_new_tokens` tokens are the response a decode stopped there would give (the same
# draws): both lengths are scored on the same responses, paired by construction. Leakage is
# judged as s2's (render_s2) judges it: against the contexts the defense placed in its prompt.

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
pad = {
    "epsilon": 0.2,
    "amplification": 3.0,
    "min_sensitivity": 0.4,
    "tau_conf": 0.9,
    "tau_margin": 2.0,
    "weights": [0.3, 0.2, 0.3],
}
static_sigma = 0.1
length = {"prompts": 1, "max_new_tokens": 16}

# %%
import pandas as pd

from privleak import models as registry
from privleak.errors import require
from privleak.pad import PADSettings
from privleak.pad_rag import defended_generate, noise_defenses, rag_prompt
from privleak.pipeline import paths

IN, OUT = paths.INTERIM / "s2" / "index", paths.INTERIM / "s2" / "length"
OUT.mkdir(parents=True, exist_ok=True)
short, long = decoding["max_new_tokens"], length["max_new_tokens"]
require(
    long > short,
    f"s2.length.max_new_tokens ({long}) must exceed decoding.max_new_tokens ({short}): it is "
    "the longer length",
)
prompts = (
    pd.read_parquet(IN / "prompts.parquet").groupby("corpus", sort=False).head(length["prompts"])
)
chunks = pd.read_parquet(IN / "chunks.parquet")
text = {(r.corpus, r.id): r.text for r in chunks.itertuples()}
weights = dict(zip(("weight_entropy", "weight_position", "weight_confidence"), pad["weights"],
                   strict=True))  # fmt: skip
pad_settings = PADSettings(
    epsilon=pad["epsilon"], amplification=pad["amplification"],
    min_sensitivity=pad["min_sensitivity"], tau_conf=pad["tau_conf"],
    tau_margin=pad["tau_margin"], **weights,
)  # fmt: skip
defenses = noise_defenses(pad_settings, static_sigma, sweep=False)
model, tokenizer = registry.load(lm, device=device, dtype=lm_dtype or dtype, device_map=device_map)

# %%
generated = defended_generate(
    model, tokenizer,
    [rag_prompt(r.question, [text[(r.corpus, c)] for c in r.context_ids])
     for r in prompts.itertuples()],
    list(zip(prompts["corpus"], prompts["prompt_id"], strict=True)),
    {name: noise for name, (_, _, noise) in defenses.items()},
    temperature=decoding["temperature"], max_new_tokens=long,
    min_new_tokens=decoding["min_new_tokens"], seed=seed,
    max_batch_streams=decoding["max_batch_streams"], forward_mode=decoding["forward_mode"],
    template=template,
)  # fmt: skip
contexts = dict(zip(zip(prompts["corpus"], prompts["prompt_id"], strict=True),
                    prompts["context_ids"].map(list), strict=True))  # fmt: skip
rows = []
for row in generated:
    corpus, prompt_id = row["key"]
    for tokens in (short, long):
        kept = row["tokens"][:tokens]
        rows.append({
            "corpus": corpus, "prompt_id": prompt_id, "defense": row["defense"],
            "max_new_tokens": tokens, "new_tokens": len(kept),
            "text": tokenizer.decode(kept, skip_special_tokens=True),
            "retrieved_ids": contexts[(corpus, prompt_id)],
            "context_ids": contexts[(corpus, prompt_id)],
            "clean_logprobs": row["clean_logprobs"][:tokens],
        })  # fmt: skip
responses = pd.DataFrame(rows)
responses.to_parquet(OUT / "responses.parquet", index=False)
responses.groupby(["corpus", "defense", "max_new_tokens"])["new_tokens"].mean().unstack()
