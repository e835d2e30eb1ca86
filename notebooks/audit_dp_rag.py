# %% [markdown]
# # Audit of DP-RAG's token law (S4): nominal epsilon beside the exact privacy loss
# Neighbouring stores with a canary (`privleak.audit.canaries`): D holds `canaries.documents`
# other patients' documents, D' adds the canary patient's document, whose planted serial number
# the question asks for (add/remove one document: DP-RAG's relation when every document above the
# threshold is kept). The retrieval threshold is held fixed: this audits the token mechanism,
# DP-ICL, whose per-token epsilon comes from the response budget (`split_budget`, S4's params).
#
# Candidates: the secret after the answer prefix, the non-private RAG's greedy response with D',
# and `samples` DP-ICL responses under D' and under D for each variant. Each candidate's exact
# per-token probability under D and D' comes from one prefill of every document stream (D's
# streams are D''s minus the canary's) and batched forced decoding; at every visited prefix the
# worst-case token loss over the whole vocabulary is read too.
#
# Variants: each response budget epsilon of S4, and a broken control at the first one whose token
# law uses C / `controls.dp_rag_sensitivity_divisor` (more signal than the budget pays for) while
# claiming the correct epsilon. The LM runs in `audit.lm_dtype`, else S4's `lm_dtype`; the token
# law is float32.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
lm_dtype = None
device = "cpu"
dtype = "float32"
device_map = None
budget = {"epsilons": [5.0, 20.0], "delta": 1e-3, "retrieval_epsilon": 0.5}
dp_icl = {"alpha": 1.0, "clip": 0.5, "theta": 0.01}
generation = {"template": "chat", "max_new_tokens": 4, "min_new_tokens": 1, "max_batch_streams": 40,
              "rag_k": 2, "answer_prefix": "The disease is called"}  # fmt: skip
audit = {
    "canaries": {"source": "synthetic:medical_dirichlet", "count": 1, "documents": 2, "n": 40,
                 "options": {"diseases": 5, "concentration": 0.5, "rare_details": 2}},
    "lm_dtype": None,
    "samples": 4, "max_new_tokens": 6, "alpha": 0.05, "batch_rows": 64,
    "controls": {"dp_rag_sensitivity_divisor": 4.0, "pad_sigma_divisor": 10.0},
}  # fmt: skip

# %%
import dataclasses
import time

import pandas as pd

from privleak import models as registry
from privleak.audit import pairs
from privleak.audit.canaries import load_canaries, texts
from privleak.audit.run import Mechanism, audit_rows
from privleak.dp_rag import DPICLSettings, split_budget
from privleak.pipeline import paths

OUT = paths.INTERIM / "audit" / "dp_rag"
OUT.mkdir(parents=True, exist_ok=True)
spec = audit["canaries"]
canaries = load_canaries(spec["source"], spec["count"], spec["documents"], n=spec["n"], seed=seed,
                         options=spec["options"])  # fmt: skip
template, steps = generation["template"], generation["max_new_tokens"]
budgets = {e: split_budget(e, budget["delta"], budget["retrieval_epsilon"], steps)
           for e in budget["epsilons"]}  # fmt: skip
variants = {
    f"eps{e:g}": DPICLSettings(b.token_epsilon, dp_icl["alpha"], dp_icl["clip"], dp_icl["theta"])
    for e, b in budgets.items()
}
first = budget["epsilons"][0]
divisor = audit["controls"]["dp_rag_sensitivity_divisor"]
correct = variants[f"eps{first:g}"]
variants[f"eps{first:g}_broken"] = dataclasses.replace(correct, epsilon=correct.epsilon * divisor)
dtype = audit["lm_dtype"] or lm_dtype or dtype  # the token law is computed in float32
model, tokenizer = registry.load(lm, device=device, dtype=dtype, device_map=device_map)
pd.DataFrame([{"variant": k, "token_epsilon": v.epsilon} for k, v in variants.items()])

# %% [markdown]
# ## Candidates and their exact laws under D and D'

# %%
started = time.perf_counter()
mechanism = Mechanism(
    name="dp_rag",
    relation="add",
    variants=list(variants),
    sample=lambda canary: pairs.dp_icl_samples(
        model, tokenizer, canary, "add", template, variants, audit["samples"],
        max_new_tokens=steps, seed=seed, max_batch_streams=generation["max_batch_streams"]),
    score=lambda canary, candidates, subsets: pairs.dp_icl_scores(
        model, tokenizer, canary, "add", template, variants, candidates, subsets=subsets,
        batch_rows=audit["batch_rows"]),
    undefended=lambda canary: pairs.greedy_response(
        model, tokenizer, pairs.rag_prompt_ids(tokenizer, canary, [*canary.others, canary.document],
                                               template), steps),
)  # fmt: skip
rows = pd.DataFrame(audit_rows(mechanism, tokenizer, canaries))
print(f"{len(canaries)} canaries, {len(rows)} scored rows in {time.perf_counter() - started:.1f} s")

# %%
claimed = pd.DataFrame(
    [{"variant": f"eps{e:g}", "setting": e, "broken": False, "token_epsilon": b.token_epsilon,
      "steps": steps, "delta": budget["delta"]} for e, b in budgets.items()]
    + [{"variant": f"eps{first:g}_broken", "setting": first, "broken": True,
        "token_epsilon": budgets[first].token_epsilon, "steps": steps, "delta": budget["delta"]}]
)  # fmt: skip
rows.to_parquet(OUT / "rows.parquet", index=False)
claimed.to_parquet(OUT / "claimed.parquet", index=False)
pd.DataFrame(texts(canaries)).to_json(OUT / "canaries.jsonl", orient="records", lines=True)
claimed
