"""Differentially private fine-tuning of a causal LM (DP-AdamW through Opacus) for S3's Private
target, and Just Fine-tune Twice (Shi et al. 2022b) for its JFT target.

DP-SGD here: Poisson-sampled batches (Opacus' DPDataLoader), per-example gradients clipped to
max_grad_norm, Gaussian noise calibrated as `PrivacyEngine.make_private_with_epsilon` calibrates
it (Opacus' `get_noise_multiplier` over all epochs, memoized: `noise_multiplier`) to reach
target_epsilon at delta after all epochs, then AdamW. The example, the unit DP protects, is one
document (a dialog): a document longer than seq_len is refused rather than cut into chunks that
would each count as a unit. Its loss is the mean next-token loss over its own real tokens, so
neither its padding nor the other examples of the batch change its gradient.

Accountant: RDP (Opacus' default, Mironov 2017 with the Balle et al. 2020 conversion to
(epsilon, delta)). It is an upper bound on the spent epsilon, never an under-estimate, and
dp_accounting's RdpAccountant reproduces it from (noise multiplier, sample rate, steps), which the
tests check. PRV/PLD accounting is tighter (it would report a smaller epsilon for the same noise),
at the price of a numerical error bound; a reported epsilon should err on the safe side.

Per-example gradients use Opacus' hooks mode, checked for the tiny Llama family and GPT-2:
- LlamaRMSNorm and transformers' Conv1D (GPT-2) have no Opacus grad sampler; hooks mode computes
  theirs with its functorch fallback (vmap over the batch), which is exact;
- tied input/output embeddings are one Parameter used by two modules: hooks mode adds the two
  modules' per-example gradients before clipping, so the tie is kept (exact, tested; no untying
  or freezing needed);
- position ids are passed per example ([B, W]): GPT-2's learned position embedding otherwise
  sees one [1, W] row shared by the batch, and its per-example gradient comes out wrong.
`check_dp_compatible` verifies all of this on the model at hand before training.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from opacus import PrivacyEngine
from opacus.accountants.utils import get_noise_multiplier
from opacus.grad_sample import GradSampleHooks
from opacus.utils.module_utils import trainable_modules
from opacus.validators import ModuleValidator
from torch.utils.data import DataLoader, TensorDataset

from privleak.accounting import check_delta, check_epsilon
from privleak.errors import PrivleakError, require
from privleak.training.finetune import (
    check_training_params,
    finetune_causal_lm,
    pad_rows,
)

ACCOUNTANT = "rdp"
"""Opacus accountant that calibrates the noise and reports the spent epsilon (see above)."""

PROBE_TOLERANCE = 1e-3
"""Relative error allowed between the mean per-example gradient and the batch gradient."""


@contextmanager
def benign_warnings_silenced() -> Iterator[None]:
    """Silence two benign warnings: secure RNG is off on purpose (seeded runs), and the
    embedding's full backward hook fires although its integer input needs no gradient."""
    with warnings.catch_warnings():
        for message in ("Secure RNG turned off", "Full backward hook is firing"):
            warnings.filterwarnings("ignore", message=message)
        yield


