"""Controls of a membership-inference benchmark whose ground truth is known: would the member
signal show without the target's weights?

Three controls, each a score table in `privleak.mia.table`'s long form {model, run, text_id,
attack, score}, higher = more likely a member, judged by the same `metric_table` (AUC and TPR
with intervals that resample texts and runs):

- `reference_as_target`: each offline-LiRA reference model attacked as if it were the target.
  The references train on another draw of the corpus and never see a member or a non-member, so
  every reference-free attack (LOSS, zlib, Min-K%, Min-K%++) should sit at AUC 0.5; the
  references play the training runs.
- `blind`: classifiers that see only the texts, in the spirit of Das et al. 2024 ("Blind
  baselines beat membership inference attacks for foundation models", whose bag-of-words attacks
  tune a small vocabulary and tree ensembles or naive Bayes): word counts with logistic
  regression and with multinomial naive Bayes, each text scored by the fold that did not train on
  it (stratified k-fold over the same members and non-members). Near 0.5 when members and
  non-members come from one distribution.
- `tokenizer`: every model shares the family's BPE tokenizer, trained on a corpus with the
  members planted in it, so members may tokenize into fewer, longer pieces. `chars_per_token`
  scores a text by its characters per token alone (the tokenizer as the attack); `by_kind`
  gives members' and non-members' characters per token per sequence kind; `loss_within_kind`
  re-measures the target's member signal on one kind's texts alone (where the kinds tokenize
  alike, tokenization cannot carry it), and `loss_per_char` with the text's summed log-prob over
  its characters instead of its mean over tokens (the token count drops out of the score).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB

from privleak.claims.stats import NAN, mean_contrast, two_samples
from privleak.mia import attacks
from privleak.mia.table import KEYS, score_table

REFERENCE_FREE = ("loss", "zlib", "min_k", "min_k_plus_plus")
BLIND, TOKENIZER = "texts only", "tokenizer only"
BLIND_FOLDS = 5  # scikit-learn's default k-fold


def reference_as_target(stats: pd.DataFrame, texts: pd.DataFrame, k: float) -> pd.DataFrame:
    """The reference-free attacks' scores of every text under each reference model, as if it
    were the target: model "<size> reference", run = the reference's index. Empty without
    reference models."""
    references = stats[stats["role"] == "reference"]
    if references.empty:
        return pd.DataFrame(columns=[*KEYS, "attack", "score", "kind", "duplicates", "is_member"])
    relabelled = references.assign(role="target", model=references["model"] + " reference")
    table = score_table(relabelled, texts, k=k, reference=None)
    return table[table["attack"].isin(REFERENCE_FREE)].reset_index(drop=True)


def _classifiers() -> dict[str, object]:
    return {"bag_of_words_logistic": LogisticRegression(max_iter=1000),
            "bag_of_words_naive_bayes": MultinomialNB()}  # fmt: skip


def blind_scores(texts: pd.DataFrame, seed: int, folds: int = BLIND_FOLDS) -> pd.DataFrame:
    """Each text's P(member) under word-count classifiers trained on the other folds (stratified
    k-fold, shuffled with `seed`; `folds` at most, fewer where there are fewer members or
    non-members): logistic regression and multinomial naive Bayes, an attack each (model BLIND,
    run 0). A fold's scores become mid-percentile ranks within the fold ((rank - 0.5) / n, ties
    averaged), so folds that trained on fewer members do not score lower as a whole and a fold
    that learned nothing scores every text 0.5.
    Empty with fewer than 2 members or 2 non-members."""
    labels = texts["is_member"].astype(bool).to_numpy()
    smaller = int(min(labels.sum(), (~labels).sum()))
    if smaller < 2:
        return pd.DataFrame(columns=[*KEYS, "attack", "score", "kind", "duplicates", "is_member"])
    words = CountVectorizer().fit_transform(texts["text"])
    split = StratifiedKFold(n_splits=min(folds, smaller), shuffle=True, random_state=seed)
    parts = []
    for attack, classifier in _classifiers().items():
        scores = np.empty(len(labels))
        for train, test in split.split(words, labels):
            fitted = classifier.fit(words[train], labels[train])
            ranks = rankdata(fitted.predict_proba(words[test])[:, 1])
            scores[test] = (ranks - 0.5) / len(test)
        parts.append(_rows(texts, BLIND, attack, scores))
    return pd.concat(parts, ignore_index=True)


def token_counts(stats: pd.DataFrame) -> pd.Series:
    """{text_id: scored tokens} under the shared tokenizer (one target model's pass)."""
    targets = stats[stats["role"] == "target"]
    first = targets.iloc[0]
    one = targets[(targets["model"] == first["model"]) & (targets["run"] == first["run"])]
    return pd.Series([len(v) for v in one["logprob"]], index=one["text_id"].to_numpy())


def chars_per_token(stats: pd.DataFrame, texts: pd.DataFrame) -> pd.Series:
    """{text_id: characters per scored token}, in the order of `texts`."""
    tokens = token_counts(stats).reindex(texts["text_id"]).to_numpy(float)
    return pd.Series(texts["text"].str.len().to_numpy(float) / tokens, index=texts["text_id"])


def tokenizer_scores(stats: pd.DataFrame, texts: pd.DataFrame) -> pd.DataFrame:
    """The tokenizer as the attack: each text scored by its characters per token (model
    TOKENIZER, run 0, attack "chars_per_token")."""
    return _rows(texts, TOKENIZER, "chars_per_token", chars_per_token(stats, texts).to_numpy())


def loss_per_char(stats: pd.DataFrame, texts: pd.DataFrame) -> pd.DataFrame:
    """Every target model's summed log-prob of each text over its characters (attack
    "loss_per_char"): LOSS without the number of tokens."""
    targets = stats[stats["role"] == "target"]
    length = texts.set_index("text_id")["text"].str.len()
    pairs = zip(targets["logprob"], targets["text_id"], strict=True)
    scores = [float(np.sum(v)) / length[t] for v, t in pairs]
    table = targets[KEYS].assign(attack="loss_per_char", score=scores)
    return table.merge(texts[["text_id", "kind", "duplicates", "is_member"]], on="text_id")


def loss_within_kind(
    stats: pd.DataFrame, texts: pd.DataFrame, kind: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every target's LOSS score of the texts of one sequence kind (attack "loss_<kind>"), and
    those texts: the member signal where members and non-members tokenize alike."""
    own = texts[texts["kind"] == kind]
    targets = stats[(stats["role"] == "target") & stats["text_id"].isin(own["text_id"])]
    scores = [attacks.loss(v) for v in targets["logprob"]]
    table = targets[KEYS].assign(attack=f"loss_{kind}", score=scores)
    return table.merge(own[["text_id", "kind", "duplicates", "is_member"]], on="text_id"), own


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def by_kind(stats: pd.DataFrame, texts: pd.DataFrame, boot) -> dict[str, dict]:
    """Per sequence kind: members' and non-members' mean characters per token and the difference
    (members minus non-members) with its interval over texts, each sample resampled within
    itself; `boot` is `claims.stats.bootstrap` with its settings bound (`registry.bootstrapper`).
    None where a number does not exist (a kind without members or non-members, no interval)."""
    ratio = chars_per_token(stats, texts).to_numpy()
    out = {}
    for kind, rows in texts.reset_index(drop=True).groupby("kind", sort=True):
        member = rows["is_member"].astype(bool).to_numpy()
        values = ratio[rows.index]
        estimate = None
        if member.any() and (~member).any():
            contrast, strata = two_samples(values[member], values[~member])
            estimate = boot(contrast, mean_contrast, strata=strata)
        found = (estimate.effect, estimate.low, estimate.high) if estimate else (NAN,) * 3
        means = [values[m].mean() if m.any() else NAN for m in (member, ~member)]
        out[kind] = {
            **dict(zip(("members", "non_members", "difference", "low", "high"),
                       map(_finite, [*means, *found]), strict=True)),
            "texts": int(len(rows)),
        }  # fmt: skip
    return out


def _rows(texts: pd.DataFrame, model: str, attack: str, scores: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({
        "model": model, "run": 0, "text_id": texts["text_id"].to_numpy(), "attack": attack,
        "score": np.asarray(scores, float), "kind": texts["kind"].to_numpy(),
        "duplicates": texts["duplicates"].to_numpy(), "is_member": texts["is_member"].to_numpy(),
    })  # fmt: skip
