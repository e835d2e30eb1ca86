"""The frontier's task on S4's store (docs/design.md §12): the units, each point's contexts and
law, and each point's nominal ε.

A unit is one Fig. 6 question of s4_retrieve with its first `top_contexts` of S4's exact top
`rag_k` documents. Its utility
prompt asks the question (the answer opened by S4's public prefix); its attack prompt puts the
extraction command to the same contexts. Every defense reads those contexts: Dist. drops the ones
beyond its threshold, Summ. condenses each to the prompt's query, redaction masks the store
before retrieval (the retrieved ids are kept: the policy edits documents, not the index), DP-ICL
votes with one stream per context, and the others decode the RAG prompt (S4's non-private RAG
prompt, documents in the system message).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from privleak.accounting import per_step_epsilon
from privleak.dp_rag import DPICLSettings
from privleak.errors import require
from privleak.frontier.laws import Aggregated, Law, Mixed, Noisy, Plain, noise_steps
from privleak.frontier.points import Point
from privleak.pad import Noise, PADSettings, StaticNoise, response_budget
from privleak.retrieval import cosine_scores, embed


def pick_units(questions: pd.DataFrame, per_bucket: int | None) -> pd.DataFrame:
    """The first `per_bucket` Fig. 6 questions of each frequency bucket (all when None), in
    s4_retrieve's order."""
    fig6 = questions[questions["fig6"]]
    require(len(fig6) >= 1, "frontier: s4_retrieve asked no Fig. 6 question")
    if per_bucket is None:
        return fig6.reset_index(drop=True)
    return fig6.groupby("bucket", sort=False).head(per_bucket).reset_index(drop=True)


def l2_distances(scores: np.ndarray) -> np.ndarray:
    """L2 distances between unit-norm embeddings from their cosine scores: sqrt(2 - 2 s)."""
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(scores, dtype=float), 0.0, None))


def distinct_units(contexts: Mapping[str, list], questions: Mapping[str, str]) -> dict[str, list]:
    """The units with a (question, contexts) pair no earlier unit has: two patients of one disease
    can share the question and its top contexts, and would be one unit counted twice."""
    seen, out = set(), {}
    for unit, ids in contexts.items():
        key = (questions[unit], tuple(ids))
        if key not in seen:
            seen.add(key)
            out[unit] = ids
    return out


def attack_query(question: str, command: str) -> str:
    """The attack prompt: the question's information, then the extraction command (S2's
    targeted attack: "{information} + {command}"), so that it reaches the question's contexts."""
    return f"{question} {command}"


def query_distances(embedder, queries: Mapping[str, str], contexts: Mapping[str, list],
                    texts: Mapping[str, str]) -> dict[str, dict[str, float]]:  # fmt: skip
    """{unit: {context id: L2 distance}} between each unit's query and its contexts, as Dist.
    filters the contexts of the prompt it receives (the embedder's normalised vectors)."""
    out = {}
    for unit, query in queries.items():
        ids = contexts[unit]
        vectors = embed(embedder, [query] + [texts[i] for i in ids], batch_size=64)
        scores = cosine_scores(vectors[:1], vectors[1:])[0]
        out[unit] = dict(zip(ids, l2_distances(scores).tolist(), strict=True))
    return out


def keyword_list(records: Sequence[Mapping], extra: Sequence[str]) -> list[str]:
    """S3's keyword policy lists the sensitive words themselves: the store's patient names (the
    records' `patient` field, which the data owner holds), then `extra`, each once."""
    names = [str(r.get("patient") or "").strip() for r in records]
    return list(dict.fromkeys([n for n in names if n] + list(extra)))


def fitted_target(tokenizer, cue: str, secret: str, max_new_tokens: int) -> tuple[list, list]:
    """(cue ids, secret ids) of one secret, the cue cut from the front so that both fit in a
    response of max_new_tokens tokens (a longer event is one the decoder cannot emit). After a
    cue the secret takes its leading space; with an empty cue it opens the response."""
    cue_ids = tokenizer(cue, add_special_tokens=False)["input_ids"] if cue else []
    secret_ids = tokenizer((" " if cue else "") + secret, add_special_tokens=False)["input_ids"]
    require(
        len(secret_ids) <= max_new_tokens,
        f"frontier.<profile>.attack.max_new_tokens = {max_new_tokens}: the secret {secret!r} "
        f"takes {len(secret_ids)} tokens; raise it so that a response can emit it",
    )
    room = max_new_tokens - len(secret_ids)
    return cue_ids[max(0, len(cue_ids) - room) :], secret_ids


def central(low: float, high: float) -> float:
    """ln of the midpoint, in probability, of bounds (low, high) on a log-probability."""
    if low == high:
        return low
    return float(np.logaddexp(low, high) - np.log(2.0))


