"""DP fine-tuning (S3's Private, JFT and Redaction Schedule targets): Opacus DP-AdamW against
plain AdamW on one model, and JFT trained from scratch against JFT from Pub+Redacted's weights.

The model is one of the embedded tiny family's Llamas (default: the largest, params.yaml
family.embedded.sizes) at vocabulary V (tied input/output embeddings, RMSNorm, RoPE, no
dropout), random-init; the data are S x B random token rows of L tokens (every row one DP unit:
`dp_units` takes documents of 2..L tokens), and their "redacted" forms (random spans of 1-4
tokens each replaced by one mask id, as a policy's redaction shortens a dialog):
    adamw     = `train_adamw` (S3's Public / Pub+Redacted loop), S steps of B x L;
    dp        = `dp_finetune_causal_lm` at epsilon 8: Poisson batches of expected size B over the
                S*B rows, per-example gradients by Opacus' hooks (functorch for RMSNorm; the tied
                embedding matrix gets per-example gradients from both of its uses), clipping,
                noise; the loop's wall time (noise calibration and the compatibility probe
                excluded), tokens counted from the batches actually sampled;
    dp-frozen = dp with the tied embedding frozen: what the per-example gradients of the
                V x hidden matrix cost.
Then S3's own dispatch, `privleak.training.targets.fit_target`, with the s3_train settings at
these sizes (AdamW and DP both batch B, one epoch, seq_len L; wall time of the whole call):
    pub-redacted = Pub+Redacted, AdamW on the redacted rows (trained anyway by s3_train);
    jft-scratch  = JFT without a first phase given: `jft_finetune`, the same AdamW fine-tune on
                   the redacted rows, then the DP phase on the originals;
    jft-reuse    = JFT with first_phase = pub-redacted's result (what s3_train does): its
                   weights loaded, only the DP phase run. The fast path;
    schedule     = the Redaction Schedule (`private_schedule_finetune`, params.yaml
                   s3.embedded.schedule): a plain AdamW step on a redacted batch with
                   probability p(step), else a DP step on a Poisson batch of the originals.
Prints one table: forward tokens, optimiser steps run, wall time, tokens/s, tokens/s relative to
adamw's, wall relative to jft-reuse's, the spent epsilon, and max |Δ| of the final weights of
jft-reuse against jft-scratch. Exits non-zero unless that |Δ| is exactly 0.0 (a dropout-free
Llama: both runs do the same float operations; on CUDA the JFT rows run with
`torch.use_deterministic_algorithms`), and unless the two paths' losses on one batch (same model:
HF's token-mean loss, AdamW's first step, against the mean per-example loss DP clips) agree
within 1e-5, which they must on unpadded rows.

Run: `.venv/bin/python benchmarks/bench_dp_train.py [--device cuda] [--steps 20]
[--no-schedule]`.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import warnings
from contextlib import contextmanager

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores
# Deterministic cuBLAS for the JFT rows on CUDA (read when cuBLAS starts; no effect on a CPU).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
from common import timed  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

from privleak.pipeline import params  # noqa: E402
from privleak.training.family import llama_config  # noqa: E402
from privleak.training.finetune import pad_rows, train_adamw  # noqa: E402
from privleak.training.private import dp_finetune_causal_lm, per_example_loss  # noqa: E402
from privleak.training.targets import fit_target, optimiser_settings, planned  # noqa: E402

# Opacus' RDP accountant at a few steps: a looser epsilon bound, nothing to act on here.
warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")

SEED, LEARNING_RATE, PAD = 0, 1e-3, 0
EPSILON, DELTA, MAX_GRAD_NORM = 8.0, 1e-5, 1.0
SPAN_START, SPAN_MAX = 0.05, 4  # redaction: a span starts at a token w.p. 5 %, 1-4 tokens long


def family_size(name: str | None) -> tuple[str, dict, int]:
    """(name, size, window) of the embedded family's member `name` (None: the largest)."""
    family = params.lookup(params.load(), "family.embedded")
    sizes = family["sizes"]
    if name is None:
        name = max(sizes, key=lambda n: (sizes[n]["hidden"], sizes[n]["layers"]))
    if name not in sizes:
        raise SystemExit(f"--size {name!r}: the embedded family has {', '.join(sizes)}")
    return name, sizes[name], family["window"]


