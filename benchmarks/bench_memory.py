"""Peak device memory and wall time of `cid_generate` per memory budget and forward mode.

G = contexts × λ groups (two streams each) are decoded at most `max_batch_streams` streams at a
time. Peak memory is `torch.cuda.max_memory_allocated` above the weights, so it shows that memory
follows the budget, not the number of contexts, and what the CUDA-graph path (fixed step buffers
filled by the prefill) needs against the growing dynamic cache. CUDA only.

Run: `python3 benchmarks/bench_memory.py --device cuda --model opt-1.3b-shape --dtype float16`.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from common import add_model_args, describe, load_model

from privleak.cid import cid_generate
from privleak.prompts import ContextPrompt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--context", type=int, default=960, help="|D| in tokens")
    parser.add_argument("--new", type=int, default=50)
    parser.add_argument("--budgets", type=int, nargs="+", default=[48, 96, 192])
    parser.add_argument("--modes", nargs="+", default=["graph", "dynamic"])
    args = parser.parse_args()
    if not args.device.startswith("cuda"):
        print("bench_memory measures device memory: run it with --device cuda")
        return 2
    model, eos, pad = load_model(args)
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    draw = lambda k: torch.randint(100, vocab, (k,), generator=generator).tolist()  # noqa: E731
    head, tail = draw(16), draw(16)
    prompts = [ContextPrompt(head, draw(args.context), tail) for _ in range(args.contexts)]
    settings = [(lam, 1.0) for lam in (0.5, 1.0, 1.5)]
    print(f"{describe(model, args)}: {len(prompts) * len(settings)} groups, |D| = {args.context}")
    for budget in args.budgets:
        for mode in args.modes:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            torch.cuda.synchronize()
            start = time.perf_counter()
            cid_generate(model, prompts, settings, max_new_tokens=args.new, min_new_tokens=10,
                         eos_token_id=eos, pad_id=pad, max_batch_streams=budget,
                         forward_mode=mode)  # fmt: skip
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**30
            print(f"  budget {budget:4d} streams, {mode:7s}: {time.perf_counter() - start:6.2f} s, "
                  f"peak above weights {peak:6.2f} GiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
