"""PAD sweeps (S2): every defense of a prompt forked from one prefill, against re-prefilling each
defense, an official-style per-response HF generate, and plain sampling (PAD's overhead).

P prompts of realistic RAG length (random token ids: a 3-document context + question), D noise
defenses each (the sweep corpus's set: Extraction, Static, PAD, its two ablations, 6 more
amplifications and 5 more epsilons), NEW tokens each with EOS blocked:
    fast     = `pad_rag.defended_generate`'s path: one `decode` over the P x D groups with the
               `LogitNoise` mix; a prompt's D defenses share one chunk, so its prefill is forked;
    fair     = the same decoder called once per defense (what a user sweeping a parameter writes
               first): every call prefills the P prompts again. Same group keys, so the same tokens;
    naive    = the official code's shape for prompt 0: one response at a time (batch 1, its own
               prefill) per defense, as its `generate` per prompt was; the same decoder, so the
               same tokens;
    plain    = fast's decode without the mix (temperature sampling only): PAD overhead =
               fast / plain - 1 (the target: <= 10 %).
Each path's time is the best of --runs samples of at least --min-seconds (`common.sampled`),
printed with their spread. Prints forward tokens, wall times and ratios, and how many fair/naive
responses equal fast's; exits non-zero if a sampled token's log-prob differs from fast's by more
than 1e-4 (fp32) anywhere before the first token where the two responses differ.

Run: `.venv/bin/python benchmarks/bench_pad.py [--prompts 4] [--new-tokens 32] [--device cuda]
[--runs 5] [--min-seconds 1]`.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    timed,
)

from privleak.decoding import Temperature, decode  # noqa: E402
from privleak.pad import LogitNoise, PADSettings, StaticNoise, noise_seeds  # noqa: E402

SEED, TEMPERATURE = 0, 0.2


def sweep_defenses() -> dict:
    pad = PADSettings()
    out = {"extraction": None, "static": StaticNoise(0.5), "pad": pad,
           "no_calib": dataclasses.replace(pad, calibration=False),
           "no_sens": dataclasses.replace(pad, sensitivity=False)}  # fmt: skip
    out |= {f"amp={a:g}": dataclasses.replace(pad, amplification=a) for a in (1, 2, 4, 5, 7, 10)}
    out |= {f"eps={e:g}": dataclasses.replace(pad, epsilon=e) for e in (0.01, 0.05, 0.1, 0.5, 1)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--prompts", type=int, default=4, help="P")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=400)
    add_sampling_args(parser)
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    pad = eos if pad is None else pad
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(100, vocab, (args.prompt_tokens,), generator=generator).tolist()
               for _ in range(args.prompts)]  # fmt: skip
    defenses = sweep_defenses()
    names, new = list(defenses), args.new_tokens
    keys = [(p, name) for p in range(len(prompts)) for name in names]
    print(
        f"{describe(model, args)}: {len(prompts)} prompts of {args.prompt_tokens} tokens x "
        f"{len(names)} defenses, {new} new tokens, EOS blocked, temperature {TEMPERATURE}"
    )

    def run(members, with_noise=True, budget=None):
        """One decode over (prompt index, defense name) pairs, in order."""
        mix = LogitNoise([defenses[n] for _, n in members], noise_seeds(SEED, members))
        return decode(
            model, [prompts[p] for p, _ in members], max_new_tokens=new,
            transforms=[Temperature(TEMPERATURE)], mix=mix if with_noise else None, seed=SEED,
            group_keys=members, eos_token_id=eos, min_new_tokens=new, pad_id=pad,
            max_batch_streams=budget,
        )  # fmt: skip

    budget = len(names) * len(prompts)
    _, warmup = timed(lambda: run(keys[:2]), args.device)  # allocator, kernels, compiling
    print(f"  warm-up (2 groups; on CUDA it compiles PAD's step): {warmup:.1f} s")

    best = sampler(args)

    fast, fast_time = best(lambda: run(keys, budget=budget))
    fast_wall, fast_tokens = fast_time.best, fast.counter.tokens
    print(f"  fast (one prefill per prompt): {fast_time}  forward tokens {fast_tokens:>8,} "
          f"(prefill {fast.prefill_counter.tokens:,})")  # fmt: skip
    plain, plain_time = best(lambda: run(keys, with_noise=False, budget=budget))
    print(f"  plain (no noise, same batch):  {plain_time}  PAD overhead "
          f"{fast_wall / plain_time.best - 1:+.1%}")  # fmt: skip

    def fair():
        return [run([(p, n) for p in range(len(prompts))]) for n in names]

    per_defense, fair_time = best(fair)
    fair_tokens = sum(d.counter.tokens for d in per_defense)
    print(f"  fair (a decode per defense):   {fair_time}  forward tokens {fair_tokens:>8,}; "
          f"fair / fast: wall {fair_time.best / fast_wall:.2f}x, tokens "
          f"{fair_tokens / fast_tokens:.2f}x")  # fmt: skip

    def naive():
        return [run([(0, name)]) for name in names]

    one_by_one, naive_time = best(naive)
    naive_wall = naive_time.best
    share = 1 / len(prompts)
    naive_tokens = sum(d.counter.tokens for d in one_by_one)
    print(f"  naive (prompt 0, one response per call): {naive_time}  forward tokens "
          f"{naive_tokens:>7,}; naive / fast per prompt: wall "
          f"{naive_wall / (share * fast_wall):.1f}x, tokens "
          f"{naive_tokens / (share * fast_tokens):.2f}x")  # fmt: skip

    # Paths may diverge after a float tie (batch shapes change the last bits of the logits; a
    # flat random-init model at temperature 0.2 samples near many CDF boundaries), so the log-probs
    # are compared over each group's common prefix of tokens, where both saw the same text.
    index = {key: g for g, key in enumerate(keys)}
    others = [
        (index[(p, n)], d.tokens[p], d.sample_logprobs[p])
        for n, d in zip(names, per_defense, strict=True)
        for p in range(len(prompts))
    ]
    others += [(index[(0, n)], d.tokens[0], d.sample_logprobs[0])
               for n, d in zip(names, one_by_one, strict=True)]  # fmt: skip
    identical, delta = 0, 0.0
    for g, tokens, logprobs in others:
        differs = (fast.tokens[g] != tokens).nonzero()
        common = int(differs[0]) if len(differs) else len(tokens)
        identical += not len(differs)
        delta = max(delta, float((fast.sample_logprobs[g, :common] - logprobs[:common]).abs()
                                 .nan_to_num(nan=float("inf")).max()))  # fmt: skip
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2
    print(
        f"  fair and naive responses identical to fast's: {identical}/{len(others)}; max |Δ "
        f"sampled log-prob| before each first difference {delta:.2e} (tolerance {tolerance:g})"
    )
    return 0 if delta <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
