"""privleak.data: synthetic corpora are deterministic with exact ground truth; loaders map fields
and reject bad input with one-line errors. Everything runs offline on tiny data."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from privleak.data.cnn_dm import cnn_dm
from privleak.data.loaders import REQUIRED_FIELDS, load_corpus, materialize, materialize_all
from privleak.data.pretrain import pretrain
from privleak.data.pubmedqa import pubmedqa
from privleak.data.records import read_jsonl, read_sequences, take, write_jsonl
from privleak.data.synthetic import GENERATORS, generate
from privleak.errors import PrivleakError

FIXTURES = Path(__file__).parent / "fixtures" / "data"
MAPPING = {"id": "uid", "text": "body"}
RAW = json.loads((FIXTURES / "corpus.json").read_text(encoding="utf-8"))
EXPECTED = [{"id": r["uid"], "text": r["body"], "title": r["title"]} for r in RAW]
SECRET_KEYS = {"record_id", "field", "start", "end", "kind", "text", "duplicates"}
# Small options keep each generator fast; pretrain's count 20 > 12 docs forces document reuse.
SMALL = {
    "cnn_dm": (4, {"min_words": 120}),
    "dialogs": (6, {}),
    "enron": (4, {}),
    "healthcaremagic": (4, {}),
    "icliniq": (4, {}),
    "pubmedqa": (4, {"min_words": 120}),
    "medical_dirichlet": (12, {"diseases": 4, "rare_details": 3}),
    "pretrain": (
        12,
        {
            "doc_words": 60,
            "duplication_counts": [1, 3, 12, 20],
            "sequences_per_count": 3,
            "ne_prefix_words": 15,
            "long_prefix_words": 12,
            "long_suffix_words": 10,
        },
    ),
}


def small(name: str, seed: int = 0):
    n, options = SMALL[name]
    return generate(name, n, seed, options)


def corpus_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return f"file:{path}"


def test_small_options_cover_every_generator():
    assert set(SMALL) == set(GENERATORS)


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_are_deterministic(name, tmp_path):
    def written(seed, tag):
        records, secrets = small(name, seed)
        return [
            write_jsonl(records, tmp_path / f"{tag}.jsonl").read_bytes(),
            write_jsonl(secrets, tmp_path / f"{tag}.secrets.jsonl").read_bytes(),
        ]

    first, again, other = written(0, "a"), written(0, "b"), written(1, "c")
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_every_secret_offset_points_at_its_text(name):
    records, secrets = small(name)
    by_id = {record["id"]: record for record in records}
    assert len(by_id) == len(records) == SMALL[name][0]
    assert secrets
    counts = Counter(row["text"] for row in secrets)
    for row in secrets:
        assert SECRET_KEYS <= set(row)
        assert by_id[row["record_id"]][row["field"]][row["start"] : row["end"]] == row["text"]
        assert row["duplicates"] == counts[row["text"]]


def test_cnn_dm_records_are_long_news_with_highlights():
    records, secrets = cnn_dm(3, 0)
    for record in records:
        assert set(record) == {"id", "article", "highlights"}
        assert len(record["article"].split()) >= 300
        assert 2 <= len(record["highlights"].split("\n")) <= 4
    assert len(cnn_dm(1, 0, min_words=500)[0][0]["article"].split()) >= 500
    assert {"name", "email", "phone", "address"} <= {row["kind"] for row in secrets}
    # Each highlight block names the story's subject, a planted secret.
    for record in records:
        assert any(
            row["record_id"] == record["id"] and row["field"] == "highlights" for row in secrets
        )


def test_pubmedqa_records_agree_with_schema():
    records, secrets = pubmedqa(3, 0)
    for record in records:
        assert set(record) == {"id", "question", "context", "long_answer", "final_decision"}
        assert record["final_decision"] in {"yes", "no", "maybe"}
        assert record["question"].endswith("?")
        assert len(record["context"].split()) >= 300
        assert 2 <= len(re.findall(r"\.(?:\s|$)", record["long_answer"])) <= 3
    assert {"name", "id"} <= {row["kind"] for row in secrets}


@pytest.mark.parametrize(
    "n, options",
    [(40, {}), SMALL["pretrain"]],
    ids=["defaults", "small-with-reuse"],
)
def test_pretrain_plants_each_sequence_exactly_duplicates_times(n, options):
    records, secrets = pretrain(n, 7, **options)
    texts = [record["text"] for record in records]
    by_id = {record["id"]: record["text"] for record in records}
    settings = {
        "ne_prefix_words": 40,
        "long_prefix_words": 40,
        "long_suffix_words": 40,
        "duplication_counts": [1, 2, 4, 8, 16, 32],
        "sequences_per_count": 4,
    } | options
    sequences: dict[str, list[dict]] = {}
    for row in secrets:
        sequences.setdefault(row["seq_id"], []).append(row)
    expected_counts = Counter(
        {c: 2 * settings["sequences_per_count"] for c in settings["duplication_counts"]}
    )
    assert Counter(len(rows) for rows in sequences.values()) == expected_counts
    # Distinct sequences have distinct secrets.
    assert len({rows[0]["text"] for rows in sequences.values()}) == len(sequences)
    for rows in sequences.values():
        prefix, secret, kind = rows[0]["prefix"], rows[0]["text"], rows[0]["kind"]
        assert {(r["prefix"], r["text"], r["kind"]) for r in rows} == {(prefix, secret, kind)}
        assert sum(text.count(prefix + secret) for text in texts) == len(rows)
        assert all(r["duplicates"] == len(rows) for r in rows)
        if len(rows) <= n:
            assert len({r["record_id"] for r in rows}) == len(rows)
        if kind == "named_entity":
            assert len(prefix.split()) == settings["ne_prefix_words"]
        else:
            assert kind == "long_sequence"
            assert len(prefix.split()) == settings["long_prefix_words"]
            assert len(secret.split()) == settings["long_suffix_words"]
        for r in rows:
            text = by_id[r["record_id"]]
            before = text[: r["start"] - len(prefix)]
            assert text[r["start"] - len(prefix) : r["end"]] == prefix + secret
            assert before == "" or before.endswith(". ")  # inserted at a sentence boundary


def test_file_loaders_map_fields(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "corpus.parquet"
    pq.write_table(pa.Table.from_pylist(RAW), parquet)
    paths = [
        FIXTURES / f for f in ["corpus.json", "corpus_lines.json", "corpus.jsonl", "corpus.csv"]
    ]
    for path in [*paths, parquet]:
        assert load_corpus(f"file:{path}", fields=MAPPING) == EXPECTED, path
        assert load_corpus(f"file:{path}", fields=MAPPING, n=2) == EXPECTED[:2], path
    assert load_corpus(f"file:{FIXTURES / 'corpus.jsonl'}", n=10) == RAW


def test_relative_file_paths_start_at_the_cwd(monkeypatch):
    monkeypatch.chdir(FIXTURES.parent)
    assert load_corpus("file:data/corpus.csv") == RAW


def test_synthetic_source_generates_and_maps_fields():
    n, options = SMALL["pretrain"]
    records = load_corpus(
        "synthetic:pretrain", n=n, seed=3, options=options, fields={"body": "text"}
    )
    expected = generate("pretrain", n, 3, options)[0]
    assert records == [{"id": r["id"], "body": r["text"]} for r in expected]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved Dataset and DatasetDicts, as written by save_to_disk."""
    from datasets import Dataset, DatasetDict

    root = tmp_path_factory.mktemp("hf")
    columns = {key: [r[key] for r in RAW] for key in RAW[0]}
    single = Dataset.from_dict(columns)
    single.save_to_disk(root / "single")
    test = Dataset.from_dict({"uid": ["t1", "t2"], "body": ["x", "y"], "title": ["X", "Y"]})
    DatasetDict({"train": single, "test": test}).save_to_disk(root / "dict")
    DatasetDict({"dev": single, "eval": test}).save_to_disk(root / "no_train")
    DatasetDict({"only": test}).save_to_disk(root / "one")
    return root