def redacted_rows(rows: list[list[int]], mask_id: int, generator) -> list[list[int]]:
    """Each row with random spans of 1..SPAN_MAX tokens replaced by one mask_id (>= 2 tokens)."""
    out = []
    for row in rows:
        starts = (torch.rand(len(row), generator=generator) < SPAN_START).tolist()
        spans = torch.randint(1, SPAN_MAX + 1, (len(row),), generator=generator).tolist()
        kept, at = [], 0
        while at < len(row):
            if starts[at]:
                kept.append(mask_id)
                at += spans[at]
            else:
                kept.append(row[at])
                at += 1
        out.append(kept if len(kept) >= 2 else row[:2])
    return out


@contextmanager
def deterministic(device: str, nondeterministic: list[str]):
    """On CUDA, torch's deterministic algorithms (atomic-add kernels such as the embedding's
    backward would make two identical runs differ in their last bits); the messages of ops
    that have no deterministic version are appended to `nondeterministic`."""
    if not device.startswith("cuda"):
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        nondeterministic += sorted(
            {str(w.message).splitlines()[0] for w in caught if "determinis" in str(w.message)}
        )
    finally:
        torch.use_deterministic_algorithms(before)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--steps", type=int, default=20, help="S optimiser steps per path")
    parser.add_argument("--batch", type=int, default=8, help="B rows a step")
    parser.add_argument("--seq-len", type=int, default=64, help="L tokens a row (DP's seq_len)")
    parser.add_argument("--vocab", type=int, default=8192, help="V")
    parser.add_argument("--size", default=None, help="family member (default: the largest)")
    parser.add_argument(
        "--no-schedule", action="store_true", help="skip the Redaction Schedule row"
    )
    args = parser.parse_args()

    name, size, window = family_size(args.size)
    torch.manual_seed(SEED)
    base = LlamaForCausalLM(llama_config(size, args.vocab, window)).to(args.device)
    mask_id = args.vocab - 1  # the redaction token; the random rows never draw it
    generator = torch.Generator().manual_seed(SEED)
    rows = torch.randint(
        3, mask_id, (args.steps * args.batch, args.seq_len), generator=generator
    ).tolist()
    redacted = redacted_rows(rows, mask_id, generator)
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else (f"CPU, {torch.get_num_threads()} threads")
    )
    print(
        f"family {name} {size} ({base.num_parameters() / 1e6:.2f}M, V={args.vocab}, tied) fp32 "
        f"on {where}: {args.steps} steps of {args.batch} x {args.seq_len} tokens; redacted rows "
        f"{sum(map(len, redacted)) / len(redacted):.1f} tokens on average"
    )

    table = []  # (path, tokens, steps, wall, epsilon, max |Δ| or None)

    def adamw(model, steps):
        batches = (rows[k * args.batch : (k + 1) * args.batch] for k in range(steps))
        return train_adamw(model, batches, learning_rate=LEARNING_RATE, pad_id=PAD)

    adamw(copy.deepcopy(base), 2)  # warm-up: allocator, kernels
    losses, adamw_wall = timed(lambda: adamw(copy.deepcopy(base), args.steps), args.device)
    table.append(("adamw", args.steps * args.batch * args.seq_len, args.steps, adamw_wall))

    for label, freeze in (("dp", False), ("dp-frozen", True)):
        model = copy.deepcopy(base)
        model.get_input_embeddings().weight.requires_grad_(not freeze)
        result = dp_finetune_causal_lm(
            model,
            rows,
            target_epsilon=EPSILON,
            delta=DELTA,
            epochs=1,
            batch_size=args.batch,
            seq_len=args.seq_len,
            learning_rate=LEARNING_RATE,
            max_grad_norm=MAX_GRAD_NORM,
            pad_id=PAD,
            seed=SEED,
        )
        table.append((label, result.tokens_seen, result.steps, result.wall_seconds, result.epsilon))

    # S3's dispatch at these sizes: s3_train's settings, AdamW and DP at batch B.
    optimiser = {"batch_size": args.batch, "learning_rate": LEARNING_RATE}
    adamw_settings, private_settings = optimiser_settings(
        optimiser | {"epochs": 1, "seq_len": args.seq_len},
        optimiser | {"target_epsilon": EPSILON, "delta": DELTA, "max_grad_norm": MAX_GRAD_NORM},
    )
    schedule = params.lookup(params.load(), "s3.embedded.schedule")

    def fit(plan, first_phase=None):
        result, wall = timed(
            lambda: fit_target(
                plan,
                lambda: copy.deepcopy(base),
                rows,
                pad_id=PAD,
                seed=SEED,
                adamw=adamw_settings,
                private=private_settings,
                schedule=schedule,
                first_phase=first_phase,
            ),
            args.device,
        )
        timing = result["timing"]
        steps = len(result["losses"]) - (len(first_phase["losses"]) if first_phase else 0)
        tokens = timing["adamw_tokens"] + timing["dp_tokens"]  # the forwards this call ran
        return result, (tokens, steps, wall, result["row"]["epsilon"])

    pub = planned("pub_redacted-random", "Pub+Redacted", "adamw", redacted, "random")
    jft = planned("jft-random", "JFT", "jft", redacted, "random", after=pub["model"])
    nondeterministic: list[str] = []
    with deterministic(args.device, nondeterministic):
        first, measured = fit(pub)
        table.append(("pub-redacted", *measured))
        scratch, measured = fit(jft)
        table.append(("jft-scratch", *measured))
        reuse, measured = fit(jft, first_phase=first)
        gap = max(
            float((scratch["state"][key] - tensor).abs().max())
            for key, tensor in reuse["state"].items()
        )
        table.append(("jft-reuse", *measured, gap))
        if not args.no_schedule:
            schedule_plan = planned("schedule-random", "Schedule", "schedule", redacted, "random")
            _, measured = fit(schedule_plan)
            table.append(("schedule", *measured))

    adamw_rate = table[0][1] / table[0][3]
    reuse_wall = next(entry[3] for entry in table if entry[0] == "jft-reuse")
    print(
        f"{'path':<14}{'fwd tokens':>11}{'steps':>7}{'wall s':>9}{'tokens/s':>10}"
        f"{'tok/s /adamw':>14}{'wall /reuse':>13}{'epsilon':>9}{'max|Δ|':>9}"
    )
    for path, tokens, steps, wall, *rest in table:
        epsilon = rest[0] if rest else math.nan
        delta = f"{rest[1]:.1e}" if len(rest) > 1 else "-"
        ratio = "-" if path in ("adamw", "dp", "dp-frozen") else f"{wall / reuse_wall:.2f}"
        print(
            f"{path:<14}{tokens:>11,}{steps:>7}{wall:>9.2f}{tokens / wall:>10,.0f}"
            f"{tokens / wall / adamw_rate:>14.2f}{ratio:>13}"
            f"{'-' if math.isnan(epsilon) else f'{epsilon:.3f}':>9}{delta:>9}"
        )

    ids, mask = pad_rows(rows[: args.batch], PAD)
    with torch.no_grad():
        dp_loss = float(per_example_loss(base, ids.to(args.device), mask.to(args.device)).mean())
    loss_gap = abs(losses[0] - dp_loss)
    tokens = {entry[0]: entry[1] for entry in table}
    print(
        f"jft-reuse runs {tokens['jft-scratch'] - tokens['jft-reuse']:,} fewer forward tokens "
        f"than jft-scratch (pub-redacted's {tokens['pub-redacted']:,}, trained anyway; the "
        f"fit_target rows' wall includes DP's noise calibration); first-step loss on one "
        f"batch: adamw {losses[0]:.6f}, dp {dp_loss:.6f}, gap {loss_gap:.1e}"
    )
    failed = 0
    if gap != 0.0:
        print(f"FAIL: jft-reuse's final weights differ from jft-scratch's by {gap:.2e} (not 0.0)")
        for message in nondeterministic:
            print(f"  nondeterministic op: {message}")
        failed = 1
    if loss_gap > 1e-5:
        print("FAIL: the AdamW and DP losses of one batch differ by more than 1e-5")
        failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
