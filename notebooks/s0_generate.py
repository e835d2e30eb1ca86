# %% [markdown]
# # S0 — CID generations and whole-context influence
# Context Influence Decoding (Flemings et al. Def. 3.4) samples each response from
# p̄ = softmax((λ·logit(y|D,x,y<t) + (1−λ)·logit(y|x,y<t))/T), with the with-context and the
# no-context stream (same template, empty context) in one batched, cached decode. The whole-
# context influence τ_|D| of every response token is read from the generation records
# (Def. 3.1 with n = |D|). Three experiments, one row per (example, setting):
# - `main`: every corpus × λ at the default T (Tables 2-4, Fig. 2c);
# - `sweep`: T ∈ temperatures at λ = 1 and λ ∈ lams at the default T (Figs. 7-8);
# - `context_size`: the context truncated to its first |D| tokens, λ = 1 (Fig. 2b).
# Within an experiment all settings of a context share its prompt prefill. A response depends
# only on (record, |D|, λ, T) and the seed, so the sweep and context-size settings that `main`
# already drew (λ ∈ lams at the default T, the full context) take main's responses. Each decoder
# chunk (`max_batch_streams` streams) is checkpointed, so an interrupted run resumes chunk by chunk.

# %% tags=["parameters"]
seed = 0
device = "cpu"
dtype = "float32"
device_map = None
lms = ["smollm2-135m-instruct"]
corpora = ["cnn_dm", "pubmedqa"]
template = "chat"
n_examples = 2
context_tokens = 64
max_new_tokens = 12
min_new_tokens = 4
count_eos = True
temperature = 0.8
lams = [0.5, 1.0, 1.5]
max_batch_streams = 16
sweep = {"corpus": "pubmedqa", "examples": 2, "temperatures": [0.5, 1.0], "lams": [0.0, 1.0, 2.0]}
context_sizes = {"corpus": "pubmedqa", "examples": 2, "sizes": [8, 64]}

# %%
import pandas as pd

from privleak import models as registry
from privleak.data.records import read_jsonl, take
from privleak.errors import require
from privleak.metrics.influence_rows import cid_experiment, drawn_rows
from privleak.pipeline import checkpoint, paths

OUT = paths.INTERIM / "s0" / "generate"
OUT.mkdir(parents=True, exist_ok=True)
used = dict.fromkeys([*corpora, sweep["corpus"], context_sizes["corpus"]])
records = {name: read_jsonl(paths.RAW / f"{name}.jsonl") for name in used}
store = checkpoint.open_stage("s0_generate", globals())


def run(model, tokenizer, lm, experiment, corpus, count, key, settings, sizes=(None,), drawn=()):
    """CID responses for the first `count` records of `corpus` (params `key` = count; more than
    the corpus holds is an error) × settings × context sizes. A (size, setting) whose responses
    `drawn` already holds takes them from there: the same random stream, the same response."""
    chosen = take(records[corpus], count, key=key, corpus=corpus)
    rows = []
    for limit in [context_tokens if size is None else size for size in sizes]:
        reused = {
            setting: drawn_rows(drawn, corpus=corpus, examples=len(chosen), limit=limit,
                                setting=setting)
            for setting in settings
        }  # fmt: skip
        missing = [setting for setting in settings if reused[setting] is None]
        new = {}
        for _, generation, seconds, batch in cid_experiment(
            model, tokenizer, chosen, missing, limits=[limit] if missing else [], corpus=corpus,
            template=template, describe={"experiment": experiment, "model": lm},
            max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, seed=seed,
            max_batch_streams=max_batch_streams, count_eos=count_eos,
            cache=store.cache(experiment, lm),
        ):  # fmt: skip
            print(
                f"{lm} {experiment} {corpus} |D|<={limit}: {len(chosen)} contexts x "
                f"{len(missing)} settings in {seconds:.1f} s; forwarded "
                f"{generation.prefill_counter.tokens} prefill + {generation.step_counter.tokens} "
                "step tokens"
            )
            new = {(row["example_index"], (row["lam"], row["temperature"])): row for row in batch}
        if len(missing) < len(settings):
            print(
                f"{lm} {experiment} {corpus} |D|<={limit}: {len(settings) - len(missing)} of "
                f"{len(settings)} settings taken from main"
            )
        rows += [
            (new[(index, setting)] if reused[setting] is None else reused[setting][index])
            | {"experiment": experiment}
            for index in range(len(chosen))
            for setting in settings
        ]
    return rows


# %% [markdown]
# ## Generate

# %%
rows = []
for lm in lms:
    model, tokenizer = registry.load(lm, device=device, dtype=dtype, device_map=device_map)
    main_settings = [(lam, temperature) for lam in lams]
    main = []
    for corpus in corpora:
        main += run(
            model, tokenizer, lm, "main", corpus, n_examples, "s0.n_examples", main_settings
        )
    sweep_settings = list(
        dict.fromkeys(
            [(1.0, t) for t in sweep["temperatures"]]
            + [(lam, temperature) for lam in sweep["lams"]]
        )
    )
    rows += main
    rows += run(
        model,
        tokenizer,
        lm,
        "sweep",
        sweep["corpus"],
        sweep["examples"],
        "s0.sweep.examples",
        sweep_settings,
        drawn=main,
    )
    rows += run(
        model,
        tokenizer,
        lm,
        "context_size",
        context_sizes["corpus"],
        context_sizes["examples"],
        "s0.context_sizes.examples",
        [(1.0, temperature)],
        sizes=context_sizes["sizes"],
        drawn=main,
    )
print(store.summary())

# %%
table = pd.DataFrame(rows)
require(
    bool(table["tau"].notna().all() and (table["length"] >= 1).all()),
    "s0_generate: a response has no influence τ or no tokens",
)
table.to_parquet(OUT / "generations.parquet", index=False)
table.groupby(["experiment", "corpus", "lam", "temperature"])["tau"].agg(["mean", "count"])