def test_local_hf_datasets_load_from_disk(saved):
    test_rows = [{"uid": "t1", "body": "x", "title": "X"}, {"uid": "t2", "body": "y", "title": "Y"}]
    assert load_corpus(f"hf:{saved / 'single'}:train[:2]", fields=MAPPING) == EXPECTED[:2]
    assert load_corpus(f"hf:{saved / 'single'}") == RAW
    assert load_corpus(f"hf:{saved / 'dict'}:train[:2]", fields=MAPPING) == EXPECTED[:2]
    assert load_corpus(f"hf:{saved / 'dict'}") == RAW  # "train" is the default split
    assert load_corpus(f"hf:{saved / 'dict'}:test[1:]") == test_rows[1:]
    assert load_corpus(f"hf:{saved / 'dict'}:test", n=1) == test_rows[:1]
    assert load_corpus(f"hf:{saved / 'one'}") == test_rows  # a lone split needs no name


def test_ids_become_strings(tmp_path):
    # PubMedQA's pubid is an int; S0 tables hold ids of several corpora in one column.
    path = write_jsonl([{"pubid": 7, "text": "a"}, {"pubid": 8, "text": "b"}], tmp_path / "q.jsonl")
    assert [r["id"] for r in load_corpus(f"file:{path}", fields={"id": "pubid"})] == ["7", "8"]


