"""S1 fast paths vs naive references and a bare forward, in one run.

1. ESP/TP under six decoders on the same right-padded batches (`--batch-size` rows):
   - naive: one forward per decoder per batch, per-row host copies (the loop a user would write);
   - fast: `suffix_logprobs`, one forward per batch, every decoder on the suffix rows, one host
     copy per batch;
   - bare: `model(input_ids, attention_mask, logits_to_keep=...)` over the same batches, no
     decoders: the ceiling. fast/bare is the share of the forward's tokens/s that scoring keeps.
2. Approximate n-ISP: `approximate_isp` (level-by-level batch with a KV cache, chunked by
   `--max-nodes`) vs a naive recursive expansion that forwards prefix + partial suffix from
   scratch at every node. Reported as forward tokens per sequence for n = 1 and 2.

Part 1's paths are each timed as the best of --runs samples of at least --min-seconds
(`common.sampled`), printed with their spread; part 2 times one call of each. Prints tokens/s,
wall time, ratios and max |delta| between the paths; in float32 exits non-zero if
they disagree by more than 1e-4 (log-probs for ESP; probabilities for ISP).

Run: `.venv/bin/python benchmarks/bench_esp.py [--model NAME|PATH|SHAPE] [--device cuda]`.
Default: SmolLM2-135M for part 1 and the largest tiny-family size for part 2. Without data/
(no prepared models or family) use a random-init shape, e.g. `--model smollm2-135m-shape`; part 2
then runs on that shape too (keep --isp-prefix and --isp-sequences small on a CPU).
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
from common import add_model_args, add_sampling_args, describe, load_model, sampler, timed

from privleak import models
from privleak.batching import pad_rows
from privleak.decoding import sampling_logprobs
from privleak.metrics import sequence as seq
from privleak.pipeline import paths
from privleak.training import family

DECODERS = [
    {"name": "greedy", "kind": "greedy"},
    {"name": "sampling", "kind": "sampling"},
    {"name": "top-k 5", "kind": "top_k", "value": 5},
    {"name": "top-k 10", "kind": "top_k", "value": 10},
    {"name": "top-p 0.6", "kind": "top_p", "value": 0.6},
    {"name": "temp 0.1", "kind": "temperature", "value": 0.1},
]


def padded_batches(model, prefixes, suffixes, batch_size, pad_id):
    """The batches `suffix_logprobs` forms: (rows, ids, mask on the device, keep) per batch."""
    order = sorted(range(len(prefixes)), key=lambda i: -(len(prefixes[i]) + len(suffixes[i])))
    out = []
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        ids, mask = pad_rows([prefixes[i] + suffixes[i] for i in batch], pad_id, "right")
        keep = ids.shape[1] - min(len(prefixes[i]) - 1 for i in batch)
        out.append((batch, ids.to(model.device), mask.to(model.device), keep))
    return out


@torch.inference_mode()
def bare_forward(model, batches):
    """The ceiling: one forward per batch, logits for the kept positions, nothing else."""
    for _, ids, mask, keep in batches:
        model(input_ids=ids, attention_mask=mask, logits_to_keep=keep, use_cache=False)


@torch.inference_mode()
def naive_esp(model, prefixes, suffixes, decoders, batches):
    """Per decoder: forward every batch again, score each row, copy each row to the host."""
    out = {}
    for name, transforms in decoders.items():
        rows = [None] * len(prefixes)
        for batch, ids, mask, keep in batches:
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits.float()
            offset = ids.shape[1] - keep
            for k, i in enumerate(batch):
                at = torch.arange(len(suffixes[i]), device=ids.device) + len(prefixes[i]) - 1
                lp = sampling_logprobs(
                    models.real_logits(model, logits[k, at - offset]), transforms
                )
                rows[i] = lp[torch.arange(len(at)), torch.tensor(suffixes[i])].cpu()
        out[name] = rows
    return out


@torch.inference_mode()
def naive_isp(model, prefix, suffix, n, transforms, expand):
    """Recursive expansion; each node forwards prefix + its partial suffix from scratch.
    Returns (approximate n-ISP, forwarded tokens)."""
    tokens = 0

    def node(partial, errors, logp):
        nonlocal tokens
        j = len(partial)
        if j == len(suffix):
            return math.exp(logp) if errors == n else 0.0
        ids = torch.tensor([prefix + partial], device=model.device)
        tokens += ids.numel()
        logits = models.real_logits(model, model(input_ids=ids).logits[0, -1].float())
        lp = sampling_logprobs(logits, transforms).double().cpu()
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

    return node([], 0, 0.0), tokens


def max_delta(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| where both are finite; inf if only one of them is -inf (a zero probability)."""
    if not torch.equal(torch.isinf(a), torch.isinf(b)):
        return math.inf
    finite = torch.isfinite(a)
    return float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0


def random_ids(count: int, length: int, vocab: int) -> list[list[int]]:
    return [torch.randint(3, vocab, (length,)).tolist() for _ in range(count)]


