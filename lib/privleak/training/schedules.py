"""S3's "Redaction Schedule" target: fine-tune on redacted dialogs first and move to the original
(non-redacted) ones, each training example being used in its redacted form with a probability
p(step) that decays from 1 to 0.

The paper names the idea ("transition according to probability p, controlled by a decaying
schedule") but neither the schedules nor the unit of a draw. Choices made here:
- the unit is an aligned document pair (redacted i <-> original i): one draw decides the form of
  the whole document, whose chunks (`chunk_documents`) then all enter that step's batch. With
  seq_len >= the longest dialog a document is one row, as for the other targets;
- the draw of example i at optimiser step t is a uniform seeded by (seed, t, i) alone, so it does
  not depend on which other examples share the batch;
- progress s = t / (T - 1) over the T optimiser steps: the first step is fully redacted
  (p = 1) and the last fully original (p = 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privleak.errors import require
from privleak.training.finetune import (
    check_training_params,
    chunk_documents,
    shuffled_batches,
    train_adamw,
)

SCHEDULE_OPTIONS = {"step": {"switch": 0.5}, "linear": {}, "exp_concave": {"sharpness": 5.0}}
"""Each schedule's options and their defaults."""


def redaction_probability(schedule: str, step: int, total_steps: int, **options: float) -> float:
    """p(step), the probability that an example is used redacted, at progress s = step /
    total_steps in [0, 1]. Every schedule has p(0) = 1, p(total_steps) = 0 and never increases:

    - "step": p = 1 while s < switch, else 0 (option switch in (0, 1], default 0.5): redacted
      only, then original only;
    - "linear": p = 1 - s;
    - "exp_concave": p = (1 - exp(k (s - 1))) / (1 - exp(-k)) (option sharpness k > 0,
      default 5). Concave in s: p stays near 1 for most of training and drops steeply at the
      end (p(1/2) ~ 0.92 at k = 5), i.e. a late transition; k -> 0 tends to "linear". It is the
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
    last = max(len(batches) - 1, 1)
    probabilities = [
        redaction_probability(schedule, t, last, **options) for t in range(len(batches))
    ]
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
