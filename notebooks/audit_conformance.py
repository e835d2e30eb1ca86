# %% [markdown]
# # The conformance check's power: correct DP decoders and seeded bugs
# `privleak.audit.check` audits any decoding-time DP mechanism written as a token law
# (context logits [k, V], public logits [V] -> ln P [V]) against its claimed (epsilon, delta),
# per token or per response, on seeded canary neighbours, exactly: each pair's epsilon at the
# claimed delta is computed from the two token laws (or their certified bounds), so the audited
# value is a lower bound with no statistics. `privleak.audit.mutants` holds the suite: correct
# mechanisms (the exponential mechanism on summed document distributions, as DP-ICL aggregates;
# a Gaussian mechanism on the logits under PAD's accountant, per token and per response; PAD's
# screening on the public model; bounded CID) that must pass, and seeded bugs, each claiming its
# correct twin's guarantee, that must be caught. The mechanisms are small-vocabulary stand-ins
# (`conformance.vocab` tokens), not the papers' models. render_audit tabulates and draws it.

# %% tags=["parameters"]
seed = 0
conformance = {"vocab": 6, "bases": 2}

# %%
import time

from privleak.audit.mutants import detection, run_suite
from privleak.pipeline import paths

OUT = paths.INTERIM / "audit" / "conformance"
OUT.mkdir(parents=True, exist_ok=True)
started = time.perf_counter()
results = run_suite(vocab=conformance["vocab"], bases=conformance["bases"], seed=seed)
print(f"{len(results)} mechanisms checked in {time.perf_counter() - started:.1f} s")
results.to_parquet(OUT / "suite.parquet", index=False)
detection(results)

# %%
results[["mechanism", "correct", "claimed", "audited", "flagged", "worst_pair"]]
