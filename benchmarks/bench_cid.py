"""CID generation + influence: cached, batched fast paths vs the official re-encoding approach.

(1) CID generation with whole-context influence, one context of CONTEXT tokens, NEW tokens:
    fast  = `cid_generate`: both streams in one cached batch, one forward per step; τ_|D| read
            from the generation records (no recomputation);
    naive = the official approach: every step re-encodes both full prefixes (with and without
            the context) without a cache; the sampled tokens are replayed so both paths score the
            same response.
Prints forward tokens, wall time, their ratios and max |Δ log-prob|; exits non-zero if the paths
disagree by more than 1e-4.

Run: `.venv/bin/python benchmarks/bench_cid.py` (needs data/models).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402

from privleak import models  # noqa: E402
from privleak.cid import block_eos, cid_generate, cid_logprobs  # noqa: E402
from privleak.prompts import ContextPrompt  # noqa: E402
from privleak.scoring import ForwardCounter  # noqa: E402

TOLERANCE = 1e-4


@torch.inference_mode()
def naive_cid(model, prompt, tokens, lam, temp, eos, min_new, counter):
    """Official-style loop: each step forwards both full prefixes from scratch."""
    with_ctx, without = list(prompt.ids), list(prompt.with_context([]).ids)
    full, prior = [], []
    for step, token in enumerate(tokens):
        rows = [with_ctx + tokens[:step], without + tokens[:step]]
        logits = []
        for row in rows:  # unpadded, one at a time: no attention-mask pitfalls
            counter.add(1, len(row))
            out = model(input_ids=torch.tensor([row]), logits_to_keep=1)
            logits.append(torch.log_softmax(out.logits[0, -1].float(), dim=-1))
        c, o = (block_eos(x, eos, step < min_new) for x in logits)
        full.append(float(cid_logprobs(c, o, lam, temp)[token]))
        prior.append(float(cid_logprobs(c, o, 0.0, temp)[token]))
    full, prior = torch.tensor(full), torch.tensor(prior)
    return full, (full - prior).abs()


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def report(name, naive_counter, naive_wall, fast_counter, fast_wall, delta):
    print(
        f"{name}\n  naive: {naive_counter.tokens:>8} forward tokens {naive_wall:8.1f} s\n"
        f"  fast:  {fast_counter.tokens:>8} forward tokens {fast_wall:8.1f} s\n"
        f"  ratio: {naive_counter.tokens / fast_counter.tokens:.2f}x fewer tokens, "
        f"{naive_wall / fast_wall:.2f}x wall; max |Δ log-prob| = {delta:.2e}"
    )
    return delta <= TOLERANCE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--new", type=int, default=50)
    parser.add_argument("--head", type=int, default=16)
    parser.add_argument("--tail", type=int, default=16)
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args()

    torch.manual_seed(0)
    model, tokenizer = models.load(models.SMOLLM2)
    vocab, eos = model.config.vocab_size, tokenizer.eos_token_id
    draw = lambda k: torch.randint(100, vocab, (k,)).tolist()  # noqa: E731
    prompt = ContextPrompt(draw(args.head), draw(args.context), draw(args.tail))
    print(
        f"SmolLM2-135M fp32, {torch.get_num_threads()} threads: |D| = {args.context}, "
        f"template {args.head}+{args.tail}, {args.new} new tokens, λ = {args.lam}, "
        f"T = {args.temperature}"
    )
    ok = True

    # (1) generation + whole-context influence. EOS is blocked throughout so both paths take
    # exactly `new` steps.
    generation, fast_wall = timed(
        lambda: cid_generate(
            model,
            [prompt],
            [(args.lam, args.temperature)],
            max_new_tokens=args.new,
            min_new_tokens=args.new,
            eos_token_id=eos,
            pad_id=tokenizer.pad_token_id,
        )
    )
    tokens = generation.tokens[0].tolist()
    naive_counter = ForwardCounter()
    (naive_full, naive_tau), naive_wall = timed(
        lambda: naive_cid(
            model, prompt, tokens, args.lam, args.temperature, eos, args.new, naive_counter
        )
    )
    delta = max(
        float((naive_full - generation.logp_context[0]).abs().max()),
        float((naive_tau - generation.tau[0]).abs().max()),
    )
    ok &= report(
        "(1) CID generation + whole-context influence",
        naive_counter,
        naive_wall,
        generation.prefill_counter,
        fast_wall,
        delta,
    )

    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