@pytest.mark.parametrize(
    "spec, pattern",
    [
        ("no_train", r"split 'train' is not in .*; available splits: dev, eval"),
        ("dict:validation", r"split 'validation' is not in .*; available splits: train, test"),
        ("dict:train[:10%]", r"split 'train\[:10%\]' .* is not supported; allowed: NAME or NAME"),
        ("dict:cfg:train", r"local folder, which has no configs; allowed: hf:<folder>\[:split\]"),
    ],
)
def test_local_hf_bad_split_is_one_line_error(saved, spec, pattern):
    with pytest.raises(PrivleakError, match=pattern) as caught:
        load_corpus(f"hf:{saved / spec}")
    assert "\n" not in str(caught.value)


def test_hub_sources_split_into_dataset_config_and_split(monkeypatch):
    import datasets

    calls = []
    rows = datasets.Dataset.from_dict({"text": ["a", "b", "c"]})

    def fake_load_dataset(name, config, split=None):
        calls.append((name, config, split))
        if name == "offline":
            raise ConnectionError("Couldn't reach the hub\nretry later")
        return rows if split else datasets.DatasetDict({"train": rows})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert load_corpus("hf:cnn_dailymail:3.0.0:test[:5]", n=2) == [{"text": "a"}, {"text": "b"}]
    load_corpus("hf:cnn_dailymail:3.0.0")
    load_corpus("hf:owner/name:validation")
    load_corpus("hf:owner/name")
    assert calls == [
        ("cnn_dailymail", "3.0.0", "test[:5]"),
        ("cnn_dailymail", "3.0.0", None),
        ("owner/name", None, "validation"),
        ("owner/name", None, None),
    ]
    with pytest.raises(PrivleakError, match="hf dataset 'offline' could not be loaded") as caught:
        load_corpus("hf:offline")
    assert "\n" not in str(caught.value)


def test_write_jsonl_is_deterministic_and_atomic(tmp_path):
    path = tmp_path / "deep" / "dir" / "out.jsonl"
    records = [{"b": 1, "a": "Jörg\u2028Weiß"}, {"z": [1, 2], "y": None}]
    write_jsonl(records, path)
    assert path.read_text(encoding="utf-8") == (
        '{"a": "Jörg\u2028Weiß", "b": 1}\n{"y": null, "z": [1, 2]}\n'
    )
    assert read_jsonl(path) == records

    def crashing():
        yield {"a": 2}
        yield {"a": object()}  # not JSON-serializable: the write fails half-way

    with pytest.raises(TypeError):
        write_jsonl(crashing(), path)
    assert read_jsonl(path) == records  # the earlier file is untouched
    assert [p.name for p in path.parent.iterdir()] == ["out.jsonl"]  # no temporary left


