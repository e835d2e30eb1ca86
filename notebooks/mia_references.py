# %% [markdown]
# # MIA: reference models that never saw a candidate text (offline LiRA)
# Offline LiRA (Carlini et al. 2022, §VI) compares the attacked model's score of a text with the
# scores that models which never trained on it give it. Each reference model here is a family
# member of one of `lira.sizes`, trained exactly as train_family trains it (the family's own
# tokenizer, schedule and mix articles) but on another draw of the pretraining corpus: the
# synthetic:pretrain generator with the data slot's n and options and seed + 2000, so its
# planted sequences and filler are other draws from the same population, and neither
# the family's planted members nor mia_score's held-out non-members are in it. Like the family's
# training runs, which share their corpus and differ in seed, the references share this corpus:
# reference k of a size trains with seed + family.seeds + k. Nothing is trained when
# `models` is a list or `lira` is null.

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
pretrain = {
    "source": "synthetic:pretrain",
    "n": 40,
    "options": {"doc_words": 60, "duplication_counts": [1, 2, 4], "sequences_per_count": 2,
                "ne_prefix_words": 55, "long_prefix_words": 55, "long_suffix_words": 55},
}  # fmt: skip
models = "family"
lira = {"sizes": ["h8"], "references": 2, "variance": "global"}

# %%
import json
import shutil

import pandas as pd
from transformers import PreTrainedTokenizerFast

from privleak.data.synthetic import generate
from privleak.errors import require
from privleak.pipeline import paths
from privleak.training import family as fam
from privleak.training.corpus import family_texts

FAMILY = paths.DATA / "family"
OUT = paths.DATA / "mia_references"
# The references' corpus: another draw of the generator, apart from the family's corpus (seed)
# and its mix articles (seed + family.mix_seed_offset).
REFERENCE_SEED_OFFSET = 2000
shutil.rmtree(OUT, ignore_errors=True)  # references of earlier settings must go
OUT.mkdir(parents=True)
jobs, blocks = [], None
if models == "family" and lira is not None:
    primary = fam.read_manifest(FAMILY)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(fam.member_dirs(FAMILY)[0])
    require(
        fam.tokenizer_fingerprint(tokenizer) == primary["tokenizer_sha256"],
        "data/family's tokenizer does not match its manifest; rerun stage train_family",
    )
    records, _ = generate("pretrain", pretrain["n"], seed + REFERENCE_SEED_OFFSET,
                          pretrain["options"])  # fmt: skip
    texts = family_texts(records, family["mix"], seed + family["mix_seed_offset"])
    blocks = fam.pack([tokenizer(t)["input_ids"] for t in texts], family["block_size"],
                      tokenizer.eos_token_id)  # fmt: skip
    jobs = [
        {"config": fam.llama_config(family["sizes"][size], len(tokenizer), family["window"]),
         "seed": seed + family["seeds"] + k, "folder": OUT / size / f"ref{k}"}
        for size in lira["sizes"] for k in range(lira["references"])
    ]  # fmt: skip
print(f"{len(jobs)} reference models on {0 if blocks is None else blocks.numel()} tokens an epoch")

# %%
trained = fam.train_members(
    jobs, blocks, tokenizer, workers=family["workers"], epochs=family["epochs"],
    batch_size=family["batch_size"], lr=family["lr"], warmup_steps=family["warmup_steps"],
) if jobs else []  # fmt: skip
summary = pd.DataFrame(
    [{"size": job["folder"].parent.name, "reference": job["folder"].name, "seed": job["seed"],
      "final_loss": member["final_loss"], "seconds": member["seconds"]}
     for job, member in zip(jobs, trained, strict=True)],
    columns=["size", "reference", "seed", "final_loss", "seconds"],
)  # fmt: skip
manifest = {"tokenizer_sha256": primary["tokenizer_sha256"] if jobs else None,
            "references": summary.drop(columns="seconds").to_dict("records")}  # fmt: skip
(OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
print(f"train time {summary['seconds'].sum():.0f} s of member time")
summary.drop(columns="seconds").round(3)
