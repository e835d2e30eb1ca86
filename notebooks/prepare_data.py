# %% [markdown]
# # Prepare the corpora
# Every corpus slot in params becomes `data/raw/<slot>.jsonl`. Synthetic slots also write
# `data/raw/<slot>.secrets.jsonl`, the ground truth of every planted secret (span, kind,
# duplication count). `hf:` and `file:` slots are materialised the same way, so later stages
# read one format whatever the source.

# %% tags=["parameters"]
seed = 0
data = {"cnn_dm": {"source": "synthetic:cnn_dm", "n": 4}}

# %%
import pandas as pd

from privleak import data as corpora
from privleak import paths

written = {slot: corpora.materialize(slot, spec, paths.RAW, seed) for slot, spec in data.items()}

# %%
summary = pd.DataFrame(
    [
        {"slot": slot, "source": data[slot]["source"], "records": len(corpora.read_jsonl(path))}
        for slot, path in written.items()
    ]
)
summary
