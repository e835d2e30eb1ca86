"""make verify: metrics compared with the committed ones within declared tolerances."""

from __future__ import annotations

import json
import subprocess

import pytest

from privleak.errors import PrivleakError
from privleak.pipeline import paths, verify

TOLERANCES = """\
default: {abs: 1.0e-6, rel: 1.0e-4}
rules:
  - {match: "s1:*spearman*", abs: 0.05}
"""
REFERENCE = {
    "tau": {"8": 3.85, "64": 10.6},
    "ne_spearman": 0.81,
    "claims": [{"id": "s0-lambda", "verdict": "reproduced"}],
}


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository whose HEAD holds metrics/s1.json = REFERENCE and the tolerances."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "tolerances.yaml").write_text(TOLERANCES)
    (metrics / "s1.json").write_text(json.dumps(REFERENCE))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(git + ["add", "."], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "reference"], cwd=tmp_path, check=True)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    return metrics


def rewrite(metrics, **changes):
    current = json.loads(json.dumps(REFERENCE))
    for dotted, value in changes.items():
        node = current
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    (metrics / "s1.json").write_text(json.dumps(current))


def failures(metrics):
    return [c for _, c in verify.verify("HEAD", metrics) if not c.ok]


def test_unchanged_metrics_pass(repo):
    assert verify.verify("HEAD", repo) == []


def test_a_planted_metric_change_beyond_tolerance_fails(repo):
    rewrite(repo, tau__64=10.7)
    (failure,) = failures(repo)
    assert (failure.key, failure.old, failure.new) == ("tau.64", 10.6, 10.7)


def test_float_noise_within_the_default_tolerance_passes(repo):
    rewrite(repo, tau__64=10.6 * (1 + 5e-5))
    changes = verify.verify("HEAD", repo)
    assert len(changes) == 1 and changes[0][1].ok


def test_a_rule_loosens_only_the_keys_it_matches(repo):
    rewrite(repo, ne_spearman=0.85)
    assert failures(repo) == []
    rewrite(repo, ne_spearman=0.87)
    assert [c.key for c in failures(repo)] == ["ne_spearman"]


def test_a_changed_verdict_fails_whatever_the_tolerance(repo):
    current = json.loads(json.dumps(REFERENCE))
    current["claims"][0]["verdict"] = "inconclusive"
    (repo / "s1.json").write_text(json.dumps(current))
    (failure,) = failures(repo)
    assert failure.key == "claims[0].verdict" and failure.why == "must be equal"


def test_a_lost_or_new_key_fails(repo):
    current = json.loads(json.dumps(REFERENCE))
    del current["ne_spearman"]
    current["extra"] = 1
    (repo / "s1.json").write_text(json.dumps(current))
    assert {(c.key, c.why) for c in failures(repo)} == {
        ("ne_spearman", "missing now"),
        ("extra", "new key"),
    }


def test_uncommitted_metrics_file_is_a_one_line_error(repo):
    (repo / "s0.json").write_text("{}")
    with pytest.raises(PrivleakError, match="metrics/s0.json is not committed at HEAD"):
        verify.verify("HEAD", repo)


def test_negative_tolerance_is_rejected(repo):
    (repo / "tolerances.yaml").write_text("default: {abs: -1}\n")
    with pytest.raises(PrivleakError, match=r"tolerances.yaml: default must be \{abs: >= 0"):
        verify.verify("HEAD", repo)


def test_nan_equals_only_nan():
    tolerance = verify.Tolerance(abs=1.0)
    assert tolerance.allows(float("nan"), float("nan"))
    assert not tolerance.allows(float("nan"), 0.0)


CLAIMS_TOLERANCES = """\
default: {abs: 1.0e-6, rel: 1.0e-4}
rules:
  - {match: "claims:*.effect", within: interval}
  - {match: "claims:*.ci*", within: width}
  - {match: "s0:*", report: true}
"""
CLAIMS = {
    "claims": {
        "s1.a": {"ci": [0.2, 0.6], "effect": 0.4, "verdict": "reproduced"},
        "s1.none": {"ci": [None, None], "effect": 0.0, "verdict": "inconclusive"},
    }
}


@pytest.fixture
def claims_repo(repo):
    """The repo fixture plus a committed claims.json and s0.json under interval-based rules."""
    (repo / "tolerances.yaml").write_text(CLAIMS_TOLERANCES)
    (repo / "claims.json").write_text(json.dumps(CLAIMS))
    (repo / "s0.json").write_text(json.dumps({"tau": 90.9, "all_within_eps": True}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "."], cwd=repo.parent, check=True)
    subprocess.run(git + ["commit", "-qm", "claims"], cwd=repo.parent, check=True)
    return repo


def write_claims(metrics, claim, **fields):
    current = json.loads(json.dumps(CLAIMS))
    current["claims"][claim] |= fields
    (metrics / "claims.json").write_text(json.dumps(current))


@pytest.mark.parametrize(
    "fields, ok",
    [
        ({"effect": 0.55}, True),  # inside the committed [0.2, 0.6]
        ({"effect": 0.65}, False),  # outside it
        ({"ci": [0.5, 0.9]}, True),  # bounds moved by 0.3 <= the committed width 0.4
        ({"ci": [0.2, 1.1]}, False),  # the upper bound moved 0.5 > 0.4
    ],
)
def test_a_claim_effect_stays_inside_its_committed_interval(claims_repo, fields, ok):
    write_claims(claims_repo, "s1.a", **fields)
    changes = [c for _, c in verify.verify("HEAD", claims_repo)]
    assert changes and all(c.ok == ok for c in changes)
    assert (failures(claims_repo) == []) == ok


def test_a_claim_without_an_interval_falls_back_to_the_tolerance(claims_repo):
    write_claims(claims_repo, "s1.none", effect=1e-9)
    assert failures(claims_repo) == []
    write_claims(claims_repo, "s1.none", effect=0.04)
    assert [c.key for c in failures(claims_repo)] == ["claims.s1.none.effect"]


def test_reported_numbers_never_fail_but_booleans_still_must_be_equal(claims_repo):
    (claims_repo / "s0.json").write_text(json.dumps({"tau": 81.0, "all_within_eps": True}))
    (change,) = [c for _, c in verify.verify("HEAD", claims_repo)]
    assert change.ok and "reported, not gated" in change.why
    (claims_repo / "s0.json").write_text(json.dumps({"tau": 81.0, "all_within_eps": False}))
    assert [c.key for c in failures(claims_repo)] == ["all_within_eps"]


def test_an_unknown_within_is_a_one_line_error(repo):
    (repo / "tolerances.yaml").write_text('rules:\n  - {match: "*", within: seeds}\n')
    with pytest.raises(PrivleakError, match=r"rules\[0\] within must be one of") as info:
        verify.verify("HEAD", repo)
    assert "\n" not in str(info.value)
