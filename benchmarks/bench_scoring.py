"""Batched scoring with prefix KV reuse vs a naive per-example loop (default: SmolLM2-135M).

Workload: one shared context of CONTEXT tokens followed by VARIANTS different query suffixes, each
scored on a CONTINUATION-token response (the shape of context ablations and prompt forks). The
naive path forwards every full prompt + response on its own, with full-vocabulary logits.
Prints forward tokens, wall time, their ratios and max |Δ log-prob| between the paths.

Run: `make bench` or `.venv/bin/python benchmarks/bench_scoring.py [--model smollm2-135m-shape]
[--device cuda] [--dtype bfloat16]` (the default model needs data/models).
"""

from __future__ import annotations

import argparse

import torch
from common import add_model_args, describe, load_model, timed

from privleak.batching import ForwardCounter
from privleak.models import real_logits
from privleak.scoring import continuation_logprobs, shared_prefix_logprobs


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--variants", type=int, default=16)
    parser.add_argument("--suffix", type=int, default=16)
    parser.add_argument("--continuation", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    model, _, _ = load_model(args)
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    run = lambda fn: timed(fn, args.device)  # noqa: E731
    prefix = torch.randint(100, vocab, (args.context,)).tolist()
    suffixes = [torch.randint(100, vocab, (args.suffix,)).tolist() for _ in range(args.variants)]
    conts = [torch.randint(100, vocab, (args.continuation,)).tolist() for _ in range(args.variants)]
    prompts = [prefix + s for s in suffixes]

    rows = []
    naive_counter = ForwardCounter()
    reference, naive_wall = run(lambda: naive(model, prompts, conts, naive_counter))
    rows.append(("naive per-example loop", naive_counter.tokens, naive_wall, 0.0))

    batched_counter = ForwardCounter()
    batched, batched_wall = run(
        lambda: continuation_logprobs(
            model, prompts, conts, batch_size=args.batch_size, counter=batched_counter
        )
    )
    rows.append(("batched, no reuse", batched_counter.tokens, batched_wall, batched))

    reuse_counter = ForwardCounter()
    reused, reuse_wall = run(
        lambda: shared_prefix_logprobs(
            model, prefix, suffixes, conts, batch_size=args.batch_size, counter=reuse_counter
        )
    )
    rows.append(("batched + prefix reuse", reuse_counter.tokens, reuse_wall, reused))

    print(
        f"{describe(model, args)}: context {args.context}, "
        f"{args.variants} variants x ({args.suffix} suffix + {args.continuation} response) tokens"
    )
    print(
        f"{'path':<26}{'fwd tokens':>12}{'wall s':>9}{'tok ratio':>11}{'wall ratio':>12}"
        f"{'max|Δ|':>10}"
    )
    worst = 0.0
    for name, tokens, wall, scores in rows:
        gap = (
            0.0
            if isinstance(scores, float)
            else max(float((a - b).abs().max()) for a, b in zip(scores, reference, strict=True))
        )
        worst = max(worst, gap)
        print(
            f"{name:<26}{tokens:>12}{wall:>9.2f}{naive_counter.tokens / tokens:>11.2f}"
            f"{naive_wall / wall:>12.2f}{gap:>10.1e}"
        )
    print(f"naive forward throughput (batch 1): {naive_counter.tokens / naive_wall:.0f} tok/s")
    block = torch.randint(100, vocab, (8, 512), device=model.device)
    with torch.inference_mode():
        _, block_wall = run(lambda: model(input_ids=block, logits_to_keep=1))
    print(f"forward throughput at batch 8 x 512: {block.numel() / block_wall:.0f} tok/s")
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2  # half precision: rounding only
    if worst > tolerance:
        raise SystemExit(f"paths disagree: max |Δ log-prob| = {worst:.2e} > {tolerance:g}")


if __name__ == "__main__":
    main()
