"""params.yaml access: the validated file, and the params one dvc.yaml stage declares.

params.yaml holds `profile: smoke | embedded | paper` and groups of knobs with one block per
profile. Stages declare `<group>.${profile}[.<key>]`, so switching the profile reruns exactly the
stages whose declared values differ between the two profiles.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from privleak.errors import PrivleakError, require
from privleak.pipeline import paths, schema
from privleak.pipeline.schema import PROFILES

PROFILE_ENV = "PRIVLEAK_PROFILE"  # set by privleak.pipeline.stage for the notebook kernel
_TEMPLATE = re.compile(r"\$\{([^}]+)\}")
_PROFILE_LINE = re.compile(r"^profile:.*$", re.MULTILINE)


def load(path: Path | None = None) -> dict[str, Any]:
    """The whole params file, validated against privleak.pipeline.schema (every group, every profile
    block); a one-line PrivleakError names the file, the key path, the value and what is allowed."""
    path = Path(path or paths.PARAMS_FILE)
    require(path.exists(), f"params file {path} is missing")
    params = schema.load_yaml(path.read_text(), source=path.name)
    schema.validate(params, source=path.name)
    return params


def profile_block(params: dict[str, Any], group: str, profile: str) -> dict[str, Any]:
    """params[group][profile] when both are dicts, else {} (a missing group or block)."""
    block = params.get(group, {})
    block = block.get(profile) if isinstance(block, dict) else None
    return block if isinstance(block, dict) else {}


def lookup(params: dict[str, Any], dotted: str) -> Any:
    """params['a']['b'] for 'a.b', with a one-line error naming the missing key."""
    node: Any = params
    for part in dotted.split("."):
        require(
            isinstance(node, dict) and part in node,
            f"params.yaml has no key '{dotted}' (missing '{part}')",
        )
        node = node[part]
    return node


def active_profile() -> str:
    """The profile of the running stage: $PRIVLEAK_PROFILE (pipeline.stage sets it, honouring
    --profile), else params.yaml's selection, else the placeholder "<profile>"."""
    if env := os.environ.get(PROFILE_ENV):
        return env
    try:
        return load()["profile"]
    except PrivleakError:
        return "<profile>"


def profile_key(key: str) -> str:
    """The params.yaml path of a stage param written without its profile: "s0.n_examples" ->
    "s0.<active profile>.n_examples", for error messages a user can look up."""
    group, _, rest = key.partition(".")
    return ".".join(part for part in (group, active_profile(), rest) if part)


def resolve(text: str, params: dict[str, Any]) -> str:
    """Substitute ${key} references the way dvc.yaml templating does."""
    return _TEMPLATE.sub(lambda m: str(lookup(params, m.group(1))), text)


def stage_definition(stage: str, dvc_file: Path | None = None) -> dict[str, Any]:
    """The stage's dvc.yaml entry (unresolved)."""
    dvc_file = Path(dvc_file or paths.ROOT / "dvc.yaml")
    # libyaml: 0.009 s instead of 0.08 s; a stage's runner reads dvc.yaml twice, and a
    # checkpointing kernel twice more
    stages = yaml.load(dvc_file.read_text(), Loader=schema.SAFE_LOADER).get("stages", {})
    require(stage in stages, f"dvc.yaml has no stage '{stage}'; stages: {', '.join(stages)}")
    return stages[stage]


def stage_params(stage: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Only the params the stage declares in dvc.yaml, keyed by their last non-profile component.

    A declared `models.${profile}` arrives as `models` and `models.${profile}.prepare` as
    `prepare`, so notebooks are profile-agnostic.
    """
    params = params if params is not None else load()
    declared = [resolve(key, params) for key in stage_definition(stage).get("params", [])]
    values = {
        [part for part in key.split(".") if part not in PROFILES][-1]: lookup(params, key)
        for key in declared
    }
    require(
        len(values) == len(declared),
        f"stage '{stage}' declares two params with the same last name: {declared}",
    )
    return values


def stage_outputs(stage: str, params: dict[str, Any] | None = None) -> list[Path]:
    """The stage's declared outs and metrics, resolved, as absolute paths."""
    params = params if params is not None else load()
    definition = stage_definition(stage)
    outputs = []
    for entry in definition.get("outs", []) + definition.get("metrics", []):
        name = next(iter(entry)) if isinstance(entry, dict) else entry
        outputs.append(paths.ROOT / resolve(name, params))
    return outputs


def run_with_profile(profile: str, command: list[str]) -> int:
    """Run `command` with params.yaml switched to `profile`; params.yaml, dvc.lock and the
    git-tracked metrics (metrics/*.json) are restored afterwards, so a smoke run never leaves the
    repository's recorded state changed."""
    require(profile in PROFILES, f"profile '{profile}' is unknown; allowed: {', '.join(PROFILES)}")
    params_file = paths.PARAMS_FILE
    recorded = [params_file, paths.ROOT / "dvc.lock", *sorted(paths.METRICS.glob("*.json"))]
    saved = {f: f.read_bytes() for f in recorded if f.exists()}
    try:
        params_file.write_text(
            _PROFILE_LINE.sub(f"profile: {profile}", saved[params_file].decode())
        )
        load(params_file)
        return subprocess.call(command, cwd=paths.ROOT)
    finally:
        for file, content in saved.items():
            file.write_bytes(content)
        for file in [paths.ROOT / "dvc.lock", *paths.METRICS.glob("*.json")]:
            if file not in saved:
                file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check params.yaml or run with another profile.")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("check", help="validate every key of params.yaml")
    run = sub.add_parser("run", help="run a command with params.yaml set to a profile")
    run.add_argument("profile")
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.action == "check":
            print(f"{paths.PARAMS_FILE.name}: ok (profile {load()['profile']})")
            return 0
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        require(bool(command) and shutil.which(command[0]) is not None, f"cannot run {command}")
        return run_with_profile(args.profile, command)
    except PrivleakError as error:
        print(f"privleak: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
