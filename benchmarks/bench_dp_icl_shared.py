"""DP-ICL from prefills shared across streams and questions (S4): `prefill_rows` with one
`HeadStore` + `decode_forked` against the shared decoder on full prompts, and the exact
teacher-forced log-probs.

G questions, each with k documents drawn from a pool of P (so questions share documents, as S4's
retrievals do) and S settings (S groups per question, as the epsilons of a stage): 1 + k streams
a group, laid out as DP-RAG lays them out (template start, document, end of the system turn, then
the question and the end of the prompt), the public stream with its own system turn; question q
has 2q more tokens than the first. Prompts are random token ids of realistic length (~100-token
documents), so no tokenizer and no weights are needed; EOS is blocked (every path takes NEW
steps).
    fast  = `dp_rag_generate`'s path: each distinct head (start + document) forwarded once for the
            whole call (the start itself once), each question's tail once per stream on copies of
            the heads' caches, every group decoded from copies of its rows (groups whose draws
            agree as one context);
    across = fast's prefills, then every question's groups decoded in one `decode_forked` call
            (their rows left-padded to one width: `stacked`): a candidate design for a GPU,
            where fast's one-question decodes are launch-bound; the pipeline does not use it;
    fair  = the shared decoder (`decode`, streams_per_group = 1 + k, the DP-ICL mix), the path a
            user gets from the library's decoder: every distinct full prompt prefilled once per
            chunk, one batched forward a step;
    exact = per group, one teacher-forced forward of every full prompt with fast's tokens
            (`dp_rag.forced_logprobs`), the DP-ICL mix applied per position: the naive reference.
Each path's time is the best of --runs samples of at least --min-seconds (`common.sampled`),
printed with their spread. Prints forward tokens, wall times and ratios; exits non-zero if fast
and across or fair draw different tokens (fp32) or their sampled tokens' log-probs differ from
fast's (before a group's first different token) or exact's by more than 1e-4 (fp32; 5e-2 in half
precision, where a draw may land on a neighbouring token).

Run: `.venv/bin/python benchmarks/bench_dp_icl_shared.py [--questions 4] [--documents 24]
[--pool 48] [--settings 2] [--new-tokens 6] [--device cuda] [--dtype bfloat16] [--runs 5]
[--min-seconds 1]`.
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

from privleak.batching import ForwardCounter  # noqa: E402
from privleak.decoding import decode  # noqa: E402
from privleak.dp_icl import dp_icl_utility  # noqa: E402
from privleak.dp_icl_decode import Forked, HeadStore, decode_forked, prefill_rows  # noqa: E402
from privleak.dp_rag import DPICLSettings, _mix, forced_logprobs  # noqa: E402

START, PUBLIC, MIDDLE, TAIL = 24, 18, 5, 12
"""Template tokens (SmolLM2's chat layout): before a document, the public system turn, between the
document and the question, after the question."""
SEED = 0


@torch.inference_mode()
def exact_logprobs(model, streams, tokens, setting: DPICLSettings, eos: int, pad: int):
    """[T] log-probs of `tokens` under the DP-ICL law, from one full forward of every stream."""
    logprobs = forced_logprobs(model, streams, tokens, pad)  # [1 + k, T, V]
    documents = logprobs[1:].transpose(0, 1)
    present = torch.ones(documents.shape[:2], dtype=torch.bool, device=documents.device)
    utility = dp_icl_utility(
        logprobs[0], documents, present, setting.alpha, setting.clip, setting.theta
    )
    mixed = setting.epsilon / setting.sensitivity * utility / (2 * setting.clip)
    mixed[:, eos] = float("-inf")
    mixed = torch.log_softmax(mixed, -1)
    return mixed.gather(-1, torch.tensor(tokens, device=mixed.device)[:, None])[:, 0].cpu()


def stacked(parts: list[Forked]) -> Forked:
    """The rows of several prefills as one `Forked`: each part left-padded with masked zero
    columns to the widest, so every row still ends at the last column."""
    width = max(part.mask.shape[1] for part in parts)

    def left(tensor: torch.Tensor, axis: int) -> torch.Tensor:
        shape = list(tensor.shape)
        shape[axis] = width - tensor.shape[axis]
        return torch.cat([tensor.new_zeros(shape), tensor], dim=axis)

    layers = range(len(parts[0].keys))
    return Forked(
        [torch.cat([left(part.keys[i], 2) for part in parts]) for i in layers],
        [torch.cat([left(part.values[i], 2) for part in parts]) for i in layers],
        torch.cat([left(part.mask, 1) for part in parts]),
        torch.cat([part.logits for part in parts]),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--questions", type=int, default=4, help="G")
    parser.add_argument("--documents", type=int, default=24, help="k documents per question")
    parser.add_argument("--pool", type=int, default=48, help="P documents the questions draw from")
    parser.add_argument("--settings", type=int, default=2, help="S groups per question")
    parser.add_argument("--new-tokens", type=int, default=6)
    parser.add_argument("--document-tokens", type=int, default=100)
    parser.add_argument("--question-tokens", type=int, default=30)
    parser.add_argument("--max-batch-streams", type=int, default=None)
    add_sampling_args(parser)
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    pad = eos if pad is None else pad
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    draw = lambda n: torch.randint(100, vocab, (n,), generator=generator).tolist()  # noqa: E731
    start, middle, tail = draw(START), draw(MIDDLE), draw(TAIL)
    public_head = draw(PUBLIC) + middle
    pool = [start + draw(args.document_tokens) + middle for _ in range(args.pool)]
    questions = []
    for q in range(args.questions):  # question q has 2q more tokens: prefills of unequal width
        asked = draw(args.question_tokens + 2 * q) + tail
        chosen = torch.randperm(args.pool, generator=generator)[: args.documents].tolist()
        questions.append([public_head + asked, *(pool[i] + asked for i in chosen)])
    settings = [
        DPICLSettings(epsilon=0.5 * 4**s, clip=0.5, theta=0.01) for s in range(args.settings)
    ]
    keys = [(q, s.key()) for q in range(args.questions) for s in settings]
    new, per_group = args.new_tokens, 1 + args.documents
    groups = len(keys)
    print(
        f"{describe(model, args)}: {args.questions} questions x {args.settings} settings x "
        f"{per_group} streams (1 public + {args.documents} of {args.pool} documents of "
        f"{args.document_tokens} tokens), question 0's prompts {len(questions[0][0])}/"
        f"{len(questions[0][1])} tokens (each next question 2 more), {new} new tokens, EOS "
        "blocked"
    )
    mix = _mix(settings * args.questions, [args.documents] * groups)
    options = {"seed": SEED, "max_new_tokens": new, "eos_token_id": eos, "min_new_tokens": new,
               "pad_id": pad, "max_batch_streams": args.max_batch_streams}  # fmt: skip

    def fair():
        prompts = [ids for question in questions for _ in settings for ids in question]
        return decode(model, prompts, streams_per_group=per_group, mix=mix, group_keys=keys,
                      **options)  # fmt: skip

    def fast(counter):
        tokens, sample = [], []
        store = HeadStore(model, start=start)
        for q, streams in enumerate(questions):
            forked = prefill_rows(model, streams, pad, counter, store=store)
            rows = [list(range(per_group))] * len(settings)
            part = slice(q * len(settings), (q + 1) * len(settings))
            decoded = decode_forked(model, forked, rows, _mix(settings, [args.documents] *
                                    len(settings)), keys=keys[part], counter=counter,
                                    **options)  # fmt: skip
            tokens.append(decoded.tokens)
            sample.append(decoded.sample_logprobs)
        return torch.cat(tokens), torch.cat(sample)

    def across(counter):
        store = HeadStore(model, start=start)
        parts = [prefill_rows(model, streams, pad, counter, store=store) for streams in questions]
        rows = [list(range(q * per_group, (q + 1) * per_group))
                for q in range(args.questions) for _ in settings]  # fmt: skip
        decoded = decode_forked(model, stacked(parts), rows, mix, keys=keys, counter=counter,
                                **options)  # fmt: skip
        return decoded.tokens, decoded.sample_logprobs

    best = sampler(args)

    fast(ForwardCounter())  # warm-up: allocator, kernels
    counter = ForwardCounter()
    fast_tokens, fast_sample = fast(counter)  # one call, counted
    _, fast_time = best(lambda: fast(ForwardCounter()))
    print(f"  fast (shared prefills): {fast_time}  forward tokens {counter.tokens:>9,}")
    across_counter = ForwardCounter()
    across_draws = across(across_counter)  # one call, counted
    _, across_time = best(lambda: across(ForwardCounter()))
    print(f"  across (one decode):    {across_time}  forward tokens {across_counter.tokens:>9,}; "
          f"across / fast: wall {across_time.best / fast_time.best:.2f}x")  # fmt: skip
    decoded, fair_time = best(fair)
    fair_count = decoded.prefill_counter.tokens + decoded.step_counter.tokens
    print(
        f"  fair (shared decoder):  {fair_time}  forward tokens {fair_count:>9,} "
        f"(prefill {decoded.prefill_counter.tokens:,}); fair / fast: wall "
        f"{fair_time.best / fast_time.best:.2f}x, tokens {fair_count / counter.tokens:.2f}x; "
        f"fair / across: wall {fair_time.best / across_time.best:.2f}x"
    )
    exact_tokens = sum(sum(len(s) + new for s in questions[q]) for q, _ in keys)

    def exact():
        rows = []
        for g, (q, _) in enumerate(keys):
            rows.append(exact_logprobs(model, questions[q], fast_tokens[g].tolist(),
                                       settings[g % len(settings)], eos, pad))  # fmt: skip
        return torch.stack(rows)

    reference, exact_time = best(exact)
    print(f"  exact (teacher-forced): {exact_time}  forward tokens {exact_tokens:>9,}")
    exact_precision = args.dtype == "float32"
    tolerance = 1e-4 if exact_precision else 5e-2  # half precision: rounding only
    exact_delta = float((fast_sample - reference).abs().max())
    ok = exact_delta <= tolerance
    print(f"  exact vs fast: max |Δ log-prob of the sampled token| {exact_delta:.2e} "
          f"(tolerance {tolerance:g})")  # fmt: skip
    others = {"across": across_draws, "fair": (decoded.tokens, decoded.sample_logprobs)}
    for name, (tokens, sample) in others.items():
        # In half precision the two paths' batch shapes round differently, so a draw may land on
        # a neighbouring token: the log-probs are compared over each group's tokens before its
        # first difference, where both paths saw the same text.
        differs = fast_tokens != tokens
        common = torch.where(differs.any(1), differs.int().argmax(1), differs.shape[1])
        before = torch.arange(differs.shape[1], device=differs.device)[None, :] < common[:, None]
        delta = float(torch.where(before, (fast_sample - sample).abs(), 0.0).max())
        groups = int(differs.any(1).sum())
        print(f"  {name} vs fast: {groups}/{len(differs)} groups drew other tokens"
              f"{'' if exact_precision else ' (allowed in half precision)'}; max |Δ log-prob of "
              f"the sampled token| before each group's first difference {delta:.2e}")  # fmt: skip
        ok &= delta <= tolerance and (groups == 0 or not exact_precision)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
