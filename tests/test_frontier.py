"""The frontier (privleak.frontier): matched-utility interpolation on a hand-built sweep, the
Pareto set on a hand-built point cloud, the paired bootstrap's pairing, the secrets a context
exposes, every defense's token law against its definition, and the forced rows against one
full forward per candidate."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from privleak.cid import cid_logprobs
from privleak.dp_icl import dp_icl_utility
from privleak.dp_rag import DPICLSettings
from privleak.errors import PrivleakError
from privleak.frontier import task
from privleak.frontier.laws import (
    Aggregated,
    Mixed,
    Noisy,
    Plain,
    forced_secrets,
    secret_logprob,
)
from privleak.frontier.matched import (
    Units,
    matched_leakage,
    pareto_set,
    resampled_matched,
)
from privleak.frontier.points import Point, curves, sweep
from privleak.frontier.secrets import document_offsets, emitted, exposed_secrets, name_rows
from privleak.frontier.summary import REFUSAL, comparison, matched, unit_matrices
from privleak.pad import StaticNoise
from tests.conftest import tiny_llama

# ---- matched utility on a hand-built sweep


def test_matched_leakage_is_the_least_mixture_that_reaches_the_target():
    # settings (utility, leakage): (0, 0.15), (0.6, 0.50), (0.8, 0.49); target 0.72. Reaching
    # it: the setting (0.8, 0.49), the mixture of (0.6, 0.50) and (0.8, 0.49) with q = 0.6
    # (0.494), and that of (0, 0.15) and (0.8, 0.49) with q = 0.9: 0.1 * 0.15 + 0.9 * 0.49 =
    # 0.456, the least, though (0, 0.15) and (0.8, 0.49) are not neighbours on the sweep
    found = matched_leakage([0.0, 0.6, 0.8], [0.15, 0.50, 0.49], 0.72)
    assert found.leakage == pytest.approx(0.456) and found.mixture


def test_matched_leakage_of_a_setting_that_reaches_the_target_alone():
    # (0.7, 0.1) reaches 0.6 alone and leaks less than any mixture with (0.2, 0.3)
    found = matched_leakage([0.2, 0.7, 0.8], [0.3, 0.1, 0.4], 0.6)
    assert found.leakage == pytest.approx(0.1) and not found.mixture


def test_matched_leakage_out_of_reach_and_at_a_setting_exactly():
    assert math.isnan(matched_leakage([0.1, 0.3], [0.0, 1.0], 0.5).leakage)
    assert matched_leakage([0.0, 0.5, 1.0], [0.0, 0.2, 0.9], 0.5).leakage == pytest.approx(0.2)
    # order does not matter: the hull of the points
    assert matched_leakage([1.0, 0.0], [0.9, 0.0], 0.5).leakage == pytest.approx(0.45)


def test_matched_leakage_rejects_a_non_finite_point():
    with pytest.raises(PrivleakError, match="not finite"):
        matched_leakage([0.0, float("nan")], [0.0, 1.0], 0.5)


# ---- the Pareto set on a hand-built cloud


def test_pareto_set_keeps_exactly_the_undominated_points():
    #           A     B     C     D     E     F (= B)
    utility = [0.9, 0.8, 0.7, 0.9, 0.5, 0.8]
    leakage = [0.5, 0.1, 0.2, 0.6, 0.0, 0.1]
    # C is dominated by B (more utility, less leakage), D by A (same utility, less leakage);
    # B and its copy F dominate neither each other nor are dominated
    assert pareto_set(utility, leakage) == [0, 1, 4, 5]


def test_pareto_set_of_one_point_and_of_a_chain():
    assert pareto_set([0.3], [0.7]) == [0]
    assert pareto_set([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]) == [2]


# ---- the paired bootstrap


def _sweep_units():
    """Three points on 8 units: none (index 0) and two defenses whose curves are [1, 0] and
    [2, 0], both answering nothing right; defense 1 leaks 0.25 on every unit, defense 2 nothing.
    At target 0.5 x accuracy(none) = 0.5 each matched value is the half-half mixture with none."""
    rng = np.random.default_rng(3)
    accuracy = np.stack([np.ones(8), np.zeros(8), np.zeros(8)])
    leak_none = rng.uniform(0.5, 1.0, 8)
    leakage = np.stack([leak_none, np.full(8, 0.25), np.zeros(8)])
    return Units(accuracy, leakage, paired=True), {"one": [1, 0], "two": [2, 0]}


def test_paired_draws_resample_utility_and_leakage_with_the_same_units():
    units, _ = _sweep_units()
    first, second = units.draws(200, seed=0)
    assert np.array_equal(first, second)
    unpaired = Units(units.utility, units.leakage[:, :5], paired=False)
    first, second = unpaired.draws(200, seed=0)
    assert second.shape == (200, 5) and not np.array_equal(first[:, :5], second)


def test_every_defense_sees_the_same_resampled_units():
    units, curves_ = _sweep_units()
    observed, resamples = resampled_matched(units, curves_, 0, 0.5, n_boot=300, seed=1)
    # one - two = 0.5 * (0.25 - 0) on the data and on every resample: a difference with no
    # spread, which only a paired draw gives
    assert observed["one"].leakage - observed["two"].leakage == pytest.approx(0.125)
    np.testing.assert_allclose(resamples["one"] - resamples["two"], 0.125)
    assert np.std(resamples["one"]) > 0  # each alone varies with the drawn units


def test_a_defense_compared_with_itself_is_exactly_zero_and_refusal_is_share_times_none():
    responses, leakage, points = _artifacts()
    matrices = unit_matrices(responses, leakage, points["point"].tolist())
    found = matched(matrices, points, 0.5, n_boot=200, seed=0)
    same = comparison(found, "secret_mass", "static", "static", 4, alpha=0.05)
    # no sampling spread, but the noisy law's bounds widen the interval on both sides
    assert same.effect == 0 and same.low < 0 < same.high
    sampled = comparison(found, "emitted", "static", "static", 4, alpha=0.05)
    assert sampled.effect == sampled.low == sampled.high == 0
    observed, _ = found["secret_mass"]
    none_mass = matrices["secret_mass"][0].mean()
    assert observed[REFUSAL].leakage == pytest.approx(0.5 * none_mass)


def _artifacts():
    """frontier_generate-shaped frames: 4 units, points none and static=1 (curve [1, 0])."""
    rows, leaks = [], []
    for u in range(4):
        q = f"q{u}"
        for point, correct, emitted_count in (("none", True, 1), ("static=1", u % 2 == 0, 0)):
            rows.append(
                {
                    "kind": "utility",
                    "question_id": q,
                    "point": point,
                    "text": "x",
                    "correct": correct,
                    "rouge": 0.5,
                    "ppl": 10.0,
                    "emitted": None,
                }
            )
            rows.append({"kind": "attack", "question_id": q, "point": point, "text": "y",
                         "correct": None, "rouge": 0.2, "ppl": 12.0,
                         "emitted": emitted_count})  # fmt: skip
            for j in range(2):
                logprob = math.log(0.4) if point == "none" else math.log(0.1)
                low, high = (logprob, logprob) if point == "none" else (math.log(0.05), logprob)
                leaks.append({"question_id": q, "secret": j, "point": point, "logprob": logprob,
                              "logprob_low": low, "logprob_high": high})  # fmt: skip
    points = pd.DataFrame(
        {
            "point": ["none", "static=1"],
            "defense": ["none", "static"],
            "knob": ["", "σ"],
            "value": [math.nan, 1.0],
            "epsilon": [math.nan, math.nan],
            "epsilon_all_steps": [math.nan, math.nan],
            "curve": ["", "1,0"],
        }
    )
    return pd.DataFrame(rows), pd.DataFrame(leaks), points


def test_unit_matrices_sum_the_secret_probabilities_per_unit():
    responses, leakage, points = _artifacts()
    matrices = unit_matrices(responses, leakage, points["point"].tolist())
    np.testing.assert_allclose(matrices["secret_mass"][0], 0.8)  # 2 secrets x 0.4
    np.testing.assert_allclose(matrices["secret_mass"][1], 0.2)
    np.testing.assert_allclose(matrices["secret_mass_low"][1], 0.1)  # 2 x the lower bound 0.05
    np.testing.assert_allclose(matrices["accuracy"][1], [1, 0, 1, 0])
    np.testing.assert_allclose(matrices["emitted"][0], 1)


# ---- points and curves


def test_sweep_orders_each_curve_from_most_private_and_ends_it_at_none():
    points = sweep({"static": [1.0, 4.0, 2.0], "pad": [0.2, 0.05], "summ": []})
    names = [p.name for p in points]
    assert names == ["none", "static=4", "static=2", "static=1", "pad=0.05", "pad=0.2", "summ"]
    assert curves(points) == {"static": [1, 2, 3, 0], "pad": [4, 5, 0], "summ": [6, 0]}


@pytest.mark.parametrize(
    ("defenses", "message"),
    [({"stat": [1.0]}, "defense 'stat' is unknown"), ({"summ": [1.0]}, "has no knob"),
     ({"pad": []}, "needs at least one knob value"), ({"cid": [0.5, 0.5]}, "repeats a value")],
)  # fmt: skip
def test_sweep_rejects_a_bad_defense_list(defenses, message):
    with pytest.raises(PrivleakError, match=message):
        sweep(defenses)


def test_nominal_epsilon_of_each_defense():
    assert task.nominal_epsilon(Point("bounded_cid", 0.5), 16) == 8.0
    assert task.nominal_epsilon(Point("dp_icl", 5.0), 16) == 5.0
    assert task.nominal_epsilon(Point("pad", 0.2), 16, pad_epsilon=3.5) == 3.5
    assert math.isnan(task.nominal_epsilon(Point("static", 1.0), 16))


def test_dp_icl_splits_the_response_epsilon_over_its_tokens():
    settings = {"alpha": 1.0, "clip": 0.5, "theta": 0.01}
    one = task.dp_icl_setting(Point("dp_icl", 5.0), settings, 1e-3, 1, 2)
    many = task.dp_icl_setting(Point("dp_icl", 5.0), settings, 1e-3, 16, 2)
    assert one.epsilon == pytest.approx(5.0, abs=1e-3) and many.epsilon < 5.0 / 4
    assert one.sensitivity == 2


def test_event_bounds_compose_the_per_token_epsilon_over_the_secret():
    setting = DPICLSettings(0.3, 1.0, 0.5, 0.01, 2)
    law = Aggregated(setting, ("a",))
    assert task.event_bound(Point("dp_icl", 5.0), law, ({}, {}), 2, 4, {}) == (
        pytest.approx(1.2), 0.0)  # fmt: skip
    assert task.event_bound(Point("bounded_cid", 2.0), Mixed(1.0, 2.0), ({}, {}), 2, 3, {}) == (
        6.0, 0.0)  # fmt: skip
    assert all(math.isnan(v) for v in task.event_bound(Point("static", 1.0), Plain("rag"),
                                                       ({}, {}), 2, 3, {}))  # fmt: skip


def test_distinct_units_keep_the_first_of_two_equal_questions_with_equal_contexts():
    contexts = {"u1": ["a", "b"], "u2": ["a", "b"], "u3": ["a", "c"]}
    questions = {"u1": "q", "u2": "q", "u3": "q"}
    assert list(task.distinct_units(contexts, questions)) == ["u1", "u3"]


def test_the_keyword_list_holds_the_stores_names_first():
    records = [{"patient": "Ann Lee"}, {"patient": " "}, {"patient": "Ann Lee"}, {}]
    assert task.keyword_list(records, ["serial number"]) == ["Ann Lee", "serial number"]


class _Words:
    """A tokenizer whose tokens are words (a leading space is its own token)."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": ([0] if text.startswith(" ") else []) + [len(w) for w in text.split()]}


