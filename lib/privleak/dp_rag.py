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

from collections.abc import Hashable, Sequence
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


def prompt_text(tokenizer, question: str, documents: Sequence[str], template: str) -> str:
    """The prompt for `documents` (none: the public stream; one: a DP-ICL document stream;
    several: the ordinary RAG prompt) and the question: `chat` wraps it in the tokenizer's own
    chat template (system + user turn, then the assistant's turn opens), `plain` ends in
    'Answer:' for base models."""
    _check_template(template)
    body = _body(question, documents)
    if template == "plain":
        return f"{body}\nAnswer:"
    require(
        getattr(tokenizer, "chat_template", None) is not None,
        "DP-RAG template 'chat' needs a tokenizer with a chat template; this one has none "
        "(use template: plain for a base model)",
    )
    turns = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]
    return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)


def prompt_ids(tokenizer, question: str, documents: Sequence[str], template: str) -> list[int]:
    """`prompt_text` as token ids (a chat template writes its own special tokens)."""
    text = prompt_text(tokenizer, question, documents, template)
    return list(tokenizer(text, add_special_tokens=template == "plain")["input_ids"])


def stream_prompts(
    tokenizer, question: str, documents: Sequence[str], template: str
) -> list[list[int]]:
    """[1 + k] token lists: the public stream, then one stream per document."""
    return [prompt_ids(tokenizer, question, [], template)] + [
        prompt_ids(tokenizer, question, [document], template) for document in documents
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
        # exp(eps * U / (2 * sensitivity * C)): DPICLMix scales by 2C, so eps shrinks instead.
        return DPICLMix(
            documents, self.epsilon / self.sensitivity, self.alpha, self.clip, self.theta
        )

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
    settings: DPICLSettings,
    *,
    keys: Sequence[Hashable],
    template: str,
    max_new_tokens: int,
    min_new_tokens: int = 0,
    seed: int = 0,
    max_batch_streams: int | None = None,
    cache=None,
) -> list[dict]:
    """One DP-ICL response per question: {tokens, text, sample_logprobs, documents,
    public_only}. Question i's streams are its public prompt and one prompt per
    documents[i]; a question with no documents is answered from the public stream alone
    (public_only). Questions with the same document count decode together (one group = 1 + k
    streams, one batched cached forward per step); question i's draws depend only on
    (seed, keys[i], settings), never on batching or the other questions."""
    require(
        len(questions) == len(documents) == len(keys),
        "give one document list and key per question",
    )
    require(len(questions) >= 1, "dp_rag_generate needs at least one question")
    by_count: dict[int, list[int]] = {}
    for i, docs in enumerate(documents):
        by_count.setdefault(len(docs), []).append(i)
    rows: list[dict | None] = [None] * len(questions)
    for count, members in sorted(by_count.items()):
        prompts = [
            ids
            for i in members
            for ids in stream_prompts(tokenizer, questions[i], documents[i], template)
        ]
        decoded = decode(
            model,
            prompts,
            max_new_tokens=max_new_tokens,
            streams_per_group=1 + count,
            mix=settings.mix(count),
            seed=seed,
            group_keys=[(keys[i], settings.key()) for i in members],
            eos_token_id=tokenizer.eos_token_id,
            min_new_tokens=min_new_tokens,
            pad_id=tokenizer.pad_token_id,
            max_batch_streams=max_batch_streams,
            cache=cache,
        )
        for i, row in zip(members, _rows(decoded, range(len(members)), tokenizer), strict=True):
            rows[i] = {**row, "documents": count, "public_only": count == 0}
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
    max_batch_streams: int | None = None,
    cache=None,
) -> list[dict]:
    """The non-private baseline (epsilon = inf): every document of question i in one prompt,
    greedy decoding. Rows {tokens, text, sample_logprobs, documents}."""
    require(
        len(questions) == len(documents) == len(keys),
        "give one document list and key per question",
    )
    prompts = [
        prompt_ids(tokenizer, q, docs, template)
        for q, docs in zip(questions, documents, strict=True)
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
    settings: DPICLSettings,
    *,
    pad_id: int,
    eos_token_id: int | None = None,
    blocked_steps: int = 0,
) -> torch.Tensor:
    """[T] log P_DP-ICL(target_t | ...) of the target forced after the 1 + k `streams` (public
    first): at each position the decoder's own distribution, eps * U / (2 * sensitivity * C)
    normalised, so their sum is the exact log-probability that DP-RAG emits the target there."""
    logprobs = forced_logprobs(model, streams, target, pad_id)  # [1 + k, T, V]
    documents = logprobs[1:].transpose(0, 1)  # [T, k, V]
    present = torch.ones(documents.shape[:2], dtype=torch.bool, device=documents.device)
    utility = dp_icl_utility(
        logprobs[0], documents, present, settings.alpha, settings.clip, settings.theta
    )
    logits = settings.epsilon / settings.sensitivity * utility / (2 * settings.clip)
    mixed = torch.log_softmax(_block_eos(logits, eos_token_id, blocked_steps), dim=-1)
    return mixed.gather(-1, torch.tensor(target, device=mixed.device)[:, None])[:, 0].cpu()
