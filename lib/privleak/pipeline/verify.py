"""Compare the workspace's headline metrics with the committed ones, within declared tolerances.

`python -m privleak.pipeline.verify [--ref REV]` reads every metrics/*.json of the workspace and the
same
file at git revision REV (default HEAD), flattens both to dotted keys, and fails (exit 1) when a
number moves beyond its tolerance, a string or boolean changes (claim verdicts among them), or a
key appears or disappears. Tolerances live in metrics/tolerances.yaml:

    default: {abs: 1.0e-6, rel: 1.0e-4}
    rules:                     # first matching glob over "<file stem>:<dotted key>" wins
      - {match: "s1:*spearman*", abs: 0.05}
      - {match: "claims:*.effect", within: interval}
      - {match: "claims:*.ci*", within: width}
      - {match: "s0:*", report: true}

A number passes when |new - old| <= abs + rel * |old| (numpy.isclose's rule), or, under
`within: interval`, when it lies inside the committed 95 % interval of its claim (the sibling
`ci` pair), or, under `within: width`, when an interval bound moved by at most the committed
interval's width; both fall back to abs/rel where the committed claim has no interval. A
`report: true` number is listed but never fails (numbers that floats make chaotic between CPUs:
the claims built on them are what must agree). Strings and booleans never get a tolerance.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from privleak.errors import PrivleakError, require
from privleak.pipeline import paths

TOLERANCES_FILE = paths.METRICS / "tolerances.yaml"


@dataclass(frozen=True)
class Tolerance:
    abs: float = 0.0
    rel: float = 0.0

    def allows(self, old: float, new: float) -> bool:
        if math.isnan(old) or math.isnan(new):
            return math.isnan(old) and math.isnan(new)
        return abs(new - old) <= self.abs + self.rel * abs(old)


WITHIN = ("interval", "width")  # relative to the committed claim's interval (see module doc)


@dataclass(frozen=True)
class Rule:
    match: str
    tolerance: Tolerance
    within: str | None = None
    report: bool = False


@dataclass(frozen=True)
class Change:
    key: str
    old: Any
    new: Any
    ok: bool
    why: str


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': [1, 2]}} -> {'a.b[0]': 1, 'a.b[1]': 2}."""
    if isinstance(value, dict):
        items = {}
        for key, child in value.items():
            items |= flatten(child, f"{prefix}.{key}" if prefix else str(key))
        return items
    if isinstance(value, list):
        items = {}
        for index, child in enumerate(value):
            items |= flatten(child, f"{prefix}[{index}]")
        return items
    return {prefix: value}


def load_tolerances(path: Path = TOLERANCES_FILE) -> tuple[Tolerance, list[Rule]]:
    """The default tolerance and the rules, first match wins."""
    require(path.exists(), f"{path} is missing; it declares how far each metric may move")
    spec = yaml.safe_load(path.read_text()) or {}

    def tolerance(entry: Any, where: str) -> Tolerance:
        require(
            isinstance(entry, dict)
            and set(entry) <= {"abs", "rel", "match", "within", "report"}
            and all(
                isinstance(entry.get(k, 0), int | float) and entry.get(k, 0) >= 0
                for k in ("abs", "rel")
            ),
            f"{path.name}: {where} must be {{abs: >= 0, rel: >= 0}}; got {entry!r}",
        )
        return Tolerance(float(entry.get("abs", 0.0)), float(entry.get("rel", 0.0)))

    default = tolerance(spec.get("default", {}), "default")
    rules = []
    for index, rule in enumerate(spec.get("rules") or []):
        require(
            isinstance(rule, dict) and isinstance(rule.get("match"), str),
            f"{path.name}: rules[{index}] needs a 'match' glob; got {rule!r}",
        )
        require(
            rule.get("within") in (None, *WITHIN) and isinstance(rule.get("report", False), bool),
            f"{path.name}: rules[{index}] within must be one of {WITHIN} and report a boolean; "
            f"got {rule!r}",
        )
        rules.append(
            Rule(
                rule["match"],
                # a rule without abs/rel keeps the default's for float noise
                tolerance(rule, f"rules[{index}]") if {"abs", "rel"} & set(rule) else default,
                rule.get("within"),
                rule.get("report", False),
            )
        )
    return default, rules


