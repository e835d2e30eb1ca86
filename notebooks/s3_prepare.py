# %% [markdown]
# # S3 — domain privacy: dialogs, split, attack prompts, the two policies, redacted train sets
# The pooled corpus D holds task-oriented dialogs {text, domain}, one "USER: ..." or
# "AGENT: ..." line per turn. Each domain's dialogs are shuffled (seeded) and `test_share` of
# them held out: the test set gives every model's held-out perplexity, and the first
# `attack.prompts` test dialogs of the prompted domain `domain` give the attack prompts, each the
# dialog's first `attack.context_turns` lines (the model continues with the next turn).
#
# Two policy functions F_d mark the words of a text that are sensitive for domain d:
# - keyword: the words of d's hand-crafted keywords (`keywords`; null = the synthetic dialog
#   generator's list of each private domain, multidogo = lists for the real MultiDoGo domains);
# - classifier (`classifier.kind: sequence`, the paper's kind): a sequence classifier fine-tuned
#   from `classifier.model` (the official code fine-tunes roberta-base; the embedded profile the
#   family's pretrained LM, a stand-in) on `classifier.window`-word windows of the train dialogs,
#   each labelled with its dialog's domain, and of the dialogs of `classifier.public` (domains
#   that are not private; null: none), labelled "none"; a word is flagged for d when a window
#   containing it reads as d with probability above `classifier.threshold` (official: 16-word
#   windows, 0.96). The public class takes the greetings, names and phrasing every
#   customer-service dialog shares, so they stop reading as some private domain.
#   `kind: embedding_logistic` is a cheaper stand-in: a logistic regression on sentence
#   embeddings (`models.embedder`) of the same windows.
#
# Each policy gives a redacted copy of the train set: every dialog of a private domain has the
# words its own domain's policy flags masked (public domains, if D has any, stay as they are).
# Speaker labels are never masked (see `LabelsKept`).

# %% tags=["parameters"]
seed = 0
embedder = "all-minilm-l6-v2"
device = "cpu"
corpus = {
    "source": "synthetic:dialogs",
    "n": 60,
    "options": {"domains": ["AIRLINE", "MEDIA", "INSURANCE"], "turns": [3, 5]},
}
test_share = 0.25
domain = "AIRLINE"
private_domains = ["AIRLINE", "MEDIA", "INSURANCE"]
keywords = None
classifier = {
    "kind": "sequence",
    "model": "data/family/h32",
    "fine_tune": {"epochs": 1, "batch_size": 32, "learning_rate": 1e-3, "max_windows": 500},
    "window": 16,
    "stride": 1,
    "threshold": 0.96,
    "batch_size": 256,
    "public": {
        "source": "synthetic:dialogs",
        "n": 30,
        "options": {"domains": ["FASTFOOD", "FINANCE", "SOFTWARE"], "turns": [3, 5]},
    },
}
prompts = 5
context_turns = 2

# %%
import json

import numpy as np
import pandas as pd

from privleak.classifier_policies import ClassifierPolicy, SequenceClassifierPolicy, sentence_embed
from privleak.data import loaders
from privleak.data.dialogs import DOMAIN_KEYWORDS
from privleak.data.multidogo_keywords import MULTIDOGO_KEYWORDS
from privleak.data.records import first_gap, gap_message, read_jsonl, take
from privleak.errors import PrivleakError, require
from privleak.models import load_embedder
from privleak.pipeline import paths
from privleak.pipeline.params import profile_key
from privleak.policies import KeywordPolicy, LabelsKept, redact_own_domains
from privleak.policy_quality import policy_quality_table, turn_flags

OUT = paths.INTERIM / "s3" / "prepare"
OUT.mkdir(parents=True, exist_ok=True)
FIELDS = ("text", "domain")
QUALITY_BOOT = 1000  # bootstrap resamples of the policies' precision and recall
POLICIES = ("keyword", "classifier")


def read_dialogs(slot: str, spec: dict, key: str, slot_seed: int) -> tuple[list[dict], str]:
    """The records of a dialog corpus (`spec`, the params at `key`) and how errors name it; one
    line naming the first record without a text or domain."""
    records = read_jsonl(loaders.materialize(slot, spec, OUT, slot_seed))
    where = f"s3 {key} (source '{spec['source']}')"
    gap = first_gap(records, FIELDS)
    if gap is not None:
        raise PrivleakError(
            gap_message(where, records, gap, FIELDS)
            + f" (map columns with {profile_key(f's3.{key}.fields')})"
        )
    return records, where


# %% [markdown]
# ## The corpus and its split

# %%
records, where = read_dialogs("dialogs", corpus, "corpus", seed)
dialogs = pd.DataFrame(
    {
        "id": [str(r.get("id", i)) for i, r in enumerate(records)],
        "domain": [str(r["domain"]) for r in records],
        "text": [str(r["text"]) for r in records],
    }
)
repeated = dialogs["id"][dialogs["id"].duplicated()].tolist()
require(not repeated, f"{where}: dialog ids repeat (first: {repeated[:1]})")
held = sorted(set(dialogs["domain"]))
for name in dict.fromkeys([domain, *private_domains]):
    require(
        name in held,
        f"{where} has no {name} dialogs, which {profile_key('s3.domain')} or "
        f"{profile_key('s3.private_domains')} names; its domains: {', '.join(held)}",
    )

