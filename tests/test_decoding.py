"""Logit transforms on a hand-computable 5-token vocabulary, and the N-stream sampler loop."""

from __future__ import annotations

import math

import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from privleak import decoding
from privleak.decoding import (
    decode,
    greedy,
    group_seed,
    sample_inverse_cdf,
    sampling_logprobs,
    standard_transforms,
    target_logprobs,
    temperature,
    top_k,
    top_p,
)
from privleak.errors import PrivleakError
from privleak.models import mark_real_vocab
from privleak.scoring import continuation_logprobs
from tests.conftest import PeakForward, tiny_opt

PROBS = [0.5, 0.2, 0.15, 0.1, 0.05]
LOGITS = torch.log(torch.tensor([PROBS], dtype=torch.float64))


def probs_after(*transforms):
    return sampling_logprobs(LOGITS, transforms).exp()[0].tolist()


def test_temperature_squares_probabilities_at_half():
    squared = [p * p for p in PROBS]
    assert probs_after(temperature(0.5)) == pytest.approx([q / sum(squared) for q in squared])


def test_top_k_keeps_and_renormalises_the_k_largest():
    assert probs_after(top_k(2)) == pytest.approx([5 / 7, 2 / 7, 0, 0, 0])
    assert probs_after(top_k(10)) == pytest.approx(PROBS)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.3, [1, 0, 0, 0, 0]),  # the top token alone reaches 0.3
        (0.5, [1, 0, 0, 0, 0]),  # exactly reached by the top token
        (0.65, [5 / 7, 2 / 7, 0, 0, 0]),
        (0.71, [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0]),
        (1.0, PROBS),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(p, expected):
    assert probs_after(top_p(p)) == pytest.approx(expected)


def test_greedy_is_an_indicator_on_the_first_argmax():
    assert probs_after(greedy()) == [1, 0, 0, 0, 0]
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0]])
    assert sampling_logprobs(ties, [greedy()]).exp()[0].tolist() == [0, 1, 0, 0, 0]


def test_temperature_then_top_k_then_top_p_composes_in_order():
    # T=0.5 gives q proportional to p^2; top-k 3 renormalises q0..q2 to [.8, .128, .072]; top-p
    # 0.85 then keeps the first two (mass before the third is .928).
    squared = [p * p for p in PROBS[:2]]
    expected = [q / sum(squared) for q in squared] + [0, 0, 0]
    chain = standard_transforms(temperature_value=0.5, top_k_value=3, top_p_value=0.85)
    assert probs_after(*chain) == pytest.approx(expected)


def test_transforms_match_hf_warpers_on_random_logits(rng):
    logits = torch.randn(6, 50, generator=rng) * 3
    pairs = [
        (temperature(0.7), TemperatureLogitsWarper(0.7)),
        (top_k(5), TopKLogitsWarper(5)),
        (top_p(0.6), TopPLogitsWarper(0.6)),
        (top_p(0.95), TopPLogitsWarper(0.95)),
    ]
    for ours, theirs in pairs:
        assert torch.equal(torch.isinf(ours(logits)), torch.isinf(theirs(None, logits.clone())))
        finite = torch.isfinite(ours(logits))
        assert torch.allclose(ours(logits)[finite], theirs(None, logits.clone())[finite])


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
    monkeypatch.setattr(decoding, "NUCLEUS_CANDIDATES", candidates)
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
    floor = decoding._nucleus_of_descending

    def spy(top, p, before=0.0):
        shapes.append(tuple(top.shape))
        return floor(top, p, before)

    monkeypatch.setattr(decoding, "_nucleus_of_descending", spy)
    return shapes


def test_top_p_tiers_candidates_then_bracket_then_full_sort(rng, monkeypatch):
    monkeypatch.setattr(decoding, "NUCLEUS_CANDIDATES", 8)
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
    monkeypatch.setattr(decoding, "BRACKET_MARGIN", 0)  # one sample value wide: it misses
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
    tau, z, found = decoding._bracketed(probs, p, torch.zeros(64), torch.full((64,), math.inf))
    full_tau, full_z, _ = decoding._nucleus_of_descending(probs.sort(-1, descending=True).values, p)
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
        assert torch.equal(decoding._largest(logits, k), logits.topk(k).values)


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


def test_top_p_keeps_every_token_tied_with_the_last_one():
    logits = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]])  # q = 0.43, 0.16 x 3, 0.06
    # The top token and one 0.16 reach 0.5; the other two tied 0.16s stay as well.
    kept = torch.isfinite(top_p(0.5)(logits))
    assert kept.tolist() == [[True, True, True, True, False]]