def test_materialize_synthetic_writes_records_and_secrets(tmp_path):
    spec = {"source": "synthetic:cnn_dm", "n": 2, "options": {"min_words": 50}}
    path = materialize("train", spec, tmp_path, seed=5)
    records, secrets = cnn_dm(2, 5, min_words=50)
    assert path == tmp_path / "train.jsonl"
    assert read_jsonl(path) == records
    assert read_jsonl(tmp_path / "train.secrets.jsonl") == secrets


def test_materialize_file_source_writes_records_only(tmp_path):
    stale = tmp_path / "eval.secrets.jsonl"
    stale.write_text("{}\n", encoding="utf-8")
    spec = {"source": f"file:{FIXTURES / 'corpus.csv'}", "fields": MAPPING, "n": 2}
    path = materialize("eval", spec, tmp_path, seed=0)
    assert read_jsonl(path) == EXPECTED[:2]
    assert not stale.exists()


JSONL = f"file:{FIXTURES / 'corpus.jsonl'}"
BAD_INPUT = [
    ("scheme", lambda t: load_corpus("s3:bucket/x.jsonl"), "allowed: synthetic:, hf:, file:"),
    ("no-scheme", lambda t: load_corpus("corpus.jsonl"), "'corpus.jsonl' has an unknown scheme"),
    (
        "generator",
        lambda t: load_corpus("synthetic:wiki", n=2),
        "generator 'wiki' is unknown; allowed: cnn_dm, dialogs, enron, healthcaremagic, icliniq, "
        "medical_dirichlet, pretrain, pubmedqa",
    ),
    ("missing-file", lambda t: load_corpus(f"file:{t / 'nope.jsonl'}"), r"nope\.jsonl' does not"),
    (
        "extension",
        lambda t: load_corpus(corpus_file(t, "c.txt", "hi")),
        r"type '\.txt'; allowed: \.csv, \.json, \.jsonl, \.parquet",
    ),
    ("empty-json", lambda t: load_corpus(corpus_file(t, "c.json", "")), "has no records"),
    ("empty-jsonl", lambda t: load_corpus(corpus_file(t, "c.jsonl", "\n\n")), "has no records"),
    ("empty-csv", lambda t: load_corpus(corpus_file(t, "c.csv", "")), "has no records"),
    ("header-csv", lambda t: load_corpus(corpus_file(t, "c.csv", "uid,body\n")), "has no records"),
    ("empty-parquet", lambda t: load_corpus(corpus_file(t, "c.parquet", "")), "has no records"),
    ("empty-list", lambda t: load_corpus(corpus_file(t, "c.json", "[]")), "has no records"),
    (
        "corrupt-json",
        lambda t: load_corpus(corpus_file(t, "c.json", '[\n {"uid": 1},\n {"uid": 2,,}\n]')),
        r"c\.json' line 3 is not valid JSON .*allowed: a JSON list of objects",
    ),
    (
        "corrupt-jsonl",
        lambda t: load_corpus(corpus_file(t, "c.jsonl", '{"uid": 1}\n{"uid": \n')),
        r"c\.jsonl' line 2 is not valid JSON",
    ),
    (
        "not-object",
        lambda t: load_corpus(corpus_file(t, "c.jsonl", "[1, 2]\n")),
        "line 1 is a list; each record must be a JSON object",
    ),
    (
        "corrupt-parquet",
        lambda t: load_corpus(corpus_file(t, "c.parquet", "PAR1 nope")),
        "is not a readable parquet file",
    ),
    (
        "csv-extra-values",
        lambda t: load_corpus(corpus_file(t, "c.csv", "a,b\n1,2,3\n")),
        "line 2 has more values than the header has columns",
    ),
    (
        "missing-field",
        lambda t: load_corpus(JSONL, fields={"text": "content"}),
        "field 'text' maps to column 'content', .*; available columns: uid, body, title",
    ),
    ("fields-type", lambda t: load_corpus(JSONL, fields=["text"]), "fields must map canonical"),
    ("n-zero", lambda t: load_corpus(JSONL, n=0), "n must be an integer >= 1"),
    ("n-negative", lambda t: load_corpus("synthetic:cnn_dm", n=-1), "n must be an integer >= 1"),
    ("n-missing", lambda t: load_corpus("synthetic:cnn_dm"), "'synthetic:cnn_dm' needs n"),
    ("n-direct", lambda t: pretrain(0, 0), "synthetic:pretrain n must be an integer >= 1; got 0"),
    (
        "option",
        lambda t: load_corpus("synthetic:cnn_dm", n=1, options={"min_word": 5}),
        "synthetic:cnn_dm has no option 'min_word'; allowed: min_words$",
    ),
    (
        "pretrain-option",
        lambda t: load_corpus("synthetic:pretrain", n=1, options={"words": 5}),
        "allowed: doc_words, duplication_counts, sequences_per_count, ne_prefix_words, "
        "long_prefix_words, long_suffix_words",
    ),
    (
        "option-value",
        lambda t: load_corpus("synthetic:pubmedqa", n=1, options={"min_words": 0}),
        "synthetic:pubmedqa min_words must be an integer >= 1; got 0",
    ),
    (
        "duplication-counts",
        lambda t: load_corpus("synthetic:pretrain", n=1, options={"duplication_counts": [2, 0]}),
        "duplication_counts must be a non-empty list of integers >= 1",
    ),
    (
        "options-for-file",
        lambda t: load_corpus(JSONL, options={"min_words": 5}),
        "options apply only to synthetic: sources",
    ),
    (
        "slot-key",
        lambda t: materialize("train", {"source": JSONL, "limit": 3}, t, 0),
        "data slot 'train' has unknown key 'limit'; allowed: source, n, fields, options",
    ),
    (
        "slot-source",
        lambda t: materialize("train", {"n": 3}, t, 0),
        "data slot 'train' needs a 'source'; allowed keys: source, n, fields, options",
    ),
    (
        "hf-not-dataset",
        lambda t: load_corpus(f"hf:{t}"),
        "is not a dataset folder written by save_to_disk",
    ),
]


