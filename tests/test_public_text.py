"""Public-text candidates for the SmolLM2 part of S1: license detection, dedupe, Zen, windows,
candidate windows with duplicate counts, and selection by measured ESP."""

from __future__ import annotations

import math

import pytest

from privleak import public_text
from privleak.errors import PrivleakError

MIT = "Permission is hereby granted, free of charge, to any person obtaining a copy"
BSD = "Redistribution and use in source and binary forms, with or without modification"


def test_license_files_are_found_classified_and_deduplicated(tmp_path):
    for name, folder, text in [
        ("LICENSE", "a-1.0.dist-info", MIT),
        ("LICENSE.txt", "b-1.0.dist-info/licenses", "  " + MIT.replace(" ", "\n", 3)),  # same text
        ("COPYING", "c-1.0.dist-info", BSD),
        ("LICENSE", "d-1.0.dist-info", "Apache License\nVersion 2.0, January 2004"),
        ("LICENSE", "e-1.0.dist-info", "GNU GENERAL PUBLIC LICENSE"),  # not one of the three
        ("METADATA", "f-1.0.dist-info", MIT),  # not a license file name
    ]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / name).write_text(text)
    rows = public_text.license_texts(tmp_path)
    assert [(r["source"], r["license"], r["copies"]) for r in rows] == [
        ("a-1.0.dist-info/LICENSE", "MIT", 2),
        ("c-1.0.dist-info/COPYING", "BSD", 1),
        ("d-1.0.dist-info/LICENSE", "Apache-2.0", 1),
    ]


def test_zen_of_python_is_decoded(capsys):
    zen = public_text.zen_of_python()
    assert zen.startswith("The Zen of Python, by Tim Peters")
    assert "Beautiful is better than ugly." in zen
    assert capsys.readouterr().out == ""


def test_token_windows_are_consecutive_and_drop_the_short_tail():
    ids = list(range(23))
    windows = public_text.token_windows(ids, 3, 2)
    assert windows == [(0, [0, 1, 2], [3, 4]), (5, [5, 6, 7], [8, 9]),
                       (10, [10, 11, 12], [13, 14]), (15, [15, 16, 17], [18, 19])]  # fmt: skip
    assert public_text.token_windows(ids, 3, 2, max_windows=1) == [(0, [0, 1, 2], [3, 4])]
    assert public_text.token_windows(ids[:4], 3, 2) == []


def test_token_windows_overlap_at_a_shorter_stride():
    windows = public_text.token_windows(list(range(9)), 3, 2, stride=2)
    assert windows == [(0, [0, 1, 2], [3, 4]), (2, [2, 3, 4], [5, 6]), (4, [4, 5, 6], [7, 8])]


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [((0, 2), {}, "prefix_len"), ((3, 0), {}, "suffix_len"), ((3, 2), {"stride": 0}, "stride"),
     ((3, 2), {"max_windows": 0}, "max_windows")],
)  # fmt: skip
def test_bad_window_sizes_are_one_line_errors(args, kwargs, match):
    with pytest.raises(PrivleakError, match=match):
        public_text.token_windows([1, 2, 3], *args, **kwargs)


def test_first_per_family_keeps_the_first_texts_of_each_family_in_order():
    rows = [{"license": f, "source": f"{f}{i}"} for i, f in enumerate("ABAAB")]
    assert [r["source"] for r in public_text.first_per_family(rows, 1)] == ["A0", "B1"]
    assert [r["source"] for r in public_text.first_per_family(rows, 2)] == ["A0", "B1", "A2", "B4"]
    assert public_text.first_per_family(rows, None) == rows
    with pytest.raises(PrivleakError, match="per_family must be >= 1, got 0"):
        public_text.first_per_family(rows, 0)


def _text(source, ids, copies=1, family="MIT"):
    return {"source": source, "license": family, "ids": ids, "copies": copies}


def test_candidates_step_by_stride_and_cap_windows_per_text():
    texts = [_text("a", list(range(10))), _text("b", list(range(100, 110)))]
    candidates = public_text.candidate_windows(texts, 2, 2, stride=3, max_windows=2)
    assert [(c["seq_id"], c["prefix_ids"], c["suffix_ids"]) for c in candidates] == [
        ("a#0", [0, 1], [2, 3]), ("a#3", [3, 4], [5, 6]),
        ("b#0", [100, 101], [102, 103]), ("b#3", [103, 104], [105, 106]),
    ]  # fmt: skip
    every = public_text.candidate_windows(texts, 2, 2, stride=3)
    assert [c["start"] for c in every if c["source"] == "a"] == [0, 3, 6]


