"""Each audited mechanism's exact output law on neighbouring inputs (D, D'), for many candidate
outputs at once, and its samples on either side.

A candidate is a token list y, the response after the canary's public answer prefix. For each
candidate, per position t:
- logp_in[t] = ln P_D'(y_t | y_<t), the canary in; logp_out[t] = ln P_D(y_t | y_<t); the privacy
  loss of y is L(y) = sum_t (logp_in[t] - logp_out[t]);
- worst[t] (DP-ICL and CID, whose token law is a closed form) = max over the whole vocabulary r of
  |ln P_D'(r | y_<t) - ln P_D(r | y_<t)|: the exact worst-case loss of the token released at that
  prefix, the quantity a per-token epsilon bounds.

The audited decoders never block EOS (min_new_tokens 0), so the forced law is the sampled one.
Mechanisms:
- DP-ICL (DP-RAG's token law, S4): one stream per document plus the public stream; D and D' use
  the same prefilled streams and differ in which document slots count.
- bounded CID (S0, Alg. 1): with-context streams for D and D' (prefilled together: the canary sits
  after their shared prefix) and the no-context prior; lambda is searched per position unless the
  variant drops the search (a broken control).
- PAD (S2): the RAG prompt with D or D' as context; each token's probability integrates the
  Gaussian noise exactly (`pad_law`: certified lower and upper bounds, no Monte-Carlo error),
  with sigma_t as the sampled mechanism computes it on each side's own logits. The claimed
  mechanism's per-step sigma_t, Delta_t and screening under D' are returned too, for the
  nominal epsilon (a broken control samples with less noise than it claims), and the realised
  logit shift between D and D', for PAD's premise that Delta_t bounds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from privleak.audit.canaries import Canary, neighbours
from privleak.audit.forced import chunks, forced_all, prefill
from privleak.audit.pad_law import law_bounds
from privleak.batching import ForwardCounter
from privleak.cid import bounded_lambda, cid_generate, cid_logprobs
from privleak.decoding import Temperature, decode, greedy
from privleak.dp_icl import dp_icl_utility
from privleak.dp_rag import Ask, DPICLSettings, dp_rag_generate, prompt_ids, stream_prompts
from privleak.pad import LogitNoise, Noise, PADSettings, noise_seeds, noise_std, settings_table
from privleak.pad_rag import encode_prompt, rag_prompt
from privleak.prompts import ContextPrompt, s0_prompt


@dataclass
class Scores:
    """Per candidate, per position: logp_in, logp_out, worst (empty where not computed) and, for
    PAD, the claimed mechanism's sigma, sensitivity and protected (module docstring)."""

    logp_in: list[list[float]] = field(default_factory=list)
    logp_out: list[list[float]] = field(default_factory=list)
    worst: list[list[float]] = field(default_factory=list)
    steps: dict[str, list[list[float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class CIDVariant:
    """Bounded CID at eps (lambda searched in [0, lam_max]); eps None samples at lam_max with no
    search (the broken control)."""

    lam_max: float
    eps: float | None
    temperature: float


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def _targets(candidates: Sequence[Sequence[int]], length: int, device) -> torch.Tensor:
    return torch.tensor([list(c) + [0] * (length - len(c)) for c in candidates], device=device)


def _worst(law_in: torch.Tensor, law_out: torch.Tensor) -> torch.Tensor:
    """[...] max over the last axis of |law_in - law_out|; a token both laws exclude counts 0."""
    both = torch.isinf(law_in) & torch.isinf(law_out)
    return (law_in - law_out).abs().masked_fill(both, 0.0).amax(-1)


def _members(part: range, subset: Sequence[int] | None) -> list[int]:
    """Positions within the chunk `part` of the candidates a variant scores (None: all)."""
    wanted = None if subset is None else set(subset)
    return [k for k, i in enumerate(part) if wanted is None or i in wanted]


def _append(scores: Scores, law_in, law_out, candidates, with_worst: bool) -> None:
    """Add the candidates' rows from their laws [c, L, V] under D' and D."""
    chosen = _targets(candidates, law_in.shape[1], law_in.device)[..., None]
    taken_in, taken_out = law_in.gather(-1, chosen)[..., 0], law_out.gather(-1, chosen)[..., 0]
    worst = _worst(law_in, law_out) if with_worst else None
    for j, candidate in enumerate(candidates):
        n = len(candidate)
        scores.logp_in.append(taken_in[j, :n].tolist())
        scores.logp_out.append(taken_out[j, :n].tolist())
        scores.worst.append(worst[j, :n].tolist() if with_worst else [])


# ---- DP-ICL ---------------------------------------------------------------------------------


def _dp_icl_slots(canary: Canary, relation: str) -> tuple[list[str], list[bool], list[bool]]:
    """(documents, present under D', present under D): D's documents, then the canary."""
    out_docs, in_docs = neighbours(canary, relation)
    documents = out_docs + [canary.document]
    present_out = [True] * len(out_docs) + [False]
    present_in = [True] * len(documents)
    if relation == "replace":
        present_in[len(out_docs) - 1] = False
    return documents, present_in, present_out


def dp_icl_scores(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, DPICLSettings],
    candidates: Sequence[Sequence[int]],
    *,
    subsets: Mapping[str, Sequence[int]] | None = None,
    batch_rows: int = 64,
    counter: ForwardCounter | None = None,
) -> dict[str, Scores]:
    """{variant: Scores} of the candidates under DP-ICL with D and with D' (module docstring):
    every candidate, or the sorted indices subsets[variant]. Every document stream is prefilled
    once and every candidate forwarded once, for both sides and every variant."""
    documents, present_in, present_out = _dp_icl_slots(canary, relation)
    streams = stream_prompts(tokenizer, canary.question, documents, template, canary.answer_prefix)
    pad, counter = _pad_id(tokenizer), counter if counter is not None else ForwardCounter()
    forked = prefill(model, streams, pad, counter)
    results = {name: Scores() for name in variants}
    for part in chunks(len(candidates), len(streams), batch_rows):
        chosen = [candidates[i] for i in part]
        logprobs = forced_all(model, forked, chosen, pad, counter)  # [1 + k, c, L, V]
        _, _, length, vocab = logprobs.shape
        for name, setting in variants.items():
            keep = _members(part, (subsets or {}).get(name))
            if not keep:
                continue
            rows = len(keep) * length
            picked = logprobs[:, torch.tensor(keep, device=logprobs.device)]
            public = picked[0].reshape(rows, vocab)
            docs = picked[1:].permute(1, 2, 0, 3).reshape(rows, len(documents), vocab)
            laws = []
            for present in (present_in, present_out):
                mask = torch.tensor(present, device=docs.device).expand(rows, -1)
                utility = dp_icl_utility(
                    public, docs, mask, setting.alpha, setting.clip, setting.theta
                )
                logits = setting.epsilon / setting.sensitivity * utility / (2 * setting.clip)
                laws.append(torch.log_softmax(logits, -1).view(len(keep), length, vocab))
            _append(results[name], *laws, [chosen[j] for j in keep], with_worst=True)
    return results


def dp_icl_samples(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, DPICLSettings],
    count: int,
    *,
    max_new_tokens: int,
    seed: int,
    max_batch_streams: int | None = None,
) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """{variant: (count responses under D', count under D)} of DP-ICL, from one call: every
    variant and both sides share one prefill of the question's streams."""
    out_docs, in_docs = neighbours(canary, relation)
    asks = [
        Ask((canary.id, name, side, j), canary.question, tuple(docs), setting,
            canary.answer_prefix)
        for name, setting in variants.items()
        for side, docs in (("in", in_docs), ("out", out_docs))
        for j in range(count)
    ]  # fmt: skip
    rows = dp_rag_generate(model, tokenizer, asks, template=template,
                           max_new_tokens=max_new_tokens, min_new_tokens=0, seed=seed,
                           max_batch_streams=max_batch_streams)  # fmt: skip
    return _split([list(row["tokens"]) for row in rows], list(variants), count)


def _split(
    tokens: list[list[int]], names: list[str], count: int
) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """Responses laid out variant-major, then D' before D, `count` each, as a mapping."""
    return {
        name: (tokens[2 * v * count : (2 * v + 1) * count],
               tokens[(2 * v + 1) * count : (2 * v + 2) * count])
        for v, name in enumerate(names)
    }  # fmt: skip


def rag_prompt_ids(tokenizer, canary: Canary, documents: Sequence[str], template: str) -> list[int]:
    """The ordinary (non-private) RAG prompt of DP-RAG with these documents: the undefended
    decoder that DP-ICL replaces."""
    return prompt_ids(tokenizer, canary.question, documents, template, canary.answer_prefix)


# ---- bounded CID ----------------------------------------------------------------------------


def cid_prompt(tokenizer, canary: Canary, documents: Sequence[str], template: str) -> ContextPrompt:
    """S0's document-QA prompt (PubMedQA's layout) with the documents as its context and the
    canary's question, the answer prefix opening the response."""
    record = {"question": canary.question, "context": " ".join(documents), "long_answer": ""}
    prompt, _ = s0_prompt(tokenizer, record, "pubmedqa", template, None)
    prefix = tokenizer(canary.answer_prefix, add_special_tokens=False)["input_ids"]
    return ContextPrompt(prompt.head, prompt.context, prompt.tail + list(prefix))


def cid_scores(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, CIDVariant],
    candidates: Sequence[Sequence[int]],
    *,
    subsets: Mapping[str, Sequence[int]] | None = None,
    batch_rows: int = 64,
    counter: ForwardCounter | None = None,
) -> dict[str, Scores]:
    """{variant: Scores} of the candidates (all, or the sorted indices subsets[variant]) under
    (bounded) CID with context D and D'; every candidate is forwarded once."""
    out_docs, in_docs = neighbours(canary, relation)
    inside = cid_prompt(tokenizer, canary, in_docs, template)
    outside = cid_prompt(tokenizer, canary, out_docs, template)
    pad, counter = _pad_id(tokenizer), counter if counter is not None else ForwardCounter()
    pair = prefill(model, [inside.ids, outside.ids], pad, counter)
    prior = prefill(model, [inside.with_context([]).ids], pad, counter)
    results = {name: Scores() for name in variants}
    for part in chunks(len(candidates), 3, batch_rows):
        chosen = [candidates[i] for i in part]
        contexts = forced_all(model, pair, chosen, pad, counter)  # [2, c, L, V]
        empty = forced_all(model, prior, chosen, pad, counter)[0]
        for name, variant in variants.items():
            keep = _members(part, (subsets or {}).get(name))
            if not keep:
                continue
            picked = torch.tensor(keep, device=contexts.device)
            prior_law = empty[picked]
            laws = []
            for context in contexts[:, picked]:
                lam = variant.lam_max
                if variant.eps is not None:
                    lam = bounded_lambda(
                        context, prior_law, variant.eps, variant.lam_max, variant.temperature
                    )
                laws.append(cid_logprobs(context, prior_law, lam, variant.temperature))
            _append(results[name], *laws, [chosen[j] for j in keep], with_worst=True)
    return results


