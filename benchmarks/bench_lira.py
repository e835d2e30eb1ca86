"""Scoring LiRa samples under a target and two reference models: prompt shared by its samples vs
a naive per-sample loop vs one batched forward over prompt + sample rows (default: SmolLM2-135M).

Workload: PROMPTS dialog contexts of PROMPT_LEN tokens, SAMPLES sampled continuations each, of
ragged lengths 1..MAX_NEW (samples stop at EOS). Each path scores every sample under all three
models (a random-init shape gives three seeds; named weights are scored three times):
- naive: one unpadded forward of prompt + sample per sample, full-vocabulary logits;
- fair baseline: `privleak.scoring.continuation_logprobs`, rows batched by length;
- shared prompt: `privleak.lira_sampling.grouped_continuation_logprobs`, each prompt forwarded
  once and its cache shared by its samples (`privleak.scoring.shared_prefix_logprobs`).

Then the leak check that follows the scoring (s3_attack: does policy F_j flag a word of a
sample?) on --policy-texts generated-like texts: a run of 30-40 words cut at random from each of
as many synthetic dialogs of the private domains (speaker labels and line breaks kept, as in
sampled continuations). The policy is the embedded profile's classifier (params.yaml
s3.embedded.classifier: `SequenceClassifierPolicy` over 16-word windows, stride 1, flagging at
0.96), fine-tuned quickly from --classifier-base (1 epoch, at most --policy-max-windows windows
a class, on --policy-fit dialogs of the private domains and half as many public ones); it
classifies --policy-batch-size windows a forward:
- fast: one `flags_by_domain` call over all texts (every distinct window of every text batched);
- naive: one `flags_by_domain` call per text;
- old: the MiniLM-embedding + logistic-regression `ClassifierPolicy` the embedded profile used
  before (`load_embedder("all-minilm-l6-v2")`, 2-word windows, stride 1, threshold 0.8) fitted
  on the same dialogs, one call over all texts: a different policy, so time per text only.

Prints one table: the work forwarded (LiRa: tokens; policies: windows classified), wall time,
time per item (a sample; a text), naive / this in work and in wall time, fair / this in wall
time, and max |Δ| against naive (LiRa: log-probs; policy: `word_probabilities`, each word's
class probabilities, recorded during the timed calls). Exits non-zero if either |Δ| exceeds
1e-4 in fp32 (5e-2 for the LiRa rows in half precision; the policy always runs in fp32).

Run: `make bench` or `.venv/bin/python benchmarks/bench_lira.py [--model smollm2-135m-shape]
[--device cuda] [--dtype bfloat16] [--policy-texts 400]` (the default model needs data/models).
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import torch
from common import add_model_args, describe, load_model, timed
from transformers.utils import logging as hf_logging

from privleak import models
from privleak.batching import ForwardCounter
from privleak.classifier_policies import ClassifierPolicy, SequenceClassifierPolicy, sentence_embed
from privleak.data.synthetic import generate
from privleak.lira_sampling import grouped_continuation_logprobs
from privleak.models import real_logits
from privleak.pipeline import params
from privleak.pipeline.paths import ROOT
from privleak.policies import word_spans
from privleak.scoring import continuation_logprobs

hf_logging.set_verbosity_error()  # no load reports (the classifier's new head) or progress bars
hf_logging.disable_progress_bar()

MODELS = ("target", "reference without MEDIA", "reference without INSURANCE")
TEXT_WORDS = (30, 40)  # words of a generated-like text
OLD = {"window": 2, "stride": 1, "threshold": 0.8}  # the embedded MiniLM policy before


@torch.inference_mode()
def naive(model, prompts, continuations, counter):
    scores = []
    for prompt, continuation in zip(prompts, continuations, strict=True):
        ids = torch.tensor([prompt + continuation], device=model.device)
        counter.add(*ids.shape)
        logits = real_logits(model, model(input_ids=ids).logits[0].float())
        logprobs = torch.log_softmax(logits, dim=-1)
        positions = torch.arange(len(continuation)) + len(prompt) - 1
        scores.append(logprobs[positions, torch.tensor(continuation)].cpu())
    return scores


def three_models(args):
    """The target and two references: three random inits of a shape, else one model thrice."""
    if args.model in models.SHAPES:
        return [
            models.random_model(args.model, device=args.device, dtype=args.dtype, seed=seed)
            for seed in range(len(MODELS))
        ]
    model, _, _ = load_model(args)
    return [model] * len(MODELS)


def dialogs(n: int, seed: int, domains: list[str]) -> tuple[list[str], list[str]]:
    """(texts, domains) of n synthetic dialogs (s3's corpus generator)."""
    records, _ = generate("dialogs", n, seed, {"domains": domains, "turns": [4, 6]})
    return [str(r["text"]) for r in records], [str(r["domain"]) for r in records]


def generated_like(sources: list[str], seed: int) -> list[str]:
    """One run of TEXT_WORDS words cut at random from each source text (a verbatim slice)."""
    rng = random.Random(seed)
    texts = []
    for text in sources:
        spans = word_spans(text)
        words = min(rng.randint(*TEXT_WORDS), len(spans))
        start = rng.randint(0, len(spans) - words)
        texts.append(text[spans[start][0] : spans[start + words - 1][1]])
    return texts


def policy_rows(args) -> tuple[str, list, float]:
    """(description, table rows, max |Δ| of fast vs naive word probabilities) of the policy
    section; each row (path, work, unit, wall, items, naive work, naive wall, fair wall, Δ)."""
    settings = params.lookup(params.load(), "s3.embedded")
    classifier = settings["classifier"]
    private = list(settings["private_domains"])
    public_domains = list(classifier["public"]["options"]["domains"])
    fit_texts, fit_domains = dialogs(args.policy_fit, 0, private)
    public, _ = dialogs(max(args.policy_fit // 2, 1), 1, public_domains)
    texts = generated_like(dialogs(args.policy_texts, 2, private)[0], 3)

    policy, fit_wall = timed(
        lambda: SequenceClassifierPolicy.fit(
            fit_texts,
            fit_domains,
            args.classifier_base,
            public=public,
            window=classifier["window"],
            stride=classifier["stride"],
            threshold=classifier["threshold"],
            epochs=1,
            batch_size=classifier["fine_tune"]["batch_size"],
            learning_rate=classifier["fine_tune"]["learning_rate"],
            seed=0,
            device=args.device,
            max_windows=args.policy_max_windows,
        ),
        args.device,
    )
    policy.batch_size = args.policy_batch_size
    seen = {"windows": 0, "tokens": 0}

    def count(module, _, kwargs):
        seen["windows"] += int(kwargs["input_ids"].shape[0])
        seen["tokens"] += int(kwargs["attention_mask"].sum())

    policy.model.register_forward_pre_hook(count, with_kwargs=True)
    recorded: list[np.ndarray] = []
    word_probabilities = policy.word_probabilities

    def recording(batch):  # flags_by_domain's probabilities, kept for |Δ|
        out = word_probabilities(batch)
        recorded.extend(out)
        return out

    policy.word_probabilities = recording
    policy.flags_by_domain(texts[:2])  # warm-up: allocator, kernels

    def run(calls):
        seen.update(windows=0, tokens=0)
        recorded.clear()
        flags, wall = timed(lambda: [policy.flags_by_domain(batch) for batch in calls], args.device)
        merged = {d: [row for out in flags for row in out[d]] for d in policy.domains}
        return dict(seen), wall, list(recorded), merged

    fast_seen, fast_wall, fast_p, fast_flags = run([texts])
    naive_seen, naive_wall, naive_p, naive_flags = run([[text] for text in texts])
    gap = max(float(np.abs(a - b).max(initial=0.0)) for a, b in zip(fast_p, naive_p, strict=True))
    differing = sum(
        a != b
        for d in policy.domains
        for x, y in zip(fast_flags[d], naive_flags[d], strict=True)
        for a, b in zip(x, y, strict=True)
    )
    rows = [
        ("flags: naive, one call a text", naive_seen, naive_wall, 0.0),
        ("flags: fast, one call", fast_seen, fast_wall, gap),
    ]
    rows = [
        (path, s["windows"], "win", wall, len(texts), naive_seen["windows"], naive_wall, None, d)
        for path, s, wall, d in rows
    ]
    old_note = ""
    if not args.skip_old_policy:
        embed = sentence_embed(models.load_embedder(args.old_embedder, device=args.device))
        embedded = [0]

        def counting(batch):
            embedded[0] += len(batch)
            return embed(batch)

        old, old_fit = timed(
            lambda: ClassifierPolicy.fit(fit_texts, fit_domains, counting, public=public, **OLD),
            args.device,
        )
        old.flags_by_domain(texts[:2])  # warm-up
        embedded[0] = 0
        _, old_wall = timed(lambda: old.flags_by_domain(texts), args.device)
        rows.append(("old: MiniLM + LR, one call", embedded[0], "win", old_wall, len(texts)))
        old_note = f"; old fit {old_fit:.1f} s"
    tokens = fast_seen["tokens"] / max(fast_seen["windows"], 1)
    description = (
        f"policy flags: {len(texts)} texts of {TEXT_WORDS[0]}-{TEXT_WORDS[1]} words, "
        f"{args.classifier_base} sequence classifier ({policy.model.num_parameters() / 1e6:.2f}M, "
        f"{classifier['window']}-word windows stride {classifier['stride']}, {tokens:.1f} tokens "
        f"a window, batch {policy.batch_size}, fit {fit_wall:.1f} s on {len(policy.classes)} "
        f"classes{old_note}); {differing} word flags differ between fast and naive"
    )
    return description, rows, gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(parser)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--max-new", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--policy-texts", type=int, default=400, help="generated-like texts flagged (0: skip)"
    )
    parser.add_argument("--policy-fit", type=int, default=40, help="private dialogs to fit on")
    parser.add_argument("--policy-max-windows", type=int, default=200, help="a class, to fit")
    parser.add_argument("--policy-batch-size", type=int, default=64, help="windows a forward")
    parser.add_argument(
        "--classifier-base",
        default=None,
        help="folder or hub id the sequence classifier is fine-tuned from (default: params.yaml "
        "s3.embedded.classifier.model)",
    )
    parser.add_argument("--old-embedder", default=models.MINILM, help="the old policy's embedder")
    parser.add_argument("--skip-old-policy", action="store_true", help="no MiniLM row")
    args = parser.parse_args()
    if args.classifier_base is None:
        base = params.lookup(params.load(), "s3.embedded.classifier.model")
        local = ROOT / base  # a project folder, whatever the working directory
        args.classifier_base = str(local) if local.is_dir() else base

    torch.manual_seed(0)
    lms = three_models(args)
    vocab = getattr(lms[0], "privleak_real_vocab", lms[0].config.vocab_size)
    contexts = [torch.randint(100, vocab, (args.prompt_len,)).tolist() for _ in range(args.prompts)]
    prompts = [context for context in contexts for _ in range(args.samples)]
    lengths = torch.randint(1, args.max_new + 1, (len(prompts),)).tolist()
    conts = [torch.randint(100, vocab, (n,)).tolist() for n in lengths]

    def score_all(fn):
        counter = ForwardCounter()
        scores, wall = timed(lambda: [fn(lm, counter) for lm in lms], args.device)
        return counter.tokens, wall, scores

    paths = {
        "lira: naive per-sample loop": lambda lm, c: naive(lm, prompts, conts, c),
        "lira: fair, batched rows": lambda lm, c: continuation_logprobs(
            lm, prompts, conts, batch_size=args.batch_size, counter=c
        ),
        "lira: fast, shared prompt": lambda lm, c: grouped_continuation_logprobs(
            lm, prompts, conts, batch_size=args.batch_size, counter=c
        ),
    }
    results = {name: score_all(fn) for name, fn in paths.items()}
    naive_tokens, naive_wall, reference = results["lira: naive per-sample loop"]
    fair_tokens, fair_wall, _ = results["lira: fair, batched rows"]

    print(
        f"{describe(lms[0], args)}: {len(MODELS)} models x {args.prompts} prompts of "
        f"{args.prompt_len} tokens x {args.samples} samples of 1..{args.max_new} tokens "
        f"({sum(lengths)} sample tokens), batch {args.batch_size}"
    )
    rows, worst = [], 0.0
    for name, (tokens, wall, scores) in results.items():
        gap = max(
            float((a - b).abs().max())
            for got, expected in zip(scores, reference, strict=True)
            for a, b in zip(got, expected, strict=True)
        )
        worst = max(worst, gap)
        rows.append(
            (name, tokens, "tok", wall, len(prompts), naive_tokens, naive_wall, fair_wall, gap)
        )
    policy_gap = 0.0
    if args.policy_texts > 0:
        description, more, policy_gap = policy_rows(args)
        print(description)
        rows += more

    print(
        f"{'path':<31}{'work':>12}{'wall s':>9}{'ms/item':>9}{'work /naive':>13}"
        f"{'wall /naive':>13}{'wall /fair':>12}{'max|Δ|':>10}"
    )
    for name, work, unit, wall, items, *against in rows:
        ratios = ["-"] * 3
        if against:
            ratios[:2] = [f"{against[0] / work:.2f}", f"{against[1] / wall:.2f}"]
            ratios[2] = "-" if against[2] is None else f"{against[2] / wall:.2f}"
        gap = f"{against[3]:.1e}" if against else "-"
        print(
            f"{name:<31}{f'{work:,} {unit}':>12}{wall:>9.2f}{1000 * wall / items:>9.2f}"
            f"{ratios[0]:>13}{ratios[1]:>13}{ratios[2]:>12}{gap:>10}"
        )
    tolerance = 1e-4 if args.dtype == "float32" else 5e-2  # half precision: rounding only
    if worst > tolerance:
        raise SystemExit(f"paths disagree: max |Δ log-prob| = {worst:.2e} > {tolerance:g}")
    if policy_gap > 1e-4:
        raise SystemExit(f"policy paths disagree: max |Δ probability| = {policy_gap:.2e} > 1e-4")


if __name__ == "__main__":
    main()
