"""Stability: whether each decided verdict survives another machine's floats.

`make stability` (scripts/stability) reruns every stage of the committed run in a separate
workspace under ATen's AVX2 kernels (`PERTURBATION`): every layer norm, softmax, activation and
vectorised reduction rounds in another order, and training and sampling diverge from there.
`compare` sets the rerun's claims table against the committed one; the CLI writes
metrics/stability.json: per claim both verdicts, effects and intervals and whether the verdict
held. A decided verdict that held is *stable*; one that moved is *fragile*, and its note says what
the rerun read and about how many units would settle it in both runs (`units_to_settle`: more
units are the fix, not a wider tolerance). `mark` puts that on the claims of a run: a decided
claim whose committed effect and interval the record does not hold (another profile, machine or
commit) is *unmeasured* until `make stability` runs again.

    python -m privleak.claims.stability RERUN_CSV --base BASE_CSV --commit SHA --profile P \\
        --kernels AVX512 AVX2 --seconds S --out metrics/stability.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd
from scipy import stats

from privleak.claims.multiplicity import paper_key, units_to_decide
from privleak.claims.spec import DECIDED, FRAGILE, NOT_DECIDED, STABLE, UNMEASURED
from privleak.claims.verdicts import Claim, number
from privleak.errors import PrivleakError, require

PERTURBATION = (
    "ATEN_CPU_CAPABILITY=avx2: ATen's AVX2 kernels (layer norms, softmaxes, activations, "
    "vectorised reductions) instead of the machine's default ones; MKL's and oneDNN's matrix "
    "products keep their paths; the same code, params and seeds (scripts/stability)"
)
COLUMNS = ("id", "verdict", "effect", "ci_low", "ci_high", "units", "null")


def _units(text: str) -> int:
    """The count that starts a claims table's `units` cell ("12 questions" -> 12)."""
    head = str(text).split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


def _units_to_decide(row: Mapping, null: float, alpha: float) -> int | None:
    """A claims-table row's units at 80 % power at `alpha`, with its procedure's standard error
    (`se`), or where the row has none one read off its interval (half the width over
    z_{1 - alpha/2}; an interval cut to the parameter space understates it)."""
    low, high = float(row["ci_low"]), float(row["ci_high"])
    if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
        return None
    se = float(row.get("se", math.nan))
    if not (math.isfinite(se) and se > 0):
        se = (high - low) / (2 * float(stats.norm.isf(alpha / 2)))
    return units_to_decide(float(row["effect"]), null, se, _units(row["units"]), alpha)


def _side(row: Mapping) -> float:
    """+1 when a decided row's interval lies above its null, -1 below."""
    return 1.0 if float(row["ci_low"]) > float(row["null"]) else -1.0


def crossed(base: Mapping, perturbed: Mapping) -> bool:
    """Whether the rerun's effect lies on the other side of the null from the committed decided
    interval's (or on the null, or is missing)."""
    gap = (float(perturbed["effect"]) - float(base["null"])) * _side(base)
    return not gap > 0


def units_to_settle(base: Mapping, perturbed: Mapping, alpha: float = 0.05) -> int | None:
    """About how many units would decide a committed decided claim the same way in both runs:
    the larger of each run's `units_to_decide` (80 % power at the unadjusted alpha) at its own
    effect. None when the rerun's effect `crossed` the null (more units alone would not settle
    that) or a run has no interval to scale. base, perturbed: claims-table rows (effect, ci_low,
    ci_high, units, null)."""
    if crossed(base, perturbed):
        return None
    needed = [_units_to_decide(row, float(base["null"]), alpha) for row in (base, perturbed)]
    return None if None in needed else max(needed)


def compare(base: pd.DataFrame, perturbed: pd.DataFrame) -> dict[str, dict]:
    """{claim id: {verdict, perturbed, held, effect: [base, rerun], ci: [[lo, hi], [lo, hi]],
    units_to_settle, crossed, units (the committed count)}} for every claim of the committed
    table `base`, against the rerun's table `perturbed` (claims-table frames). A claim the rerun
    lacks is an error: the two tables come from one commit; one only the rerun has is ignored."""
    missing = sorted(set(base["id"]) - set(perturbed["id"]))
    require(not missing, f"the rerun's claims table lacks {len(missing)} claims: {missing[:3]}")
    rerun = perturbed.set_index("id")
    record = {}
    for row in base.to_dict("records"):
        other = rerun.loc[row["id"]].to_dict() | {"null": row["null"]}
        held = row["verdict"] == other["verdict"]
        moved_decided = not held and row["verdict"] in DECIDED
        record[row["id"]] = {
            "verdict": row["verdict"],
            "perturbed": other["verdict"],
            "held": held,
            "effect": [number(row["effect"]), number(other["effect"])],
            "ci": [
                [number(row["ci_low"]), number(row["ci_high"])],
                [number(other["ci_low"]), number(other["ci_high"])],
            ],
            "units_to_settle": units_to_settle(row, other) if moved_decided else None,
            "crossed": crossed(row, other) if moved_decided else False,
            "units": _units(row["units"]),
        }
    return record


def counts(record: Mapping[str, Mapping]) -> dict[str, dict[str, int]]:
    """{paper key: {stable, fragile}} over the decided verdicts of a `compare` record, and the
    rerun's newly decided ones (inconclusive here, decided there) as `newly_decided`."""
    tally: dict[str, dict[str, int]] = {}
    for claim_id, entry in sorted(record.items()):
        key = tally.setdefault(paper_key(claim_id), {STABLE: 0, FRAGILE: 0, "newly_decided": 0})
        if entry["verdict"] in DECIDED:
            key[STABLE if entry["held"] else FRAGILE] += 1
        elif entry["perturbed"] in DECIDED:
            key["newly_decided"] += 1
    return tally


