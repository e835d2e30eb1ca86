"""S2's Chroma store: build, persist, reopen (with checks), export and restore (byte-stable), L2
query order and reranking."""

from __future__ import annotations

import socket
import zlib

import numpy as np
import pytest
from chromadb.api.client import SharedSystemClient
from chromadb.utils.embedding_functions import (
    ONNXMiniLM_L6_V2,
    register_embedding_function,
)

from privleak import vector_store
from privleak.errors import PrivleakError
from privleak.models import MINILM
from privleak.retrieval import embed

WORDS = (
    "fever cough rash headache nausea fatigue chest pain joint swelling dizzy sore throat".split()
)


class HashedWords:
    """A deterministic bag-of-words encoder: each word adds one to a crc32-chosen coordinate."""

    def __init__(self, dimension: int):
        self.dimension = dimension

    def encode(self, texts, batch_size, normalize_embeddings, convert_to_numpy, show_progress_bar):
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                vectors[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


@register_embedding_function
class HashedEmbedding(vector_store.SentenceEmbedding):
    """SentenceEmbedding over HashedWords; the embedder name is "hashed-<dimension>"."""

    @staticmethod
    def name() -> str:
        return "test_hashed_embedding"

    def load(self):
        return HashedWords(int(self.embedder.split("-")[1]))


@pytest.fixture(autouse=True)
def offline_and_no_default_embedder(monkeypatch):
    """Any network connection, or any use of Chroma's downloading default embedder, fails."""

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    def no_default(*args, **kwargs):
        raise AssertionError("Chroma's default ONNX embedder was instantiated")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__init__", no_default)
    yield
    # A new client on the same folder must read the disk, not a cached in-process system.
    SharedSystemClient.clear_system_cache()


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def squared_l2(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """[Q, N] squared L2 distances, in float64."""
    q, d = queries.astype(np.float64), documents.astype(np.float64)
    return (q**2).sum(1)[:, None] + (d**2).sum(1)[None, :] - 2 * q @ d.T


def build_hashed(tmp_path, texts, dimension=16, name="docs", metadatas=None):
    function = HashedEmbedding(f"hashed-{dimension}", "cpu", batch_size=7)
    ids = [f"d{i}" for i in range(len(texts))]
    return vector_store.build_collection(tmp_path, name, ids, texts, function, metadatas)


def assert_matches_brute_force(results, queries, texts, encoder):
    distances = squared_l2(embed(encoder, queries, 8), embed(encoder, texts, 8))
    for row, hits in zip(distances, results, strict=True):
        returned = np.array([hit["distance"] for hit in hits])
        assert np.all(np.diff(returned) >= 0)
        np.testing.assert_allclose(returned, np.sort(row)[: len(hits)], atol=1e-4)
        # Ties may come in any order, so each hit's own distance is checked too.
        for hit in hits:
            index = int(hit["id"][1:])
            assert hit["text"] == texts[index]
            assert hit["distance"] == pytest.approx(row[index], abs=1e-4)


def test_query_is_ascending_l2_and_equals_brute_force(tmp_path):
    texts = corpus(120)
    collection = build_hashed(tmp_path, texts)
    queries = ["fever cough", "chest pain dizzy", "rash"]
    results = vector_store.query(collection, queries, k=6)
    assert [len(hits) for hits in results] == [6, 6, 6]
    assert_matches_brute_force(results, queries, texts, HashedWords(16))


def test_query_breaks_exact_ties_by_id(tmp_path):
    """Each document has an identical twin (the same vector): twins come out together, the
    smaller id first, so a tie at the edge of k cannot change from build to build."""
    texts = corpus(60, seed=3)
    collection = build_hashed(tmp_path, texts + texts)  # d{i} and d{i + 60} are twins
    for hits in vector_store.query(collection, ["fever cough", "rash nausea", "sore throat"], k=7):
        for first, second in zip(hits, hits[1:], strict=False):
            if first["distance"] == second["distance"]:
                assert first["id"] < second["id"]
        assert any(a["text"] == b["text"] for a, b in zip(hits, hits[1:], strict=False))


def test_query_clamps_k_and_returns_metadata(tmp_path):
    texts = corpus(5)
    metadatas = [{"source": f"s{i}", "rank": i} for i in range(5)]
    collection = build_hashed(tmp_path, texts, metadatas=metadatas)
    (hits,) = vector_store.query(collection, ["fever"], k=50)
    assert sorted(hit["id"] for hit in hits) == [f"d{i}" for i in range(5)]
    assert all(hit["source"] == f"s{hit['rank']}" for hit in hits)


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_query_rejects_k_below_one(tmp_path, k):
    collection = build_hashed(tmp_path, corpus(4))
    with pytest.raises(PrivleakError, match="k must be an integer >= 1"):
        vector_store.query(collection, ["fever"], k=k)


def test_rebuild_replaces_the_collection_and_is_deterministic(tmp_path):
    first = vector_store.query(build_hashed(tmp_path, corpus(40, seed=1)), ["cough"], k=5)
    build_hashed(tmp_path, corpus(30, seed=2))
    SharedSystemClient.clear_system_cache()
    collection = build_hashed(tmp_path, corpus(40, seed=1))
    assert collection.count() == 40
    assert vector_store.query(collection, ["cough"], k=5) == first


def test_reopen_rebuilds_the_embedding_function_from_its_config(tmp_path):
    texts = corpus(30)
    build_hashed(tmp_path, texts, dimension=16)
    SharedSystemClient.clear_system_cache()
    collection = vector_store.open_collection(tmp_path, "docs", "hashed-16", 16, batch_size=3)
    assert collection.configuration_json["hnsw"]["space"] == "l2"
    assert collection._embedding_function.get_config() == {
        "embedder": "hashed-16",
        "device": "cpu",
        "batch_size": 3,
    }
    results = vector_store.query(collection, ["joint swelling"], k=4)
    assert_matches_brute_force(results, ["joint swelling"], texts, HashedWords(16))


@pytest.mark.parametrize(
    ("where", "embedder", "dimension", "message"),
    [
        ("missing", "hashed-16", 16, r"folder .* does not exist"),
        (
            "other",
            "hashed-16",
            16,
            r"collection 'other' .* does not exist; collections there: docs",
        ),
        ("docs", "hashed-32", 16, r"embedded with 'hashed-16', not the requested 'hashed-32'"),
        ("docs", "hashed-16", 384, r"holds 16-dimensional vectors, not the requested 384"),
    ],
)
def test_reopen_mismatch_is_one_line(tmp_path, where, embedder, dimension, message):
    build_hashed(tmp_path / "store", corpus(10))
    path, name = (
        (tmp_path / "nowhere", "docs") if where == "missing" else (tmp_path / "store", where)
    )
    with pytest.raises(PrivleakError, match=message) as error:
        vector_store.open_collection(path, name, embedder, dimension)
    assert "\n" not in str(error.value)


def test_reopen_refuses_a_collection_without_our_embedding_function(tmp_path):
    client = vector_store.persistent_client(tmp_path)
    raw = client.create_collection("raw-vectors", embedding_function=None)
    raw.add(ids=["a"], embeddings=[[0.0, 1.0]], documents=["x"])
    with pytest.raises(PrivleakError, match="embedded by no embedding function"):
        vector_store.open_collection(tmp_path, "raw-vectors", MINILM, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "a"}, "collection name 'a' is not allowed"),
        ({"ids": ["d0", "d0"]}, "duplicate document ids"),
        ({"ids": ["d0"]}, "got 1 ids for 2 texts"),
        ({"metadatas": [{"id": 1}, {}]}, r"metadata keys \['id'\] are reserved"),
        ({"embedding_function": None}, "must be a privleak SentenceEmbedding"),
    ],
)
def test_build_rejects_bad_input(tmp_path, kwargs, message):
    arguments = {
        "name": "docs",
        "ids": ["d0", "d1"],
        "texts": ["fever", "cough"],
        "embedding_function": HashedEmbedding("hashed-8"),
        "metadatas": None,
    } | kwargs
    with pytest.raises(PrivleakError, match=message):
        vector_store.build_collection(tmp_path, **arguments)


