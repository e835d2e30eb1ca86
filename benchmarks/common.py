"""Shared benchmark plumbing: model choice (weights or a random-init real shape), device, dtype,
and wall-clock timing that waits for the device."""

from __future__ import annotations

import argparse
import time

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
