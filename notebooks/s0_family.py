# %% [markdown]
# # S0 — context influence across model sizes (Figs. 2a and 4)
# The tiny in-pipeline Llama family (stage `train_family`, data/family/<size>/, every size
# trained from scratch on the same corpus) stands in for the paper's OPT sizes. For each size,
# smallest first: CID responses (λ = 1, default T) for the first `family.examples` contexts of
# `family.corpus`, truncated to `family.context_tokens` tokens, with the paper's plain template
# (base models, no chat turns); the whole-context τ per response (F2a) and the influence of
# every i-th token n-gram for the largest n, `family.n` (F4), laid out by `family.window`
# (`block`: disjoint n-token blocks; `sliding`: n-token windows every `family.stride` tokens, the
# official code's rule at stride 1). One row per (size, example) and per (size, example, i).
# Decoder chunks and each (size, example)'s ablations are checkpointed, so an interrupted run
# resumes.

# %% tags=["parameters"]
seed = 0
device = "cpu"
dtype = "float32"
min_new_tokens = 4
count_eos = True
temperature = 0.8
family = {"corpus": "pubmedqa", "examples": 1, "context_tokens": 64, "max_new_tokens": 12, "n": 32,
          "window": "block"}  # fmt: skip
max_batch_streams = 16

# %%
import json
import time
from functools import partial

import pandas as pd

from privleak import models as registry
from privleak.cid import cid_generate
from privleak.data.records import read_jsonl, take
from privleak.errors import require
from privleak.metrics.influence_rows import family_example_rows
from privleak.ngrams import Window
from privleak.pipeline import checkpoint, paths
from privleak.prompts import s0_prompt

FAMILY = paths.DATA / "family"
OUT = paths.INTERIM / "s0" / "family"
OUT.mkdir(parents=True, exist_ok=True)
manifest = json.loads((FAMILY / "manifest.json").read_text())
sizes = sorted(manifest["sizes"], key=lambda name: manifest["sizes"][name]["parameters"])
records = take(
    read_jsonl(paths.RAW / f"{family['corpus']}.jsonl"),
    family["examples"],
    key="s0.family.examples",
    corpus=family["corpus"],
)
store = checkpoint.open_stage("s0_family", globals())
WINDOW = Window.of(family)


def example_rows(size, parameters, model, tokenizer, generation, prompts, g):
    """(response row, n-gram rows) of example g under one family size."""
    decoding = {"lam": 1.0, "temperature": temperature, "eos_token_id": tokenizer.eos_token_id,
                "min_new_tokens": min_new_tokens, "pad_id": tokenizer.pad_token_id}  # fmt: skip
    describe = {"size": size, "parameters": parameters, "example": records[g]["id"]}
    return family_example_rows(
        model, prompts[g], generation, g, describe=describe, n=family["n"], window=WINDOW,
        decoding=decoding,
    )  # fmt: skip


# %%
response_rows, gram_rows = [], []
for size in sizes:
    started = time.perf_counter()
    model, tokenizer = registry.load(str(FAMILY / size), device=device, dtype=dtype)
    prompts = [
        s0_prompt(tokenizer, r, family["corpus"], "plain", family["context_tokens"])[0]
        for r in records
    ]
    generation = cid_generate(
        model,
        prompts,
        [(1.0, temperature)],
        max_new_tokens=family["max_new_tokens"],
        min_new_tokens=min_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        seed=seed,
        example_ids=[r["id"] for r in records],
        max_batch_streams=max_batch_streams,
        count_eos=count_eos,
        cache=store.cache("generate", size),
    )
    parameters = manifest["sizes"][size]["parameters"]
    for response_row, rows in store.map(
        f"{size} ablations",
        range(len(records)),
        partial(example_rows, size, parameters, model, tokenizer, generation, prompts),
        key=lambda g: records[g]["id"],
    ):
        response_rows.append(response_row)
        gram_rows += rows
    print(f"{size} ({parameters} parameters): {time.perf_counter() - started:.1f} s")
print(store.summary())

# %%
responses = pd.DataFrame(response_rows)
grams = pd.DataFrame(gram_rows)
require(
    bool(responses["tau"].notna().all() and grams["tau"].notna().all()),
    "s0_family: a response or n-gram influence τ is missing",
)
responses.to_parquet(OUT / "responses.parquet", index=False)
grams.to_parquet(OUT / "ngram.parquet", index=False)
responses.groupby(["parameters", "size"])["tau"].mean()
