"""The frontier's sweep (`privleak.frontier`): every noisy point of a prompt forked from one
prefill, against re-prefilling the prompt for each point and against a user's HF loop.

U prompts of a RAG prompt's length (random token ids, so no tokenizer and no weights are needed)
answered under P points: no noise, Static at each σ, PAD at each ε_base (the frontier's noisy
family), T new tokens each at temperature 0.2.
    fast  = the frontier's path: one decode call, a prompt's points in one chunk, each distinct
            prompt prefilled once and its cache forked to every point;
    naive = one decode call per point, each prefilling every prompt again (the same draws: a
            group's tokens depend on its key alone);
    fair  = what a user would write: HF `generate` with sampling, one call per point over the U
            prompts (no noise processor, so a lower bound on a noise-injecting loop's cost).
Each path's time is the best of --runs samples of at least --min-seconds (`common.sampled`),
printed with their spread. Prints forward tokens, wall times and ratios, and the max |Δ log-prob|
of the sampled tokens between fast and naive; exits non-zero beyond 1e-4 (fp32) or when their
tokens differ.

Run: `.venv/bin/python benchmarks/bench_frontier.py [--prompts 8] [--prompt-tokens 300]
[--new-tokens 16] [--device cuda] [--runs 3] [--min-seconds 1]`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402
from common import add_model_args, add_sampling_args, describe, load_model, sampler  # noqa: E402

from privleak.decoding import Temperature, decode  # noqa: E402
from privleak.pad import LogitNoise, PADSettings, StaticNoise, noise_seeds  # noqa: E402

SEED = 0
NOISES = {"none": None, "static=1": StaticNoise(1.0), "static=2": StaticNoise(2.0),
          "pad=0.05": PADSettings(epsilon=0.05), "pad=0.2": PADSettings(epsilon=0.2)}  # fmt: skip


def run(model, prompts, points, args, eos, pad, counter=None):
    """One decode call over every (prompt, point) group, prompt-major."""
    keys = [(u, name) for u in range(len(prompts)) for name in points]
    out = decode(
        model, [prompts[u] for u, _ in keys], max_new_tokens=args.new_tokens,
        transforms=[Temperature(0.2)], seed=SEED, group_keys=keys, eos_token_id=None,
        mix=LogitNoise([NOISES[n] for _, n in keys], noise_seeds(SEED, keys)), pad_id=pad,
        max_batch_streams=args.max_batch_streams,
    )  # fmt: skip
    if counter is not None:
        counter.extend([out.prefill_counter.tokens, out.step_counter.tokens])
    return dict(zip(keys, zip(out.token_lists(), out.sample_logprobs, strict=True), strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--prompts", type=int, default=8, help="U")
    parser.add_argument("--prompt-tokens", type=int, default=300, help="a 3-context RAG prompt")
    parser.add_argument("--new-tokens", type=int, default=16, help="T")
    parser.add_argument("--max-batch-streams", type=int, default=128)
    add_sampling_args(parser)
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    pad = eos if pad is None else pad
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(100, vocab, (args.prompt_tokens,), generator=generator).tolist()
               for _ in range(args.prompts)]  # fmt: skip
    points = list(NOISES)
    print(f"{describe(model, args)}: {args.prompts} prompts of {args.prompt_tokens} tokens, "
          f"{len(points)} points, {args.new_tokens} new tokens")  # fmt: skip
    best = sampler(args)

    run(model, prompts, points, args, eos, pad)  # warm-up
    counted: list[int] = []
    fast = run(model, prompts, points, args, eos, pad, counted)
    _, fast_time = best(lambda: run(model, prompts, points, args, eos, pad))
    print(f"  fast (one prefill, forked):  {fast_time}  prefill tokens {counted[0]:>8,}")

    def naive_run():
        found, tokens = {}, []
        for name in points:
            part = run(model, prompts, [name], args, eos, pad, tokens)
            found |= part
        return found, tokens[::2]

    (naive, naive_tokens), naive_time = best(naive_run)
    print(f"  naive (re-prefill a point):  {naive_time}  prefill tokens {sum(naive_tokens):>8,}; "
          f"naive / fast: wall {naive_time.best / fast_time.best:.2f}x, prefill tokens "
          f"{sum(naive_tokens) / counted[0]:.2f}x")  # fmt: skip

    batch = torch.tensor(prompts, device=model.device)

    def fair_run():
        for _ in points:
            torch.manual_seed(SEED)
            model.generate(batch, attention_mask=torch.ones_like(batch), do_sample=True,
                           temperature=0.2, top_k=0, max_new_tokens=args.new_tokens,
                           min_new_tokens=args.new_tokens, pad_token_id=pad)  # fmt: skip

    _, fair_time = best(fair_run)
    print(f"  fair (HF generate a point):  {fair_time}  prefill tokens "
          f"{len(points) * args.prompts * args.prompt_tokens:>8,}; fair / fast: wall "
          f"{fair_time.best / fast_time.best:.2f}x")  # fmt: skip

    same = all(fast[k][0] == naive[k][0] for k in fast)
    delta = max(float((fast[k][1][: len(fast[k][0])] - naive[k][1][: len(fast[k][0])]).abs().max())
                for k in fast)  # fmt: skip
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2
    print(f"  fast vs naive: same tokens {same}; max |Δ log-prob| of the sampled tokens "
          f"{delta:.2e} (tolerance {tolerance:g})")  # fmt: skip
    return 0 if same and delta <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
