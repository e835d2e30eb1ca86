# %% [markdown]
# # S1 on a real pretrained model: SmolLM2-135M-Instruct on public text it very likely saw
# License texts of the installed packages (MIT, Apache-2.0, BSD: copied verbatim into countless
# repositories, so heavily duplicated in web-scale pretraining data) and the Zen of Python, cut
# into 50 + 50-token windows (the first window of each distinct text; `per_license` texts per
# license family in sorted path order, plus every window of the Zen). One teacher-forced pass
# gives TP/ESP under all six decoders for prefix lengths 10..50 (last L prefix tokens).
# The license files come from the pinned environment (requirements.txt is a dependency).

# %% tags=["parameters"]
decoders = [{"name": "greedy", "kind": "greedy"}, {"name": "sampling", "kind": "sampling"}]
scores = {
    "models": "family",
    "sequences": "planted",
    "prefix_tokens": 50,
    "ne_suffix_tokens": 4,
    "long_suffix_tokens": 50,
    "prefix_lengths": [10, 20, 30, 40, 50],
    "batch_size": 16,
    "device": "cpu",
    "dtype": "float32",
    "monte_carlo": {"kinds": ["named_entity"], "sequences": 4, "samples": 20, "seed": 0},
}
public = {
    "model": "smollm2-135m-instruct",
    "per_license": 1,
    "prefix_tokens": 50,
    "suffix_tokens": 50,
    "batch_size": 4,
}

# %%
import sysconfig

import pandas as pd

from privleak import models as registry
from privleak import paths, public_text
from privleak.errors import require
from privleak.metrics import sequence as seq

OUT = paths.INTERIM / "s1" / "public"
OUT.mkdir(parents=True, exist_ok=True)
transforms = seq.decoder_table(decoders)
prefix_lengths = sorted(set(scores["prefix_lengths"]) | {public["prefix_tokens"]})
require(
    prefix_lengths[-1] == public["prefix_tokens"],
    f"s1.public.prefix_tokens ({public['prefix_tokens']}) must be the longest prefix length",
)
model, tokenizer = registry.load(
    public["model"], device=scores["device"], dtype=scores["dtype"], device_key="s1.scores.device"
)
site_packages = sysconfig.get_paths()["purelib"]

texts = []
for family in public_text.LICENSE_MARKERS:
    rows = [r for r in public_text.license_texts(site_packages) if r["license"] == family]
    texts += rows[: public["per_license"]]
texts.append(
    {"source": "this.s (rot13)", "license": "Zen of Python", "text": public_text.zen_of_python()}
)

sequences = []
for row in texts:
    ids = tokenizer(row["text"], add_special_tokens=False)["input_ids"]
    windows = public_text.token_windows(
        ids,
        public["prefix_tokens"],
        public["suffix_tokens"],
        max_windows=None if row["license"] == "Zen of Python" else 1,
    )
    for w, (prefix_ids, suffix_ids) in enumerate(windows):
        sequences.append(
            {
                "seq_id": f"{row['source']}#{w}",
                "kind": "public_text",
                "source": row["source"],
                "license": row["license"],
                "duplicates": -1,  # unknown for real pretraining data
                "prefix_ids": prefix_ids,
                "suffix_ids": suffix_ids,
                "prefix_text": tokenizer.decode(prefix_ids),
                "suffix_text": tokenizer.decode(suffix_ids),
                "suffix_tokens": tokenizer.convert_ids_to_tokens(suffix_ids),
            }
        )
require(bool(sequences), "the public-text sequence set is empty")
pd.DataFrame(sequences).to_parquet(OUT / "sequences.parquet", index=False)
pd.DataFrame(sequences).groupby("license").size()

# %%
parameters = sum(p.numel() for p in model.parameters())
esp_rows, tp_rows = seq.prefix_length_rows(
    model,
    sequences,
    prefix_lengths,
    transforms,
    model_fields={"model": public["model"], "model_rank": 0, "parameters": parameters},
    tp_prefix_len=public["prefix_tokens"],
    batch_size=public["batch_size"],
    pad_id=tokenizer.pad_token_id,
)
esp = pd.DataFrame(esp_rows)
tp = pd.DataFrame(tp_rows)
require(
    bool(not esp["log_esp"].isna().any() and (esp["log_esp"] <= 1e-6).all()),
    "s1_public: a log ESP is missing or above 0",
)
require(
    bool(not tp["log_tp"].isna().any() and (tp["log_tp"] <= 1e-6).all()),
    "s1_public: a log TP is missing or above 0",
)
esp.to_parquet(OUT / "esp.parquet", index=False)
tp.to_parquet(OUT / "tp.parquet", index=False)
esp[esp["prefix_len"] == public["prefix_tokens"]].groupby("decoder")["log_esp"].describe()