def without_spans(text: str, spans: Sequence[str]) -> str:
    """text with every occurrence of each span removed (the classifier policy's public text)."""
    for span in sorted(spans, key=len, reverse=True):
        text = text.replace(span, "")
    return text


def variant(point: Point) -> str:
    """The context variant a point's prompt reads: "rag" (the retrieved contexts as they are)
    or the point's own ("dist=0.9", "summ", "redact_keyword", "redact_classifier=0.5")."""
    if point.defense in ("dist", "summ", "redact_keyword", "redact_classifier"):
        return point.name
    return "rag"


def noise_of(point: Point, pad: PADSettings) -> Noise | None:
    """Static's or PAD's noise at the point (PAD: `pad` with ε_base the point's value)."""
    if point.defense == "static":
        return StaticNoise(point.value)
    if point.defense == "pad":
        return PADSettings(**{**pad.__dict__, "epsilon": point.value})
    return None


def dp_icl_setting(point: Point, dp_icl: Mapping, delta: float, tokens: int,
                   sensitivity: int) -> DPICLSettings:  # fmt: skip
    """DP-ICL at the point's response ε, split over `tokens` token draws (every response charged
    its budget of new tokens) by dp_accounting composition at delta; `sensitivity` in units of C
    (`privleak.dp_rag.token_sensitivity`: 2 for a fixed number of retrieved contexts)."""
    token = per_step_epsilon(point.value, delta, tokens)
    return DPICLSettings(token, dp_icl["alpha"], dp_icl["clip"], dp_icl["theta"], sensitivity)


def law_of(point: Point, pad: PADSettings, setting: Callable[[Point], DPICLSettings],
           documents: Sequence[str]) -> Law:  # fmt: skip
    """The point's token law (`privleak.frontier.laws`); documents: the DP-ICL stream names."""
    if point.defense in ("static", "pad"):
        return Noisy("rag", noise_of(point, pad))
    if point.defense == "cid":
        return Mixed(point.value)
    if point.defense == "bounded_cid":
        return Mixed(1.0, point.value)
    if point.defense == "dp_icl":
        return Aggregated(setting(point), tuple(documents))
    return Plain(variant(point))


def neighbour(contexts: Sequence[str], holder: str, after: str | None) -> list[str]:
    """The contexts the store without `holder` retrieves: the others, then `after`, the
    next-ranked document, which takes its place in a fixed number of contexts (none when the
    ranking held no further document: the removal alone)."""
    return [c for c in contexts if c != holder] + ([after] if after is not None else [])


def left_out(law: Law, holder: str, after: str | None = None) -> Law | None:
    """The law on the neighbouring store without the secret's holder document (`neighbour`):
    the same law once the caller reads that store's RAG prompt (`loo:<holder>`) as "rag",
    DP-ICL with `after`'s vote in the holder's place; None for a law on a variant prompt
    (Dist., Summ., redaction), whose neighbour this measurement does not rebuild."""
    if isinstance(law, Aggregated):
        kept = tuple(neighbour(law.documents, holder, after))
        return Aggregated(law.setting, kept) if kept else None
    if isinstance(law, Mixed) or law.stream == "rag":
        return law
    return None


def event_bound(
    point: Point,
    law: Law,
    rows: tuple[Mapping, Mapping],
    cue_length: int,
    tokens: int,
    accounting: Mapping,
) -> tuple[float, float]:
    """(ε, δ) the point states for one secret's event (its `tokens` tokens after its cue), on the
    rows of the store with and without the secret's document: bounded CID's and DP-ICL's
    per-token pure ε times the tokens; PAD's accountant over the secret's own steps (every step
    charged, α and δ from `accounting`), the larger of its accounts on the two stores, as PAD
    would report either; (NaN, NaN) for a defense that states none."""
    if point.defense == "bounded_cid":
        return point.value * tokens, 0.0
    if point.defense == "dp_icl":
        return law.setting.epsilon * tokens, 0.0
    if point.defense == "pad":
        spent = []
        for own in rows:
            sigma, delta, protected = (t.cpu().numpy() for t in noise_steps(law, own, cue_length))
            spent.append(response_budget(sigma, delta, protected, accounting["alpha"],
                                         accounting["delta"]).epsilon_all_steps)  # fmt: skip
        return max(spent), accounting["delta"]
    return math.nan, math.nan


def nominal_epsilon(point: Point, tokens: int, pad_epsilon: float | None = None) -> float:
    """The ε a point states per response: bounded CID's per-token ε × `tokens` (pure
    composition), DP-ICL's response ε, PAD's accountant (`pad_epsilon`, the largest over its
    responses); NaN for a defense without a guarantee."""
    if point.defense == "bounded_cid":
        return point.value * tokens
    if point.defense == "dp_icl":
        return point.value
    if point.defense == "pad":
        return math.nan if pad_epsilon is None else pad_epsilon
    return math.nan
