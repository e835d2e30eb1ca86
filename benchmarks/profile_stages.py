"""Where a stage's seconds go: sum py-spy's collapsed stacks by kind of work.

Record the stacks with the stage runner's sampler (`PRIVLEAK_PROFILE_DIR=DIR dvc repro ...`: one
DIR/<stage>.txt per stage run, the kernel and its worker processes), then

    .venv/bin/python benchmarks/profile_stages.py DIR [--top 10] [--markdown]

Each sample is filed under the first kind, in the order below, that one of its frames matches:
imports, backward, optimizer, forward, tokenization, I/O (model and table loading and saving,
Chroma), sampling (privleak's decoding loops outside the model's forward), else other Python.
py-spy samples Python threads only, and only while they run (idle threads are skipped): torch's
OpenMP threads are not counted, so a one-process stage shows about its wall time and a stage on
two worker processes about twice it. The shares are of the work its Python threads did.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (kind, pattern on a frame "function (file:line)"), tried in this order on each stack.
KINDS: tuple[tuple[str, re.Pattern], ...] = (
    ("imports", re.compile(r"_find_and_load|<frozen importlib")),
    ("backward", re.compile(r"\.backward \(torch/_tensor\.py|torch/autograd/|opacus/grad_sample")),
    ("optimizer", re.compile(r"torch/optim/|clip_grad|opacus/optimizers|opacus/accountants")),
    ("forward", re.compile(r"(^|\.)forward \((torch|transformers|sentence_transformers)/")),
    ("tokenization", re.compile(r"tokenizers|tokenization_utils|/tokenizer\w*\.py")),
    (
        "I/O",
        re.compile(
            r"safetensors|save_pretrained|from_pretrained|pyarrow|parquet|chromadb|"
            r"json/(encoder|decoder)|nbformat|papermill|write_text|read_text|torch/serialization"
        ),
    ),
    ("sampling", re.compile(r"privleak/(decoding|dp_icl_decode|cid|pad|dp_rag|lira_sampling)")),
)
OTHER = "other Python"
LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def kind_of(frames: list[str]) -> str:
    """The kind of work of one stack (frames root first)."""
    for kind, pattern in KINDS:
        if any(pattern.search(frame) for frame in frames):
            return kind
    return OTHER


def leaf(frames: list[str]) -> str:
    """The innermost frame as `function (file)`, the line number and folders dropped."""
    match = re.match(r"^(?P<function>.*) \((?P<file>.*?)(:\d+)?\)$", frames[-1])
    if match is None:
        return frames[-1]
    return f"{match['function']} ({Path(match['file']).name})"


def summarise(path: Path) -> tuple[Counter, Counter]:
    """(samples by kind, samples by innermost frame) of one stage's collapsed stacks."""
    kinds: Counter = Counter()
    leaves: Counter = Counter()
    for line in path.read_text().splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        # py-spy --subprocesses puts `process PID:"cmdline"` first; threads may follow.
        frames = [f for f in match["stack"].split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        count = int(match["count"])
        kinds[kind_of(frames)] += count
        leaves[leaf(frames)] += count
    return kinds, leaves


def table(directory: Path, top: int) -> str:
    """A markdown table: per stage, Python-thread seconds sampled and the share of each kind,
    then its heaviest innermost frames; the `top` largest stages, largest first."""
    from privleak.pipeline.kernel import PROFILE_RATE_HZ

    rows = []
    for path in sorted(directory.glob("*.txt")):
        kinds, leaves = summarise(path)
        total = sum(kinds.values())
        if total:
            rows.append((path.stem, total, kinds, leaves))
    rows.sort(key=lambda row: -row[1])
    names = [kind for kind, _ in KINDS] + [OTHER]
    lines = [
        "| stage | Python-thread s sampled | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    details = []
    for stage, total, kinds, leaves in rows[:top]:
        shares = " | ".join(f"{100 * kinds[name] / total:.0f} %" for name in names)
        lines.append(f"| {stage} | {total / PROFILE_RATE_HZ:.0f} | {shares} |")
        heaviest = ", ".join(
            f"{frame} {100 * count / total:.0f} %" for frame, count in leaves.most_common(5)
        )
        details.append(f"- **{stage}**: {heaviest}")
    return (
        "\n".join(lines)
        + "\n\nInnermost frames, share of the stage's samples:\n\n"
        + "\n".join(details)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="PRIVLEAK_PROFILE_DIR of a profiled run")
    parser.add_argument("--top", type=int, default=10, help="stages shown, largest first")
    args = parser.parse_args()
    if not args.directory.is_dir():
        raise SystemExit(f"profile_stages: {args.directory} is not a folder of <stage>.txt stacks")
    print(table(args.directory, args.top))


if __name__ == "__main__":
    main()
