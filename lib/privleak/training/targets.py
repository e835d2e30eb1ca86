"""S3's training plan: which target and reference models are fine-tuned, on which documents,
with which optimiser and seed, and the dispatch that fits one of them.

A plan is a dict {model, run, target, policy, without, kind, docs}: `model` is the folder name
(run k > 0 under run<k>/), `policy` the redaction policy of the documents (None: not redacted),
`without` the domain a reference leaves out (None: a target), `kind` one of "adamw", "dp", "jft"
or "schedule", and `docs` the token-id documents it trains on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from privleak import models as registry
from privleak.policies import MASK
from privleak.training.finetune import finetune_causal_lm
from privleak.training.private import dp_finetune_causal_lm, jft_finetune
from privleak.training.schedules import (
    PRIVATE_KEYS,
    private_schedule_finetune,
    schedule_finetune,
)

Docs = list[list[int]]

SCHEDULE_TARGETS = {
    "batch": "Redaction Schedule",
    "document": "Redaction Schedule (AdamW, per-document draw)",
}
"""The schedule target's name per `schedule.draw`: the batch draw with DP steps is the paper's
method as its official code runs it; the per-document draw without DP is a deviation, named
apart so that no claim about the paper's method reads it."""


def add_redaction_token(tokenizer) -> int:
    """Make `privleak.policies.MASK` one special token of `tokenizer` (in place), so a redacted
    span is one id that sampling can forbid, never text pieces a policy would not flag; its id.
    Every S3 model shares the enlarged tokenizer (`resize_for`)."""
    tokenizer.add_tokens([MASK], special_tokens=True)
    return int(tokenizer.convert_tokens_to_ids(MASK))


def resize_for(model, tokenizer):
    """The model with its (tied) embeddings grown to the tokenizer's length, new rows drawn by
    the model's own initialiser from torch's generator (seeded by the caller)."""
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return model


def load_resized(base: str, tokenizer, device: str):
    """A fresh float32 copy of the base model `base`, resized for `tokenizer` (`resize_for`)."""
    return resize_for(registry.load(base, device=device, dtype="float32")[0], tokenizer)


def optimiser_settings(train: dict, dp: dict) -> tuple[dict, dict]:
    """The keyword arguments of the AdamW and the DP-AdamW fine-tunes.

    Args:
        train: the `train` params (epochs, batch_size, seq_len, learning_rate).
        dp: the `dp` params (target_epsilon, delta, max_grad_norm, batch_size, learning_rate,
            optional epochs).

    Returns:
        (adamw, private): DP takes `dp`'s batch size and learning rate, `train`'s seq_len, and
        `dp`'s epochs when given, else `train`'s.
    """
    adamw = {key: train[key] for key in ("epochs", "batch_size", "seq_len", "learning_rate")}
    private = {
        "target_epsilon": dp["target_epsilon"],
        "delta": dp["delta"],
        "max_grad_norm": dp["max_grad_norm"],
        "epochs": dp.get("epochs") or train["epochs"],
        "batch_size": dp["batch_size"],
        "seq_len": train["seq_len"],
        "learning_rate": dp["learning_rate"],
    }
    return adamw, private


def schedule_settings(adamw: dict, private: dict, schedule: dict) -> tuple[dict, dict]:
    """The Redaction Schedule's (adamw, private) settings: `schedule.epochs` and
    `schedule.batch_size`, where given, replace the plain steps' epochs and batch size, and the
    batch size is the DP steps' expected Poisson batch too (the official code trains both kinds
    of step at one batch size)."""
    own = {key: schedule[key] for key in ("epochs", "batch_size") if schedule.get(key)}
    private = private | ({"batch_size": own["batch_size"]} if "batch_size" in own else {})
    return adamw | own, private


def planned(model, target, kind, docs, policy=None, without=None, after=None) -> dict:
    """One model to train (run 0): its folder name, target, redaction policy (None: not
    redacted) or left-out domain (references), training kind, documents, and the model whose
    trained weights it starts from (None: the base)."""
    return {
        "model": model,
        "run": 0,
        "target": target,
        "policy": policy,
        "without": without,
        "kind": kind,
        "after": after,
        "docs": docs,
    }


