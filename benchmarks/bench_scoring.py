"""Batched scoring with prefix KV reuse vs a naive per-example loop, on SmolLM2-135M.

Workload: one shared context of CONTEXT tokens followed by VARIANTS different query suffixes, each
scored on a CONTINUATION-token response (the shape of context ablations and prompt forks). The
naive path forwards every full prompt + response on its own, with full-vocabulary logits.
Prints forward tokens, wall time, their ratios and max |Δ log-prob| between the paths.

Run: `make bench` or `.venv/bin/python benchmarks/bench_scoring.py` (needs data/models).
"""

from __future__ import annotations

import argparse
import time

import torch

from privleak import models
from privleak.scoring import ForwardCounter, continuation_logprobs, shared_prefix_logprobs


@torch.inference_mode()
def naive(model, prompts, continuations, counter):
    scores = []
    for prompt, continuation in zip(prompts, continuations, strict=True):
        ids = torch.tensor([prompt + continuation])
        counter.add(*ids.shape)
        logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
        positions = torch.arange(len(continuation)) + len(prompt) - 1
        scores.append(logprobs[positions, torch.tensor(continuation)])
    return scores


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--variants", type=int, default=16)
    parser.add_argument("--suffix", type=int, default=16)
    parser.add_argument("--continuation", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    model, tokenizer = models.load(models.SMOLLM2)
    vocab = model.config.vocab_size
    prefix = torch.randint(100, vocab, (args.context,)).tolist()
    suffixes = [torch.randint(100, vocab, (args.suffix,)).tolist() for _ in range(args.variants)]
    conts = [torch.randint(100, vocab, (args.continuation,)).tolist() for _ in range(args.variants)]
    prompts = [prefix + s for s in suffixes]

    rows = []
    naive_counter = ForwardCounter()
    reference, naive_wall = timed(lambda: naive(model, prompts, conts, naive_counter))
    rows.append(("naive per-example loop", naive_counter.tokens, naive_wall, 0.0))

    batched_counter = ForwardCounter()
    batched, batched_wall = timed(
        lambda: continuation_logprobs(
            model, prompts, conts, batch_size=args.batch_size, counter=batched_counter
        )
    )
    rows.append(("batched, no reuse", batched_counter.tokens, batched_wall, batched))

    reuse_counter = ForwardCounter()
    reused, reuse_wall = timed(
        lambda: shared_prefix_logprobs(
            model, prefix, suffixes, conts, batch_size=args.batch_size, counter=reuse_counter
        )
    )
    rows.append(("batched + prefix reuse", reuse_counter.tokens, reuse_wall, reused))

    print(
        f"SmolLM2-135M fp32, {torch.get_num_threads()} threads: context {args.context}, "
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
    block = torch.randint(100, vocab, (8, 512))
    with torch.inference_mode():
        _, block_wall = timed(lambda: model(input_ids=block, logits_to_keep=1))
    print(f"forward throughput at batch 8 x 512: {block.numel() / block_wall:.0f} tok/s")
    if worst > 1e-4:
        raise SystemExit(f"paths disagree: max |Δ log-prob| = {worst:.2e} > 1e-4")


if __name__ == "__main__":
    main()
