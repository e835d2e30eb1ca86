# %% [markdown]
# # S2 — every response's perplexity alone under one fixed evaluator LM
# Table 1's PPL ("generation fluency") as PAD's evaluation code computes it: each response text,
# tokenized by the evaluator with its own special tokens (at most 512 tokens), scored token by
# token given the tokens before it, with no prompt, no context and no noise; PPL = exp(mean NLL).
# One evaluator per profile (`evaluator`: the paper's code used Pythia-6.9B; the embedded profile
# the embedded LM), so every defense is scored by the same model. A response of fewer than two
# tokens has no scored token (NaN PPL). `privleak.metrics.fluency` holds the definition.

# %% tags=["parameters"]
evaluator = "smollm2-135m-instruct"
device = "cpu"
dtype = "float32"
device_map = None

# %%
import pandas as pd

from privleak import models as registry
from privleak.metrics.fluency import response_nll
from privleak.pipeline import paths

S2, OUT = paths.INTERIM / "s2", paths.INTERIM / "s2" / "perplexity"
OUT.mkdir(parents=True, exist_ok=True)
COLUMNS = ["corpus", "prompt_id", "defense", "text"]
sources = [pd.read_parquet(S2 / stage / "responses.parquet", columns=COLUMNS)
           for stage in ("generate", "matched")]  # fmt: skip
model, tokenizer = registry.load(evaluator, device=device, dtype=dtype, device_map=device_map)

# %%
parts = []
for responses in sources:
    nll, tokens = response_nll(model, tokenizer, list(responses["text"]))
    parts.append(responses.drop(columns="text").assign(nll=nll, tokens=tokens))
scored = pd.concat(parts, ignore_index=True).assign(evaluator=evaluator)
scored.to_parquet(OUT / "responses.parquet", index=False)
print(f"{len(scored)} responses, {int((scored['tokens'] == 0).sum())} with no scored token")
scored.groupby(["corpus", "defense"])["tokens"].describe()
