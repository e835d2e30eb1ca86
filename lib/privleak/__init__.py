"""privleak: measure and mitigate decoding-time privacy leakage of language models."""

from privleak.errors import PrivleakError

__all__ = ["PrivleakError"]
