"""The tiny family's vocabulary head in training: Hugging Face's loss path against a chunked,
fused head that never holds the whole [tokens, vocab] logits.

The profile of train_family (benchmarks/README.md) puts a third to a half of a tiny member's
training step in the vocabulary head: the [B·T, V] logits, their log-softmax and its backward.
For hidden states h [N, H] (the final norm's output), the tied weight W [V, H] and next tokens y:
    ref   = HF's path: logits = h @ Wᵀ, cross-entropy of the shifted logits (mean over tokens),
            autograd's backward;
    fused = per chunk of C tokens: logits, their logsumexp, the loss and, at once, the gradient
            softmax − onehot(y) (over N) pushed through the matmul to dh and dW, so the chunk's
            logits stay in cache and no log-softmax or zero-filled gradient is ever written.
Prints the forward + backward wall time of each, the ratio, and the max |Δ| of the loss and both
gradients; exits non-zero if they differ by more than 1e-4. A measurement for choosing the next
change: the pipeline trains with `family.train_lm` (HF's path) today.

Run: `.venv/bin/python benchmarks/bench_vocab_head.py [--hidden 32] [--chunk 256] [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F

VOCAB, BATCH, BLOCK = 2048, 16, 256


def reference(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """HF's causal-LM loss over [B, T, H] hidden states: position t predicts ids[:, t + 1]."""
    logits = (hidden @ weight.T).float()
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def fused(hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor, chunk: int):
    """The same loss with its gradients computed chunk by chunk in the forward pass."""
    h = hidden[:, :-1].reshape(-1, hidden.shape[-1]).detach()
    y = ids[:, 1:].reshape(-1)
    n = len(y)
    loss = torch.zeros((), dtype=torch.float32)
    grad_h = torch.empty_like(h)
    grad_w = torch.zeros_like(weight)
    for start in range(0, n, chunk):
        h_c, y_c = h[start : start + chunk], y[start : start + chunk]
        logits = h_c @ weight.T
        lse = torch.logsumexp(logits, dim=-1)
        loss += (lse - logits.gather(1, y_c[:, None]).squeeze(1)).sum()
        probs = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
        probs[torch.arange(len(y_c)), y_c] -= 1.0
        probs /= n
        grad_h[start : start + chunk] = probs @ weight
        grad_w.addmm_(probs.T, h_c)
    return loss / n, grad_h, grad_w


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    hidden = torch.randn(BATCH, BLOCK, args.hidden, requires_grad=True)
    weight = (0.02 * torch.randn(VOCAB, args.hidden)).requires_grad_()
    ids = torch.randint(0, VOCAB, (BATCH, BLOCK))
    times = {"ref": [], "fused": []}
    for _ in range(args.repeats):
        hidden.grad = weight.grad = None
        started = time.perf_counter()
        ref_loss = reference(hidden, weight, ids)
        ref_loss.backward()
        times["ref"].append(time.perf_counter() - started)
        started = time.perf_counter()
        loss, grad_h, grad_w = fused(hidden, weight.detach(), ids, args.chunk)
        times["fused"].append(time.perf_counter() - started)
    delta = max(
        float((loss - ref_loss).abs()),
        float((grad_h - hidden.grad[:, :-1].reshape(grad_h.shape)).abs().max()),
        float((grad_w - weight.grad).abs().max()),
    )
    best = {name: min(values) for name, values in times.items()}
    tokens = BATCH * (BLOCK - 1)
    print(f"vocab head, {tokens} tokens x V {VOCAB} x H {args.hidden}, chunk {args.chunk}, "
          f"{torch.get_num_threads()} threads, best of {args.repeats}")  # fmt: skip
    for name in ("ref", "fused"):
        spread = max(times[name]) - best[name]
        print(f"{name:6s} {1000 * best[name]:8.1f} ms (spread {1000 * spread:.1f})  "
              f"x{best[name] / best['fused']:.2f} of fused")  # fmt: skip
    print(f"max |Δ| (loss, dh, dW): {delta:.2e}")
    return 0 if delta < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
