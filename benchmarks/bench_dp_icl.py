"""DP-ICL generation (S4, DP-RAG): the library's decoder against a per-stream loop and re-encoding.

G questions, each with k retrieved documents: k + 1 streams per question (the public stream is the
question alone, then one stream per document: template head + document + question + tail), NEW
tokens each with EOS blocked throughout (min_new_tokens = NEW, so every path takes NEW steps).
Prompts are random token ids of realistic length (~100-token documents), so no tokenizer and no
weights are needed.
    fast  = the shared decoder: `decode` with streams_per_group = 1 + k and the DP-ICL mix,
            every stream of a chunk in one cached batch, one forward per step (S4's own
            shared-prefix path is `bench_dp_icl_shared`);
    fair  = what a user would write first: per question, k + 1 separate cached batch-1 forwards
            a step (each stream its own past_key_values), `dp_icl_utility` mixed into logits
            eps * U / (2 * sensitivity * C), then a draw with the same uniforms as fast (tokens
            compared); fast's tokens are fed back, so both paths score one response;
    naive = the official approach, for question 0 only: every step re-encodes all k + 1 full
            prefixes from scratch without a cache (fast's tokens replayed).
`dp_icl_forced_logprobs` (one teacher-forced forward per stream) is the exact reference for every
question. Prints forward tokens, wall times and ratios (naive per question); exits non-zero if a
reference and fast disagree by more than 1e-4 (fp32) in the sampled tokens' log-probs.

Run: `.venv/bin/python benchmarks/bench_dp_icl.py [--questions 4] [--documents 8]
[--new-tokens 16] [--device cuda] [--dtype bfloat16]`.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # other processes may share the cores

import torch  # noqa: E402
from common import add_model_args, describe, load_model, timed  # noqa: E402

from privleak.batching import ForwardCounter  # noqa: E402
from privleak.decoding import decode, group_uniforms, sample_inverse_cdf  # noqa: E402
from privleak.dp_icl import dp_icl_utility  # noqa: E402
from privleak.dp_rag import DPICLSettings, dp_icl_forced_logprobs  # noqa: E402
from privleak.models import real_logits  # noqa: E402

HEAD, TAIL = 16, 8
"""Chat-template tokens before the document/question and after the question (SmolLM2-like)."""
SEED = 0


def question_streams(draw, head, tail, documents: int, document: int, question: int):
    """[1 + k] token lists of one question: the public stream, then one per document."""
    asked = draw(question)
    return [head + asked + tail] + [head + draw(document) + asked + tail for _ in range(documents)]


def mixed_logprobs(model, logits, settings: DPICLSettings, eos: int) -> torch.Tensor:
    """[V] the DP-ICL sampling log-probs of one question from its streams' last logits
    [1 + k, V] (public first), EOS blocked."""
    stream = torch.log_softmax(real_logits(model, logits.float()), -1)
    present = torch.ones(1, len(stream) - 1, dtype=torch.bool, device=stream.device)
    utility = dp_icl_utility(
        stream[None, 0], stream[None, 1:], present, settings.alpha, settings.clip, settings.theta
    )[0]
    mixed = settings.epsilon / settings.sensitivity * utility / (2 * settings.clip)
    mixed[eos] = float("-inf")
    return torch.log_softmax(mixed, -1)


@torch.inference_mode()
def fair_dp_icl(model, questions, tokens, uniforms, settings, eos, counter):
    """Per question, each stream its own cache and batch-1 forward a step; returns ([G, T]
    log-probs of fast's tokens, [G, T] whether the same uniform drew fast's token)."""
    device = model.device
    scores = torch.zeros(tokens.shape, device=device)
    agree = torch.zeros(tokens.shape, dtype=torch.bool, device=device)
    for q, streams in enumerate(questions):
        caches, logits = [], []
        for ids in streams:
            out = model(
                input_ids=torch.tensor([ids], device=device), use_cache=True, logits_to_keep=1
            )
            counter.add(1, len(ids))
            caches.append(out.past_key_values)
            logits.append(out.logits[0, -1])
        for step in range(tokens.shape[1]):
            logprobs = mixed_logprobs(model, torch.stack(logits), settings, eos)
            token = tokens[q, step]
            drawn = sample_inverse_cdf(logprobs[None], uniforms[q, step, None])[0]
            scores[q, step], agree[q, step] = logprobs[token], drawn == token
            if step == tokens.shape[1] - 1:
                break
            for s, cache in enumerate(caches):
                out = model(input_ids=token.view(1, 1), past_key_values=cache, use_cache=True)
                counter.add(1, 1)
                caches[s], logits[s] = out.past_key_values, out.logits[0, -1]
    return scores, agree


@torch.inference_mode()
def naive_dp_icl(model, streams, tokens, settings, eos, counter):
    """Official-style loop for one question: each step forwards every full prefix from scratch;
    returns [T] log-probs of `tokens`."""
    scores = []
    for step, token in enumerate(tokens):
        logits = []
        for ids in streams:  # unpadded, one at a time
            row = ids + tokens[:step]
            counter.add(1, len(row))
            out = model(input_ids=torch.tensor([row], device=model.device), logits_to_keep=1)
            logits.append(out.logits[0, -1])
        scores.append(float(mixed_logprobs(model, torch.stack(logits), settings, eos)[token]))
    return torch.tensor(scores)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser, default_model="smollm2-135m-shape")
    parser.add_argument("--questions", type=int, default=4, help="G")
    parser.add_argument("--documents", type=int, default=8, help="k retrieved per question")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--document-tokens", type=int, default=100)
    parser.add_argument("--question-tokens", type=int, default=24)
    parser.add_argument("--token-epsilon", type=float, default=0.5, help="DP-ICL epsilon a token")
    args = parser.parse_args()

    model, eos, pad = load_model(args)
    pad = eos if pad is None else pad
    vocab = getattr(model, "privleak_real_vocab", model.config.vocab_size)
    generator = torch.Generator().manual_seed(SEED)
    draw = lambda n: torch.randint(100, vocab, (n,), generator=generator).tolist()  # noqa: E731
    head, tail = draw(HEAD), draw(TAIL)  # one template, as in a stage
    questions = [
        question_streams(
            draw, head, tail, args.documents, args.document_tokens, args.question_tokens
        )
        for _ in range(args.questions)
    ]
    settings = DPICLSettings(epsilon=args.token_epsilon, alpha=1.0, clip=0.5, theta=1.0)
    keys = [(q, settings.key()) for q in range(args.questions)]
    new, streams = args.new_tokens, 1 + args.documents
    print(
        f"{describe(model, args)}: {args.questions} questions x {streams} streams "
        f"(1 public + {args.documents} documents of {args.document_tokens} tokens), prompts "
        f"{len(questions[0][0])}/{len(questions[0][1])} tokens, {new} new tokens, EOS blocked"
    )

    def fast(steps=new, members=questions):
        return decode(
            model,
            [ids for question in members for ids in question],
            max_new_tokens=steps,
            streams_per_group=streams,
            mix=settings.mix(args.documents),
            seed=SEED,
            group_keys=keys[: len(members)],
            eos_token_id=eos,
            min_new_tokens=steps,
            pad_id=pad,
        )

    fast(2, questions[:1])  # warm-up: allocator, kernels
    decoded, fast_wall = timed(fast, args.device)
    fast_tokens = decoded.prefill_counter.tokens + decoded.step_counter.tokens
    print(
        f"  fast (decode, one batch):   {fast_wall:8.2f} s  forward tokens {fast_tokens:>7,} "
        f"(prefill {decoded.prefill_counter.tokens:,}, steps {decoded.step_counter.tokens:,})"
    )

    uniforms = group_uniforms(SEED, keys, new).to(model.device)
    tokens = decoded.tokens.to(model.device)
    fair_counter = ForwardCounter()
    (fair, agree), fair_wall = timed(
        lambda: fair_dp_icl(model, questions, tokens, uniforms, settings, eos, fair_counter),
        args.device,
    )
    print(
        f"  fair (per-stream caches):   {fair_wall:8.2f} s  forward tokens "
        f"{fair_counter.tokens:>7,}; fair / fast: wall {fair_wall / fast_wall:.1f}x, tokens "
        f"{fair_counter.tokens / fast_tokens:.2f}x, forwards {fair_counter.calls:,} / "
        f"{decoded.prefill_counter.calls + decoded.step_counter.calls}"
    )

    naive_counter = ForwardCounter()
    naive, naive_wall = timed(
        lambda: naive_dp_icl(
            model, questions[0], decoded.tokens[0].tolist(), settings, eos, naive_counter
        ),
        args.device,
    )
    share = 1 / args.questions  # fast's cost per question
    print(
        f"  naive (question 0, no cache): {naive_wall:6.2f} s  forward tokens "
        f"{naive_counter.tokens:>7,}; naive / fast per question: wall "
        f"{naive_wall / (share * fast_wall):.1f}x, tokens "
        f"{naive_counter.tokens / (share * fast_tokens):.1f}x"
    )

    forced = torch.stack(
        [
            dp_icl_forced_logprobs(
                model,
                question,
                decoded.tokens[q].tolist(),
                [settings],
                pad_id=pad,
                eos_token_id=eos,
                blocked_steps=new,
            )[0]
            for q, question in enumerate(questions)
        ]
    )
    sample = decoded.sample_logprobs
    deltas = {
        "fair": float((fair.cpu() - sample).abs().max()),
        "naive": float((naive - sample[0]).abs().max()),
        "forced": float((forced - sample).abs().max()),
    }
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2  # half precision: rounding only
    print(
        "  max |Δ log-prob of the sampled token| vs fast: "
        + ", ".join(f"{name} {delta:.2e}" for name, delta in deltas.items())
        + f" (tolerance {tolerance:g}); fair drew fast's token at "
        f"{int(agree.sum())}/{agree.numel()} steps with the same uniforms"
    )
    return 0 if max(deltas.values()) <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