def test_minilm_store_persists_and_reopens_offline(tmp_path):
    texts = [
        "I have had a fever and a dry cough for three days.",
        "My knee is swollen after running and hurts when I climb stairs.",
        "A red itchy rash appeared on my arms after gardening.",
        "I feel dizzy when I stand up quickly and sometimes faint.",
        "Sharp chest pain when I breathe deeply, worse at night.",
        "My child has an earache and a mild temperature.",
        "Constant headaches behind the eyes while working at the screen.",
        "Nausea every morning and I cannot keep breakfast down.",
    ]
    function = vector_store.SentenceEmbedding(MINILM, "cpu", batch_size=4)
    ids = [f"d{i}" for i in range(len(texts))]
    vector_store.build_collection(tmp_path, "medical", ids, texts, function)
    SharedSystemClient.clear_system_cache()
    collection = vector_store.open_collection(tmp_path, "medical", MINILM, 384)
    queries = ["skin rash that itches", "pain in my chest"]
    results = vector_store.query(collection, queries, k=3)
    assert [hits[0]["id"] for hits in results] == ["d2", "d4"]
    assert_matches_brute_force(results, queries, texts, function.encoder)


def test_two_builds_of_a_store_export_the_same_bytes(tmp_path):
    texts = corpus(60)
    exports = []
    for build in ("first", "second"):
        collection = build_hashed(tmp_path / build, texts)
        vector_store.export_store(tmp_path / f"{build}-export", {"docs": collection})
        SharedSystemClient.clear_system_cache()
        exports.append(tmp_path / f"{build}-export")
    chroma_files = [sorted(p.name for p in (tmp_path / b).iterdir()) for b in ("first", "second")]
    assert chroma_files[0] != chroma_files[1]  # Chroma's own folders are named at random
    for file in (vector_store.VECTORS_FILE, vector_store.STORE_FILE):
        assert (exports[0] / file).read_bytes() == (exports[1] / file).read_bytes()


