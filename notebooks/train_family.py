# %% [markdown]
# # The tiny in-pipeline model family
# One byte-level BPE tokenizer (`tokenizers`) and several tiny Llama sizes, all trained from scratch
# with AdamW on the SAME token blocks in the SAME order for the SAME number of tokens, so the size
# is the only thing that differs. The corpus is the synthetic pretraining corpus with planted
# named-entity and 50+50-token sequences at known duplication counts (data/raw/pretrain.jsonl),
# plus extra synthetic CNN/DM-like and PubMedQA-like articles drawn with a different seed
# (seed + mix_seed_offset), so S0 can measure context influence on prose of that style without
# the family ever seeing the data/raw/cnn_dm.jsonl or pubmedqa.jsonl records themselves.
# S1 (model-size axis), S0 and S3 reuse the saved folders data/family/<size>/. The packed
# training blocks are saved too (blocks.safetensors), so train_family_seeds retrains every size
# on exactly these tokens with other seeds. Members train `workers` at a time, one process and
# one thread each: the weights do not depend on `workers`.

# %% tags=["parameters"]
seed = 0
family = {
    "vocab_size": 512,
    "block_size": 128,
    "window": 512,
    "sizes": {
        "h8": {"hidden": 8, "layers": 1, "heads": 2, "intermediate": 16},
        "h16": {"hidden": 16, "layers": 1, "heads": 2, "intermediate": 32},
        "h24": {"hidden": 24, "layers": 2, "heads": 2, "intermediate": 48},
        "h32": {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64},
    },
    "epochs": 1,
    "batch_size": 8,
    "lr": 0.003,
    "warmup_steps": 2,
    "mix": {"cnn_dm": 2, "pubmedqa": 2},
    "mix_seed_offset": 1000,
    "seeds": 2,
    "workers": 1,
}

# %%
import json

import pandas as pd
import torch
from safetensors.torch import save_file

from privleak.data.records import read_jsonl
from privleak.pipeline import paths
from privleak.training import family as fam
from privleak.training.corpus import family_texts

# Tiny models are overhead-bound: one intra-op thread avoids oversubscribing the 2 shared cores
# (measured 4-5x faster than 2 threads while other jobs run). Results do not depend on it.
torch.set_num_threads(1)
OUT = paths.DATA / "family"
CORPUS = paths.RAW / "pretrain.jsonl"

pretrain = read_jsonl(CORPUS)
mix_seed = seed + family["mix_seed_offset"]
texts = family_texts(pretrain, family["mix"], mix_seed)
print(f"{len(pretrain)} pretrain documents + {len(texts) - len(pretrain)} mix articles")

# %%
tokenizer = fam.train_tokenizer(texts, family["vocab_size"])
token_lists = [tokenizer(t)["input_ids"] for t in texts]
blocks = fam.pack(token_lists, family["block_size"], tokenizer.eos_token_id)
tokens_per_epoch = blocks.numel()
print(f"vocab {len(tokenizer)}, {blocks.shape[0]} blocks x {blocks.shape[1]} = {tokens_per_epoch}")

# %%
manifest = {
    "sizes": {},
    "corpus": str(CORPUS.relative_to(paths.ROOT)),
    "corpus_sha256": fam.sha256_file(CORPUS),
    "tokenizer_sha256": fam.tokenizer_fingerprint(tokenizer),
    "mix": family["mix"],
    "mix_seed": mix_seed,
    "tokens_per_epoch": int(tokens_per_epoch),
    "epochs": family["epochs"],
}
jobs = [
    {
        "config": fam.llama_config(size, len(tokenizer), family["window"]),
        "seed": seed,
        "folder": OUT / name,
    }
    for name, size in family["sizes"].items()
]
trained = fam.train_members(
    jobs,
    blocks,
    tokenizer,
    workers=family["workers"],
    epochs=family["epochs"],
    batch_size=family["batch_size"],
    lr=family["lr"],
    warmup_steps=family["warmup_steps"],
)
log = []
for (name, size), member in zip(family["sizes"].items(), trained, strict=True):
    manifest["sizes"][name] = {
        **size,
        "parameters": member["parameters"],
        "tokens_seen": int(tokens_per_epoch * family["epochs"]),
        "final_loss": member["final_loss"],
    }
    log += [{"size": name, "step": i, "loss": loss} for i, loss in enumerate(member["losses"])]
    print(f"{name}: {member['parameters']} params, {member['seconds']:.0f} s, "
          f"loss {member['losses'][0]:.2f} -> {member['final_loss']:.2f}")  # fmt: skip
# int32 halves the file; token ids are < vocab_size.
save_file({"blocks": blocks.to(torch.int32)}, OUT / "blocks.safetensors")
fam.write_manifest(OUT, manifest)
pd.DataFrame(log).to_parquet(OUT / "train_log.parquet", index=False)
print(json.dumps(manifest["sizes"], indent=1))
