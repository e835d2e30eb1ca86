"""DP-RAG (Grislain) end to end: a privacy-unit-preserving retrieval, then DP in-context
generation through the shared decoder, for a corpus holding one document per privacy unit.

The mechanisms live in `retrieval` (exact scores, the DP threshold and the documents it keeps),
`dp_icl` (the token mix) and `accounting` (the budget); this module wires them:
- `split_budget`: a response's (epsilon, delta) split into the threshold's epsilon and a per-token
  epsilon, composed with `dp_accounting`;
- `dp_rag_generate`: one public stream (the question, no document) + one stream per retrieved
  document (the official code's layout: the document in the system message, then the question),
  decoded with the DP-ICL mix; each document's head is prefilled once and every question that
  retrieves it forwards only its own turn on top (`dp_icl_decode`);
  `rag_generate`: the ordinary, non-private RAG (every retrieved document in one prompt), the
  epsilon = inf baseline;
- `forced_logprobs` / `dp_icl_forced_logprobs`: the exact per-token log-probability of a forced
  continuation under the plain LM and under the DP-ICL decoder (the planted-fact measurement).

Sensitivity. The paper's token mechanism P(r) ∝ exp(eps * U(r) / (2C)) has sensitivity C when the
retrieved set is every document above the threshold: adding one document adds one clipped term
(`max_retrieve` None, the paper's law). With a cap, an added document can enter the top
`max_retrieve` and push another one out, moving U by up to 2C, so a capped retrieval samples with
sensitivity 2C (`token_sensitivity`): every token is eps-DP whatever the corpus.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from privleak.accounting import check_delta, check_epsilon, composed_epsilon, per_step_epsilon
from privleak.batching import ForwardCounter, pad_rows, position_ids, through_cache
from privleak.decoding import decode, greedy
from privleak.dp_icl import DPICLMix, check_dp_icl, dp_icl_utility
from privleak.dp_icl_decode import (
    HeadStore,
    decode_forked,
    forced_forked,
    prefill_rows,
    shared_head,
)
from privleak.errors import require
from privleak.models import real_logits

CAPPED_SENSITIVITY = 2
"""U's sensitivity in units of C when at most max_retrieve documents are kept (module doc)."""
TEMPLATES = ("chat", "plain")


# ---------------------------------------------------------------- budget


@dataclass(frozen=True)
class Budget:
    """One response's privacy budget: `retrieval_epsilon` for the threshold, `token_epsilon`
    for each of `tokens` generated tokens; together they compose to `composed` <= `epsilon` at
    `delta` (dp_accounting's privacy-loss distributions)."""

    epsilon: float
    delta: float
    retrieval_epsilon: float
    token_epsilon: float
    tokens: int
    composed: float


def split_budget(epsilon: float, delta: float, retrieval_epsilon: float, tokens: int) -> Budget:
    """The largest per-token epsilon that, composed with one retrieval_epsilon threshold and
    `tokens` token draws (every response is charged max_new_tokens), stays within epsilon."""
    check_epsilon(epsilon, "DP-RAG epsilon")
    check_delta(delta, "DP-RAG delta")
    check_epsilon(retrieval_epsilon, "DP-RAG retrieval_epsilon")
    require(
        retrieval_epsilon < epsilon,
        f"DP-RAG retrieval_epsilon ({retrieval_epsilon}) must be < epsilon ({epsilon}), so that "
        "tokens get a share",
    )
    token = per_step_epsilon(epsilon, delta, tokens, fixed=[(retrieval_epsilon, 1)])
    composed = composed_epsilon([(retrieval_epsilon, 1), (token, tokens)], delta)
    return Budget(epsilon, delta, retrieval_epsilon, token, tokens, composed)


# ---------------------------------------------------------------- prompts


def _check_template(template: str) -> None:
    require(template in TEMPLATES, f"DP-RAG template {template!r} is unknown; allowed: chat, plain")


