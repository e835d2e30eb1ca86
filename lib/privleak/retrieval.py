"""Retrieval for DP-RAG (Grislain): a similarity threshold drawn with differential privacy.

Every document is scored against the query; the documents scoring at least a threshold tau are
retrieved, and tau comes from the exponential mechanism (`accounting.sample_from_intervals`) so
adding or removing one document (one privacy unit) changes the threshold's law by at most e^eps.
Scores are clipped to a declared range [low, high] first, so the utility lives on a fixed domain.

Utilities (constant between consecutive clipped scores; tau on (e_j, e_j+1) keeps the documents
with s_i >= e_j+1):
- top-k: U(tau) = -|#{i: s_i >= tau} - k|, sensitivity 1.
- top-p: U(tau) = -|sum_{s_i >= tau} w(s_i) - p * sum_i w(s_i)|, with
  w(s) = exp(alpha * (s - high) / (high - low)) in (0, 1].
  The paper writes w with the data's own s_max and s_min; then one added document can change every
  weight and the sensitivity is no longer 1. Here s_max, s_min are the clipping range's ends, which
  the data cannot move: adding a document of weight w moves the sum inside |.| by w * (1[.] - p),
  so |delta U| <= max(p, 1 - p) <= 1 and the mechanism's sensitivity 1 holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from privleak.accounting import check_epsilon, sample_from_intervals
from privleak.errors import require


def _clipped(scores: Sequence[float], low: float, high: float) -> np.ndarray:
    require(low < high, f"the score range needs low < high, got [{low}, {high}]")
    scores = np.asarray(scores, dtype=float)
    require(scores.ndim == 1 and scores.size >= 1, "give at least one document score")
    require(bool(np.isfinite(scores).all()), "document scores must be finite")
    return np.clip(scores, low, high)


def _edges(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """[n + 1] low, the distinct clipped scores strictly inside (low, high), high."""
    inside = np.unique(scores[(scores > low) & (scores < high)])
    return np.concatenate([[low], inside, [high]])


def top_k_utility(
    scores: Sequence[float], k: int, low: float = 0.0, high: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(edges [n + 1], utilities [n]) of the top-k threshold utility on [low, high]."""
    require(isinstance(k, int) and k >= 1, f"k must be an integer >= 1, got {k!r}")
    clipped = _clipped(scores, low, high)
    edges = _edges(clipped, low, high)
    ascending = np.sort(clipped)
    kept = len(ascending) - np.searchsorted(ascending, edges[1:], side="left")
    return edges, -np.abs(kept - k).astype(float)


def top_p_weights(scores: Sequence[float], alpha: float, low: float, high: float) -> np.ndarray:
    """[N] w(s) = exp(alpha * (s - high) / (high - low)) of the clipped scores."""
    require(alpha > 0, f"alpha must be > 0, got {alpha}")
    return np.exp(alpha * (_clipped(scores, low, high) - high) / (high - low))


def top_p_utility(
    scores: Sequence[float], p: float, alpha: float, low: float = 0.0, high: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(edges [n + 1], utilities [n]) of the top-p threshold utility on [low, high]."""
    require(0 < p <= 1, f"p must be in (0, 1], got {p}")
    clipped = _clipped(scores, low, high)
    weights = top_p_weights(clipped, alpha, low, high)
    edges = _edges(clipped, low, high)
    order = np.argsort(clipped)
    ascending, weight_ascending = clipped[order], weights[order]
    # Weight of the documents with s >= e, for each right edge e: a suffix sum.
    suffix = np.concatenate([np.cumsum(weight_ascending[::-1])[::-1], [0.0]])
    above = suffix[np.searchsorted(ascending, edges[1:], side="left")]
    return edges, -np.abs(above - p * weights.sum())


def dp_threshold(
    scores: Sequence[float],
    epsilon: float,
    rng: np.random.Generator,
    *,
    k: int | None = None,
    p: float | None = None,
    alpha: float = 1.0,
    low: float = 0.0,
    high: float = 1.0,
) -> float:
    """An epsilon-DP similarity threshold: top-k utility when k is given, top-p when p is."""
    check_epsilon(epsilon)
    require((k is None) != (p is None), "give exactly one of k (top-k) or p (top-p)")
    if k is not None:
        edges, utilities = top_k_utility(scores, k, low, high)
    else:
        edges, utilities = top_p_utility(scores, p, alpha, low, high)
    return sample_from_intervals(edges, utilities, epsilon, rng)


def selected(scores: Sequence[float], threshold: float) -> np.ndarray:
    """Indices of the documents whose score is at least the threshold, best first."""
    scores = np.asarray(scores, dtype=float)
    chosen = np.nonzero(scores >= threshold)[0]
    return chosen[np.argsort(-scores[chosen], kind="stable")]


def embed(embedder, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """[N, d] L2-normalised float32 embeddings, `batch_size` texts per forward."""
    require(batch_size >= 1, f"embedding batch_size must be >= 1, got {batch_size}")
    vectors = embedder.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def cosine_scores(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """[Q, N] exact cosine similarity of normalised query [Q, d] and document [N, d] vectors,
    accumulated in float64 and clipped to [-1, 1]."""
    return np.clip(queries.astype(np.float64) @ documents.astype(np.float64).T, -1.0, 1.0)


@dataclass(frozen=True)
class Retrieved:
    """threshold: the DP threshold; above: documents scoring >= it; chosen: the indices kept
    (best first, at most max_retrieve)."""

    threshold: float
    above: int
    chosen: list[int]


def retrieve(
    scores: Sequence[float],
    *,
    epsilon: float,
    seed: int,
    key: Hashable,
    max_retrieve: int,
    k: int | None = None,
    p: float | None = None,
    alpha: float = 1.0,
    low: float = 0.0,
    high: float = 1.0,
) -> Retrieved:
    """The DP threshold of one query's document scores (top-k utility with k, top-p with p),
    drawn from the random stream of (seed, key), and the documents it keeps."""
    require(max_retrieve >= 1, f"max_retrieve must be >= 1, got {max_retrieve}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, *repr(key).encode()]))
    threshold = dp_threshold(scores, epsilon, rng, k=k, p=p, alpha=alpha, low=low, high=high)
    above = selected(scores, threshold)
    return Retrieved(threshold, len(above), above[:max_retrieve].tolist())
