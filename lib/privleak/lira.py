"""S3's measures of domain privacy: the LiRa attack on multi-domain dialog models, the empirical
domain-privacy ratio, and test perplexity.

The attack (the paper's three steps, for a context domain d_i and a leaked domain d_j):
1. `sample_continuations`: the target M_D draws `samples` continuations of every d_i context
   (top-k sampling) through the shared decoder;
2. `sequence_nll` under the target and under the reference M_{D without d_j}, `lira_scores` =
   log(ref_ppl) / log(target_ppl), and `select_candidates` keeps the samples most likely under the
   target w.r.t. the reference;
3. a selected sample that the policy F_j flags succeeds: `lira_success_rate` =
   #success / #non-empty generations, per leaked domain and over all of them
   (`lira_success_rates`; `lira_picks` gives the picked and successful samples behind them, and
   `zero_success_interval` an interval where no sample succeeds).

`domain_privacy` estimates C = Pr[M_D(c_i) in d_j] / Pr[M_{D without d_j}(c_i) in d_j] from every
non-empty sample of both models, and `domain_privacy_interval` bootstraps it over prompts.

A generation is *empty* when its text (special tokens skipped, EOS cut) is whitespace only, as in
the paper's official code; empty generations get no score (NaN) and leave the rate's denominator.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats

from privleak import claims
from privleak.batching import ForwardCounter, UnitCache
from privleak.decoding import Temperature, TopK, decode
from privleak.errors import require
from privleak.scoring import continuation_logprobs, shared_prefix_logprobs
from privleak.training.finetune import chunk_documents

OVERALL = "overall"
"""The key of the rate over every leaked domain in `lira_success_rates`."""


def _prompt_ids(tokenizer, text: str) -> list[int]:
    """A prompt's token ids with the tokenizer's special tokens (BOS where it adds one)."""
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def is_empty(tokenizer, tokens: Sequence[int]) -> bool:
    """Whether generated ids (EOS already cut) show no text: none, or only whitespace."""
    return not tokenizer.decode(list(tokens), skip_special_tokens=True).strip()


# ---------------------------------------------------------------- step 1: sampling


def sample_continuations(
    model,
    tokenizer,
    prompts: Sequence[str],
    prompt_ids: Sequence[Hashable],
    *,
    samples: int,
    top_k: int,
    temperature: float = 1.0,
    max_new_tokens: int,
    seed: int,
    max_batch_streams: int | None,
    eos_token_id: int | None,
    cache: UnitCache | None = None,
) -> list[dict]:
    """`samples` top-k continuations of each of P prompts: P x samples rows, prompt-major.

    Rows {prompt_id, sample (0..samples-1), tokens (ids before EOS: the decoder stops at EOS,
    which is cut), text (decoded, special tokens skipped), empty (`is_empty`)}. Draw s of prompt p
    is its own decoder group keyed (prompt_ids[p], s), so it depends on (seed, key) only, not on
    the other prompts or on batching. max_batch_streams (default: all) is rounded down to a
    multiple of `samples` (at least one prompt's): groups are chunked in prompt order, so a
    prompt's samples fall in one chunk, where the decoder prefills the repeated prompt once and
    forks its cache to the samples. Temperature applies before top-k, as in HF."""
    require(
        isinstance(samples, int) and samples >= 1, f"samples must be an int >= 1, got {samples}"
    )
    require(isinstance(top_k, int) and top_k >= 1, f"top_k must be an int >= 1, got {top_k}")
    require(
        len(prompts) == len(prompt_ids), f"{len(prompts)} prompts for {len(prompt_ids)} prompt_ids"
    )
    require(len(set(map(repr, prompt_ids))) == len(prompt_ids), "prompt_ids must be distinct")
    require(
        max_batch_streams is None or max_batch_streams >= samples,
        f"max_batch_streams must be >= samples ({samples}), got {max_batch_streams}",
    )
    budget = None if max_batch_streams is None else max_batch_streams // samples * samples
    ids = [_prompt_ids(tokenizer, text) for text in prompts]
    keys = [(key, s) for key in prompt_ids for s in range(samples)]
    decoded = decode(
        model,
        [prompt for prompt in ids for _ in range(samples)],
        max_new_tokens=max_new_tokens,
        transforms=[Temperature(temperature), TopK(top_k)],
        seed=seed,
        group_keys=keys,
        eos_token_id=eos_token_id,
        pad_id=_pad_id(tokenizer),
        max_batch_streams=budget,
        cache=cache,
    )
    rows = []
    for tokens, (key, s) in zip(decoded.token_lists(), keys, strict=True):
        if eos_token_id is not None and tokens and tokens[-1] == eos_token_id:
            tokens = tokens[:-1]
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        rows.append(
            {
                "prompt_id": key,
                "sample": s,
                "tokens": tokens,
                "text": text,
                "empty": is_empty(tokenizer, tokens),
            }
        )
    return rows


# ---------------------------------------------------------------- step 2: scores and selection


def grouped_continuation_logprobs(
    model,
    prompts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    *,
    batch_size: int,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
) -> list[torch.Tensor]:
    """`privleak.scoring.continuation_logprobs` (the i-th a [len(continuations[i])] float32
    tensor) for rows that repeat prompts: each distinct prompt is forwarded once and its cache
    shared by all of its continuations (`shared_prefix_logprobs`), so a prompt's samples cost
    their own tokens only. Prompts need >= 1 token; empty continuations give empty tensors."""
    require(
        len(prompts) == len(continuations),
        f"{len(prompts)} prompts for {len(continuations)} continuations",
    )
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    rows_of: dict[tuple[int, ...], list[int]] = {}
    for i, (prompt, continuation) in enumerate(zip(prompts, continuations, strict=True)):
        if continuation:
            rows_of.setdefault(tuple(prompt), []).append(i)
    results = [torch.zeros(0) for _ in prompts]
    for prompt, rows in rows_of.items():
        scores = shared_prefix_logprobs(
            model,
            prompt,
            [[] for _ in rows],
            [continuations[i] for i in rows],
            batch_size=batch_size,
            pad_id=pad_id,
            counter=counter,
        )
        for i, row in zip(rows, scores, strict=True):
            results[i] = row
    return results


def sequence_nll(
    model,
    tokenizer,
    prompts: Sequence[str],
    continuations: Sequence[Sequence[int]],
    *,
    batch_size: int,
) -> np.ndarray:
    """[n] float64 mean per-token NLL (natural log perplexity) of each continuation's ids given its
    prompt's text, NaN for an empty one (`is_empty`).

    Score the `tokens` of `sample_continuations` rows: the exact sampled ids (no re-tokenisation
    of the text) without the EOS. The EOS is left out so the score is the perplexity of the text
    the policy reads, equal for a sample that stopped and one cut at max_new_tokens (Carlini et
    al. score the sample's text). Prompts are encoded as for sampling; rows sharing a prompt share
    its forward (`grouped_continuation_logprobs`)."""
    require(
        len(prompts) == len(continuations),
        f"{len(prompts)} prompts for {len(continuations)} continuations",
    )
    empty = [is_empty(tokenizer, tokens) for tokens in continuations]
    logprobs = grouped_continuation_logprobs(
        model,
        [_prompt_ids(tokenizer, text) for text in prompts],
        [[] if blank else list(tokens) for blank, tokens in zip(empty, continuations, strict=True)],
        batch_size=batch_size,
        pad_id=_pad_id(tokenizer),
    )
    return np.array(
        [
            math.nan if blank else -row.double().mean().item()
            for blank, row in zip(empty, logprobs, strict=True)
        ]
    )


def lira_scores(target_nll, reference_nll) -> np.ndarray:
    """[n] log(ref_ppl) / log(target_ppl) = reference_nll / target_nll (both [n] mean NLLs);
    higher = the sample is more likely under the target w.r.t. the reference.

    NaN where either NLL is NaN (empty). A mean NLL is >= 0; target_nll == 0 (every token
    predicted with probability 1) scores +inf when reference_nll > 0 (the target is infinitely
    more confident: ranked first) and 1.0 when reference_nll is 0 too (the models agree)."""
    target, reference = np.asarray(target_nll, float), np.asarray(reference_nll, float)
    require(
        target.shape == reference.shape,
        f"target_nll has shape {target.shape}, reference_nll {reference.shape}",
    )
    finite = ~np.isnan(target) & ~np.isnan(reference)
    require(
        bool((target[finite] >= 0).all() and (reference[finite] >= 0).all()),
        "NLLs must be >= 0 (mean negative log-probs) or NaN",
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = reference / target
    return np.where(finite & (target == 0) & (reference == 0), 1.0, scores)


def select_candidates(
    scores, prompt_ids: Sequence[Hashable], *, per_prompt: int | None = None, top: int | None = None
) -> np.ndarray:
    """[n] bool: the samples the attack selects from scores [n] (`lira_scores`) of samples whose
    prompts are prompt_ids [n]. Exactly one of:
    - per_prompt=m: each prompt's m highest-scoring samples;
    - top=n: the n highest-scoring samples over all prompts (Carlini et al.'s global ranking).
    NaN (empty) is never selected, so a group with fewer scored samples keeps them all; ties go to
    the earlier sample.

    The paper gives no count. The S3 stage uses per_prompt=1: the attacker's best guess for each
    context. Scores of different prompts are not on one scale (a prompt fixes how predictable its
    continuations are under both models), and a per-prompt choice keeps prompts independent, which
    the bootstrap over prompts needs (a global top-n couples every prompt to all others).
    per_prompt = samples selects every non-empty sample: the rate the official code reports."""
    values = np.asarray(scores, float)
    require(values.ndim == 1, f"scores must be one-dimensional, got shape {values.shape}")
    require(
        len(prompt_ids) == len(values), f"{len(values)} scores for {len(prompt_ids)} prompt_ids"
    )
    require(
        (per_prompt is None) != (top is None),
        f"give exactly one of per_prompt, top; got per_prompt={per_prompt}, top={top}",
    )
    count = per_prompt if top is None else top
    name = "per_prompt" if top is None else "top"
    require(isinstance(count, int) and count >= 1, f"{name} must be an int >= 1, got {count}")
    codes = np.zeros(len(values), int) if top is not None else _codes(prompt_ids)
    # Sort by group, then score descending (NaN last), then index: a stable rank within groups.
    order = np.lexsort((np.arange(len(values)), -values, codes))
    starts = np.searchsorted(codes[order], codes[order], side="left")
    rank = np.empty(len(values), int)
    rank[order] = np.arange(len(values)) - starts
    return (rank < count) & ~np.isnan(values)


def _codes(ids: Sequence[Hashable]) -> np.ndarray:
    """[n] an int per distinct id (by repr, as decoder group keys), in order of first use."""
    index: dict[str, int] = {}
    return np.array([index.setdefault(repr(key), len(index)) for key in ids], dtype=int)


# ---------------------------------------------------------------- step 3: success rate


class Rate(NamedTuple):
    """#success / #non-empty generations (NaN when there are none) and its two counts."""

    rate: float
    successes: int
    nonempty: int


def lira_success_rate(selected_mask, leaked_mask, nonempty_mask) -> Rate:
    """The LiRa attack success rate over n samples.

    selected_mask, leaked_mask: [n] for one leaked domain j (selected with M_{D without d_j}'s
    scores, flagged by F_j), or [J, n] for J domains. nonempty_mask: [n]. A sample succeeds when
    it is non-empty and, for some j, both selected under j's reference and flagged by F_j: with
    [J, n] masks a sample counts once however many domains it leaks, so the overall rate is
    #samples that leak some domain / #non-empty (the official code likewise counts a generation
    once when it is flagged for any target domain)."""
    selected, leaked = np.asarray(selected_mask, bool), np.asarray(leaked_mask, bool)
    nonempty = np.asarray(nonempty_mask, bool)
    require(nonempty.ndim == 1, f"nonempty_mask must be [n], got shape {nonempty.shape}")
    for name, mask in (("selected_mask", selected), ("leaked_mask", leaked)):
        require(
            mask.shape[-1:] == nonempty.shape and mask.ndim in (1, 2),
            f"{name} has shape {mask.shape}; allowed [n] or [J, n] with n = {len(nonempty)}",
        )
    require(selected.shape == leaked.shape, f"{selected.shape} selected vs {leaked.shape} leaked")
    success = (selected & leaked).reshape(-1, len(nonempty)).any(0) & nonempty
    successes, total = int(success.sum()), int(nonempty.sum())
    return Rate(successes / total if total else math.nan, successes, total)


class Picks(NamedTuple):
    """[n] bool masks over a target's samples: those the attack picked (non-empty by
    construction), and those that succeeded (picked and flagged)."""

    selected: np.ndarray
    success: np.ndarray


def lira_picks(
    scores: Mapping[str, np.ndarray],
    leaked: Mapping[str, np.ndarray],
    nonempty_mask,
    prompt_ids: Sequence[Hashable],
    *,
    per_prompt: int | None = None,
    top: int | None = None,
) -> dict[str, Picks]:
    """{domain j: Picks, OVERALL: Picks} for n target samples: scores[j] [n] are `lira_scores`
    under j's reference model, leaked[j] [n] F_j's verdicts. Selection per `select_candidates`,
    done separately for each j; OVERALL's masks are the union over j, so a sample that succeeds
    for several domains counts once. The per-sample masks let a caller resample prompts or
    contrast two targets prompt by prompt."""
    require(len(scores) >= 1, "give scores for at least one leaked domain")
    require(OVERALL not in scores, f"{OVERALL!r} is reserved for the overall rate")
    for domain in leaked:
        require(domain in scores, f"unknown domain {domain!r} in leaked; scored: {list(scores)}")
    for domain in scores:
        require(domain in leaked, f"domain {domain!r} has scores but no leaked mask")
    nonempty = np.asarray(nonempty_mask, bool)
    require(nonempty.ndim == 1, f"nonempty_mask must be [n], got shape {nonempty.shape}")
    picks = {}
    for domain in scores:
        flagged = np.asarray(leaked[domain], bool)
        require(
            flagged.shape == nonempty.shape,
            f"leaked[{domain!r}] has shape {flagged.shape}; expected {nonempty.shape}",
        )
        chosen = select_candidates(scores[domain], prompt_ids, per_prompt=per_prompt, top=top)
        require(
            chosen.shape == nonempty.shape,
            f"scores[{domain!r}] has shape {chosen.shape}; expected {nonempty.shape}",
        )
        picks[domain] = Picks(chosen & nonempty, chosen & flagged & nonempty)
    masks = list(picks.values())
    picks[OVERALL] = Picks(*(np.any([p[k] for p in masks], axis=0) for k in range(2)))
    return picks


def lira_success_rates(
    scores: Mapping[str, np.ndarray],
    leaked: Mapping[str, np.ndarray],
    nonempty_mask,
    prompt_ids: Sequence[Hashable],
    *,
    per_prompt: int | None = None,
    top: int | None = None,
) -> dict[str, Rate]:
    """{domain j: Rate, OVERALL: Rate}: each `lira_picks` mask's successes over the non-empty
    samples (arguments as there)."""
    picks = lira_picks(scores, leaked, nonempty_mask, prompt_ids, per_prompt=per_prompt, top=top)
    total = int(np.asarray(nonempty_mask, bool).sum())
    return {
        key: Rate(int(p.success.sum()) / total if total else math.nan, int(p.success.sum()), total)
        for key, p in picks.items()
    }


def zero_success_interval(
    prompts: int, selected: int, nonempty: int, *, alpha: float
) -> tuple[float, float]:
    """(0, upper): the (1 - alpha) interval of a LiRa success rate that saw no success in
    `nonempty` samples of `prompts` prompts, `selected` of which the attack picked.

    A bootstrap over prompts has nothing to resample here (every resample reads 0), yet 0 of n is
    no proof the rate is 0. The bound counts prompts, the independent unit, not samples (a
    prompt's samples share its context): only picked samples can succeed, so the rate is at most
    q * selected / nonempty, q the chance that a prompt's picks leak. q's exact (Clopper-Pearson)
    two-sided upper bound at 0 successes of `prompts` is 1 - (alpha / 2) ** (1 / prompts)."""
    for name, count in (("prompts", prompts), ("selected", selected)):
        require(isinstance(count, int) and count >= 1, f"{name} must be an int >= 1, got {count}")
    require(
        isinstance(nonempty, int) and nonempty >= selected,
        f"nonempty must be an int >= selected ({selected}), got {nonempty}",
    )
    require(0 < alpha < 0.5, f"alpha must be in (0, 0.5), got {alpha}")
    q = stats.binomtest(0, prompts).proportion_ci(1 - alpha, method="exact").high
    return 0.0, q * selected / nonempty


# ---------------------------------------------------------------- domain privacy


@dataclass(frozen=True)
class DomainPrivacy:
    """The empirical C of one leaked domain and the counts it rests on.

    ratio: target_rate / reference_rate; target_rate, reference_rate: flagged non-empty samples /
    non-empty samples (pseudocounts included)."""

    ratio: float
    target_rate: float
    reference_rate: float
    target_flagged: int
    target_nonempty: int
    reference_flagged: int
    reference_nonempty: int


def _rate(flagged: float, nonempty: float, pseudocount: float) -> float:
    total = nonempty + 2 * pseudocount
    return (flagged + pseudocount) / total if total else math.nan


def _ratio(target_rate: float, reference_rate: float) -> float:
    """target / reference; inf for a positive target over 0, NaN for 0 / 0 or a NaN rate."""
    if reference_rate == 0:
        return math.inf if target_rate > 0 else math.nan
    return target_rate / reference_rate


def domain_privacy(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    *,
    pseudocount: float = 0.0,
) -> DomainPrivacy:
    """Pr_target[flagged by F_j] / Pr_reference[flagged by F_j] over all non-empty samples of
    each model (target masks [n_t], reference masks [n_r]; flags of empty samples are ignored).

    Zero denominators: with pseudocount 0 the plain ratio is returned, inf when the reference
    never leaks but the target does (no finite C bounds it), NaN when neither leaks (0 / 0: every
    C holds, none is estimated) or a model has no non-empty sample; the counts say which. A
    pseudocount a > 0 gives the add-a estimate (flagged + a) / (non-empty + 2a) per model (a = 0.5:
    Jeffreys' prior mean), finite and positive whenever both models have samples."""
    require(pseudocount >= 0, f"pseudocount must be >= 0, got {pseudocount}")
    counts = []
    for side, flagged, nonempty in (
        ("target", target_flagged, target_nonempty),
        ("reference", reference_flagged, reference_nonempty),
    ):
        flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
        require(
            flagged.shape == nonempty.shape and flagged.ndim == 1,
            f"{side}_flagged has shape {flagged.shape}, {side}_nonempty {nonempty.shape}",
        )
        counts += [int((flagged & nonempty).sum()), int(nonempty.sum())]
    target_rate = _rate(counts[0], counts[1], pseudocount)
    reference_rate = _rate(counts[2], counts[3], pseudocount)
    return DomainPrivacy(_ratio(target_rate, reference_rate), target_rate, reference_rate, *counts)


def domain_privacy_interval(
    target_flagged,
    reference_flagged,
    target_nonempty,
    reference_nonempty,
    target_prompt_ids: Sequence[Hashable],
    reference_prompt_ids: Sequence[Hashable],
    *,
    n_boot: int,
    seed: int,
    alpha: float = 0.05,
    pseudocount: float = 0.0,
    min_units: int = 2,
    method: str = "percentile",
    target_runs: Sequence[Hashable] | None = None,
) -> claims.Estimate:
    """`domain_privacy`'s ratio and its (1 - alpha) bootstrap interval over prompts (min_units
    and method as in `privleak.claims.bootstrap`).

    The unit is the prompt: a prompt's samples come from one context, so they are not
    independent, and a drawn prompt brings all of its samples under both models along (the same
    contexts drive target and reference, so the two rates stay paired). `privleak.claims.bootstrap`
    gives no interval, with a note, when a resample's ratio is not finite (a reference with no
    flagged sample; a pseudocount > 0 avoids it) or fewer than two prompts.

    target_runs: the training run of each target sample, when the target was trained several
    times (every run with the same samples per prompt); runs and prompts are then resampled as
    crossed factors, each run's samples of a prompt paired with the (one) reference's samples of
    that prompt (fewer than min_units runs: no interval)."""
    target_flagged, reference_flagged = np.asarray(target_flagged), np.asarray(reference_flagged)
    require(
        len(target_prompt_ids) == len(target_flagged),
        f"{len(target_flagged)} target samples for {len(target_prompt_ids)} target_prompt_ids",
    )
    require(
        len(reference_prompt_ids) == len(reference_flagged),
        f"{len(reference_flagged)} reference samples for {len(reference_prompt_ids)} "
        "reference_prompt_ids",
    )
    # The point estimate's checks (mask shapes, pseudocount) hold for the resampled rows too.
    domain_privacy(
        target_flagged,
        reference_flagged,
        target_nonempty,
        reference_nonempty,
        pseudocount=pseudocount,
    )
    target = _flag_rows(1.0, target_flagged, target_nonempty)
    reference = _flag_rows(0.0, reference_flagged, reference_nonempty)
    target_groups, reference_groups = list(target_prompt_ids), list(reference_prompt_ids)
    crossing, copies = {}, 1
    if target_runs is not None:
        require(
            len(target_runs) == len(target_flagged),
            f"{len(target_flagged)} target samples for {len(target_runs)} target_runs",
        )
        # Each run's cell of a prompt: that run's samples of it and the reference's samples of it.
        run_codes = _codes(target_runs)
        runs = range(int(run_codes.max()) + 1)
        copies = len(runs)  # a resample draws len(runs) runs, each with the reference's rows
        reference = np.concatenate([reference] * copies)
        reference_groups = reference_groups * len(runs)
        crossing["runs"] = np.r_[run_codes, np.repeat(runs, len(reference_flagged))]
    rows = np.r_[target, reference]
    return claims.bootstrap(
        rows,
        partial(_ratio_of_rows, pseudocount=pseudocount, reference_copies=copies),
        n_boot=n_boot,
        seed=seed,
        alpha=alpha,
        min_units=min_units,
        method=method,
        groups=_codes([*target_groups, *reference_groups]),
        **crossing,
    )


def _flag_rows(is_target: float, flagged, nonempty) -> np.ndarray:
    """Rows [is_target, flagged and non-empty, non-empty], one per sample."""
    flagged, nonempty = np.asarray(flagged, bool), np.asarray(nonempty, bool)
    return np.c_[np.full(len(flagged), is_target), flagged & nonempty, nonempty]


def _ratio_of_rows(drawn: np.ndarray, pseudocount: float, reference_copies: int = 1) -> float:
    """domain_privacy's ratio of `_flag_rows` rows (target and reference rows together), where
    the reference's rows come `reference_copies` times (once per drawn training run)."""
    target = drawn[:, 0] == 1
    flagged, nonempty = drawn[:, 1], drawn[:, 2]
    return _ratio(
        _rate(flagged[target].sum(), nonempty[target].sum(), pseudocount),
        _rate(
            flagged[~target].sum() / reference_copies,
            nonempty[~target].sum() / reference_copies,
            pseudocount,
        ),
    )


# ---------------------------------------------------------------- utility


def held_out_nll(
    model, tokenizer, texts: Sequence[str], *, batch_size: int, seq_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per text: its summed NLL [n] float64 (natural log) and its number of scored tokens [n]
    int64, so perplexity = exp(nll.sum() / tokens.sum()) and held-out texts can be resampled.

    Each text is encoded with the tokenizer's special tokens (BOS where it adds one) and cut into
    pieces of <= seq_len tokens exactly as `privleak.training.finetune.chunk_documents` cuts
    training documents; a piece's first token is context only (scoring needs >= 1 prompt token),
    every other token is scored, so this is the fine-tuning loss on the same pieces. With a
    BOS-less tokenizer (the family's, GPT-2's) a text's first token is therefore not scored, and a
    one-token text scores nothing (0 tokens, NLL 0)."""
    require(len(texts) >= 1, "held-out NLL needs at least one text")
    pieces, owners = [], []
    for i, text in enumerate(texts):
        for piece in chunk_documents([_prompt_ids(tokenizer, text)], seq_len):
            pieces.append(piece)
            owners.append(i)
    require(len(pieces) >= 1, "no text has >= 2 tokens: nothing to score")
    logprobs = continuation_logprobs(
        model,
        [piece[:1] for piece in pieces],
        [piece[1:] for piece in pieces],
        batch_size=batch_size,
        pad_id=_pad_id(tokenizer),
    )
    nll, tokens = np.zeros(len(texts)), np.zeros(len(texts), dtype=np.int64)
    for i, row in zip(owners, logprobs, strict=True):
        nll[i] += -float(row.double().sum())
        tokens[i] += len(row)
    return nll, tokens


def held_out_perplexity(
    model, tokenizer, texts: Sequence[str], *, batch_size: int, seq_len: int
) -> float:
    """Token-weighted perplexity exp(sum NLL / #scored tokens) of held-out texts, scored as
    `held_out_nll` scores them."""
    nll, tokens = held_out_nll(model, tokenizer, texts, batch_size=batch_size, seq_len=seq_len)
    return math.exp(math.fsum(nll) / int(tokens.sum()))
