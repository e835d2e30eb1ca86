"""Splitting a DP budget over tokens (`privleak.accounting.per_step_epsilon`): pure-DP steps
composed one repetition at a time (sparse) against dp_accounting's `self_compose` (dense).

The settings are the pipeline's: DP-ICL's response epsilon split over the frontier's 16 attack
tokens (`frontier_generate`, epsilon 100, 250, 1,000) and DP-RAG's split after its 0.5 retrieval
step (`s4_generate`, epsilon 5 and 20 over 4 tokens; 20 over 64); and epsilon 20 over 64 steps
alone, where composition gives each step more than 20/64 and the reference check bites.
    fast      = `per_step_epsilon` as the pipeline runs it (k-fold composition kept sparse: k + 1
                loss points);
    fair      = the same bisection on `PrivacyLossDistribution.self_compose`, what a user of
                dp_accounting writes (a dense loss grid over the whole range);
    reference = the optimal composition theorem (Kairouz et al. 2015) in closed form: the delta of
                the k-fold composition at the epsilon fast composes to, which must not exceed the
                stated delta (checked; the bisection itself is the same in both paths).
Prints, per setting, the per-step epsilon of each path, wall times, the ratio and max |Δ|; exits
non-zero if the two per-step epsilons differ by more than the bisection's tolerance (1e-4) or the
reference delta exceeds the stated one.

Run: `.venv/bin/python benchmarks/bench_composition.py`.
"""

from __future__ import annotations

import math
import sys
import time

from privleak import accounting

SETTINGS = [  # (total epsilon, delta, tokens, fixed steps)
    (100.0, 1e-3, 16, ()),
    (250.0, 1e-3, 16, ()),
    (1000.0, 1e-3, 16, ()),
    (20.0, 1e-5, 64, ()),  # composition below the sum of the steps: the reference delta > 0
    (5.0, 1e-3, 4, ((0.5, 1),)),
    (20.0, 1e-3, 4, ((0.5, 1),)),
    (20.0, 1e-3, 64, ((0.5, 1),)),
]
TOLERANCE = 1e-4


def optimal_delta(epsilon: float, count: int, target: float) -> float:
    """delta(target) of `count` epsilon-DP steps composed (Kairouz et al. 2015, Thm 3.3)."""
    log_scale = count * (epsilon + math.log1p(math.exp(-epsilon)))  # log (1 + e^eps)^count
    return sum(
        math.exp(math.log(math.comb(count, i)) + epsilon * (count - i) - log_scale)
        * max(0.0, 1 - math.exp(min(0.0, target - epsilon * (count - 2 * i))))
        for i in range(count + 1)
    )  # fmt: skip


def timed_split(total: float, delta: float, tokens: int, fixed, sparse_up_to: int):
    accounting.SPARSE_COMPOSITIONS = sparse_up_to
    start = time.perf_counter()
    step = accounting.per_step_epsilon(total, delta, tokens, fixed=fixed)
    return step, time.perf_counter() - start


def main() -> int:
    sparse = accounting.SPARSE_COMPOSITIONS
    failed = False
    print(
        "| epsilon | delta | tokens | fixed | fast s | fair s | fair/fast | per-step epsilon "
        "| max abs diff | optimal delta at fast's composition |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    totals = [0.0, 0.0]
    for total, delta, tokens, fixed in SETTINGS:
        fast, fast_s = timed_split(total, delta, tokens, fixed, sparse)
        fair, fair_s = timed_split(total, delta, tokens, fixed, 0)
        accounting.SPARSE_COMPOSITIONS = sparse
        totals[0] += fast_s
        totals[1] += fair_s
        reference = "" if fixed else f"{optimal_delta(fast, tokens, total):.3g}"
        failed |= abs(fast - fair) > TOLERANCE or (not fixed and float(reference) > delta)
        print(
            f"| {total:g} | {delta:g} | {tokens} | {list(fixed)} | {fast_s:.3f} | {fair_s:.3f} "
            f"| {fair_s / fast_s:.0f}x | {fast:.6f} | {abs(fast - fair):.1e} | {reference} |"
        )
    print(f"| all | | | | {totals[0]:.3f} | {totals[1]:.3f} | {totals[1] / totals[0]:.0f}x | | | |")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
