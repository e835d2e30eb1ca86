"""Membership inference (`privleak.mia`): one scoring pass feeding every attack, against one
scoring pass per attack and a per-text loop.

N texts of T tokens (random token ids, so no tokenizer and no weights are needed) scored by the
target and a reference model for LOSS, zlib, Min-K%, Min-K%++ and the reference ratio:
    fast  = the stages' path: `scoring.token_stats` once per model, `--batch-size` texts a
            forward; every attack reads its per-token log-probs, mu and sigma;
    fair  = what a user running each attack as its own script writes: one batched pass per
            attack per model (LOSS, zlib, Min-K% and the reference ratio read the token log-probs;
            Min-K%++ the full distribution), the same batches;
    loop  = the per-text reference: one forward per text per attack, batch 1.
Prints forward tokens, wall times and ratios, and the max |Δ| of every attack score against fast;
exits non-zero beyond 1e-6 on a CPU, 5e-4 on a GPU (its float32 matmuls round by batch shape, and
the loop's batches of one differ from fast's).

Run: `.venv/bin/python benchmarks/bench_mia.py [--texts 64] [--tokens 128] [--batch-size 32]`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import add_model_args, describe, load_model, timed  # noqa: E402

from privleak.batching import ForwardCounter  # noqa: E402
from privleak.mia import attacks  # noqa: E402
from privleak.mia.scoring import token_stats  # noqa: E402

SEED, K = 0, 0.2
OWN = ("loss", "zlib", "min_k", "min_k_plus_plus")


def scores(target, reference, texts) -> dict[str, np.ndarray]:
    """Every attack's scores from per-text TokenStats of the target and the reference."""
    text = [" ".join(map(str, t)) for t in texts]  # zlib reads a string; any fixed one will do
    return {
        "loss": np.array([attacks.loss(s.logprob) for s in target]),
        "zlib": np.array([attacks.zlib_ratio(s.logprob, x)
                          for s, x in zip(target, text, strict=True)]),
        "min_k": np.array([attacks.min_k(s.logprob, K) for s in target]),
        "min_k_plus_plus": np.array([attacks.min_k_plus_plus(s.logprob, s.mu, s.sigma, K)
                                     for s in target]),
        "reference": np.array([attacks.reference_ratio(s.logprob, r.logprob)
                               for s, r in zip(target, reference, strict=True)]),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--reference", default="smollm2-135m-shape",
                        help="the reference model (same choices as --model)")  # fmt: skip
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    model, _, pad = load_model(args)
    reference, _, _ = load_model(argparse.Namespace(**{**vars(args), "model": args.reference}))
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    texts = [torch.randint(3, vocab, (args.tokens,), generator=generator).tolist()
             for _ in range(args.texts)]  # fmt: skip
    pad = pad if pad is not None else 0
    print(f"{describe(model, args)}; reference {args.reference}: {args.texts} texts of "
          f"{args.tokens} tokens, batch {args.batch_size}")  # fmt: skip

    def passes(count: int, batch: int):
        counter = ForwardCounter()
        runs = [token_stats(model, texts, batch_size=batch, pad_id=pad, counter=counter)
                for _ in range(count)]  # fmt: skip
        ref = token_stats(reference, texts, batch_size=batch, pad_id=pad, counter=counter)
        return scores(runs[-1], ref, texts), counter

    (fast, fast_counter), fast_wall = timed(lambda: passes(1, args.batch_size), args.device)
    # fair and loop: LOSS, zlib, Min-K%, Min-K%++ each their own pass of the target.
    (fair, fair_counter), fair_wall = timed(lambda: passes(len(OWN), args.batch_size), args.device)
    (loop, loop_counter), loop_wall = timed(lambda: passes(len(OWN), 1), args.device)
    print(f"  fast (one pass a model):      {fast_wall:7.2f} s  forward tokens "
          f"{fast_counter.tokens:>9,}")  # fmt: skip
    others = (("fair (a pass per attack)", fair_wall, fair_counter),
              ("loop (a forward per text)", loop_wall, loop_counter))  # fmt: skip
    for name, wall, counter in others:
        ratio = counter.tokens / fast_counter.tokens
        print(f"  {name:29s} {wall:7.2f} s  forward tokens {counter.tokens:>9,}; / fast: wall "
              f"{wall / fast_wall:.2f}x, tokens {ratio:.2f}x")  # fmt: skip
    delta = max(float(np.abs(fast[a] - other[a]).max()) for other in (fair, loop) for a in fast)
    print(f"  max |Δ score| over every attack, fair and loop against fast: {delta:.2e}")
    return 0 if delta <= (1e-6 if args.device == "cpu" else 5e-4) else 1


if __name__ == "__main__":
    sys.exit(main())
