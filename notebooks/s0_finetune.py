# %% [markdown]
# # S0 — a model that already knows the context (miniature of §4.2)
# The paper contrasts OPT-1.3B (PubMed abstracts excluded from pre-training) with GPT-Neo-1.3B
# (the Pile, which contains them): GPT-Neo shows lower context influence on PubMedQA yet more
# regurgitation. Miniature: the first `docs` PubMedQA-like records are split into a seen half
# (even positions) and an unseen half (odd positions); SmolLM2 is fully fine-tuned (AdamW, next-
# token loss) on the seen contexts, exactly as the prompt shows them (first `context_tokens`
# tokens, plain text). CID responses at every λ are drawn from the base and the fine-tuned model
# on all docs, each response on the random stream s0_generate gives the same (record, |D|, λ, T),
# so the two models' responses are paired; the base model's are s0_generate's own `main` responses
# when it drew them (same model and record), else drawn here. One row per (model, doc, λ); plus
# the training losses and each doc's mean log-likelihood before and after fine-tuning (the "knows
# the context" check).

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
device = "cpu"
dtype = "float32"
template = "chat"
context_tokens = 64
max_new_tokens = 12
min_new_tokens = 4
count_eos = True
temperature = 0.8
lams = [0.5, 1.0, 1.5]
max_batch_streams = 16
finetune = {
    "enabled": True,
    "docs": 2,
    "epochs": 1,
    "batch_size": 2,
    "seq_len": 64,
    "learning_rate": 0.0001,
}

# %%
import time

import pandas as pd
import torch

from privleak import models as registry
from privleak.data.records import read_jsonl, take
from privleak.errors import require
from privleak.metrics.influence_rows import context_examples, drawn_rows
from privleak.metrics.known_context import (
    context_knowledge,
    drawn_response_rows,
    known_context_rows,
)
from privleak.pipeline import paths
from privleak.training.finetune import finetune_causal_lm

OUT = paths.INTERIM / "s0" / "finetune"
OUT.mkdir(parents=True, exist_ok=True)
_ = torch.manual_seed(seed)

# %%
rows, losses, knowledge = [], [], []
if finetune["enabled"]:
    model, tokenizer = registry.load(lm, device=device, dtype=dtype, device_map=None)
    records = take(
        read_jsonl(paths.RAW / "pubmedqa.jsonl"),
        finetune["docs"],
        key="s0.finetune.docs",
        corpus="pubmedqa",
    )
    prompts, keys, examples = context_examples(
        tokenizer, records, corpus="pubmedqa", template=template, limit=context_tokens, describe={}
    )
    examples = [example | {"seen": example["example_index"] % 2 == 0} for example in examples]
    seen_docs = [p.context for p, e in zip(prompts, examples, strict=True) if e["seen"]]
    settings = [(lam, temperature) for lam in lams]

    def evaluate(label):
        generated, known, seconds = known_context_rows(
            model, tokenizer, prompts, examples, settings, label, stream_keys=keys,
            max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, seed=seed,
            max_batch_streams=max_batch_streams, count_eos=count_eos,
        )  # fmt: skip
        print(f"{label}: generated in {seconds:.1f} s")
        knowledge.extend(known)
        return generated

    main = pd.read_parquet(paths.INTERIM / "s0" / "generate" / "generations.parquet")
    main = main[(main["experiment"] == "main") & (main["model"] == lm)].to_dict("records")
    drawn = {
        setting: drawn_rows(main, corpus="pubmedqa", examples=len(records), limit=context_tokens,
                            setting=setting)
        for setting in settings
    }  # fmt: skip
    if all(rows_of_setting is not None for rows_of_setting in drawn.values()):
        print("base: s0_generate's main responses")
        rows += drawn_response_rows(drawn, examples, settings, "base")
        knowledge.extend(context_knowledge(model, prompts, examples, "base"))
    else:
        rows += evaluate("base")
    started = time.perf_counter()
    step_losses = finetune_causal_lm(
        model,
        seen_docs,
        epochs=finetune["epochs"],
        batch_size=finetune["batch_size"],
        seq_len=finetune["seq_len"],
        learning_rate=finetune["learning_rate"],
        pad_id=tokenizer.pad_token_id,
        seed=seed,
    )
    print(f"fine-tuned {len(step_losses)} steps in {time.perf_counter() - started:.1f} s")
    losses = [{"step": i, "loss": loss} for i, loss in enumerate(step_losses)]
    rows += evaluate("finetuned")

# %%
columns = ["model", "corpus", "example", "seen", "lam", "temperature", "tau"]
table = pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)
table.to_parquet(OUT / "generations.parquet", index=False)
pd.DataFrame(losses, columns=["step", "loss"]).to_parquet(OUT / "losses.parquet", index=False)
known = pd.DataFrame(knowledge, columns=["model", "example", "seen", "mean_logprob"])
known = known[["model", "example", "seen", "mean_logprob"]]
known.to_parquet(OUT / "knowledge.parquet", index=False)
require(bool(table["tau"].notna().all()), "s0_finetune: a response influence τ is missing")
known.groupby(["model", "seen"])["mean_logprob"].mean()