def bench_esp(model, pad_id, args) -> float:
    vocab = getattr(model, "privleak_real_vocab", None) or model.config.vocab_size
    prefixes = random_ids(args.sequences, args.prefix, vocab)
    suffixes = random_ids(args.sequences, args.suffix, vocab)
    decoders = seq.decoder_table(DECODERS)
    batches = padded_batches(model, prefixes, suffixes, args.batch_size, pad_id)
    fast = lambda: seq.suffix_logprobs(  # noqa: E731
        model, prefixes, suffixes, decoders, batch_size=args.batch_size, pad_id=pad_id
    )
    bare_forward(model, batches[:1])  # warm-up: kernels, allocator, cuBLAS handles

    best = sampler(args)

    _, bare_time = best(lambda: bare_forward(model, batches))
    fast_scores, fast_time = best(fast)
    slow, slow_time = best(lambda: naive_esp(model, prefixes, suffixes, decoders, batches))
    delta = max(
        max_delta(a, b)
        for name in decoders
        for a, b in zip(slow[name], fast_scores[name], strict=True)
    )
    tokens = sum(ids.numel() for _, ids, _, _ in batches)
    print(
        f"ESP, {describe(model, args)}: {args.sequences} sequences x ({args.prefix} + "
        f"{args.suffix}) tokens, batches of {args.batch_size}, {len(decoders)} decoders"
    )
    for label, forwards, timing in (
        ("bare forward, no decoders    ", tokens, bare_time),
        ("fast suffix_logprobs, all six", tokens, fast_time),
        ("naive, one pass per decoder  ", tokens * len(decoders), slow_time),
    ):
        print(f"  {label}: {forwards:>8} tokens {timing} {tokens / timing.best:>9.0f} seq-tok/s")
    print(
        f"  fast/bare {100 * bare_time.best / fast_time.best:.0f}% of the forward's tokens/s, "
        f"naive/fast wall {slow_time.best / fast_time.best:.1f}x, max |delta log-prob| "
        f"{delta:.2e}"
    )
    return delta


def isp_model(args):
    """(model, pad_id, label): the largest tiny-family size if built, else the --model shape."""
    members = family.member_dirs(paths.DATA / "family") if (paths.DATA / "family").is_dir() else []
    if members and args.model not in models.SHAPES:
        model, tokenizer = models.load(str(members[-1]), device=args.device, dtype=args.dtype)
        return model, tokenizer.pad_token_id, members[-1].name
    model, _, pad_id = load_model(args)
    return model, pad_id, args.model


def bench_isp(args) -> float:
    model, pad_id, label = isp_model(args)
    vocab = getattr(model, "privleak_real_vocab", None) or model.config.vocab_size
    prefixes = random_ids(args.isp_sequences, args.isp_prefix, vocab)
    suffixes = random_ids(args.isp_sequences, 4, vocab)
    transforms = []  # regular sampling: every alternative has mass
    print(
        f"approximate n-ISP, {label}: {args.isp_sequences} x ({args.isp_prefix} + 4) tokens, "
        f"expand {args.expand}, max_nodes {args.max_nodes}:"
    )
    worst = 0.0
    for n in (1, 2):
        (slow, slow_tokens), slow_wall = timed(
            lambda n=n: [
                sum(x)
                for x in zip(
                    *[
                        naive_isp(model, p, s, n, transforms, args.expand)
                        for p, s in zip(prefixes, suffixes, strict=True)
                    ],
                    strict=True,
                )
            ],
            args.device,
        )
        fast, fast_wall = timed(
            lambda n=n: seq.approximate_isp(
                model, prefixes, suffixes, n, transforms, expand=args.expand,
                max_nodes=args.max_nodes, pad_id=pad_id,
            ),
            args.device,
        )  # fmt: skip
        delta = abs(slow - float(fast.approx.sum()))
        worst = max(worst, delta)
        per_slow = slow_tokens / len(prefixes)
        per_fast = fast.counter.tokens / len(prefixes)
        print(
            f"  n={n}: naive recursive {per_slow:>8.0f} tokens/seq {slow_wall:6.2f} s | "
            f"level-by-level {per_fast:>6.0f} tokens/seq {fast_wall:6.2f} s | "
            f"ratio tokens {per_slow / per_fast:.1f}x wall {slow_wall / fast_wall:.1f}x | "
            f"|delta sum ISP| {delta:.2e}"
        )
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--prefix", type=int, default=50)
    parser.add_argument("--suffix", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--isp-sequences", type=int, default=4)
    parser.add_argument("--isp-prefix", type=int, default=50)
    parser.add_argument("--expand", type=int, default=5)
    parser.add_argument("--max-nodes", type=int, default=64)
    parser.add_argument("--skip-isp", action="store_true", help="part 1 only")
    add_sampling_args(parser)
    args = parser.parse_args()
    if args.model in models.EMBEDDED_LMS and not (paths.MODELS / args.model).is_dir():
        shapes = " | ".join(models.SHAPES)
        print(f"{args.model} is not prepared under {paths.MODELS}: run `dvc repro prepare_models`")
        print(f"or time a random-init model of the same shape: --model {shapes}")
        return 2
    torch.manual_seed(0)
    model, _, pad_id = load_model(args)
    worst = bench_esp(model, pad_id, args)
    del model
    if not args.skip_isp:
        worst = max(worst, bench_isp(args))
    if args.dtype == "float32" and worst > 1e-4:
        print(f"FAIL: paths disagree by {worst:.2e} > 1e-4")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
