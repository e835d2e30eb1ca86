# %% [markdown]
# # S3 — the LiRa attack: samples, their scores, their leaks, and test perplexity
# Every model of s3_train (the targets and the references M_{D without d_j}) continues each attack
# prompt (`attack.samples` draws, top-k `attack.top_k`, at most `attack.max_new_tokens` tokens,
# stopping at EOS, never the redaction token; a draw depends only on (seed, prompt, draw index), so
# every training run of a target draws with the same random numbers and runs differ by their models
# only). Each sample is scored by its mean token NLL (`privleak.lira_sampling.sequence_nll`, the
# log-perplexity of the sampled ids given the prompt) under the model itself and under every
# reference, and checked by both policies for every leaked domain j (the private domains other than
# `domain`): a sample leaks j when F_j flags one of its words. Empty samples (whitespace only) get
# no score.
#
# Held-out perplexity: each model on all test dialogs (`privleak.lira_sampling.held_out_nll`, chunks
# of `train.seq_len` tokens as in training), kept per dialog too so that perplexity contrasts can be
# resampled over dialogs.
#
# Saved: samples.parquet, one row per (model, prompt, sample) with text, empty, nll_self,
# nll_without_<j> per reference and leak_<policy>_<j>; ppl.parquet, one row per model;
# test_nll.parquet, one row per (model, test dialog) with its summed NLL and scored tokens.

# %% tags=["parameters"]
seed = 0
embedder = "all-minilm-l6-v2"
device = "cpu"
domain = "AIRLINE"
private_domains = ["AIRLINE", "MEDIA", "INSURANCE"]
seq_len = 512
attack = {
    "prompts": 5,
    "context_turns": 2,
    "samples": 4,
    "top_k": 40,
    "max_new_tokens": 24,
    "max_batch_streams": 64,
    "batch_size": 32,
}
workers = 1

# %%
import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from privleak.classifier_policies import (
    SEQUENCE_POLICY_FILE,
    ClassifierPolicy,
    SequenceClassifierPolicy,
    sentence_embed,
)
from privleak.errors import require
from privleak.lira_sampling import attack_target
from privleak.models import load_embedder
from privleak.pipeline import checkpoint, paths
from privleak.pipeline.params import profile_key
from privleak.pipeline.workers import check_workers
from privleak.policies import MASK, KeywordPolicy

PREPARE, MODELS = paths.INTERIM / "s3" / "prepare", paths.INTERIM / "s3" / "models"
OUT = paths.INTERIM / "s3" / "attack"
OUT.mkdir(parents=True, exist_ok=True)
prompt_table = pd.read_parquet(PREPARE / "prompts.parquet")
test_set = pd.read_parquet(PREPARE / "test.parquet")
test_texts = test_set["text"].tolist()
log = pd.read_parquet(paths.INTERIM / "s3" / "train" / "train_log.parquet")
leaked = [d for d in private_domains if d != domain]
references = log.dropna(subset=["without"]).set_index("without")["model"].to_dict()
require(
    sorted(references) == sorted(leaked),
    f"s3_attack: the references of s3_train leave out {sorted(references)}, but the leaked "
    f"domains are {leaked}; rerun s3_train",
)
prompts = prompt_table["prompt"].tolist()
prompt_ids = prompt_table["prompt_id"].tolist()
store = checkpoint.open_stage("s3_attack", globals())
timings = {}


# %% [markdown]
# ## Samples, their NLL under the model itself and under each reference, and test perplexity
# One checkpoint unit per model (`privleak.lira_sampling.attack_target`: an interrupted run resumes
# whole models); models run `workers` at a time, one process and one thread each, and a draw
# depends on (seed, prompt, draw index) only, so no number depends on `workers`.