def test_top_p_of_one_keeps_the_tail_whatever_float32_sums_to():
    logits = torch.randn(8, 50_000, generator=torch.Generator().manual_seed(3)) * 4
    assert torch.equal(top_p(1.0)(logits), logits)


def test_decoder_logprobs_share_passes_and_equal_each_decoder_alone(rng):
    logits = torch.randn(30, 400, generator=rng) * 2
    targets = mixed_targets(logits, rng)
    chains = [[], [greedy()], [top_k(5)], [top_k(10)], [top_p(0.6)], [temperature(0.1)]]
    table = decoding.decoder_logprobs(logits, targets, chains)
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


@pytest.mark.parametrize(
    ("make", "bad", "message"),
    [
        (temperature, 0.0, "temperature must be > 0"),
        (temperature, -1.0, "temperature must be > 0"),
        (top_p, 0.0, r"top_p must be in \(0, 1\]"),
        (top_p, 1.5, r"top_p must be in \(0, 1\]"),
        (top_k, 0, "top_k must be an integer >= 1"),
    ],
)
def test_bad_decoder_params_are_one_line_errors(make, bad, message):
    with pytest.raises(PrivleakError, match=message) as info:
        make(bad)
    assert "\n" not in str(info.value)


PROMPTS = [[5, 9, 4, 17], [8, 3], [30, 31, 12, 6, 7, 22]]


def test_seeded_sampling_is_deterministic(tiny_lm):
    chain = standard_transforms(temperature_value=1.5)
    runs = [
        decode(tiny_lm, PROMPTS, max_new_tokens=12, transforms=chain, seed=s) for s in (7, 7, 8)
    ]
    assert torch.equal(runs[0].tokens, runs[1].tokens)
    assert not torch.equal(runs[0].tokens, runs[2].tokens)


def test_greedy_matches_hf_generate(tiny_lm):
    decoded = decode(tiny_lm, PROMPTS, max_new_tokens=10, transforms=[greedy()], eos_token_id=2)
    for prompt, ours in zip(PROMPTS, decoded.token_lists(), strict=True):
        hf = tiny_lm.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=10,
            do_sample=False,
            eos_token_id=2,
            pad_token_id=0,
        )[0, len(prompt) :].tolist()
        assert ours == hf[: len(ours)]
        assert len(ours) == len(hf) or hf[len(ours) :] == [0] * (len(hf) - len(ours))


def test_recorded_logprobs_equal_teacher_forced_scores(tiny_lm):
    decoded = decode(
        tiny_lm, PROMPTS, max_new_tokens=8, transforms=standard_transforms(top_k_value=4), seed=3
    )
    generated = decoded.token_lists()
    scored = continuation_logprobs(tiny_lm, PROMPTS, generated)
    for i, scores in enumerate(scored):
        assert torch.allclose(decoded.stream_logprobs[i, : len(scores)], scores, atol=1e-4)


def test_min_new_tokens_blocks_eos(tiny_lm):
    # With EOS = the model's greedy first token, greedy decoding stops at once unless blocked.
    first = decode(tiny_lm, PROMPTS[:1], max_new_tokens=1, transforms=[greedy()]).tokens[0, 0]
    eos = int(first)
    stopped = decode(
        tiny_lm, PROMPTS[:1], max_new_tokens=6, transforms=[greedy()], eos_token_id=eos
    )
    assert stopped.lengths.tolist() == [1]
    blocked = decode(
        tiny_lm,
        PROMPTS[:1],
        max_new_tokens=6,
        transforms=[greedy()],
        eos_token_id=eos,
        min_new_tokens=3,
    )
    assert eos not in blocked.tokens[0, :3].tolist()
    assert blocked.lengths.item() >= 3


def test_mix_hook_feeds_the_group_token_to_every_stream(tiny_lm):
    """A mix that follows stream 2 of each group decodes exactly like stream 2 alone, and stream
    1 is teacher-forced on those tokens."""
    pairs = [PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[0]]
    follow_second = decode(
        tiny_lm,
        pairs,
        max_new_tokens=8,
        transforms=[greedy()],
        streams_per_group=2,
        mix=lambda grouped, groups, step: (grouped[:, 1], {}),
    )
    alone = decode(tiny_lm, [PROMPTS[1], PROMPTS[0]], max_new_tokens=8, transforms=[greedy()])
    assert torch.equal(follow_second.tokens, alone.tokens)
    first_streams = continuation_logprobs(tiny_lm, [PROMPTS[0], PROMPTS[2]], alone.token_lists())
    assert torch.allclose(follow_second.stream_logprobs[0], first_streams[0], atol=1e-4)
    assert torch.allclose(follow_second.stream_logprobs[2], first_streams[1], atol=1e-4)


