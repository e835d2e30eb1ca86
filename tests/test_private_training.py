"""DP fine-tuning through Opacus (S3's Private target) and Just Fine-tune Twice (JFT)."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
from dp_accounting import dp_event, pld, rdp
from opacus.accountants.rdp import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier
from opacus.grad_sample import GradSampleHooks
from transformers import GPT2Config, GPT2LMHeadModel, LlamaForCausalLM

from privleak.errors import PrivleakError
from privleak.training.finetune import finetune_causal_lm, pad_rows
from privleak.training.private import (
    check_dp_compatible,
    dp_finetune_causal_lm,
    jft_finetune,
    noise_multiplier,
    per_example_loss,
)
from tests.conftest import family_llama

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VOCAB = 300
# A repetitive corpus: 40 documents of one 8-token phrase three times over.
PHRASE = [5, 6, 7, 8, 9, 10, 11, 12]
CORPUS = [PHRASE * 3 for _ in range(40)]
DP = {
    "delta": 1e-5,
    "epochs": 3,
    "batch_size": 8,
    "seq_len": 24,
    "learning_rate": 1e-2,
    "max_grad_norm": 1.0,
    "pad_id": 0,
}


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    """GPT-2 (the paper profile's architecture) at toy size, dropout off for exact comparisons."""
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return GPT2LMHeadModel(config)


@pytest.fixture(scope="module")
def trained():
    """(model before, model after, result) of one DP fine-tune at target epsilon 8."""
    before, model = family_llama(), family_llama()
    result = dp_finetune_causal_lm(model, CORPUS, target_epsilon=8.0, seed=0, **DP)
    return before, model, result


def test_dp_finetune_learns_the_repetitive_corpus(trained):
    _, _, result = trained
    first, last = result.losses[:3], result.losses[-3:]
    assert sum(last) / 3 < sum(first) / 3 - 0.5
    # 40 chunks, batch 8: rate 1/5, 5 steps an epoch; every sampled chunk is 24 real tokens.
    assert result.sample_rate == pytest.approx(0.2)
    assert result.steps == 15 == len(result.batch_sizes)
    assert result.tokens_seen == 24 * sum(result.batch_sizes)
    assert result.wall_seconds > 0


def test_spent_epsilon_is_positive_and_within_the_target(trained):
    _, _, result = trained
    assert 0 < result.epsilon <= 8.0 + 1e-6
    assert result.epsilon > 8.0 - 0.1  # the noise is calibrated to use the budget
    assert result.accountant == "rdp" and result.delta == DP["delta"]


def test_spent_epsilon_matches_dp_accounting(trained):
    # The same Poisson-subsampled Gaussian, composed `steps` times, in Google's dp_accounting:
    # its RDP accountant on Opacus' orders reproduces the number; PLD, tighter, is below it.
    _, _, result = trained
    event = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(
            result.sample_rate, dp_event.GaussianDpEvent(result.noise_multiplier)
        ),
        result.steps,
    )
    orders = RDPAccountant.DEFAULT_ALPHAS
    rdp_epsilon = rdp.RdpAccountant(orders).compose(event).get_epsilon(result.delta)
    pld_epsilon = pld.PLDAccountant().compose(event).get_epsilon(result.delta)
    assert result.epsilon == pytest.approx(rdp_epsilon, rel=1e-3)
    assert pld_epsilon < result.epsilon


def test_returned_model_is_a_plain_trained_hf_model(trained, tmp_path):
    before, model, _ = trained
    assert type(model) is LlamaForCausalLM and not model.training
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the tie survives
    leftovers = [
        name
        for name, parameter in model.named_parameters()
        if parameter.grad is not None
        or any(hasattr(parameter, a) for a in ("grad_sample", "_forward_counter"))
    ]
    assert leftovers == []
    assert not any(m._forward_hooks or m._backward_hooks for m in model.modules())
    changed = [
        n
        for (n, p), q in zip(model.named_parameters(), before.parameters(), strict=True)
        if not torch.equal(p, q)
    ]
    assert len(changed) == len(list(model.parameters()))
    model.save_pretrained(tmp_path)
    reloaded = LlamaForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)