def per_example_loss(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] each row's mean next-token loss over its own real tokens, from ids [B, W] and
    attention mask [B, W] (1 = real, right padding). Position ids are given per row so every
    layer sees a batch dimension of B (see the module docstring)."""
    positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    token_loss = F.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=-100, reduction="none"
    )
    return token_loss.sum(1) / (targets != -100).sum(1).clamp(min=1)


def _module_name(model, parameter) -> str:
    """'path (Type)' of the first module that owns `parameter` directly."""
    for name, module in model.named_modules():
        if any(p is parameter for p in module.parameters(recurse=False)):
            return f"{name or '<root>'} ({type(module).__name__})"
    return "<unknown module>"


def _probe_per_example_gradients(model) -> str | None:
    """None if Opacus' hooks give every trainable parameter a per-example gradient whose batch
    mean is the batch gradient, on two rows of different length (one padded); else the reason,
    naming the first parameter without a [2, ...] per-example gradient or else every module
    whose per-example gradients are off (a layer that mixes examples also skews the gradients
    of layers below it, so the culprit need not be the first). Leaves the parameters and their
    .grad untouched."""
    vocab = model.config.vocab_size
    ids, mask = pad_rows(
        [[(3 + k) % vocab for k in range(8)], [(5 + k) % vocab for k in range(5)]], 0
    )
    ids, mask = ids.to(model.device), mask.to(model.device)
    was_training = model.training
    model.train()
    saved_grads = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    hooks = GradSampleHooks(model, strict=False)
    try:
        per_example_loss(model, ids, mask).mean().backward()
        off = []
        for parameter in (p for p in model.parameters() if p.requires_grad):
            samples = getattr(parameter, "grad_sample", None)
            if samples is None or samples.shape != (2, *parameter.shape):
                shape = None if samples is None else list(samples.shape)
                return (
                    f"{_module_name(model, parameter)}: no per-example gradient of shape "
                    f"[2, ...] on a batch of 2 (got {shape}); its input may be shared by the batch"
                )
            error = (samples.mean(0) - parameter.grad).norm()
            if error > PROBE_TOLERANCE * parameter.grad.norm() + 1e-8:
                off.append(_module_name(model, parameter))
        return (
            f"per-example gradients of {', '.join(off)} do not add up to the batch gradient "
            "(a layer mixes the examples of a batch)"
            if off
            else None
        )
    finally:
        hooks.cleanup()
        for parameter, grad in zip(model.parameters(), saved_grads, strict=True):
            parameter.grad = grad
        model.train(was_training)


def check_dp_compatible(model) -> None:
    """One-line PrivleakError naming the first layer (module path, type, reason) that stops
    Opacus from computing exact per-example gradients of `model`, a HF causal LM: Opacus' own
    validators (e.g. BatchNorm mixes the examples of a batch), trainable layers holding buffers,
    and a two-example probe of the gradients themselves (missing or wrong per-example
    gradients, e.g. a layer that sees the batch as one example)."""
    require(
        any(p.requires_grad for p in model.parameters()),
        "model is not DP-compatible: it has no trainable parameter",
    )
    # ModuleValidator.validate(model) runs the same validators but drops the module's name, so
    # they are run here one named module at a time.
    for name, module in trainable_modules(model):
        validator = ModuleValidator.VALIDATORS.get(type(module))
        errors = validator(module) if validator else []
        require(
            not errors,
            f"model is not DP-compatible: {name} ({type(module).__name__}): "
            f"{str(errors[0]).split('. ')[0] if errors else ''}",
        )
        # GradSampleModule.validate's check, with a one-line message: a buffer is state that a
        # per-example gradient does not cover (e.g. running statistics).
        require(
            not list(module.buffers()),
            f"model is not DP-compatible: {name} ({type(module).__name__}): a trainable layer "
            "holding buffers, which Opacus does not support",
        )
    with benign_warnings_silenced():
        problem = _probe_per_example_gradients(model)
    require(problem is None, f"model is not DP-compatible: {problem}")


@functools.lru_cache(maxsize=64)
def noise_multiplier(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    *,
    epochs: int | None = None,
    steps: int | None = None,
) -> float:
    """Opacus' `get_noise_multiplier` (RDP, its default tolerance) for `epochs` passes or `steps`
    steps at sample_rate: the noise std, in units of max_grad_norm, that spends target_epsilon at
    delta. Memoized per process: each search evaluates the RDP of ~15 noise levels at 150 orders
    (seconds of Python), and a stage's training runs repeat the same few settings."""
    return get_noise_multiplier(
        target_epsilon=target_epsilon,
        target_delta=delta,
        sample_rate=sample_rate,
        epochs=epochs,
        steps=steps,
        accountant=ACCOUNTANT,
    )


@contextmanager
def reachable_budget(target_epsilon: float, delta: float) -> Iterator[None]:
    """Turn Opacus' "The privacy budget is too low." (no noise multiplier in its search range
    reaches the target) into a PrivleakError that names the target and the fix."""
    try:
        yield
    except ValueError as error:
        if "privacy budget is too low" not in str(error):
            raise
        raise PrivleakError(
            f"DP target_epsilon {target_epsilon:g} at delta {delta:g} is out of reach for this "
            "training: Opacus finds no noise multiplier that spends so little over its steps; "
            "raise target_epsilon (or delta)"
        ) from None