def test_a_restored_store_answers_as_the_built_one(tmp_path):
    texts = corpus(80, seed=3)
    built = build_hashed(tmp_path / "built", texts)
    queries = ["fever cough", "joint swelling", "sore throat rash"]

    # Every document for every query: ties may come in another order, distances may not differ.
    def distances(collection):
        hits = vector_store.query(collection, queries, k=len(texts))
        return [{hit["id"]: round(hit["distance"], 5) for hit in row} for row in hits]

    expected = distances(built)
    vector_store.export_store(tmp_path / "export", {"docs": built})
    SharedSystemClient.clear_system_cache()
    restored = vector_store.restore_store(tmp_path / "export", tmp_path / "restored")
    assert distances(restored["docs"]) == expected
    SharedSystemClient.clear_system_cache()
    reopened = vector_store.open_collection(tmp_path / "restored", "docs", "hashed-16", 16)
    assert reopened.count() == len(texts)


def test_restore_without_an_export_is_one_line(tmp_path):
    with pytest.raises(PrivleakError, match="has no vectors.parquet; run stage s2_index"):
        vector_store.restore_store(tmp_path, tmp_path / "store")


def test_rerank_sorts_descending_and_keeps_top_n():
    candidates = [{"id": f"d{i}", "text": text} for i, text in enumerate("a bb ccc dddd".split())]

    def by_length(query, texts):
        return np.array([len(text) for text in texts], dtype=float)

    top = vector_store.rerank("q", candidates, top_n=2, scorer=by_length)
    # The best-scoring candidates first (an ascending sort would keep "a" and "bb").
    assert [c["id"] for c in top] == ["d3", "d2"]
    assert [c["rerank_score"] for c in top] == [4.0, 3.0]
    every = vector_store.rerank("q", candidates, top_n=10, scorer=by_length)
    assert [c["id"] for c in every] == ["d3", "d2", "d1", "d0"]
    with pytest.raises(PrivleakError, match="top_n must be an integer >= 1"):
        vector_store.rerank("q", candidates, top_n=0, scorer=by_length)


def test_tfidf_scorer_prefers_the_matching_document():
    texts = ["fever and cough", "knee swelling after running", "itchy rash on arms"]
    scorer = vector_store.make_scorer("tfidf", texts)
    candidates = [{"id": str(i), "text": text} for i, text in enumerate(texts)]
    top = vector_store.rerank("rash on my arms", candidates, top_n=3, scorer=scorer)
    assert top[0]["id"] == "2"
    assert top[0]["rerank_score"] > top[1]["rerank_score"] >= top[2]["rerank_score"] >= 0.0


def test_cross_encoder_scorer_loads_on_first_call(monkeypatch):
    import sentence_transformers

    loaded = []

    class FakeCrossEncoder:
        def __init__(self, model_id, device):
            loaded.append((model_id, device))

        def predict(self, pairs):
            return [float(len(text)) for _, text in pairs]

    monkeypatch.setattr(sentence_transformers, "CrossEncoder", FakeCrossEncoder)
    scorer = vector_store.make_scorer("BAAI/bge-reranker-large", ["x"], device="cpu")
    assert isinstance(scorer, vector_store.CrossEncoderScorer) and loaded == []
    np.testing.assert_array_equal(scorer("q", ["ab", "abc"]), [2.0, 3.0])
    scorer("q", ["a"])
    assert loaded == [("BAAI/bge-reranker-large", "cpu")]


@pytest.mark.parametrize("spec", ["bm25", "a/b/c", ""])
def test_unknown_reranker_is_one_line(spec):
    with pytest.raises(PrivleakError, match="is unknown; allowed: tfidf"):
        vector_store.make_scorer(spec, ["x"])