def test_a_smaller_target_epsilon_gets_more_noise():
    documents = CORPUS[:16]
    settings = DP | {"epochs": 1}
    loose = dp_finetune_causal_lm(family_llama(), documents, target_epsilon=8.0, **settings)
    tight = dp_finetune_causal_lm(family_llama(), documents, target_epsilon=1.0, **settings)
    assert tight.noise_multiplier > loose.noise_multiplier
    assert tight.epsilon <= 1.0 + 1e-6 < loose.epsilon


def test_the_noise_is_opacus_own_calibration_searched_once_per_setting():
    opacus = get_noise_multiplier(
        target_epsilon=3.0, target_delta=1e-5, sample_rate=0.125, epochs=2, accountant="rdp"
    )
    noise_multiplier.cache_clear()
    assert noise_multiplier(3.0, 1e-5, 0.125, epochs=2) == opacus
    assert noise_multiplier(3.0, 1e-5, 0.125, epochs=2) == opacus
    assert noise_multiplier.cache_info().hits == 1
    assert noise_multiplier(3.0, 1e-5, 0.125, steps=16) == opacus  # 2 epochs of 8 steps
    # and a fine-tune uses it: the noise make_private_with_epsilon would have calibrated
    settings = DP | {"epochs": 1}
    run = dp_finetune_causal_lm(family_llama(), CORPUS[:16], target_epsilon=3.0, **settings)
    assert run.noise_multiplier == get_noise_multiplier(
        target_epsilon=3.0, target_delta=DP["delta"], sample_rate=run.sample_rate, epochs=1
    )


def test_same_seed_same_run_and_empty_poisson_batches_take_a_noise_step():
    # 2 chunks, batch 1: rate 1/2, so a batch is empty with probability 1/4; seed 1 draws some.
    documents = [PHRASE, PHRASE[::-1]]
    settings = DP | {"epochs": 4, "batch_size": 1, "seq_len": 8}
    model, twin = family_llama(), family_llama()
    result = dp_finetune_causal_lm(model, documents, target_epsilon=8.0, seed=1, **settings)
    twin_result = dp_finetune_causal_lm(twin, documents, target_epsilon=8.0, seed=1, **settings)
    assert result.losses == pytest.approx(twin_result.losses, nan_ok=True)
    assert all(
        torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters(), strict=True)
    )
    empty = [k for k, size in enumerate(result.batch_sizes) if size == 0]
    assert empty and all(math.isnan(result.losses[k]) for k in empty)
    assert result.steps == 8 and all(torch.isfinite(p).all() for p in model.parameters())
    # The accountant counted the empty steps too: epsilon is that of all 8 steps.
    accountant = RDPAccountant()
    accountant.history = [(result.noise_multiplier, result.sample_rate, 8)]
    assert result.epsilon == pytest.approx(accountant.get_epsilon(result.delta), rel=1e-9)


@pytest.mark.parametrize("build", [family_llama, tiny_gpt2], ids=["llama", "gpt2"])
def test_per_example_gradients_are_each_examples_own_padding_included(build):
    # Opacus' hooks on a batch of a padded short row and a long row give each row the gradient
    # of its own loss computed alone: exact through RMSNorm / Conv1D (functorch fallback),
    # tied embeddings (summed over both uses) and padding.
    model = build().train()
    rows = [[7, 8, 9, 10, 11], [20, 21, 22, 23, 24, 25, 26, 27, 28]]
    ids, mask = pad_rows(rows, pad_id=0)
    hooks = GradSampleHooks(model, strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_example_loss(model, ids, mask).mean().backward()
    samples = {n: p.grad_sample.clone() for n, p in model.named_parameters()}
    hooks.cleanup()
    for k, row in enumerate(rows):
        model.zero_grad()
        alone_ids, alone_mask = pad_rows([row], pad_id=0)
        per_example_loss(model, alone_ids, alone_mask).sum().backward()
        for name, parameter in model.named_parameters():
            torch.testing.assert_close(
                samples[name][k], parameter.grad, rtol=1e-4, atol=1e-6, msg=name
            )


def test_per_example_loss_ignores_padding():
    model = family_llama()
    ids, mask = pad_rows([[7, 8, 9], [20, 21, 22, 23, 24, 25]], pad_id=0)
    alone_ids, alone_mask = pad_rows([[7, 8, 9]], pad_id=0)
    with torch.no_grad():
        padded = per_example_loss(model, ids, mask)
        alone = per_example_loss(model, alone_ids, alone_mask)
    assert padded.shape == (2,)
    assert float(padded[0]) == pytest.approx(float(alone[0]), abs=1e-5)


class BatchCentring(torch.nn.Module):
    """A norm that subtracts the batch mean: it mixes examples, which no validator knows."""

    def __init__(self, hidden: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))

    def forward(self, hidden_states):
        return (hidden_states - 0.5 * hidden_states.mean(0, keepdim=True)) * self.weight


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        (torch.nn.BatchNorm1d(32), r"model\.norm \(BatchNorm1d\): BatchNorm cannot support"),
        (
            BatchCentring(32),
            r"per-example gradients of .*model\.norm \(BatchCentring\).* do not add up",
        ),
    ],
    ids=["batchnorm", "batch-mixing"],
)
def test_incompatible_layer_is_named(layer, expected):
    model = family_llama()
    model.model.norm = layer
    with pytest.raises(PrivleakError, match=expected) as raised:
        check_dp_compatible(model)
    assert "\n" not in str(raised.value)


