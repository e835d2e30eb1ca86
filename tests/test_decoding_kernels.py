"""Exact per-decoder target log-probs (privleak.decoding.kernels) against the gathered
modified distribution, tier by tier."""

from __future__ import annotations

import math

import pytest
import torch

from privleak.decoding import (
    decoder_logprobs,
    greedy,
    kernels,
    sampling_logprobs,
    target_logprobs,
    temperature,
    top_k,
    top_p,
)
from tests.test_decoding_transforms import LOGITS, PROBS


def gathered(logits, targets, transforms):
    return sampling_logprobs(logits, transforms).gather(-1, targets[:, None])[:, 0]


def assert_same_logprobs(fast, reference):
    assert torch.equal(torch.isinf(fast), torch.isinf(reference))
    finite = torch.isfinite(reference)
    # rtol: at T = 0.1 log-probs reach -300, where one float32 ulp is 3e-5.
    torch.testing.assert_close(fast[finite], reference[finite], atol=1e-5, rtol=1e-6)


def mixed_targets(logits, rng):
    """[R] targets: a third the argmax, a third in the top 20, a third anywhere."""
    rows, vocab = logits.shape
    ranked = logits.argsort(-1, descending=True)
    top20 = ranked.gather(-1, torch.randint(0, 20, (rows, 1), generator=rng))[:, 0]
    anywhere = torch.randint(0, vocab, (rows,), generator=rng)
    return torch.where(torch.arange(rows) % 3 == 0, ranked[:, 0], top20).where(
        torch.arange(rows) % 3 < 2, anywhere
    )


SINGLE_DECODERS = [
    [],
    [temperature(0.1)],
    [temperature(0.7)],
    [temperature(2.0)],
    [top_k(1)],
    [top_k(5)],
    [top_k(10)],
    [top_k(100_000)],
    [greedy()],
    [top_p(0.1)],
    [top_p(0.6)],
    [top_p(0.95)],
    [top_p(1.0)],
]


@pytest.mark.parametrize("candidates", [4, 1024])
@pytest.mark.parametrize("vocab", [50, 5000])
@pytest.mark.parametrize("transforms", SINGLE_DECODERS, ids=repr)
def test_target_logprobs_equal_the_gathered_distribution(
    rng, monkeypatch, transforms, vocab, candidates
):
    monkeypatch.setattr(kernels, "NUCLEUS_CANDIDATES", candidates)
    logits = torch.randn(60, vocab, generator=rng) * 3
    logits[:, -7:] = float("-inf")  # a padded vocabulary
    targets = mixed_targets(logits, rng)
    targets[::7] = vocab - 1  # some targets on padded entries
    assert_same_logprobs(
        target_logprobs(logits, targets, transforms), gathered(logits, targets, transforms)
    )


def spy_floors(monkeypatch) -> list[tuple[int, int]]:
    """Records the [rows, K] shape of every descending block a top-p floor is read off."""
    shapes = []
    floor = kernels._nucleus_of_descending

    def spy(top, p, before=0.0):
        shapes.append(tuple(top.shape))
        return floor(top, p, before)

    monkeypatch.setattr(kernels, "_nucleus_of_descending", spy)
    return shapes


def test_top_p_tiers_candidates_then_bracket_then_full_sort(rng, monkeypatch):
    monkeypatch.setattr(kernels, "NUCLEUS_CANDIDATES", 8)
    shapes = spy_floors(monkeypatch)
    vocab = 20_000
    peaked = torch.randn(5, vocab, generator=rng) * 8  # the nucleus is in the top 8
    flat = torch.randn(4, vocab, generator=rng) * 0.1  # 8 x top probability < 0.6: no top-8 pass
    spiked = torch.randn(3, vocab, generator=rng) * 0.1
    spiked[:, 0] = math.log(0.1 * (vocab - 1) / 0.9)  # q = 0.1 passes the bound, top 8 < 0.6
    logits = torch.cat([peaked, flat, spiked])
    targets = mixed_targets(logits, rng)
    assert_same_logprobs(
        target_logprobs(logits, targets, [top_p(0.6)]), gathered(logits, targets, [top_p(0.6)])
    )
    assert (logits.softmax(-1).topk(8).values.sum(-1) < 0.6).tolist() == [0] * 5 + [1] * 7
    (candidates, bracket) = shapes  # every flat row's bracket held its floor: no full sort
    assert candidates == (8, 8)
    assert bracket[0] == 7 and bracket[1] < vocab / 4

    shapes.clear()
    monkeypatch.setattr(kernels, "BRACKET_MARGIN", 0)  # one sample value wide: it misses
    assert_same_logprobs(
        target_logprobs(logits, targets, [top_p(0.6)]), gathered(logits, targets, [top_p(0.6)])
    )
    assert shapes[1][0] == 7 and shapes[2] == (7, vocab)


