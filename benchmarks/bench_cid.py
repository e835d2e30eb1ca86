"""CID generation with whole-context influence: the library's decoder against three baselines.

G = contexts × λ groups, each a with-context and a no-context stream, NEW tokens each (EOS
blocked throughout, so every path takes exactly NEW steps):
    fast  = `cid_generate`: every stream of a chunk in one cached batch, one forward per step,
            each distinct prompt prefilled once, on-device sampling; τ_|D| read from the records;
    fair  = what a user would write first: each group decoded on its own, its two streams in one
            cached batch, `torch.multinomial` on the mixed distribution;
    hf    = HF `generate` with sampling on the G with-context prompts (one stream per group: the
            anchor a user would pick, although it cannot compute CID);
    naive = the official approach, for group 0 only: every step re-encodes both full prefixes
            without a cache (the fast path's tokens are replayed, so both score one response).
fast and hf are each timed as the best of --runs samples of at least --min-seconds after a
first call that does not count (`common.sampled`), printed with their spread; fair and naive
time one call each.
Prints forward tokens, wall time, group tokens/s and ratios; exits non-zero if fast and naive
disagree by more than 1e-4 (fp32) in log p̄ or τ.

Run: `.venv/bin/python benchmarks/bench_cid.py [--model smollm2-135m-shape] [--device cuda]`.
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
    timed,
)

from privleak.batching import ForwardCounter  # noqa: E402
from privleak.cid import block_eos, cid_generate, cid_logprobs  # noqa: E402
from privleak.decoding import resolve_forward_mode  # noqa: E402
from privleak.models import real_logits  # noqa: E402
from privleak.prompts import ContextPrompt  # noqa: E402


@torch.inference_mode()
def naive_cid(model, prompt, tokens, lam, temp, eos, min_new, counter):
    """Official-style loop: each step forwards both full prefixes from scratch."""
    with_ctx, without = list(prompt.ids), list(prompt.with_context([]).ids)
    full, prior = [], []
    for step, token in enumerate(tokens):
        logits = []
        for row in (with_ctx + tokens[:step], without + tokens[:step]):  # unpadded, one at a time
            counter.add(1, len(row))
            out = model(input_ids=torch.tensor([row], device=model.device), logits_to_keep=1)
            logits.append(torch.log_softmax(real_logits(model, out.logits[0, -1].float()), -1))
        c, o = (block_eos(x, eos, step < min_new) for x in logits)
        full.append(float(cid_logprobs(c, o, lam, temp)[token]))
        prior.append(float(cid_logprobs(c, o, 0.0, temp)[token]))
    full, prior = torch.tensor(full), torch.tensor(prior)
    return full, (full - prior).abs()


@torch.inference_mode()
def fair_cid(model, prompts, settings, new, eos, counter, seed=0):
    """Each group alone: its two streams in one cached batch, a multinomial draw per step."""
    generator = torch.Generator(device=model.device).manual_seed(seed)
    for prompt in prompts:
        rows = (prompt.ids, prompt.with_context([]).ids)
        width = max(map(len, rows))
        ids = torch.tensor([[0] * (width - len(r)) + list(r) for r in rows], device=model.device)
        mask = (
            torch.arange(width, device=model.device)
            >= torch.tensor([[width - len(r)] for r in rows], device=model.device)
        ).long()
        for lam, temp in settings:
            out = model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
            counter.add(*ids.shape)
            cache, step_mask = out.past_key_values, mask
            position = mask.sum(-1, keepdim=True)
            for step in range(new):
                logprobs = torch.log_softmax(real_logits(model, out.logits[:, -1].float()), -1)
                c, o = (block_eos(x, eos, True) for x in logprobs)
                probs = cid_logprobs(c, o, lam, temp).exp()
                token = torch.multinomial(probs, 1, generator=generator)
                if step == new - 1:
                    break
                step_mask = torch.cat([step_mask, torch.ones_like(step_mask[:, :1])], 1)
                out = model(
                    input_ids=token.expand(2, 1),
                    attention_mask=step_mask,
                    position_ids=position,
                    past_key_values=cache,
                    use_cache=True,
                )
                counter.add(2, 1)
                cache, position = out.past_key_values, position + 1


@torch.inference_mode()
def hf_generate(model, prompts, settings, new, eos, pad, counter):
    """HF `generate` with sampling, one left-padded batch of every (context, λ) prompt."""
    rows = [prompt.ids for prompt in prompts for _ in settings]
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + list(r) for r in rows], device=model.device)
    mask = (ids != pad).long() if pad is not None else torch.ones_like(ids)
    for k, r in enumerate(rows):  # a prompt token equal to pad must stay visible
        mask[k, width - len(r) :] = 1
    counter.add(*ids.shape)
    counter.add(len(rows) * (new - 1), 1)
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=settings[0][1],
        top_k=0,
        top_p=1.0,
        max_new_tokens=new,
        min_new_tokens=new,
        eos_token_id=eos,
        pad_token_id=pad,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--contexts", type=int, default=16)
    parser.add_argument("--lams", type=float, nargs="+", default=[0.5, 1.0, 1.5])
    parser.add_argument("--context", type=int, default=256, help="|D| in tokens")
    parser.add_argument("--new", type=int, default=30)
    parser.add_argument("--head", type=int, default=16)
    parser.add_argument("--tail", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--max-batch-streams", type=int, default=None)
    parser.add_argument(
        "--forward-mode",
        default="auto",
        choices=["auto", "dynamic", "slots", "graph"],
        help="the decoder's step forwards (auto: a CUDA graph on a GPU, a growing cache on a CPU)",
    )
    parser.add_argument(
        "--fair-groups",
        type=int,
        default=4,
        help="groups the per-group baseline decodes (it is slow); 0 skips it",
    )
    parser.add_argument(
        "--naive-new", type=int, default=10, help="steps of the cache-free reference on group 0"
    )
    add_sampling_args(parser)
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    draw = lambda k: torch.randint(100, vocab, (k,), generator=generator).tolist()  # noqa: E731
    head, tail = draw(args.head), draw(args.tail)  # one template, as in a stage
    prompts = [ContextPrompt(head, draw(args.context), tail) for _ in range(args.contexts)]
    settings = [(lam, args.temperature) for lam in args.lams]
    groups = len(prompts) * len(settings)
    print(
        f"{describe(model, args)}: {args.contexts} contexts x {len(settings)} λ = {groups} "
        f"groups, |D| = {args.context}, template {args.head}+{args.tail}, {args.new} new tokens, "
        f"forward mode {resolve_forward_mode(model, args.forward_mode)}"
    )
    ok = True

    def fast():
        return cid_generate(
            model,
            prompts,
            settings,
            max_new_tokens=args.new,
            min_new_tokens=args.new,
            eos_token_id=eos,
            pad_id=pad,
            max_batch_streams=args.max_batch_streams,
            forward_mode=args.forward_mode,
        )

    best_of = sampler(args)  # each path's first call warms up the allocator, kernels and caches

    generation, fast_time = best_of(fast)
    fast_wall = fast_time.best
    hf_counter = ForwardCounter()
    hf_generate(model, prompts, settings, args.new, eos, pad, hf_counter)  # counts one call
    _, hf_time = best_of(
        lambda: hf_generate(model, prompts, settings, args.new, eos, pad, ForwardCounter())
    )
    hf_wall = hf_time.best
    rate = lambda wall, g=groups: g * args.new / wall  # noqa: E731
    fast_tokens = generation.prefill_counter.tokens + generation.step_counter.tokens
    print(
        f"  fast (cid_generate): {fast_time}  {rate(fast_wall):8.1f} group tok/s  "
        f"forward tokens {fast_tokens} (prefill {generation.prefill_counter.tokens})"
    )
    print(
        f"  hf generate:         {hf_time}  {rate(hf_wall):8.1f} group tok/s  "
        f"forward tokens {hf_counter.tokens} (1 stream per group)"
    )
    print(f"  fast / hf wall: {fast_wall / hf_wall:.2f}x")
    if args.fair_groups:
        fair_prompts = prompts[: max(1, args.fair_groups // len(settings))]
        fair_counter = ForwardCounter()
        _, fair_wall = timed(
            lambda: fair_cid(model, fair_prompts, settings, args.new, eos, fair_counter),
            args.device,
        )
        fair_groups = len(fair_prompts) * len(settings)
        print(
            f"  fair (per group):    {fair_wall:8.2f} s  {rate(fair_wall, fair_groups):8.1f} "
            f"group tok/s on {fair_groups} groups; fast is "
            f"{rate(fast_wall) / rate(fair_wall, fair_groups):.1f}x its group tokens/s"
        )
    if args.naive_new:
        steps = min(args.naive_new, args.new)
        lam = settings[0][0]
        tokens = generation.tokens[0, :steps].tolist()
        naive_counter = ForwardCounter()
        (full, tau), naive_wall = timed(
            lambda: naive_cid(
                model, prompts[0], tokens, lam, args.temperature, eos, args.new, naive_counter
            ),
            args.device,
        )
        delta = max(
            float((full - generation.logp_context[0, :steps]).abs().max()),
            float((tau - generation.tau[0, :steps]).abs().max()),
        )
        tolerance = 1e-4 if args.dtype == "float32" else 5e-2  # half precision: rounding only
        print(
            f"  naive (group 0, {steps} steps): {naive_counter.tokens} forward tokens, "
            f"{naive_wall:.2f} s; max |Δ log p̄|, |Δ τ| vs fast = {delta:.2e} "
            f"(tolerance {tolerance:g})"
        )
        ok &= delta <= tolerance
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