PUBLIC_SYSTEM = "You give a short response based on a predefined set documents."
DOCUMENT_SYSTEM = (
    "You give a short responses based on this document or a predefined set of similar "
    'documents.\nDocument:\n"{document}"'
)
"""The official DP-RAG's system messages (sarus-tech/dp-rag, `DPModel.dp_chat`), verbatim: the
public stream's, and a document stream's with the document in it."""
RAG_SYSTEM = "You give a short response based on these documents.\nDocuments:\n{documents}"
"""The non-private RAG's (ours: the official code has no all-documents prompt)."""


def _quoted(documents: Sequence[str]) -> str:
    return "\n".join(f'"{document}"' for document in documents)


def _system(documents: Sequence[str]) -> str:
    """The system message: the public one, one document's, or the non-private RAG's."""
    if not documents:
        return PUBLIC_SYSTEM
    if len(documents) == 1:
        return DOCUMENT_SYSTEM.format(document=documents[0])
    return RAG_SYSTEM.format(documents=_quoted(documents))


def _plain_body(question: str, documents: Sequence[str]) -> str:
    """A base model's prompt: the document(s) first, as in the chat layout, then the question."""
    if not documents:
        return f"Question: {question}"
    label = "Document" if len(documents) == 1 else "Documents"
    return f"{label}:\n{_quoted(documents)}\n\nQuestion: {question}"


def prompt_text(
    tokenizer, question: str, documents: Sequence[str], template: str, answer_prefix: str = ""
) -> str:
    """The prompt for `documents` (none: the public stream; one: a DP-ICL document stream;
    several: the ordinary RAG prompt) and the question, the document first as the official code
    lays it out: `chat` puts the document in the system message and the question in the user
    turn (the tokenizer's own chat template, the assistant's turn opened), `plain` writes the
    document, then the question, then 'Answer:' for base models. Every stream of a question thus
    ends with the same question turn, and a document's head is the same for every question
    (`dp_icl_decode.HeadStore` prefills it once). A public `answer_prefix` opens the answer
    (every stream sees the same text, so it costs no privacy budget) and the response continues
    it."""
    _check_template(template)
    if template == "plain":
        body = _plain_body(question, documents)
        return f"{body}\nAnswer: {answer_prefix}" if answer_prefix else f"{body}\nAnswer:"
    require(
        getattr(tokenizer, "chat_template", None) is not None,
        "DP-RAG template 'chat' needs a tokenizer with a chat template; this one has none "
        "(use template: plain for a base model)",
    )
    turns = [{"role": "system", "content": _system(documents)},
             {"role": "user", "content": question}]  # fmt: skip
    opened = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    return opened + answer_prefix


def prompt_ids(
    tokenizer, question: str, documents: Sequence[str], template: str, answer_prefix: str = ""
) -> list[int]:
    """`prompt_text` as token ids (a chat template writes its own special tokens)."""
    text = prompt_text(tokenizer, question, documents, template, answer_prefix)
    return list(tokenizer(text, add_special_tokens=template == "plain")["input_ids"])


def stream_prompts(
    tokenizer, question: str, documents: Sequence[str], template: str, answer_prefix: str = ""
) -> list[list[int]]:
    """[1 + k] token lists: the public stream, then one stream per document."""
    return [prompt_ids(tokenizer, question, [], template, answer_prefix)] + [
        prompt_ids(tokenizer, question, [document], template, answer_prefix)
        for document in documents
    ]


def document_start(tokenizer, template: str) -> list[int]:
    """The tokens every document stream begins with, whatever its document and question: the
    tokens of the prompt's text before the document, less the last one (it may merge with the
    document's first characters). A `HeadStore` given them forwards them once for all."""
    marker = "\x00"
    before = prompt_text(tokenizer, "q", [marker], template).split(marker)[0]
    ids = list(tokenizer(before, add_special_tokens=template == "plain")["input_ids"])
    probe = prompt_ids(tokenizer, "q", ["a"], template)
    return probe[: min(shared_head([ids, probe]), len(ids) - 1)]


