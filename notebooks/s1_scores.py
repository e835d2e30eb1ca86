# %% [markdown]
# # S1: TP and ESP of planted sequences under six decoders, across model sizes and prefix lengths
# Tiwari & Suh (Defs. 2-3). For every planted sequence of the pretraining corpus (named entities:
# 50-token prefix + 4-token suffix starting at the entity; long sequences: 50 + 50 tokens) and every
# family size, one teacher-forced forward pass per batch gives the full-vocabulary logits at each
# suffix position; each decoder's *modified* distribution (greedy indicator, regular sampling,
# top-k 5, top-k 10, top-p 0.6, temperature 0.1; the paper does not list its six, so they are
# chosen from §5.2 and Table 1) is applied to those same logits. Prefix lengths 10..50 (last L
# prefix tokens) are scored in the same pass. A Monte-Carlo check samples the largest model with
# the real sampler (`privleak.decoding.decode`) to test the closed-form leak curve.
# Artifacts (data/interim/s1/scores/): sequences, esp (one row per model x sequence x prefix
# length x decoder), tp (per suffix position, full prefix), montecarlo (one row per sample).
# Every scoring batch and sampler chunk is checkpointed, so an interrupted run resumes.

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

# %%
import numpy as np
import pandas as pd
import torch

from privleak import models as registry
from privleak.data.records import read_jsonl, read_sequences
from privleak.decoding import decode
from privleak.errors import require
from privleak.metrics import sequence as seq
from privleak.pipeline import checkpoint, paths
from privleak.training import family as fam

OUT = paths.INTERIM / "s1" / "scores"
OUT.mkdir(parents=True, exist_ok=True)
store = checkpoint.open_stage("s1_scores", globals())
transforms = seq.decoder_table(decoders)
prefix_lengths = sorted(set(scores["prefix_lengths"]) | {scores["prefix_tokens"]})
longest_prefix = prefix_lengths[-1]

if scores["models"] == "family":
    torch.set_num_threads(1)  # tiny models: one thread beats two on shared cores
    family_dir = paths.DATA / "family"
    model_names = [d.name for d in fam.member_dirs(family_dir)]
    model_paths = [str(family_dir / name) for name in model_names]
else:
    model_names = model_paths = list(scores["models"])
require(len(model_paths) >= 1, "s1.scores.models lists no model")

if scores["sequences"] == "planted":
    corpus = paths.RAW / "pretrain.jsonl"
    rows = seq.planted_sequences(
        read_jsonl(corpus), read_jsonl(paths.RAW / "pretrain.secrets.jsonl")
    )
else:
    corpus = None
    rows = read_sequences(scores["sequences"])
require(bool(rows), "the sequence set is empty")

# %%
on_device = dict(device=scores["device"], dtype=scores["dtype"], device_key="s1.scores.device")
model, tokenizer = registry.load(model_paths[0], **on_device)
if corpus is not None:
    fam.check_family(paths.DATA / "family", corpus, tokenizer)
SUFFIX = {"named_entity": scores["ne_suffix_tokens"], "long_sequence": scores["long_suffix_tokens"]}
sequences, dropped = [], []
for row in rows:
    split = seq.split_tokens(
        tokenizer, row["prefix"], row["suffix"], longest_prefix, SUFFIX[row["kind"]]
    )
    if split is None:
        dropped.append(row["seq_id"])
        continue
    prefix_ids, suffix_ids = split
    sequences.append(
        {
            "seq_id": row["seq_id"],
            "kind": row["kind"],
            "duplicates": int(row.get("duplicates", 0)),
            "prefix_ids": prefix_ids,
            "suffix_ids": suffix_ids,
            "prefix_text": tokenizer.decode(prefix_ids[-scores["prefix_tokens"] :]),
            "suffix_text": tokenizer.decode(suffix_ids),
            "suffix_tokens": tokenizer.convert_ids_to_tokens(suffix_ids),
        }
    )
