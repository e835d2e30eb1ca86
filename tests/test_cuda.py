"""CPU and CUDA give the same samples and the same scores (skipped where no GPU is present)."""

from __future__ import annotations

import pytest
import torch

from privleak.cid import cid_generate
from privleak.decoding import (
    decode,
    decoder_logprobs,
    greedy,
    sampling_logprobs,
    standard_transforms,
    temperature,
    top_k,
    top_p,
)
from privleak.dp_icl import DPICLMix
from privleak.dp_rag import DPICLSettings, dp_icl_forced_logprobs
from privleak.pad import (
    LogitNoise,
    PADSettings,
    StaticNoise,
    _compiled_noisy_step,
    _token_hashes,
    hashed_normals,
    noise_seeds,
    noisy_step_logprobs,
    settings_table,
    step_keys,
)
from privleak.prompts import ContextPrompt
from privleak.scoring import continuation_logprobs
from tests.conftest import tiny_llama, tiny_opt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

PROMPTS = [[5, 9, 4, 17], [8, 3], [30, 31, 12, 6, 7, 22]] * 4


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_same_seed_same_tokens_on_cpu_and_cuda(build):
    chain = standard_transforms(temperature_value=1.3, top_p_value=0.95)
    kwargs = {"max_new_tokens": 12, "transforms": chain, "seed": 3, "eos_token_id": 2}
    cpu = decode(build(), PROMPTS, **kwargs)
    cuda = decode(build().cuda(), PROMPTS, **kwargs)
    assert torch.equal(cpu.tokens, cuda.tokens)
    assert torch.allclose(cpu.sample_logprobs, cuda.sample_logprobs, atol=1e-4)


def test_cid_records_agree_on_cpu_and_cuda():
    prompts = [ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11], [12]), ContextPrompt([1], [13], [12])]
    kwargs = {"max_new_tokens": 8, "min_new_tokens": 3, "eos_token_id": 2, "seed": 1}
    cpu = cid_generate(tiny_llama(), prompts, [(0.5, 0.8), (1.5, 1.0)], **kwargs)
    cuda = cid_generate(tiny_llama().cuda(), prompts, [(0.5, 0.8), (1.5, 1.0)], **kwargs)
    assert torch.equal(cpu.tokens, cuda.tokens)
    assert torch.allclose(cpu.tau, cuda.tau, atol=1e-4)


def test_teacher_forced_scores_agree_on_cpu_and_cuda():
    continuations = [[7, 12, 3], [20, 6], [11, 4, 9, 5]] * 4
    cpu = continuation_logprobs(tiny_opt(), PROMPTS, continuations)
    cuda = continuation_logprobs(tiny_opt().cuda(), PROMPTS, continuations)
    for a, b in zip(cpu, cuda, strict=True):
        assert torch.allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_cuda_graph_replay_samples_what_the_dynamic_cache_samples(build):
    chain = standard_transforms(temperature_value=1.3, top_p_value=0.95)
    kwargs = {"max_new_tokens": 12, "transforms": chain, "seed": 3, "eos_token_id": 2,
              "min_new_tokens": 2, "max_batch_streams": 8}  # fmt: skip
    model = build().cuda()
    dynamic = decode(model, PROMPTS, forward_mode="dynamic", **kwargs)
    graph = decode(model, PROMPTS, forward_mode="graph", **kwargs)
    assert dynamic.lengths.min() < 12  # finished groups ride along in the replayed batch
    assert torch.equal(dynamic.tokens, graph.tokens)
    assert torch.allclose(dynamic.sample_logprobs, graph.sample_logprobs, atol=1e-4)
    assert torch.allclose(dynamic.stream_logprobs, graph.stream_logprobs, atol=1e-4)


