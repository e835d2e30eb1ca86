"""Scoring LiRa samples under a target and two reference models: prompt shared by its samples vs
a naive per-sample loop vs one batched forward over prompt + sample rows (default: SmolLM2-135M).

Workload: PROMPTS dialog contexts of PROMPT_LEN tokens, SAMPLES sampled continuations each, of
ragged lengths 1..MAX_NEW (samples stop at EOS). Each path scores every sample under all three
models (a random-init shape gives three seeds; named weights are scored three times):
- naive: one unpadded forward of prompt + sample per sample, full-vocabulary logits;
- fair baseline: `privleak.scoring.continuation_logprobs`, rows batched by length;
- shared prompt: `privleak.lira_sampling.grouped_continuation_logprobs`, each prompt forwarded
  once and its cache shared by its samples (`privleak.scoring.shared_prefix_logprobs`).
Prints forward tokens, wall time, ratios to the naive and the fair path and max |Δ log-prob|.

Run: `make bench` or `.venv/bin/python benchmarks/bench_lira.py [--model smollm2-135m-shape]
[--device cuda] [--dtype bfloat16]` (the default model needs data/models).
"""

from __future__ import annotations

import argparse

import torch
from common import add_model_args, describe, load_model, timed

from privleak import models
from privleak.batching import ForwardCounter
from privleak.lira_sampling import grouped_continuation_logprobs
from privleak.models import real_logits
from privleak.scoring import continuation_logprobs

MODELS = ("target", "reference without MEDIA", "reference without INSURANCE")


@torch.inference_mode()
def naive(model, prompts, continuations, counter):
    scores = []
    for prompt, continuation in zip(prompts, continuations, strict=True):
        ids = torch.tensor([prompt + continuation], device=model.device)
        counter.add(*ids.shape)
        logits = real_logits(model, model(input_ids=ids).logits[0].float())
        logprobs = torch.log_softmax(logits, dim=-1)
        positions = torch.arange(len(continuation)) + len(prompt) - 1
        scores.append(logprobs[positions, torch.tensor(continuation)].cpu())
    return scores


def three_models(args):
    """The target and two references: three random inits of a shape, else one model thrice."""
    if args.model in models.SHAPES:
        return [
            models.random_model(args.model, device=args.device, dtype=args.dtype, seed=seed)
            for seed in range(len(MODELS))
        ]
    model, _, _ = load_model(args)
    return [model] * len(MODELS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--max-new", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    torch.manual_seed(0)
    lms = three_models(args)
    vocab = getattr(lms[0], "privleak_real_vocab", lms[0].config.vocab_size)
    contexts = [torch.randint(100, vocab, (args.prompt_len,)).tolist() for _ in range(args.prompts)]
    prompts = [context for context in contexts for _ in range(args.samples)]
    lengths = torch.randint(1, args.max_new + 1, (len(prompts),)).tolist()
    conts = [torch.randint(100, vocab, (n,)).tolist() for n in lengths]

    def score_all(fn):
        counter = ForwardCounter()
        scores, wall = timed(lambda: [fn(lm, counter) for lm in lms], args.device)
        return counter.tokens, wall, scores

    paths = {
        "naive per-sample loop": lambda lm, c: naive(lm, prompts, conts, c),
        "fair: batched rows": lambda lm, c: continuation_logprobs(
            lm, prompts, conts, batch_size=args.batch_size, counter=c
        ),
        "shared prompt (lira)": lambda lm, c: grouped_continuation_logprobs(
            lm, prompts, conts, batch_size=args.batch_size, counter=c
        ),
    }
    results = {name: score_all(fn) for name, fn in paths.items()}
    naive_tokens, naive_wall, reference = results["naive per-sample loop"]
    fair_tokens, fair_wall, _ = results["fair: batched rows"]

    print(
        f"{describe(lms[0], args)}: {len(MODELS)} models x {args.prompts} prompts of "
        f"{args.prompt_len} tokens x {args.samples} samples of 1..{args.max_new} tokens "
        f"({sum(lengths)} sample tokens), batch {args.batch_size}"
    )
    print(
        f"{'path':<24}{'fwd tokens':>12}{'wall s':>9}{'tok /naive':>12}{'wall /naive':>13}"
        f"{'wall /fair':>12}{'max|Δ|':>10}"
    )
    worst = 0.0
    for name, (tokens, wall, scores) in results.items():
        gap = max(
            float((a - b).abs().max())
            for got, expected in zip(scores, reference, strict=True)
            for a, b in zip(got, expected, strict=True)
        )
        worst = max(worst, gap)
        print(
            f"{name:<24}{tokens:>12}{wall:>9.2f}{naive_tokens / tokens:>12.2f}"
            f"{naive_wall / wall:>13.2f}{fair_wall / wall:>12.2f}{gap:>10.1e}"
        )
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2  # half precision: rounding only
    if worst > tolerance:
        raise SystemExit(f"paths disagree: max |Δ log-prob| = {worst:.2e} > {tolerance:g}")


if __name__ == "__main__":
    main()
