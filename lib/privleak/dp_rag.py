"""DP-RAG (Grislain) end to end: a privacy-unit-preserving retrieval, then DP in-context
generation through the shared decoder, for a corpus holding one document per privacy unit.

The mechanisms live in `retrieval` (exact scores, the DP threshold and the documents it keeps),
`dp_icl` (the token mix) and `accounting` (the budget); this module wires them:
- `split_budget`: a response's (epsilon, delta) split into the threshold's epsilon and a per-token
  epsilon, composed with `dp_accounting`;
- `dp_rag_generate`: one public stream (the question alone) + one stream per retrieved document,
  one batched cached decode with the DP-ICL mix; `rag_generate`: the ordinary, non-private RAG
  (every retrieved document in one prompt), the epsilon = inf baseline;
- `forced_logprobs` / `dp_icl_forced_logprobs`: the exact per-token log-probability of a forced
  continuation under the plain LM and under the DP-ICL decoder (the planted-fact measurement).

Sensitivity under a cap. The paper's token mechanism P(r) ∝ exp(eps * U(r) / (2C)) has sensitivity
C when the retrieved set is every document above the threshold: adding one document adds one
clipped term. Memory is bounded by `max_retrieve`, though, and with a cap an added document can
enter the top `max_retrieve` and push another one out, moving U by up to 2C. `dp_rag_generate`
therefore samples with sensitivity 2C (`CAPPED_SENSITIVITY` x C), so every token is
eps-DP whatever the corpus; the paper's C alone would silently double the real per-token loss.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from privleak.accounting import check_delta, check_epsilon, composed_epsilon, per_step_epsilon
from privleak.batching import pad_rows, position_ids
from privleak.decoding import decode, greedy
from privleak.dp_icl import DPICLMix, check_dp_icl, dp_icl_utility
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


SYSTEM = "You are a helpful assistant."


def _body(question: str, documents: Sequence[str]) -> str:
    if not documents:
        return f"Question: {question}"
    if len(documents) == 1:
        return f"Document: {documents[0]}\n\nQuestion: {question}"
    listed = "\n".join(f"- {document}" for document in documents)
    return f"Documents:\n{listed}\n\nQuestion: {question}"


def prompt_text(
    tokenizer, question: str, documents: Sequence[str], template: str, answer_prefix: str = ""
) -> str:
    """The prompt for `documents` (none: the public stream; one: a DP-ICL document stream;
    several: the ordinary RAG prompt) and the question: `chat` wraps it in the tokenizer's own
    chat template (system + user turn, then the assistant's turn opens), `plain` ends in
    'Answer:' for base models. A public `answer_prefix` opens the answer (every stream sees the
    same text, so it costs no privacy budget) and the response continues it."""
    _check_template(template)
    body = _body(question, documents)
    if template == "plain":
        return f"{body}\nAnswer: {answer_prefix}" if answer_prefix else f"{body}\nAnswer:"
    require(
        getattr(tokenizer, "chat_template", None) is not None,
        "DP-RAG template 'chat' needs a tokenizer with a chat template; this one has none "
        "(use template: plain for a base model)",
    )
    turns = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]
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


# ---------------------------------------------------------------- generation


@dataclass(frozen=True)
class DPICLSettings:
    """The token mechanism: per-token epsilon, l_norm's alpha, clipping C, the public weight
    theta and U's sensitivity in units of C (`CAPPED_SENSITIVITY` under a max_retrieve cap)."""

    epsilon: float
    alpha: float = 1.0
    clip: float = 1.0
    theta: float = 1.0
    sensitivity: float = CAPPED_SENSITIVITY

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "DP-ICL epsilon per token")
        check_dp_icl(self.alpha, self.clip, self.theta)
        require(self.sensitivity >= 1, f"sensitivity (x C) must be >= 1, got {self.sensitivity}")

    def mix(self, documents: int) -> DPICLMix:
        return _mix([self], documents, 1)

    def key(self) -> tuple:
        return (self.epsilon, self.alpha, self.clip, self.theta, self.sensitivity)


def _rows(decoded, order: Sequence[int], tokenizer) -> list[dict]:
    return [
        {
            "tokens": tokens,
            "text": tokenizer.decode(tokens, skip_special_tokens=True),
            "sample_logprobs": decoded.sample_logprobs[g, : len(tokens)].tolist(),
        }
        for g, tokens in zip(order, decoded.token_lists(), strict=True)
    ]