def test_lambda_mix_of_two_streams_is_the_weighted_logit_sum(tiny_lm):
    lam = 1.5
    mixed = decode(
        tiny_lm,
        PROMPTS[:2],
        max_new_tokens=3,
        streams_per_group=2,
        keep_distributions=True,
        mix=lambda g, groups, step: (lam * g[:, 0] + (1 - lam) * g[:, 1], {}),
        transforms=[temperature(0.8)],
    )
    raw = mixed.stream_distributions[:, 0]  # [2 streams, V] log-softmax at the first step
    expected = torch.log_softmax((lam * raw[0] + (1 - lam) * raw[1]) / 0.8, dim=-1)
    assert torch.allclose(mixed.distributions[0, 0], expected, atol=1e-5)
    assert math.isclose(float(mixed.distributions[0, 0].exp().sum()), 1.0, rel_tol=1e-5)


# ---------------------------------------------------------------- sampling and batching


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


def test_samples_do_not_depend_on_batching_or_on_other_groups(tiny_lm):
    """A group's tokens depend on (seed, key) alone: not on the batch budget, on which groups
    share its batch, or on groups added to the call."""
    chain = standard_transforms(temperature_value=1.5)
    keys = ["a", "b", "c"]
    whole = decode(tiny_lm, PROMPTS, max_new_tokens=10, transforms=chain, group_keys=keys, seed=4)
    one_at_a_time = decode(
        tiny_lm, PROMPTS, max_new_tokens=10, transforms=chain, group_keys=keys, seed=4,
        max_batch_streams=1,
    )  # fmt: skip
    more = decode(
        tiny_lm, [PROMPTS[2], [9, 9, 9], PROMPTS[0]], max_new_tokens=10, transforms=chain,
        group_keys=["c", "new", "a"], seed=4, max_batch_streams=2,
    )  # fmt: skip
    assert torch.equal(whole.tokens, one_at_a_time.tokens)
    assert torch.allclose(whole.sample_logprobs, one_at_a_time.sample_logprobs, atol=1e-5)
    assert more.token_lists()[0] == whole.token_lists()[2]
    assert more.token_lists()[2] == whole.token_lists()[0]


def test_peak_batch_is_bounded_by_the_budget_not_by_the_number_of_groups(tiny_lm):
    prompts = [[5 + i % 20, 9, 4 + i % 7] for i in range(40)]
    proxy = PeakForward(tiny_lm)
    decode(proxy, prompts, max_new_tokens=5, transforms=[temperature(1.0)], max_batch_streams=6)
    assert proxy.rows <= 6
    assert proxy.area <= 6 * (3 + 5)
    unbounded = PeakForward(tiny_lm)
    decode(unbounded, prompts, max_new_tokens=5, transforms=[temperature(1.0)])
    assert unbounded.rows == 40


def test_finished_groups_stop_costing_forwards(tiny_lm):
    """Every step forwards exactly the groups still running: step tokens = sum of lengths minus
    the last token of each group (a group's final token is never fed back)."""
    decoded = decode(tiny_lm, PROMPTS * 4, max_new_tokens=12, transforms=[temperature(2.0)],
                     eos_token_id=2, seed=5)  # fmt: skip
    assert int(decoded.lengths.min()) < 12  # some group stopped early
    assert decoded.step_counter.tokens == int((decoded.lengths - 1).sum())
    finished = decoded.lengths < 12
    for row, length in zip(decoded.tokens[finished], decoded.lengths[finished], strict=True):
        assert row[length - 1] == 2 and (row[length:] == 0).all()


def test_padded_vocabulary_rows_are_never_drawn_and_carry_no_mass():
    model = tiny_opt(vocab_size=40)
    mark_real_vocab(model, 30)  # logits 30..39 are padding rows, as in OPT's 50272 vs 50265
    with torch.no_grad():
        model.lm_head.weight[30:] *= 0  # zero the rows, then make them the most likely
        model.lm_head.weight[30:] += model.lm_head.weight[:30].abs().sum(0) * 10
    decoded = decode(model, PROMPTS, max_new_tokens=6, transforms=[temperature(1.0)],
                     keep_distributions=True)  # fmt: skip
    assert int(decoded.tokens.max()) < 30
    assert torch.isinf(decoded.distributions[..., 30:]).all()
    assert torch.allclose(decoded.stream_distributions[..., :30].exp().sum(-1), torch.ones(()))