@pytest.mark.parametrize(
    "call, pattern", [pytest.param(call, pattern, id=name) for name, call, pattern in BAD_INPUT]
)
def test_bad_input_raises_one_line_error(tmp_path, call, pattern):
    with pytest.raises(PrivleakError, match=pattern) as caught:
        call(tmp_path)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- decoding and required fields


# Line 2 of each holds a Latin-1 "é" (0xe9), which is not UTF-8.
LATIN1_LINES = b'{"uid": "ok"}\n{"uid": "x1", "body": "Jos\xe9"}\n'
NON_UTF8 = {"c.jsonl": LATIN1_LINES, "c.json": LATIN1_LINES, "c.csv": b"uid,body\nx1,Jos\xe9\n"}


@pytest.mark.parametrize("name", sorted(NON_UTF8))
def test_non_utf8_bytes_name_file_line_and_offset(tmp_path, name):
    (tmp_path / name).write_bytes(NON_UTF8[name])
    with pytest.raises(PrivleakError) as caught:
        load_corpus(f"file:{tmp_path / name}")
    message = str(caught.value)
    assert "\n" not in message
    offset = NON_UTF8[name].index(0xE9)
    assert f"{name}' line 2 (byte offset {offset}) is not valid UTF-8 (byte 0xe9)" in message


def test_byte_order_mark_is_dropped_and_offsets_stay_absolute(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"uid": "a"}\n')
    assert load_corpus(f"file:{path}") == [{"uid": "a"}]
    path.write_bytes(b'\xef\xbb\xbf{"uid": "\xff"}\n')
    with pytest.raises(PrivleakError, match=r"line 1 \(byte offset 12\)"):
        load_corpus(f"file:{path}")


