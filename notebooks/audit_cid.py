# %% [markdown]
# # Audit of bounded CID (S0, Alg. 1): nominal epsilon beside the exact privacy loss
# Neighbouring contexts with a canary (`privleak.audit.canaries`): D is `canaries.documents`
# other patients' documents, D' adds the canary patient's document at the end (add/remove, as
# App. B's D and D \ D_{i,n}), in S0's document-QA prompt with the canary's question; the answer
# prefix opens the response. Bounded CID picks, per token, the largest lambda <= lam_max whose
# distribution stays within epsilon/2 of the no-context prior, so every token is epsilon-DP
# (Theorem B.1) and a response of T tokens is T epsilon-DP by basic composition.
#
# Candidates: the secret, the plain LM's greedy response with D', and `samples` bounded-CID
# responses under D' and under D for each epsilon of S0's grid. The exact law of each token
# comes from batched forced decoding after the D and D' prompts (prefilled together: the canary
# sits after their shared prefix) and the prior prompt; at every visited prefix the worst-case
# token loss over the whole vocabulary is read too. Broken control: CID at lam_max with no
# lambda search, claiming the grid's smallest epsilon. The LM runs in `audit.lm_dtype` (the
# paper group's dtype when null); the laws are float32.

# %% tags=["parameters"]
seed = 0
lms = ["smollm2-135m-instruct"]
template = "chat"
temperature = 0.8
device = "cpu"
dtype = "float32"
device_map = None
bounded = {"corpus": "pubmedqa", "examples": 1, "eps": [0.5, 2.0], "lam_max": 1.0, "n": 32}
audit = {
    "canaries": {"source": "synthetic:medical_dirichlet", "count": 1, "documents": 2, "n": 40,
                 "options": {"diseases": 5, "concentration": 0.5, "rare_details": 2}},
    "lm_dtype": None,
    "samples": 4, "max_new_tokens": 6, "alpha": 0.05, "batch_rows": 64,
    "controls": {"dp_rag_sensitivity_divisor": 4.0, "pad_sigma_divisor": 10.0},
}  # fmt: skip
max_batch_streams = 16

# %%
import time

import pandas as pd

from privleak import models as registry
from privleak.audit import pairs
from privleak.audit.canaries import load_canaries
from privleak.audit.run import Mechanism, audit_rows
from privleak.pipeline import paths

OUT = paths.INTERIM / "audit" / "cid"
OUT.mkdir(parents=True, exist_ok=True)
spec = audit["canaries"]
canaries = load_canaries(spec["source"], spec["count"], spec["documents"], n=spec["n"], seed=seed,
                         options=spec["options"])  # fmt: skip
steps, lam_max = audit["max_new_tokens"], bounded["lam_max"]
variants = {f"eps{e:g}": pairs.CIDVariant(lam_max, e, temperature) for e in bounded["eps"]}
smallest = min(bounded["eps"])
variants["no_search"] = pairs.CIDVariant(lam_max, None, temperature)
# S0's first model is audited (the paper profile's first LM; the smoke and embedded ones run one).
model, tokenizer = registry.load(lms[0], device=device, dtype=audit["lm_dtype"] or dtype,
                                 device_map=device_map)  # fmt: skip

# %% [markdown]
# ## Candidates and their exact laws under D and D'

# %%
started = time.perf_counter()
mechanism = Mechanism(
    name="cid",
    relation="add",
    variants=list(variants),
    sample=lambda canary: pairs.cid_samples(
        model, tokenizer, canary, "add", template, variants, audit["samples"],
        max_new_tokens=steps, seed=seed, max_batch_streams=max_batch_streams),
    score=lambda canary, candidates, subsets: pairs.cid_scores(
        model, tokenizer, canary, "add", template, variants, candidates, subsets=subsets,
        batch_rows=audit["batch_rows"]),
    undefended=lambda canary: pairs.greedy_response(
        model, tokenizer, pairs.cid_prompt(tokenizer, canary, [*canary.others, canary.document],
                                           template).ids, steps),
    cross_score=False,  # the lambda search per position costs more than the forward
)  # fmt: skip
rows = pd.DataFrame(audit_rows(mechanism, tokenizer, canaries))
print(f"{len(canaries)} canaries, {len(rows)} scored rows in {time.perf_counter() - started:.1f} s")

# %%
claimed = pd.DataFrame(
    [{"variant": f"eps{e:g}", "setting": e, "broken": False, "token_epsilon": e, "steps": steps,
      "delta": 0.0} for e in bounded["eps"]]
    + [{"variant": "no_search", "setting": smallest, "broken": True, "token_epsilon": smallest,
        "steps": steps, "delta": 0.0}]
)  # fmt: skip
rows.to_parquet(OUT / "rows.parquet", index=False)
claimed.to_parquet(OUT / "claimed.parquet", index=False)
claimed
