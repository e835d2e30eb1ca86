"""Shared benchmark plumbing: model choice (weights or a random-init real shape), device, dtype,
and wall-clock timing that waits for the device: one call (`timed`), or a path's best and spread
over several samples of at least a minimum length each (`sampled`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from privleak import models


def add_model_args(parser: argparse.ArgumentParser, default_model: str = models.SMOLLM2) -> None:
    parser.add_argument(
        "--model",
        default=default_model,
        help="embedded name, HF folder, or a random-init shape: " + ", ".join(models.SHAPES),
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--dtype", default="float32", choices=sorted(models.DTYPES))


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    """--runs and --min-seconds for `sampled` (defaults: 5 runs of at least 1 s each)."""
    parser.add_argument("--runs", type=int, default=5, help="timed samples of each path (best)")
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=1.0,
        help="each sample repeats the path's call until it has lasted this long (0: one call)",
    )


def load_model(args: argparse.Namespace):
    """(model, eos_id, pad_id) for --model/--device/--dtype."""
    if args.model in models.SHAPES:
        model = models.random_model(args.model, device=args.device, dtype=args.dtype)
        return model, model.config.eos_token_id, model.config.pad_token_id
    model, tokenizer = models.load(args.model, device=args.device, dtype=args.dtype)
    return model, tokenizer.eos_token_id, tokenizer.pad_token_id


def describe(model, args: argparse.Namespace) -> str:
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else (f"CPU, {torch.get_num_threads()} threads")
    )
    return f"{args.model} ({model.num_parameters() / 1e6:.0f}M) {args.dtype} on {where}"


def timed(fn, device: str):
    """(result, seconds) of fn(), waiting for queued device work before and after."""
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return result, time.perf_counter() - start


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one path: the fastest and slowest of `runs` samples, each the mean
    of the back-to-back calls it took to last at least the minimum; `calls` in all samples."""

    best: float
    worst: float
    runs: int
    calls: int

    @property
    def spread(self) -> float:
        """(worst - best) / best: how far the samples stray from the best."""
        return (self.worst - self.best) / self.best if self.best > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{self.best:8.3f} s (best of {self.runs} samples, {self.calls} calls, "
            f"spread {self.spread:.1%})"
        )


def sampled(
    fn: Callable[[], object],
    device: str,
    *,
    runs: int = 5,
    min_seconds: float = 1.0,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[object, Timing]:
    """(result of the first call, Timing of fn). The first call does not count: it may compile
    or allocate. Then `runs` samples, each calling fn back to back until it has lasted at least
    `min_seconds` (at least one call; the device waited for after each), give the best and
    worst seconds per call."""
    if runs < 1:
        raise SystemExit(f"--runs must be >= 1, got {runs}")
    if min_seconds < 0:
        raise SystemExit(f"--min-seconds must be >= 0, got {min_seconds}")
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    result = fn()
    sync()
    per_call, total = [], 0
    for _ in range(runs):
        calls, start = 0, clock()
        while True:
            fn()
            sync()
            calls += 1
            elapsed = clock() - start
            if elapsed >= min_seconds:
                break
        per_call.append(elapsed / calls)
        total += calls
    return result, Timing(min(per_call), max(per_call), runs, total)


def sampler(args: argparse.Namespace) -> Callable[[Callable[[], object]], tuple[object, Timing]]:
    """`sampled` with the --device, --runs and --min-seconds of args."""
    return partial(sampled, device=args.device, runs=args.runs, min_seconds=args.min_seconds)