# %%
started = time.perf_counter()
attack_one = partial(
    attack_target,
    references={j: str(MODELS / name) for j, name in references.items()},
    prompts=prompts,
    prompt_ids=prompt_ids,
    test_texts=test_texts,
    forbidden_tokens=[MASK],
    samples=attack["samples"],
    top_k=attack["top_k"],
    max_new_tokens=attack["max_new_tokens"],
    max_batch_streams=attack["max_batch_streams"],
    batch_size=attack["batch_size"],
    seq_len=seq_len,
    seed=seed,
    device=device,
)
names = log["model"].tolist()
attacked = store.map(
    "model",
    [str(MODELS / name) for name in names],
    attack_one,
    key=lambda folder: Path(folder).relative_to(MODELS).as_posix(),
    workers=check_workers(workers, profile_key("s3.workers")),
)
per_model, ppl_rows, nll_rows = {}, [], []
for name, result in zip(names, attacked, strict=True):
    table = pd.DataFrame(result["rows"])
    table.insert(0, "model", name)
    nll, tokens = result["test_nll"], result["test_tokens"]
    ppl = float(np.exp(nll.sum() / tokens.sum()))
    ppl_rows.append({"model": name, "test_ppl": ppl, "test_dialogs": len(test_texts)})
    nll_rows.append(
        pd.DataFrame({"model": name, "dialog": test_set["id"], "nll": nll, "tokens": tokens})
    )
    per_model[name] = table
timings["samples, their NLLs, perplexity"] = time.perf_counter() - started
pd.DataFrame(ppl_rows)

# %% [markdown]
# ## Leaks: does F_j flag a word of the sample?

# %%
started = time.perf_counter()
if (PREPARE / "classifier" / SEQUENCE_POLICY_FILE).is_file():  # classifier.kind: sequence
    classifier_policy = SequenceClassifierPolicy.load(
        PREPARE / "classifier", device=device, batch_size=attack["batch_size"]
    )
else:
    classifier_saved = json.loads((PREPARE / "classifier.json").read_text())
    require(
        classifier_saved["embedder"] == embedder,
        f"s3_attack: the classifier policy was fit on {classifier_saved['embedder']!r} "
        f"embeddings, but models.embedder is {embedder!r}; rerun s3_prepare",
    )
    classifier_policy = ClassifierPolicy.from_dict(
        classifier_saved, sentence_embed(load_embedder(embedder, device=device))
    )
policies = {
    "keyword": KeywordPolicy(json.loads((PREPARE / "keywords.json").read_text())),
    "classifier": classifier_policy,
}
samples = pd.concat(per_model.values(), ignore_index=True)
texts = samples["text"].tolist()
for policy_name, policy in policies.items():
    flags = store.get_or_compute(
        ("flags", policy_name), partial(policy.flags_by_domain, texts, leaked)
    )
    for j, rows in flags.items():
        samples[f"leak_{policy_name}_{j}"] = [any(row) for row in rows]
timings["leak flags"] = time.perf_counter() - started
print(store.summary())
leak_columns = [c for c in samples.columns if c.startswith("leak_")]
nonempty = samples[~samples["empty"]]
summary = nonempty.groupby("model")[leak_columns].mean()
summary.insert(0, "empty_share", samples.groupby("model")["empty"].mean())
summary.round(3)

# %% [markdown]
# ## Examples: the first prompt's samples under Public

# %%
shown = samples[(samples["model"] == "public") & (samples["prompt_id"] == prompt_ids[0])]
print(prompts[0])
for row in shown.itertuples():
    print(f"--- sample {row.sample} (nll {row.nll_self:.2f}):{row.text}")

# %% [markdown]
# ## Save

# %%
require(
    bool(samples.loc[~samples["empty"], "nll_self"].notna().all()),
    "s3_attack: a non-empty sample has no NLL",
)
# The redaction token is forbidden at sampling; no sample may show the mask as text either.
require(
    not samples["text"].str.contains(MASK, regex=False).any(),
    f"s3_attack: a sample holds the redaction text {MASK!r}",
)
pd.Series(timings, name="seconds").round(1)  # in the executed report only: outputs stay byte-stable

# %%
samples.to_parquet(OUT / "samples.parquet", index=False)
pd.DataFrame(ppl_rows).to_parquet(OUT / "ppl.parquet", index=False)
pd.concat(nll_rows, ignore_index=True).to_parquet(OUT / "test_nll.parquet", index=False)