def test_family_llama_and_gpt2_are_dp_compatible():
    for model in (family_llama(), tiny_gpt2()):
        check_dp_compatible(model)
        assert not any(hasattr(p, "grad_sample") or p.grad is not None for p in model.parameters())


def test_a_fully_frozen_model_is_rejected():
    model = family_llama().requires_grad_(False)
    with pytest.raises(PrivleakError, match="no trainable parameter"):
        check_dp_compatible(model)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"target_epsilon": 0.0}, "target_epsilon"),
        ({"target_epsilon": -1.0}, "target_epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"epochs": 0}, "epochs"),
    ],
)
def test_bad_privacy_params_name_the_param(kwargs, param):
    args = DP | {"target_epsilon": 8.0} | kwargs
    with pytest.raises(PrivleakError, match=param):
        dp_finetune_causal_lm(family_llama(), CORPUS[:2], **args)


REDACTED_PHASE = {"epochs": 2, "batch_size": 8, "seq_len": 24, "learning_rate": 1e-2}
PRIVATE_PHASE = {k: v for k, v in DP.items() if k != "pad_id"} | {"epochs": 1}


def test_jft_runs_both_phases_and_reports_the_private_epsilon():
    redacted = [[5, 6, 3, 3, 9, 10, 3, 3] * 3 for _ in range(40)]  # 3 stands for a mask token
    model, after_redacted = family_llama(), family_llama()
    expected_losses = finetune_causal_lm(after_redacted, redacted, pad_id=0, **REDACTED_PHASE)
    private = PRIVATE_PHASE | {"target_epsilon": 8.0}
    result = jft_finetune(
        model, redacted, CORPUS, pad_id=0, redacted_phase=REDACTED_PHASE, private_phase=private
    )
    assert result.redacted_losses == expected_losses  # phase 1 is plain AdamW on the redaction
    assert result.private.steps == 5 and 0 < result.epsilon == result.private.epsilon <= 8.0
    # Phase 2 started from phase 1's weights and moved them.
    assert not torch.equal(model.lm_head.weight, after_redacted.lm_head.weight)


def test_jft_rejects_bad_private_params_before_training():
    model = family_llama()
    weights = model.lm_head.weight.clone()
    private = PRIVATE_PHASE | {"target_epsilon": -1.0}
    with pytest.raises(PrivleakError, match="target_epsilon"):
        jft_finetune(
            model, CORPUS, CORPUS, pad_id=0, redacted_phase=REDACTED_PHASE, private_phase=private
        )
    assert torch.equal(model.lm_head.weight, weights)


def test_an_unreachable_target_epsilon_is_one_line_naming_it():
    from opacus.accountants.utils import get_noise_multiplier

    from privleak.training.private import ACCOUNTANT, reachable_budget

    # Full-batch sampling: Opacus' closed-form RDP, so its search reaches its largest noise in
    # milliseconds; log(1/delta) / (alpha - 1) alone keeps epsilon above 1e-9 at any noise.
    with pytest.raises(
        PrivleakError, match=re.escape("DP target_epsilon 1e-09 at delta 1e-05 is out of reach")
    ):
        with reachable_budget(1e-9, 1e-5):
            get_noise_multiplier(target_epsilon=1e-9, target_delta=1e-5, sample_rate=1.0,
                                 steps=100, accountant=ACCOUNTANT)  # fmt: skip
    with pytest.raises(ValueError, match="unrelated"), reachable_budget(1.0, 1e-5):
        raise ValueError("unrelated")  # other errors pass through unchanged
