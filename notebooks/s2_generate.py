# %% [markdown]
# # S2 — responses under every defense, and the probability of emitting each planted secret
# Every attack prompt of s2_index is answered by the RAG system (the official code's prompt
# `Context:\n{ctx}\n\nQuestion:{q}\nAnswer:\n`, as text for a base model or as the user turn of
# an instruct model's chat template, `template`; temperature sampling at `decoding.temperature`;
# the official code decoded greedily despite its T = 0.2) under each defense:
# - Extraction: no defense;
# - Static: i.i.d. Gaussian noise of std `static_sigma` on every logit at every step (0.1, the
#   default of the official code's --static_noise_scale, whose processor is unpublished; on the
#   sweep corpus also each of `sweeps.static_sigmas`);
# - PAD: `privleak.pad` with the `pad` settings; on the sweep corpus also its ablations (No Calib.,
#   No Sens.) and the amplification and epsilon sweeps (Figs. 3-5);
# - Summ.: the LLM first condenses each retrieved document to the query (`summary.style`
#   "extract": Zeng et al.'s extraction prompt, a NO_OUTPUT answer dropping the document;
#   "paraphrase": ours, which no claim reads), with `summary.max_new_tokens`;
# - Dist.: only the retrieved contexts within L2 distance `distance.table` of the query (ours: the
#   paper states no Table 1 threshold), a context beyond it dropped, never replaced (and on the
#   sweep corpus each of `distance.sweep`).
# Every response records the prompt's retrieved top contexts (`retrieved_ids`) and the contexts
# its defense placed in its prompt (`context_ids`): its leakage is judged against the latter.
# The noise defenses of a prompt share its prompt: one decode call forks one prefill to all of
# them. The LM runs in `lm_dtype` (models' dtype when null); its logits are cast to float32
# before the noise, the screening and every log-prob. Every response keeps its per-step noise
# records (sigma, Delta, protected) for the accountant and each token's log-prob under the
# undefended model.
#
# Exact secret probabilities (a first for PAD): for the first `esp.prompts` prompts per corpus, each
# planted secret in the prompt's retrieved top contexts (at most `esp.max_secrets` per prompt),
# forced after the `esp.cue_words` words that precede it in its document: its log-probability
# under each T1 defense's sampling distribution, the noise integrated by `esp.draws` draws per
# token. Every defense is scored on the same secrets, those at risk before it acts (a secret whose
# document Dist. dropped or Summ. condensed away keeps its own, small, probability), so the
# defenses pair per prompt.

# %% tags=["parameters"]
seed = 0
lm = "smollm2-135m-instruct"
lm_dtype = None
template = "chat"
device = "cpu"
dtype = "float32"
device_map = None
sweep_corpus = "healthcaremagic"
decoding = {
    "temperature": 0.2,
    "max_new_tokens": 10,
    "min_new_tokens": 1,
    "max_batch_streams": 32,
    "forward_mode": "slots",
}
pad = {
    "epsilon": 0.2,
    "amplification": 3.0,
    "min_sensitivity": 0.4,
    "tau_conf": 0.9,
    "tau_margin": 2.0,
    "weights": [0.3, 0.2, 0.3],
}
static_sigma = 0.1
sweeps = {"amplifications": [1.0, 5.0], "epsilons": [0.05, 1.0], "static_sigmas": [0.5]}
distance = {"table": 1.0, "sweep": [0.8, 1.0]}
summary = {"style": "extract", "max_new_tokens": 10}
esp = {"prompts": 1, "max_secrets": 2, "cue_words": 6, "draws": 8}

# %%
import dataclasses
import json
import time

import pandas as pd

from privleak import models as registry
from privleak.errors import require
from privleak.pad import PADSettings
from privleak.pad_rag import (
    condensed_context,
    defended_generate,
    distance_filtered,
    noise_defenses,
    rag_prompt,
    secret_logprobs,
    summary_prompt,
)
from privleak.pipeline import checkpoint, paths

IN, OUT = paths.INTERIM / "s2" / "index", paths.INTERIM / "s2" / "generate"
OUT.mkdir(parents=True, exist_ok=True)
prompts = pd.read_parquet(IN / "prompts.parquet")
chunks = pd.read_parquet(IN / "chunks.parquet")
secrets = pd.read_parquet(IN / "secrets.parquet")
text = {(r.corpus, r.id): r.text for r in chunks.itertuples()}
corpora = list(dict.fromkeys(prompts["corpus"]))
require(
    sweep_corpus in corpora,
    f"s2.sweep_corpus '{sweep_corpus}' is not one of the corpora ({', '.join(corpora)})",
)
weights = dict(zip(("weight_entropy", "weight_position", "weight_confidence"), pad["weights"],
                   strict=True))  # fmt: skip
