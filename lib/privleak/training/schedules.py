"""S3's "Redaction Schedule" target: training moves from redacted dialogs to the original ones,
a step using the redacted form with a probability p(step) that decays from 1 to 0.

The paper names the idea ("transition according to probability p, controlled by a decaying
schedule"); its official code decides the form once per batch and makes the method selective
DP, like JFT's second phase. Two draw units, param `schedule.draw`:

- "batch" (the official method, `private_schedule_finetune`): at step t one uniform decides the
  whole step. With probability p(t) it is a plain AdamW step on a batch of redacted dialogs;
  otherwise a DP-AdamW step (Opacus: Poisson batch of original dialogs, per-example clipping,
  Gaussian noise). Noise, as the official code sets it: the noise multiplier reaches the target
  epsilon as if every one of the T steps were a DP step. Privacy accounting: the draws depend on
  (seed, t) only, never on the data, so they are fixed before training; the accountant composes
  only the DP steps, each a Poisson-subsampled Gaussian mechanism at the DP batch's rate, so the
  epsilon spent (reported) is below the target. Plain steps read redacted text only and are not
  charged: the guarantee is selective, relative to the policy, as JFT's is (a sensitive word the
  policy missed is trained on without noise). The plain steps take the batch size and learning
  rate the caller passes and the DP steps `private`'s (Poisson batches); S3 passes one batch
  size for both (`training.targets.schedule_settings`), as the official code trains, and the
  learning rates of `train` and `dp`, where the official code uses one.
- "document" (a deviation kept for comparison, `schedule_finetune`): every step is a plain AdamW
  step on a batch of documents, each used redacted iff its own draw (a function of (seed, t, i))
  falls below p(t). No DP at all; the target is named apart.

Progress s = t / (T - 1) over the T optimiser steps: the first step is fully redacted (p = 1) and
the last fully original (p = 0). The official shape is exp_concave with sharpness 15 (p(0.8) =
0.95, a late switch).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from opacus import PrivacyEngine

from privleak.errors import require
from privleak.training.finetune import (
    check_training_params,
    chunk_documents,
    pad_rows,
    shuffled_batches,
    train_adamw,
)
from privleak.training.private import (
    ACCOUNTANT,
    benign_warnings_silenced,
    check_dp_compatible,
    check_privacy_params,
    dp_step,
    dp_units,
    noise_multiplier,
    reachable_budget,
    unit_loader,
)

SCHEDULE_OPTIONS = {"step": {"switch": 0.5}, "linear": {}, "exp_concave": {"sharpness": 15.0}}
"""Each schedule's options and their defaults."""


def redaction_probability(schedule: str, step: int, total_steps: int, **options: float) -> float:
    """p(step), the probability that an example is used redacted, at progress s = step /
    total_steps in [0, 1]. Every schedule has p(0) = 1, p(total_steps) = 0 and never increases:

    - "step": p = 1 while s < switch, else 0 (option switch in (0, 1], default 0.5): redacted
      only, then original only;
    - "linear": p = 1 - s;
    - "exp_concave": p = (1 - exp(k (s - 1))) / (1 - exp(-k)) (option sharpness k > 0,
      default 15, the official code's scale). Concave in s: p stays near 1 for most of training
      and drops steeply at the end (p(0.8) = 0.95 at k = 15, 0.64 at k = 5), i.e. a late
      transition; k -> 0 tends to "linear". It is the
      mirror image 1 - q(1 - s) of the convex decay q(s) = (exp(-k s) - exp(-k)) / (1 - exp(-k)).
    """
    require(
        schedule in SCHEDULE_OPTIONS,
        f"schedule must be one of {', '.join(SCHEDULE_OPTIONS)}, got {schedule!r}",
    )
    unknown = sorted(set(options) - set(SCHEDULE_OPTIONS[schedule]))
    require(
        not unknown,
        f"schedule {schedule!r} takes options {sorted(SCHEDULE_OPTIONS[schedule])}, got {unknown}",
    )
    require(total_steps >= 1, f"total_steps must be >= 1, got {total_steps}")
    require(0 <= step <= total_steps, f"step must be in [0, {total_steps}], got {step}")
    settings = SCHEDULE_OPTIONS[schedule] | options
    progress = step / total_steps
    if schedule == "step":
        switch = settings["switch"]
        require(0 < switch <= 1, f"step schedule's switch must be in (0, 1], got {switch}")
        return 1.0 if progress < switch else 0.0
    if schedule == "linear":
        return 1.0 - progress
    sharpness = settings["sharpness"]
    require(sharpness > 0, f"exp_concave schedule's sharpness must be > 0, got {sharpness}")
    return -math.expm1(sharpness * (progress - 1)) / -math.expm1(-sharpness)