def test_candidates_skip_suffixes_with_too_few_distinct_tokens():
    # Windows at 0 and 4: suffixes [7, 7, 7] (1 distinct token) and [1, 2, 3] (3).
    ids = [1, 2, 3, 4, 7, 7, 7, 5, 1, 2, 3]
    candidates = public_text.candidate_windows([_text("a", ids)], 4, 3, stride=4)
    assert [c["start"] for c in candidates] == [0, 4]
    kept = public_text.candidate_windows([_text("a", ids)], 4, 3, stride=4, min_distinct_tokens=2)
    assert [(c["start"], c["suffix_ids"]) for c in kept] == [(4, [1, 2, 3])]
    # The cap counts only windows that pass the filter.
    capped = public_text.candidate_windows(
        [_text("a", ids)], 4, 3, stride=4, max_windows=1, min_distinct_tokens=2
    )
    assert [c["start"] for c in capped] == [4]


def test_identical_windows_are_kept_once_and_count_every_file_that_carries_them():
    shared = [10, 11, 12, 13]
    texts = [
        _text("a", shared + [1, 2, 3, 4], copies=3),  # the same text shipped by 3 packages
        _text("b", shared + [5, 6, 7, 8], family="BSD"),
        _text("c", [9] + shared),  # carries it at offset 1, which stride 4 never visits
    ]
    candidates = public_text.candidate_windows(texts, 2, 2, stride=4)
    assert [(c["seq_id"], c["license"], c["duplicates"]) for c in candidates] == [
        ("a#0", "MIT", 5), ("a#4", "MIT", 3), ("b#4", "BSD", 1), ("c#0", "MIT", 1),
    ]  # fmt: skip
    # per_family picks the texts windows come from; every text still counts as a carrier.
    capped = public_text.candidate_windows(texts, 2, 2, stride=4, per_family=1)
    assert [(c["seq_id"], c["duplicates"]) for c in capped] == [("a#0", 5), ("a#4", 3), ("b#4", 1)]


@pytest.mark.parametrize("value", [0, 3])
def test_min_distinct_tokens_beyond_the_suffix_is_a_one_line_error(value):
    with pytest.raises(PrivleakError, match=f"min_distinct_tokens must be in 1..2.*got {value}"):
        public_text.candidate_windows([_text("a", [1, 2, 3, 4])], 2, 2, stride=1,
                                      min_distinct_tokens=value)  # fmt: skip


def test_selection_keeps_exactly_the_candidates_at_or_above_min_esp():
    candidates = [{"license": f} for f in ["MIT", "MIT", "BSD", "Zen of Python"]]
    log_esp = [math.log(0.5), math.log(1e-3) - 1e-9, math.log(1e-3), math.log(1e-12)]
    kept, summary = public_text.select_memorised(candidates, log_esp, 1e-3)
    assert kept == [0, 2]
    assert summary == {
        "min_esp": 1e-3, "candidates": 4, "kept": 2,
        "per_family": {"MIT": {"candidates": 2, "kept": 1}, "BSD": {"candidates": 1, "kept": 1},
                       "Zen of Python": {"candidates": 1, "kept": 0}},
    }  # fmt: skip


def test_selection_with_no_candidate_above_min_esp_is_empty_not_an_error():
    kept, summary = public_text.select_memorised([{"license": "MIT"}], [math.log(1e-13)], 1e-3)
    assert kept == []
    assert summary["kept"] == 0
    assert summary["per_family"] == {"MIT": {"candidates": 1, "kept": 0}}


@pytest.mark.parametrize(
    ("log_esp", "min_esp", "match"),
    [([0.0], 0.0, r"min_esp must be in \(0, 1\]"), ([0.0], 1.5, "min_esp"),
     ([0.0, 0.0], 0.5, "1 candidates but 2 ESP values")],
)  # fmt: skip
def test_bad_selection_inputs_are_one_line_errors(log_esp, min_esp, match):
    with pytest.raises(PrivleakError, match=match):
        public_text.select_memorised([{"license": "MIT"}], log_esp, min_esp)
