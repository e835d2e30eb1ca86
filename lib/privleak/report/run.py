"""The run a report shows: its commit, the output -> stage map of dvc.yaml, and what moved since the
committed metrics (`make verify`'s view)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from privleak.errors import PrivleakError
from privleak.pipeline import paths
from privleak.pipeline.verify import verify


def _git(*args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=paths.ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


# What a dvc repro itself rewrites before the report stage runs: not a change of the code.
RUN_OUTPUTS = (":!dvc.lock", ":!metrics")


def commit() -> str:
    """HEAD's short hash, with '+ uncommitted changes' when tracked files other than the run's
    own outputs differ; 'no git' outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return "no git"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *RUN_OUTPUTS)
    return f"{head} + uncommitted changes" if dirty else head


def outputs(dvc_yaml: Path = paths.ROOT / "dvc.yaml") -> dict[str, str]:
    """{declared output path: stage} over every stage of dvc.yaml."""
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    found = {}
    for name, stage in stages.items():
        for out in stage.get("outs", []):
            found[next(iter(out)) if isinstance(out, dict) else out] = name
    return found


def changes(profile: str) -> dict:
    """{headline, moved: [{key, old, new, ok, why}]}: the metrics that differ from HEAD's at build
    time, when HEAD ran the same profile."""
    committed = _git("show", "HEAD:params.yaml")
    if committed is None:
        return {"headline": "No committed run to compare with (no git history).", "moved": []}
    then = yaml.safe_load(committed).get("profile")
    if then != profile:
        return {
            "headline": f"The committed metrics come from the {then} profile and this run is "
            f"{profile}: nothing to compare.",
            "moved": [],
        }
    try:
        moved = verify("HEAD")
    except PrivleakError as error:
        return {"headline": f"No comparison: {error}", "moved": []}
    failed = sum(not change.ok for _, change in moved)
    headline = (
        f"When this page was built, {len(moved)} metrics differed from the committed run's, "
        f"{failed} beyond tolerance (make verify)."
        if moved
        else "When this page was built, every metric equalled the committed run's (make verify)."
    )
    rows = [
        {"key": f"{stem}:{c.key}", "old": c.old, "new": c.new, "ok": c.ok, "why": c.why}
        for stem, c in moved
    ]
    return {"headline": headline, "moved": rows}