def test_cid_uses_the_cuda_graph_by_default_and_agrees_with_the_cpu():
    prompts = [ContextPrompt([1, 4], [5, 6, 7, 8, 9, 10, 11], [12]), ContextPrompt([1], [13], [12])]
    kwargs = {"max_new_tokens": 8, "min_new_tokens": 3, "eos_token_id": 2, "seed": 1}
    settings = [(0.5, 0.8), (1.5, 1.0)]
    cpu = cid_generate(tiny_llama(), prompts, settings, **kwargs)
    graph = cid_generate(tiny_llama().cuda(), prompts, settings, forward_mode="graph", **kwargs)
    auto = cid_generate(tiny_llama().cuda(), prompts, settings, **kwargs)
    assert torch.equal(cpu.tokens, graph.tokens) and torch.equal(graph.tokens, auto.tokens)
    assert torch.allclose(cpu.tau, graph.tau, atol=1e-4)


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_cuda_graph_recaptured_for_the_live_half_samples_the_same(build):
    steps, model = 12, build().cuda()
    free = decode(model, PROMPTS, max_new_tokens=steps, seed=5, forward_mode="dynamic")
    early = free.tokens[:, : steps - 1]
    eos = max(range(32), key=lambda token: int((early == token).any(1).sum()))
    kwargs = {"max_new_tokens": steps, "seed": 5, "eos_token_id": eos}
    dynamic = decode(model, PROMPTS, forward_mode="dynamic", **kwargs)
    graph = decode(model, PROMPTS, forward_mode="graph", **kwargs)
    assert (dynamic.lengths < steps).sum() * 2 >= len(PROMPTS)
    assert torch.equal(dynamic.tokens, graph.tokens)
    assert graph.step_counter.tokens < len(PROMPTS) * (int(graph.lengths.max()) - 1)