def test_one_json_object_file_says_it_holds_no_records(tmp_path):
    source = corpus_file(tmp_path, "c.json", '{\n  "data": [{"uid": 1}]\n}\n')
    with pytest.raises(PrivleakError, match="holds one JSON dict with keys data, not records"):
        load_corpus(source)


@pytest.mark.parametrize("text", ['{"uid": 1}\n{}\n', '{"uid": 1}\n{"uid": null, "b": " "}\n'])
def test_empty_record_is_named(tmp_path, text):
    with pytest.raises(PrivleakError, match=r"record 1 of corpus 'file:.*c\.jsonl' is empty"):
        load_corpus(corpus_file(tmp_path, "c.jsonl", text))


def news(**overrides) -> dict:
    return {"id": "n1", "article": "A long story.", "highlights": "Short."} | overrides


def test_missing_required_field_fails_in_materialize(tmp_path):
    path = write_jsonl([news(), news(id="n2", highlights=None)], tmp_path / "in.jsonl")
    spec = {"source": f"file:{path}"}
    with pytest.raises(PrivleakError) as caught:
        materialize("cnn_dm", spec, tmp_path / "out", seed=0)
    message = str(caught.value)
    assert "\n" not in message
    assert "data slot 'cnn_dm'" in message and "record 1 (id 'n2')" in message
    assert "has an empty field 'highlights'; needed: id, article, highlights" in message
    assert "available fields: article, highlights, id" in message
    assert re.search(r"data\.\w+\.cnn_dm\.fields, e\.g\. \{highlights: <column>\}", message)
    assert not (tmp_path / "out" / "cnn_dm.jsonl").exists()


def test_missing_required_field_names_the_fields_mapping(tmp_path):
    rows = [{"pubid": 1, "question": "q?", "contexts": "c", "answer": "a"}]
    path = write_jsonl(rows, tmp_path / "in.jsonl")
    spec = {"source": f"file:{path}", "fields": {"id": "pubid", "context": "contexts"}}
    with pytest.raises(PrivleakError) as caught:
        materialize("pubmedqa", spec, tmp_path, seed=0)
    message = str(caught.value)
    assert "record 0 (id '1') has no field 'long_answer'" in message
    assert "maps {'id': 'pubid', 'context': 'contexts'}" in message


def test_every_generator_holds_its_slots_required_fields():
    for slot, needed in REQUIRED_FIELDS.items():
        records, _ = small(slot)
        assert all(field in records[0] for field in needed), slot


def test_unlisted_slot_needs_only_non_empty_records(tmp_path):
    path = write_jsonl([{"anything": 1}], tmp_path / "in.jsonl")
    assert materialize("mine", {"source": f"file:{path}"}, tmp_path, 0).exists()


# ---------------------------------------------------------------- hub revisions, sources.json


def fake_hub(monkeypatch, rows: dict) -> list:
    """datasets.load_dataset returning a Dataset of `rows`; records every call's kwargs."""
    import datasets

    calls = []

    def load_dataset(name, config, split=None, **kwargs):
        calls.append({"name": name, "config": config, "split": split, **kwargs})
        return datasets.Dataset.from_dict(rows)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_revision_is_passed_to_the_hub(monkeypatch):
    calls = fake_hub(monkeypatch, {"text": ["a"]})
    load_corpus("hf:org/set:train", revision="0123abc")
    load_corpus("hf:org/set:train")
    assert calls[0]["revision"] == "0123abc"
    assert "revision" not in calls[1]


@pytest.mark.parametrize(
    "source, revision, pattern",
    [
        ("synthetic:cnn_dm", "main", "revision applies only to hf: sources"),
        (f"file:{FIXTURES / 'corpus.jsonl'}", "main", "revision applies only to hf: sources"),
        ("hf:org/set", 3, "revision must be a hub commit hash, tag or branch name; got 3"),
    ],
)
def test_revision_outside_hub_sources_is_rejected(source, revision, pattern):
    with pytest.raises(PrivleakError, match=pattern):
        load_corpus(source, n=1, revision=revision)