def cid_samples(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, CIDVariant],
    count: int,
    *,
    max_new_tokens: int,
    seed: int,
    max_batch_streams: int | None = None,
) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """{variant: (count responses under D', count under D)} of (bounded) CID, from one decode
    call (a variant without a search samples at eps = inf: its lambda is always lam_max)."""
    out_docs, in_docs = neighbours(canary, relation)
    prompts = [cid_prompt(tokenizer, canary, docs, template) for docs in (in_docs, out_docs)]
    names = list(variants)
    generation = cid_generate(
        model,
        [prompts[0]] * count + [prompts[1]] * count,
        [(variants[n].lam_max, variants[n].temperature) for n in names],
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        eos_token_id=tokenizer.eos_token_id,
        pad_id=_pad_id(tokenizer),
        seed=seed,
        eps=[math.inf if variants[n].eps is None else variants[n].eps for n in names],
        example_ids=[(canary.id, side, j) for side in ("in", "out") for j in range(count)],
        max_batch_streams=max_batch_streams,
    )
    tokens = generation.token_lists()  # prompt-major, then variant
    by_variant = [tokens[v + len(names) * p] for v in range(len(names)) for p in range(2 * count)]
    return _split(by_variant, names, count)


# ---- PAD ------------------------------------------------------------------------------------


