"""The coverage benchmark's own machinery (`benchmarks/bench_coverage.py`): the truths its cells
are judged against, and its resampled rank correlation, on hand-computable cases."""

import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_coverage as bc  # noqa: E402


def test_the_auc_truth_on_normal_texts_is_the_closed_form():
    """Normal difficulties: a member beats a non-member with probability
    Phi(s g + d_m - d_n) given the run's strength g = 1 + 0.3 z and the difficulties, so
    E Phi(s + 0.3 s z + sqrt(2) w) = Phi(s / sqrt(1 + 0.09 s^2 + 2)); the truth is its
    difference between the two signals."""
    high, low = bc.SIGNALS[1], bc.SIGNALS[0]
    closed = stats.norm.cdf(high / math.sqrt(3 + 0.09 * high**2)) - stats.norm.cdf(
        low / math.sqrt(3 + 0.09 * low**2)
    )
    for form in ("attacks", "models", "groups"):
        assert abs(bc.auc_truth(f"{form}, normal") - closed) < 5e-4


def test_the_resampled_spearman_is_spearman_on_the_drawn_rows_ties_included():
    """Units tie on x (3 levels over 6 units) and the 0/1 outcome ties everywhere; a unit drawn
    twice contributes its rows twice, one not drawn none: the weighted midranks give scipy's
    Spearman on the expanded rows."""
    x = np.array([0.0, 1.0, 1.0, 2.0, 0.0, 2.0])
    unit = np.array([0, 0, 1, 2, 2, 2, 3, 4, 5, 5])
    y = np.array([0, 1, 1, 0, 1, 1, 1, 0, 1, 0], dtype=float)
    drawn = np.array([[1, 1, 1, 1, 1, 1], [2, 0, 1, 0, 2, 1], [0, 3, 0, 1, 1, 1]])
    found = bc.weighted_spearman(x, unit, y, drawn)
    for b, counts in enumerate(drawn):
        rows = np.concatenate([np.flatnonzero(unit == u) for u in np.repeat(np.arange(6), counts)])
        assert abs(found[b] - stats.spearmanr(x[unit][rows], y[rows]).statistic) < 1e-12
    assert bc.weighted_spearman(x, unit, np.ones_like(y), drawn[:1])[0] == 0.0  # no ranks: none


def test_the_crossed_resample_counts_each_drawn_run_and_sequence_pair():
    """A run drawn twice and a sequence drawn twice put their pair's row in four times: the
    weighted midranks give scipy's Spearman on the expanded rows, continuous y included."""
    x = np.tile([0.0, 1.0, 1.0], 2)  # 2 runs x 3 sequences, run-major; sequences 1 and 2 tie
    y = np.array([0.3, 1.2, 0.9, -0.4, 2.0, 0.1])
    runs, sequences = np.array([2, 1]), np.array([1, 2, 1])
    weight = (runs[:, None] * sequences[None, :]).reshape(1, 6).astype(float)
    rows = np.repeat(np.arange(6), weight[0].astype(int))
    expected = stats.spearmanr(x[rows], y[rows]).statistic
    assert abs(bc.spearman_of_rows(x, y, weight)[0] - expected) < 1e-12