# Rows the bracket tier sees: their top NUCLEUS_CANDIDATES (1024) hold less than p.
@pytest.mark.parametrize(
    ("scale", "p"), [(0.02, 0.3), (0.02, 0.6), (1.0, 0.6), (1.0, 0.95), (2.5, 0.95)]
)
def test_bracketed_floor_equals_the_full_sort_where_found(rng, scale, p):
    probs = (torch.randn(64, 20_000, generator=rng) * scale).softmax(-1)
    tau, z, found = kernels._bracketed(probs, p, torch.zeros(64), torch.full((64,), math.inf))
    full_tau, full_z, _ = kernels._nucleus_of_descending(probs.sort(-1, descending=True).values, p)
    assert torch.equal(tau[found], full_tau[found])
    torch.testing.assert_close(z[found], full_z[found], atol=1e-12, rtol=0)
    assert (probs.topk(1024).values.sum(-1) < p).all()
    assert found.float().mean() > 0.5  # the estimate is worth its pass on these rows


@pytest.mark.parametrize("width", [64 * 11, 5000, 50_272])
@pytest.mark.parametrize("k", [1, 6, 11, 101])
def test_largest_equals_topk_with_and_without_ties(rng, width, k):
    spread = torch.randn(50, width, generator=rng)
    tied = torch.randint(0, 3, (50, width), generator=rng).float()
    for logits in (spread, tied):
        assert torch.equal(kernels._largest(logits, k), logits.topk(k).values)


def test_target_logprobs_keep_greedy_top_k_and_top_p_ties(rng):
    logits = torch.randint(0, 4, (40, 30), generator=rng).float()  # many ties everywhere
    every_target = torch.arange(30).repeat(40, 1)
    for transforms in (
        [greedy()],
        [top_k(1)],
        [top_k(3)],
        [top_k(7)],
        [],
        [top_p(0.3)],
        [top_p(0.8)],
    ):
        for column in every_target.T:
            assert_same_logprobs(
                target_logprobs(logits, column, transforms),
                gathered(logits, column, transforms),
            )


def test_decoder_logprobs_share_passes_and_equal_each_decoder_alone(rng):
    logits = torch.randn(30, 400, generator=rng) * 2
    targets = mixed_targets(logits, rng)
    chains = [[], [greedy()], [top_k(5)], [top_k(10)], [top_p(0.6)], [temperature(0.1)]]
    table = decoder_logprobs(logits, targets, chains)
    assert table.shape == (6, 30)
    for chain, row in zip(chains, table, strict=True):
        assert_same_logprobs(row, gathered(logits, targets, chain))


@pytest.mark.parametrize(
    ("transforms", "expected"),
    [
        ([], PROBS),
        ([top_k(2)], [5 / 7, 2 / 7, 0, 0, 0]),
        ([top_p(0.3)], [1, 0, 0, 0, 0]),
        ([top_p(0.65)], [5 / 7, 2 / 7, 0, 0, 0]),
        ([top_p(0.71)], [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0]),
        ([greedy()], [1, 0, 0, 0, 0]),
        ([temperature(0.5)], [p * p / sum(q * q for q in PROBS) for p in PROBS]),
    ],
)
def test_target_logprobs_on_the_hand_computed_vocabulary(transforms, expected):
    logits = LOGITS.float().expand(5, 5)
    fast = target_logprobs(logits, torch.arange(5), transforms)
    assert fast.exp().tolist() == pytest.approx(expected)
    assert_same_logprobs(fast, gathered(logits, torch.arange(5), transforms))
