"""Sampled responses of the frontier's defenses on the shared decoder (docs/design.md §12).

`noisy_responses`: one stream per response, its logits perturbed by a noise (none, Static, PAD)
and sampled at temperature T; the responses of one prompt under every noise fork one prefill.
`mixed_responses`: CID's two streams (the RAG prompt, the public prompt) mixed by λ (bounded
under a per-token ε), T inside the mix; one prefill per prompt for every λ. A response's draws
depend on (seed, key) alone, so the same key on the same prompt draws the same response.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from privleak.cid import CIDMix
from privleak.decoding import Temperature, decode
from privleak.errors import require
from privleak.pad import LogitNoise, Noise, noise_seeds


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def noisy_responses(
    model,
    tokenizer,
    prompts: Sequence[Sequence[int]],
    keys: Sequence[Hashable],
    noises: Sequence[Noise | None],
    *,
    temperature: float,
    max_new_tokens: int,
    min_new_tokens: int,
    seed: int,
    max_batch_streams: int | None = None,
    cache=None,
) -> list[dict]:
    """One response per (prompt, key, noise): rows {tokens, text, sigma, sensitivity, protected}
    (the last three per step, `privleak.pad.LogitNoise`'s records; sigma 0 without noise).
    Rows of equal prompts should sit next to each other: a chunk prefills each distinct prompt
    once."""
    require(len(prompts) == len(keys) == len(noises) >= 1,
            "give one key and one noise per prompt, at least one prompt")  # fmt: skip
    decoded = decode(
        model, [list(p) for p in prompts], max_new_tokens=max_new_tokens,
        transforms=[Temperature(temperature)],
        mix=LogitNoise(list(noises), noise_seeds(seed, list(keys))), seed=seed,
        group_keys=list(keys), eos_token_id=tokenizer.eos_token_id,
        min_new_tokens=min_new_tokens, pad_id=_pad_id(tokenizer),
        max_batch_streams=max_batch_streams, cache=cache,
    )  # fmt: skip
    rows = []
    for g, tokens in enumerate(decoded.token_lists()):
        steps = len(tokens)
        rows.append({"tokens": tokens, "text": tokenizer.decode(tokens, skip_special_tokens=True),
                     **{name: decoded.records[name][g, :steps].tolist()
                        for name in ("sigma", "sensitivity", "protected")}})  # fmt: skip
    return rows


def mixed_responses(
    model,
    tokenizer,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    keys: Sequence[Hashable],
    lams: Sequence[float],
    eps: Sequence[float] | None,
    *,
    temperature: float,
    max_new_tokens: int,
    min_new_tokens: int,
    seed: int,
    max_batch_streams: int | None = None,
    cache=None,
) -> list[dict]:
    """One CID response per (RAG prompt, public prompt) pair with its λ (the upper limit of
    bounded CID when `eps` gives each response a per-token ε): rows {tokens, text, lam_used}
    (λ per step)."""
    require(len(pairs) == len(keys) == len(lams) >= 1, "give one key and λ per prompt pair")
    require(eps is None or len(eps) == len(pairs), "give one bounded-CID ε per prompt pair")
    mix = CIDMix(list(lams), temperature, eps=None if eps is None else list(eps),
                 eos_token_id=tokenizer.eos_token_id, min_new_tokens=min_new_tokens)  # fmt: skip
    decoded = decode(
        model, [list(s) for pair in pairs for s in pair], max_new_tokens=max_new_tokens,
        streams_per_group=2, mix=mix, seed=seed, group_keys=list(keys),
        eos_token_id=tokenizer.eos_token_id, min_new_tokens=min_new_tokens,
        pad_id=_pad_id(tokenizer), max_batch_streams=max_batch_streams, cache=cache,
    )  # fmt: skip
    return [
        {"tokens": tokens, "text": tokenizer.decode(tokens, skip_special_tokens=True),
         "lam_used": decoded.records["lam_used"][g, : len(tokens)].tolist()}
        for g, tokens in enumerate(decoded.token_lists())
    ]  # fmt: skip