def redaction_draw(seed: int, step: int, example: int) -> float:
    """The uniform in [0, 1) that decides example `example`'s form at optimiser step `step`
    (redacted iff draw < p(step)); a function of (seed, step, example) only."""
    return float(np.random.default_rng([seed, step, example]).random())


def step_draw(seed: int, step: int) -> float:
    """The uniform in [0, 1) that decides the form of the whole step `step` (plain step on
    redacted dialogs iff draw < p(step)); a function of (seed, step) only, never of the data."""
    return float(np.random.default_rng([seed, step]).random())


def step_probabilities(schedule: str, total_steps: int, **options: float) -> list[float]:
    """[total_steps] p(t) at every optimiser step: progress t / (total_steps - 1), so the first
    step is fully redacted and the last fully original."""
    last = max(total_steps - 1, 1)
    return [redaction_probability(schedule, t, last, **options) for t in range(total_steps)]


def plain_steps(schedule: str, total_steps: int, seed: int, **options: float) -> list[bool]:
    """[total_steps] whether each step is plain (redacted batch) under the batch draw; the
    others are DP steps. Fixed before training, so the accountant knows the DP steps' count."""
    probabilities = step_probabilities(schedule, total_steps, **options)
    return [step_draw(seed, t) < p for t, p in enumerate(probabilities)]


@dataclass(frozen=True)
class ScheduleResult:
    """Per optimiser step: loss (mean next-token loss of the batch's real tokens), p(step), and
    the realised share of the batch's documents used redacted."""

    losses: list[float]
    probabilities: list[float]
    redacted_share: list[float]


def schedule_finetune(
    model,
    redacted_docs: Sequence[Sequence[int]],
    original_docs: Sequence[Sequence[int]],
    *,
    schedule: str,
    epochs: int,
    batch_size: int,
    seq_len: int,
    learning_rate: float,
    pad_id: int,
    seed: int = 0,
    weight_decay: float = 0.0,
    schedule_options: Mapping[str, float] | None = None,
) -> ScheduleResult:
    """Train `model` in place with AdamW on the aligned document pairs (redacted_docs[i] is the
    redaction of original_docs[i]): batches of `batch_size` documents, shuffled per epoch with
    `seed` exactly as `finetune_causal_lm` shuffles chunks; at step t each document of the batch
    is used redacted iff `redaction_draw(seed, t, i)` < p(t), then cut into chunks of <= seq_len
    tokens. The model is left in eval mode."""
    check_training_params(epochs, batch_size, learning_rate)
    require(
        len(redacted_docs) == len(original_docs),
        f"redacted_docs and original_docs must be aligned, got {len(redacted_docs)} and "
        f"{len(original_docs)} documents",
    )
    require(len(original_docs) >= 1, "schedule_finetune needs at least one document pair")
    short = [
        i
        for i, pair in enumerate(zip(redacted_docs, original_docs, strict=True))
        if min(map(len, pair)) < 2
    ]
    require(
        not short,
        f"document pair {short[0] if short else ''} is shorter than 2 tokens in one of its forms; "
        "every redacted and original document needs >= 2",
    )
    require(seed >= 0, f"seed must be >= 0 (it seeds numpy's SeedSequence), got {seed}")
    options = dict(schedule_options or {})
    batches = shuffled_batches(len(original_docs), epochs=epochs, batch_size=batch_size, seed=seed)
    probabilities = step_probabilities(schedule, len(batches), **options)
    shares: list[float] = []

    def step_rows() -> Iterator[list[list[int]]]:
        for step, batch in enumerate(batches):
            redacted = [redaction_draw(seed, step, i) < probabilities[step] for i in batch]
            shares.append(sum(redacted) / len(batch))
            chosen = [
                redacted_docs[i] if r else original_docs[i]
                for i, r in zip(batch, redacted, strict=True)
            ]
            yield chunk_documents(chosen, seq_len)

    losses = train_adamw(
        model, step_rows(), learning_rate=learning_rate, pad_id=pad_id, weight_decay=weight_decay
    )
    return ScheduleResult(losses=losses, probabilities=probabilities, redacted_share=shares)