rng = np.random.default_rng(seed)
split = pd.Series("train", index=dialogs.index)
order = []  # test dialogs in their shuffled order (the prompts are the first of `domain`'s)
for name in held:
    members = dialogs.index[dialogs["domain"] == name].to_numpy()
    shuffled = members[rng.permutation(len(members))]
    n_test = round(test_share * len(members))
    require(
        1 <= n_test < len(members),
        f"params {profile_key('s3.test_share')} = {test_share} holds out {n_test} of the "
        f"{len(members)} {name} dialogs; each domain needs >= 1 train and >= 1 test dialog "
        "(raise corpus.n)",
    )
    split[shuffled[:n_test]] = "test"
    order += shuffled[:n_test].tolist()
train_set = dialogs[split == "train"].reset_index(drop=True)
test_set = dialogs.loc[order].reset_index(drop=True)
print(f"{len(dialogs)} dialogs: {len(train_set)} train, {len(test_set)} test")
pd.crosstab(dialogs["domain"], split)

# %% [markdown]
# ## Attack prompts: the first turns of the prompted domain's test dialogs

# %%
attacked = take(
    test_set[test_set["domain"] == domain].to_dict("records"),
    prompts,
    key="s3.attack.prompts",
    corpus=f"the {domain} test dialogs of s3",
)
prompt_rows = []
for dialog in attacked:
    lines = dialog["text"].split("\n")
    require(
        len(lines) > context_turns,
        f"params {profile_key('s3.attack.context_turns')} = {context_turns}: {domain} dialog "
        f"{dialog['id']!r} has only {len(lines)} lines, so no turn is left to generate",
    )
    prompt_rows.append(
        {
            "prompt_id": dialog["id"],
            "domain": domain,
            # The trailing newline ends the last context turn: the model starts the next one.
            "prompt": "\n".join(lines[:context_turns]) + "\n",
            "reference": "\n".join(lines[context_turns:]),
        }
    )
prompt_table = pd.DataFrame(prompt_rows)
prompt_table.head()

# %% [markdown]
# ## Redacting with a policy
# The classifier reads the speaker label of a line ("USER", "AGENT") as the domain of the words
# around it, since a window holding the label holds them too. The label is the dialog format,
# not domain text: masking it would erase the turn structure every target learns, and the prompts
# end where a label starts the next turn. So only the utterance after a label is ever masked.

# %%
FIX = {
    "keyword": f"shorten its list in {profile_key('s3.keywords')}",
    "classifier": f"raise {profile_key('s3.classifier.threshold')}",
}
dialog_ids = dict(zip(train_set["text"], train_set["id"], strict=True))
redaction_rows = []


def redact_train(name: str, policy) -> None:
    """Add column redacted_<name>: train dialogs of private domains masked by their own F_d."""
    kept = LabelsKept(policy, name, FIX[name], dialog_ids)
    redacted, masked_share = redact_own_domains(
        train_set.to_dict("records"), kept, domains=private_domains
    )
    train_set[f"redacted_{name}"] = [r["text"] for r in redacted]
    for d, counts in kept.counts.items():
        share = counts["words_masked"] / max(counts["words"], 1)
        redaction_rows.append({"policy": name, "domain": d, **counts, "share_masked": share})
    print(f"{name}: {masked_share:.1%} of all train words masked")


# %% [markdown]
# ## The keyword policy

# %%
BUILT_IN = {None: DOMAIN_KEYWORDS, "multidogo": MULTIDOGO_KEYWORDS}
keyword_lists = (
    keywords
    if isinstance(keywords, dict)
    else {d: list(BUILT_IN[keywords][d]) for d in private_domains}
)
keyword_policy = KeywordPolicy(keyword_lists)
redact_train("keyword", keyword_policy)

# %% [markdown]
# ## The classifier policy
# Public dialogs come from their own stream (seed + 1), so no customer of D recurs in them.

# %%
public_texts = []
if classifier["public"] is not None:
    public, where_public = read_dialogs(
        "public_dialogs", classifier["public"], "classifier.public", seed + 1
    )
    private_held = sorted({str(r["domain"]) for r in public} & set(private_domains))
    require(
        not private_held,
        f"{where_public} has {', '.join(private_held)} dialogs, but "
        f"{profile_key('s3.private_domains')} makes them private; the public class takes "
        "dialogs of other domains only",
    )
    public_texts = [str(r["text"]) for r in public]
windows = {key: classifier[key] for key in ("window", "stride", "threshold")}
if classifier["kind"] == "sequence":
    classifier_policy = SequenceClassifierPolicy.fit(
        train_set["text"].tolist(),
        train_set["domain"].tolist(),
        classifier["model"],
        public=public_texts,
        **windows,
        **classifier["fine_tune"],
        seed=seed,
        device=device,
    )
    print(f"fine-tune loss per epoch: {classifier_policy.losses}")
