# %% [markdown]
# # The tiny family, retrained with other seeds
# A claim about a trained model holds only if it survives retraining (docs/design.md §8): its
# interval must cover training randomness, not just the choice of sequences. This stage retrains
# every size of train_family's family on exactly its tokens (data/family/blocks.safetensors, the
# same tokenizer, the same schedule) with seeds seed + 1 .. seed + seeds - 1, which change the
# initial weights and the batch order. Run k is saved as data/family_seeds/run<k>/<size>/ with its
# own manifest, so it loads and checks like data/family. s1_seeds scores the planted sequences on
# every run; the claims resample runs and sequences together.

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
import shutil

import pandas as pd
from safetensors.torch import load_file
from transformers import PreTrainedTokenizerFast

from privleak.errors import require
from privleak.pipeline import paths
from privleak.training import family as fam

FAMILY = paths.DATA / "family"
OUT = paths.DATA / "family_seeds"
shutil.rmtree(OUT, ignore_errors=True)  # runs beyond `seeds` from an earlier setting must go
OUT.mkdir(parents=True)

primary = fam.read_manifest(FAMILY)
require(
    sorted(primary["sizes"]) == sorted(family["sizes"]) and primary["epochs"] == family["epochs"],
    "data/family was trained with other family params; rerun stage train_family",
)
tokenizer = PreTrainedTokenizerFast.from_pretrained(fam.member_dirs(FAMILY)[0])
require(
    fam.tokenizer_fingerprint(tokenizer) == primary["tokenizer_sha256"],
    "data/family's tokenizer does not match its manifest; rerun stage train_family",
)
blocks = load_file(FAMILY / "blocks.safetensors")["blocks"].long()
runs = range(1, family["seeds"])
print(f"{len(runs)} runs x {len(family['sizes'])} sizes on {blocks.numel()} tokens per epoch")

# %%
jobs = [
    {
        "config": fam.llama_config(size, len(tokenizer), family["window"]),
        "seed": seed + run,
        "folder": OUT / f"run{run}" / name,
        "run": run,
        "size": name,
    }
    for run in runs
    for name, size in family["sizes"].items()
]
trained = fam.train_members(
    [{key: job[key] for key in ("config", "seed", "folder")} for job in jobs],
    blocks,
    tokenizer,
    workers=family["workers"],
    epochs=family["epochs"],
    batch_size=family["batch_size"],
    lr=family["lr"],
    warmup_steps=family["warmup_steps"],
)
summary = pd.DataFrame(
    [
        {"run": job["run"], "seed": job["seed"], "size": job["size"], **member}
        for job, member in zip(jobs, trained, strict=True)
    ],
    columns=["run", "seed", "size", "parameters", "final_loss", "losses", "seconds"],
)
for run, rows in summary.groupby("run"):
    manifest = {
        **primary,
        "seed": seed + int(run),
        "sizes": {
            row.size: {**primary["sizes"][row.size], "final_loss": row.final_loss}
            for row in rows.itertuples()
        },
    }
    fam.write_manifest(OUT / f"run{run}", manifest)
log = summary[["run", "seed", "size", "losses"]].explode("losses", ignore_index=True)
log = log.rename(columns={"losses": "loss"}).astype({"loss": float})
log.insert(3, "step", log.groupby(["run", "size"]).cumcount())
log.to_parquet(OUT / "train_log.parquet", index=False)
primary_loss = pd.Series({name: v["final_loss"] for name, v in primary["sizes"].items()})
final = summary.pivot(index="size", columns="run", values="final_loss").assign(run0=primary_loss)
print(f"train time {summary['seconds'].sum():.0f} s of member time")
final.reindex(list(family["sizes"])).round(3)  # final loss per size and run
