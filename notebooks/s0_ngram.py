# %% [markdown]
# # S0 — token n-gram influence, the uni-gram example and bounded CID
# - **F3** (paper §4.4): for `ngram.examples` PubMedQA-like contexts (first `context_tokens`
#   tokens) we draw one CID response (λ = 1) and measure τ_{i,n} of every token n-gram D_{i,n}
#   for each n in `ngram.ns` (Def. 3.1-3.2). `ngram.window` lays the n-grams out: `block` =
#   disjoint [i·n, (i+1)·n); `sliding` = [s, s+n) for s = 0, stride, ... (the official code's
#   rule at `ngram.stride` = 1). The ablated p̄ mixes the ablated-context logits with the
#   no-context logits at every response position; the full-context log p̄(y_t|D) is read from
#   the generation records. One row per (example, n, i), with the window and the per-token τ.
# - **T1**: the uni-gram influence of every token of one context (its first
#   `unigram_context_tokens` tokens) on one next token: the response token with the largest
#   whole-context influence (uni-grams: blocks and stride-1 windows are the same spans).
# - **Bounded CID** (Alg. 1): responses with λ chosen per step as the largest λ ≤ λ_max within
#   ε/2 of the prior, for each ε; the whole-context τ per token and the τ per token of the
#   disjoint `bounded.n`-token blocks (with the ablated run bounded the same way) are recorded to
#   check max τ ≤ ε, which holds for any n-gram.
#
# Decoder chunks and each example's (each response's, for bounded CID) ablations are
# checkpointed, so an interrupted run resumes.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
device = "cpu"
dtype = "float32"
device_map = None
template = "chat"
context_tokens = 64
max_new_tokens = 12
min_new_tokens = 4
count_eos = True
temperature = 0.8
ngram = {
    "corpus": "pubmedqa",
    "examples": 1,
    "ns": [32, 16, 8],
    "unigram_context_tokens": 8,
    "window": "block",
}
bounded = {"corpus": "pubmedqa", "examples": 1, "eps": [0.5, 2.0], "lam_max": 1.0, "n": 32}
max_batch_streams = 16
batch_size = 8

# %%
import time

import pandas as pd

from privleak import models as registry
from privleak.batching import ForwardCounter
from privleak.cid import cid_generate
from privleak.data.records import read_jsonl, take
from privleak.metrics.influence import ngram_influence
from privleak.metrics.influence_rows import bounded_example_row, ngram_example_rows
from privleak.ngrams import Window
from privleak.pipeline import checkpoint, paths
from privleak.prompts import s0_prompt

OUT = paths.INTERIM / "s0" / "ngram"
OUT.mkdir(parents=True, exist_ok=True)
store = checkpoint.open_stage("s0_ngram", globals())
model, tokenizer = registry.load(lm, device=device, dtype=dtype, device_map=device_map)
EOS, PAD = tokenizer.eos_token_id, tokenizer.pad_token_id
# Ablated contexts are scored under the decoding distribution of the responses: CID at λ = 1.
CID_AT_1 = {"lam": 1.0, "temperature": temperature, "eos_token_id": EOS,
            "min_new_tokens": min_new_tokens, "batch_size": batch_size, "pad_id": PAD}  # fmt: skip


def prompts_for(corpus, count, key, limit):
    """The first `count` records of `corpus` (params `key` = count) and their S0 prompts."""
    every = read_jsonl(paths.RAW / f"{corpus}.jsonl")
    records = take(every, count, key=key, corpus=corpus)
    return records, [s0_prompt(tokenizer, r, corpus, template, limit)[0] for r in records]


def generate(records, prompts, settings, eps=None):
    return cid_generate(
        model,
        prompts,
        settings,
        max_new_tokens=max_new_tokens,
        min_new_tokens=min_new_tokens,
        eos_token_id=EOS,
        pad_id=PAD,
        seed=seed,
        eps=eps,
        example_ids=[r["id"] for r in records],
        max_batch_streams=max_batch_streams,
        count_eos=count_eos,
        cache=store.cache("generate"),
    )


