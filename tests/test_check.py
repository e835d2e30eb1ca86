"""The conformance check (`privleak.audit.check`) on hand-computable laws, its suite of seeded bugs
(`privleak.audit.mutants`) at smoke size, its command, and the user-facing example of
docs/audit-your-decoder.md."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from privleak.audit.check import (
    Claim,
    Pair,
    audit,
    canary_pairs,
    check,
    response_epsilon,
    token_epsilon,
)
from privleak.audit.mutants import detection, rdp_sigma, run_suite
from privleak.errors import PrivleakError

ROOT = Path(__file__).resolve().parents[1]


def test_a_pure_token_epsilon_is_the_largest_log_ratio_both_ways():
    inside = torch.log(torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64))
    outside = torch.log(torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64))
    assert token_epsilon(inside, outside, 0.0) == pytest.approx(math.log(0.5 / 0.2))


def test_an_approximate_token_epsilon_is_where_the_hockey_stick_reaches_delta():
    # two tokens: H_eps(P' || P) = (0.9 - e^eps 0.1)_+ (the second token's part is 0 for eps >= 0)
    inside = torch.log(torch.tensor([0.9, 0.1], dtype=torch.float64))
    outside = torch.log(torch.tensor([0.1, 0.9], dtype=torch.float64))
    delta = 0.05
    assert token_epsilon(inside, outside, delta) == pytest.approx(math.log(0.85 / 0.1), abs=1e-9)


def test_a_composed_pure_epsilon_is_steps_times_the_token_one():
    inside = torch.log(torch.tensor([0.6, 0.4], dtype=torch.float64))
    outside = torch.log(torch.tensor([0.4, 0.6], dtype=torch.float64))
    single = math.log(1.5)
    # pure: the all-first-token response has loss 5 ln 1.5 (grid rounding takes at most 5 cells)
    assert response_epsilon(inside, outside, 0.0, 5) == pytest.approx(5 * single, abs=0.011)
    assert response_epsilon(inside, outside, 0.0, 5) <= 5 * single


def test_a_token_only_one_side_can_emit_is_an_infinite_loss():
    inside = torch.log(torch.tensor([0.5, 0.5], dtype=torch.float64))
    outside = torch.tensor([0.0, -math.inf], dtype=torch.float64)
    assert token_epsilon(inside, outside, 0.0) == math.inf
    assert response_epsilon(inside, outside, 1e-5, 3) == math.inf
    assert token_epsilon(inside, outside, 0.6) == pytest.approx(0.0)  # delta covers that mass
    # a response whose infinite-loss mass stays within delta is bounded by its finite part
    rare = torch.log(torch.tensor([0.999995, 0.000005], dtype=torch.float64))
    assert 0 <= response_epsilon(rare, outside, 1e-3, 3) < math.inf


def test_the_neighbours_follow_the_relation():
    for relation, rows in (("add", (3, 4)), ("replace", (3, 3)), ("any", (1, 1))):
        for pair in canary_pairs(Claim(1.0, relation=relation), vocab=5, documents=3, bases=1):
            assert (pair.outside.shape[0], pair.inside.shape[0]) == rows
    for pair in canary_pairs(Claim(1.0, 1e-5, relation="shift", sensitivity=2.0), vocab=5):
        assert float((pair.inside - pair.outside).norm()) == pytest.approx(2.0)


def test_the_check_passes_a_correct_mechanism_and_flags_its_twin_with_less_noise():
    def law(epsilon):
        return lambda context, public: torch.log_softmax(epsilon * torch.softmax(context, -1)
                                                         .sum(0) / 2, -1)  # fmt: skip

    claim = Claim(1.0, relation="add")
    assert not check(law(1.0), claim, vocab=5).violated
    report = check(law(4.0), claim, vocab=5)
    assert report.violated and report.audited > 1.0 and "claimed epsilon 1" in report.line()


def test_bounded_laws_are_read_from_the_safe_side():
    inside = (torch.log(torch.tensor([0.5, 0.5])), torch.log(torch.tensor([0.6, 0.6])))
    outside = (torch.log(torch.tensor([0.2, 0.7])), torch.log(torch.tensor([0.3, 0.8])))
    # ln(0.5 / 0.3) one way, ln(0.2 / 0.6)... the other way its largest is ln(0.7 / 0.6)
    assert token_epsilon(inside, outside, 0.0) == pytest.approx(math.log(0.5 / 0.3), abs=1e-6)
    pair = Pair(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(2), "fixed")
    report = audit(lambda c, p: (torch.zeros(2) - 1.0, torch.zeros(2) - 0.5), Claim(1.0), [pair])
    assert report.audited == pytest.approx(0.0)  # lower minus upper bound: -0.5, floored at 0


def test_bad_claims_are_refused_in_one_line():
    with pytest.raises(PrivleakError, match="relation"):
        Claim(1.0, relation="swap")
    with pytest.raises(PrivleakError, match="sensitivity"):
        Claim(1.0, relation="shift")
    with pytest.raises(PrivleakError, match="epsilon"):
        Claim(0.0)


def test_the_rdp_sigma_meets_its_epsilon_and_its_bugs_use_less_noise():
    sigma = rdp_sigma(2.0, 1e-5, 3.0, 1)
    assert rdp_sigma(2.0, 1e-5, 3.0, 4) == pytest.approx(2 * sigma, rel=1e-6)  # sqrt(steps)
    assert rdp_sigma(2.0, 1e-5, 3.0, 1, squared=False) < sigma
    assert rdp_sigma(2.0, 1e-5, 3.0, 1, conversion=False) < sigma


def test_the_suite_catches_every_seeded_bug_and_no_correct_mechanism():
    results = run_suite(vocab=6, bases=2)
    summary = detection(results)
    assert summary["mutants"] >= 15 and summary["correct"] >= 5
    assert summary["detection_rate"] >= 0.9, results[~results["correct"]].to_string()
    assert summary["false_flags"] == 0, results[results["correct"]].to_string()
    assert np.all(
        results.loc[~results["flagged"], "audited"]
        <= results.loc[~results["flagged"], "claimed"] * 1.0001
    )


COMMAND = [sys.executable, "-m", "privleak.audit.check"]
DECODERS = """
import torch


