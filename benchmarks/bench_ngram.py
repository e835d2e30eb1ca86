"""n-gram context influence: the cached, batched fast path vs naive re-encoding vs the minimum.

For each n, with the n-grams laid out as disjoint blocks or sliding windows (`--window`,
`--stride`): fast = `ngram_logprobs` (the ablation of [start, end) reuses the cache of head +
D[:start], batches mix rows of different cached lengths); naive = `ngram_logprobs_naive` (every
ablated prompt + response re-encoded on its own); minimum = Σ over n-grams of (|D| − end) +
|tail| + |response| − 1, plus the one shared prefix encode head + D[:last start] that any
cache-reusing method pays once. Prints
forward tokens (padding included), wall times, their ratios and max |Δ log-prob|; exits non-zero
when the paths disagree by more than 1e-4 (1e-1 under float16/bfloat16, whose rounding differs
between batch shapes).

The prompt, response and model are random (a random-init shape needs no weights); the token
counts depend only on the sizes. The default ns omit the stage's n = 4 (64 ablations) to keep a
2-core CPU run near 2 minutes; sliding windows at stride 1 make |D| − n + 1 ablations per n, so
on a CPU give them a small --context or a larger --stride. Run: `.venv/bin/python
benchmarks/bench_ngram.py --model smollm2-135m-shape [--ns 128 32 8 4] [--context 512 --ns 64 16 2]
[--window sliding --stride 1]`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402
from common import add_model_args, describe, load_model, timed  # noqa: E402

from privleak.batching import ForwardCounter  # noqa: E402
from privleak.errors import PrivleakError  # noqa: E402
from privleak.metrics.influence import (  # noqa: E402
    cid_mechanism,
    ngram_logprobs,
    ngram_logprobs_naive,
    response_logprobs,
)
from privleak.ngrams import WINDOWS, Window, ngram_spans  # noqa: E402
from privleak.prompts import ContextPrompt  # noqa: E402


def minimum_tokens(
    prompt: ContextPrompt, response_tokens: int, n: int, window: Window
) -> tuple[int, int]:
    """(Σ r over the K n-gram ablations of `prompt`, the shared prefix encode)."""
    spans = ngram_spans(len(prompt.context), n, window)
    rest = len(prompt.tail) + response_tokens - 1
    minimum = sum(len(prompt.context) - end + rest for _, end in spans)
    return minimum, len(prompt.head) + spans[-1][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--context", type=int, default=256, help="|D| in tokens")
    parser.add_argument("--head", type=int, default=30, help="chat template before the context")
    parser.add_argument("--tail", type=int, default=20, help="template after the context")
    parser.add_argument("--response", type=int, default=50)
    parser.add_argument("--ns", type=int, nargs="+", default=[128, 32, 8])
    parser.add_argument("--batch-size", type=int, default=8, help="the stage's batch_size")
    parser.add_argument("--window", choices=WINDOWS, default="block", help="n-gram layout")
    parser.add_argument("--stride", type=int, default=1, help="sliding windows' start step")
    args = parser.parse_args()
    try:
        window = Window(args.window, args.stride)
    except PrivleakError as error:
        parser.error(str(error))
    tolerance = 1e-1 if args.dtype in ("float16", "bfloat16") else 1e-4

    model, eos, pad = load_model(args)
    generator = torch.Generator().manual_seed(0)
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    draw = lambda k: torch.randint(100, vocab, (k,), generator=generator).tolist()  # noqa: E731
    prompt = ContextPrompt(draw(args.head), draw(args.context), draw(args.tail))
    response = draw(args.response)
    prior = response_logprobs(model, prompt.with_context([]).ids, response)
    mechanism = cid_mechanism(prior, 1.0, 0.8, eos, 0)
    print(
        f"{describe(model, args)}: |D| = {args.context}, template {args.head}+{args.tail}, "
        f"response {args.response}, batch_size {args.batch_size}, {window.describe()}, "
        f"tolerance {tolerance:.0e}"
    )
    print(
        f"{'n':>4}{'K':>5}{'calls':>6}{'naive tok':>11}{'fast tok':>10}{'min+prefix':>16}"
        f"{'naive/fast':>11}{'fast/min':>9}{'naive s':>9}{'fast s':>8}{'wall x':>8}{'max|Δ|':>10}"
    )
    # Warm-up: kernels, allocator and cuBLAS handles, so the first n is not charged for them.
    ngram_logprobs(model, prompt, response, args.ns[0], mechanism, window=window,
                   batch_size=args.batch_size, pad_id=pad)  # fmt: skip
    ngram_logprobs_naive(model, prompt, response, args.context, mechanism)
    worst = 0.0
    for n in args.ns:
        fast_counter, naive_counter = ForwardCounter(), ForwardCounter()
        fast, fast_wall = timed(
            lambda n=n, counter=fast_counter: ngram_logprobs(
                model, prompt, response, n, mechanism, window=window,
                batch_size=args.batch_size, pad_id=pad, counter=counter,
            ),
            args.device,
        )  # fmt: skip
        naive, naive_wall = timed(
            lambda n=n, counter=naive_counter: ngram_logprobs_naive(
                model, prompt, response, n, mechanism, window=window, counter=counter
            ),
            args.device,
        )
        minimum, prefix = minimum_tokens(prompt, len(response), n, window)
        delta = float((fast - naive).abs().max())
        worst = max(worst, delta)
        print(
            f"{n:>4}{fast.shape[0]:>5}{fast_counter.calls:>6}{naive_counter.tokens:>11}"
            f"{fast_counter.tokens:>10}{f'{minimum}+{prefix}':>16}"
            f"{naive_counter.tokens / fast_counter.tokens:>11.2f}"
            f"{fast_counter.tokens / (minimum + prefix):>9.3f}{naive_wall:>9.2f}{fast_wall:>8.2f}"
            f"{naive_wall / fast_wall:>8.2f}{delta:>10.1e}"
        )
    if worst > tolerance:
        print(f"paths disagree: max |Δ log-prob| = {worst:.2e} > {tolerance:.0e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