def test_the_cue_is_cut_from_the_front_to_fit_the_response():
    cue, secret = task.fitted_target(_Words(), "a bb ccc dddd", "ee ff", 5)
    assert secret == [0, 2, 2] and cue == [3, 4]  # 5 tokens in all: the cue's last two words
    # an opening secret: no cue, and no leading space
    assert task.fitted_target(_Words(), "", "ee ff", 5) == ([], [2, 2])
    assert task.fitted_target(_Words(), "a bb", "ee ff", 3) == ([], [0, 2, 2])  # no room left
    with pytest.raises(PrivleakError, match="attack.max_new_tokens = 2: the secret 'ee ff'"):
        task.fitted_target(_Words(), "a", "ee ff", 2)


def test_central_is_the_midpoint_in_probability():
    assert task.central(-1.0, -1.0) == -1.0
    assert task.central(math.log(0.1), math.log(0.3)) == pytest.approx(math.log(0.2))
    assert task.central(-math.inf, math.log(0.4)) == pytest.approx(math.log(0.2))


def test_left_out_law_of_each_kind():
    setting = DPICLSettings(1.0, 1.0, 0.5, 0.01, 1)
    assert task.left_out(Aggregated(setting, ("a", "b")), "a") == Aggregated(setting, ("b",))
    assert task.left_out(Aggregated(setting, ("a",)), "a") is None
    # a fixed number of contexts: the next-ranked document takes the removed one's place
    assert task.left_out(Aggregated(setting, ("a", "b")), "a", "c") == Aggregated(
        setting, ("b", "c"))  # fmt: skip
    assert task.neighbour(["a", "b", "c"], "b", "d") == ["a", "c", "d"]
    assert task.neighbour(["a", "b"], "b", None) == ["a"]
    assert task.left_out(Plain("rag"), "a") == Plain("rag")
    assert task.left_out(Mixed(0.5), "a") == Mixed(0.5)
    assert task.left_out(Plain("dist=0.6"), "a") is None