PRIVATE_KEYS = ("target_epsilon", "delta", "max_grad_norm", "batch_size", "learning_rate")
"""What a DP step of the schedule takes (`private_schedule_finetune`'s `private`)."""


@dataclass(frozen=True)
class PrivateScheduleResult:
    """What the batch-draw schedule did. Per optimiser step: losses (plain steps: mean
    next-token loss of the redacted batch; DP steps: mean per-example loss of the Poisson batch,
    NaN when it drew nobody), probabilities p(t) and plain (True: a plain step on redacted
    dialogs). epsilon (spent over the DP steps), delta, noise_multiplier (set for all steps),
    sample_rate: the DP steps' guarantee;
    accounted_steps: the steps the accountant composed (the DP steps, and only them);
    dp_tokens: real tokens of the DP batches; dp_seconds: the DP steps' wall time."""

    losses: list[float]
    probabilities: list[float]
    plain: list[bool]
    epsilon: float
    delta: float
    noise_multiplier: float
    sample_rate: float
    accounted_steps: int
    dp_tokens: int
    dp_seconds: float

    @property
    def dp_steps(self) -> int:
        return self.plain.count(False)


def private_schedule_finetune(
    model,
    redacted_docs: Sequence[Sequence[int]],
    original_docs: Sequence[Sequence[int]],
    *,
    schedule: str,
    epochs: int,
    batch_size: int,
    seq_len: int,
    learning_rate: float,
    pad_id: int,
    private: Mapping[str, float],
    seed: int = 0,
    weight_decay: float = 0.0,
    schedule_options: Mapping[str, float] | None = None,
) -> PrivateScheduleResult:
    """The Redaction Schedule with the batch draw (module docstring): T = epochs x
    ceil(n / batch_size) steps; step t is plain with probability p(t) (`plain_steps`), taking
    batch t of the redacted documents shuffled as `finetune_causal_lm` shuffles (AdamW at
    `learning_rate`), else a DP-AdamW step on a Poisson batch of the original documents (each
    one DP example, `dp_units`) at rate 1 / ceil(n / private["batch_size"]) and
    private["learning_rate"]. private: target_epsilon, delta, max_grad_norm, batch_size,
    learning_rate. One AdamW state serves both kinds of step. The model is left in eval mode."""
    check_training_params(epochs, batch_size, learning_rate)
    missing = [key for key in PRIVATE_KEYS if key not in private]
    require(not missing, f"private needs {', '.join(PRIVATE_KEYS)}; missing {missing}")
    require(seed >= 0, f"seed must be >= 0 (it seeds numpy's SeedSequence), got {seed}")
    check_privacy_params(private["target_epsilon"], private["delta"], private["max_grad_norm"])
    check_training_params(epochs, private["batch_size"], private["learning_rate"])
    require(
        len(redacted_docs) == len(original_docs),
        f"redacted_docs and original_docs must be aligned, got {len(redacted_docs)} and "
        f"{len(original_docs)} documents",
    )
    rows = dp_units(original_docs, seq_len)
    redacted_chunks = [chunk_documents([doc], seq_len) for doc in redacted_docs]
    require(all(redacted_chunks), "every redacted document needs >= 2 tokens")
    batches = shuffled_batches(len(original_docs), epochs=epochs, batch_size=batch_size, seed=seed)
    options = dict(schedule_options or {})
    probabilities = step_probabilities(schedule, len(batches), **options)
    plain = plain_steps(schedule, len(batches), seed, **options)
    dp_count = plain.count(False)
    step_rows = [[c for i in batch for c in redacted_chunks[i]] for batch in batches]
    if dp_count == 0:  # every step drew the redacted form: nothing private was read
        losses = train_adamw(
            model, step_rows, learning_rate=learning_rate, pad_id=pad_id, weight_decay=weight_decay
        )
        return PrivateScheduleResult(
            losses, probabilities, plain, 0.0, private["delta"], math.nan, math.nan, 0, 0, 0.0
        )
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=learning_rate, weight_decay=weight_decay)
    check_dp_compatible(model)
    loader = unit_loader(rows, batch_size=private["batch_size"], pad_id=pad_id, seed=seed)
    sample_rate = 1 / len(loader)
    with reachable_budget(private["target_epsilon"], private["delta"]):
        sigma = noise_multiplier(  # as if all T steps were DP, as the official code sets it
            private["target_epsilon"], private["delta"], sample_rate, steps=len(batches)
        )
    losses, dp_tokens, dp_seconds = [], 0, 0.0
    with benign_warnings_silenced():
        engine = PrivacyEngine(accountant=ACCOUNTANT)
        hooks, dp_optimiser, dp_loader = engine.make_private(
            module=model,
            optimizer=optimiser,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=private["max_grad_norm"],
            poisson_sampling=True,
            noise_generator=torch.Generator(device=model.device).manual_seed(seed),
            grad_sample_mode="hooks",
            wrap_model=False,
        )
        poisson = _endless(dp_loader)
        try:
            for step, rows_of_step in enumerate(step_rows):
                if plain[step]:
                    hooks.disable_hooks()  # no per-example gradients: nothing private here
                    _set_lr(optimiser, learning_rate)
                    losses.append(_plain_step(model, dp_optimiser, rows_of_step, pad_id))
                    hooks.enable_hooks()
                else:
                    started = time.perf_counter()
                    _set_lr(optimiser, private["learning_rate"])
                    loss, seen = dp_step(model, dp_optimiser, trainable, *next(poisson))
                    losses.append(loss)
                    dp_tokens += seen
                    dp_seconds += time.perf_counter() - started
        finally:
            hooks.cleanup()
    model.zero_grad(set_to_none=True)
    model.eval()
    return PrivateScheduleResult(
        losses=losses,
        probabilities=probabilities,
        plain=plain,
        epsilon=float(engine.get_epsilon(private["delta"])),
        delta=private["delta"],
        noise_multiplier=float(sigma),
        sample_rate=sample_rate,
        accounted_steps=sum(steps for _, _, steps in engine.accountant.history),
        dp_tokens=dp_tokens,
        dp_seconds=dp_seconds,
    )


def _endless(loader) -> Iterator:
    """The loader's batches, one pass after another (each pass draws fresh Poisson batches)."""
    while True:
        yield from loader


def _set_lr(optimiser, learning_rate: float) -> None:
    for group in optimiser.param_groups:
        group["lr"] = learning_rate


def _plain_step(model, dp_optimiser, rows: list[list[int]], pad_id: int) -> float:
    """One AdamW step of the optimiser under `dp_optimiser` (no clipping, no noise) on token
    rows; returns the mean next-token loss over the batch's real tokens."""
    ids, mask = pad_rows(rows, pad_id)
    labels = ids.masked_fill(mask == 0, -100)
    dp_optimiser.zero_grad(set_to_none=True)
    out = model(
        input_ids=ids.to(model.device),
        attention_mask=mask.to(model.device),
        labels=labels.to(model.device),
    )
    out.loss.backward()
    dp_optimiser.original_optimizer.step()
    dp_optimiser.zero_grad(set_to_none=True)
    return float(out.loss.detach())
