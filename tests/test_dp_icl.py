"""DP-ICL aggregation (privleak.dp_icl) on hand-computable distributions and in the decoder."""

from __future__ import annotations

import math

import pytest
import torch

from privleak.decoding import decode
from privleak.dp_icl import DPICLMix, clipped_scores, dp_icl_utility
from privleak.errors import PrivleakError
from tests.conftest import tiny_llama

DOC = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]).log()
PUBLIC = torch.tensor([0.1, 0.4, 0.3, 0.1, 0.1]).log()


def test_clipped_scores_by_hand():
    # alpha 1: l_norm = L / max L - 1 = [0, -.6, -.7, -.8, -.9]; centred on -.45.
    centred = [0.45, -0.15, -0.25, -0.35, -0.45]
    torch.testing.assert_close(clipped_scores(DOC, 1.0, 1.0), torch.tensor(centred))
    # C = 0.3 < 0.45: scaled by 0.3 / 0.45.
    torch.testing.assert_close(clipped_scores(DOC, 1.0, 0.3), torch.tensor(centred) * (0.3 / 0.45))


def test_large_alpha_tends_to_the_indicator_of_the_argmax():
    # l_norm -> 0 at the argmax and -1/alpha elsewhere: centred +-1/(2 alpha), then clipped to C.
    scores = clipped_scores(DOC, 1e4, 1.0)
    torch.testing.assert_close(scores * 2e4, torch.tensor([1.0, -1, -1, -1, -1]), atol=1e-3, rtol=0)


def test_utility_and_mix_logits_by_hand():
    utility = dp_icl_utility(
        PUBLIC[None], DOC[None, None], torch.tensor([[True]]), alpha=1.0, clip=0.3, theta=2.0
    )
    expected = 2.0 * PUBLIC + clipped_scores(DOC, 1.0, 0.3)
    torch.testing.assert_close(utility[0], expected)
    mix = DPICLMix(documents=1, epsilon=3.0, alpha=1.0, clip=0.3, theta=2.0)
    logits, records = mix(torch.stack([PUBLIC, DOC])[None], torch.tensor([0]), 0)
    torch.testing.assert_close(logits[0], 3.0 * expected / (2 * 0.3))
    assert records["documents"].tolist() == [1]


def test_absent_slots_do_not_count():
    other = torch.tensor([0.05, 0.05, 0.1, 0.1, 0.7]).log()
    one_slot = DPICLMix(documents=1, epsilon=1.0)(
        torch.stack([PUBLIC, DOC])[None], torch.tensor([0]), 0
    )[0]
    padded = DPICLMix(documents=[1, 2], epsilon=1.0)(
        torch.stack([torch.stack([PUBLIC, DOC, other]), torch.stack([PUBLIC, DOC, other])]),
        torch.tensor([0, 1]),
        0,
    )[0]
    torch.testing.assert_close(padded[0], one_slot[0])
    assert not torch.allclose(padded[1], one_slot[0])


def test_one_document_moves_the_utility_by_at_most_c():
    rng = torch.Generator().manual_seed(0)
    for clip in (0.1, 1.0, 5.0):
        docs = torch.log_softmax(torch.randn(1, 6, 50, generator=rng) * 4, -1)
        public = torch.log_softmax(torch.randn(1, 50, generator=rng), -1)
        present = torch.ones(1, 6, dtype=torch.bool)
        full = dp_icl_utility(public, docs, present, alpha=3.0, clip=clip, theta=1.0)
        present[0, 2] = False  # the neighbouring store without document 2
        fewer = dp_icl_utility(public, docs, present, alpha=3.0, clip=clip, theta=1.0)
        assert float((full - fewer).abs().max()) <= clip + 1e-6


def test_no_documents_leaves_the_public_stream():
    logits, _ = DPICLMix(documents=0, epsilon=2.0, theta=1.0)(
        torch.stack([PUBLIC, DOC])[None], torch.tensor([0]), 0
    )
    torch.testing.assert_close(torch.softmax(logits[0], -1), torch.softmax(PUBLIC, -1))


def test_dp_icl_decodes_through_the_shared_decoder_independently_of_batching():
    question, public = [5, 9, 4], [5, 9, 4]
    documents = [[[7, 8, 11], [12, 13]], [[20, 21, 22, 23], [3, 3]]]
    counts = [2, 1]  # the second group retrieved one document; its second slot is padding
    prompts = []
    for docs in documents:
        prompts += [public] + [d + question for d in docs]
    kwargs = {"max_new_tokens": 6, "streams_per_group": 3, "seed": 4, "eos_token_id": 2}
    both = decode(tiny_llama(), prompts, mix=DPICLMix(counts, epsilon=[5.0, 1.0]), **kwargs)
    first = decode(tiny_llama(), prompts[:3], mix=DPICLMix(counts[:1], epsilon=5.0), **kwargs)
    assert torch.equal(both.tokens[0], first.tokens[0])
    assert both.records["documents"][1].unique().tolist() == [1]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DPICLMix(1, epsilon=0.0), "epsilon per token must be a finite number > 0"),
        (lambda: DPICLMix(1, epsilon=1.0, clip=0.0), r"C \(DP-ICL clipping\) must be > 0"),
        (lambda: DPICLMix(1, epsilon=1.0, alpha=-1.0), "alpha"),
        (lambda: DPICLMix(-1, epsilon=1.0), "document count must be >= 0"),
        (lambda: DPICLMix(3, epsilon=1.0).check_slots(2), "3 documents but only 2"),
    ],
)
def test_bad_settings_fail_with_one_line(make, message):
    with pytest.raises(PrivleakError, match=message):
        make()


def test_epsilon_sharpens_towards_the_utility_argmax():
    streams = torch.stack([PUBLIC, DOC])[None]
    probs = [
        torch.softmax(DPICLMix(1, epsilon=e)(streams, torch.tensor([0]), 0)[0][0], -1)
        for e in (0.01, 1.0, 100.0)
    ]
    assert float(probs[0].max() - probs[0].min()) < 0.01  # nearly uniform
    assert probs[2].max() > 0.99 and probs[1].max() < probs[2].max()
    assert math.isclose(float(probs[1].sum()), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize("alpha", [1.0, 0.3, 4.0])
def test_utility_is_the_sum_of_the_clipped_scores_and_reads_logits_alike(alpha):
    """dp_icl_utility sums l_clipped without building it: equal to the definition's sum over
    the present documents, and the same from the document streams' logits as from their
    log-probs (l_norm reads differences from the top token)."""
    generator = torch.Generator().manual_seed(3)
    logits = 4 * torch.randn(3, 5, 40, generator=generator)
    logits[..., -2:] = float("-inf")  # a padded vocabulary
    logprobs = torch.log_softmax(logits, -1)
    public = torch.log_softmax(torch.randn(3, 40, generator=generator), -1)
    present = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    clip, theta = 0.3, torch.tensor([0.5, 0.0, 2.0])
    definition = torch.where(present[:, :, None], clipped_scores(logprobs, alpha, clip), 0).sum(1)
    expected = torch.where(torch.isfinite(public), theta[:, None] * public + definition, -math.inf)
    for rows in (logprobs, logits):
        utility = dp_icl_utility(public, rows, present, alpha, clip, theta)
        torch.testing.assert_close(utility, expected, atol=1e-5, rtol=0)