# ---- secrets


RECORD = {"id": "d1", "patient": "Ann Lee", "request": "Ann Lee here: I have a cough. I also have "
          "a pacemaker with serial number AB-1234.", "response": "Ann Lee has a cold."}  # fmt: skip
TEXT = f"{RECORD['request']} {RECORD['response']}"


def test_exposed_secrets_score_an_opening_secret_as_the_response_opening_and_cut_the_cue():
    detail = "pacemaker with serial number AB-1234"
    start = RECORD["request"].index(detail)
    rows = name_rows([RECORD]) + [
        {
            "record_id": "d1",
            "field": "request",
            "kind": "rare_detail",
            "start": start,
            "end": start + len(detail),
            "text": detail,
        }
    ]
    planted = {"d1": rows}
    found = exposed_secrets(["d1"], {"d1": TEXT}, planted, {"d1": document_offsets(RECORD)}, 3,
                            ["name", "rare_detail"])  # fmt: skip
    # the name opens the document: an empty cue, and its recurrence is not scored again
    assert [(s.kind, s.text, s.cue) for s in found] == [
        ("name", "Ann Lee", ""),
        ("rare_detail", "pacemaker with serial number AB-1234", "also have a"),
    ]
    assert emitted("... Ann Lee ... AB-1234", found) == 1
    only_names = exposed_secrets(["d1"], {"d1": TEXT}, planted, {"d1": document_offsets(RECORD)},
                                 3, ["name"])  # fmt: skip
    assert [(s.kind, s.cue) for s in only_names] == [("name", "")]