def _committed_interval(old: dict[str, Any], key: str) -> tuple[float, float] | None:
    """The committed [low, high] of the claim that `key` (…effect or …ci[i]) belongs to."""
    claim = key[: key.rindex(".")]
    bounds = [old.get(f"{claim}.ci[{i}]") for i in (0, 1)]
    if not all(isinstance(b, int | float) and math.isfinite(b) for b in bounds):
        return None
    return float(bounds[0]), float(bounds[1])


def judge_number(rule: Rule, old: dict[str, Any], key: str, before: float, after: float):
    """(ok, why) of one number that moved, under its rule."""
    if rule.report:
        return True, f"|Δ| {abs(after - before):.3g}, reported, not gated"
    t = rule.tolerance
    close = t.allows(before, after)  # float noise passes under every rule
    interval = _committed_interval(old, key) if rule.within else None
    if interval is not None and rule.within == "interval":
        low, high = interval
        inside = low <= after <= high
        return close or inside, f"must stay inside the committed interval [{low:g}, {high:g}]"
    if interval is not None:
        width, moved = interval[1] - interval[0], abs(after - before)
        return close or moved <= width, f"|Δ| {moved:.3g} vs the committed width {width:g}"
    return close, f"|Δ| {abs(after - before):.3g} vs abs {t.abs:g} + rel {t.rel:g}"


def compare(
    old: dict[str, Any],
    new: dict[str, Any],
    stem: str,
    default: Tolerance,
    rules: list[Rule],
) -> list[Change]:
    """Every key of either flattened metrics dict, judged: numbers within tolerance, everything
    else (verdicts, labels, booleans) equal, and no key added or lost."""
    old, new = flatten(old), flatten(new)
    changes = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            changes.append(Change(key, old[key], None, False, "missing now"))
            continue
        if key not in old:
            changes.append(Change(key, None, new[key], False, "new key"))
            continue
        before, after = old[key], new[key]
        numeric = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after)
        )
        if numeric:
            rule = next(
                (r for r in rules if fnmatch.fnmatchcase(f"{stem}:{key}", r.match)),
                Rule("*", default),
            )
            ok, why = judge_number(rule, old, key, float(before), float(after))
        else:
            ok, why = before == after, "must be equal"
        if before != after:
            changes.append(Change(key, before, after, ok, why))
    return changes


def committed_json(path: Path, ref: str) -> dict | None:
    """path's content at git revision ref, or None when that revision has no such file."""
    relative = path.relative_to(paths.ROOT).as_posix()
    shown = subprocess.run(
        ["git", "show", f"{ref}:{relative}"], cwd=paths.ROOT, capture_output=True, text=True
    )
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def verify(ref: str = "HEAD", metrics_dir: Path | None = None) -> list[tuple[str, Change]]:
    """(file stem, change) for every metric that differs from revision ref."""
    metrics_dir = metrics_dir or paths.METRICS
    default, rules = load_tolerances(metrics_dir / "tolerances.yaml")
    files = sorted(metrics_dir.glob("*.json"))
    require(bool(files), f"{metrics_dir} holds no metrics; run `dvc repro` first")
    found = []
    for file in files:
        reference = committed_json(file, ref)
        require(
            reference is not None,
            f"{file.relative_to(paths.ROOT)} is not committed at {ref}; commit the reference "
            "metrics first (they are `cache: false` DVC metrics)",
        )
        current = json.loads(file.read_text())
        found += [(file.stem, c) for c in compare(reference, current, file.stem, default, rules)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare metrics/*.json with a git revision.")
    parser.add_argument("--ref", default="HEAD", help="git revision holding the reference")
    args = parser.parse_args(argv)
    try:
        changes = verify(args.ref)
    except PrivleakError as error:
        print(f"privleak: error: {error}", file=sys.stderr)
        return 2
    failed = [(stem, c) for stem, c in changes if not c.ok]
    for stem, change in changes:
        mark = "ok  " if change.ok else "FAIL"
        print(f"{mark} {stem}:{change.key}: {change.old!r} -> {change.new!r} ({change.why})")
    summary = f"verify: {len(changes)} metrics moved, {len(failed)} beyond tolerance vs {args.ref}"
    print(summary, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