def test_decoder_logprobs_on_cuda_equal_the_distribution_for_flat_peaked_and_tied_rows():
    rng = torch.Generator().manual_seed(0)
    flat = torch.randn(64, 49152, generator=rng) * 0.5  # top-p's bracket tier
    peaked = torch.randn(64, 49152, generator=rng) * 10  # its top-candidates tier
    tied = (torch.randn(64, 49152, generator=rng) * 2).bfloat16().float()  # bf16's many ties
    logits = torch.cat([flat, peaked, tied])
    near_top = logits.topk(50).indices.gather(-1, torch.randint(0, 50, (192, 1), generator=rng))
    targets = torch.where(
        torch.arange(192) % 2 == 0, near_top[:, 0], torch.randint(0, 49152, (192,), generator=rng)
    )
    chains = [[], [greedy()], [top_k(5)], [top_k(10)], [top_p(0.6)], [temperature(0.1)]]
    on_cuda = decoder_logprobs(logits.cuda(), targets.cuda(), chains).cpu()
    on_cpu = decoder_logprobs(logits, targets, chains)
    for chain, row, cpu_row in zip(chains, on_cuda, on_cpu, strict=True):
        reference = sampling_logprobs(logits.cuda(), chain).gather(-1, targets.cuda()[:, None])
        reference = reference[:, 0].cpu()
        for got in (row, cpu_row):
            assert torch.equal(torch.isinf(got), torch.isinf(reference)), chain
            finite = torch.isfinite(reference)
            torch.testing.assert_close(got[finite], reference[finite], atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_dp_icl_samples_agree_on_cpu_and_cuda_and_equal_the_forced_log_probs(build):
    """DP-RAG's decode (1 public + 3 document streams per group, two epsilons, one mix) draws
    the same tokens on both devices; on CUDA its recorded log-probs are the exact forced ones."""
    streams = [[5, 9, 4], [5, 30, 31, 9, 4], [5, 12, 6, 9, 4], [5, 7, 22, 8, 9, 4]]
    settings = [DPICLSettings(epsilon=e, clip=0.5, theta=1.0) for e in (0.5, 3.0)]
    mix = DPICLMix(3, [s.epsilon / s.sensitivity for s in settings], 1.0, 0.5, 1.0)
    kwargs = {"max_new_tokens": 8, "streams_per_group": 4, "mix": mix, "seed": 2,
              "group_keys": ["low", "high"], "eos_token_id": 2, "min_new_tokens": 8}  # fmt: skip
    cpu = decode(build(), streams * 2, **kwargs)
    model = build().cuda()
    cuda = decode(model, streams * 2, **kwargs)
    assert torch.equal(cpu.tokens, cuda.tokens)
    for g, setting in enumerate(settings):
        (forced,) = dp_icl_forced_logprobs(
            model, streams, cuda.tokens[g].tolist(), [setting], pad_id=0, eos_token_id=2,
            blocked_steps=8,
        )  # fmt: skip
        assert torch.allclose(forced, cuda.sample_logprobs[g].cpu(), atol=1e-4)


@pytest.mark.parametrize("build", [tiny_llama, tiny_opt])
def test_pad_noise_and_samples_agree_on_cpu_and_cuda(build):
    keys = step_keys(noise_seeds(0, list(range(6))), 5)
    # Integer hashing is exact on both devices; the inverse normal CDF may differ in the last ulp.
    assert torch.allclose(hashed_normals(keys, 5000), hashed_normals(keys.cuda(), 5000).cpu(),
                          atol=1e-5)  # fmt: skip
    noises = [None, StaticNoise(0.8), PADSettings(epsilon=0.05)] * 4

    def run(model):
        mix = LogitNoise(noises, noise_seeds(3, list(range(len(PROMPTS)))))
        return decode(model, PROMPTS, max_new_tokens=10, transforms=[temperature(0.7)], mix=mix,
                      seed=3, eos_token_id=2)  # fmt: skip

    cpu, cuda = run(build()), run(build().cuda())
    assert torch.equal(cpu.tokens, cuda.tokens)
    assert torch.allclose(cpu.records["sigma"], cuda.records["sigma"], atol=1e-4)


def test_compiled_pad_step_matches_the_eager_step():
    # The CUDA decoder runs PAD's step compiled; batch sizes change as groups finish.
    noises = [None, StaticNoise(0.8), PADSettings(epsilon=0.05), PADSettings(tau_margin=0.1)] * 8
    table = {k: v.cuda() for k, v in settings_table(noises).items()}
    table["seeds"] = noise_seeds(1, list(range(len(noises)))).cuda()
    generator = torch.Generator().manual_seed(0)
    for size, step in ((32, 0), (7, 3), (19, 40)):
        groups = torch.randperm(len(noises), generator=generator)[:size]
        logits = 4 * torch.randn(size, 3001, generator=generator)
        confident = int((groups % 4 == 2).nonzero()[0])  # a PAD(epsilon=0.05) row
        logits[confident, 5] = 40.0
        logprobs = torch.log_softmax(logits, -1).cuda()
        args = (logprobs, step, groups.cuda(), table, _token_hashes(3001, logprobs.device))
        eager, compiled = noisy_step_logprobs(*args), _compiled_noisy_step()(*args)
        for name, a, b in zip(("noisy", "sigma", "delta"), eager[:3], compiled[:3], strict=True):
            assert torch.allclose(a, b, atol=1e-4), name
        assert torch.equal(eager[3], compiled[3])
        assert compiled[3][confident] == 0  # screened


def test_s3_forbidden_token_sampling_agrees_on_cpu_and_cuda():
    from privleak.lira_sampling import sample_continuations
    from tests.conftest import word_tokenizer

    tokenizer = word_tokenizer(add_bos=True)
    draws = {}
    for device in ("cpu", "cuda"):
        model = tiny_llama(vocab_size=16, window=128).to(device)
        draws[device] = sample_continuations(
            model, tokenizer, ["the cat sat", "a dog ran"], ["a", "b"], samples=3, top_k=5,
            max_new_tokens=6, seed=7, max_batch_streams=None, eos_token_id=None,
            forbidden_token_ids=[4],
        )  # fmt: skip
    assert [r["tokens"] for r in draws["cpu"]] == [r["tokens"] for r in draws["cuda"]]
    assert not any(4 in r["tokens"] for r in draws["cuda"])


def test_s3_redaction_schedule_takes_dp_steps_on_cuda_like_on_cpu():
    from privleak.training.schedules import private_schedule_finetune
    from tests.conftest import family_llama

    original = [[4 + (i % 7), 10, 11, 12, 13, 14, 15, 16 + (i % 5)] for i in range(48)]
    redacted = [[doc[0], 10, 3, 3, 3, 3, 15, doc[-1]] for doc in original]
    private = {"target_epsilon": 8.0, "delta": 1e-5, "max_grad_norm": 1.0, "batch_size": 16,
               "learning_rate": 1e-2}  # fmt: skip
    results = {
        device: private_schedule_finetune(
            family_llama().to(device),
            redacted,
            original,
            schedule="linear",
            seed=3,
            private=private,
            epochs=2,
            batch_size=16,
            seq_len=8,
            learning_rate=1e-2,
            pad_id=0,
        )  # fmt: skip
        for device in ("cpu", "cuda")
    }
    cpu, cuda = results["cpu"], results["cuda"]
    assert cuda.plain == cpu.plain and cuda.accounted_steps == cuda.dp_steps == cpu.dp_steps
    assert cuda.epsilon == pytest.approx(cpu.epsilon)
    # the plain steps before the first DP step see the same data and no noise
    first_dp = cpu.plain.index(False)
    assert cuda.losses[:first_dp] == pytest.approx(cpu.losses[:first_dp], rel=1e-4)


def test_audit_forced_laws_agree_on_cpu_and_cuda():
    from privleak.audit import pairs
    from privleak.audit.canaries import Canary
    from tests.conftest import word_tokenizer

    canary = Canary(id="c", document="alice ran to the park with bob", secret="bob",
                    question="who ran", answer_prefix="it is",
                    others=("the cat sat on the mat", "a dog sat"))  # fmt: skip
    tokenizer = word_tokenizer(add_bos=True)
    candidates = [tokenizer(t, add_special_tokens=False)["input_ids"]
                  for t in ("bob", "bob ran to the park", "a dog")]  # fmt: skip
    setting = DPICLSettings(1.0, 1.0, 0.5, 0.01)
    cid = {"b": pairs.CIDVariant(1.0, 0.5, 0.8)}
    pad = {"p": (PADSettings(epsilon=0.2), PADSettings(epsilon=0.2))}
    out = {}
    for device in ("cpu", "cuda"):
        model = tiny_llama(vocab_size=16, window=256).to(device)
        out[device] = (
            pairs.dp_icl_scores(model, tokenizer, canary, "add", "plain", {"d": setting},
                                candidates)["d"],
            pairs.cid_scores(model, tokenizer, canary, "add", "plain", cid, candidates)["b"],
            pairs.pad_scores(model, tokenizer, canary, "replace", "plain", pad, candidates,
                             temperature=0.2)["p"],
        )  # fmt: skip
    for cpu, cuda in zip(out["cpu"], out["cuda"], strict=True):
        for a, b in zip(cpu.logp_in + cpu.logp_out, cuda.logp_in + cuda.logp_out, strict=True):
            assert a == pytest.approx(b, abs=1e-4)


def test_mia_token_stats_agree_on_cpu_and_cuda():
    from privleak.mia.scoring import token_stats

    texts = [[1, 5, 9, 3, 7], [1, 7], [1, 4, 4, 4, 4, 2]]
    out = {}
    for device in ("cpu", "cuda"):
        model = tiny_llama(vocab_size=32, window=64).to(device)
        out[device] = token_stats(model, texts, batch_size=2)
    for cpu, cuda in zip(out["cpu"], out["cuda"], strict=True):
        for field in ("logprob", "mu", "sigma"):
            assert getattr(cpu, field) == pytest.approx(getattr(cuda, field), abs=1e-4)