def pad_prompt_ids(tokenizer, canary: Canary, documents: Sequence[str], template: str) -> list[int]:
    """S2's RAG prompt with the documents as context, the answer prefix opening the response."""
    prefix = tokenizer(canary.answer_prefix, add_special_tokens=False)["input_ids"]
    return encode_prompt(tokenizer, rag_prompt(canary.question, documents), template) + list(prefix)


def logit_shift(law_in: torch.Tensor, law_out: torch.Tensor) -> torch.Tensor:
    """[R] the l2 norm of the log-probs' change from D to D' at R prefixes ([R, V] each), less
    its mean over the tokens both sides can emit: the smallest shift of the logits, up to the
    constant that no softmax sees, that PAD's Gaussian has to hide (its premise: <= Delta_t)."""
    both = torch.isfinite(law_in) & torch.isfinite(law_out)
    change = torch.where(both, law_in - law_out, 0.0).double()
    count = both.sum(-1).clamp(min=1)
    centred = torch.where(both, change - (change.sum(-1) / count)[:, None], 0.0)
    return centred.norm(dim=-1)


def pad_scores(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, tuple[Noise, PADSettings]],
    candidates: Sequence[Sequence[int]],
    *,
    temperature: float,
    subsets: Mapping[str, Sequence[int]] | None = None,
    batch_rows: int = 64,
    counter: ForwardCounter | None = None,
) -> dict[str, Scores]:
    """{variant: Scores} of the candidates under PAD with context D and D'. variants: {name:
    (the noise sampled, the PAD settings it claims)}. Each token's probability is integrated
    exactly (`pad_law`): Scores.steps holds its certified bounds (logp_in_low, logp_in_high,
    logp_out_low, logp_out_high; logp_in and logp_out are their midpoints), the claimed
    settings' sigma, sensitivity and protected at each position under D' (and under D: sigma_d,
    sensitivity_d, protected_d), and the realised logit shift between D and D' (`logit_shift`)
    beside the larger of the claimed Delta_t under D and D' (premise_sensitivity). A variant
    scores every candidate or the sorted indices subsets[variant]; every candidate is forwarded
    once."""
    out_docs, in_docs = neighbours(canary, relation)
    prompts = [pad_prompt_ids(tokenizer, canary, docs, template) for docs in (in_docs, out_docs)]
    pad, counter = _pad_id(tokenizer), counter if counter is not None else ForwardCounter()
    pair = prefill(model, prompts, pad, counter)
    records = ("sigma", "sensitivity", "protected", "sigma_d", "sensitivity_d", "protected_d",
               "premise_sensitivity", "shift",
               "logp_in_low", "logp_in_high", "logp_out_low", "logp_out_high")  # fmt: skip
    results = {name: Scores(steps={r: [] for r in records}) for name in variants}
    for part in chunks(len(candidates), 2, batch_rows):
        chosen = [candidates[i] for i in part]
        logprobs = forced_all(model, pair, chosen, pad, counter).float()  # [2, c, L, V]
        for name, (noise, claimed) in variants.items():
            keep = _members(part, (subsets or {}).get(name))
            if not keep:
                continue
            owners = [(j, t) for j in keep for t in range(len(chosen[j]))]
            which = torch.tensor([j for j, _ in owners])
            at = torch.tensor([t for _, t in owners])
            targets = np.array([chosen[j][t] for j, t in owners])
            positions = (at + 1).to(logprobs.device)
            laws = [logprobs[side][which, at] for side in (0, 1)]
            bounds = []
            for law in laws:
                sigma = noise_std(law, positions, _rows([noise] * len(owners), law.device))[0]
                bounds += law_bounds(law.double().cpu().numpy(), targets,
                                     sigma.double().cpu().numpy(), temperature)  # fmt: skip
            claimed_rows = _rows([claimed], laws[0].device, owners)
            claimed_steps = [noise_std(law, positions, claimed_rows) for law in laws]
            either = torch.maximum(claimed_steps[0][1], claimed_steps[1][1])
            values = dict(zip(records, [*(v.double().cpu().numpy() for v in claimed_steps[0]),
                                        *(v.double().cpu().numpy() for v in claimed_steps[1]),
                                        either.double().cpu().numpy(),
                                        logit_shift(*laws).cpu().numpy(), *bounds],
                              strict=True))  # fmt: skip
            scores, start = results[name], 0
            for j in keep:
                end = start + len(chosen[j])
                for side, (low, high) in (("in", bounds[:2]), ("out", bounds[2:])):
                    getattr(scores, f"logp_{side}").append(((low + high) / 2)[start:end].tolist())
                scores.worst.append([])
                for record, value in values.items():
                    scores.steps[record].append(value[start:end].tolist())
                start = end
    return results


