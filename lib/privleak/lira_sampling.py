"""The model side of S3's LiRa attack: draw top-k continuations of dialog contexts from a target
(`sample_continuations`), score them by mean per-token NLL under a model (`sequence_nll`; an
empty, whitespace-only generation scores NaN), and score held-out texts for test perplexity
(`held_out_nll`); `attack_target` runs all three for one target. `privleak.lira` turns these
scores into the attack's statistics.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privleak import models as registry
from privleak.batching import ForwardCounter, UnitCache
from privleak.decoding import Temperature, TopK, decode
from privleak.errors import require
from privleak.scoring import continuation_logprobs, shared_prefix_logprobs
from privleak.training.finetune import chunk_documents


def _prompt_ids(tokenizer, text: str) -> list[int]:
    """A prompt's token ids with the tokenizer's special tokens (BOS where it adds one)."""
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def is_empty(tokenizer, tokens: Sequence[int]) -> bool:
    """Whether generated ids (EOS already cut) show no text: none, or only whitespace."""
    return not tokenizer.decode(list(tokens), skip_special_tokens=True).strip()


# ---------------------------------------------------------------- step 1: sampling


@dataclass(frozen=True)
class Forbid:
    """A decoder transform that excludes the given token ids (logits [G, V] -> [G, V], theirs
    at -inf), like HF's bad_words_ids for single tokens: a redaction token no sample may hold.
    Applied first, so top-k picks among the allowed tokens."""

    token_ids: tuple[int, ...]

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.token_ids:
            return logits
        forbidden = torch.tensor(self.token_ids, device=logits.device)
        return logits.index_fill(-1, forbidden, float("-inf"))


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
    forbidden_token_ids: Sequence[int] = (),
    cache: UnitCache | None = None,
) -> list[dict]:
    """`samples` top-k continuations of each of P prompts: P x samples rows, prompt-major.

    Rows {prompt_id, sample (0..samples-1), tokens (ids before EOS: the decoder stops at EOS,
    which is cut), text (decoded, special tokens skipped), empty (`is_empty`)}. Draw s of prompt p
    is its own decoder group keyed (prompt_ids[p], s), so it depends on (seed, key) only, not on
    the other prompts or on batching. max_batch_streams (default: all) is rounded down to a
    multiple of `samples` (at least one prompt's): groups are chunked in prompt order, so a
    prompt's samples fall in one chunk, where the decoder prefills the repeated prompt once and
    forks its cache to the samples. Temperature applies before top-k, as in HF; the
    forbidden_token_ids (e.g. a redaction token) are excluded before both, so no draw holds one."""
    require(
        isinstance(samples, int) and samples >= 1, f"samples must be an int >= 1, got {samples}"
    )
    require(isinstance(top_k, int) and top_k >= 1, f"top_k must be an int >= 1, got {top_k}")
    require(
        len(prompts) == len(prompt_ids), f"{len(prompts)} prompts for {len(prompt_ids)} prompt_ids"
    )
    require(len(set(map(repr, prompt_ids))) == len(prompt_ids), "prompt_ids must be distinct")
    require(
        all(isinstance(t, int) and t >= 0 for t in forbidden_token_ids),
        f"forbidden_token_ids must be ints >= 0, got {list(forbidden_token_ids)!r}",
    )
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
        transforms=[Forbid(tuple(forbidden_token_ids)), Temperature(temperature), TopK(top_k)],
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


# ---------------------------------------------------------------- step 2: scores


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


# ---------------------------------------------------------------- utility: test perplexity


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


# ---------------------------------------------------------------- one target, whole


@functools.lru_cache(maxsize=4)
def _reference(folder: str, device: str):
    """A reference model and tokenizer, loaded once per process for all the targets it scores."""
    return registry.load(folder, device=device, dtype="float32")


def attack_target(
    target: str,
    references: Mapping[str, str],
    *,
    prompts: Sequence[str],
    prompt_ids: Sequence[Hashable],
    test_texts: Sequence[str],
    forbidden_tokens: Sequence[str],
    samples: int,
    top_k: int,
    max_new_tokens: int,
    max_batch_streams: int | None,
    batch_size: int,
    seq_len: int,
    seed: int,
    device: str,
) -> dict:
    """The attack's model work for one target folder: the job of a worker process.

    Args:
        target: the target model's folder.
        references: left-out domain j -> reference folder; a target that is itself the
            reference of j scores its own samples once, as both.
        forbidden_tokens: tokens sampling never emits (the redaction mask).

    Returns:
        {"rows": `sample_continuations` rows with "nll_self" and "nll_without_<j>" per
        reference (`sequence_nll`), "test_nll" [n], "test_tokens" [n] (`held_out_nll` of
        test_texts)}.
    """
    model, tokenizer = registry.load(target, device=device, dtype="float32")
    rows = sample_continuations(
        model,
        tokenizer,
        prompts,
        prompt_ids,
        samples=samples,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
        seed=seed,
        max_batch_streams=max_batch_streams,
        eos_token_id=tokenizer.eos_token_id,
        forbidden_token_ids=tokenizer.convert_tokens_to_ids(list(forbidden_tokens)),
    )
    prompt_of = dict(zip(prompt_ids, prompts, strict=True))
    prompt_texts = [prompt_of[row["prompt_id"]] for row in rows]
    tokens = [row["tokens"] for row in rows]

    def nll(scorer, scorer_tokenizer) -> np.ndarray:
        return sequence_nll(scorer, scorer_tokenizer, prompt_texts, tokens, batch_size=batch_size)

    scores = {"nll_self": nll(model, tokenizer)}
    for j, reference in references.items():
        scores[f"nll_without_{j}"] = (
            scores["nll_self"] if reference == target else nll(*_reference(reference, device))
        )
    test_nll, test_tokens = held_out_nll(
        model, tokenizer, test_texts, batch_size=batch_size, seq_len=seq_len
    )
    return {
        "rows": [
            row | {name: float(values[i]) for name, values in scores.items()}
            for i, row in enumerate(rows)
        ],
        "test_nll": test_nll,
        "test_tokens": test_tokens,
    }
