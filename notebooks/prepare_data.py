# %% [markdown]
# # Prepare the corpora
# Every corpus slot in params becomes `data/raw/<slot>.jsonl`. Synthetic slots also write
# `data/raw/<slot>.secrets.jsonl`, the ground truth of every planted secret (span, kind,
# duplication count). `hf:` and `file:` slots are materialised the same way, so later stages
# read one format whatever the source; each slot must hold the canonical fields its stages read
# (`privleak.data.loaders.REQUIRED_FIELDS`), checked here. `data/raw/sources.json` records per
# slot the source, the hub revision pin (if any), the record count and the sha256 of the records
# file, so a rerun that fetched different hub data is visible.

# %% tags=["parameters"]
seed = 0
data = {
    "cnn_dm": {"source": "synthetic:cnn_dm", "n": 4, "options": {"min_words": 300}},
    "pubmedqa": {"source": "synthetic:pubmedqa", "n": 4, "options": {"min_words": 300}},
    "pretrain": {
        "source": "synthetic:pretrain",
        "n": 40,
        "options": {
            "doc_words": 60,
            "duplication_counts": [1, 2, 4],
            "sequences_per_count": 2,
            "ne_prefix_words": 55,
            "long_prefix_words": 55,
            "long_suffix_words": 55,
        },
    },
}

# %%
import pandas as pd

from privleak.data import loaders
from privleak.pipeline import paths

sources = loaders.materialize_all(data, paths.RAW, seed)

# %%
summary = pd.DataFrame([{"slot": slot, **entry} for slot, entry in sources.items()])
summary