# ---------------------------------------------------------------- generation


def token_sensitivity(max_retrieve: int | None) -> int:
    """U's sensitivity in units of C for a retrieval that keeps every document above the DP
    threshold (`max_retrieve` None: one added document adds one clipped term, the paper's C) or at
    most `max_retrieve` of them (an added document can push a kept one out: 2C). The choice is
    made per configuration, never per question: whether a cap binds depends on the data, and two
    neighbouring corpora on either side of it would be sampled at different temperatures."""
    return 1 if max_retrieve is None else CAPPED_SENSITIVITY


@dataclass(frozen=True)
class DPICLSettings:
    """The token mechanism: per-token epsilon, l_norm's alpha, clipping C, the public weight
    theta and U's sensitivity in units of C (`token_sensitivity`; 1 is the paper's law)."""

    epsilon: float
    alpha: float = 1.0
    clip: float = 1.0
    theta: float = 1.0
    sensitivity: float = 1

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "DP-ICL epsilon per token")
        check_dp_icl(self.alpha, self.clip, self.theta)
        require(self.sensitivity >= 1, f"sensitivity (x C) must be >= 1, got {self.sensitivity}")

    def mix(self, documents: int) -> DPICLMix:
        return _mix([self], [documents])

    def key(self) -> tuple:
        return (self.epsilon, self.alpha, self.clip, self.theta, self.sensitivity)


@dataclass(frozen=True)
class Ask:
    """One DP-RAG request: a question answered from its retrieved documents under one setting.
    Its draws depend only on (seed, key, setting), never on the other requests of a call. With a
    `forced` target, its row also holds the target's exact per-token log-probs under the
    decoder, read from the same prefill (`dp_icl_forced_logprobs` computes them alone, equal up
    to float rounding)."""

    key: Hashable
    question: str
    documents: tuple[str, ...]
    setting: DPICLSettings
    answer_prefix: str = ""
    forced: tuple[int, ...] = ()  # a target whose exact log-probs the row also reports
    sample: bool = True  # False: only score `forced`, draw no response


def _mix(settings: Sequence[DPICLSettings], documents: Sequence[int]) -> DPICLMix:
    """One DPICLMix for groups with these settings and document counts. exp(eps * U / (2 *
    sensitivity * C)): DPICLMix scales by 2C, so each setting's eps shrinks instead."""
    first = settings[0]
    return DPICLMix(
        list(documents),
        [s.epsilon / s.sensitivity for s in settings],
        first.alpha,
        first.clip,
        [s.theta for s in settings],
    )


def _slot_bins(counts: Sequence[int], waste: float = 0.25) -> list[list[int]]:
    """Indices of groups (most documents first) in bins whose padding to the bin's largest
    document count stays within `waste` of their real streams."""
    order = sorted(range(len(counts)), key=lambda i: -counts[i])
    bins: list[list[int]] = []
    for i in order:
        if bins:
            top = counts[bins[-1][0]] + 1
            real = sum(counts[j] + 1 for j in bins[-1]) + counts[i] + 1
            if top * (len(bins[-1]) + 1) <= (1 + waste) * real:
                bins[-1].append(i)
                continue
        bins.append([i])
    return bins


