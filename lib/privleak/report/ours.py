"""What a profile runs for each paper, in words: the model, the data and the units, read from the
profile's params, for the 'ours' column beside the paper's setup."""

from __future__ import annotations

from collections.abc import Mapping

from privleak.errors import require
from privleak.report.papers import PAPERS, Setup

FAMILY = "the tiny family LMs trained here ({sizes})"


def _family(params: Mapping, profile: str) -> str:
    return FAMILY.format(sizes=", ".join(params["family"][profile]["sizes"]))


def _models(models, params: Mapping, profile: str) -> str:
    """A models param: 'family' (the tiny family) or a list of LMs."""
    return _family(params, profile) if models == "family" else ", ".join(models)


def _corpus(corpus: Mapping) -> str:
    n = corpus.get("n")
    return corpus["source"] + (f" ({n} records)" if n else " (every record)")


def setup(paper: str, params: Mapping, profile: str) -> Setup:
    """The `paper` key's (s0 ... s4) setup under `profile` as a Setup (model, dataset, n)."""
    require(paper in PAPERS, f"paper {paper!r} is unknown; allowed: {', '.join(PAPERS)}")
    block = params[paper][profile]
    if paper == "s0":
        lms = ", ".join(block["lms"])
        return Setup(
            model=f"{lms}; {_family(params, profile)}",
            dataset=", ".join(block["corpora"]),
            n=f"{block['n_examples']} contexts per corpus",
        )
    if paper == "s1":
        return Setup(
            model=_models(block["scores"]["models"], params, profile),
            dataset=f"{block['scores']['sequences']} sequences",
            n=f"{len(block['decoders'])} decoders; prefixes "
            + ", ".join(str(n) for n in block["scores"]["prefix_lengths"]),
        )
    if paper == "s2":
        return Setup(
            model=block["lm"],
            dataset=", ".join(block["corpora"]),
            n=f"{block['attack']['prompts']} attack prompts per corpus",
        )
    if paper == "s3":
        family = block["base"].startswith("data/family/")
        return Setup(
            model=f"{block['base']} (a tiny family LM)" if family else block["base"],
            dataset=_corpus(block["corpus"]),
            n=f"{block['seeds']} training runs per target",
        )
    per_bucket = block["questions"]["per_bucket"]
    return Setup(
        model=block["lm"],
        dataset=_corpus(block["corpus"]),
        n=f"{per_bucket} questions per frequency bucket" if per_bucket else "every question",
    )