def stability_json(record: Mapping[str, Mapping], run: Mapping[str, object]) -> str:
    """metrics/stability.json: the rerun (`run`: commit, profile, kernels, seconds), the
    perturbation, per claim the `compare` entry, and per paper key the stable and fragile decided
    verdicts."""
    body = {**run, "perturbation": PERTURBATION, "claims": dict(record), "counts": counts(record)}
    return json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n"


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _unit_and_runs(units: str) -> tuple[str, str]:
    """("attack prompts", "6 training runs") from a claims table's units cell "40 attack prompts
    x 6 training runs"; the runs part is "" where the units are not crossed with runs."""
    label = units.split(" ", 1)[-1]
    unit, _, runs = label.partition(" x ")
    if "crossed with" in unit:  # "members (crossed with the non-members and the training runs)"
        unit, runs = unit.split(" (", 1)[0], "training runs"
    return unit, runs


def fragile_note(entry: Mapping, units: str) -> str:
    """What the rerun read of a fragile verdict, and what would settle it; `units`: the claim's
    units cell ("40 attack prompts x 6 training runs")."""
    unit, runs = _unit_and_runs(units)
    low, high = entry["ci"][1]
    read = (
        f"fragile: under other floats (ATen's AVX2 kernels, make stability) it read "
        f"{entry['perturbed']}, {_show(entry['effect'][1])} [{_show(low)}, {_show(high)}]"
    )
    settle = entry["units_to_settle"]
    if entry["crossed"]:
        more = (f"more runs than the {runs}" if runs[:1].isdigit()
                else f"more {runs}" if runs else "another sample")  # fmt: skip
        return (
            f"{read}; its effect crossed the null, so more {unit} at these effects would not "
            f"settle it; {more} would show which side holds"
        )
    if settle is None:
        return f"{read}; a run has no resampled interval to say how many {unit} would settle it"
    factor = settle / entry["units"] if entry["units"] else math.nan
    grown = f" and {factor:.2f} times the {runs}" if runs else ""
    return (
        f"{read}; about {settle} {unit} ({factor:.2f}x now){grown} would decide it in both runs "
        "at 80 % power"
    )


def stability_of(claim: Claim, record: Mapping[str, Mapping]) -> str:
    """stable, fragile or unmeasured for a decided claim, `not decided` for an inconclusive one.
    Unmeasured: the record holds no rerun of this very result (no entry, or one whose committed
    effect or interval differs: another profile, machine or commit)."""
    if claim.verdict not in DECIDED:
        return NOT_DECIDED
    entry = record.get(claim.id)
    committed = [number(claim.effect), [number(claim.ci_low), number(claim.ci_high)]]
    if entry is None or [entry["effect"][0], entry["ci"][0]] != committed:
        return UNMEASURED
    return STABLE if entry["held"] else FRAGILE


def mark(claims: Sequence[Claim], record: Mapping[str, Mapping]) -> list[Claim]:
    """The claims with their `stable` field set from a stability record ({} when there is none),
    and a fragile verdict's note saying what the rerun read (`fragile_note`)."""
    marked = []
    for claim in claims:
        stable = stability_of(claim, record)
        note = claim.note
        if stable == FRAGILE:
            note = "; ".join(t for t in (note, fragile_note(record[claim.id], claim.units)) if t)
        marked.append(replace(claim, stable=stable, note=note))
    return marked


def load(path: Path) -> dict[str, Mapping]:
    """The per-claim record of a stability file; {} when the file does not exist."""
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())["claims"]
    except (ValueError, KeyError) as error:
        raise PrivleakError(f"{path}: not a stability record ({error})") from None


def _table(path: Path) -> pd.DataFrame:
    require(path.is_file(), f"{path}: no claims table (run the stage render_claims first)")
    frame = pd.read_csv(path)
    absent = sorted(set(COLUMNS) - set(frame.columns))
    require(not absent, f"{path}: not a claims table (no column {', '.join(absent)})")
    return frame


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("perturbed", type=Path, help="the rerun's figures/claims/claims.csv")
    parser.add_argument(
        "--base",
        type=Path,
        default=Path("figures/claims/claims.csv"),
        help="the committed run's figures/claims/claims.csv",
    )
    parser.add_argument("--commit", required=True, help="the commit both runs are of")
    parser.add_argument("--profile", required=True, help="the params profile both ran")
    parser.add_argument(
        "--kernels",
        nargs=2,
        required=True,
        metavar=("DEFAULT", "PERTURBED"),
        help="torch's CPU capability in the committed run and in the rerun",
    )
    parser.add_argument("--seconds", type=int, required=True, help="the rerun's wall time")
    parser.add_argument("--out", type=Path, default=Path("metrics/stability.json"))
    args = parser.parse_args(argv)
    try:
        record = compare(_table(args.base), _table(args.perturbed))
    except PrivleakError as error:
        raise SystemExit(f"stability: {error}") from None
    run = {
        "commit": args.commit,
        "profile": args.profile,
        "seconds": args.seconds,
        "kernels": dict(zip(("default", "perturbed"), args.kernels, strict=True)),
    }
    args.out.write_text(stability_json(record, run))
    for key, tally in counts(record).items():
        print(f"{key}: {tally[STABLE]} stable, {tally[FRAGILE]} fragile, "
              f"{tally['newly_decided']} newly decided")  # fmt: skip


if __name__ == "__main__":
    main()
