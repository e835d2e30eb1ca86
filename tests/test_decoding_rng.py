"""The group's random stream and the inverse-CDF draw."""

from __future__ import annotations

import torch

from privleak.decoding import group_seed, sample_inverse_cdf
from tests.test_decoding_transforms import LOGITS, PROBS


def test_inverse_cdf_draws_the_token_whose_interval_holds_u():
    # CDF of PROBS: 0.5, 0.7, 0.85, 0.95, 1.0; token i owns [cdf_{i-1}, cdf_i).
    logprobs = LOGITS.expand(6, -1)
    uniforms = torch.tensor([0.0, 0.49, 0.5, 0.84, 0.9, 0.999], dtype=torch.float64)
    assert sample_inverse_cdf(logprobs, uniforms).tolist() == [0, 0, 1, 2, 3, 4]


def test_inverse_cdf_never_draws_a_token_of_zero_probability():
    logprobs = torch.log(torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]], dtype=torch.float64))
    uniforms = torch.tensor([0.0, 0.25, 0.5, 0.75, 1 - 1e-16], dtype=torch.float64)
    drawn = sample_inverse_cdf(logprobs.expand(5, -1), uniforms)
    assert drawn.tolist() == [1, 1, 3, 3, 3]


def test_inverse_cdf_frequencies_match_the_distribution():
    uniforms = torch.rand(40000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    drawn = sample_inverse_cdf(LOGITS.expand(len(uniforms), -1), uniforms)
    frequencies = torch.bincount(drawn, minlength=5).double() / len(uniforms)
    # 4 binomial standard errors at n = 40000 are <= 0.01.
    assert torch.allclose(frequencies, torch.tensor(PROBS, dtype=torch.float64), atol=0.01)


def test_group_seeds_differ_by_seed_and_key_and_repeat_exactly():
    assert group_seed(0, ("doc-1", 1.0)) == group_seed(0, ("doc-1", 1.0))
    seeds = {group_seed(s, ("doc-1", lam)) for s in (0, 1) for lam in (0.5, 1.0)}
    assert len(seeds) == 4