else:
    embed = sentence_embed(
        load_embedder(embedder, device=device), batch_size=classifier["batch_size"]
    )
    classifier_policy = ClassifierPolicy.fit(
        train_set["text"].tolist(), train_set["domain"].tolist(), embed, public=public_texts,
        **windows,
    )  # fmt: skip
print(f"classifier over {', '.join(classifier_policy.classes)}; {len(public_texts)} public dialogs")
redact_train("classifier", classifier_policy)
policies = {"keyword": keyword_policy, "classifier": classifier_policy}

# %% [markdown]
# ## What redaction did

# %%
redaction = pd.DataFrame(redaction_rows)
example = train_set[train_set["domain"] == domain].iloc[0]
for column in ("text", *(f"redacted_{name}" for name in policies)):
    print(f"--- {column}\n{example[column]}")
redaction

# %% [markdown]
# ## The policies on the test dialogs
# For each test dialog's domain and each private domain d: the share of dialogs with a word
# flagged for d and the share of words flagged (speaker labels included: this is the leak test's
# view). Off the diagonal it is the policy's false-alarm rate on another domain's text.

# %%
check_rows = []
for name, policy in policies.items():
    flagged = policy.flags_by_domain(test_set["text"].tolist(), private_domains)
    for d, rows in flagged.items():
        for source in held:
            of_source = [
                row for row, s in zip(rows, test_set["domain"], strict=True) if s == source
            ]
            check_rows.append(
                {
                    "policy": name,
                    "dialog_domain": source,
                    "flagged_for": d,
                    "dialogs": len(of_source),
                    "share_flagged": float(np.mean([any(row) for row in of_source])),
                    "share_words": sum(map(sum, of_source)) / max(sum(map(len, of_source)), 1),
                }
            )
policy_check = pd.DataFrame(check_rows)
policy_check.pivot_table(
    index=["policy", "dialog_domain"], columns="flagged_for", values="share_flagged"
).round(3)

# %% [markdown]
# ## The policies as measured instruments: precision and recall per turn
# On the held-out test dialogs, one unit per turn (line), labelled with its dialog's domain: for
# each policy and private domain j, recall = flagged share of the turns of j's dialogs, the
# false-positive rate on domain d = flagged share of d's turns, precision = the share of flagged
# turns that are j's; 95 % intervals resample dialogs within their domain
# (`privleak.policy_quality`). render_s3 corrects the attack's rates with these error rates.

# %%
turn_flag_frames = []
for name, policy in policies.items():
    frame = turn_flags(
        policy, test_set["text"].tolist(), test_set["domain"].tolist(),
        test_set["id"].tolist(), private_domains,
    )  # fmt: skip
    turn_flag_frames.append(frame.assign(policy=name))
turn_flag_table = pd.concat(turn_flag_frames, ignore_index=True)
quality = pd.concat(
    [
        policy_quality_table(rows, n_boot=QUALITY_BOOT, seed=seed, alpha=0.05).assign(policy=name)
        for name, rows in turn_flag_table.groupby("policy", sort=False)
    ],
    ignore_index=True,
)
quality.round(3)

# %% [markdown]
# ## Save

# %%
train_set.to_parquet(OUT / "train.parquet", index=False)
test_set.to_parquet(OUT / "test.parquet", index=False)
prompt_table.to_parquet(OUT / "prompts.parquet", index=False)
redaction.to_parquet(OUT / "redaction.parquet", index=False)
policy_check.to_parquet(OUT / "policy_check.parquet", index=False)
turn_flag_table.to_parquet(OUT / "turn_flags.parquet", index=False)
quality.to_parquet(OUT / "policy_quality.parquet", index=False)
(OUT / "keywords.json").write_text(json.dumps(keyword_lists, indent=1, sort_keys=True) + "\n")
if classifier["kind"] == "sequence":
    official = classifier["model"].endswith("roberta-base")
    classifier_label = (
        f"classifier policy ({classifier['model']} fine-tuned on {classifier['window']}-word "
        f"windows, flags at {classifier['threshold']:g}"
        + ("" if official else "; a stand-in for the official roberta-base")
        + ")"
    )
else:
    classifier_label = (
        f"classifier policy (logistic regression on {embedder} embeddings of "
        f"{classifier['window']}-word windows; a stand-in for a fine-tuned RoBERTa)"
    )
keyword_label = (
    "custom"
    if isinstance(keywords, dict)
    else {None: "the synthetic generator's", "multidogo": "our MultiDoGo (not the official)"}[
        keywords
    ]
)
(OUT / "policies.json").write_text(
    json.dumps({"classifier": classifier_label, "keyword": keyword_label}, indent=1) + "\n"
)
if classifier["kind"] == "sequence":
    classifier_policy.save(OUT / "classifier")
else:
    (OUT / "classifier.json").write_text(
        json.dumps({"embedder": embedder, **classifier_policy.to_dict()}, sort_keys=True) + "\n"
    )
