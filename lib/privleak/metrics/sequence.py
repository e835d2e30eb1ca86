"""Sequence-level leakage (Tiwari & Suh): TP, ESP, n-ISP, its Appendix A bound, leak curves and
the six trend types.

Notation: a sequence is a (prefix, suffix) pair of token-id lists, the suffix t_1..t_m is the
target. Every probability is taken under a decoder's *modified* distribution M_alpha (truncated,
renormalised, temperature-scaled logits; greedy is an indicator), computed by
`privleak.decoding.sampling_logprobs` from the model's full-vocabulary logits.

- TP (Def. 2): TP_j = M_alpha(prefix + t_<j)[t_j].
- ESP (Def. 3): ESP = prod_j TP_j; kept as log ESP (a sum), -inf when a truncating decoder
  gives some token probability 0.
- n-ISP (Def. 4): the sum of ESP(g) over every length-m g at Hamming distance exactly n from the
  suffix (substitutions only: the paper's sequences all have length m).
- approximate n-ISP (Def. 5): the same sum restricted to the tree that, at each position, follows
  the correct token and only the top `expand` alternatives (or those in the head holding
  `head_mass` of the probability). The error bound (Appendix A) assumes every ignored branch would
  go on to finish with probability 1: eps <= sum over ignored branches of P(path so far) *
  P(ignored token). So exact n-ISP lies in [approx, approx + bound].
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from privleak.batching import ForwardCounter, UnitCache, pad_rows, position_ids, through_cache
from privleak.decoding import (
    Transform,
    decoder_logprobs,
    greedy,
    sampling_logprobs,
    temperature,
    top_k,
    top_p,
)
from privleak.errors import require
from privleak.models import context_window, real_logits

DECODER_KINDS = ("greedy", "sampling", "top_k", "top_p", "temperature")


# ---------------------------------------------------------------- decoders


def decoder_transforms(spec: Mapping) -> list[Transform]:
    """Transforms of one decoder spec {name, kind, value}: kind greedy | sampling (no value),
    top_k (value k >= 1), top_p (value p in (0, 1]), temperature (value T > 0)."""
    kind = spec.get("kind")
    require(
        kind in DECODER_KINDS,
        f"decoder '{spec.get('name')}' has kind {kind!r}; allowed: {', '.join(DECODER_KINDS)}",
    )
    if kind == "greedy":
        return [greedy()]
    if kind == "sampling":
        return []
    value = spec.get("value")
    require(value is not None, f"decoder '{spec.get('name')}' of kind {kind} needs a value")
    return [{"top_k": top_k, "top_p": top_p, "temperature": temperature}[kind](value)]


def decoder_table(specs: Sequence[Mapping]) -> dict[str, list[Transform]]:
    """{name: transforms} for a list of decoder specs; names must be unique."""
    require(len(specs) >= 1, "s1.decoders must list at least one decoder")
    names = [spec.get("name") for spec in specs]
    require(len(set(names)) == len(names), f"s1.decoders has duplicate names: {names}")
    return {spec["name"]: decoder_transforms(spec) for spec in specs}


# ---------------------------------------------------------------- sequences


def planted_sequences(records: Sequence[Mapping], secrets: Sequence[Mapping]) -> list[dict]:
    """One row {seq_id, kind, duplicates, prefix, suffix} per planted sequence of a synthetic
    pretrain corpus (privleak.data.pretrain). prefix + suffix is the exact corpus string; for
    named entities the suffix also holds the planted "." that follows every occurrence, so a short
    entity can still fill a 4-token suffix with text that is identical in every duplicate."""
    texts = {r["id"]: r["text"] for r in records}
    rows: dict[str, dict] = {}
    for secret in secrets:
        if "seq_id" not in secret or secret["seq_id"] in rows:
            continue
        text = texts[secret["record_id"]]
        end = secret["end"]
        require(
            text[secret["start"] - len(secret["prefix"]) : end]
            == secret["prefix"] + secret["text"],
            f"secret {secret['seq_id']} does not match record {secret['record_id']}; "
            "the corpus and its .secrets.jsonl are out of sync (rerun prepare_data)",
        )
        tail = "." if secret["kind"] == "named_entity" and text[end : end + 1] == "." else ""
        rows[secret["seq_id"]] = {
            "seq_id": secret["seq_id"],
            "kind": secret["kind"],
            "duplicates": int(secret["duplicates"]),
            "prefix": secret["prefix"],
            "suffix": secret["text"] + tail,
        }
    require(bool(rows), "the sequence set is empty: the secrets file has no planted sequences")
    return sorted(rows.values(), key=lambda r: r["seq_id"])


def split_tokens(
    tokenizer, prefix: str, suffix: str, prefix_tokens: int, suffix_tokens: int
) -> tuple[list[int], list[int]] | None:
    """(last prefix_tokens ids of the prefix, first suffix_tokens ids of the suffix), tokenizing
    prefix + suffix as ONE string (as in training) and cutting at the character boundary: a token
    belongs to the suffix when it covers any character after the prefix's last non-space one (so
    a byte-level "Ġword" carrying the prefix's trailing space goes with the suffix). None when
    either side has too few tokens."""
    require(prefix_tokens >= 1, f"prefix_tokens must be >= 1, got {prefix_tokens}")
    require(suffix_tokens >= 1, f"suffix_tokens must be >= 1, got {suffix_tokens}")
    encoded = tokenizer(prefix + suffix, add_special_tokens=False, return_offsets_mapping=True)
    boundary = len(prefix.rstrip())
    cut = next(
        (k for k, (_, end) in enumerate(encoded["offset_mapping"]) if end > boundary),
        len(encoded["input_ids"]),
    )
    ids = list(encoded["input_ids"])
    if cut < prefix_tokens or len(ids) - cut < suffix_tokens:
        return None
    return ids[cut - prefix_tokens : cut], ids[cut : cut + suffix_tokens]


# ---------------------------------------------------------------- TP / ESP


def check_sequences(model, prefixes: Sequence[Sequence[int]], suffixes: Sequence[Sequence[int]]):
    """One-line errors for an empty set, empty prefix/suffix, or a sequence over the window."""
    require(len(prefixes) >= 1, "the sequence set is empty; give at least one (prefix, suffix)")
    require(len(prefixes) == len(suffixes), "prefixes and suffixes differ in number")
    window = context_window(model)
    for i, (prefix, suffix) in enumerate(zip(prefixes, suffixes, strict=True)):
        require(len(prefix) >= 1, f"sequence {i}: the prefix is empty; it needs >= 1 token")
        require(len(suffix) >= 1, f"sequence {i}: the suffix is empty; it needs >= 1 token")
        require(
            len(prefix) + len(suffix) <= window,
            f"sequence {i}: prefix ({len(prefix)}) + suffix ({len(suffix)}) tokens exceed the "
            f"model window of {window}; shorten the prefix or suffix",
        )


@torch.inference_mode()
def suffix_logprobs(
    model,
    prefixes: Sequence[Sequence[int]],
    suffixes: Sequence[Sequence[int]],
    decoders: Mapping[str, Sequence[Transform]],
    *,
    batch_size: int = 16,
    pad_id: int = 0,
    counter: ForwardCounter | None = None,
    cache: UnitCache | None = None,
) -> dict[str, list[torch.Tensor]]:
    """log TP of every suffix token under every decoder, from ONE teacher-forced forward pass
    per batch: {decoder: list of [len(suffix_i)] float32 tensors}. log ESP = the sum of a row.

    Right-padded batches of `batch_size` rows sorted by length; positions follow the attention
    mask. Per batch only the N = sum(len(suffix_i)) suffix-predicting logit rows are kept, every
    decoder scores only their target tokens (`decoder_logprobs`, no [N, V] distribution), and the
    [decoders, N] result crosses to the host once. With a `cache`, each batch is one checkpoint
    unit.
    """
    check_sequences(model, prefixes, suffixes)
    require(batch_size >= 1, f"batch_size must be >= 1, got {batch_size}")
    require(len(decoders) >= 1, "give at least one decoder")
    results: dict[str, list[torch.Tensor | None]] = {
        name: [None] * len(prefixes) for name in decoders
    }
    order = sorted(range(len(prefixes)), key=lambda i: -(len(prefixes[i]) + len(suffixes[i])))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        pairs = [(list(prefixes[i]), list(suffixes[i])) for i in batch]
        scores, batch_counter = through_cache(
            cache,
            partial(_suffix_batch, model, pairs, decoders, pad_id),
            "suffix batch",
            pairs,
            {name: list(chain) for name, chain in decoders.items()},
            pad_id,
        )
        if counter is not None:
            counter.merge(batch_counter)
        lengths = [len(suffix) for _, suffix in pairs]
        for name, row in zip(decoders, scores, strict=True):
            for i, part in zip(batch, row.split(lengths), strict=True):
                results[name][i] = part
    return results


def _suffix_batch(
    model, pairs: list[tuple[list[int], list[int]]], decoders, pad_id: int
) -> tuple[torch.Tensor, ForwardCounter]:
    """One right-padded forward over (prefix, suffix) pairs: the [decoders, N] host tensor of
    suffix-token log TPs (N = all suffix tokens, pair by pair) and the forward's count."""
    device = model.device
    ids, mask = pad_rows([prefix + suffix for prefix, suffix in pairs], pad_id, "right")
    firsts = [len(prefix) - 1 for prefix, _ in pairs]  # logits here predict the first suffix token
    keep = ids.shape[1] - min(firsts)
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=position_ids(mask).to(device),
        logits_to_keep=keep,
        use_cache=False,
    )
    counter = ForwardCounter()
    counter.add(*ids.shape)
    lengths = [len(suffix) for _, suffix in pairs]
    logits = real_logits(model, _suffix_rows(out.logits, firsts, lengths, ids.shape[1] - keep))
    targets = torch.tensor([t for _, suffix in pairs for t in suffix], device=device)
    # [decoders, N], one host copy; top-k and top-p add a few syncs to find rows with ties or
    # flat distributions.
    scores = decoder_logprobs(logits, targets, list(decoders.values())).cpu()
    return scores, counter


