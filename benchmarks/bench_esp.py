"""S1 fast paths vs naive references, in one run.

1. ESP/TP under all decoders: `suffix_logprobs` (one batched teacher-forced forward per batch, every
   decoder applied to the same logits) vs a naive loop that forwards each sequence once per
   decoder.
2. Approximate n-ISP: `approximate_isp` (level-by-level batch with a KV cache: prefill once, then
   one token per live node per level) vs a naive recursive expansion that forwards prefix + partial
   suffix from scratch at every node. Reported as forward tokens per sequence for n = 1 and 2.

Prints forward tokens, wall time, their ratios and max |delta| between the paths; exits non-zero
if they disagree by more than 1e-4 (log-probs for ESP; probabilities for ISP).

Run: `.venv/bin/python benchmarks/bench_esp.py [--model PATH]` (default: SmolLM2-135M for part 1
and the largest tiny-family size for part 2; needs data/models and data/family).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch

from privleak import models, paths
from privleak.decoding import sampling_logprobs
from privleak.metrics import sequence as seq
from privleak.scoring import ForwardCounter
from privleak.training import family

DECODERS = [
    {"name": "greedy", "kind": "greedy"},
    {"name": "sampling", "kind": "sampling"},
    {"name": "top-k 5", "kind": "top_k", "value": 5},
    {"name": "top-k 10", "kind": "top_k", "value": 10},
    {"name": "top-p 0.6", "kind": "top_p", "value": 0.6},
    {"name": "temp 0.1", "kind": "temperature", "value": 0.1},
]


@torch.inference_mode()
def naive_esp(model, prefixes, suffixes, decoders, counter):
    out = {}
    for name, transforms in decoders.items():
        rows = []
        for prefix, suffix in zip(prefixes, suffixes, strict=True):
            ids = torch.tensor([prefix + suffix])
            counter.add(*ids.shape)
            logits = model(input_ids=ids).logits[0].float()
            at = torch.arange(len(suffix)) + len(prefix) - 1
            logprobs = sampling_logprobs(logits[at], transforms)
            rows.append(logprobs[torch.arange(len(suffix)), torch.tensor(suffix)])
        out[name] = rows
    return out


@torch.inference_mode()
def naive_isp(model, prefix, suffix, n, transforms, expand, counter):
    """Recursive expansion; each node forwards prefix + its partial suffix from scratch."""

    def node(partial, errors, logp):
        j = len(partial)
        if j == len(suffix):
            return math.exp(logp) if errors == n else 0.0
        ids = torch.tensor([prefix + partial])
        counter.add(*ids.shape)
        lp = sampling_logprobs(model(input_ids=ids).logits[0, -1].float(), transforms).double()
        total, remaining = 0.0, len(suffix) - j - 1
        if n - errors <= remaining and math.isfinite(lp[suffix[j]]):
            total += node(partial + [suffix[j]], errors, logp + float(lp[suffix[j]]))
        if errors < n and n - errors - 1 <= remaining:
            masked = lp.clone()
            masked[suffix[j]] = -math.inf
            values, ids_ = masked.topk(expand)
            for v, t in zip(values.tolist(), ids_.tolist(), strict=True):
                if math.isfinite(v):
                    total += node(partial + [t], errors + 1, logp + v)
        return total

    return node([], 0, 0.0)


def max_delta(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| where both are finite; inf if only one of them is -inf (a zero probability)."""
    if not torch.equal(torch.isinf(a), torch.isinf(b)):
        return math.inf
    finite = torch.isfinite(a)
    return float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=models.SMOLLM2)
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--prefix", type=int, default=50)
    parser.add_argument("--suffix", type=int, default=50)
    parser.add_argument("--isp-sequences", type=int, default=4)
    parser.add_argument("--expand", type=int, default=5)
    args = parser.parse_args()
    worst = 0.0

    torch.manual_seed(0)
    model, _ = models.load(args.model)
    vocab = model.config.vocab_size
    prefixes = [torch.randint(100, vocab, (args.prefix,)).tolist() for _ in range(args.sequences)]
    suffixes = [torch.randint(100, vocab, (args.suffix,)).tolist() for _ in range(args.sequences)]
    decoders = seq.decoder_table(DECODERS)
    slow_counter, fast_counter = ForwardCounter(), ForwardCounter()
    slow, slow_wall = timed(lambda: naive_esp(model, prefixes, suffixes, decoders, slow_counter))
    fast, fast_wall = timed(
        lambda: seq.suffix_logprobs(model, prefixes, suffixes, decoders, counter=fast_counter)
    )
    delta = max(
        max_delta(a, b) for name in decoders for a, b in zip(slow[name], fast[name], strict=True)
    )
    worst = max(worst, delta)
    print(
        f"ESP, {args.model}, {torch.get_num_threads()} threads: {args.sequences} sequences x "
        f"({args.prefix} + {args.suffix}) tokens x {len(decoders)} decoders"
    )
    print(f"  naive per-sequence per-decoder: {slow_counter.tokens:>8} tokens {slow_wall:7.2f} s")
    print(f"  batched, all decoders per pass: {fast_counter.tokens:>8} tokens {fast_wall:7.2f} s")
    print(
        f"  ratio: tokens {slow_counter.tokens / fast_counter.tokens:.1f}x, "
        f"wall {slow_wall / fast_wall:.1f}x, max |delta log-prob| {delta:.2e}"
    )

    members = family.member_dirs(paths.DATA / "family")
    small, _ = models.load(str(members[-1]))
    vocab = small.config.vocab_size
    prefixes = [torch.randint(3, vocab, (50,)).tolist() for _ in range(args.isp_sequences)]
    suffixes = [torch.randint(3, vocab, (4,)).tolist() for _ in range(args.isp_sequences)]
    transforms = decoders["sampling"]  # regular sampling: every alternative has mass
    print(f"approximate n-ISP, {members[-1].name}, 4-token suffixes, expand {args.expand}:")
    for n in (1, 2):
        slow_counter = ForwardCounter()
        slow, slow_wall = timed(
            lambda n=n, counter=slow_counter: [
                naive_isp(small, p, s, n, transforms, args.expand, counter)
                for p, s in zip(prefixes, suffixes, strict=True)
            ]
        )
        fast, fast_wall = timed(
            lambda n=n: seq.approximate_isp(
                small, prefixes, suffixes, n, transforms, expand=args.expand
            )
        )
        delta = max(abs(a - b) for a, b in zip(slow, fast.approx, strict=True))
        worst = max(worst, delta)
        per_slow = slow_counter.tokens / len(prefixes)
        per_fast = fast.counter.tokens / len(prefixes)
        print(
            f"  n={n}: naive recursive {per_slow:>8.0f} tokens/seq {slow_wall:6.2f} s | "
            f"level-by-level {per_fast:>6.0f} tokens/seq {fast_wall:6.2f} s | "
            f"ratio tokens {per_slow / per_fast:.1f}x wall {slow_wall / fast_wall:.1f}x | "
            f"max |delta ISP| {delta:.2e}"
        )
    if worst > 1e-4:
        print(f"FAIL: paths disagree by {worst:.2e} > 1e-4")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
