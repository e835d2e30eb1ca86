# %% [markdown]
# # S3 — the target models and the reference models
# Every model starts from the pretrained public checkpoint `base` and is fine-tuned on the train
# dialogs of s3_prepare, each a document of token ids (the tokenizer's special tokens, then EOS,
# so a model learns where a dialog ends) cut into chunks of <= `train.seq_len` tokens:
#
# | target | data | optimiser |
# |---|---|---|
# | <domain> Only | the prompted domain's dialogs only | AdamW |
# | Public | all dialogs | AdamW |
# | Pub+Redacted | all dialogs, redacted by the policy | AdamW |
# | Private | all dialogs | DP-AdamW at dp.target_epsilon (Opacus, RDP accountant) |
# | JFT | redacted (AdamW), then the originals (DP-AdamW) | both: twice the training |
# | Redaction Schedule | redacted with probability p(step), else original | AdamW, else DP |
#
# The Redaction Schedule (`schedule.draw: batch`, the official method) makes each step a plain AdamW
# step on a batch of redacted dialogs with probability p(step), else a DP-AdamW step on a Poisson
# batch of the originals; its noise is set as if every step were DP, as the official code sets
# it, and the accountant composes the DP steps only (`privleak.training.schedules`).
# JFT's first phase is Pub+Redacted's fine-tune (the same dialogs, seed and optimiser), so JFT
# starts from those weights here; its cost still counts both phases. JFT's and the Redaction
# Schedule's epsilon is selective DP: it covers what the policy flagged and redacted, and nothing
# the policy missed, which their plain steps read without noise. DP's unit is a dialog: one longer
# than `train.seq_len` is refused, never split into several units. The redaction mask is one special
# token of the tokenizer (every model gets the enlarged vocabulary), so s3_attack can forbid it at
# sampling.
#
# Pub+Redacted, JFT and the Redaction Schedule are trained once per policy (keyword,
# classifier). The references M_{D without d_j}, one per private domain j other than `domain`,
# are trained like Public on every dialog not of domain j: the LiRa attack ranks a target's
# samples against them, and domain privacy compares the targets' leak rates with theirs. Every
# model of run 0 uses the same `seed` (the same batch order for the same data; DP draws its
# Poisson batches and noise from it). Each target is trained `seeds` times: run k uses seed + k
# and lands in models/run<k>/, so render_claims can resample training runs (docs/design.md §8). The
# references, the attacker's instruments, are trained once. AdamW runs share `train`; DP runs
# take `dp`'s batch size and learning rate and `train`'s epochs and seq_len.
#
# Models train `workers` at a time, one process and one thread each, so a model's weights do not
# depend on `workers`. One checkpoint unit per model (its weights and log), so an interrupted run
# resumes. The saved log is byte-stable (steps, tokens, epsilon, losses); wall times and
# tokens/s are shown here only.

# %% tags=["parameters"]
seed = 0
device = "cpu"
base = "data/family/h32"
domain = "AIRLINE"
private_domains = ["AIRLINE", "MEDIA", "INSURANCE"]
seeds = 1
train = {"epochs": 1, "batch_size": 8, "seq_len": 512, "learning_rate": 3e-3}
dp = {
    "target_epsilon": 8.0,
    "delta": 1e-5,
    "max_grad_norm": 0.1,
    "batch_size": 8,
    "learning_rate": 3e-3,
}
schedule = {"name": "exp_concave", "options": {"sharpness": 15.0}, "draw": "batch"}
workers = 1

# %%
import math
import shutil
from functools import partial

import numpy as np
import pandas as pd

from privleak import models as registry
from privleak.errors import require
from privleak.pipeline import checkpoint, paths
from privleak.pipeline.params import profile_key
from privleak.pipeline.workers import check_workers
from privleak.training.targets import (
    SCHEDULE_TARGETS,
    add_redaction_token,
    fit_job,
    load_resized,
    optimiser_settings,
    target_plans,
)

IN = paths.INTERIM / "s3" / "prepare"
MODELS, OUT = paths.INTERIM / "s3" / "models", paths.INTERIM / "s3" / "train"
for folder in (MODELS, OUT):
    folder.mkdir(parents=True, exist_ok=True)
POLICIES = ("keyword", "classifier")
train_set = pd.read_parquet(IN / "train.parquet")
leaked = [d for d in private_domains if d != domain]
_, tokenizer = registry.load(base, device="cpu")
require(
    tokenizer.eos_token_id is not None,
    f"params {profile_key('s3.base')} = {base!r}: its tokenizer has no EOS token to end each "
    "dialog with",
)


require(
    schedule.get("draw") in SCHEDULE_TARGETS,
    f"params {profile_key('s3.schedule.draw')} = {schedule.get('draw')!r}; allowed: "
    f"{', '.join(SCHEDULE_TARGETS)}",
)
print(f"redaction token {tokenizer.convert_ids_to_tokens(add_redaction_token(tokenizer))!r}")


def documents(texts) -> list[list[int]]:
    return [
        tokenizer(text, add_special_tokens=True)["input_ids"] + [tokenizer.eos_token_id]
        for text in texts
    ]


