"""Time a whole `dvc repro` and record it: one row in benchmarks/runs.csv and its stage times.

    .venv/bin/python benchmarks/timed_run.py --profile embedded -- dvc repro -f

runs the command (its output passes through), reads the stage runner's `stage <name>: <s> s`
lines, and appends to benchmarks/runs.csv one row: date (the start, UTC), commit (with `+dirty`
when the tree has uncommitted changes), CPU model (and whether it exposes AMX), cores, profile,
wall_s, stage_s (the sum of the stages' own times), stages (how many ran) and the command. The
stage times go to benchmarks/runs/<start>-<commit>-<profile>.csv. Nothing is recorded when the
command fails.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs.csv"
COLUMNS = ("date", "commit", "cpu", "cores", "profile", "wall_s", "stage_s", "stages", "command")
STAGE_LINE = re.compile(r"^stage (?P<stage>[\w-]+): (?P<seconds>\d+(?:\.\d+)?) s$")


def stage_times(lines: list[str]) -> dict[str, float]:
    """{stage: seconds} from the runner's lines (a stage run twice keeps its last time)."""
    times = {}
    for line in lines:
        match = STAGE_LINE.match(line.strip())
        if match:
            times[match["stage"]] = float(match["seconds"])
    return times


def cpu_model() -> str:
    """The CPU's model name and whether it exposes AMX: the embedded profile's bfloat16 LMs run
    about 2.5x slower without it (benchmarks/README.md)."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                "unknown")  # fmt: skip
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    return f"{name} ({'AMX' if 'amx_bf16' in flags else 'no AMX'})"


def commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    return head + ("+dirty" if dirty else "")


def append_row(row: dict, path: Path = RUNS) -> None:
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, choices=["smoke", "embedded", "paper"])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command to time")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise SystemExit("timed_run: give the command to time after --, e.g. -- dvc repro -f")
    revision = commit()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M")  # the run's start
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:
        sys.stdout.write(line)
        lines.append(line)
    status = process.wait()
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"timed_run: {' '.join(command)} exited {status}; nothing recorded")
    times = stage_times(lines)
    append_row({
        "date": date, "commit": revision, "cpu": cpu_model(), "cores": os.cpu_count(),
        "profile": args.profile, "wall_s": f"{wall:.0f}", "stage_s": f"{sum(times.values()):.0f}",
        "stages": len(times), "command": " ".join(command),
    })  # fmt: skip
    detail = HERE / "runs" / f"{date.replace(':', '-')}-{revision}-{args.profile}.csv"
    detail.parent.mkdir(exist_ok=True)
    with detail.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stage", "seconds"])
        writer.writerows((stage, f"{seconds:.1f}") for stage, seconds in times.items())
    shown = f"{RUNS.relative_to(HERE.parent)} and {detail.relative_to(HERE.parent)}"
    print(f"timed_run: {wall:.0f} s wall, {sum(times.values()):.0f} s in {len(times)} stages; "
          f"recorded in {shown}")  # fmt: skip


if __name__ == "__main__":
    main()
