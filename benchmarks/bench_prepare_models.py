"""prepare_models (the embedded SmolLM2 from its GGUF): the conversion inside
`gguf_reads.read_once` against the same conversion without it.

    fast = `models.prepare_smollm2` inside `gguf_reads.read_once`, as the prepare_models stage runs
           it: `gguf`'s reader and tensor-name map memoized (the file's metadata parsed once);
    fair = `models.prepare_smollm2` alone: transformers' AutoTokenizer and AutoModelForCausalLM
           `from_pretrained(gguf_file=...)`, then `save_pretrained`, as a user would write it.
Prints the wall time of each (best of R, in one process after both warmed up their imports), the
ratio, and how many written files differ in bytes; exits non-zero if any does. The GGUF's weights
are what both dequantize, so max |Δ| is 0 or the run fails.

Run: `.venv/bin/python benchmarks/bench_prepare_models.py [--repeats 2]`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import torch

from privleak import gguf_reads, models


def read_once_conversion(out_dir: Path) -> None:
    with gguf_reads.read_once():
        models.prepare_smollm2(out_dir)


def hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def best_of(repeats: int, convert) -> tuple[float, dict[str, str]]:
    times, written = [], {}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            convert(Path(tmp))
            times.append(time.perf_counter() - start)
            written = hashes(Path(tmp))
    return min(times), written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="best of R conversions each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # warm-up: imports and the OS file cache
        models.prepare_smollm2(Path(tmp))
    fast, fast_files = best_of(args.repeats, read_once_conversion)
    fair, fair_files = best_of(args.repeats, models.prepare_smollm2)
    differ = sorted(f for f in fast_files.keys() | fair_files.keys()
                    if fast_files.get(f) != fair_files.get(f))  # fmt: skip
    print(f"{models.SMOLLM2} from {models.SMOLLM2_GGUF}, CPU, {torch.get_num_threads()} threads, "
          f"best of {args.repeats}")  # fmt: skip
    print(f"  fast (inside gguf_reads.read_once): {fast:6.2f} s")
    print(f"  fair (transformers' own reads):     {fair:6.2f} s")
    print(f"  fair / fast: {fair / fast:.2f}x")
    print(f"  files written: {len(fast_files)}; differing in bytes: {len(differ)} {differ or ''}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