def _question_rows(
    model, tokenizer, asks, template, options, counter, store, batch_rows
) -> list[dict]:
    """Every ask of one question, decoded from one prefill of its distinct streams (the
    document heads from `store`, the question's turn forwarded on top)."""
    streams = [
        stream_prompts(tokenizer, a.question, a.documents, template, a.answer_prefix) for a in asks
    ]
    distinct = list(dict.fromkeys(tuple(row) for rows in streams for row in rows))
    forked = prefill_rows(model, distinct, tokenizer.pad_token_id, counter, store=store,
                          batch_rows=batch_rows)  # fmt: skip
    index = {row: i for i, row in enumerate(distinct)}
    out: list[dict] = [
        {"documents": len(a.documents), "public_only": not a.documents} for a in asks
    ]
    drawn = [i for i, a in enumerate(asks) if a.sample]
    for packed in _slot_bins([len(asks[i].documents) for i in drawn]):
        members = [drawn[j] for j in packed]
        slots = 1 + len(asks[members[0]].documents)
        public = [index[tuple(streams[i][0])] for i in members]
        rows = [
            [index[tuple(row)] for row in streams[i]] + [p] * (slots - len(streams[i]))
            for i, p in zip(members, public, strict=True)
        ]  # absent slots repeat the public row; the mix does not count them
        decoded = decode_forked(
            model, forked, rows,
            _mix([asks[i].setting for i in members], [len(asks[i].documents) for i in members]),
            keys=[(asks[i].key, asks[i].setting.key()) for i in members],
            counter=counter, **options,
        )  # fmt: skip
        for g, (i, tokens) in enumerate(zip(members, decoded.token_lists(), strict=True)):
            out[i] |= {
                "tokens": tokens,
                "text": tokenizer.decode(tokens, skip_special_tokens=True),
                "sample_logprobs": decoded.sample_logprobs[g, : len(tokens)].tolist(),
                "public_logprobs": decoded.public_logprobs[g, : len(tokens)].tolist(),
            }
    forced: dict[tuple, torch.Tensor] = {}  # one teacher-forced forward per (streams, target)
    for i, ask in enumerate(asks):
        if ask.forced:
            rows = tuple(index[tuple(row)] for row in streams[i])
            if (rows, ask.forced) not in forced:
                forced[rows, ask.forced] = forced_forked(
                    model, forked, rows, ask.forced, tokenizer.pad_token_id
                )
            out[i]["forced_logprobs"] = _target_logprobs(
                forced[rows, ask.forced], ask.forced, ask.setting,
                options["eos_token_id"], options["min_new_tokens"],
            ).tolist()  # fmt: skip
    return out


def dp_rag_generate(
    model,
    tokenizer,
    asks: Sequence[Ask],
    *,
    template: str,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    seed: int = 0,
    max_batch_streams: int | None = None,
    cache=None,
    counter: ForwardCounter | None = None,
    batch_rows: int = 64,
    store: HeadStore | None = None,
) -> list[dict]:
    """DP-ICL responses, one row per ask: {tokens, text, sample_logprobs, public_logprobs (each
    token's log-prob under the public stream: the LM given the question, no document), documents,
    public_only}, and forced_logprobs for an ask with a forced target (an ask with sample False
    gets documents, public_only and forced_logprobs only).

    An ask's streams are its public prompt and one prompt per document, the document before the
    question (`prompt_text`); an ask with no documents is answered from the public stream alone
    (public_only). Each distinct head (a document's system turn, or the public one) is forwarded
    once for the call, or once for every call given the same `store` (by default one that
    forwards `document_start` once); the asks of one question
    then share one forward of the question's turn per distinct stream, whatever the settings,
    keys and document subsets. With a `cache` each question is one checkpoint unit (a head's
    cache depends on its tokens only, so a question's rows do not depend on the others). Asks
    may differ in epsilon, sensitivity and theta; alpha and C are one per call (one mix)."""
    require(len(asks) >= 1, "dp_rag_generate needs at least one ask")
    require(all(a.sample or a.forced for a in asks), "an ask that draws no response needs forced")
    shape = {(a.setting.alpha, a.setting.clip) for a in asks}
    require(len(shape) == 1, "the asks of one call share alpha and C (one DP-ICL mix)")
    group_keys = [repr((a.key, a.setting.key())) for a in asks]
    require(len(set(group_keys)) == len(asks), "two asks share a key and a setting")
    _check_template(template)
    counter = counter if counter is not None else ForwardCounter()
    store = (
        store if store is not None else HeadStore(model, start=document_start(tokenizer, template))
    )
    options = {"seed": seed, "max_new_tokens": max_new_tokens, "min_new_tokens": min_new_tokens,
               "eos_token_id": tokenizer.eos_token_id, "pad_id": tokenizer.pad_token_id,
               "max_batch_streams": max_batch_streams}  # fmt: skip
    by_question: dict[str, list[int]] = {}
    for i, ask in enumerate(asks):
        by_question.setdefault(ask.question, []).append(i)
    rows: list[dict | None] = [None] * len(asks)
    for question, members in by_question.items():
        part = [asks[i] for i in members]
        answered = through_cache(
            cache,
            lambda part=part: _question_rows(
                model, tokenizer, part, template, options, counter, store, batch_rows
            ),  # fmt: skip
            "dp_icl question",
            question,
            [
                (a.key, a.documents, a.setting.key(), a.answer_prefix, a.forced, a.sample)
                for a in part
            ],
            template,
            sorted(options.items()),
        )
        for i, row in zip(members, answered, strict=True):
            rows[i] = row
    return rows


