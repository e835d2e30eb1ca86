"""DP fine-tuning (S3's Private target): Opacus DP-AdamW against plain AdamW on one model.

The model is the embedded tiny family's largest Llama (params.yaml family.embedded.sizes) at
vocabulary V (tied input/output embeddings, RMSNorm, RoPE), random-init; the data are random
token rows of L tokens, batch B:
    adamw    = `train_adamw` (S3's Public / Pub+Redacted / schedule loop), S steps of B x L;
    dp       = `dp_finetune_causal_lm` at epsilon 8: Poisson batches of expected size B over S*B
               rows, per-example gradients by Opacus' hooks (functorch for RMSNorm; the tied
               embedding matrix gets per-example gradients from both of its uses), clipping,
               noise; the loop's wall time (noise calibration and the compatibility probe
               excluded), tokens counted from the batches actually sampled;
    dp-frozen = dp with the tied embedding frozen: what the per-example gradients of the
               V x hidden matrix cost.
Prints forward tokens, wall time, tokens/s and the DP / AdamW ratio; exits non-zero unless the
two paths' losses on one batch (same model: HF's token-mean loss, AdamW's first step, against the
mean per-example loss DP clips) agree within 1e-5, which they must on unpadded rows.

Run: `.venv/bin/python benchmarks/bench_dp_train.py [--device cuda] [--steps 20]`.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402
from common import timed  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

from privleak.pipeline import params  # noqa: E402
from privleak.training.family import llama_config  # noqa: E402
from privleak.training.finetune import pad_rows, train_adamw  # noqa: E402
from privleak.training.private import dp_finetune_causal_lm, per_example_loss  # noqa: E402

SEED, LEARNING_RATE, PAD = 0, 1e-3, 0


def largest_family_size() -> tuple[str, dict, int]:
    """(name, size, window) of the embedded family's largest member."""
    family = params.lookup(params.load(), "family.embedded")
    name = max(
        family["sizes"], key=lambda n: (family["sizes"][n]["hidden"], family["sizes"][n]["layers"])
    )
    return name, family["sizes"][name], family["window"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--steps", type=int, default=20, help="S optimiser steps per path")
    parser.add_argument("--batch", type=int, default=8, help="B rows a step")
    parser.add_argument("--seq-len", type=int, default=64, help="L tokens a row")
    parser.add_argument("--vocab", type=int, default=8192, help="V")
    args = parser.parse_args()

    name, size, window = largest_family_size()
    torch.manual_seed(SEED)
    base = LlamaForCausalLM(llama_config(size, args.vocab, window)).to(args.device)
    generator = torch.Generator().manual_seed(SEED)
    rows = torch.randint(
        3, args.vocab, (args.steps * args.batch, args.seq_len), generator=generator
    )
    rows = rows.tolist()
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else (f"CPU, {torch.get_num_threads()} threads")
    )
    print(
        f"family {name} {size} ({base.num_parameters() / 1e6:.2f}M, V={args.vocab}, tied) fp32 "
        f"on {where}: {args.steps} steps of {args.batch} x {args.seq_len} tokens"
    )

    def adamw(model, steps):
        batches = (rows[k * args.batch : (k + 1) * args.batch] for k in range(steps))
        return train_adamw(model, batches, learning_rate=LEARNING_RATE, pad_id=PAD)

    adamw(copy.deepcopy(base), 2)  # warm-up: allocator, kernels
    losses, adamw_wall = timed(lambda: adamw(copy.deepcopy(base), args.steps), args.device)
    adamw_tokens = args.steps * args.batch * args.seq_len
    adamw_rate = adamw_tokens / adamw_wall
    print(
        f"  adamw:      {adamw_tokens:>7,} tokens {adamw_wall:7.2f} s {adamw_rate:9,.0f} tokens/s"
    )

    for label, freeze in (("dp", False), ("dp-frozen", True)):
        model = copy.deepcopy(base)
        model.get_input_embeddings().weight.requires_grad_(not freeze)
        result = dp_finetune_causal_lm(
            model,
            rows,
            target_epsilon=8.0,
            delta=1e-5,
            epochs=1,
            batch_size=args.batch,
            seq_len=args.seq_len,
            learning_rate=LEARNING_RATE,
            max_grad_norm=1.0,
            pad_id=PAD,
            seed=SEED,
        )
        rate = result.tokens_seen / result.wall_seconds
        print(
            f"  {label + ':':<11} {result.tokens_seen:>7,} tokens {result.wall_seconds:7.2f} s "
            f"{rate:9,.0f} tokens/s; {label} / adamw tokens/s {rate / adamw_rate:.2f} "
            f"({result.steps} steps, noise multiplier {result.noise_multiplier:.3f}, "
            f"epsilon {result.epsilon:.3f})"
        )

    ids, mask = pad_rows(rows[: args.batch], PAD)
    with torch.no_grad():
        dp_loss = float(per_example_loss(base, ids.to(args.device), mask.to(args.device)).mean())
    gap = abs(losses[0] - dp_loss)
    print(f"  first-step loss on one batch: adamw {losses[0]:.6f}, dp {dp_loss:.6f}, gap {gap:.1e}")
    if gap > 1e-5:
        print("FAIL: the AdamW and DP losses of one batch differ by more than 1e-5")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
