"""DP similarity thresholds of DP-RAG (privleak.retrieval)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privleak import retrieval as rt
from privleak.accounting import interval_log_masses
from privleak.errors import PrivleakError

SCORES = [0.5, 0.2, 0.8]


def test_top_k_utility_by_hand():
    edges, utilities = rt.top_k_utility(SCORES, k=1)
    np.testing.assert_array_equal(edges, [0.0, 0.2, 0.5, 0.8, 1.0])
    # tau in (0, .2) keeps 3 documents, (.2, .5) keeps 2, (.5, .8) keeps 1, (.8, 1) keeps none.
    np.testing.assert_array_equal(utilities, [-2.0, -1.0, 0.0, -1.0])


def test_top_p_utility_by_hand():
    edges, utilities = rt.top_p_utility(SCORES, p=0.5, alpha=1.0)
    w = [math.exp(-0.8), math.exp(-0.5), math.exp(-0.2)]  # exp(alpha (s - 1) / (1 - 0))
    half = 0.5 * sum(w)
    expected = [-abs(sum(w) - half), -abs(w[1] + w[2] - half), -abs(w[2] - half), -half]
    np.testing.assert_allclose(utilities, expected, rtol=1e-12)
    np.testing.assert_array_equal(edges, [0.0, 0.2, 0.5, 0.8, 1.0])


def test_scores_are_clipped_to_the_range_and_ties_share_an_edge():
    edges, utilities = rt.top_k_utility([-0.3, 0.4, 0.4, 1.7], k=2, low=0.0, high=1.0)
    np.testing.assert_array_equal(edges, [0.0, 0.4, 1.0])
    # (0, .4): 3 documents (0.4, 0.4, 1.0); (.4, 1): the one clipped to 1.0.
    np.testing.assert_array_equal(utilities, [-1.0, -1.0])


def test_adding_one_document_moves_each_utility_by_at_most_one():
    rng = np.random.default_rng(1)
    for _ in range(200):
        scores = rng.uniform(-0.2, 1.2, rng.integers(1, 12))
        extra = rng.uniform(-0.2, 1.2)
        grid = np.linspace(0.001, 0.999, 400)
        for utility in (
            lambda s: rt.top_k_utility(s, k=3),
            lambda s: rt.top_p_utility(s, p=float(rng.uniform(0.05, 1)), alpha=5.0),
        ):
            state = rng.bit_generator.state
            before = utility(scores)
            rng.bit_generator.state = state  # the same p for both datasets
            after = utility(np.append(scores, extra))
            values = [u[np.searchsorted(e, grid, side="right") - 1] for e, u in (before, after)]
            assert np.abs(values[0] - values[1]).max() <= 1 + 1e-12


def test_thirty_documents_threshold_concentrates_near_the_kth_score():
    rng = np.random.default_rng(0)
    scores = rng.uniform(0.1, 0.9, 30)
    draws = [rt.dp_threshold(scores, 1.0, rng, k=5) for _ in range(4000)]
    kept = np.array([len(rt.selected(scores, t)) for t in draws])
    edges, utilities = rt.top_k_utility(scores, k=5)
    masses = np.exp(interval_log_masses(edges, utilities, 1.0))
    expected = masses @ np.abs(utilities)  # E|kept - k| under the mechanism
    assert abs(np.abs(kept - 5).mean() - expected) < 0.2


def test_selected_keeps_scores_at_the_threshold_best_first():
    assert rt.selected([0.3, 0.9, 0.5, 0.5], 0.5).tolist() == [1, 2, 3]
    assert rt.selected([0.3], 0.9).tolist() == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rt.dp_threshold(SCORES, 0.0, np.random.default_rng(), k=1), "epsilon must be"),
        (lambda: rt.dp_threshold(SCORES, 1.0, np.random.default_rng(), k=0), "k must be"),
        (lambda: rt.dp_threshold(SCORES, 1.0, np.random.default_rng(), p=1.5), r"p must be"),
        (lambda: rt.dp_threshold(SCORES, 1.0, np.random.default_rng(), p=0.0), r"p must be"),
        (lambda: rt.dp_threshold(SCORES, 1.0, np.random.default_rng()), "exactly one of k"),
        (lambda: rt.top_k_utility([], k=1), "at least one document score"),
        (lambda: rt.top_k_utility(SCORES, k=1, low=1.0, high=0.0), "low < high"),
        (lambda: rt.top_p_utility(SCORES, p=0.5, alpha=0.0), "alpha must be > 0"),
    ],
)
def test_bad_parameters_fail_with_one_line(call, message):
    with pytest.raises(PrivleakError, match=message):
        call()
