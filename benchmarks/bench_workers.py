"""Tiny-model jobs on worker processes (`privleak.pipeline.workers`), as s3_train, s3_attack and
mia_score run them, against the loop a user would write.

J independent fine-tunes of a random-init Llama of the family's h64 shape (vocab 2048, 2 layers)
on D random documents of T tokens each (no tokenizer, no weights), every other one with DP-AdamW
(Opacus, ε 8) as S3's targets mix them:
    fast = `run_jobs(workers=2)`: two spawned processes, one intra-op thread each;
    fair = the plain loop in one process with torch's default threads (every core);
    ref  = the same loop on one thread (`run_jobs(workers=1)`), the path every job takes inside a
           worker.
Prints training tokens, wall times and ratios, and the max |Δ| of the final weights against ref;
exits non-zero if fast differs from ref at all (a job's numbers must not depend on workers).

Run: `.venv/bin/python benchmarks/bench_workers.py [--jobs 8] [--docs 160] [--tokens 256]`.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from privleak.pipeline.workers import run_jobs
from privleak.training.finetune import finetune_causal_lm
from privleak.training.private import dp_finetune_causal_lm

SHAPE = dict(vocab_size=2048, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
             pad_token_id=0)  # fmt: skip


def fine_tune(job: dict) -> dict[str, torch.Tensor]:
    """One job: a seeded random model fine-tuned for one epoch on its seeded documents, with
    DP-AdamW for an odd seed, else AdamW."""
    torch.manual_seed(job["seed"])
    model = LlamaForCausalLM(LlamaConfig(**SHAPE))
    generator = torch.Generator().manual_seed(job["seed"])
    docs = torch.randint(1, SHAPE["vocab_size"], (job["docs"], job["tokens"]), generator=generator)
    settings = dict(epochs=1, batch_size=8, seq_len=job["tokens"], learning_rate=3e-3, pad_id=0,
                    seed=job["seed"])  # fmt: skip
    if job["seed"] % 2:
        dp_finetune_causal_lm(model, docs.tolist(), target_epsilon=8.0, delta=1e-5,
                              max_grad_norm=1.0, **settings)  # fmt: skip
    else:
        finetune_causal_lm(model, docs.tolist(), **settings)
    return model.state_dict()


def serial(jobs: list[dict]) -> list[dict[str, torch.Tensor]]:
    return [fine_tune(job) for job in jobs]


def max_delta(a: list[dict], b: list[dict]) -> float:
    return max(float((x[k] - y[k]).abs().max()) for x, y in zip(a, b, strict=True) for k in x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--docs", type=int, default=160)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    jobs = [{"seed": s, "docs": args.docs, "tokens": args.tokens} for s in range(args.jobs)]
    tokens = args.jobs * args.docs * args.tokens
    print(f"{args.jobs} fine-tunes of the h64 shape, {tokens:,} training tokens in all; "
          f"{torch.get_num_threads()} threads by default")  # fmt: skip
    timings, results = {}, {}
    for name, run in (
        ("ref", lambda: run_jobs(fine_tune, jobs, workers=1)),
        ("fair", lambda: serial(jobs)),
        ("fast", lambda: run_jobs(fine_tune, jobs, workers=2)),
    ):
        started = time.perf_counter()
        results[name] = run()
        timings[name] = time.perf_counter() - started
    for name in ("ref", "fair", "fast"):
        print(f"{name:5s} {timings[name]:8.2f} s  {tokens / timings[name]:9.0f} tokens/s  "
              f"x{timings[name] / timings['fast']:.2f} of fast  "
              f"max|Δ| vs ref {max_delta(results[name], results['ref']):.2e}")  # fmt: skip
    return 0 if max_delta(results["fast"], results["ref"]) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