def target_plans(
    original: Docs,
    redacted: dict[str, Docs],
    of_domain: np.ndarray,
    *,
    domain: str,
    leaked: Sequence[str],
    seeds: int,
    draw: str = "batch",
) -> list[dict]:
    """Every model S3 trains, in training order.

    Args:
        original: the n train dialogs' token ids.
        redacted: per policy name, the same n dialogs redacted by it.
        of_domain: shape (n,), each dialog's domain.
        domain: the prompted domain (its "<domain> Only" target).
        leaked: the private domains j other than `domain`, one reference each.
        seeds: training runs per target; the references are trained once.
        draw: `schedule.draw`, which names the schedule target (`SCHEDULE_TARGETS`).

    Returns:
        The run-0 targets (Only, Public, Private, then per policy Pub+Redacted, JFT and the
        Redaction Schedule), the references, then runs 1 .. seeds-1 of every target.
    """

    def subset(mask) -> Docs:
        return [doc for doc, keep in zip(original, mask, strict=True) if keep]

    plans = [
        planned(f"{domain.lower()}_only", f"{domain} Only", "adamw", subset(of_domain == domain)),
        planned("public", "Public", "adamw", original),
        planned("private", "Private", "dp", original),
    ]
    for policy, docs in redacted.items():
        plans += [
            planned(f"pub_redacted-{policy}", "Pub+Redacted", "adamw", docs, policy),
            # JFT's first phase is Pub+Redacted's fine-tune (same documents, seed and
            # optimiser), so it starts from those weights instead of training them again.
            planned(f"jft-{policy}", "JFT", "jft", docs, policy, after=f"pub_redacted-{policy}"),
            planned(f"schedule-{policy}", SCHEDULE_TARGETS[draw], "schedule", docs, policy),
        ]
    plans += [
        planned(
            f"reference-no_{j.lower()}",
            f"Reference (D without {j})",
            "adamw",
            subset(of_domain != j),
            without=j,
        )
        for j in leaked
    ]
    targets = [plan for plan in plans if plan["without"] is None]
    return plans + [
        plan
        | {
            "model": f"run{run}/{plan['model']}",
            "run": run,
            "after": plan["after"] and f"run{run}/{plan['after']}",
        }
        for run in range(1, seeds)
        for plan in targets
    ]


def adamw_tokens(model) -> tuple[list[int], object]:
    """A counter of the real input tokens of every AdamW forward (the only ones given labels;
    DP counts its own), and the hook's handle."""
    seen = [0]

    def count(module, args, kwargs):
        if kwargs.get("labels") is not None:
            seen[0] += int(kwargs["attention_mask"].sum())

    return seen, model.register_forward_pre_hook(count, with_kwargs=True)


def last_finite(losses) -> float:
    """The last finite loss; NaN when there is none."""
    finite = [loss for loss in losses if math.isfinite(loss)]
    return finite[-1] if finite else math.nan


