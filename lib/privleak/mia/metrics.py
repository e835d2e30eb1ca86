"""ROC metrics of a membership score, and their bootstrap over texts and training runs.

A score flags a text as a member when score >= threshold (sklearn's convention). AUC is the
probability that a random member outscores a random non-member (ties count one half). TPR at FPR
alpha is the largest true-positive rate over thresholds whose false-positive rate is <= alpha.

Over training runs, a metric is computed on each run's model and averaged over runs. Its interval
crosses two resamplings, as the claims' do (privleak.claims.stats), and like theirs gives none
below `min_units` texts or when every resample agrees; unlike theirs it reads percentiles only
(no BCa) and, with one run, resamples texts alone. The texts of each stratum
(the non-members, and the members of a group: all of them, or those of one duplication count)
and the runs are drawn independently with replacement, and a draw weighs each text and run by how
often it was drawn. Draws depend only on the seed and the strata sizes, so two score tables of
the same texts and runs (two attacks, two model sizes) see the same draws: their paired
difference is the difference of their bootstrap distributions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from privleak.errors import require

METHODS = ("percentile", "basic")  # intervals read from the bootstrap distribution alone
BATCH = 250  # resamples computed at once


def roc_auc(scores: Sequence[float], is_member: Sequence[bool]) -> float:
    """AUC of one model's scores [N] against the truth [N]."""
    return float(roc_auc_score(np.asarray(is_member, bool), np.asarray(scores, float)))


def tpr_at_fpr(scores: Sequence[float], is_member: Sequence[bool], fpr: float) -> float:
    """The largest TPR among thresholds with FPR <= fpr; [N], [N] -> float."""
    require(0 <= fpr < 1, f"FPR must be in [0, 1); got {fpr!r}")
    false_pos, true_pos, _ = roc_curve(
        np.asarray(is_member, bool), np.asarray(scores, float), drop_intermediate=False
    )
    return float(true_pos[false_pos <= fpr + 1e-12].max())


def roc_points(scores: Sequence[float], is_member: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) of every threshold, for a ROC curve."""
    false_pos, true_pos, _ = roc_curve(
        np.asarray(is_member, bool), np.asarray(scores, float), drop_intermediate=False
    )
    return false_pos, true_pos


def metric_names(fprs: Sequence[float]) -> list[str]:
    return ["auc", *(f"tpr@{f:g}" for f in fprs)]


def _counts(rng: np.random.Generator, batch: int, size: int) -> np.ndarray:
    """[batch, size] counts of `size` draws with replacement from `size` items."""
    drawn = rng.integers(0, size, (batch, size))
    offsets = (np.arange(batch) * size)[:, None]
    counts = np.bincount((drawn + offsets).ravel(), minlength=batch * size)
    return counts.reshape(batch, size).astype(float)


class _Prepared:
    """What every resample reuses: each run's non-members ranked high to low with the end of
    each tie group, and each group's member-beats-non-member matrices."""

    def __init__(self, members: Mapping[str, np.ndarray], non_members: np.ndarray):
        self.members, self.non_members = members, non_members
        self.order = np.argsort(-non_members, axis=1, kind="stable")
        self.ranked = np.take_along_axis(non_members, self.order, 1)
        # A threshold passes tied scores together: a score counts up to its tie group's end.
        self.group_end = np.stack(
            [np.searchsorted(-row, -row, side="right") - 1 for row in self.ranked]
        )
        self.wins = {
            g: (s[:, :, None] > non_members[:, None, :])
            + 0.5 * (s[:, :, None] == non_members[:, None, :])
            for g, s in members.items()
        }  # {group: [R, M_g, N]}

    def bars(self, cn: np.ndarray, fpr: float) -> np.ndarray:
        """[B, R] per run: the highest non-member score a threshold at FPR <= fpr cannot flag
        (-inf when it can flag them all); a member is flagged when its score is above it."""
        size = cn.sum(1, keepdims=True)
        bars = np.empty((cn.shape[0], self.ranked.shape[0]))
        for r, (order, ranked, end) in enumerate(
            zip(self.order, self.ranked, self.group_end, strict=True)
        ):
            over = np.cumsum(cn[:, order], 1)[:, end] > fpr * size + 1e-9
            bars[:, r] = np.where(over.any(1), ranked[over.argmax(1)], -np.inf)
        return bars

    def values(self, fprs, cm, cn, cr) -> dict[tuple[str, str], np.ndarray]:
        """{(group, metric): [B]} run-weighted means of each run's weighted metric."""
        bars = {f: self.bars(cn, f) for f in fprs}
        out = {}
        for group, scores in self.members.items():
            counts, size = cm[group], cm[group].sum(1)
            per_run = (
                np.stack([((counts @ wins) * cn).sum(1) for wins in self.wins[group]], 1)
                / (size * cn.sum(1))[:, None]
            )
            out[(group, "auc")] = (per_run * cr).sum(1) / cr.sum(1)
            for f in fprs:
                flagged = scores[None, :, :] > bars[f][:, :, None]  # [B, R, M]
                rate = (flagged * counts[:, None, :]).sum(2) / size[:, None]
                out[(group, f"tpr@{f:g}")] = (rate * cr).sum(1) / cr.sum(1)
        return out


