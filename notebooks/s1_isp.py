# %% [markdown]
# # S1: partial leakage of named entities, n-ISP (Defs. 4-5) with the Appendix A bound
# For every planted named entity (50-token prefix, 4-token suffix) and the largest model, the
# approximate n-ISP expands, level by level in one batch, the correct token and the `expand` most
# likely alternatives under each decoder's modified distribution; the Appendix A bound is the
# probability mass of every ignored branch (completed with probability 1), so
# exact n-ISP lies in [approx, approx + bound]. Truncating decoders (greedy, top-k, top-p) have
# at most `expand` non-zero alternatives at k <= 10, so their numbers are exact (bound 0).
# Regular sampling follows the paper: 1-ISP only, a lower bound over the head holding 90% of the
# mass (capped at `sampling_expand` alternatives per node). For `exact_sequences` entities the
# exact 1-ISP under regular sampling is also computed by expanding the full vocabulary, to show
# the approximation against its bound and against the truth. On the family, the n-ISP jobs (one
# per decoder and n, one per sequence of the exact expansion) run `workers` at a time, one
# process and one thread each: no number depends on `workers`. Every scoring batch and n-ISP job
# is checkpointed, so an interrupted run resumes.

# %% tags=["parameters"]
decoders = [
    {"name": "greedy", "kind": "greedy"},
    {"name": "sampling", "kind": "sampling"},
    {"name": "top-k 5", "kind": "top_k", "value": 5},
    {"name": "top-k 10", "kind": "top_k", "value": 10},
    {"name": "top-p 0.6", "kind": "top_p", "value": 0.6},
    {"name": "temp 0.1", "kind": "temperature", "value": 0.1},
]
models = "family"
sequences = "planted"
prefix_tokens = 50
ne_suffix_tokens = 4
device = "cpu"
dtype = "float32"
workers = 1
isp = {
    "n": [1, 2],
    "expand": 10,
    "sampling_head_mass": 0.9,
    "sampling_expand": 16,
    "exact_sequences": 2,
    "batch_size": 8,
    "max_nodes": 512,
}

# %%
from functools import partial

import numpy as np
import pandas as pd
import torch

from privleak import models as registry
from privleak.data.records import read_jsonl, read_sequences, take
from privleak.errors import require
from privleak.metrics import sequence as seq
from privleak.metrics.isp_jobs import isp_jobs, job_cost, job_key, run_isp_job
from privleak.pipeline import checkpoint, paths
from privleak.pipeline.params import profile_key
from privleak.pipeline.workers import check_workers
from privleak.training import family as fam

OUT = paths.INTERIM / "s1" / "isp"
OUT.mkdir(parents=True, exist_ok=True)
store = checkpoint.open_stage("s1_isp", globals())
KEEP_LEAVES = 100  # most likely partial matches kept per (entity, decoder, n)
transforms = seq.decoder_table(decoders)

if models == "family":
    torch.set_num_threads(1)  # tiny models: one thread beats two on shared cores
    # tiny models: jobs on worker processes; a pretrained model's jobs run here, on every thread
    parallel = check_workers(workers, profile_key("s1.workers"))
    largest = str(fam.member_dirs(paths.DATA / "family")[-1])
    rows = seq.planted_sequences(
        read_jsonl(paths.RAW / "pretrain.jsonl"),
        read_jsonl(paths.RAW / "pretrain.secrets.jsonl"),
    )
else:
    largest = models[-1]
    rows = read_sequences(sequences)
    parallel = None
model, tokenizer = registry.load(largest, device=device, dtype=dtype, device_key="s1.scores.device")
if models == "family":
    fam.check_family(paths.DATA / "family", paths.RAW / "pretrain.jsonl", tokenizer)

entities = []
for row in rows:
    if row["kind"] != "named_entity":
        continue
    split = seq.split_tokens(
        tokenizer, row["prefix"], row["suffix"], prefix_tokens, ne_suffix_tokens
    )
    if split is not None:
        entities.append({"seq_id": row["seq_id"], "prefix": split[0], "suffix": split[1]})
require(bool(entities), "the named-entity sequence set is empty")
prefixes = [e["prefix"] for e in entities]
suffixes = [e["suffix"] for e in entities]
pad = dict(pad_id=tokenizer.pad_token_id)
esp_logprobs = seq.suffix_logprobs(
    model, prefixes, suffixes, transforms, cache=store.cache("esp", largest), **pad
)
log_esps = {name: seq.log_esp(lp) for name, lp in esp_logprobs.items()}
print(f"{len(entities)} named entities, model {largest}")

