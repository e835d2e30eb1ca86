"""The audit's forced decoding (`privleak.audit.forced`): many candidates forced after the D and D'
prompts, against the per-candidate loop and a batched full forward.

Two prompts that share their head (template + the other documents; D' adds the canary's document
at the end), N candidates of up to T tokens. Prompts and candidates are random token ids of
realistic length, so no tokenizer and no weights are needed.
    fast  = the audit's path: the shared head forwarded once, each prompt's tail once on a copy
            of its cache (`prefill`), then every (prompt, candidate) pair forwarded from a copy of
            its prompt's cache, `--batch-rows` pairs a forward (`forced_all`);
    fair  = what a user would write with a batched scorer: every prompt + candidate as one full
            sequence, left-padded, `--batch-rows` sequences a forward;
    loop  = the per-candidate reference: one full forward of both prompts + the candidate for each
            candidate (`forced_loop`).
Each path's time is the best of --runs samples of at least --min-seconds (`common.sampled`),
printed with their spread. Prints forward tokens, wall times and ratios, and the max |Δ log-prob|
over every position of every candidate and the whole vocabulary; exits non-zero beyond 1e-4
(fp32).

Run: `.venv/bin/python benchmarks/bench_audit_forced.py [--candidates 34] [--new-tokens 12]
[--batch-rows 96] [--device cuda] [--runs 5] [--min-seconds 1]`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402
from common import (  # noqa: E402
    add_model_args,
    add_sampling_args,
    describe,
    load_model,
    sampler,
)

from privleak.audit.forced import chunks, forced_all, forced_loop, prefill  # noqa: E402
from privleak.batching import ForwardCounter, pad_rows, position_ids  # noqa: E402
from privleak.models import real_logits  # noqa: E402

SEED = 0


@torch.inference_mode()
def batched_full(model, prompts, candidates, pad: int, batch_rows: int):
    """[R, N, L, V] log-probs from full sequences (prompt + candidate), batch_rows a forward."""
    longest = max(len(c) for c in candidates)
    pairs = [(p, c) for c in candidates for p in prompts]
    out = []
    for start in range(0, len(pairs), batch_rows):
        part = pairs[start : start + batch_rows]
        rows = [list(p) + list(c) + [pad] * (longest - len(c)) for p, c in part]
        ids, mask = pad_rows(rows, pad, "left")
        for i, (_, c) in enumerate(part):  # the padding after a short candidate is never read
            mask[i, mask.shape[1] - (longest - len(c)) :] = 0
        logits = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                       position_ids=position_ids(mask.to(model.device)),
                       logits_to_keep=longest + 1).logits[:, :-1]  # fmt: skip
        out.append(torch.log_softmax(real_logits(model, logits.float()), -1))
    stacked = torch.cat(out)
    return stacked.view(len(candidates), len(prompts), *stacked.shape[1:]).transpose(0, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--candidates", type=int, default=34, help="N (16 samples a side + 2)")
    parser.add_argument("--new-tokens", type=int, default=12, help="T, the longest candidate")
    parser.add_argument("--head-tokens", type=int, default=330, help="template + D's documents")
    parser.add_argument("--canary-tokens", type=int, default=90)
    parser.add_argument("--tail-tokens", type=int, default=40, help="question + answer prefix")
    parser.add_argument("--batch-rows", type=int, default=96)
    add_sampling_args(parser)
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    pad = eos if pad is None else pad
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    draw = lambda n: torch.randint(100, vocab, (n,), generator=generator).tolist()  # noqa: E731
    head, canary, tail = draw(args.head_tokens), draw(args.canary_tokens), draw(args.tail_tokens)
    prompts = [head + canary + tail, head + tail]  # D', D
    lengths = torch.randint(1, args.new_tokens + 1, (args.candidates,), generator=generator)
    lengths[0] = args.new_tokens
    candidates = [draw(int(n)) for n in lengths]
    print(f"{describe(model, args)}: prompts {len(prompts[0])}/{len(prompts[1])} tokens "
          f"(shared head {len(head)}), {args.candidates} candidates of 1-{args.new_tokens} "
          f"tokens, batch rows {args.batch_rows}")  # fmt: skip

    def fast(counter):
        forked = prefill(model, prompts, pad, counter)
        parts = [forced_all(model, forked, [candidates[i] for i in r], pad, counter)
                 for r in chunks(len(candidates), len(prompts), args.batch_rows)]  # fmt: skip
        width = max(p.shape[2] for p in parts)
        return torch.cat([torch.nn.functional.pad(p, (0, 0, 0, width - p.shape[2]))
                          for p in parts], dim=1)  # fmt: skip

    best = sampler(args)

    fast(ForwardCounter())  # warm-up: allocator, kernels
    counter = ForwardCounter()
    got = fast(counter)  # one call, counted
    _, fast_time = best(lambda: fast(ForwardCounter()))
    full_tokens = sum(len(p) + len(c) for c in candidates for p in prompts)
    print(f"  fast (shared prefills): {fast_time}  forward tokens {counter.tokens:>9,}")
    fair, fair_time = best(lambda: batched_full(model, prompts, candidates, pad, args.batch_rows))
    print(f"  fair (batched full):    {fair_time}  forward tokens {full_tokens:>9,}; "
          f"fair / fast: wall {fair_time.best / fast_time.best:.2f}x, tokens "
          f"{full_tokens / counter.tokens:.2f}x")  # fmt: skip
    looped, loop_time = best(lambda: forced_loop(model, prompts, candidates, pad))
    print(f"  loop (per candidate):   {loop_time}  forward tokens {full_tokens:>9,}; "
          f"loop / fast: wall {loop_time.best / fast_time.best:.2f}x")  # fmt: skip
    deltas = {"fair": 0.0, "loop": 0.0}
    for j, candidate in enumerate(candidates):
        n = len(candidate)
        mine = got[:, j, :n]
        deltas["loop"] = max(deltas["loop"], float((mine - looped[j]).abs().max()))
        deltas["fair"] = max(deltas["fair"], float((mine - fair[:, j, :n]).abs().max()))
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2
    shown = ", ".join(f"{k} {v:.2e}" for k, v in deltas.items())
    print(f"  max |Δ log-prob| vs fast (every position, whole vocabulary): {shown} "
          f"(tolerance {tolerance:g})")  # fmt: skip
    return 0 if max(deltas.values()) <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