def _law(context, epsilon):
    utility = context.clamp(-1.0, 1.0).mean(0)  # replacing one of k documents moves it <= 2 / k
    return torch.log_softmax(epsilon * utility / (2 * 2.0 / context.shape[0]), -1)


def honest(context, public):
    return _law(context, 1.0)


def greedy(context, public):
    return _law(context, 3.0)
"""


def test_the_command_refuses_bad_input_in_one_line():
    done = subprocess.run(COMMAND + ["--law", "privleak.audit.check:nothing", "--epsilon", "1"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--law" in done.stderr


def test_the_command_exits_0_when_consistent_and_1_on_a_violation(tmp_path):
    (tmp_path / "decoders.py").write_text(DECODERS)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    env = os.environ | {"PYTHONPATH": path}
    for name, code in (("honest", 0), ("greedy", 1)):
        done = subprocess.run(
            COMMAND + ["--law", f"decoders:{name}", "--epsilon", "1", "--relation", "replace"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert done.returncode == code, done.stdout + done.stderr
        assert done.stdout.count("\n") == 1 and ("VIOLATED" in done.stdout) == bool(code)


def test_the_users_example_runs():
    page = (ROOT / "docs" / "audit-your-decoder.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S)[1]
    assert len(code.splitlines()) <= 25
    namespace: dict = {}
    exec(compile(code, "audit-your-decoder.md", "exec"), namespace)
    assert not namespace["correct"].violated and namespace["broken"].violated


def test_the_gaussian_cases_audit_below_their_exact_epsilon_the_docs_quote():
    # docs/results/audit.md quotes the exact Gaussian-DP epsilon of the correct Gaussian case
    # (1.56) and of the unsquared bug (2.88); a valid audit stays below each
    from privleak.audit.accountants import gaussian_pld_epsilon
    from privleak.audit.check import check
    from privleak.audit.mutants import DELTA, GAUSSIAN_EPSILON, SENSITIVITY, suite

    exact = {
        "gaussian": gaussian_pld_epsilon(SENSITIVITY / rdp_sigma(GAUSSIAN_EPSILON, DELTA,
                                                                 SENSITIVITY, 1), DELTA),
        "gaussian_unsquared": gaussian_pld_epsilon(SENSITIVITY / rdp_sigma(
            GAUSSIAN_EPSILON, DELTA, SENSITIVITY, 1, squared=False), DELTA),
    }  # fmt: skip
    assert round(exact["gaussian"], 2) == 1.56 and round(exact["gaussian_unsquared"], 2) == 2.88
    for case in suite():
        if case.name in exact:
            assert check(case.law, case.claim, vocab=6, bases=1).audited <= exact[case.name]