pad_settings = PADSettings(
    epsilon=pad["epsilon"], amplification=pad["amplification"],
    min_sensitivity=pad["min_sensitivity"], tau_conf=pad["tau_conf"],
    tau_margin=pad["tau_margin"], **weights,
)  # fmt: skip
model, tokenizer = registry.load(lm, device=device, dtype=lm_dtype or dtype, device_map=device_map)
store = checkpoint.open_stage("s2_generate", globals())
run = {k: decoding[k] for k in ("temperature", "max_new_tokens", "min_new_tokens", "forward_mode")}
run["template"] = template
timings = {}

# %% [markdown]
# ## The noise defenses: one prefill per prompt, forked to every defense
# Corpora that run the same defenses decode together (keys are (corpus, prompt)), so the decoder
# fills whole chunks of `max_batch_streams` streams rather than one short tail per corpus.


# %%
def contexts_of(corpus: str, ids) -> list[str]:
    return [text[(corpus, i)] for i in ids]


def keyed(frame: pd.DataFrame) -> list[tuple]:
    return list(zip(frame["corpus"], frame["prompt_id"], strict=True))


rows = []
started = time.perf_counter()
retrieved = {key: list(ids) for key, ids in zip(keyed(prompts), prompts["context_ids"],
                                                strict=True)}  # fmt: skip
for group in ([sweep_corpus], [c for c in corpora if c != sweep_corpus]):
    if not group:
        continue
    asked = prompts[prompts["corpus"].isin(group)]
    defenses = noise_defenses(pad_settings, static_sigma, sweep=group == [sweep_corpus], **sweeps)
    texts = [
        rag_prompt(q, contexts_of(c, ids))
        for c, q, ids in zip(asked["corpus"], asked["question"], asked["context_ids"], strict=True)
    ]
    generated = defended_generate(
        model, tokenizer, texts, keyed(asked),
        {name: noise for name, (_, _, noise) in defenses.items()},
        seed=seed, max_batch_streams=decoding["max_batch_streams"],
        cache=store.cache("noise", *group), **run,
    )  # fmt: skip
    for row in generated:
        family, value, _ = defenses[row["defense"]]
        corpus, prompt_id = row.pop("key")
        rows.append({"corpus": corpus, "prompt_id": prompt_id, "family": family, "value": value,
                     "retrieved_ids": retrieved[(corpus, prompt_id)],
                     "context_ids": retrieved[(corpus, prompt_id)], **row})  # fmt: skip
timings["noise defenses"] = time.perf_counter() - started
print(f"{len(rows)} responses in {timings['noise defenses']:.0f} s")

# %% [markdown]
# ## Summ.: each retrieved document condensed to the query first (every corpus in one decode)
# A document whose condensation is empty or NO_OUTPUT is dropped from the prompt.

# %%
started = time.perf_counter()
columns = zip(prompts["corpus"], prompts["prompt_id"], prompts["question"],
              prompts["context_ids"], strict=True)  # fmt: skip
pairs = [(k, p, q, c) for k, p, q, ids in columns for c in ids]
condensed = defended_generate(
    model, tokenizer, [summary_prompt(q, text[(k, c)], summary["style"]) for k, _, q, c in pairs],
    [(k, p, c) for k, p, _, c in pairs], {"summary": None},
    temperature=decoding["temperature"], max_new_tokens=summary["max_new_tokens"],
    min_new_tokens=decoding["min_new_tokens"], forward_mode=decoding["forward_mode"],
    seed=seed, max_batch_streams=decoding["max_batch_streams"], template=template,
    cache=store.cache("summaries"),
)  # fmt: skip
kept_summaries = {key: [] for key in keyed(prompts)}  # (chunk id, condensed text), in order
for (corpus, prompt_id, _, chunk), row in zip(pairs, condensed, strict=True):
    if (context := condensed_context(row["text"])) is not None:
        kept_summaries[(corpus, prompt_id)].append((chunk, context))
answers = pd.Series([row["text"].strip() for row in condensed], dtype=str)
no_output, opens = (
    int((answers == "NO_OUTPUT").sum()),
    int(answers.str.startswith("NO_OUTPUT").sum()),
)
passed_on = sum(map(len, kept_summaries.values()))
print(f"{len(answers)} condensations: {no_output} answered NO_OUTPUT, {opens} start with it, "
      f"{int((answers == '').sum())} empty; {passed_on} passed on")  # fmt: skip
summary_prompts = {
    key: rag_prompt(question, [context for _, context in kept_summaries[key]])
    for key, question in zip(keyed(prompts), prompts["question"], strict=True)
}
generated = defended_generate(
    model, tokenizer, list(summary_prompts.values()), list(summary_prompts), {"summ": None},
    seed=seed, max_batch_streams=decoding["max_batch_streams"], cache=store.cache("summ"), **run,
)  # fmt: skip
for r in generated:
    corpus, prompt_id = r.pop("key")
    rows.append({"corpus": corpus, "prompt_id": prompt_id, "family": "table",
                 "value": float("nan"), "retrieved_ids": retrieved[(corpus, prompt_id)],
                 "context_ids": [c for c, _ in kept_summaries[(corpus, prompt_id)]],
                 **r})  # fmt: skip
timings["summ"] = time.perf_counter() - started