def rag_generate(
    model,
    tokenizer,
    questions: Sequence[str],
    documents: Sequence[Sequence[str]],
    *,
    keys: Sequence[Hashable],
    template: str,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    answer_prefixes: Sequence[str] | None = None,
    max_batch_streams: int | None = None,
    cache=None,
) -> list[dict]:
    """The non-private baseline (epsilon = inf): every document of question i in one prompt,
    greedy decoding, the answer opened with answer_prefixes[i] (default none). Rows {tokens,
    text, sample_logprobs, documents}."""
    prefixes = [""] * len(questions) if answer_prefixes is None else list(answer_prefixes)
    require(
        len(questions) == len(documents) == len(keys) == len(prefixes),
        "give one document list, key and answer prefix per question",
    )
    prompts = [
        prompt_ids(tokenizer, q, docs, template, prefix)
        for q, docs, prefix in zip(questions, documents, prefixes, strict=True)
    ]
    decoded = decode(
        model,
        prompts,
        max_new_tokens=max_new_tokens,
        transforms=[greedy()],
        group_keys=[(key, "rag") for key in keys],
        eos_token_id=tokenizer.eos_token_id,
        min_new_tokens=min_new_tokens,
        pad_id=tokenizer.pad_token_id,
        max_batch_streams=max_batch_streams,
        cache=cache,
    )
    return [
        {
            "tokens": tokens,
            "text": tokenizer.decode(tokens, skip_special_tokens=True),
            "sample_logprobs": decoded.sample_logprobs[g, : len(tokens)].tolist(),
            "documents": len(docs),
        }
        for g, (tokens, docs) in enumerate(zip(decoded.token_lists(), documents, strict=True))
    ]


# ---------------------------------------------------------------- exact log-probs


@torch.inference_mode()
def forced_logprobs(
    model, prompts: Sequence[Sequence[int]], target: Sequence[int], pad_id: int
) -> torch.Tensor:
    """[S, T, V] next-token log-probs (temperature 1, real vocabulary) of each prompt's stream at
    the T positions that predict target[0..T-1], the target forced after every prompt. One
    left-padded forward keeping only the last T + 1 positions' logits."""
    require(len(target) >= 1, "the forced target needs at least one token")
    ids, mask = pad_rows([list(p) + list(target) for p in prompts], pad_id, "left")
    device = model.device
    mask = mask.to(device)
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask,
        position_ids=position_ids(mask),
        logits_to_keep=len(target) + 1,
    )
    logits = real_logits(model, out.logits[:, :-1].float())
    return torch.log_softmax(logits, dim=-1)


def _block_eos(logits: torch.Tensor, eos_token_id: int | None, blocked_steps: int) -> torch.Tensor:
    if eos_token_id is None or blocked_steps <= 0:
        return logits
    logits = logits.clone()
    logits[:blocked_steps, eos_token_id] = float("-inf")
    return logits


