"""Public-text windows for the SmolLM2 part of S1: license detection, dedupe, Zen, windows."""

from __future__ import annotations

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
    assert [(r["source"], r["license"]) for r in rows] == [
        ("a-1.0.dist-info/LICENSE", "MIT"),
        ("c-1.0.dist-info/COPYING", "BSD"),
        ("d-1.0.dist-info/LICENSE", "Apache-2.0"),
    ]


def test_zen_of_python_is_decoded(capsys):
    zen = public_text.zen_of_python()
    assert zen.startswith("The Zen of Python, by Tim Peters")
    assert "Beautiful is better than ugly." in zen
    assert capsys.readouterr().out == ""


def test_token_windows_are_consecutive_and_drop_the_short_tail():
    ids = list(range(23))
    windows = public_text.token_windows(ids, 3, 2)
    assert windows == [([0, 1, 2], [3, 4]), ([5, 6, 7], [8, 9]), ([10, 11, 12], [13, 14]),
                       ([15, 16, 17], [18, 19])]  # fmt: skip
    assert public_text.token_windows(ids, 3, 2, max_windows=1) == [([0, 1, 2], [3, 4])]
    assert public_text.token_windows(ids[:4], 3, 2) == []


@pytest.mark.parametrize(("args", "match"), [((0, 2), "prefix_len"), ((3, 0), "suffix_len")])
def test_bad_window_sizes_are_one_line_errors(args, match):
    with pytest.raises(PrivleakError, match=match):
        public_text.token_windows([1, 2, 3], *args)
