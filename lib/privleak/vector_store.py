"""S2's (PAD) RAG store: a Chroma persistent collection searched by L2 distance, then a reranker.

The paper embeds each document, retrieves k = 6 by L2 distance and reranks them to the top 3 with
the bge-reranker-large cross-encoder. Here:
- `SentenceEmbedding` is a Chroma embedding function over `models.load_embedder`, registered with
  Chroma so a reopened collection rebuilds it from its stored config (embedder name, device, batch
  size) and never downloads anything. Chroma's default (an ONNX MiniLM it downloads) is never used:
  every collection is created and opened with an explicit embedding function.
- `export_store` writes collections as a byte-stable parquet of their vectors and a JSON of their
  settings (Chroma's own files hold random ids and timestamps, so two builds of the same store
  differ); `restore_store` builds a Chroma store from that export without embedding again.
- `rerank` orders candidates by a scorer, best first. The paper profile's scorer wraps a
  sentence-transformers cross-encoder; the embedded profile has no cross-encoder shipped in a
  wheel, so TF-IDF cosine similarity stands in for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import (
    known_embedding_functions,
    register_embedding_function,
)

from privleak.errors import PrivleakError, require
from privleak.models import HUB_ID, MINILM, device_problem, load_embedder
from privleak.retrieval import embed

# Chroma's rule for collection names, checked here so a bad name is one line naming it.
_COLLECTION_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9._-]{1,510})[a-zA-Z0-9]$")
RESERVED_FIELDS = ("id", "text", "distance", "rerank_score")
TFIDF = "tfidf"
VECTORS_FILE = "vectors.parquet"  # export_store's byte-stable form of a store
STORE_FILE = "store.json"

Scorer = Callable[[str, Sequence[str]], np.ndarray]


@register_embedding_function
class SentenceEmbedding(EmbeddingFunction[Documents]):
    """A Chroma embedding function: L2-normalised float32 vectors from a sentence-transformers
    embedder (`models.load_embedder` name or folder), `batch_size` texts per forward. The model
    loads on the first call: Chroma rebuilds the function from its config several times per
    operation, and only embedding needs the weights."""

    def __init__(self, embedder: str = MINILM, device: str = "cpu", batch_size: int = 64):
        require(
            isinstance(batch_size, int) and batch_size >= 1,
            f"embedding batch_size must be an integer >= 1, got {batch_size!r}",
        )
        self.embedder, self.device, self.batch_size = embedder, device, batch_size
        self._model = None

    @staticmethod
    def name() -> str:
        return "privleak_sentence_embedding"

    def get_config(self) -> dict:
        return {"embedder": self.embedder, "device": self.device, "batch_size": self.batch_size}

    @classmethod
    def build_from_config(cls, config: dict) -> SentenceEmbedding:
        return cls(config["embedder"], config["device"], config["batch_size"])

    def load(self):
        """The sentence encoder (anything with sentence-transformers' `encode`)."""
        return load_embedder(self.embedder, device=self.device)

    @property
    def encoder(self):
        """The loaded sentence encoder (loads it on first use)."""
        if self._model is None:
            self._model = self.load()
        return self._model

    def __call__(self, input: Documents) -> Embeddings:
        return list(embed(self.encoder, input, self.batch_size))


def persistent_client(path: str | Path):
    """Chroma's persistent client on the store folder `path`, telemetry off (every client of a
    folder in one process must use the same settings)."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _check_name(name: str) -> None:
    require(
        isinstance(name, str) and _COLLECTION_NAME.match(name) is not None,
        f"collection name {name!r} is not allowed; use 3-512 characters from [a-zA-Z0-9._-], "
        "starting and ending with a letter or digit",
    )


def build_collection(
    path: str | Path,
    name: str,
    ids: Sequence[str],
    texts: Sequence[str],
    embedding_function: SentenceEmbedding,
    metadatas: Sequence[dict] | None = None,
):
    """A fresh L2-distance collection `name` in the Chroma store at `path` (created if missing;
    a collection of that name there is replaced) holding the N texts under their N unique ids,
    with optional per-document metadata (str, int, float or bool values). Documents are added in
    their given order, in batches of Chroma's largest batch size."""
    _check_name(name)
    require(
        isinstance(embedding_function, SentenceEmbedding),
        "embedding_function must be a privleak SentenceEmbedding (Chroma's default would "
        f"download a model), got {type(embedding_function).__name__}",
    )
    ids, texts = [str(i) for i in ids], list(texts)
    require(len(ids) >= 1, f"collection '{name}' needs at least one document")
    require(
        len(ids) == len(texts), f"got {len(ids)} ids for {len(texts)} texts in collection '{name}'"
    )
    require(len(set(ids)) == len(ids), f"collection '{name}' has duplicate document ids")
    if metadatas is not None:
        metadatas = list(metadatas)
        require(
            len(metadatas) == len(ids),
            f"got {len(metadatas)} metadatas for {len(ids)} documents in collection '{name}'",
        )
        clashes = sorted({key for meta in metadatas for key in meta} & set(RESERVED_FIELDS))
        require(
            not clashes,
            f"metadata keys {clashes} are reserved for query results; reserved: "
            f"{', '.join(RESERVED_FIELDS)}",
        )
    client = persistent_client(path)
    if name in {collection.name for collection in client.list_collections()}:
        client.delete_collection(name)
    collection = client.create_collection(
        name, configuration={"hnsw": {"space": "l2"}}, embedding_function=embedding_function
    )
    step = client.get_max_batch_size()
    for start in range(0, len(ids), step):
        stop = start + step
        collection.add(
            ids=ids[start:stop],
            documents=texts[start:stop],
            # Chroma rejects empty metadata dicts; None means "no metadata" for that document.
            metadatas=None if metadatas is None else [m or None for m in metadatas[start:stop]],
        )
    return collection


def open_collection(
    path: str | Path,
    name: str,
    embedder_name: str,
    dimension: int,
    *,
    device: str | None = None,
    batch_size: int | None = None,
):
    """Collection `name` of the Chroma store at `path`, checked to hold `dimension`-dimensional
    vectors embedded by `embedder_name`; its embedding function is rebuilt from the stored config,
    with `device` / `batch_size` replacing the stored ones when given (they change speed only)."""
    where = f"collection '{name}' at {path}"
    require(Path(path).is_dir(), f"{where}: the folder {path} does not exist; build it first")
    client = persistent_client(path)
    present = {collection.name: collection for collection in client.list_collections()}
    require(
        name in present,
        f"{where} does not exist; collections there: {', '.join(sorted(present)) or 'none'}",
    )
    # Read the raw stored config first: asking Chroma for the collection with a function of a
    # different name fails with a long message of its own.
    stored = present[name].configuration_json.get("embedding_function")
    ours = SentenceEmbedding.name()
    require(
        stored is not None and _is_ours(stored.get("name")),
        f"{where} was embedded by {_describe(stored)}, not by {ours}; rebuild it",
    )
    config = dict(stored["config"])
    require(
        config.get("embedder") == embedder_name,
        f"{where} was embedded with '{config.get('embedder')}', not the requested "
        f"'{embedder_name}'; open it with embedder '{config.get('embedder')}' or rebuild it",
    )
    if device is not None:
        config["device"] = device
    if batch_size is not None:
        config["batch_size"] = batch_size
    function = known_embedding_functions[stored["name"]].build_from_config(config)
    collection = client.get_collection(name, embedding_function=function)
    stored_dimension = _dimension(collection)
    require(
        stored_dimension in (None, dimension),
        f"{where} holds {stored_dimension}-dimensional vectors, not the requested {dimension}; "
        f"open it with dimension {stored_dimension} or rebuild it",
    )
    return collection


def _is_ours(function_name) -> bool:
    registered = known_embedding_functions.get(function_name)
    return isinstance(registered, type) and issubclass(registered, SentenceEmbedding)


def _describe(stored: dict | None) -> str:
    if stored is None:
        return "no embedding function"
    return f"'{stored.get('name', stored.get('type'))}'"


def _dimension(collection) -> int | None:
    sample = collection.get(limit=1, include=["embeddings"])["embeddings"]
    return None if sample is None or len(sample) == 0 else len(sample[0])


def query(collection, texts: Sequence[str], k: int) -> list[list[dict]]:
    """For each of the Q query texts, its k nearest documents, nearest first, as dicts
    {"id", "text", "distance", **metadata}; distance is the squared L2 distance of Chroma's l2
    space (same order as L2). A k above the collection's size is clamped to that size.

    The search is exact: each query is embedded as Chroma embeds it, and its squared L2 distance
    to every stored vector is computed in float64 (ties broken by id). Chroma's own search walks
    an HNSW graph whose build differs from run to run, so at the edge of k two builds of the same
    store returned different neighbours; the exact search is the one it approximates."""
    require(
        isinstance(k, int) and not isinstance(k, bool) and k >= 1,
        f"k must be an integer >= 1, got {k!r}",
    )
    texts = list(texts)
    require(len(texts) >= 1, "give at least one query text")
    stored = collection.get(include=["documents", "embeddings", "metadatas"])
    order = np.argsort(np.asarray(stored["ids"]), kind="stable")  # ties go to the smaller id
    vectors = np.asarray(stored["embeddings"], dtype=np.float64)[order]  # [N, d]
    queries = np.asarray(collection._embed(input=texts, is_query=True), dtype=np.float64)
    out = []
    for vector in queries:  # [d]: one query at a time keeps memory at N x d
        distances = np.sum((vectors - vector) ** 2, axis=1)
        nearest = np.argsort(distances, kind="stable")[:k]
        out.append([
            {"id": stored["ids"][i], "text": stored["documents"][i], "distance": float(d),
             **(stored["metadatas"][i] or {})}
            for i, d in zip(order[nearest], distances[nearest], strict=True)
        ])  # fmt: skip
    return out


def export_store(folder: str | Path, collections: dict) -> None:
    """Write the collections {name: Chroma collection} to `folder` in a portable form that is the
    same bytes whenever the same texts are embedded the same way (Chroma's own files hold random
    ids and timestamps): VECTORS_FILE, one row {collection, id, text, embedding (float32)} per
    document, sorted by collection and id, and STORE_FILE, each collection's distance space and
    embedding-function config. `restore_store` builds a Chroma store from it."""
    frames, setup = [], {}
    for name, collection in sorted(collections.items()):
        stored = collection.get(include=["documents", "embeddings"])
        frames.append(
            pd.DataFrame(
                {
                    "collection": name,
                    "id": stored["ids"],
                    "text": stored["documents"],
                    "embedding": [np.asarray(e, dtype=np.float32) for e in stored["embeddings"]],
                }
            ).sort_values("id", kind="stable")
        )
        setup[name] = {
            "space": collection.configuration_json["hnsw"]["space"],
            "embedding_function": collection.configuration_json["embedding_function"],
        }
    Path(folder).mkdir(parents=True, exist_ok=True)
    pd.concat(frames, ignore_index=True).to_parquet(Path(folder) / VECTORS_FILE, index=False)
    (Path(folder) / STORE_FILE).write_text(json.dumps(setup, indent=2, sort_keys=True) + "\n")


def restore_store(folder: str | Path, path: str | Path) -> dict:
    """The exported store at `folder` as Chroma collections {name: collection} in a persistent
    store at `path`, holding the exported vectors (nothing is embedded again) under each
    collection's stored embedding function, which queries use."""
    for file in (VECTORS_FILE, STORE_FILE):
        require((Path(folder) / file).exists(), f"{folder} has no {file}; run stage s2_index")
    setup = json.loads((Path(folder) / STORE_FILE).read_text())
    vectors = pd.read_parquet(Path(folder) / VECTORS_FILE)
    client = persistent_client(path)
    restored = {}
    for name, rows in vectors.groupby("collection", sort=False):
        stored = setup[name]["embedding_function"]
        require(_is_ours(stored.get("name")), f"collection '{name}': unknown {_describe(stored)}")
        function = known_embedding_functions[stored["name"]].build_from_config(stored["config"])
        if name in {collection.name for collection in client.list_collections()}:
            client.delete_collection(name)
        collection = client.create_collection(
            name, configuration={"hnsw": {"space": setup[name]["space"]}},
            embedding_function=function,
        )  # fmt: skip
        step = client.get_max_batch_size()
        for start in range(0, len(rows), step):
            batch = rows.iloc[start : start + step]
            collection.add(ids=list(batch["id"]), documents=list(batch["text"]),
                           embeddings=np.stack(batch["embedding"].to_numpy()))  # fmt: skip
        restored[name] = collection
    return restored


def rerank(query: str, candidates: Sequence[dict], top_n: int, scorer: Scorer) -> list[dict]:
    """The top_n of the candidates (dicts with "text", e.g. one `query` result list) by the
    scorer's relevance to the query, highest first, each with its "rerank_score" added; ties keep
    the candidates' order."""
    require(
        isinstance(top_n, int) and not isinstance(top_n, bool) and top_n >= 1,
        f"rerank top_n must be an integer >= 1, got {top_n!r}",
    )
    if not candidates:
        return []
    scores = np.asarray(scorer(query, [c["text"] for c in candidates]), dtype=float)
    require(
        scores.shape == (len(candidates),),
        f"the reranker gave {scores.shape} scores for {len(candidates)} candidates",
    )
    order = np.argsort(-scores, kind="stable")[:top_n]
    return [{**candidates[i], "rerank_score": float(scores[i])} for i in order]


class TfidfScorer:
    """Cosine similarity of TF-IDF vectors fitted on the corpus: the embedded profile's stand-in
    for the paper's cross-encoder reranker (no cross-encoder ships in a wheel)."""

    def __init__(self, corpus_texts: Sequence[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        corpus_texts = list(corpus_texts)
        require(len(corpus_texts) >= 1, "the TF-IDF reranker needs at least one corpus text")
        self.vectorizer = TfidfVectorizer().fit(corpus_texts)

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """[N] cosine similarity in [0, 1] of the query and each text (rows are L2-normalised)."""
        vectors = self.vectorizer.transform([query, *texts])
        return (vectors[1:] @ vectors[0].T).toarray().ravel()


class CrossEncoderScorer:
    """A sentence-transformers cross-encoder's relevance score of (query, text) pairs (paper:
    BAAI/bge-reranker-large). The model loads on the first call."""

    def __init__(self, model_id: str, device: str = "cpu"):
        problem = device_problem(device)
        require(problem is None, f"reranker device {device!r}: {problem}")
        self.model_id, self.device = model_id, device
        self._model = None

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """[N] the cross-encoder's score of each (query, text), higher is more relevant."""
        if self._model is None:
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(self.model_id, device=self.device)
        return np.asarray(self._model.predict([(query, text) for text in texts]), dtype=float)


def make_scorer(spec: str, corpus_texts: Sequence[str], device: str = "cpu") -> Scorer:
    """ "tfidf" -> TfidfScorer over corpus_texts; a local folder or hub id (org/name) ->
    CrossEncoderScorer on device."""
    if spec == TFIDF:
        return TfidfScorer(corpus_texts)
    if isinstance(spec, str) and spec and (Path(spec).is_dir() or HUB_ID.match(spec)):
        return CrossEncoderScorer(spec, device)
    raise PrivleakError(
        f"reranker {spec!r} is unknown; allowed: {TFIDF}, a cross-encoder folder or hub id "
        "(org/name)"
    )