print(f"{len(sequences)} sequences kept, {len(dropped)} dropped as too short: {dropped}")
require(bool(sequences), "no sequence has enough prefix and suffix tokens")
pd.DataFrame(sequences).to_parquet(OUT / "sequences.parquet", index=False)

# %%
esp_rows, tp_rows = [], []
for rank, (name, path) in enumerate(zip(model_names, model_paths, strict=True)):
    if rank:
        model, member_tokenizer = registry.load(path, **on_device)
        if corpus is not None:
            fam.check_family(paths.DATA / "family", corpus, member_tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    model_esp, model_tp = seq.prefix_length_rows(
        model,
        sequences,
        prefix_lengths,
        transforms,
        model_fields={"model": name, "model_rank": rank, "parameters": parameters},
        tp_prefix_len=scores["prefix_tokens"],
        batch_size=scores["batch_size"],
        pad_id=tokenizer.pad_token_id,
        cache=store.cache("scores", name),
    )
    esp_rows += model_esp
    tp_rows += model_tp
esp = pd.DataFrame(esp_rows)
tp = pd.DataFrame(tp_rows)
# Truncating decoders give exact zeros (log -inf); anything else must be a finite log-prob <= 0.
require(
    bool(not esp["log_esp"].isna().any() and (esp["log_esp"] <= 1e-6).all()),
    "s1_scores: a log ESP is missing or above 0",
)
require(
    bool(not tp["log_tp"].isna().any() and (tp["log_tp"] <= 1e-6).all()),
    "s1_scores: a log TP is missing or above 0",
)
esp.to_parquet(OUT / "esp.parquet", index=False)
tp.to_parquet(OUT / "tp.parquet", index=False)
esp.groupby(["model", "kind", "decoder"])["log_esp"].apply(lambda v: np.mean(np.exp(v))).unstack()

# %% [markdown]
# Monte-Carlo check on the largest model: `samples` draws per sequence with the real sampler, for
# `sequences` sequences of each kind in `kinds`, spread over the duplication counts. (The embedded
# profile checks named entities only: 50-step sampling of 100 streams per sequence and decoder
# costs minutes on 2 cores.)

# %%
mc = scores["monte_carlo"]
mc_rows = []
for kind in mc["kinds"]:
    pool = sorted(
        (s for s in sequences if s["kind"] == kind), key=lambda s: (s["duplicates"], s["seq_id"])
    )
    if not pool:
        continue
    picks = np.unique(np.linspace(0, len(pool) - 1, min(mc["sequences"], len(pool))).round())
    subset = [pool[int(i)] for i in picks]
    prompts = [
        s["prefix_ids"][-scores["prefix_tokens"] :] for s in subset for _ in range(mc["samples"])
    ]
    for decoder, chain in transforms.items():
        out = decode(
            model,
            prompts,
            max_new_tokens=SUFFIX[kind],
            transforms=chain,
            seed=mc["seed"],
            group_keys=[(s["seq_id"], decoder, i) for s in subset for i in range(mc["samples"])],
            pad_id=tokenizer.pad_token_id,
            max_batch_streams=mc["max_batch_streams"],
            cache=store.cache("monte carlo", model_names[-1]),
        )
        samples = out.tokens.view(len(subset), mc["samples"], -1)
        for s, drawn in zip(subset, samples, strict=True):
            hits = (drawn == torch.tensor(s["suffix_ids"])).all(-1).tolist()
            mc_rows += [
                {"model": model_names[-1], "seq_id": s["seq_id"], "kind": kind, "decoder": decoder,
                 "sample": i, "hit": bool(h)}
                for i, h in enumerate(hits)
            ]  # fmt: skip
print(store.summary())
montecarlo = pd.DataFrame(mc_rows)
montecarlo.to_parquet(OUT / "montecarlo.parquet", index=False)
montecarlo.groupby(["kind", "decoder"])["hit"].mean()
