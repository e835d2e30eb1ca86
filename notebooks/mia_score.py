# %% [markdown]
# # MIA: members, non-members, and one scoring pass per model
# Membership is known by construction. With `mia.models: family` the members are the planted
# sequences of the family's corpus (data/raw/pretrain.secrets.jsonl: prefix + suffix, the exact
# string trained on, planted `duplicates` times) and the non-members `non_members.count`
# sequences drawn by the same generator with the slot's options (privleak.data.pretrain.
# held_out_sequences: the same kinds, lengths and formats, in turn a named entity and a long
# sequence) and planted nowhere. Otherwise both come from files (rows {id, text}).
# Every text is scored once by every model: the family's sizes on every training run (run 0 is
# data/family, run k data/family_seeds/run<k>), mia_references' reference models, or each model
# of the list (run 0). One teacher-forced pass per (model, text) gives each token's log-prob and
# the mean and std of the model's log-probs at that position (privleak.mia.scoring), which feed
# every attack. Models are scored `workers` at a time, one process and one thread each, so a
# score does not depend on `workers`.

# %% tags=["parameters"]
seed = 0
device = "cpu"
dtype = "float32"
pretrain = {
    "source": "synthetic:pretrain",
    "n": 40,
    "options": {"doc_words": 60, "duplication_counts": [1, 2, 4], "sequences_per_count": 2,
                "ne_prefix_words": 55, "long_prefix_words": 55, "long_suffix_words": 55},
}  # fmt: skip
models = "family"
members = "planted"
non_members = {"source": "held_out", "count": 64}
batch_size = 16
workers = 1

# %%
from functools import partial

import pandas as pd

from privleak.batching import ForwardCounter
from privleak.data.pretrain import held_out_sequences
from privleak.data.records import read_jsonl
from privleak.metrics.sequence import planted_sequences
from privleak.mia import texts as mia_texts
from privleak.mia.scoring import score_model
from privleak.pipeline import paths
from privleak.pipeline.params import profile_key
from privleak.pipeline.workers import check_workers, run_jobs
from privleak.training import family as fam

OUT = paths.INTERIM / "mia"
OUT.mkdir(parents=True, exist_ok=True)
family = models == "family"
if family:
    secrets = read_jsonl(paths.RAW / "pretrain.secrets.jsonl")
    planted = planted_sequences(read_jsonl(paths.RAW / "pretrain.jsonl"), secrets)
    lengths = ("ne_prefix_words", "long_prefix_words", "long_suffix_words")
    options = {k: v for k, v in pretrain["options"].items() if k in lengths}
    held_out = held_out_sequences(seed, non_members["count"],
                                  exclude=[s["text"] for s in secrets], **options)  # fmt: skip
    texts = mia_texts.from_sequences(planted, held_out)
else:
    texts = mia_texts.from_files(members, non_members["source"], non_members["count"])
texts.to_parquet(OUT / "texts.parquet", index=False)
texts.groupby(["is_member", "kind", "duplicates"]).size().rename("texts")

# %%
if family:
    # (role, run, model name, folder): a family member is named by its size
    scored = [("target", 0, m.name, m) for m in fam.member_dirs(paths.DATA / "family")]
    for run_dir in sorted((paths.DATA / "family_seeds").glob("run*/"),
                          key=lambda d: int(d.name.removeprefix("run"))):  # fmt: skip
        scored += [("target", int(run_dir.name.removeprefix("run")), m.name, m)
                   for m in fam.member_dirs(run_dir)]  # fmt: skip
    for size_dir in sorted(d for d in (paths.DATA / "mia_references").glob("*/") if d.is_dir()):
        scored += [("reference", int(d.name.removeprefix("ref")), size_dir.name, d)
                   for d in sorted(size_dir.glob("ref*/"))]  # fmt: skip
else:
    scored = [("target", 0, name, name) for name in models]
score = partial(score_model, texts=texts["text"].tolist(), device=device, dtype=dtype,
                batch_size=batch_size)  # fmt: skip
counter, rows = ForwardCounter(), []
scored_stats = run_jobs(score, [str(where) for *_, where in scored],
                        workers=check_workers(workers, profile_key("mia.workers")))  # fmt: skip
for (role, run, name, _), (stats, model_counter) in zip(scored, scored_stats, strict=True):
    counter.merge(model_counter)
    rows += [{"model": name, "run": run, "role": role, "text_id": text_id,
              "logprob": s.logprob, "mu": s.mu, "sigma": s.sigma}
             for text_id, s in zip(texts["text_id"], stats, strict=True)]  # fmt: skip
stats = pd.DataFrame(rows)
stats.to_parquet(OUT / "stats.parquet", index=False)
print(f"{len(scored)} models x {len(texts)} texts: {counter.tokens:,} forward tokens "
      f"in {counter.calls} calls")  # fmt: skip
stats.groupby(["role", "model"])["run"].nunique().rename("runs")