# %% [markdown]
# ## F3: i-th token n-gram influence at λ = 1


# %%
WINDOW = Window.of(ngram)


def f3_rows(g):
    """Example g's rows (every n, every i) and the tokens its ablations forwarded."""
    return ngram_example_rows(
        model, prompts[g], generation, g, example=records[g]["id"], ns=ngram["ns"],
        window=WINDOW, decoding=CID_AT_1,
    )  # fmt: skip


started, counter = time.perf_counter(), ForwardCounter()
records, prompts = prompts_for(
    ngram["corpus"], ngram["examples"], "s0.ngram.examples", context_tokens
)
generation = generate(records, prompts, [(1.0, temperature)])
ngram_rows = []
for rows, example_counter in store.map(
    "F3", range(len(records)), f3_rows, key=lambda g: records[g]["id"]
):
    ngram_rows += rows
    counter.merge(example_counter)
print(
    f"F3: {len(ngram_rows)} ablations, {counter.tokens} tokens, "
    f"{time.perf_counter() - started:.1f} s"
)
pd.DataFrame(ngram_rows).to_parquet(OUT / "ngram.parquet", index=False)

# %% [markdown]
# ## T1: uni-gram influence of one context on one next token

# %%
started = time.perf_counter()
# The first record of the F3 corpus (F3 already checked it holds ngram.examples >= 1 records).
records, prompts = prompts_for(
    ngram["corpus"], 1, "s0.ngram.examples", ngram["unigram_context_tokens"]
)
prompt = prompts[0]
example = generate(records, prompts, [(1.0, temperature)])
length = int(example.lengths[0])
whole = example.tau[0, :length]
target = int(whole.argmax())  # the response token the context influences most
response = example.tokens[0, : target + 1].tolist()
tau = store.get_or_compute(
    ("T1", records[0]["id"]),
    lambda: ngram_influence(
        model, prompt, response, example.logp_context[0, : target + 1], 1, **CID_AT_1
    ),
)[:, target]
unigram = pd.DataFrame(
    {
        "example": records[0]["id"],
        "corpus": ngram["corpus"],
        "i": range(len(prompt.context)),
        "token": [tokenizer.decode([t]) for t in prompt.context],
        "tau": tau.tolist(),
        "generated": tokenizer.decode(response[:-1]),
        "next_token": tokenizer.decode(response[-1:]),
        "tau_whole_context": float(whole[target]),
    }
)
unigram.to_parquet(OUT / "unigram.parquet", index=False)
print(f"T1: {time.perf_counter() - started:.1f} s")
unigram.sort_values("tau", ascending=False).head(8)

# %% [markdown]
# ## Bounded CID: measured influence against ε


# %%
def bounded_row(g):
    """The row of response g (example × ε) and the tokens its ablations forwarded."""
    return bounded_example_row(
        model, tokenizer, prompts[g // len(settings)], run, g,
        example=records[g // len(settings)]["id"], eps=bounded["eps"][g % len(settings)],
        lam_max=bounded["lam_max"], n=bounded["n"], decoding=CID_AT_1,
    )  # fmt: skip


started, counter = time.perf_counter(), ForwardCounter()
records, prompts = prompts_for(
    bounded["corpus"], bounded["examples"], "s0.bounded.examples", context_tokens
)
settings = [(bounded["lam_max"], temperature)] * len(bounded["eps"])
run = generate(records, prompts, settings, eps=bounded["eps"])
bounded_rows = []
for row, response_counter in store.map(
    "bounded",
    range(run.tokens.shape[0]),
    bounded_row,
    key=lambda g: (records[g // len(settings)]["id"], bounded["eps"][g % len(settings)]),
):
    bounded_rows.append(row)
    counter.merge(response_counter)
print(f"bounded: {time.perf_counter() - started:.1f} s, {counter.tokens} ablation tokens")
print(store.summary())
bounded_table = pd.DataFrame(bounded_rows)
bounded_table.to_parquet(OUT / "bounded.parquet", index=False)
bounded_table.groupby("eps")[["max_tau_whole_token", "max_tau_ngram_token", "mean_lam_used"]].max()
