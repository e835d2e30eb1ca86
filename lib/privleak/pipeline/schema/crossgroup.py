"""`Params`, the whole params.yaml, and the cross-group checks: rules that read more than one
group, run for every profile once each group has passed on its own.
"""

import posixpath
from typing import Annotated, Self

from pydantic import model_validator

from privleak.pipeline.schema.audit import Audit, Conformance
from privleak.pipeline.schema.base import (
    INDEX,
    NAME,
    PROFILES,
    Strict,
    fail,
    one_of,
    per_profile,
)
from privleak.pipeline.schema.data import GENERATORS, Slot
from privleak.pipeline.schema.family import FAMILY_DIR, Family
from privleak.pipeline.schema.foundation import EMBEDDED_LMS, Claims, ContextGain, Figures, Models
from privleak.pipeline.schema.frontier import Frontier
from privleak.pipeline.schema.mia import Mia
from privleak.pipeline.schema.s0 import S0
from privleak.pipeline.schema.s1 import S1
from privleak.pipeline.schema.s2 import S2
from privleak.pipeline.schema.s3 import S3
from privleak.pipeline.schema.s4 import S4

# dvc.yaml stages read data/raw/<slot>.jsonl of these; pretrain also needs its secrets file.
REQUIRED_SLOTS = ("cnn_dm", "pubmedqa", "pretrain")


class Params(Strict):
    """The whole params.yaml."""

    profile: Annotated[str, one_of(*PROFILES)]
    seed: Annotated[int, INDEX]
    figures: Figures
    models: per_profile(Models, "ModelsGroup")
    data: per_profile(dict[str, Slot], "DataGroup")
    context_gain: per_profile(ContextGain, "ContextGainGroup")
    family: per_profile(Family, "FamilyGroup")
    s1: per_profile(S1, "S1Group")
    s0: per_profile(S0, "S0Group")
    s4: per_profile(S4, "S4Group")
    s2: per_profile(S2, "S2Group")
    s3: per_profile(S3, "S3Group")
    audit: per_profile(Audit, "AuditGroup")
    conformance: per_profile(Conformance, "ConformanceGroup")
    mia: per_profile(Mia, "MiaGroup")
    frontier: per_profile(Frontier, "FrontierGroup")
    claims: per_profile(Claims, "ClaimsGroup")

    @model_validator(mode="after")
    def _across_groups(self) -> Self:
        for profile in PROFILES:
            _check_data(getattr(self.data, profile), profile)
            _check_corpora(self, profile)
            _check_prepared(self, profile)
            _check_family(self, profile)
            _check_s3_base(self, profile)
            _check_mia(self, profile)
            _check_frontier(self, profile)
        return self


def _check_data(data: dict[str, Slot], p: str) -> None:
    for slot, spec in data.items():
        if not NAME.fullmatch(slot):
            raise fail("unusable as a file name (data/raw/<slot>.jsonl)", f"data.{p}.{slot}")
        generator = spec.source.removeprefix("synthetic:")
        if slot in GENERATORS and spec.source.startswith("synthetic:") and generator != slot:
            raise fail(
                f"slot {slot} needs synthetic:{slot} records",
                f"data.{p}.{slot}.source",
                value=spec.source,
            )
    for slot in REQUIRED_SLOTS:
        if slot not in data:
            raise fail(f"missing; dvc.yaml stages read data/raw/{slot}.jsonl", f"data.{p}.{slot}")
    if data["pretrain"].source != "synthetic:pretrain":
        raise fail(
            "must be synthetic:pretrain (S1 reads its planted secrets)",
            f"data.{p}.pretrain.source",
            value=data["pretrain"].source,
        )


def _check_corpora(params: Params, p: str) -> None:
    """Every corpus a stage names is a slot of data.<p>, holding the records the stage reads."""
    s0, gain, slots = (
        getattr(params.s0, p),
        getattr(params.context_gain, p),
        getattr(params.data, p),
    )
    # (key naming the corpus, corpus, key of the record count read from it, that count)
    uses = [(f"context_gain.{p}.corpus", gain.corpus, "n_examples", gain.n_examples)]
    uses += [
        (f"s0.{p}.corpora[{i}]", c, "n_examples", s0.n_examples) for i, c in enumerate(s0.corpora)
    ]
    for key in ("sweep", "context_sizes", "ngram", "bounded", "family"):
        use = getattr(s0, key)
        uses.append((f"s0.{p}.{key}.corpus", use.corpus, f"{key}.examples", use.examples))
    if s0.finetune.enabled:  # s0_finetune reads pubmedqa, a required slot
        uses.append(("", "pubmedqa", "finetune.docs", s0.finetune.docs))
    for key, corpus, count_key, count in uses:
        if corpus not in slots:
            raise fail(f"must name a slot of data.{p} ({', '.join(slots)})", key, value=corpus)
        held = slots[corpus].n
        if held is not None and count > held:
            group = "context_gain" if key.startswith("context_gain") else "s0"
            raise fail(
                f"must be <= data.{p}.{corpus}.n ({held}), the records that slot holds",
                f"{group}.{p}.{count_key}",
                value=count,
            )