# %%
vocab = getattr(model, "privleak_real_vocab", None) or model.config.vocab_size
run_jobs = partial(
    store.map,
    compute=partial(run_isp_job, model=model, prefixes=prefixes, suffixes=suffixes,
                    max_nodes=isp["max_nodes"], **pad),
    key=job_key,
    workers=parallel,
    priority=lambda job: job_cost(job, vocab),
)  # fmt: skip
jobs = isp_jobs(
    decoders, isp["n"], range(len(entities)), expand=isp["expand"],
    sampling_expand=isp["sampling_expand"], sampling_head_mass=isp["sampling_head_mass"],
    batch_size=isp["batch_size"],
)  # fmt: skip
isp_rows, leaf_rows = [], []
for job, result in zip(jobs, run_jobs("isp", jobs), strict=True):
    name, n, sampling = job["decoder"]["name"], job["n"], job["decoder"]["kind"] == "sampling"
    per_seq = result.counter.tokens / len(entities)
    for e, approx, bound, leaves, esp in zip(
        entities, result.approx, result.bound, result.leaves, log_esps[name], strict=True
    ):
        isp_rows.append(
            {"seq_id": e["seq_id"], "decoder": name, "n": n, "log_esp": esp, "approx": approx,
             "bound": bound, "lower_bound_only": sampling, "forward_tokens_per_seq": per_seq}
        )  # fmt: skip
        for tokens, lp, where in sorted(leaves, key=lambda leaf: -leaf[1])[:KEEP_LEAVES]:
            leaf_rows.append(
                {"seq_id": e["seq_id"], "decoder": name, "n": n, "log_p": lp,
                 "positions": [p + 1 for p in where],
                 "tokens": tokenizer.convert_ids_to_tokens(list(tokens)),
                 "truth": tokenizer.convert_ids_to_tokens(e["suffix"])}
            )  # fmt: skip
table = pd.DataFrame(isp_rows)
require(
    bool(np.isfinite(table[["approx", "bound"]].to_numpy()).all()),
    "s1_isp: an approximate n-ISP or its bound is not finite",
)
require(
    bool((table["approx"] >= 0).all() and (table["bound"] >= 0).all()),
    "s1_isp: an approximate n-ISP or its bound is negative",
)

# %% [markdown]
# Exact 1-ISP under regular sampling (full-vocabulary expansion, bound 0) for a subset, to place
# the 90%-head lower bound and its Appendix A upper bound around the truth.

# %%
subset = take(
    entities,
    isp["exact_sequences"],
    key="s1.isp.exact_sequences",
    corpus="named entities",
    minimum=0,
)
exact_rows = []
if subset and "sampling" in [s["kind"] for s in decoders]:
    spec = next(s for s in decoders if s["kind"] == "sampling")
    # one job per sequence: at batch size 1 a sequence's tree does not depend on the others
    full = [
        {"decoder": spec, "n": 1, "expand": None, "head_mass": None, "batch_size": 1,
         "sequences": [i]}
        for i in range(len(subset))
    ]  # fmt: skip
    approximations = [
        {"decoder": spec, "n": 1, "expand": expand, "head_mass": head_mass,
         "batch_size": isp["batch_size"], "sequences": list(range(len(subset)))}
        for expand in sorted({1, 4, isp["expand"], isp["sampling_expand"]})
        for head_mass in (None, isp["sampling_head_mass"])
    ]  # fmt: skip
    results = run_jobs("exact", full + approximations)
    truth = np.concatenate([r.approx for r in results[: len(full)]])
    bounds = np.concatenate([r.bound for r in results[: len(full)]])
    require(bool((bounds < 1e-6).all()), "s1_isp: the full-vocabulary expansion left a bound")
    for job, approx in zip(approximations, results[len(full) :], strict=True):
        exact_rows += [
            {"seq_id": e["seq_id"], "decoder": spec["name"], "n": 1, "expand": job["expand"],
             "head_mass": job["head_mass"], "approx": a, "bound": b, "exact": x}
            for e, a, b, x in zip(subset, approx.approx, approx.bound, truth, strict=True)
        ]  # fmt: skip
exact = pd.DataFrame(
    exact_rows,
    columns=["seq_id", "decoder", "n", "expand", "head_mass", "approx", "bound", "exact"],
)
if len(exact):
    tol = 1e-5 * exact["exact"] + 1e-9
    require(
        bool((exact["approx"] <= exact["exact"] + tol).all()),
        "s1_isp: an approximate 1-ISP exceeds the exact one",
    )
    require(
        bool((exact["exact"] <= exact["approx"] + exact["bound"] + tol).all()),
        "s1_isp: an exact 1-ISP exceeds approx + the Appendix A bound",
    )

print(store.summary())
table.to_parquet(OUT / "isp.parquet", index=False)
pd.DataFrame(leaf_rows).to_parquet(OUT / "leaves.parquet", index=False)
exact.to_parquet(OUT / "exact.parquet", index=False)
table.assign(easier=table["approx"] > np.exp(table["log_esp"])).groupby(["decoder", "n"])[
    "easier"
].mean()
