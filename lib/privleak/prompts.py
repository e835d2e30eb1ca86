"""Token-level prompt assembly: a template around a context whose token span is known.

Context ablations (n-gram removal, truncation, the empty "without context" prompt) act on the
context's tokens, so the prompt is built from separately encoded pieces rather than re-tokenised.
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