original = documents(train_set["text"])
redacted = {p: documents(train_set[f"redacted_{p}"]) for p in POLICIES}
of_domain = train_set["domain"].to_numpy()
lengths = np.array([len(d) for d in original])
print(
    f"{len(original)} train dialogs, {lengths.sum()} tokens (median {np.median(lengths):.0f}, "
    f"max {lengths.max()}); seq_len {train['seq_len']}"
)
longest = int(np.argmax(lengths))
require(
    lengths[longest] <= train["seq_len"],
    f"params {profile_key('s3.train.seq_len')} = {train['seq_len']}: train dialog "
    f"{train_set['id'][longest]!r} has {lengths[longest]} tokens, and DP protects a dialog as one "
    f"example; raise seq_len (up to the base's window) or use shorter dialogs",
)
store = checkpoint.open_stage("s3_train", globals())

# %% [markdown]
# ## The models to train

# %%
adamw, private = optimiser_settings(train, dp)
plans = target_plans(
    original,
    redacted,
    of_domain,
    domain=domain,
    leaked=leaked,
    seeds=seeds,
    draw=schedule["draw"],
)
pd.DataFrame(
    [{k: v for k, v in p.items() if k != "docs"} | {"dialogs": len(p["docs"])} for p in plans]
)

# %% [markdown]
# ## Training (one checkpoint unit per model)


# %%
fit = partial(
    fit_job,
    load=partial(load_resized, base, tokenizer, device),
    original=original,
    pad_id=tokenizer.pad_token_id,
    seed=seed,
    adamw=adamw,
    private=private,
    schedule=schedule,
)
check_workers(workers, profile_key("s3.workers"))
# JFT starts from its first phase's weights: those models train first.
first = [(plan, None) for plan in plans if not plan["after"]]
fitted = dict(
    zip(
        [plan["model"] for plan, _ in first],
        store.map("model", first, fit, key=lambda job: job[0]["model"], workers=workers),
        strict=True,
    )
)
after = [(plan, fitted[plan["after"]]) for plan in plans if plan["after"]]
fitted |= zip(
    [plan["model"] for plan, _ in after],
    store.map("model", after, fit, key=lambda job: job[0]["model"], workers=workers),
    strict=True,
)
logs, loss_rows, timings = [], [], []
for plan in plans:
    unit = fitted[plan["model"]]
    model = load_resized(base, tokenizer, "cpu")
    model.load_state_dict(unit["state"])
    folder = MODELS / plan["model"]
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    info = {key: value for key, value in plan.items() if key != "docs"}
    logs.append({**info, "dialogs": len(plan["docs"]), **unit["row"]})
    loss_rows += [
        {"model": plan["model"], "step": i, "loss": loss} for i, loss in enumerate(unit["losses"])
    ]
    timings.append({"model": plan["model"], **unit["timing"]})
    print(
        f"{plan['model']}: {unit['row']['steps']} steps, final loss "
        f"{unit['row']['final_loss']:.3f}, {unit['timing']['wall_s']:.1f} s"
    )
print(store.summary())
log = pd.DataFrame(logs)
public_tokens = float(log.loc[log["model"] == "public", "tokens"].iloc[0])
log["relative_cost"] = log["tokens"] / public_tokens  # training tokens vs Public's
log

# %% [markdown]
# ## Throughput, with and without DP (this run's wall clock; not saved)
# tokens_per_s: training tokens / wall time of the whole fine-tune (for DP runs including Opacus'
# noise calibration and compatibility probe); dp_loop_tokens_per_s: the DP phase's tokens / its
# training loop's time alone. Each on one thread; with `workers` > 1 the fine-tunes share the
# cores, so their times add up to more than the stage's.

# %%
timing = pd.DataFrame(timings).merge(log[["model", "target", "policy", "kind", "steps", "tokens"]])
# Tokens this run computed (JFT's reused first phase excluded) over its wall time.
timing["tokens_per_s"] = (timing["adamw_tokens"] + timing["dp_tokens"]) / timing["wall_s"]
timing["dp_loop_tokens_per_s"] = timing["dp_tokens"] / timing["dp_wall_s"].where(
    timing["dp_wall_s"] > 0
)
adamw_rate = timing.loc[timing["kind"] == "adamw", "tokens_per_s"].median()
dp_rate = timing.loc[timing["kind"] == "dp", "dp_loop_tokens_per_s"].median()
print(
    f"all fine-tunes: {timing['wall_s'].sum():.1f} s of job time; tokens/s: AdamW "
    f"{adamw_rate:.0f} (median of the AdamW runs), DP-AdamW loop {dp_rate:.0f}: DP costs "
    f"{adamw_rate / dp_rate:.2f}x per token"
)
timing.round(2)

# %% [markdown]
# ## Save

# %%
require(
    bool(log["final_loss"].map(math.isfinite).all()),
    "s3_train: a model ended with no finite training loss",
)
log.to_parquet(OUT / "train_log.parquet", index=False)
pd.DataFrame(loss_rows).to_parquet(OUT / "losses.parquet", index=False)
