"""make verify: metrics compared with the committed ones within declared tolerances."""

from __future__ import annotations

import json
import subprocess

import pytest

from privleak import paths, verify
from privleak.errors import PrivleakError

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