def check_privacy_params(target_epsilon: float, delta: float, max_grad_norm: float) -> None:
    check_epsilon(target_epsilon, "target_epsilon")
    check_delta(delta)
    require(
        isinstance(max_grad_norm, int | float)
        and math.isfinite(max_grad_norm)
        and max_grad_norm > 0,
        f"max_grad_norm must be a finite number > 0, got {max_grad_norm!r}",
    )


@dataclass(frozen=True)
class DPTrainResult:
    """What a DP fine-tune did. Per optimiser step: losses (mean per-example loss of the
    Poisson batch; nan for an empty batch, which still takes a noise-only step) and
    batch_sizes. epsilon is the spent epsilon at delta from the `accountant` after `steps`
    steps at `sample_rate` with `noise_multiplier`; tokens_seen counts the real input tokens of
    every sampled document; wall_seconds times the training loop."""

    losses: list[float]
    batch_sizes: list[int]
    epsilon: float
    delta: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    tokens_seen: int
    wall_seconds: float
    accountant: str = ACCOUNTANT


def _trimmed_batch(items: list[tuple[torch.Tensor, torch.Tensor]]):
    """Stack (ids [W], mask [W]) pairs into [B, W'] with W' the batch's longest row."""
    ids, mask = torch.stack([i for i, _ in items]), torch.stack([m for _, m in items])
    width = int(mask.sum(1).max())
    return ids[:, :width], mask[:, :width]


def dp_units(documents: Sequence[Sequence[int]], seq_len: int) -> list[list[int]]:
    """The documents as DP's examples, one row each; one line naming the first document that
    is longer than seq_len (it would become several examples, each protected alone) or shorter
    than 2 tokens."""
    require(len(documents) >= 1, "DP fine-tuning needs at least one document")
    for i, doc in enumerate(documents):
        require(
            2 <= len(doc) <= seq_len,
            f"document {i} has {len(doc)} tokens; DP protects one document as one example, "
            f"so each needs 2 to seq_len = {seq_len} tokens (raise seq_len or shorten it)",
        )
    return [list(doc) for doc in documents]


def unit_loader(rows, *, batch_size: int, pad_id: int, seed: int) -> DataLoader:
    """The loader Opacus turns into Poisson batches (rate 1 / ceil(len(rows) / batch_size))."""
    ids, mask = pad_rows(rows, pad_id)
    return DataLoader(
        TensorDataset(ids, mask),
        batch_size=batch_size,
        collate_fn=_trimmed_batch,
        generator=torch.Generator().manual_seed(seed),
    )


def dp_step(model, dp_optimiser, trainable, batch_ids, batch_mask) -> tuple[float, int]:
    """One DP-AdamW step on a Poisson batch (ids, mask [B, W]): per-example gradients, clipped,
    noised, applied. Returns (mean per-example loss, NaN for an empty batch; real tokens)."""
    dp_optimiser.zero_grad(set_to_none=True)
    if len(batch_ids) == 0:
        # Poisson sampling drew nobody: the step is noise only. The forward cannot run on
        # zero rows, so the empty per-example gradients are set.
        for parameter in trainable:
            parameter.grad_sample = parameter.new_zeros((0, *parameter.shape))
        dp_optimiser.step()
        return float("nan"), 0
    loss = per_example_loss(
        model, batch_ids.to(model.device), batch_mask.to(model.device)
    ).mean()  # Opacus' loss_reduction="mean"
    loss.backward()
    dp_optimiser.step()
    return float(loss.detach()), int(batch_mask.sum())