def _suffix_rows(
    logits: torch.Tensor, firsts: Sequence[int], lengths: Sequence[int], offset: int
) -> torch.Tensor:
    """[N, V] float32 rows of logits [B, K, V] that predict suffix tokens: row b's positions
    firsts[b] - offset + (0 .. lengths[b] - 1), concatenated; N = sum(lengths). Selected in the
    model's dtype, so only these rows are converted."""
    at = torch.cat(
        [
            b * logits.shape[1] + f - offset + torch.arange(n)
            for b, (f, n) in enumerate(zip(firsts, lengths, strict=True))
        ]
    )
    return logits.flatten(0, 1).index_select(0, at.to(logits.device)).float()


def log_esp(token_logprobs: Sequence[torch.Tensor]) -> np.ndarray:
    """[S] log ESP (Def. 3) from per-token log TPs: the log of the product is the sum."""
    return np.array([float(row.double().sum()) for row in token_logprobs])


def prefix_length_rows(
    model,
    sequences: Sequence[Mapping],
    prefix_lengths: Sequence[int],
    decoders: Mapping[str, Sequence[Transform]],
    *,
    model_fields: Mapping,
    tp_prefix_len: int,
    batch_size: int = 16,
    pad_id: int = 0,
    cache: UnitCache | None = None,
) -> tuple[list[dict], list[dict]]:
    """Score every sequence at every prefix length under every decoder in one pass per batch.

    sequences: dicts with prefix_ids, suffix_ids, seq_id, kind, duplicates; the prefix is cut to
    its last `length` tokens. Returns (esp_rows, tp_rows): one ESP row per (decoder, sequence,
    prefix length) and, at `tp_prefix_len` only, one TP row per suffix position; every row
    carries `model_fields`. With a `cache`, each batch is one checkpoint unit.
    """
    jobs = [(s, length) for s in sequences for length in prefix_lengths]
    logprobs = suffix_logprobs(
        model,
        [s["prefix_ids"][-length:] for s, length in jobs],
        [s["suffix_ids"] for s, _ in jobs],
        decoders,
        batch_size=batch_size,
        pad_id=pad_id,
        cache=cache,
    )
    esp_rows, tp_rows = [], []
    for decoder, per_job in logprobs.items():
        for (s, length), token_lp, value in zip(jobs, per_job, log_esp(per_job), strict=True):
            base = {**model_fields, "seq_id": s["seq_id"], "kind": s["kind"]}
            base["duplicates"] = s["duplicates"]
            esp_rows.append({**base, "prefix_len": length, "decoder": decoder, "log_esp": value})
            if length == tp_prefix_len:
                tp_rows += [
                    {**base, "decoder": decoder, "position": j, "log_tp": float(lp)}
                    for j, lp in enumerate(token_lp.tolist())
                ]
    return esp_rows, tp_rows