@dataclass(frozen=True)
class Resampled:
    """A metric on the full data and over n_boot crossed resamples."""

    effect: float
    draws: np.ndarray  # [n_boot]

    def interval(self, alpha: float = 0.05, method: str = "percentile") -> tuple[float, float]:
        """The (1 - alpha) percentile or basic bootstrap interval; NaN without draws, or when
        every resample gives the same value (no fake-certain interval)."""
        require(method in METHODS, f"claims.method '{method}': MIA intervals allow {METHODS}")
        if self.draws.size == 0 or np.ptp(self.draws) == 0:
            return float("nan"), float("nan")
        low, high = np.quantile(self.draws, [alpha / 2, 1 - alpha / 2])
        if method == "basic":
            low, high = 2 * self.effect - high, 2 * self.effect - low
        return float(low), float(high)

    def __sub__(self, other: Resampled) -> Resampled:
        """The paired difference (same draws); no draws when either side has none."""
        both = self.draws.size and other.draws.size
        return Resampled(self.effect - other.effect,
                         self.draws - other.draws if both else np.empty(0))  # fmt: skip


def crossed_bootstrap(
    members: Mapping[str, np.ndarray],
    non_members: np.ndarray,
    *,
    fprs: Sequence[float],
    n_boot: int,
    seed: int,
    min_units: int = 2,
) -> dict[tuple[str, str], Resampled]:
    """AUC and TPR at each FPR of every member group against the non-members.

    members: {group: [R, M_g] scores}; non_members: [R, N]; the same R runs in the same order.
    Returns {(group, metric): Resampled}. The draws of group g depend only on (seed, the strata
    sizes, its position in `members`), so equal inputs in equal order give equal draws. A group
    of fewer than `min_units` texts gets no draws (none at all when the non-members are fewer);
    one run resamples texts only.
    """
    require(non_members.ndim == 2 and non_members.shape[1] >= 1, "non_members must be [R, N]")
    runs, size = non_members.shape
    for group, scores in members.items():
        require(
            scores.ndim == 2 and scores.shape[0] == runs and scores.shape[1] >= 1,
            f"members group {group!r} must be [R, M] with the non-members' {runs} runs",
        )
    prepared = _Prepared(members, non_members)
    ones = {g: np.ones((1, s.shape[1])) for g, s in members.items()}
    full = prepared.values(fprs, ones, np.ones((1, size)), np.ones((1, runs)))
    if size < min_units:
        return {key: Resampled(float(v[0]), np.empty(0)) for key, v in full.items()}
    rng = np.random.default_rng(seed)
    parts: dict[tuple[str, str], list[np.ndarray]] = {key: [] for key in full}
    for start in range(0, n_boot, BATCH):
        batch = min(BATCH, n_boot - start)
        cr = _counts(rng, batch, runs) if runs >= 2 else np.ones((batch, 1))
        cn = _counts(rng, batch, size)
        cm = {g: _counts(rng, batch, s.shape[1]) for g, s in members.items()}
        for key, values in prepared.values(fprs, cm, cn, cr).items():
            parts[key].append(values)
    small = {g for g, scores in members.items() if scores.shape[1] < min_units}
    return {
        key: Resampled(
            float(full[key][0]), np.empty(0) if key[0] in small else np.concatenate(parts[key])
        )
        for key in full
    }