def dp_finetune_causal_lm(
    model,
    documents: Sequence[Sequence[int]],
    *,
    target_epsilon: float,
    delta: float,
    epochs: int,
    batch_size: int,
    seq_len: int,
    learning_rate: float,
    max_grad_norm: float,
    pad_id: int,
    seed: int = 0,
    weight_decay: float = 0.0,
) -> DPTrainResult:
    """Train `model` in place with DP-AdamW on the documents (each <= seq_len tokens, one
    example: `dp_units`) so that the whole run is (epsilon <= target_epsilon, delta)-DP for
    adding or removing one document. Batches are Poisson samples with rate
    1 / ceil(documents / batch_size) (expected size
    about batch_size); `seed` fixes the sampling and the noise. The model comes back as the
    plain HF model (Opacus' hooks and attributes removed), in eval mode, ready for
    save_pretrained."""
    check_privacy_params(target_epsilon, delta, max_grad_norm)
    check_training_params(epochs, batch_size, learning_rate)
    rows = dp_units(documents, seq_len)
    model.train()
    check_dp_compatible(model)
    loader = unit_loader(rows, batch_size=batch_size, pad_id=pad_id, seed=seed)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=learning_rate, weight_decay=weight_decay)
    with benign_warnings_silenced(), reachable_budget(target_epsilon, delta):
        engine = PrivacyEngine(accountant=ACCOUNTANT)
        # make_private_with_epsilon's calibration, with the search memoized
        sigma = noise_multiplier(target_epsilon, delta, 1 / len(loader), epochs=epochs)
        hooks, dp_optimiser, dp_loader = engine.make_private(
            module=model,
            optimizer=optimiser,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=max_grad_norm,
            poisson_sampling=True,
            noise_generator=torch.Generator(device=model.device).manual_seed(seed),
            grad_sample_mode="hooks",
            wrap_model=False,  # hooks on the HF model itself: it stays the object we return
        )
        losses, sizes, tokens = [], [], 0
        start = time.perf_counter()
        try:
            for _ in range(epochs):
                for batch_ids, batch_mask in dp_loader:
                    loss, seen = dp_step(model, dp_optimiser, trainable, batch_ids, batch_mask)
                    sizes.append(len(batch_ids))
                    losses.append(loss)
                    tokens += seen
            if model.device.type == "cuda":
                torch.cuda.synchronize(model.device)  # the last step's kernels count too
            wall = time.perf_counter() - start
        finally:
            hooks.cleanup()
    model.zero_grad(set_to_none=True)
    model.eval()
    return DPTrainResult(
        losses=losses,
        batch_sizes=sizes,
        epsilon=float(engine.get_epsilon(delta)),
        delta=delta,
        noise_multiplier=float(dp_optimiser.noise_multiplier),
        sample_rate=1 / len(dp_loader),
        steps=len(losses),
        tokens_seen=tokens,
        wall_seconds=wall,
    )


@dataclass(frozen=True)
class JFTResult:
    """Both phases of Just Fine-tune Twice: the AdamW losses on the redacted documents, then the
    DP fine-tune on the originals. `epsilon` is the DP phase's: a selective-DP guarantee, which
    holds for what the policy flagged only if the redacted phase saw none of it (a token the
    policy missed was trained on without noise)."""

    redacted_losses: list[float]
    private: DPTrainResult

    @property
    def epsilon(self) -> float:
        return self.private.epsilon


def jft_finetune(
    model,
    redacted_docs: Sequence[Sequence[int]],
    original_docs: Sequence[Sequence[int]],
    *,
    pad_id: int,
    redacted_phase: Mapping[str, Any],
    private_phase: Mapping[str, Any],
    seed: int = 0,
) -> JFTResult:
    """Just Fine-tune Twice (Shi et al. 2022b): `finetune_causal_lm` on the redacted documents
    with `redacted_phase` (its epochs, batch_size, seq_len, learning_rate[, weight_decay]),
    then `dp_finetune_causal_lm` of those weights on the original documents with `private_phase`
    (its target_epsilon, delta, epochs, batch_size, seq_len, learning_rate, max_grad_norm[,
    weight_decay]). The model is trained in place."""
    require(len(redacted_docs) >= 1, "jft_finetune needs redacted_docs")
    require(len(original_docs) >= 1, "jft_finetune needs original_docs")
    # The private phase's params are checked before the (long) redacted phase runs.
    check_privacy_params(
        private_phase.get("target_epsilon"),
        private_phase.get("delta"),
        private_phase.get("max_grad_norm"),
    )
    redacted_losses = finetune_causal_lm(
        model, redacted_docs, pad_id=pad_id, seed=seed, **redacted_phase
    )
    private = dp_finetune_causal_lm(model, original_docs, pad_id=pad_id, seed=seed, **private_phase)
    return JFTResult(redacted_losses=redacted_losses, private=private)