# ---------------------------------------------------------------- n-ISP


def _check_isp(m: int, n: int) -> None:
    require(isinstance(n, int) and n >= 1, f"n (mismatches) must be an integer >= 1, got {n!r}")
    require(n <= m, f"n = {n} mismatches exceeds the suffix length m = {m}; need n <= m")


def hamming_neighbours(suffix: Sequence[int], n: int, vocab_size: int) -> list[tuple[int, ...]]:
    """Every length-m sequence at Hamming distance exactly n from suffix over range(vocab_size)."""
    _check_isp(len(suffix), n)
    out = []
    for positions in itertools.combinations(range(len(suffix)), n):
        choices = [[t for t in range(vocab_size) if t != suffix[p]] for p in positions]
        for substitution in itertools.product(*choices):
            g = list(suffix)
            for p, t in zip(positions, substitution, strict=True):
                g[p] = t
            out.append(tuple(g))
    return out


def exact_isp(
    model,
    prefix: Sequence[int],
    suffix: Sequence[int],
    n: int,
    transforms: Sequence[Transform],
    *,
    batch_size: int = 256,
    pad_id: int = 0,
) -> float:
    """n-ISP (Def. 4) by brute force: teacher-force every Hamming-distance-n neighbour of the
    suffix and sum their ESPs. Costs C(m, n) (V-1)^n sequences: for tiny vocabularies/tests."""
    vocab = getattr(model, "privleak_real_vocab", None) or model.config.vocab_size
    neighbours = hamming_neighbours(suffix, n, vocab)
    scores = suffix_logprobs(
        model,
        [list(prefix)] * len(neighbours),
        [list(g) for g in neighbours],
        {"d": transforms},
        batch_size=batch_size,
        pad_id=pad_id,
    )["d"]
    return float(np.exp(log_esp(scores)).sum())


