"""The standard membership-inference scores of a language model, over per-token statistics.

Every attack reads the same teacher-forced pass (privleak.mia.scoring): for each scored token t of
a sequence, `logprob[t]` = log p(x_t | x_<t), and the mean `mu[t]` and standard deviation
`sigma[t]` of log p(z | x_<t) over z ~ p(. | x_<t) (Min-K%++'s calibration). Every score is
oriented so that higher means "more likely a member".

- LOSS (Yeom et al. 2018): the mean token log-prob (minus the loss).
- zlib (Carlini et al. 2021, §5.2): the log-perplexity over the zlib entropy of the text (its
  compressed length in bytes), negated.
- Min-K% (Shi et al. 2024): the mean log-prob of the k share of tokens with the lowest log-probs;
  int(k * T) tokens as the authors' code takes them, and at least one (ours: theirs averages an
  empty slice when int(k * T) is 0).
- Min-K%++ (Zhang et al. 2024): the same mean over (logprob - mu) / sigma, the k share lowest.
- Reference (Carlini et al. 2021, "Small"): the ratio of the target's log-perplexity to a
  reference model's on the same text, negated.
- LiRA, offline (Carlini et al. 2022, §VI): how many standard deviations the target's LOSS score
  lies above the Gaussian that reference models which never saw the text give it (the paper's
  one-sided test, monotone in that z-score); the variance per text, or pooled over texts
  ("global", the paper's choice with few reference models). A pooled variance is one constant
  per attacked model, so within a model's ranking it reduces to the target's LOSS minus the
  references' mean.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from privleak.errors import require

ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus", "reference", "lira_offline")
VARIANCES = ("global", "per_text")


def _tokens(logprob) -> np.ndarray:
    values = np.asarray(logprob, dtype=float)
    require(values.ndim == 1 and values.size >= 1, "a scored text needs at least one token")
    return values


def _lowest_share(values: np.ndarray, k: float) -> float:
    require(0 < k <= 1, f"Min-K% k must be in (0, 1]; got {k!r}")
    count = max(1, int(values.size * k))
    return float(np.sort(values)[:count].mean())


def loss(logprob: Sequence[float]) -> float:
    """LOSS: mean log p(x_t | x_<t) over the T scored tokens; [T] -> float."""
    return float(_tokens(logprob).mean())


def zlib_entropy(text: str) -> int:
    """Bytes of the zlib-compressed UTF-8 text (the default level)."""
    return len(zlib.compress(text.encode("utf-8")))


def zlib_ratio(logprob: Sequence[float], text: str) -> float:
    """zlib: -(log-perplexity / zlib entropy), i.e. LOSS / zlib entropy; [T], str -> float."""
    return loss(logprob) / zlib_entropy(text)


def min_k(logprob: Sequence[float], k: float) -> float:
    """Min-K%: mean of the int(k T) lowest token log-probs (at least one); [T] -> float."""
    return _lowest_share(_tokens(logprob), k)


def min_k_plus_plus(
    logprob: Sequence[float], mu: Sequence[float], sigma: Sequence[float], k: float
) -> float:
    """Min-K%++: mean of the int(k T) lowest (logprob - mu) / sigma; [T] x 3 -> float."""
    values, mu, sigma = _tokens(logprob), np.asarray(mu, float), np.asarray(sigma, float)
    require(mu.shape == values.shape == sigma.shape, "logprob, mu and sigma differ in length")
    require(bool((sigma > 0).all()), "Min-K%++ needs sigma > 0 at every token")
    return _lowest_share((values - mu) / sigma, k)


def reference_ratio(logprob: Sequence[float], reference_logprob: Sequence[float]) -> float:
    """Reference: -(log-perplexity of the target / the reference's, each under its own
    tokenizer); [T], [T'] -> float."""
    target, reference = _tokens(logprob), _tokens(reference_logprob)
    require(reference.mean() < 0, "the reference model's log-perplexity is 0: no ratio")
    return -(target.mean() / reference.mean())


def lira_offline(
    target: Sequence[float], references: np.ndarray, variance: str = "global"
) -> np.ndarray:
    """Offline LiRA: (target - mean_out) / std_out per text.

    target: [N] LOSS scores of N texts under the attacked model. references: [R, N] the same
    scores under R >= 2 reference models that never saw any of the texts. variance: "global" (one
    std, the pooled within-text std over all texts) or "per_text". Returns [N].
    """
    require(variance in VARIANCES, f"LiRA variance '{variance}': use {' or '.join(VARIANCES)}")
    target, references = np.asarray(target, float), np.asarray(references, float)
    require(
        references.ndim == 2 and references.shape[1] == target.size, "references must be [R, N]"
    )
    require(references.shape[0] >= 2, "offline LiRA needs at least 2 reference models")
    mean = references.mean(0)
    std = references.std(0, ddof=1)
    if variance == "global":
        std = np.full_like(mean, math.sqrt(float((std**2).mean())))
    require(bool((std > 0).all()), "the reference models agree exactly on a text: no LiRA std")
    return (target - mean) / std