def dp_rag_generate(
    model,
    tokenizer,
    questions: Sequence[str],
    documents: Sequence[Sequence[str]],
    settings: Sequence[DPICLSettings],
    *,
    keys: Sequence[Hashable],
    template: str,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    answer_prefixes: Sequence[str] | None = None,
    seed: int = 0,
    max_batch_streams: int | None = None,
    cache=None,
) -> list[list[dict]]:
    """DP-ICL responses [settings][question]: {tokens, text, sample_logprobs, documents,
    public_only}. Question i's streams are its public prompt and one prompt per documents[i]
    (each opening the answer with answer_prefixes[i], default none); a question with no
    documents is answered from the public stream alone (public_only). Questions with the same
    document count decode together (one group = 1 + k streams, one batched cached forward per
    step), every setting of a question beside the others, so their identical prompts are
    prefilled once whenever the batch budget holds them all. Question i's draws under a setting
    depend only on (seed, keys[i], that setting), never on batching or the other questions.
    The settings may differ in epsilon and sensitivity only (one mix serves them)."""
    prefixes = [""] * len(questions) if answer_prefixes is None else list(answer_prefixes)
    require(
        len(questions) == len(documents) == len(keys) == len(prefixes),
        "give one document list, key and answer prefix per question",
    )
    require(len(questions) >= 1, "dp_rag_generate needs at least one question")
    require(len(settings) >= 1, "dp_rag_generate needs at least one DPICLSettings")
    shape = {(s.alpha, s.clip, s.theta) for s in settings}
    require(len(shape) == 1, "DPICLSettings of one call may differ in epsilon/sensitivity only")
    by_count: dict[int, list[int]] = {}
    for i, docs in enumerate(documents):
        by_count.setdefault(len(docs), []).append(i)
    rows: list[list[dict | None]] = [[None] * len(questions) for _ in settings]
    for count, members in sorted(by_count.items()):
        family = (1 + count) * len(settings)  # one question's streams under every setting
        budget = max_batch_streams
        if budget is not None and budget >= family:
            budget -= budget % family  # a batch never splits a question's settings
        prompts = []
        for i in members:
            streams = stream_prompts(tokenizer, questions[i], documents[i], template, prefixes[i])
            prompts += [ids for _ in settings for ids in streams]
        decoded = decode(
            model,
            prompts,
            max_new_tokens=max_new_tokens,
            streams_per_group=1 + count,
            mix=_mix(settings, count, len(members)),
            seed=seed,
            group_keys=[(keys[i], s.key()) for i in members for s in settings],
            eos_token_id=tokenizer.eos_token_id,
            min_new_tokens=min_new_tokens,
            pad_id=tokenizer.pad_token_id,
            max_batch_streams=budget,
            cache=cache,
        )
        answers = iter(_rows(decoded, range(len(members) * len(settings)), tokenizer))
        for i in members:
            for per_setting in rows:
                per_setting[i] = {**next(answers), "documents": count, "public_only": count == 0}
    return rows


def _mix(settings: Sequence[DPICLSettings], documents: int, questions: int) -> DPICLMix:
    """One DPICLMix for groups ordered question-major, setting-minor. exp(eps * U / (2 *
    sensitivity * C)): DPICLMix scales by 2C, so each setting's eps shrinks instead."""
    first = settings[0]
    epsilons = [s.epsilon / s.sensitivity for s in settings] * questions
    return DPICLMix(documents, epsilons, first.alpha, first.clip, first.theta)


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
    rows = _rows(decoded, range(len(prompts)), tokenizer)
    return [{**row, "documents": len(docs)} for row, docs in zip(rows, documents, strict=True)]


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
    the exact log-probability that DP-RAG emits the target there."""
    logprobs = forced_logprobs(model, streams, target, pad_id)  # [1 + k, T, V]
    documents = logprobs[1:].transpose(0, 1)  # [T, k, V]
    present = torch.ones(documents.shape[:2], dtype=torch.bool, device=documents.device)
    chosen = torch.tensor(target, device=logprobs.device)[:, None]
    rows = []
    for setting in settings:
        utility = dp_icl_utility(
            logprobs[0], documents, present, setting.alpha, setting.clip, setting.theta
        )
        logits = setting.epsilon / setting.sensitivity * utility / (2 * setting.clip)
        mixed = torch.log_softmax(_block_eos(logits, eos_token_id, blocked_steps), dim=-1)
        rows.append(mixed.gather(-1, chosen)[:, 0])
    return torch.stack(rows).cpu()


def planted_fact_rows(
    model,
    tokenizer,
    question: Mapping,
    documents: Mapping[Hashable, str],
    settings: Sequence[DPICLSettings],
    budgets: Sequence[Budget],
    *,
    template: str,
    blocked_steps: int,
) -> list[dict]:
    """The exact log-probability of a question's planted fact under DP-RAG at each budget and
    under the non-private RAG.

    Args:
        question: question_id, question, fact, answer_prefix, chosen (DP-RAG's document ids) and
            rag (the RAG baseline's document ids).
        documents: the text of each document id.
        settings, budgets: DP-RAG's settings and the budgets they spend, one per epsilon.
        template: the prompt template.
        blocked_steps: the first answer tokens on which the decoder blocks EOS (min_new_tokens).

    Returns:
        Rows {question_id, fact_tokens, decoder, epsilon, log_prob, greedy_emits}: one "dp_rag"
        row per budget (greedy_emits None), then one "rag" row (epsilon inf).
    """
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    fact = tokenizer(question["fact"], add_special_tokens=False)["input_ids"]
    base = {"question_id": question["question_id"], "fact_tokens": len(fact)}
    streams = stream_prompts(
        tokenizer,
        question["question"],
        [documents[i] for i in question["chosen"]],
        template,
        question["answer_prefix"],
    )
    logprobs = dp_icl_forced_logprobs(
        model, streams, fact, settings, pad_id=pad, eos_token_id=eos, blocked_steps=blocked_steps
    )  # [epsilons, fact tokens], one forward for every epsilon
    out = [
        {**base, "decoder": "dp_rag", "epsilon": spent.epsilon,
         "log_prob": float(row.sum()), "greedy_emits": None}
        for spent, row in zip(budgets, logprobs, strict=True)
    ]  # fmt: skip
    rag = prompt_ids(tokenizer, question["question"], [documents[i] for i in question["rag"]],
                     template, question["answer_prefix"])  # fmt: skip
    distribution = lm_forced_distribution(
        model, rag, fact, pad_id=pad, eos_token_id=eos, blocked_steps=blocked_steps
    )
    chosen = distribution.gather(-1, distribution.new_tensor(fact).long()[:, None])
    out.append({**base, "decoder": "rag", "epsilon": math.inf,
                "log_prob": float(chosen.sum()),
                "greedy_emits": distribution.argmax(-1).tolist() == fact})  # fmt: skip
    return out