def _rows(noises: Sequence[Noise], device, owners: Sequence | None = None) -> dict:
    """`settings_table` columns of the noises on `device`; one noise repeated len(owners) times
    when owners is given."""
    table = settings_table(noises)
    if owners is not None:
        table = {k: v[[0] * len(owners)] for k, v in table.items()}
    return {k: v.to(device) for k, v in table.items()}


def pad_samples(
    model,
    tokenizer,
    canary: Canary,
    relation: str,
    template: str,
    variants: Mapping[str, Noise],
    count: int,
    *,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    max_batch_streams: int | None = None,
    forward_mode: str = "auto",
) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """{variant: (count responses under D', count under D)} of each variant's noise, from one
    decode call (a prompt is prefilled once for every variant)."""
    out_docs, in_docs = neighbours(canary, relation)
    prompts = [pad_prompt_ids(tokenizer, canary, docs, template) for docs in (in_docs, out_docs)]
    keys = [(canary.id, name, side, j) for name in variants for side in ("in", "out")
            for j in range(count)]  # fmt: skip
    decoded = decode(
        model,
        [prompts[0] if side == "in" else prompts[1] for _, _, side, _ in keys],
        max_new_tokens=max_new_tokens,
        transforms=[Temperature(temperature)],
        mix=LogitNoise([variants[name] for _, name, _, _ in keys], noise_seeds(seed, keys)),
        seed=seed,
        group_keys=keys,
        eos_token_id=tokenizer.eos_token_id,
        pad_id=_pad_id(tokenizer),
        max_batch_streams=max_batch_streams,
        forward_mode=forward_mode,
    )
    return _split(decoded.token_lists(), list(variants), count)


# ---- the undefended decoder -----------------------------------------------------------------


def greedy_response(model, tokenizer, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """The plain LM's greedy response to one prompt: the undefended output, a natural candidate."""
    decoded = decode(model, [list(prompt)], max_new_tokens=max_new_tokens, transforms=[greedy()],
                     eos_token_id=tokenizer.eos_token_id, pad_id=_pad_id(tokenizer))  # fmt: skip
    return decoded.token_lists()[0]
