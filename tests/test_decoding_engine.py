"""The N-stream sampler loop: seeded, batched and chunked decoding, the mix hook, EOS handling
and the records it keeps."""

from __future__ import annotations

import math

import torch

from privleak.decoding import decode, greedy, standard_transforms, temperature
from privleak.models import mark_real_vocab
from privleak.scoring import continuation_logprobs
from tests.conftest import PeakForward, tiny_opt

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