def test_name_rows_find_every_occurrence_in_the_raw_fields():
    rows = name_rows([RECORD, {"id": "d2", "request": "no name", "response": "none"}])
    assert [(r["field"], r["start"]) for r in rows] == [("request", 0), ("response", 0)]


def test_a_secret_out_of_place_is_one_line():
    planted = {"d1": [{"field": "request", "start": 3, "kind": "name", "text": "Ann Lee"}]}
    with pytest.raises(PrivleakError, match="not at its recorded place"):
        exposed_secrets(["d1"], {"d1": TEXT}, planted, {"d1": document_offsets(RECORD)}, 3,
                        ["name"])  # fmt: skip


# ---- token laws against their definitions, from hand-made rows


def _rows(seed: int = 0, vocab: int = 11, steps: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    names = ("rag", "public", "a", "b", "dist=0.6")
    return {n: torch.log_softmax(torch.randn(steps, vocab, generator=g) * 2, -1) for n in names}


SECRET = [4, 7, 1]
OPTIONS = {"temperature": 0.7}


def _taken(logprobs: torch.Tensor) -> tuple[float, float]:
    value = float(logprobs[torch.arange(len(SECRET)), SECRET].double().sum())
    return pytest.approx((value, value))


def test_plain_law_is_the_tempered_softmax_of_its_stream():
    rows = _rows()
    expected = _taken(torch.log_softmax(rows["dist=0.6"] / 0.7, -1))
    assert secret_logprob(Plain("dist=0.6"), rows, SECRET, 2, **OPTIONS) == pytest.approx(expected)


def test_every_law_excludes_eos_where_the_decoder_does():
    # an opening secret (cue 0) under min_new_tokens 2: EOS (token 9) is excluded at the
    # secret's first two positions, so each law's probability of the secret rises
    rows, setting = _rows(), DPICLSettings(2.0, 1.0, 0.5, 0.01, 1)
    blocked = {"eos_token_id": 9, "min_new_tokens": 2}
    for law in (Plain("rag"), Mixed(0.5), Mixed(1.0, 0.5), Aggregated(setting, ("a", "b")),
                Noisy("rag", StaticNoise(0.5))):  # fmt: skip
        free, _ = secret_logprob(law, rows, SECRET, 0, **OPTIONS)
        kept, _ = secret_logprob(law, rows, SECRET, 0, **OPTIONS, **blocked)
        assert kept > free, law
        # after a cue of 2 tokens no forced position is blocked
        late, _ = secret_logprob(law, rows, SECRET, 2, **OPTIONS, **blocked)
        assert late == pytest.approx(secret_logprob(law, rows, SECRET, 2, **OPTIONS)[0]), law
    plain, _ = secret_logprob(Plain("rag"), rows, SECRET, 0, **OPTIONS, **blocked)
    expected = rows["rag"] / 0.7
    expected[:2, 9] = -math.inf
    direct = torch.log_softmax(expected, -1)[torch.arange(len(SECRET)), SECRET].sum()
    assert plain == pytest.approx(float(direct))


def test_mixed_law_is_cid_and_its_ends_are_the_two_streams():
    rows = _rows()
    for lam in (0.0, 0.3, 1.0):
        expected = _taken(cid_logprobs(rows["rag"], rows["public"], lam, 0.7))
        assert secret_logprob(Mixed(lam), rows, SECRET, 2, **OPTIONS) == pytest.approx(expected)
    assert secret_logprob(Mixed(1.0), rows, SECRET, 2, **OPTIONS) == pytest.approx(
        secret_logprob(Plain("rag"), rows, SECRET, 2, **OPTIONS))  # fmt: skip


def test_bounded_mixed_law_keeps_each_token_within_half_its_epsilon_of_the_public_law():
    rows = _rows()
    bounded, _ = secret_logprob(Mixed(1.0, 0.4), rows, SECRET, 2, **OPTIONS)
    public = float(torch.log_softmax(rows["public"] / 0.7, -1)[torch.arange(3), SECRET].sum())
    assert abs(bounded - public) <= len(SECRET) * 0.4 / 2 + 1e-5


def test_aggregated_law_is_dp_icl_on_the_public_and_document_streams():
    rows, setting = _rows(), DPICLSettings(2.0, 1.0, 0.5, 0.01, 1)
    documents = torch.stack([rows["a"], rows["b"]], 1)
    utility = dp_icl_utility(rows["public"], documents, torch.ones(3, 2, dtype=torch.bool), 1.0,
                             0.5, 0.01)  # fmt: skip
    expected = _taken(torch.log_softmax(2.0 * utility / (2 * 0.5), -1))
    law = Aggregated(setting, ("a", "b"))
    assert secret_logprob(law, rows, SECRET, 2, **OPTIONS) == pytest.approx(expected)
    # one document less moves each token by at most its per-token epsilon (the DP guarantee)
    fewer, _ = secret_logprob(Aggregated(setting, ("b",)), rows, SECRET, 2, **OPTIONS)
    full, _ = secret_logprob(law, rows, SECRET, 2, **OPTIONS)
    assert abs(fewer - full) <= 3 * 2.0 + 1e-5


def test_noisy_law_bounds_hold_the_noiseless_law_and_the_sampled_frequency():
    rows = _rows()
    low, high = secret_logprob(Noisy("rag", StaticNoise(1e-6)), rows, SECRET, 2, **OPTIONS)
    plain, _ = secret_logprob(Plain("rag"), rows, SECRET, 2, **OPTIONS)
    assert low <= plain + 1e-6 and plain - 1e-6 <= high and high - low < 0.1  # the grid
    # Static noise of std 1: the bounds hold a Monte-Carlo frequency of the sampled tokens
    low, high = secret_logprob(Noisy("rag", StaticNoise(1.0)), rows, SECRET, 2, **OPTIONS)
    g = torch.Generator().manual_seed(5)
    draws = 200_000
    frequency = 0.0
    for step, token in enumerate(SECRET):
        noisy = rows["rag"][step] + torch.randn(draws, 11, generator=g)
        picked = torch.multinomial(torch.softmax(noisy / 0.7, -1), 1, generator=g)[:, 0]
        frequency += math.log(float((picked == token).double().mean()))
    assert low - 0.05 <= frequency <= high + 0.05 and low <= high


# ---- forced rows on a tiny model


def test_forced_secrets_equal_one_full_forward_per_stream_and_share_equal_streams():
    torch.manual_seed(0)
    model = tiny_llama(vocab_size=32).eval()
    streams = {"rag": [1, 5, 6, 7, 8, 9], "public": [1, 5, 9], "same": [1, 5, 9]}
    targets = [([3, 4], [10, 11, 12]), ([2], [13])]
    requests = [(s, j) for s in streams for j in range(2)]
    forced = forced_secrets(model, streams, requests, targets, pad_id=0, batch_rows=3)
    for stream, j in requests:
        cue, secret = targets[j]
        ids = torch.tensor([streams[stream] + cue + secret])
        with torch.no_grad():
            full = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        start = len(streams[stream]) + len(cue) - 1
        torch.testing.assert_close(forced[(stream, j)], full[start : start + len(secret)],
                                   atol=1e-4, rtol=1e-4)  # fmt: skip
    torch.testing.assert_close(forced[("same", 0)], forced[("public", 0)])
