"""privleak.claims.s1 on hand-built frames: the statistics behind S1's claims and the design's
rule for training runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privleak.claims import CONTRADICTED, INCONCLUSIVE, REPRODUCED, s1
from privleak.claims.procedures import ruled_out
from privleak.claims.registry import bootstrapper, claim

BOOT = bootstrapper(
    {"n_boot": 300, "seed": 0, "alpha": 0.05, "min_units": 3, "method": "percentile"}
)


def esp_frame(runs: int, greedy: list[float], sampling: list[float]) -> pd.DataFrame:
    """ESP rows of one family kind on models small/large (rank 0/1), one row per run, sequence,
    decoder, at one prefix length; the large model's log ESPs are given."""
    rows = []
    for run in range(runs):
        for seq, (g, s) in enumerate(zip(greedy, sampling, strict=True)):
            for model, rank in (("small", 0), ("large", 1)):
                for decoder, value in (("greedy", g), ("sampling", s)):
                    rows.append(
                        {"run": run, "seq_id": seq, "kind": "named_entity", "model": model,
                         "model_rank": rank, "decoder": decoder, "prefix_len": 8,
                         "log_esp": value, "duplicates": seq + 1}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def test_design_crosses_runs_only_on_the_family_with_enough_of_them():
    esp = esp_frame(3, [0.0], [-1.0])
    crossed = s1.design(esp, True, 3, "rule")
    assert crossed.crossed and crossed.largest == "large" and crossed.smallest == "small"
    assert crossed.units("named_entity") == "sequences x 3 training runs, large"
    assert crossed.one_run("named_entity") == ""
    few = s1.design(esp, True, 6, "rule")
    assert not few.crossed and few.one_run("named_entity") == "rule; the artifacts hold 3"
    assert few.units("named_entity", model="") == "sequences (named_entity)"
    assert s1.design(esp, False, 3, "rule").one_run("named_entity") == ""


def test_greedy_margin_and_best_random_margin():
    rows = np.array([[1.0, 0.2, 0.5], [0.0, 0.4, 0.1]])
    # greedy rate 0.5; mean ESPs 0.3 and 0.3: smallest margin 0.2
    assert s1.greedy_margin(rows) == pytest.approx(0.2)
    flags = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    # best decoder leaks 1.0, greedy 0.5
    assert s1.best_random_margin(flags) == pytest.approx(0.5)


def test_log_ratio_contrast_of_last_over_first_token_probability():
    rows = np.array([[1, 0.1, 1.0], [1, 0.1, 1.0], [0, 0.5, 0.5], [0, 0.5, 0.5]])
    assert s1.log_ratio_contrast(rows) == pytest.approx(math.log(10.0))


@pytest.mark.parametrize(
    ("greedy", "sampling", "verdict"),
    [
        ([0.0] + [-5.0] * 7, [-9.0] + [0.0] * 7, REPRODUCED),  # greedy 1 of 8, sampling 7
        ([-5.0] + [0.0] * 7, [0.0] + [-9.0] * 7, CONTRADICTED),  # greedy 7 of 8, sampling 1
        ([0.0, -5.0] * 4, [0.0, -5.0] * 4, INCONCLUSIVE),  # the same sequences leak
    ],
)
def test_random_beats_greedy_at_20_samples(greedy, sampling, verdict):
    esp = esp_frame(1, greedy, sampling)
    d = s1.design(esp, False, 3, "rule")
    found = [f for f in s1.decoder_findings(esp, d, BOOT) if "x20" in f.spec]
    assert len(found) == 1 and found[0].fields["decoder_slug"] == "sampling"
    hits = (np.array(sampling) >= -math.log(20)).mean() - (np.array(greedy) >= 0).mean()
    assert found[0].estimate.effect == pytest.approx(hits)
    assert claim(found[0]).verdict == verdict


def test_duplication_spearman_on_the_largest_model():
    # log ESP rising with the duplicates but for two swapped neighbours: Spearman 1 - 6 x 2 / 1716
    sampling = [float(-k) for k in range(12, 0, -1)]
    sampling[3], sampling[4] = sampling[4], sampling[3]
    esp = esp_frame(1, [0.0] * 12, sampling)
    d = s1.design(esp, False, 3, "rule")
    dup = next(f for f in s1.model_size_findings(esp, d, BOOT) if f.spec.startswith("s0."))
    assert dup.estimate.effect == pytest.approx(1 - 12 / 1716) and dup.estimate.low > 0
    # the interval excludes 0; the verdict is reproduced unless the coverage table rules the
    # procedure out at 12 units (one run: the percentile-and-t union over the sequences)
    judged = claim(dup)
    if ruled_out(dup.estimate.test.method, 12):
        assert judged.verdict == INCONCLUSIVE and "inconclusive by rule" in judged.note
    else:
        assert judged.verdict == REPRODUCED


def test_trailing_share_and_its_null():
    leaves = pd.DataFrame(
        {"decoder": ["top-k 5"] * 3, "n": [1, 1, 1], "seq_id": [0, 0, 1],
         "log_p": [-1.0, -2.0, -1.0], "truth": [[1, 2, 3, 4]] * 3,
         "positions": [[4], [1], [2]]}
    )  # fmt: skip
    trailing, m = s1.trailing_share(leaves, 1)
    assert m == 4 and list(trailing) == [1.0, 0.0]  # sequence 0's best leaf is its last token


def test_isp_slack_flags_an_exact_value_outside_the_bound():
    exact = pd.DataFrame({"exact": [0.5, 0.9], "approx": [0.4, 0.4], "bound": [0.2, 0.2]})
    slack = s1.isp_slack(exact)
    assert (slack[:2] > 0).all() and slack[3] < 0 < slack[2]


def test_prefix_findings_compare_the_longest_and_shortest_prefix():
    short = esp_frame(1, [0.0] * 4, [-3.0, -2.0, -1.0, -0.5]).assign(prefix_len=4)
    full = esp_frame(1, [0.0] * 4, [-1.0, -1.0, -1.0, -1.0])
    esp = pd.concat([short, full])
    d = s1.design(esp, False, 3, "rule")
    found = {f.spec: f for f in s1.prefix_findings(esp, d, BOOT)}
    longer = found["s1.longer_prefix_on_average.{kind}"]
    expected = np.mean(np.exp([-1.0] * 4) - np.exp([-3.0, -2.0, -1.0, -0.5]))
    assert longer.estimate.effect == pytest.approx(expected)
    assert (longer.fields["longest"], longer.fields["shortest"]) == (8, 4)
    # only the sequence at -0.5 is easier with the shorter prefix
    assert found["s1.some_easier_with_shorter_prefix.{kind}"].estimate.effect == pytest.approx(0.25)


def test_partial_findings_share_of_entities_easier_with_mismatches():
    isp = pd.DataFrame(
        {"seq_id": [0, 1, 2, 3] * 2, "decoder": ["top-k 5"] * 8, "n": [1] * 4 + [2] * 4,
         "log_esp": [math.log(0.1)] * 8, "approx": [0.2, 0.0, 0.0, 0.0, 0.2, 0.2, 0.0, 0.0]}
    )  # fmt: skip
    leaves = pd.DataFrame(columns=["decoder", "n", "seq_id", "log_p", "truth", "positions"])
    exact = pd.DataFrame(columns=["exact", "approx", "bound"])
    esp = esp_frame(1, [0.0], [-1.0])
    frames = {"isp": isp, "leaves": leaves, "exact": exact}
    found = {
        str(f.fields.get("n")) + f.spec: f
        for f in s1.partial_findings(frames, s1.design(esp, True, 3, "rule"), BOOT)
    }
    assert found["1s1.partial_not_easier_topk5.n{n}"].estimate.effect == pytest.approx(0.25)
    assert found["2s1.partial_not_easier_topk5.n{n}"].estimate.effect == pytest.approx(0.5)
    more = found["Nones1.partial_more_mismatches_easier"]
    assert more.estimate.effect == pytest.approx(0.25)
    assert more.missing.startswith("rule; the artifacts hold one training run")
    assert found["Nones1.isp_bound_holds"].missing.startswith("exact 1-ISP rows")


def test_trend_contrasts_resample_each_kind_within_itself():
    named = esp_frame(1, [0.0] * 4, [-1.0] * 4).assign(prefix_len=4)
    named = pd.concat([named, named.assign(prefix_len=8, log_esp=-2.0)])  # every one decreases
    long = named.assign(kind="long_sequence", log_esp=-1.0, seq_id=named["seq_id"] + 100)
    esp = pd.concat([named, long])
    tp = pd.concat(
        [
            pd.DataFrame({"run": 0, "seq_id": s + offset, "kind": kind, "decoder": "sampling",
                          "model": "large", "position": [0, 1], "log_tp": [-2.0, last]})
            for kind, last, offset in (("named_entity", 0.0, 0), ("long_sequence", -1.0, 100))
            for s in range(4)
        ]
    )  # fmt: skip
    d = s1.design(esp, False, 3, "rule")
    found = {f.spec: f for f in s1.trend_contrast_findings(esp, tp, d, BOOT)}
    assert found["s1.decreasing_with_prefix_ne_vs_long"].estimate.effect == pytest.approx(1.0)
    # named entities: last / first TP = e^2; 50-token sequences: e^1; log ratio difference 1
    assert found["s1.later_tokens_easier_ne_vs_long"].estimate.effect == pytest.approx(1.0)
    assert found["s1.later_tokens_easier.{kind}"].fields["units"].startswith("sequences")
