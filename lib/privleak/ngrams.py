"""Where the token n-grams of a context lie (Flemings et al. Def. 3.1's D_{i,n}), as token spans.

`block` = disjoint [i·n, (i+1)·n), the last one the shorter remainder when n does not divide |D|
(every token in exactly one n-gram); `sliding` = [s, s + n) for s = 0, stride, ... <= |D| − n (the
official code's rule at stride 1). Pure and torch-free, so the render notebooks can name the
layout on their axes.
"""

from __future__ import annotations

from dataclasses import dataclass

from privleak.errors import require

WINDOWS = ("block", "sliding")


@dataclass(frozen=True)
class Window:
    """How the n-grams of a context are laid out: `block` (disjoint, stride n) or `sliding`
    (start every `stride` tokens; windows past |D| − n are dropped, so a stride that misses
    |D| − n leaves the last tokens in no window)."""

    kind: str = "block"
    stride: int = 1

    def __post_init__(self) -> None:
        allowed = " | ".join(WINDOWS)
        require(self.kind in WINDOWS, f"window must be {allowed}, got {self.kind!r}")
        require(
            isinstance(self.stride, int) and self.stride >= 1,
            f"stride must be an integer >= 1, got {self.stride!r}",
        )
        require(
            self.kind == "sliding" or self.stride == 1,
            f"stride applies to sliding windows only (blocks step by n), got {self.stride}",
        )

    @classmethod
    def of(cls, block: dict) -> Window:
        """The window a params block names: its `window` and optional `stride` (default 1)."""
        return cls(block["window"], block.get("stride", 1))

    def describe(self) -> str:
        """Plain words for figure axes: how the n-grams tile the context."""
        if self.kind == "block":
            return "disjoint n-token blocks"
        return f"sliding n-token windows, stride {self.stride}"

    def formula(self) -> str:
        """The i-th n-gram's token span, for figure axes."""
        if self.kind == "block":
            return "[i·n, (i+1)·n)"
        start = "i" if self.stride == 1 else f"{self.stride}·i"
        return f"[{start}, {start}+n)"


BLOCKS = Window("block")


def ngram_spans(context_tokens: int, n: int, window: Window = BLOCKS) -> list[tuple[int, int]]:
    """The token n-grams [start, end) of a |D|-token context under `window`.

    block: [i·n, min((i+1)·n, |D|)) for i = 0..ceil(|D|/n) − 1; sliding: [s, s + n) for
    s = 0, stride, 2·stride, ... <= |D| − n.
    """
    require(context_tokens >= 1, "the context is empty; context influence needs >= 1 token")
    require(isinstance(n, int) and n >= 1, f"n (n-gram size) must be an integer >= 1, got {n}")
    require(n <= context_tokens, f"n (n-gram size) must be <= |D| = {context_tokens}, got {n}")
    if window.kind == "sliding":
        return [(start, start + n) for start in range(0, context_tokens - n + 1, window.stride)]
    return [(start, min(start + n, context_tokens)) for start in range(0, context_tokens, n)]
