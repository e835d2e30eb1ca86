"""The family's training texts: the pretraining corpus's documents, then the mix articles.

The mix articles are drawn by the cnn_dm and pubmedqa generators with their own seed (never the
data/raw records, which S0 reads as contexts); each contributes its prose fields in reading order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from privleak.data.synthetic import generate

# The prose fields of each mix article, in reading order (S0 conditions on these fields).
MIX_FIELDS = {
    "cnn_dm": ["article", "highlights"],
    "pubmedqa": ["question", "context", "long_answer"],
}


def mix_texts(mix: Mapping[str, int], mix_seed: int) -> list[str]:
    """`mix[generator]` articles of each generator (sorted by name), drawn with mix_seed."""
    texts = []
    for generator, count in sorted(mix.items()):
        if count:
            records, _ = generate(generator, count, mix_seed)
            texts += ["\n\n".join(r[f] for f in MIX_FIELDS[generator]) for r in records]
    return texts


def family_texts(documents: Sequence[Mapping], mix: Mapping[str, int], mix_seed: int) -> list[str]:
    """The documents' `text`, then the mix articles: what train_family tokenizes and packs."""
    return [d["text"] for d in documents] + mix_texts(mix, mix_seed)