def test_revision_on_a_local_dataset_folder_is_rejected(saved):
    with pytest.raises(PrivleakError, match="local folder, which has no revisions"):
        load_corpus(f"hf:{saved / 'single'}", revision="main")


def test_sources_json_records_source_revision_count_and_hash(monkeypatch, tmp_path):
    import hashlib

    fake_hub(monkeypatch, {"id": ["1", "2"], "text": ["a", "b"]})
    data = {
        "pretrain": {"source": "hf:org/set:train", "revision": "abc123"},
        "cnn_dm": {"source": "synthetic:cnn_dm", "n": 2, "options": {"min_words": 20}},
    }
    sources = materialize_all(data, tmp_path, seed=0)
    written = json.loads((tmp_path / "sources.json").read_text())
    assert written == sources
    digest = hashlib.sha256((tmp_path / "pretrain.jsonl").read_bytes()).hexdigest()
    assert written["pretrain"] == {
        "source": "hf:org/set:train",
        "revision": "abc123",
        "records": 2,
        "sha256": digest,
    }
    assert written["cnn_dm"]["revision"] is None and written["cnn_dm"]["records"] == 2
    fake_hub(monkeypatch, {"id": ["1", "2"], "text": ["a", "changed"]})
    assert materialize_all(data, tmp_path, seed=0)["pretrain"]["sha256"] != digest


# ---------------------------------------------------------------- counts and S1 sequence files


def test_take_returns_the_first_n_records():
    assert take([1, 2, 3], 2, key="s0.n_examples", corpus="cnn_dm") == [1, 2]
    assert take([1, 2, 3], 0, key="s1.isp.exact_sequences", corpus="x", minimum=0) == []


@pytest.mark.parametrize(
    "n, pattern",
    [
        (100, r"params s0\.embedded\.n_examples = 100: corpus 'cnn_dm' has only 4 records"),
        (0, r"params s0\.embedded\.n_examples = 0: must be an integer >= 1"),
        (-1, r"= -1: must be an integer >= 1"),
        (True, r"= True: must be an integer"),
        (2.0, r"= 2\.0: must be an integer"),
    ],
)
def test_take_rejects_counts_the_corpus_cannot_give(monkeypatch, n, pattern):
    monkeypatch.setenv("PRIVLEAK_PROFILE", "embedded")
    with pytest.raises(PrivleakError, match=pattern) as caught:
        take([{}] * 4, n, key="s0.n_examples", corpus="cnn_dm")
    assert "\n" not in str(caught.value)


def test_read_sequences_names_the_row_missing_a_field(tmp_path):
    good = {"seq_id": "s0", "kind": "named_entity", "prefix": "By", "suffix": " Ann."}
    path = write_jsonl([good, {**good, "seq_id": "s1", "suffix": ""}], tmp_path / "s.jsonl")
    with pytest.raises(PrivleakError, match="record 1 has an empty field 'suffix'; needed: seq_id"):
        read_sequences(f"file:{path}")
    write_jsonl([good], path)
    assert read_sequences(f"file:{path}") == [good]
    with pytest.raises(PrivleakError, match="does not exist"):
        read_sequences(f"file:{tmp_path / 'none.jsonl'}")


@pytest.mark.parametrize("source_field", [None, {"id": "key"}])
def test_two_records_sharing_an_id_stop_with_both_named(tmp_path, source_field):
    # A repeated id would hand one privacy unit's document to another's question.
    key = "key" if source_field else "id"
    rows = [{key: "8", "text": "a"}, {key: "9", "text": "b"}, {key: 8, "text": "c"}]
    corpus = tmp_path / "dup.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    message = (
        f"records 0 and 2 of corpus 'file:{corpus}' share id '8'; every record needs its own id"
    )
    with pytest.raises(PrivleakError, match=re.escape(message)):
        load_corpus(f"file:{corpus}", fields=source_field)
    with pytest.raises(PrivleakError, match=re.escape(message)):
        materialize("s4", {"source": f"file:{corpus}", "fields": source_field}, tmp_path, 0)
    assert not (tmp_path / "s4.jsonl").exists()
