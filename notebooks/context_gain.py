# %% [markdown]
# # How much does the context lift each response token?
# For every (article, highlights) pair we score the reference highlights twice by teacher forcing:
# with the article in the prompt and with the same template but an empty context. The per-token
# difference of log-probs is the pointwise mutual information between context and response
# token, the quantity context influence (S0) builds on. One row per (example, response token).
# Every scoring batch is checkpointed, so an interrupted run resumes.

# %% tags=["parameters"]
lm = "smollm2-135m-instruct"
device = "cpu"
dtype = "float32"
device_map = None
context_gain = {"corpus": "cnn_dm", "n_examples": 4, "max_context_tokens": 128, "batch_size": 4}

# %%
import pandas as pd
import torch

from privleak import models as model_registry
from privleak.data.records import read_jsonl, take
from privleak.errors import require
from privleak.pipeline import checkpoint, paths
from privleak.prompts import encode_context_prompt
from privleak.scoring import continuation_logprobs

OUT = paths.INTERIM / "foundation" / "context_gain.parquet"
HEAD, TAIL = "Article:", "\n\nSummary:"
store = checkpoint.open_stage("context_gain", globals())

model, tokenizer = model_registry.load(lm, device=device, dtype=dtype, device_map=device_map)
records = take(
    read_jsonl(paths.RAW / f"{context_gain['corpus']}.jsonl"),
    context_gain["n_examples"],
    key="context_gain.n_examples",
    corpus=context_gain["corpus"],
)

# %%
prompts = [
    encode_context_prompt(
        tokenizer,
        HEAD,
        " " + r["article"],
        TAIL,
        max_context_tokens=context_gain["max_context_tokens"],
    )
    for r in records
]
responses = [
    tokenizer(" " + r["highlights"], add_special_tokens=False)["input_ids"] for r in records
]
score = dict(
    batch_size=context_gain["batch_size"],
    pad_id=tokenizer.pad_token_id,
    cache=store.cache("scores", lm),
)
with_context = continuation_logprobs(model, [p.ids for p in prompts], responses, **score)
without_context = continuation_logprobs(
    model, [p.with_context([]).ids for p in prompts], responses, **score
)
print(store.summary())

# %%
rows = [
    {
        "example": r["id"],
        "context_tokens": len(p.context),
        "position": j,
        "token": token,
        "logprob_with": float(lw),
        "logprob_without": float(lo),
    }
    for r, p, resp, w, o in zip(
        records, prompts, responses, with_context, without_context, strict=True
    )
    for j, (token, lw, lo) in enumerate(zip(resp, w, o, strict=True))
]
table = pd.DataFrame(rows)
require(
    bool(torch.isfinite(torch.tensor(table[["logprob_with", "logprob_without"]].values)).all()),
    "context_gain: a token log-prob is not finite (with or without the context)",
)
OUT.parent.mkdir(parents=True, exist_ok=True)
table.to_parquet(OUT, index=False)
table.describe()