def lm_forced_distribution(
    model,
    prompt: Sequence[int],
    target: Sequence[int],
    *,
    pad_id: int,
    eos_token_id: int | None = None,
    blocked_steps: int = 0,
) -> torch.Tensor:
    """[T, V] the LM's next-token log-probs (temperature 1) at each forced target position, EOS
    blocked on the first `blocked_steps` positions as the decoder blocks it (min_new_tokens).
    Gather the target for its log-probability; its argmax says what greedy decoding emits."""
    logprobs = forced_logprobs(model, [prompt], target, pad_id)[0]
    return torch.log_softmax(_block_eos(logprobs, eos_token_id, blocked_steps), dim=-1)


def dp_icl_forced_logprobs(
    model,
    streams: Sequence[Sequence[int]],
    target: Sequence[int],
    settings: Sequence[DPICLSettings],
    *,
    pad_id: int,
    eos_token_id: int | None = None,
    blocked_steps: int = 0,
) -> torch.Tensor:
    """[len(settings), T] log P_DP-ICL(target_t | ...) of the target forced after the 1 + k
    `streams` (public first), under each setting from one forward: at each position the
    decoder's own distribution, eps * U / (2 * sensitivity * C) normalised, so a row's sum is
    the exact log-probability that DP-RAG emits the target there. The streams share one
    prefill (`prefill_rows`), as the decoder's do."""
    forked = prefill_rows(model, streams, pad_id, ForwardCounter())
    logprobs = forced_forked(model, forked, range(len(streams)), target, pad_id)  # [1 + k, T, V]
    rows = [
        _target_logprobs(logprobs, target, setting, eos_token_id, blocked_steps)
        for setting in settings
    ]
    return torch.stack(rows).cpu()


def _target_logprobs(
    logprobs: torch.Tensor,
    target: Sequence[int],
    setting: DPICLSettings,
    eos_token_id: int | None,
    blocked_steps: int,
) -> torch.Tensor:
    """[T] log P_DP-ICL(target_t) from the streams' forced log-probs [1 + k, T, V]."""
    documents = logprobs[1:].transpose(0, 1)  # [T, k, V]
    present = torch.ones(documents.shape[:2], dtype=torch.bool, device=documents.device)
    utility = dp_icl_utility(
        logprobs[0], documents, present, setting.alpha, setting.clip, setting.theta
    )
    logits = setting.epsilon / setting.sensitivity * utility / (2 * setting.clip)
    mixed = torch.log_softmax(_block_eos(logits, eos_token_id, blocked_steps), dim=-1)
    chosen = torch.tensor(list(target), device=logprobs.device)[:, None]
    return mixed.gather(-1, chosen)[:, 0].cpu()


def rag_fact_row(
    model,
    tokenizer,
    question: Mapping,
    documents: Mapping[Hashable, str],
    *,
    template: str,
    blocked_steps: int,
) -> dict:
    """The non-private RAG's row for a planted fact: {question_id, fact_tokens, decoder "rag",
    epsilon inf, log_prob (exact, after the answer prefix), greedy_emits} (`planted_fact_rows`
    documents the question's keys)."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    fact = tokenizer(question["fact"], add_special_tokens=False)["input_ids"]
    rag = prompt_ids(tokenizer, question["question"], [documents[i] for i in question["rag"]],
                     template, question["answer_prefix"])  # fmt: skip
    distribution = lm_forced_distribution(
        model, rag, fact, pad_id=pad, eos_token_id=eos, blocked_steps=blocked_steps
    )
    chosen = distribution.gather(-1, distribution.new_tensor(fact).long()[:, None])
    return {"question_id": question["question_id"], "fact_tokens": len(fact), "decoder": "rag",
            "epsilon": math.inf, "log_prob": float(chosen.sum()),
            "greedy_emits": distribution.argmax(-1).tolist() == fact}  # fmt: skip