def _check_prepared(params: Params, p: str) -> None:
    models, s0, s1 = getattr(params.models, p), getattr(params.s0, p), getattr(params.s1, p)
    named = [(f"models.{p}.lm", models.lm)]
    named += [(f"s0.{p}.lms[{i}]", lm) for i, lm in enumerate(s0.lms)]
    if s1.scores.models != "family":
        named += [(f"s1.{p}.scores.models[{i}]", m) for i, m in enumerate(s1.scores.models)]
    named += [(f"s1.{p}.public.model", s1.public.model)]
    named += [(f"s4.{p}.lm", getattr(params.s4, p).lm)]
    named += [(f"s2.{p}.lm", getattr(params.s2, p).lm)]
    for key, name in named:
        if name in EMBEDDED_LMS and name not in models.prepare:
            raise fail(f"an embedded model must be listed in models.{p}.prepare", key, value=name)


def _check_family(params: Params, p: str) -> None:
    family, s0 = getattr(params.family, p), getattr(params.s0, p)
    if getattr(params.s1, p).scores.models == "family" and len(family.sizes) < 2:
        raise fail(
            "must list >= 2 sizes (s1.scores.models: family fits trends over sizes)",
            f"family.{p}.sizes",
        )
    tokens = s0.family.context_tokens
    if tokens is not None and tokens + s0.family.max_new_tokens > family.window:
        raise fail(
            f"plus max_new_tokens ({s0.family.max_new_tokens}) must be <= "
            f"family.{p}.window ({family.window})",
            f"s0.{p}.family.context_tokens",
            value=tokens,
        )


def _check_s3_base(params: Params, p: str) -> None:
    """A base in data/family/ is a size train_family builds under this profile."""
    base = getattr(params.s3, p).base
    folder = posixpath.normpath(base)
    if folder.startswith(FAMILY_DIR):
        sizes = getattr(params.family, p).sizes
        if folder.removeprefix(FAMILY_DIR) not in sizes:
            raise fail(
                f"must be {FAMILY_DIR}<size> with a size of family.{p}.sizes ({', '.join(sizes)})",
                f"s3.{p}.base",
                value=base,
            )


def _check_frontier(params: Params, p: str) -> None:
    """The frontier's contexts are among those s4 retrieves for the non-private RAG."""
    top, rag_k = getattr(params.frontier, p).top_contexts, getattr(params.s4, p).generation.rag_k
    if top > rag_k:
        raise fail(f"must be <= s4.{p}.generation.rag_k ({rag_k}): a unit's contexts are the "
                   "first of s4_retrieve's top documents", f"frontier.{p}.top_contexts",
                   value=top)  # fmt: skip


def _check_mia(params: Params, p: str) -> None:
    """A family reference and the LiRA sizes are family sizes; a listed reference is listed."""
    mia, sizes = getattr(params.mia, p), list(getattr(params.family, p).sizes)
    if mia.models == "family":
        if mia.reference is not None and mia.reference not in sizes:
            raise fail(f"must be a size of family.{p}.sizes ({', '.join(sizes)}) or null",
                       f"mia.{p}.reference", value=mia.reference)  # fmt: skip
        for i, size in enumerate(mia.lira.sizes if mia.lira else []):
            if size not in sizes:
                raise fail(f"must be a size of family.{p}.sizes ({', '.join(sizes)})",
                           f"mia.{p}.lira.sizes[{i}]", value=size)  # fmt: skip
    elif mia.reference is not None and mia.reference not in mia.models:
        raise fail(f"must be one of mia.{p}.models (scored in the same pass) or null",
                   f"mia.{p}.reference", value=mia.reference)  # fmt: skip
