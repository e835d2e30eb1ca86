# %% [markdown]
# # S1 on retrained families: the same ESPs, once per training run
# s1_scores scores the planted sequences on data/family, one training run. Every S1 claim about
# the family rests on that run unless the retrained runs of train_family_seeds are scored too:
# here each run's sizes score s1_scores' own sequences (data/interim/s1/scores/sequences.parquet,
# the same token ids: the runs share the family's tokenizer, which is checked) under the same
# decoders and prefix lengths, in the same teacher-forced pass. One row per run x model x
# sequence x prefix length x decoder (esp.parquet) and per suffix position at the full prefix
# (tp.parquet); `run` 1.. numbers the retrained runs (data/family itself is run 0).
# Members score `workers` at a time, one process and one thread each, one checkpoint unit per
# member: no number depends on `workers`. With pretrained models (s1.scores.models a list)
# there is no training run to repeat: the tables stay empty and the claims say so.

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
prefix_tokens = 50
prefix_lengths = [10, 30, 50]
batch_size = 16
device = "cpu"
dtype = "float32"
workers = 1

# %%
from functools import partial

import pandas as pd

from privleak.errors import require
from privleak.metrics.run_scores import score_member
from privleak.pipeline import checkpoint, paths
from privleak.pipeline.params import profile_key
from privleak.pipeline.workers import check_workers
from privleak.training import family as fam

OUT = paths.INTERIM / "s1" / "seeds"
OUT.mkdir(parents=True, exist_ok=True)
RUNS = paths.DATA / "family_seeds"
CORPUS = paths.RAW / "pretrain.jsonl"
store = checkpoint.open_stage("s1_seeds", globals())
lengths = sorted(set(prefix_lengths) | {prefix_tokens})
sequences = pd.read_parquet(paths.INTERIM / "s1" / "scores" / "sequences.parquet")
sequences = [
    {**row, "prefix_ids": row["prefix_ids"].tolist(), "suffix_ids": row["suffix_ids"].tolist()}
    for row in sequences.to_dict("records")
]
run_dirs = sorted(RUNS.glob("run*/"), key=lambda d: int(d.name.removeprefix("run")))
if models != "family":
    run_dirs = []  # pretrained models: nothing was trained here
print(f"{len(run_dirs)} retrained runs x {len(sequences)} sequences")

# %%
primary = fam.read_manifest(paths.DATA / "family")
jobs = []
for run_dir in run_dirs:
    manifest = fam.check_family(run_dir, CORPUS)
    require(
        manifest["tokenizer_sha256"] == primary["tokenizer_sha256"],
        f"{run_dir} was trained with another tokenizer than data/family; rerun train_family_seeds",
    )
    run = int(run_dir.name.removeprefix("run"))
    jobs += [
        {"run": run, "rank": rank, "member": str(member)}
        for rank, member in enumerate(fam.member_dirs(run_dir))
    ]
score = partial(
    score_member, sequences=sequences, prefix_lengths=lengths, decoders=decoders,
    tp_prefix_len=prefix_tokens, batch_size=batch_size, corpus=CORPUS, device=device, dtype=dtype,
)  # fmt: skip
scored = store.map(
    "scores",
    jobs,
    score,
    key=lambda job: (job["run"], job["rank"]),
    workers=check_workers(workers, profile_key("s1.workers")),
    priority=lambda job: job["rank"],  # larger members last longer
)
esp_rows = [row for esp, _ in scored for row in esp]
tp_rows = [row for _, tp in scored for row in tp]
print(store.summary())


def table(rows: list[dict], value: str) -> pd.DataFrame:
    """The rows, or an empty table whose columns keep their dtypes (no retrained run)."""
    empty = {"run": int, "model": str, "seq_id": str, "kind": str, value: float}
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(empty)).astype(empty)


esp, tp = table(esp_rows, "log_esp"), table(tp_rows, "log_tp")
require(
    bool(not esp["log_esp"].isna().any() and (esp["log_esp"] <= 1e-6).all()),
    "s1_seeds: a log ESP is missing or above 0",
)
esp.to_parquet(OUT / "esp.parquet", index=False)
tp.to_parquet(OUT / "tp.parquet", index=False)
if len(esp):
    means = esp[(esp["prefix_len"] == prefix_tokens) & (esp["decoder"] == "sampling")]
    print(means.groupby(["model", "run"])["log_esp"].mean().unstack().round(2))
