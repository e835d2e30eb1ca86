# %% [markdown]
# # Audit of PAD (S2): nominal epsilon beside the measured privacy loss
# Neighbouring contexts with a canary (`privleak.audit.canaries`): the RAG prompt's context D is
# `canaries.documents` other patients' documents; in D' the canary patient's document replaces
# the last of them (replace-one: the retriever returns a fixed number of documents, so adding the
# canary to the store pushes one out). The question asks for the canary's planted serial number;
# the answer prefix opens the response.
#
# PAD's epsilon is per response: its accountant reads each response's sigma_t and Delta_t. The
# claim audited here is the largest all-steps epsilon over the audited outputs, under the
# tightest accountant (the privacy-loss distribution of the composed Gaussian; RDP with alpha
# optimised, PRV and the paper's gamma-relaxed epsilon at alpha 10 beside it). The privacy loss
# of a candidate integrates the noise per token exactly (`privleak.audit.pad_law`: certified
# lower and upper bounds on each token's probability, no Monte-Carlo error), and each position
# records the realised logit shift between D and D' beside the Delta_t that PAD assumes bounds
# it. Candidates: the secret, the undefended greedy response with D', and `samples` PAD
# responses under D' and under D for each epsilon of S2's sweep. Broken control: PAD at the
# table's epsilon with sigma / `controls.pad_sigma_divisor` (the amplification divided), claiming
# the correct sigma's epsilon. The LM runs in `audit.lm_dtype`, else S2's `lm_dtype`, else models'
# dtype; the laws are float32.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
lm_dtype = None
template = "chat"
device = "cpu"
dtype = "float32"
device_map = None
decoding = {"temperature": 0.2, "max_new_tokens": 10, "min_new_tokens": 1,
            "max_batch_streams": 32, "forward_mode": "slots"}  # fmt: skip
pad = {"epsilon": 0.2, "amplification": 3.0, "min_sensitivity": 0.4, "tau_conf": 0.9,
       "tau_margin": 2.0, "weights": [0.3, 0.2, 0.3]}  # fmt: skip
sweeps = {"amplifications": [1.0, 5.0], "epsilons": [0.05, 1.0], "static_sigmas": [0.5]}
accounting = {"alpha": 10.0, "delta": 1e-5, "alphas": [5.0, 10.0, 20.0], "lengths": [4, 8]}
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
from privleak.audit.canaries import load_canaries
from privleak.audit.run import Mechanism, audit_rows
from privleak.pad import PADSettings
from privleak.pipeline import paths

OUT = paths.INTERIM / "audit" / "pad"
OUT.mkdir(parents=True, exist_ok=True)
spec = audit["canaries"]
canaries = load_canaries(spec["source"], spec["count"], spec["documents"], n=spec["n"], seed=seed,
                         options=spec["options"])  # fmt: skip
steps, temperature = audit["max_new_tokens"], decoding["temperature"]
weights = dict(zip(("weight_entropy", "weight_position", "weight_confidence"), pad["weights"],
                   strict=True))  # fmt: skip
table = PADSettings(epsilon=pad["epsilon"], amplification=pad["amplification"],
                    min_sensitivity=pad["min_sensitivity"], tau_conf=pad["tau_conf"],
                    tau_margin=pad["tau_margin"], **weights)  # fmt: skip
epsilons = sorted({*sweeps["epsilons"], pad["epsilon"]})
claims = {f"eps{e:g}": dataclasses.replace(table, epsilon=e) for e in epsilons}
variants = {name: (settings, settings) for name, settings in claims.items()}
divisor = audit["controls"]["pad_sigma_divisor"]
broken = dataclasses.replace(table, amplification=table.amplification / divisor)
variants[f"eps{pad['epsilon']:g}_broken"] = (broken, table)
model, tokenizer = registry.load(lm, device=device, dtype=audit["lm_dtype"] or lm_dtype or dtype,
                                 device_map=device_map)  # fmt: skip

# %% [markdown]
# ## Candidates and their laws under D and D'

# %%
started = time.perf_counter()
mechanism = Mechanism(
    name="pad",
    relation="replace",
    variants=list(variants),
    sample=lambda canary: pairs.pad_samples(
        model, tokenizer, canary, "replace", template, {v: n for v, (n, _) in variants.items()},
        audit["samples"], temperature=temperature, max_new_tokens=steps, seed=seed,
        max_batch_streams=decoding["max_batch_streams"], forward_mode=decoding["forward_mode"]),
    score=lambda canary, candidates, subsets: pairs.pad_scores(
        model, tokenizer, canary, "replace", template, variants, candidates, subsets=subsets,
        temperature=temperature, batch_rows=audit["batch_rows"]),
    undefended=lambda canary: pairs.greedy_response(
        model, tokenizer, pairs.pad_prompt_ids(tokenizer, canary,
                                               [*canary.others[:-1], canary.document], template),
        steps),
    cross_score=False,
)  # fmt: skip
rows = pd.DataFrame(audit_rows(mechanism, tokenizer, canaries))
print(f"{len(canaries)} canaries, {len(rows)} scored rows in {time.perf_counter() - started:.1f} s")

# %%
claimed = pd.DataFrame(
    [{"variant": f"eps{e:g}", "setting": e, "broken": False, "steps": steps,
      "delta": accounting["delta"]} for e in epsilons]
    + [{"variant": f"eps{pad['epsilon']:g}_broken", "setting": pad["epsilon"], "broken": True,
        "steps": steps, "delta": accounting["delta"]}]
)  # fmt: skip
rows.to_parquet(OUT / "rows.parquet", index=False)
claimed.to_parquet(OUT / "claimed.parquet", index=False)
claimed