@dataclass
class IspResult:
    """Approximate n-ISP of S sequences (Def. 5) with the Appendix A bound.

    approx: [S] sum of ESP over the expanded Hamming-n leaves (a lower bound of n-ISP).
    bound: [S] upper bound on the ignored mass, so n-ISP <= approx + bound.
    leaves: per sequence, list of (tokens tuple, log ESP, mismatch positions tuple) of every
        expanded leaf with non-zero probability.
    counter: forwarded token positions (prefill + one token per live node per level).
    """

    approx: np.ndarray
    bound: np.ndarray
    leaves: list[list[tuple[tuple[int, ...], float, tuple[int, ...]]]]
    counter: ForwardCounter


def _alternatives(
    logprobs: torch.Tensor, targets: torch.Tensor, expand: int, head_mass: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, expand] token ids and log-probs of the alternatives a node expands (-inf = none):
    the top `expand` non-target tokens, restricted to the head holding `head_mass` of the
    distribution (target included in the ranking) when head_mass is given."""
    masked = logprobs.scatter(-1, targets[:, None], float("-inf"))
    values, ids = masked.topk(min(expand, logprobs.shape[-1] - 1), dim=-1)
    if head_mass is not None:
        # A token is in the head while the mass of the tokens more likely than it is below
        # head_mass: mass above p = 1 - (mass of tokens with probability <= p).
        ascending = logprobs.exp().sort(dim=-1).values
        cumulative = ascending.cumsum(-1)
        at = torch.searchsorted(ascending, values.exp(), right=True) - 1
        above = 1 - torch.where(at >= 0, cumulative.gather(-1, at.clamp(min=0)), 0.0)
        values = values.masked_fill(above >= head_mass, float("-inf"))
    return ids, values


@torch.inference_mode()
def approximate_isp(
    model,
    prefixes: Sequence[Sequence[int]],
    suffixes: Sequence[Sequence[int]],
    n: int,
    transforms: Sequence[Transform],
    *,
    expand: int,
    head_mass: float | None = None,
    batch_size: int = 16,
    max_nodes: int = 1024,
    pad_id: int = 0,
    cache: UnitCache | None = None,
) -> IspResult:
    """Approximate n-ISP with its Appendix A bound, expanding the tree level by level.

    All sequences of a batch (equal suffix length m) share one left-padded prefill with a KV
    cache; at level j every live node (a partial suffix with e <= n mismatches that can still
    end with exactly n) forwards one token, its children reuse the parent's cache. A node
    branches into the correct token and, while e < n, its `expand` best alternatives (zero-
    probability ones dropped: they contribute exactly 0). With expand >= V-1 and no head_mass
    the result is exact and the bound is 0.

    Memory is bounded by `max_nodes`, the most nodes forwarded in one batch: a level with more
    live nodes is processed in chunks of at most max_nodes, each expanded depth first before the
    next, so at most m chunks (one per level) hold KV caches at a time, whatever the tree size.
    The result does not depend on max_nodes (leaves are returned sorted by tokens). With a
    `cache`, each batch is one checkpoint unit.
    """
    check_sequences(model, prefixes, suffixes)
    require(
        isinstance(expand, int) and expand >= 1, f"expand must be an integer >= 1, got {expand}"
    )
    require(
        head_mass is None or 0 < head_mass <= 1, f"head_mass must be in (0, 1], got {head_mass}"
    )
    require(
        isinstance(max_nodes, int) and max_nodes >= 1,
        f"max_nodes must be an integer >= 1, got {max_nodes}",
    )
    for suffix in suffixes:
        _check_isp(len(suffix), n)
    counter = ForwardCounter()
    bound = np.zeros(len(prefixes))
    leaves: list[list] = [[] for _ in prefixes]
    by_length: dict[int, list[int]] = {}
    for i, suffix in enumerate(suffixes):
        by_length.setdefault(len(suffix), []).append(i)
    settings = (n, list(transforms), expand, head_mass, max_nodes)
    for members in by_length.values():
        for start in range(0, len(members), batch_size):
            batch = members[start : start + batch_size]
            pairs = [(list(prefixes[i]), list(suffixes[i])) for i in batch]
            found, ignored, batch_counter = through_cache(
                cache,
                partial(_isp_batch, model, pairs, pad_id, *settings),
                "isp batch",
                pairs,
                pad_id,
                *settings,
            )
            counter.merge(batch_counter)
            for k, i in enumerate(batch):
                leaves[i] = sorted(found[k])
                bound[i] = ignored[k]
    approx = np.array([math.fsum(math.exp(lp) for _, lp, _ in rows) for rows in leaves])
    return IspResult(approx=approx, bound=bound, leaves=leaves, counter=counter)


def _isp_batch(model, pairs, pad_id, n, transforms, expand, head_mass, max_nodes):
    """(leaves per sequence, ignored mass per sequence, forward count) of one batch of
    (prefix, suffix) pairs with equal suffix length."""
    counter = ForwardCounter()
    tree = _Tree(model, n, transforms, expand, head_mass, max_nodes, counter)
    found, ignored = tree.expand([p for p, _ in pairs], [s for _, s in pairs], pad_id)
    return found, ignored, counter


@dataclass
class _Nodes:
    """K live nodes of one chunk after level j: owner [K] (row of the batch), logp [K] float64
    path log-prob, errors [K] mismatch count, where [K] mismatch bitmask, tokens [K, j + 1];
    cache: their KV cache rows, mask [K, L] attention mask, position [K, 1] next position id."""

    owner: torch.Tensor
    logp: torch.Tensor
    errors: torch.Tensor
    where: torch.Tensor
    tokens: torch.Tensor
    cache: object
    mask: torch.Tensor
    position: torch.Tensor


@dataclass
class _Tree:
    """The settings of one approximate_isp call; `expand` runs one batch of sequences."""

    model: object
    n: int
    transforms: Sequence[Transform]
    expand_k: int
    head_mass: float | None
    max_nodes: int
    counter: ForwardCounter
    # Per batch (set by `expand`): suffixes [B, m], ignored mass [B], leaves per sequence.
    suffixes: torch.Tensor = field(init=False)
    ignored: torch.Tensor = field(init=False)
    leaves: list[list] = field(init=False)

    def expand(self, prefixes, suffixes, pad_id) -> tuple[list[list], list[float]]:
        """(leaves per sequence as (tokens, log ESP, mismatch positions), ignored mass per
        sequence) of B sequences with equal suffix length m."""
        device = self.model.device
        ids, mask = pad_rows(prefixes, pad_id, "left")
        mask = mask.to(device)
        out = self.model(
            input_ids=ids.to(device),
            attention_mask=mask,
            position_ids=position_ids(mask),
            logits_to_keep=1,
            use_cache=True,
        )
        self.counter.add(*ids.shape)
        rows = len(prefixes)
        zeros = torch.zeros(rows, dtype=torch.long, device=device)
        root = _Nodes(
            owner=torch.arange(rows, device=device),
            logp=torch.zeros(rows, dtype=torch.float64, device=device),
            errors=zeros,
            where=zeros,
            tokens=torch.zeros(rows, 0, dtype=torch.long, device=device),
            cache=out.past_key_values,
            mask=mask,
            position=mask.sum(-1, keepdim=True),
        )
        self.suffixes = torch.tensor([list(s) for s in suffixes], device=device)
        self.ignored = torch.zeros(rows, dtype=torch.float64, device=device)
        self.leaves = [[] for _ in prefixes]
        branches = self._children(root, self._last_logits(out), 0)
        del out
        self._descend(root, *branches, 0)
        return self.leaves, self.ignored.tolist()

    def _last_logits(self, out) -> torch.Tensor:
        return real_logits(self.model, out.logits[:, -1].float())

    def _descend(self, nodes: _Nodes, parent: torch.Tensor, child: dict, j: int) -> None:
        """Forward the children (`_children` of nodes at suffix position j) chunk by chunk, each
        expanded to the end before the next; at the last position keep the leaves."""
        m = self.suffixes.shape[1]
        if j == m - 1:
            self._record(child)
            return
        for start in range(0, len(parent), self.max_nodes):
            index = parent[start : start + self.max_nodes]
            last = start + self.max_nodes >= len(parent)
            mask = torch.cat([nodes.mask[index], torch.ones_like(index)[:, None]], 1)
            chunk = _Nodes(
                **{key: value[start : start + self.max_nodes] for key, value in child.items()},
                cache=_cache_rows(nodes.cache, index, in_place=last),
                mask=mask,
                position=nodes.position[index] + 1,
            )
            out = self.model(
                input_ids=chunk.tokens[:, -1:],
                attention_mask=mask,
                position_ids=nodes.position[index],
                past_key_values=chunk.cache,
                use_cache=True,
            )
            self.counter.add(len(index), 1)
            chunk.cache = out.past_key_values
            branches = self._children(chunk, self._last_logits(out), j + 1)
            del out  # its [K, V] logits are not kept while the subtree below is expanded
            self._descend(chunk, *branches, j + 1)

    def _children(self, nodes: _Nodes, logits: torch.Tensor, j: int) -> tuple[torch.Tensor, dict]:
        """(parent [C] index into nodes, child fields {owner, logp, errors, where, tokens}) of
        the viable children at position j, correct-token children first; adds the Appendix A
        mass of the ignored alternatives to self.ignored."""
        n, m = self.n, self.suffixes.shape[1]
        # float64 before the softmax: float32 probabilities can sum above 1 by ~1e-5, and the
        # Appendix A bound is the small remainder 1 - (mass taken), so it would drift negative.
        lp = sampling_logprobs(logits.double(), self.transforms)
        target = self.suffixes[nodes.owner, j]
        remaining = m - j - 1  # positions left after this one
        target_lp = lp.gather(-1, target[:, None])[:, 0]
        # Correct child: viable if the missing mismatches still fit in the remaining positions.
        keep_c = (n - nodes.errors <= remaining) & torch.isfinite(target_lp)
        # Mismatch children: only from nodes that may still err and can finish with exactly n.
        can_err = (nodes.errors < n) & (n - nodes.errors - 1 <= remaining)
        alt_ids, alt_lp = _alternatives(lp, target, self.expand_k, self.head_mass)
        alt_lp = alt_lp.masked_fill(~can_err[:, None], float("-inf"))
        # Appendix A: ignored alternatives of an erring node, each completed with probability 1.
        alt_mass = (1 - target_lp.exp()).clamp(min=0)
        taken = alt_lp.exp().sum(-1)
        self.ignored.index_add_(
            0,
            nodes.owner,
            torch.where(can_err, nodes.logp.exp() * (alt_mass - taken).clamp(min=0), 0.0),
        )
        parent_c = torch.nonzero(keep_c)[:, 0]
        parent_a, slot = torch.nonzero(torch.isfinite(alt_lp), as_tuple=True)
        parent = torch.cat([parent_c, parent_a])
        chosen = torch.cat([target[parent_c], alt_ids[parent_a, slot]])
        child = {
            "owner": nodes.owner[parent],
            "logp": torch.cat(
                [
                    nodes.logp[parent_c] + target_lp[parent_c],
                    nodes.logp[parent_a] + alt_lp[parent_a, slot],
                ]
            ),
            "errors": torch.cat([nodes.errors[parent_c], nodes.errors[parent_a] + 1]),
            "where": torch.cat([nodes.where[parent_c], nodes.where[parent_a] | (1 << j)]),
            "tokens": torch.cat([nodes.tokens[parent], chosen[:, None]], dim=1),
        }
        return parent, child

    def _record(self, child: dict) -> None:
        """Keep the complete children with exactly n mismatches as leaves."""
        m = self.suffixes.shape[1]
        done = torch.nonzero(child["errors"] == self.n)[:, 0]
        for k, tokens, logp, where in zip(
            child["owner"][done].tolist(),
            child["tokens"][done].tolist(),
            child["logp"][done].tolist(),
            child["where"][done].tolist(),
            strict=True,
        ):
            mismatch = tuple(p for p in range(m) if where >> p & 1)
            self.leaves[k].append((tuple(tokens), logp, mismatch))


def _cache_rows(cache, index: torch.Tensor, *, in_place: bool):
    """The KV cache holding rows `index` of `cache`: in place for a level's last chunk (the
    parent is done with it), else a new cache that leaves the parent intact for the next chunk.
    reorder_cache rebinds each layer's tensors to an index_select, so a shallow copy of the cache
    and of its layers is enough: only the selected rows are copied."""
    if not in_place:
        cache = copy.copy(cache)
        if hasattr(cache, "layers"):
            cache.layers = [copy.copy(layer) for layer in cache.layers]
    cache.reorder_cache(index)
    return cache