def _train(
    model, plan: dict, original: Docs, *, pad_id, seed, adamw, private, schedule, first_phase
) -> tuple:
    """Run the plan's optimiser: (losses, log fields, DP seconds, DP tokens)."""
    row = {"epsilon": math.nan, "delta": math.nan, "noise_multiplier": math.nan}
    if plan["kind"] == "adamw":
        return (
            finetune_causal_lm(model, plan["docs"], pad_id=pad_id, seed=seed, **adamw),
            row,
            0.0,
            0,
        )
    if plan["kind"] == "schedule":
        adamw, private = schedule_settings(adamw, private, schedule)
        settings = dict(
            pad_id=pad_id,
            seed=seed,
            schedule=schedule["name"],
            schedule_options=schedule.get("options") or {},
            **adamw,
        )
        if schedule.get("draw", "batch") == "document":
            result = schedule_finetune(model, plan["docs"], original, **settings)
            row["mean_redacted_share"] = float(np.mean(result.redacted_share))
            return result.losses, row, 0.0, 0
        result = private_schedule_finetune(
            model,
            plan["docs"],
            original,
            private={key: private[key] for key in PRIVATE_KEYS},
            **settings,
        )
        row |= {
            "epsilon": result.epsilon,
            "delta": result.delta,
            "noise_multiplier": result.noise_multiplier,
            "dp_steps": result.dp_steps,
            "mean_redacted_share": float(np.mean(result.plain)),
        }
        return result.losses, row, result.dp_seconds, result.dp_tokens
    # JFT's DP phase trains as many epochs as its redacted phase, as the official runs do (2.5
    # and 2.5); `dp.epochs` is the Private target's alone.
    jft_private = private | {"epochs": adamw["epochs"]}
    if plan["kind"] == "dp":
        result = dp_finetune_causal_lm(model, plan["docs"], pad_id=pad_id, seed=seed, **private)
        first = []
    elif first_phase is not None:  # JFT from its first phase's weights
        model.load_state_dict(first_phase["state"])
        result = dp_finetune_causal_lm(model, original, pad_id=pad_id, seed=seed, **jft_private)
        first = list(first_phase["losses"])
    else:
        jft = jft_finetune(
            model,
            plan["docs"],
            original,
            pad_id=pad_id,
            seed=seed,
            redacted_phase=adamw,
            private_phase=jft_private,
        )
        result, first = jft.private, jft.redacted_losses
    row |= {
        "epsilon": result.epsilon,
        "delta": result.delta,
        "noise_multiplier": result.noise_multiplier,
    }
    return first + result.losses, row, result.wall_seconds, result.tokens_seen


def fit_target(
    plan: dict,
    load: Callable[[], torch.nn.Module],
    original: Docs,
    *,
    pad_id: int | None,
    seed: int,
    adamw: dict,
    private: dict,
    schedule: dict,
    first_phase: dict | None = None,
) -> dict:
    """Fine-tune a fresh model as `plan` says, with seed + its run.

    Args:
        plan: one of `target_plans`.
        load: loads a fresh copy of the base model; called after seeding torch.
        original: the unredacted train documents (the schedule's and JFT's private phase).
        pad_id: the tokenizer's pad id.
        seed: the run-0 seed.
        adamw, private: `optimiser_settings`.
        schedule: the `schedule` params {name, options, draw}.
        first_phase: for a plan with `after`, that model's `fit_target` result: JFT loads its
            weights and runs only the DP phase; its losses and tokens count as JFT's own.

    Returns:
        {"state": the weights (CPU clones), "row": the log fields (epsilon, delta,
        noise_multiplier, [mean_redacted_share], steps, tokens, final_loss), "losses": one per
        step, "timing": {wall_s, dp_wall_s, adamw_tokens, dp_tokens}}.
    """
    run_seed = seed + plan["run"]
    torch.manual_seed(run_seed)  # dropout (GPT-2) draws from torch's global generator
    model = load()
    seen, hook = adamw_tokens(model)
    started = time.perf_counter()
    losses, row, dp_seconds, dp_tokens = _train(
        model,
        plan,
        original,
        pad_id=pad_id,
        seed=run_seed,
        adamw=adamw,
        private=private,
        schedule=schedule,
        first_phase=first_phase,
    )
    seconds = time.perf_counter() - started
    hook.remove()
    reused = first_phase["row"]["tokens"] if first_phase is not None else 0
    row |= {
        "steps": len(losses),
        "tokens": seen[0] + dp_tokens + reused,
        "final_loss": last_finite(losses),
    }
    state = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
    timing = {
        "wall_s": seconds,
        "dp_wall_s": dp_seconds,
        "adamw_tokens": seen[0],
        "dp_tokens": dp_tokens,
    }
    return {"state": state, "row": row, "losses": losses, "timing": timing}


def fit_job(job: tuple[dict, dict | None], **options) -> dict:
    """`fit_target(plan, first_phase=first_phase, **options)` for one job (plan, first_phase):
    the unit a worker process runs (`privleak.pipeline.workers`)."""
    plan, first_phase = job
    return fit_target(plan, first_phase=first_phase, **options)
