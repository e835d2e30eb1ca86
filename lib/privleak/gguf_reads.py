"""Converting a GGUF with transformers while `gguf` parses the file once.

transformers reads a GGUF's metadata anew for the tokenizer, the config and the weights (about 7 s
each for SmolLM2's 49,152-token vocabulary on 2 cores) and rebuilds the same tensor-name map for
each of ~400 submodules (about 9 s). Both are pure functions of their arguments, and transformers
imports them from `gguf` at each call, so memoizing them there for the duration of a conversion
leaves every byte it writes the same (`benchmarks/bench_prepare_models.py` checks).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from unittest import mock


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Inside the block, `gguf.GGUFReader(path)` and `gguf.get_tensor_name_map(arch, layers)`
    return the first result for the same arguments; outside it they are gguf's own again."""
    import gguf

    with (
        mock.patch.object(gguf, "GGUFReader", functools.cache(gguf.GGUFReader)),
        mock.patch.object(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map)),
    ):
        yield