# %% [markdown]
# ## Dist.: only the retrieved contexts within the L2 threshold (every corpus in one decode)

# %%
started = time.perf_counter()
dist_prompts, dist_kept = {}, {}
for r in prompts.itertuples():
    thresholds = distance["sweep"] if r.corpus == sweep_corpus else [distance["table"]]
    l2 = dict(zip(r.candidate_ids, r.candidate_l2, strict=True))
    for threshold in thresholds:
        kept = distance_filtered(list(r.context_ids), l2, threshold)
        dist_kept[(r.corpus, r.prompt_id, threshold)] = kept
        dist_prompts[(r.corpus, r.prompt_id, threshold)] = rag_prompt(
            r.question, contexts_of(r.corpus, kept)
        )
generated = defended_generate(
    model, tokenizer, list(dist_prompts.values()), list(dist_prompts), {"dist": None}, seed=seed,
    max_batch_streams=decoding["max_batch_streams"], cache=store.cache("dist"), **run,
)  # fmt: skip
for r in generated:
    corpus, prompt_id, threshold = r.pop("key")
    family = "table" if threshold == distance["table"] else "distance"
    name = "dist" if family == "table" else f"dist={threshold:g}"
    rows.append({"corpus": corpus, "prompt_id": prompt_id, "family": family, "value": threshold,
                 "retrieved_ids": retrieved[(corpus, prompt_id)],
                 "context_ids": dist_kept[(corpus, prompt_id, threshold)], **r,
                 "defense": name})  # fmt: skip
    if family == "table" and corpus == sweep_corpus:  # the table point is also a sweep point
        rows.append({**rows[-1], "family": "distance", "defense": f"dist={threshold:g}"})
timings["dist"] = time.perf_counter() - started
responses = pd.DataFrame(rows).sort_values(["corpus", "prompt_id", "defense"], kind="stable")
responses.groupby(["corpus", "family"]).size()

# %% [markdown]
# ## Exact probability of emitting each planted secret, per T1 defense

# %%
started = time.perf_counter()
esp_rows = []
for corpus in corpora:
    table = noise_defenses(pad_settings, static_sigma, sweep=False)
    defenses = {k: v[2] for k, v in table.items() if v[0] == "table"}
    asked = prompts[prompts["corpus"] == corpus].head(esp["prompts"])
    planted = secrets[secrets["corpus"] == corpus]
    if planted.empty:  # a corpus without planted ground truth (hf:, file:) has no secret to score
        continue
    for r in asked.itertuples():
        exposed = [
            s
            for c in r.context_ids
            for s in planted[planted["chunk_id"] == c].sort_values("start").itertuples()
        ]
        exposed = exposed[: esp["max_secrets"]]  # fmt: skip
        if not exposed:
            continue
        cues = [" ".join(text[(corpus, s.chunk_id)][: s.start].split()[-esp["cue_words"]:])
                for s in exposed]  # fmt: skip
        values = [s.text for s in exposed]
        common = dict(temperature=decoding["temperature"], draws=esp["draws"], seed=seed,
                      template=template)  # fmt: skip
        threshold = distance["table"]
        by_prompt = [
            (rag_prompt(r.question, contexts_of(corpus, r.context_ids)), defenses),
            (summary_prompts[(corpus, r.prompt_id)], {"summ": None}),
            (dist_prompts[(corpus, r.prompt_id, threshold)], {"dist": None}),
        ]
        for prompt, chosen in by_prompt:
            scores = secret_logprobs(model, tokenizer, prompt, cues, values, chosen,
                                     key=(corpus, r.prompt_id), **common)  # fmt: skip
            for name, logprobs in scores.items():
                for s, logprob in zip(exposed, logprobs, strict=True):
                    esp_rows.append({"corpus": corpus, "prompt_id": r.prompt_id,
                                     "chunk_id": s.chunk_id, "kind": s.kind, "secret": s.text,
                                     "defense": name, "logprob": logprob})  # fmt: skip
timings["esp"] = time.perf_counter() - started
esp_table = pd.DataFrame(esp_rows, columns=["corpus", "prompt_id", "chunk_id", "kind", "secret",
                                             "defense", "logprob"])  # fmt: skip
print(store.summary())
esp_table.groupby(["corpus", "defense"])["logprob"].median()

# %%
require(
    bool(responses["clean_logprobs"].map(lambda v: all(x == x for x in v)).all()),
    "a response has a non-finite log-prob",
)
responses.to_parquet(OUT / "responses.parquet", index=False)
esp_table.to_parquet(OUT / "esp.parquet", index=False)
(OUT / "pad_settings.json").write_text(json.dumps(dataclasses.asdict(pad_settings), indent=1))
setup = {"lm": lm, "lm_dtype": lm_dtype or dtype, "template": template,
         "summary_style": summary["style"], "distance_table": distance["table"],
         "static_sigma": static_sigma}  # fmt: skip
(OUT / "setup.json").write_text(json.dumps(setup) + "\n")
pd.Series(timings, name="seconds").round(1)  # in the executed report only: outputs stay byte-stable
