"""Stability of decided verdicts under another machine's floats (privleak.claims.stability): the
comparison of two claims tables by hand, the units that would settle a fragile verdict, the marks
and notes a run's claims get, and the committed record against the committed claims."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from privleak.claims import stability as st
from privleak.claims.spec import CONTRADICTED, INCONCLUSIVE, REPRODUCED
from privleak.claims.stats import Estimate
from privleak.claims.tables import markdown, metrics_json
from privleak.claims.verdicts import judge

ROOT = Path(__file__).resolve().parents[1]


def table(rows: list[tuple]) -> pd.DataFrame:
    """A claims table from (id, verdict, effect, low, high, units) rows, null 0."""
    return pd.DataFrame(
        [{"id": i, "verdict": v, "effect": e, "ci_low": lo, "ci_high": hi, "units": u, "null": 0.0}
         for i, v, e, lo, hi, u in rows]
    )  # fmt: skip


BASE = table([
    ("s3.a", REPRODUCED, 0.2, 0.1, 0.3, "10 dialogs"),
    ("s3.b", REPRODUCED, 0.2, 0.1, 0.3, "10 dialogs"),
    ("s2.c", CONTRADICTED, -0.3, -0.4, -0.2, "8 prompts"),
    ("s2.d", INCONCLUSIVE, 0.1, -0.1, 0.3, "8 prompts"),
    ("s2.e", REPRODUCED, 0.2, 0.1, 0.3, "8 prompts"),
])  # fmt: skip
RERUN = table([
    ("s3.a", REPRODUCED, 0.25, 0.12, 0.33, "10 dialogs"),
    ("s3.b", INCONCLUSIVE, 0.1, -0.05, 0.25, "10 dialogs"),
    ("s2.c", CONTRADICTED, -0.2, -0.3, -0.1, "8 prompts"),
    ("s2.d", REPRODUCED, 0.2, 0.05, 0.35, "8 prompts"),
    ("s2.e", INCONCLUSIVE, -0.05, -0.2, 0.1, "8 prompts"),
])  # fmt: skip


def test_a_verdict_holds_when_the_rerun_reads_the_same():
    record = st.compare(BASE, RERUN)
    assert {k: e["held"] for k, e in record.items()} == {
        "s3.a": True, "s3.b": False, "s2.c": True, "s2.d": False, "s2.e": False,
    }  # fmt: skip
    assert record["s3.b"]["perturbed"] == INCONCLUSIVE
    assert record["s3.b"]["effect"] == [0.2, 0.1]
    assert record["s3.b"]["ci"] == [[0.1, 0.3], [-0.05, 0.25]]


def test_the_units_to_settle_a_fragile_verdict_are_the_larger_runs_need():
    record = st.compare(BASE, RERUN)
    # 80 % power at 0.05: n ((z_.975 + z_.8) se / effect)^2, se = half the width / z_.975.
    # committed: se 0.1 / 1.96 at effect 0.2 -> 5.1, at least the 10 there are;
    # rerun: se 0.15 / 1.96 at effect 0.1 -> 10 (2.8016 * 0.07653 / 0.1)^2 = 45.97 -> 46
    assert record["s3.b"]["units_to_settle"] == 46
    # the rerun's effect crossed the null: no number of units settles it at these effects
    assert record["s2.e"]["units_to_settle"] is None and record["s2.e"]["crossed"]
    assert not record["s3.b"]["crossed"]
    # held, or not decided in the committed run: nothing to settle
    assert record["s3.a"]["units_to_settle"] is None
    assert record["s2.d"]["units_to_settle"] is None


def test_the_units_to_settle_read_the_procedures_se_where_the_interval_is_cut():
    # the rerun's s3.b interval cut at 0.2 (a bounded effect): its own se, 0.15 / 1.96, still
    # gives 46; read off the cut width (0.25) it would give 32
    cut = RERUN.assign(se=[float("nan"), 0.15 / 1.959964, float("nan"), float("nan"), float("nan")])
    cut.loc[cut["id"] == "s3.b", "ci_high"] = 0.2
    assert st.compare(BASE, cut)["s3.b"]["units_to_settle"] == 46
    assert st.compare(BASE, cut.drop(columns="se"))["s3.b"]["units_to_settle"] == 32


def test_counts_are_decided_verdicts_per_paper_and_the_newly_decided_apart():
    assert st.counts(st.compare(BASE, RERUN)) == {
        "s2": {"stable": 1, "fragile": 1, "newly_decided": 1},
        "s3": {"stable": 1, "fragile": 1, "newly_decided": 0},
    }


def test_a_rerun_that_lacks_a_claim_is_one_error_line():
    with pytest.raises(Exception, match="lacks 1 claims"):
        st.compare(BASE, RERUN[RERUN["id"] != "s2.c"])


def claim(claim_id: str, effect: float, low: float, high: float, units: int = 10):
    return judge(claim_id, paper="S3", quote="q", where="w", effect_name="e", direction="+",
                 estimate=Estimate(effect, low, high, units), unit="dialogs")  # fmt: skip


def test_marks_say_stable_fragile_unmeasured_or_not_decided():
    record = st.compare(BASE, RERUN)
    claims = [claim("s3.a", 0.2, 0.1, 0.3), claim("s3.b", 0.2, 0.1, 0.3),
              claim("s3.z", 0.2, 0.1, 0.3), claim("s2.d", 0.1, -0.1, 0.3),
              claim("s2.c", 0.3, 0.2, 0.4), claim("s2.e", 0.2, 0.1, 0.31)]  # fmt: skip
    marked = {c.id: c for c in st.mark(claims, record)}
    assert marked["s3.a"].stable == "stable"
    assert marked["s3.b"].stable == "fragile"
    assert marked["s3.z"].stable == "unmeasured"  # no rerun on record
    assert marked["s2.d"].stable == "not decided"
    # the record's committed result is another: contradicted there, reproduced here ...
    assert marked["s2.c"].stable == "unmeasured"
    # ... or the same verdict with another interval (another profile, machine or commit)
    assert marked["s2.e"].stable == "unmeasured"
    assert marked["s3.b"].verdict == REPRODUCED  # a fragile verdict keeps its verdict
    assert marked["s3.b"].note.endswith(
        "fragile: under other floats (ATen's AVX2 kernels, make stability) it read "
        "inconclusive, 0.1 [-0.05, 0.25]; about 46 dialogs (4.60x now) would decide it in both "
        "runs at 80 % power"
    )
    crossed = st.mark([claim("s2.e", 0.2, 0.1, 0.3)], record)[0]
    assert crossed.note.endswith(
        "its effect crossed the null, so more dialogs at these effects would not settle it; "
        "another sample would show which side holds"
    )
    entry = record["s3.b"] | {"units": 40}
    assert st.fragile_note(entry, "40 attack prompts x 6 training runs").endswith(
        "about 46 attack prompts (1.15x now) and 1.15 times the 6 training runs would decide it "
        "in both runs at 80 % power"
    )
    crossing = record["s2.e"] | {"units": 72}
    assert st.fragile_note(crossing, "72 members (crossed with the non-members and the "
                           "training runs)").endswith(
        "more members at these effects would not settle it; more training runs would show which "
        "side holds"
    )  # fmt: skip
    assert marked["s3.a"].note == claims[0].note
    assert all(c.stable == "unmeasured" for c in st.mark(claims[:1], {}))


def test_claims_json_and_page_separate_stable_from_fragile():
    marked = st.mark([claim("s3.a", 0.2, 0.1, 0.3), claim("s3.b", 0.2, 0.1, 0.3)],
                     st.compare(BASE, RERUN))  # fmt: skip
    body = json.loads(metrics_json(marked, 0.05))
    assert body["stability"] == {"s3": {"stable": 1, "fragile": 1, "unmeasured": 0}}
    assert body["claims"]["s3.b"]["stable"] == "fragile"
    page = markdown(marked, 0.05)
    assert "| s3 | 1 | 1 | 0 |" in page
    assert "- **s3.b** (reproduced): " in page


def test_the_cli_writes_the_record_and_refuses_a_file_that_is_no_claims_table(tmp_path, capsys):
    base, rerun, out = tmp_path / "base.csv", tmp_path / "rerun.csv", tmp_path / "s.json"
    BASE.to_csv(base, index=False)
    RERUN.to_csv(rerun, index=False)
    run = ["--commit", "abc", "--profile", "embedded", "--kernels", "AVX512", "AVX2",
           "--seconds", "3600"]  # fmt: skip
    st.main([str(rerun), "--base", str(base), *run, "--out", str(out)])
    written = json.loads(out.read_text())
    assert (written["commit"], written["profile"], written["seconds"]) == ("abc", "embedded", 3600)
    assert written["kernels"] == {"default": "AVX512", "perturbed": "AVX2"}
    assert written["claims"]["s3.b"]["held"] is False
    assert "s3: 1 stable, 1 fragile, 0 newly decided" in capsys.readouterr().out
    (tmp_path / "bad.csv").write_text("id,verdict\nx,reproduced\n")
    with pytest.raises(SystemExit, match="bad.csv: not a claims table"):
        st.main([str(tmp_path / "bad.csv"), "--base", str(base), *run, "--out", "x"])


def test_the_committed_marks_are_what_the_committed_record_says():
    """Every decided claim of metrics/claims.json is stable or fragile exactly when
    metrics/stability.json holds that very verdict, effect and interval, and unmeasured otherwise
    (a record from before a change of procedure holds other intervals: `make stability` refreshes
    it)."""
    claims = json.loads((ROOT / "metrics" / "claims.json").read_text())["claims"]
    record = st.load(ROOT / "metrics" / "stability.json")
    for claim_id, c in claims.items():
        if c["verdict"] == INCONCLUSIVE:
            assert c["stable"] == "not decided", claim_id
            continue
        entry = record.get(claim_id)
        held = entry is not None and (entry["effect"][0], entry["ci"][0]) == (c["effect"], c["ci"])
        expected = ("stable" if entry["held"] else "fragile") if held else "unmeasured"
        assert c["stable"] == expected, claim_id
