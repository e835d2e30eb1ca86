# %% [markdown]
# # S1 on a real pretrained model: SmolLM2-135M-Instruct on public text it very likely saw
# License texts of the installed packages (MIT, Apache-2.0, BSD: copied verbatim into countless
# repositories, so heavily duplicated in web-scale pretraining data) and the Zen of Python.
# Which texts the model has memorised is measured, not assumed: every 50 + 50-token window at
# `stride` of every distinct text (first `per_family` texts per family, `max_windows` per text,
# suffixes with >= `min_distinct_tokens` distinct tokens, identical windows kept once and their
# carrying license files counted in `duplicates`) is a candidate; one teacher-forced pass gives
# each candidate's ESP under regular sampling, and the candidates with ESP >= `min_esp` are the
# panel's sequences. Those get TP/ESP under all six decoders for prefix lengths 10..50.
# Outputs: candidates.parquet and selection.json always; sequences, esp and tp parquets only when
# some candidate passed (render_s1 then says in Fig. 2 and metrics that none did).
# The license files come from the pinned environment (requirements.txt is a dependency).

# %% tags=["parameters"]
decoders = [
    {"name": "greedy", "kind": "greedy"},
    {"name": "sampling", "kind": "sampling"},
    {"name": "top-k 5", "kind": "top_k", "value": 5},
    {"name": "top-k 10", "kind": "top_k", "value": 10},
    {"name": "top-p 0.6", "kind": "top_p", "value": 0.6},
    {"name": "temp 0.1", "kind": "temperature", "value": 0.1},
]
scores = {
    "models": "family",
    "sequences": "planted",
    "prefix_tokens": 50,
    "ne_suffix_tokens": 4,
    "long_suffix_tokens": 50,
    "prefix_lengths": [10, 30, 50],
    "batch_size": 16,
    "device": "cpu",
    "dtype": "float32",
    "monte_carlo": {
        "kinds": ["named_entity"],
        "sequences": 4,
        "samples": 20,
        "seed": 0,
        "max_batch_streams": 32,
    },
}
public = {
    "model": "smollm2-135m-instruct",
    "per_family": 1,
    "max_windows": 1,
    "stride": 50,
    "min_distinct_tokens": 10,
    "min_esp": 0.001,
    "prefix_tokens": 50,
    "suffix_tokens": 50,
    "batch_size": 4,
}

# %%
import json
import math
import sysconfig

import pandas as pd

from privleak import models as registry
from privleak import public_text
from privleak.errors import require
from privleak.metrics import sequence as seq
from privleak.pipeline import paths

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

zen = {"source": "this.s (rot13)", "license": "Zen of Python", "copies": 1,
       "text": public_text.zen_of_python()}  # fmt: skip
# Every distinct text is tokenized: duplicates are counted over all of them, capped or not.
texts = [
    {**row, "ids": tokenizer(row["text"], add_special_tokens=False)["input_ids"]}
    for row in public_text.license_texts(site_packages) + [zen]
]
candidates = public_text.candidate_windows(
    texts,
    public["prefix_tokens"],
    public["suffix_tokens"],
    stride=public["stride"],
    per_family=public["per_family"],
    max_windows=public["max_windows"],
    min_distinct_tokens=public["min_distinct_tokens"],
)
require(bool(candidates), "s1_public: no candidate window (texts shorter than one window?)")
pd.DataFrame(candidates).groupby("license").size()

# %% [markdown]
# ## Selection: the candidates the model has measurably memorised (sampling ESP >= min_esp)

# %%
sampling = {"sampling": transforms["sampling"]}
candidate_logprobs = seq.suffix_logprobs(
    model,
    [c["prefix_ids"] for c in candidates],
    [c["suffix_ids"] for c in candidates],
    sampling,
    batch_size=public["batch_size"],
    pad_id=tokenizer.pad_token_id,
)
candidate_esp = seq.log_esp(candidate_logprobs["sampling"])
kept, selection = public_text.select_memorised(candidates, candidate_esp, public["min_esp"])
selection |= {"model": public["model"], "best_log10_esp": float(candidate_esp.max() / math.log(10))}
measured = pd.DataFrame(candidates).drop(columns=["prefix_ids", "suffix_ids"])
measured = measured.assign(log_esp_sampling=candidate_esp, kept=measured.index.isin(kept))
measured.to_parquet(OUT / "candidates.parquet", index=False)
(OUT / "selection.json").write_text(json.dumps(selection, indent=2, sort_keys=True) + "\n")
# A rerun outside DVC must not leave an earlier selection's scores behind.
for name in ("sequences.parquet", "esp.parquet", "tp.parquet"):
    (OUT / name).unlink(missing_ok=True)
selection

# %%
sequences = [
    {
        **{k: candidates[i][k] for k in ("seq_id", "source", "license", "duplicates")},
        "kind": "public_text",
        "prefix_ids": candidates[i]["prefix_ids"],
        "suffix_ids": candidates[i]["suffix_ids"],
        "prefix_text": tokenizer.decode(candidates[i]["prefix_ids"]),
        "suffix_text": tokenizer.decode(candidates[i]["suffix_ids"]),
        "suffix_tokens": tokenizer.convert_ids_to_tokens(candidates[i]["suffix_ids"]),
    }
    for i in kept
]
if sequences:
    pd.DataFrame(sequences).to_parquet(OUT / "sequences.parquet", index=False)
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
    print(
        esp[esp["prefix_len"] == public["prefix_tokens"]].groupby("decoder")["log_esp"].describe()
    )
else:
    print(
        f"no candidate reached sampling ESP >= {public['min_esp']:g} "
        f"(best 1e{selection['best_log10_esp']:.1f}): the public-text panel is not drawn"
    )
