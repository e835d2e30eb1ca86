"""Token-level prompt assembly: a template around a context whose token span is known.

Context ablations (n-gram removal, truncation, the empty "without context" prompt) act on the
context's tokens, so the prompt is built from separately encoded pieces rather than re-tokenised.
The S0 templates (CNN/DM summaries, PubMedQA answers; chat or plain layout) live here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from privleak.errors import require


@dataclass(frozen=True)
class ContextPrompt:
    """ids = head + context + tail; context occupies ids[start:end]."""

    head: list[int]
    context: list[int]
    tail: list[int]

    @property
    def ids(self) -> list[int]:
        return self.head + self.context + self.tail

    @property
    def span(self) -> tuple[int, int]:
        return len(self.head), len(self.head) + len(self.context)

    def with_context(self, context: list[int]) -> ContextPrompt:
        """The same template around other context tokens (an empty list keeps only the template)."""
        return ContextPrompt(self.head, list(context), self.tail)


def encode_context_prompt(
    tokenizer, head: str, context: str, tail: str, *, max_context_tokens: int | None = None
) -> ContextPrompt:
    """Encode head (with the tokenizer's special tokens), context and tail separately.

    The context keeps its first max_context_tokens tokens when that is set.
    """
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    require(len(context_ids) >= 1, "the context is empty; every example needs context text")
    if max_context_tokens is not None:
        require(
            max_context_tokens >= 1, f"max_context_tokens must be >= 1, got {max_context_tokens}"
        )
        context_ids = context_ids[:max_context_tokens]
    return ContextPrompt(
        head=list(tokenizer(head, add_special_tokens=True)["input_ids"]),
        context=list(context_ids),
        tail=list(tokenizer(tail, add_special_tokens=False)["input_ids"]),
    )


# S0 prompts (paper App. C, Figs. 5-6): the context, then the query. `chat` wraps them in the
# ChatML turns SmolLM2-Instruct was tuned on; `plain` is the paper's base-model layout.
TASKS = {
    "cnn_dm": {"label": "News article:", "context": "article", "reference": "highlights"},
    "pubmedqa": {"label": "Document:", "context": "context", "reference": "long_answer"},
}
CNN_QUERY = "Summary of the above news article:"
CHAT_SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"


def _text(value) -> str:
    # HF PubMedQA stores the abstract as {"contexts": [...], ...}.
    if isinstance(value, dict) and "contexts" in value:
        return " ".join(value["contexts"])
    return str(value)


def _check(corpus: str, template: str) -> None:
    require(corpus in TASKS, f"corpus '{corpus}' has no S0 task; allowed: {', '.join(TASKS)}")
    require(template in ("chat", "plain"), f"template '{template}' is unknown; use chat|plain")


def _template(corpus: str, template: str, query: str) -> tuple[str, str]:
    """(head, tail) text around the context of an S0 prompt."""
    label = TASKS[corpus]["label"]
    if template == "chat":
        return CHAT_SYSTEM + label, f"\n\n{query}<|im_end|>\n<|im_start|>assistant\n"
    return label, f"\n{query}\n"


QUESTION = "<question>"
"""Stands for the record's question in `no_context_prompt` (CNN/DM's query is fixed)."""


def no_context_prompt(corpus: str, template: str) -> str:
    """The text of the S0 prompt without its context (τ's D = ∅ side): head + tail, the context
    and its leading space both gone, e.g. 'Document:\n<question>\n' (plain, PubMedQA)."""
    _check(corpus, template)
    query = CNN_QUERY if corpus == "cnn_dm" else QUESTION
    return "".join(_template(corpus, template, query))


def s0_prompt(
    tokenizer, record: dict, corpus: str, template: str, context_tokens: int | None
) -> tuple[ContextPrompt, str]:
    """(prompt, reference) for one CNN/DM or PubMedQA record; the context keeps its first
    `context_tokens` tokens (None: all of them)."""
    _check(corpus, template)
    query = CNN_QUERY if corpus == "cnn_dm" else _text(record["question"])
    head, tail = _template(corpus, template, query)
    task = TASKS[corpus]
    prompt = encode_context_prompt(
        tokenizer,
        head,
        " " + _text(record[task["context"]]).strip(),
        tail,
        max_context_tokens=context_tokens,
    )
    return prompt, _text(record[task["reference"]])
